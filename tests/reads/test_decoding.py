"""Chunks decoded by the manifest pipeline as their codecs decode them.

The pipeline (``use_manifest_pipeline()``) undoes predictors, HDF5 filters, checksums,
LZW, PackBits and zlib on the stored bytes themselves (``reads/bytes_decoders.py``,
``reads/decoders.py``), never through zarr's codec objects and buffers:
every value must equal tifffile's and h5py's bit for bit, and every decoded byte string
the codecs' own.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestStore
from zarr.core.buffer import default_buffer_prototype
from zarr.core.codec_pipeline import BatchedCodecPipeline

import virtualizarr_fill
from fixtures import make_tiff_fixtures
from tests._manifest_builders import concatenate, manifest_store
from tests._native_references import tifffile_reference
from virtualizarr_fill import HDF5Parser, TIFFParser
from virtualizarr_fill.codecs.tiff_predictor import TiffPredictorCodec
from virtualizarr_fill.reads import bytes_decoders
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline


@pytest.fixture
def manifest_pipeline() -> Iterator[None]:
    with virtualizarr_fill.use_manifest_pipeline():
        yield


@pytest.fixture
def only_this_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any read handed to zarr's own pipeline."""

    async def refuse_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read handed to zarr's pipeline")

    monkeypatch.setattr(BatchedCodecPipeline, "read", refuse_read)


@pytest.fixture(scope="module")
def hdf5_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("decoding") / "small_chunks.h5"
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f.create_dataset("tiny_raw", data=rng.random((41, 31)).astype("<f4"), chunks=(2, 3))
        f.create_dataset(
            "tiny_raw_be", data=rng.integers(-(2**40), 2**40, (30, 20)).astype(">i8"), chunks=(1, 4)
        )
        f.create_dataset(
            "tiny_zlib",
            data=rng.integers(0, 50, (37, 23), dtype="<u2"),
            chunks=(4, 4),
            compression="gzip",
        )
        # Chunks inflating past a kilobyte go to libdeflate, smaller ones to zlib.
        f.create_dataset(
            "tiny_shuffle_zlib",
            data=rng.integers(-3000, 3000, (90, 70), dtype="<i4"),
            chunks=(16, 16),
            compression="gzip",
            shuffle=True,
        )
        sparse = f.create_dataset(
            "tiny_sparse_be", shape=(20, 18), chunks=(3, 3), dtype=">f8", fillvalue=-2.5
        )
        sparse[:6, :9] = rng.random((6, 9))
        sparse[12:, 15:] = rng.random((8, 3))
        f.create_dataset(
            "tiny_3d", data=rng.integers(0, 255, (6, 9, 10), dtype="u1"), chunks=(1, 2, 3)
        )
        f.create_dataset(
            "large_chunks",
            data=rng.random((300, 220)),
            chunks=(100, 100),
            compression="gzip",
            shuffle=True,
        )
        f.create_dataset("scalar", data=np.float32(-1.25))
        # One chunk of plain numbers each: read straight into the output.
        f.create_dataset("contiguous", data=rng.random((25, 17)))
        f.create_dataset("contiguous_be", data=rng.integers(0, 60000, (19, 23)).astype(">u2"))
        # Shuffle after a filter that changes the length: HDF5's own shuffle codec.
        after = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        after.set_chunk((4, 5))
        after.set_fletcher32()
        after.set_shuffle()
        after.set_deflate(1)
        space = h5py.h5s.create_simple((9, 13))
        h5py.h5d.create(f.id, b"shuffle_after_fletcher32", h5py.h5t.STD_I16LE, space, dcpl=after)
        f["shuffle_after_fletcher32"][...] = rng.integers(-900, 900, (9, 13))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)  # the bytes live in the object header: inlined
        space = h5py.h5s.create_simple((4, 6))
        h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I32BE, space, dcpl=dcpl)
        f["compact"][...] = np.arange(24).reshape(4, 6) * 1000
        f.create_dataset(
            "tiny_lzf", data=rng.integers(0, 9, (23, 17), dtype="<i8"), chunks=(3, 4),
            compression="lzf",
        )  # fmt: skip
        f.create_dataset(
            "tiny_fletcher32_shuffle_zlib",
            data=rng.random((19, 21)).astype(">f4"),
            chunks=(4, 5),
            compression="gzip",
            shuffle=True,
            fletcher32=True,
        )
    return path


def _local(parser: Any, path: Path) -> ManifestStore:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store: ManifestStore = parser(
            f"file://{path}", ObjectStoreRegistry({"file://": LocalStore()})
        )
    return store


def _h5(path: Path, name: str) -> np.ndarray:
    with h5py.File(path) as f:
        value = np.asarray(f[name][()])
    return value.astype(value.dtype.newbyteorder("="))


def _tiff(path: Path) -> np.ndarray:
    truth = make_tiff_fixtures.TRUTHS.get(path.stem)
    return truth() if truth is not None else tifffile_reference(path)


def _same(got: Any, expected: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.dtype == expected.dtype.newbyteorder("=")
    assert got.shape == expected.shape
    assert got.tobytes() == np.ascontiguousarray(expected, dtype=got.dtype).tobytes()


#: Predictor chains: undone by the stored-bytes reads, never by zarr's codec objects.
PREDICTOR_FIXTURES = [
    "predictor2_tiles_padded_strip_be",  # truncate codec (padded strip), pixel-interleaved
    "predictor2_sparse_short_be_u2_lzw",  # short last strip, a missing strip, big-endian
    "predictor3_sparse_short_rgb_f4_zlib",  # the same, floating point, pixel-interleaved
    "predictor3_padded_strip_le",
    "predictor2_int8_be_separate",
    "predictor2_uint64_le_contig",
    "predictor3_float16_be_separate",
    "predictor3_float64_be_single",
]


@pytest.fixture(scope="module")
def predictor_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("decoding_predictor")
    return make_tiff_fixtures.write_fixtures(directory, PREDICTOR_FIXTURES)


@pytest.mark.parametrize("name", PREDICTOR_FIXTURES)
def test_predictors_undone_on_stored_bytes(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    predictor_files: dict[str, Path],
    name: str,
) -> None:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("predictor undone by zarr's codec chain")

    monkeypatch.setattr(TiffPredictorCodec, "_decode_sync", refused)
    path = predictor_files[name]
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    assert any(isinstance(codec, TiffPredictorCodec) for codec in array.metadata.codecs)
    expected = _tiff(path)
    np.testing.assert_array_equal(array[...], expected, strict=True)
    for selection in [
        tuple(slice(1, None) for _ in range(expected.ndim)),  # every strip, from inside
        (slice(None), slice(9, 20)),  # a few strips
        (0, -1),  # the last row: the short or padded strip alone
        (slice(None), slice(None, None, 3)),  # steps: strip by strip
    ]:
        np.testing.assert_array_equal(array[selection], expected[selection], strict=True)


def test_hdf5_filters_undone_on_stored_bytes(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
) -> None:
    """LZF, the HDF5 shuffle, numcodecs' shuffle of small chunks and checksums are
    undone on the chunks' bytes, never through zarr's codec objects and buffers; the
    values are h5py's, whole and in part."""
    from zarr.codecs.numcodecs._codecs import _NumcodecsBytesBytesCodec

    from virtualizarr_fill.codecs.hdf5_lzf import HDF5LZFCodec
    from virtualizarr_fill.codecs.hdf5_shuffle import HDF5ShuffleCodec

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("undone by zarr's codec chain")

    store = _local(HDF5Parser(), hdf5_file)  # the parser checks chunks with the codecs
    # zarr's wrappers of numcodecs' shuffle, zlib and checksum share one ``_decode_sync``
    for codec in (HDF5LZFCodec, HDF5ShuffleCodec, _NumcodecsBytesBytesCodec):
        monkeypatch.setattr(codec, "_decode_sync", refused)
    group = zarr.open_group(store, mode="r")
    names = ["tiny_lzf", "tiny_shuffle_zlib", "tiny_fletcher32_shuffle_zlib", "large_chunks"]
    for name in [*names, "shuffle_after_fletcher32"]:
        expected = _h5(hdf5_file, name)
        _same(group[name][...], expected)
        _same(group[name][2:, 1:-1], expected[2:, 1:-1])
    # numcodecs' shuffle undoes chunks above the small-chunk size itself
    assert bytes_decoders.SMALL_SHUFFLE_BYTES < 100 * 100 * 8


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 99, 4096, 65537])
def test_fletcher32_checksums_agree_with_numcodecs(size: int) -> None:
    """libhdf5's Fletcher-32, as the read path checks chunks with it, accepts exactly
    what numcodecs' codec writes (odd lengths included) and rejects a changed byte."""
    from numcodecs import Fletcher32

    from virtualizarr_fill.hdf5 import checksum

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    stored = bytes(Fletcher32().encode(data))
    assert checksum.fletcher32_verified(stored) is True
    flipped = bytearray(stored)
    flipped[size // 2] ^= 0x10
    assert checksum.fletcher32_verified(bytes(flipped)) is False


def test_fletcher32_chunks_checked_by_libhdf5(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
) -> None:
    """Chunks behind HDF5's Fletcher-32 filter are checked by libhdf5's checksum, whether
    read as ``bytes`` (a few ranges of a local file) or as obstore's buffers (many);
    the values are h5py's."""
    from virtualizarr_fill.hdf5 import checksum

    checked: list[bool | None] = []
    original = checksum.fletcher32_verified

    def counting(data: bytes) -> bool | None:
        checked.append(original(data))
        return checked[-1]

    monkeypatch.setattr(checksum, "fletcher32_verified", counting)
    group = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")
    name = "tiny_fletcher32_shuffle_zlib"
    expected = _h5(hdf5_file, name)
    _same(group[name][...], expected)
    assert len(checked) == 5 * 5 and all(checked)  # 19 x 21 in chunks of 4 x 5
    checked.clear()
    _same(group[name][5:7, 3], expected[5:7, 3])
    assert len(checked) == 1 and all(checked)


def test_predictor_rows_of_two_lengths(manifest_pipeline: None, tmp_path: Path) -> None:
    """Strips of two widths side by side: each chunk's predictor rows are its own, so a
    narrower chunk is never undone padded to the wider one's rows."""
    names = ["predictor3_rows_w20", "predictor3_rows_w13"]
    paths = make_tiff_fixtures.write_fixtures(tmp_path, names)
    arrays = [_local(TIFFParser(), paths[n])._group.arrays["band_data"] for n in names]
    along_x = concatenate(arrays, axis=2)
    expected = np.concatenate([_tiff(paths[n]) for n in names], axis=2)
    group = zarr.open_group(manifest_store({"a": along_x}), mode="r")
    np.testing.assert_array_equal(group["a"][...], expected, strict=True)


@pytest.mark.parametrize("compression", ["zlib", "lzw"])
@pytest.mark.parametrize("predictor", [2, 3])
def test_strips_sharing_their_bytes_decoded_each_from_the_file(
    manifest_pipeline: None, tmp_path: Path, compression: str, predictor: int
) -> None:
    """Strips whose offsets name the same bytes (writers store repeated strips once):
    a predictor undone in place in one chunk's decoded buffer must never reach the
    bytes another chunk decodes from. Values as tifffile reads them, twice over."""
    dtype = "u2" if predictor == 2 else "f4"
    values = np.arange(40 * 12, dtype=dtype).reshape(40, 12) * 3
    path = tmp_path / "shared_strips.tif"
    tifffile.imwrite(path, values, rowsperstrip=10, predictor=predictor, compression=compression)
    # Strips 3 and 4 made to name the bytes of strips 1 and 2 (offsets and counts).
    with tifffile.TiffFile(path) as tif:
        tags = [tif.pages[0].tags[name] for name in ("StripOffsets", "StripByteCounts")]
        edits = [
            (
                tag.valueoffset,
                np.dtype(f"{tif.byteorder}u{ {3: 2, 4: 4, 16: 8}[int(tag.dtype)] }"),
                [*tag.value[:2], *tag.value[:2]],
            )
            for tag in tags
        ]
    with open(path, "r+b") as f:
        for at, item, new in edits:
            f.seek(at)
            f.write(np.asarray(new, dtype=item).tobytes())
    expected = _tiff(path)
    np.testing.assert_array_equal(expected[:, 20:], expected[:, :20], strict=True)
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    for _ in range(2):
        np.testing.assert_array_equal(array[...], expected, strict=True)
        np.testing.assert_array_equal(array[:, 5:35], expected[:, 5:35], strict=True)


def test_pipeline_built_as_zarr_builds_its_own(manifest_pipeline: None, hdf5_file: Path) -> None:
    """zarr builds the manifest pipeline for each array it opens as it builds its own
    (same codecs for the same chunk spec); the values are h5py's."""
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        zarrs = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")["tiny_shuffle_zlib"]
    array = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")["tiny_shuffle_zlib"]
    pipeline = array.async_array.codec_pipeline
    assert isinstance(pipeline, ManifestCodecPipeline)
    assert list(pipeline) == list(zarrs.async_array.codec_pipeline)
    _same(array[...], _h5(hdf5_file, "tiny_shuffle_zlib"))


def test_zlib_under_the_truncate_codec_inflates_as_the_codecs_do() -> None:
    """A zlib stream decoded before the truncate codec: libdeflate where it fits the
    chunk, the codec where the padded stream is longer: the codecs' bytes either way."""
    import zlib as zlib_module

    from zarr.codecs.numcodecs import Zlib

    from virtualizarr_fill.codecs import TruncateCodec

    spec = _uint16_chunk_spec((3, 700))
    codecs = (TruncateCodec(), Zlib(level=5))
    decode = bytes_decoders.bytes_decoder(codecs)
    values = np.arange(5 * 700, dtype="<u2").reshape(5, 700)
    nbytes = 3 * 700 * 2
    for stored in (values[:3].tobytes(), values.tobytes(), values[:1].tobytes()):
        stream = zlib_module.compress(stored)
        assert bytes(decode(stream, spec, nbytes)) == _through_codecs(codecs, stream, spec)


def _uint16_chunk_spec(shape: tuple[int, ...]) -> Any:
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.dtype import parse_data_type

    return ArraySpec(
        shape=shape,
        dtype=parse_data_type("<u2", zarr_format=3),
        fill_value=0,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def _through_codecs(codecs: tuple[Any, ...], stream: bytes, spec: Any) -> bytes:
    """``stream`` decoded by the bytes->bytes ``codecs`` themselves, as zarr calls them."""
    buffer = default_buffer_prototype().buffer.from_bytes(stream)
    for codec in reversed(codecs):
        buffer = codec._decode_sync(buffer, spec)
    return bytes(buffer.to_bytes())


@pytest.mark.parametrize("truncated", [True, False])
def test_lzw_and_packbits_decode_as_the_codecs_do(truncated: bool) -> None:
    """LZW and PackBits decoded without zarr's buffers (LZW into a buffer of the chunk's
    size): the codecs' bytes for streams as long as the chunk, shorter and longer; a
    longer LZW stream without the truncate codec still comes out longer than the chunk,
    so the size check refuses it as zarr's own read does."""
    import imagecodecs
    import imagecodecs.zarr as imagecodecs_zarr

    from virtualizarr_fill.codecs import TruncateCodec

    spec = _uint16_chunk_spec((3, 50))
    nbytes = 3 * 50 * 2
    values = (np.arange(5 * 50, dtype="<u2") % 7).reshape(5, 50)
    for compressor, encode in (
        (imagecodecs_zarr.Lzw(), imagecodecs.lzw_encode),
        (imagecodecs_zarr.Packbits(), imagecodecs.packbits_encode),
    ):
        codecs = (TruncateCodec(), compressor) if truncated else (compressor,)
        decode = bytes_decoders.bytes_decoder(codecs)
        assert bytes_decoders.direct_decode(codecs, len(codecs) - 1) is not None  # no buffers
        for stored in (values[:3].tobytes(), values.tobytes(), values[:1].tobytes()):
            stream = encode(stored)
            expected = _through_codecs(codecs, stream, spec)
            got = bytes(decode(stream, spec, nbytes))
            if truncated or len(stored) <= nbytes:
                assert got == expected
            else:
                assert len(got) > nbytes and expected == stored


def test_one_bytes_decoder_decodes_chunks_of_every_shape_as_the_codecs_do() -> None:
    """A read's decoder binds each codec to a chunk shape once (edge strips are
    shorter): chunks of two shapes, taken in turn, each decode as the codecs do."""
    import imagecodecs
    import imagecodecs.zarr as imagecodecs_zarr

    from virtualizarr_fill.codecs import TruncateCodec

    codecs = (TruncateCodec(), imagecodecs_zarr.Lzw())
    decode = bytes_decoders.bytes_decoder(codecs)
    values = (np.arange(6 * 40, dtype="<u2") % 11).reshape(6, 40)
    whole, edge = _uint16_chunk_spec((4, 40)), _uint16_chunk_spec((2, 40))
    # TIFF edge strips are stored padded to the whole strip: the truncate codec cuts them
    streams = {
        "whole": (imagecodecs.lzw_encode(values[:4].tobytes()), whole),
        "edge": (imagecodecs.lzw_encode(values[4:].tobytes() + bytes(160)), edge),
    }
    for name in ("whole", "whole", "edge", "edge", "whole", "edge"):
        stream, spec = streams[name]
        nbytes = spec.shape[0] * 40 * 2
        got = bytes(decode(stream, spec, nbytes))
        assert len(got) == nbytes
        assert got == _through_codecs(codecs, stream, spec)
