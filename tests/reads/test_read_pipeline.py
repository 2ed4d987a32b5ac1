"""Reads through ``virtualizarr_fill.ManifestCodecPipeline``.

Every value read with the pipeline must equal the native reader's (tifffile, h5py,
GDAL), bit for bit and in the same data type, for every layout the parsers produce:
strips and tiles, planar and chunky, edge chunks under TruncateCodec and CropCodec,
rectilinear grids, missing chunks, inlined chunks, big-endian storage, partial and
fancy selections, local stores with and without a prefix, S3 on loopback, xarray. Reads
it does not handle (other stores, writes, sharding) must behave exactly as with zarr's
own pipeline.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestStore
from zarr.codecs import BloscCodec, ShardingCodec
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.errors import ChunkNotFoundError
from zarr.storage import MemoryStore

import virtualizarr_fill
from fixtures import make_tiff_fixtures
from fixtures.servers import S3Server
from tests._manifest_builders import (
    concat_fixtures,
    concatenate,
    hdf5_manifest_array,
    manifest_store,
    native_hdf5,
    native_tiff,
    stack,
    tiff_manifest_array,
)
from tests._native_references import tifffile_reference
from virtualizarr_fill import HDF5Parser, StoreReadError, TIFFParser
from virtualizarr_fill.reads import PIPELINE_PATH, bytes_decoders, planning, raw_layout, scheduling
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline

__all__ = ["concat_fixtures"]

TIFF_FIXTURES = [
    "strip_padded_planar_zstd",  # regular grid, truncate codec, planar
    "strip_short_rgb_chunky_deflate",  # rectilinear grid (short last strip), transpose
    "strip_short_planar_lzw",
    "tiles_sparse_deflate",  # missing tiles read as the fill value
    "tiles_planar_none",  # uncompressed: the raw decode
    "predictor2_tiles_padded_strip_be",  # big-endian, predictor codec
    "strip_rps10_150rows_deflate",
    "packed_4bit_strips",  # packed samples
    "jpeg_ycbcr_strips_short",  # an image codec as the array->bytes codec
    # image codecs, each band-interleaved (a transpose after it) or not
    "jpeg_gray_tiles",
    "gdal_jpeg_ycbcr_tables",
    "webp_rgba_tiles",
    "webp_strips_short",
    "png_tiles",
    "jpeg2000_tiles",
    "lerc_tiles",
    "gdal_lerc_deflate",  # a bytes->bytes codec after the image codec
    # packed samples: bytes->bytes codecs before an array->bytes codec other than bytes
    "gdal_nbits4_deflate_strips",
    "gdal_nbits12_lzw_strips",
    "packed_1bit_padded_strip",
    "packed_12bit",
]

# Representative corpus files: strips (uncompressed, deflate), tiles, overviews, many
# small HDF5 chunks, filters (shuffle + zlib, blosc, bitshuffle), compact datasets.
CORPUS_TIFF = [
    "rasterio+rasterio/RGB.byte.tif",
    "rasterio+rasterio/RGBA.uint16.tif",
    "cogeotiff+rio-tiler/cog_uint8_rgba.tif",
    "image-rs+image-tiff/planar-rgb-u8.tif",
]
CORPUS_HDF5 = [
    "NCAS-CMS+pyfive/tests/data/noy_AERmonZ_UKESM1-0-LL_piControl_r1i1p1f2_gnz_200001-200012.nc",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_chunked_datasets_latest.hdf5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_compact_datasets_earliest.hdf5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/bitshuffle_datasets.hdf5",
    # LZF (chunks the filter skipped inlined), checksums, shuffle of tiny chunks
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_compressed_chunked_datasets_earliest.hdf5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/fletcher32_datasets_latest.hdf5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_byteshuffle_compressed_datasets_earliest.hdf5",
    "HDFGroup+hdf5_plugins/h5ex_d_blosc.h5",
]


@pytest.fixture
def manifest_pipeline() -> Iterator[None]:
    with virtualizarr_fill.use_manifest_pipeline():
        yield


def _refuse_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read handed to zarr's BatchedCodecPipeline")

    monkeypatch.setattr(BatchedCodecPipeline, "read", refuse)


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any read that the pipeline hands to zarr's own pipeline."""
    _refuse_fallback(monkeypatch)


@pytest.fixture(scope="module")
def tiff_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("read_pipeline_tiff")
    return make_tiff_fixtures.write_fixtures(directory, TIFF_FIXTURES)


@pytest.fixture(scope="module")
def hdf5_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Padded edge chunks, unallocated chunks, big-endian contiguous, scalar, compact."""
    path = tmp_path_factory.mktemp("read_pipeline_hdf5") / "data.h5"
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "chunked",
            data=rng.integers(-1000, 1000, (23, 17, 3), dtype="<i4"),
            chunks=(5, 4, 2),
            compression="gzip",
            shuffle=True,
        )
        sparse = f.create_dataset(
            "sparse", shape=(10, 10), chunks=(5, 5), dtype="<f8", fillvalue=-7.5
        )
        sparse[:5, :5] = rng.random((5, 5))
        sparse[5:, 5:] = rng.random((5, 5))
        f.create_dataset("contiguous", data=rng.random((7, 3)).astype(">f4"))
        f.create_dataset("scalar", data=np.int16(-3))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)  # the bytes live in the object header
        space = h5py.h5s.create_simple((3, 5))
        h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I16BE, space, dcpl=dcpl)
        f["compact"][...] = np.arange(15).reshape(3, 5)
        f.create_dataset("big_chunked", data=rng.random((40, 30)).astype(">f8"), chunks=(7, 8))
    return path


def _parse(parser: Any, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store: ManifestStore = parser(url, registry)
    return store


def _local(parser: Any, path: Path) -> ManifestStore:
    return _parse(parser, f"file://{path}", ObjectStoreRegistry({"file://": LocalStore()}))


def _tiff_reference(path: Path) -> np.ndarray:
    """The written values where tifffile cannot decode the fixture, else tifffile's."""
    truth = make_tiff_fixtures.TRUTHS.get(path.stem)
    return truth() if truth is not None else tifffile_reference(path)


def _h5(path: Path, name: str) -> np.ndarray:
    with h5py.File(path) as f:
        value = np.asarray(f[name][()])
    return value.astype(value.dtype.newbyteorder("="))


def _assert_same(got: Any, expected: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.dtype == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(got, expected, strict=False)


# --------------------------------------------------------------------------- the pipeline


def test_selected_by_config_and_built_per_array(hdf5_file: Path) -> None:
    store = _local(HDF5Parser(), hdf5_file)
    with virtualizarr_fill.use_manifest_pipeline():
        assert zarr.config.get("codec_pipeline.path") == PIPELINE_PATH
        array = zarr.open_array(store, path="chunked", mode="r")
    pipeline = array.async_array.codec_pipeline
    assert isinstance(pipeline, ManifestCodecPipeline)
    assert [type(c).__name__ for c in pipeline] == [type(c).__name__ for c in pipeline.inner]


@pytest.mark.parametrize("name", TIFF_FIXTURES)
def test_tiff_fixture_reads_equal_tifffile(
    manifest_pipeline: None, no_fallback: None, tiff_files: dict[str, Path], name: str
) -> None:
    path = tiff_files[name]
    store = _local(TIFFParser(), path)
    array = zarr.open_array(store, path="band_data", mode="r")
    expected = _tiff_reference(path)
    np.testing.assert_array_equal(array[...], expected, strict=True)
    inside = tuple(slice(1, None) for _ in range(expected.ndim))  # from inside a chunk
    np.testing.assert_array_equal(array[inside], expected[inside], strict=True)


@pytest.mark.parametrize(
    "name", ["chunked", "sparse", "contiguous", "scalar", "compact", "big_chunked"]
)
def test_hdf5_reads_equal_h5py(
    manifest_pipeline: None, no_fallback: None, hdf5_file: Path, name: str
) -> None:
    store = _local(HDF5Parser(), hdf5_file)
    _assert_same(zarr.open_array(store, path=name, mode="r")[...], _h5(hdf5_file, name))


@pytest.mark.parametrize("few", [0, 10**6], ids=["numpy-plan", "entry-plan"])
def test_both_plans(
    manifest_pipeline: None,
    no_fallback: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
    tiff_files: dict[str, Path],
    few: int,
) -> None:
    """Reads of few chunks are planned entry by entry, others with numpy: same values."""
    monkeypatch.setattr(planning, "FEW_CHUNKS", few)
    store = _local(HDF5Parser(), hdf5_file)
    for name in ("chunked", "sparse", "scalar", "compact", "big_chunked"):
        _assert_same(zarr.open_array(store, path=name, mode="r")[...], _h5(hdf5_file, name))
    path = tiff_files["tiles_sparse_deflate"]
    values = zarr.open_array(_local(TIFFParser(), path), path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(path), strict=True)


def test_missing_chunks_report_missing(manifest_pipeline: None, hdf5_file: Path) -> None:
    """zarr raises for missing chunks when told to: the pipeline reports them as missing."""
    store = _local(HDF5Parser(), hdf5_file)
    array = zarr.open_array(store, path="sparse", mode="r")
    np.testing.assert_array_equal(array[:5, :5], _h5(hdf5_file, "sparse")[:5, :5])
    with zarr.config.set({"array.read_missing_chunks": False}):
        strict = zarr.open_array(store, path="sparse", mode="r")
        with pytest.raises(ChunkNotFoundError, match="2 chunk"):
            strict[...]


SELECTIONS: list[Any] = [
    (slice(3, 19), slice(None), slice(None)),
    (slice(None, None, 3), slice(1, 16, 5), 1),
    (7, slice(None), 0),  # integer indices drop axes
    (-1, -2, slice(None)),
    (Ellipsis, 2),
]


@pytest.mark.parametrize("selection", SELECTIONS, ids=range(len(SELECTIONS)))
def test_partial_selections(
    manifest_pipeline: None, no_fallback: None, hdf5_file: Path, selection: Any
) -> None:
    store = _local(HDF5Parser(), hdf5_file)
    array = zarr.open_array(store, path="chunked", mode="r")
    expected = _h5(hdf5_file, "chunked")
    _assert_same(array[selection], np.asarray(expected[selection]))


def test_orthogonal_and_point_selections(
    manifest_pipeline: None, no_fallback: None, tiff_files: dict[str, Path]
) -> None:
    path = tiff_files["strip_short_rgb_chunky_deflate"]
    array = zarr.open_array(_local(TIFFParser(), path), path="band_data", mode="r")
    expected = _tiff_reference(path)
    rows, cols = np.array([0, 5, 17, expected.shape[1] - 1]), np.array([1, 2, 3, 0])
    np.testing.assert_array_equal(
        array.oindex[[0, 2], rows, :], expected[[0, 2]][:, rows, :], strict=True
    )
    np.testing.assert_array_equal(
        array.vindex[np.array([0, 1, 2, 1]), rows, cols], expected[[0, 1, 2, 1], rows, cols]
    )


def test_store_with_a_prefix(
    manifest_pipeline: None, no_fallback: None, tiff_files: dict[str, Path]
) -> None:
    """A store rooted at the file's directory: the path inside it drops the prefix."""
    path = tiff_files["tiles_sparse_deflate"]
    registry = ObjectStoreRegistry({f"file://{path.parent}": LocalStore(prefix=path.parent)})
    store = _parse(TIFFParser(), f"file://{path}", registry)
    values = zarr.open_array(store, path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(path), strict=True)


def test_s3_on_loopback(
    manifest_pipeline: None,
    no_fallback: None,
    s3_server: S3Server,
    tiff_files: dict[str, Path],
    hdf5_file: Path,
) -> None:
    bucket = "read-pipeline"
    s3_server.create_bucket(bucket)
    tiff = tiff_files["predictor2_tiles_padded_strip_be"]
    s3_server.upload(bucket, "data/pred2.tif", tiff)
    s3_server.upload(bucket, "data/data.h5", hdf5_file)
    registry = ObjectStoreRegistry({f"s3://{bucket}": s3_server.store(bucket)})
    store = _parse(TIFFParser(), f"s3://{bucket}/data/pred2.tif", registry)
    values = zarr.open_array(store, path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(tiff), strict=True)
    store = _parse(HDF5Parser(), f"s3://{bucket}/data/data.h5", registry)
    for name in ("chunked", "sparse"):
        _assert_same(zarr.open_array(store, path=name, mode="r")[...], _h5(hdf5_file, name))


@pytest.mark.parametrize("compression", [None, "zlib"])
@pytest.mark.parametrize("threaded", [False, True], ids=["event_loop", "threads"])
def test_file_shortened_after_parsing(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    threaded: bool,
    compression: str | None,
) -> None:
    """A chunk that is no longer in its file is a StoreReadError naming the file, whatever
    obstore raises (its errors, or a panic, which is not an ``Exception``), as zarr's own
    read through the parsers' store reports it."""
    if threaded:
        monkeypatch.setattr(scheduling, "THREADED_BYTES", 1)
        monkeypatch.setattr(planning, "PIECE_BYTES", 300)
    path = tmp_path / "scene.tif"
    values = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    tifffile.imwrite(path, values, rowsperstrip=8, compression=compression)
    store = _local(TIFFParser(), path)
    path.write_bytes(path.read_bytes()[:2000])  # the last strips are gone
    with virtualizarr_fill.use_manifest_pipeline(), pytest.raises(StoreReadError) as raised:
        zarr.open_group(store, mode="r")["band_data"][...]
    assert f"file://{path}" in str(raised.value)


def test_threaded_pieces(
    manifest_pipeline: None,
    no_fallback: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
    tiff_files: dict[str, Path],
) -> None:
    """Large reads are fetched and decoded in worker threads, piece by piece."""
    monkeypatch.setattr(scheduling, "THREADED_BYTES", 1)
    monkeypatch.setattr(planning, "PIECE_BYTES", 300)
    store = _local(HDF5Parser(), hdf5_file)
    for name in ("chunked", "sparse", "compact", "big_chunked"):
        _assert_same(zarr.open_array(store, path=name, mode="r")[...], _h5(hdf5_file, name))
    path = tiff_files["strip_short_rgb_chunky_deflate"]
    values = zarr.open_array(_local(TIFFParser(), path), path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(path), strict=True)


# ------------------------------------------------------------- concatenated virtual arrays


def _read(marr: Any) -> np.ndarray:
    return np.asarray(zarr.open_array(manifest_store({"a": marr}), path="a", mode="r")[...])


@pytest.mark.parametrize("threaded", [False, True])
def test_concatenated_rectilinear_truncate_and_crop(
    manifest_pipeline: None,
    no_fallback: None,
    monkeypatch: pytest.MonkeyPatch,
    concat_fixtures: dict[str, Path],
    threaded: bool,
) -> None:
    """Chunks from several files, edge chunks under TruncateCodec and CropCodec."""
    if threaded:
        monkeypatch.setattr(scheduling, "THREADED_BYTES", 1)
        monkeypatch.setattr(planning, "PIECE_BYTES", 2000)
    strips = ["strip_short_zlib_0", "strip_padded_zlib_1", "strip_short_zlib_2"]
    arrays = [tiff_manifest_array(concat_fixtures[n]) for n in strips]
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in strips])
    np.testing.assert_array_equal(_read(concatenate(arrays, axis=0)), expected)

    tiles = [concat_fixtures[f"tiled_{k}"] for k in range(2)]
    along_x = concatenate([tiff_manifest_array(p) for p in tiles], axis=1)
    expected = np.concatenate([native_tiff(p) for p in tiles], axis=1)
    np.testing.assert_array_equal(_read(along_x), expected)

    paths = [concat_fixtures[f"chunked_gzip_{k}"] for k in range(3)]
    result = concatenate([hdf5_manifest_array(p) for p in paths], axis=2)
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=2)
    np.testing.assert_array_equal(_read(result), expected)

    paths = [concat_fixtures[f"chunked_fill_{k}"] for k in range(2)]
    stacked = stack([hdf5_manifest_array(p) for p in paths], axis=2)
    np.testing.assert_array_equal(_read(stacked), np.stack([native_hdf5(p) for p in paths], 2))


# --------------------------------------------------------------------------- xarray


def test_xarray_open_zarr_equals_zarrs_pipeline_and_h5py(
    hdf5_file: Path, tiff_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _local(HDF5Parser(), hdf5_file)
    reference = xr.open_zarr(store, consolidated=False, zarr_format=3).load()
    _refuse_fallback(monkeypatch)
    with virtualizarr_fill.use_manifest_pipeline():
        ours = xr.open_zarr(store, consolidated=False, zarr_format=3).load()
    xr.testing.assert_identical(ours, reference)
    for name in ("chunked", "contiguous", "compact"):
        _assert_same(ours[name].values, _h5(hdf5_file, name))

    path = tiff_files["strip_short_rgb_chunky_deflate"]
    with virtualizarr_fill.use_manifest_pipeline():
        ds = xr.open_zarr(_local(TIFFParser(), path), consolidated=False, zarr_format=3)
        np.testing.assert_array_equal(ds["band_data"].values, _tiff_reference(path), strict=True)


# --------------------------------------------------------------------------- the corpus


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS_TIFF)
def test_corpus_tiff(
    manifest_pipeline: None, no_fallback: None, corpus_dir: Path, relative: str
) -> None:
    path = corpus_dir / relative
    store = _local(TIFFParser(layout="tree"), path)  # every image, overviews included
    values = zarr.open_array(store, path="image/band_data", mode="r")[...]
    np.testing.assert_array_equal(values, tifffile_reference(path), strict=True)
    with tifffile.TiffFile(path) as tif:
        overviews = len(tif.pages) - 1
    group = zarr.open_group(store, mode="r")
    levels = [level for level in range(1, overviews + 1) if f"overview_{level}" in group]
    for level in levels:
        values = group[f"overview_{level}/band_data"][...]
        np.testing.assert_array_equal(values, tifffile_reference(path, level), strict=True)
    assert len(levels) == overviews


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS_HDF5)
def test_corpus_hdf5(
    manifest_pipeline: None, no_fallback: None, corpus_dir: Path, relative: str
) -> None:
    path = corpus_dir / relative
    group = zarr.open_group(_local(HDF5Parser(), path), mode="r")
    compared = 0
    with h5py.File(path) as f:
        for name in _array_paths(group):
            dataset = f.get(name)
            if not isinstance(dataset, h5py.Dataset) or dataset.dtype.kind not in "biufc":
                continue
            expected = np.asarray(dataset[()])
            _assert_same(group[name][...], expected.astype(expected.dtype.newbyteorder("=")))
            compared += 1
    assert compared


def _array_paths(group: Any, prefix: str = "") -> list[str]:
    paths = [f"{prefix}{name}" for name, _ in group.arrays()]
    for name, child in group.groups():
        paths += _array_paths(child, f"{prefix}{name}/")
    return paths


# --------------------------------------------------------------------------- fallbacks


def test_other_stores_writes_and_sharding_go_to_zarrs_pipeline(manifest_pipeline: None) -> None:
    data = np.arange(24 * 10, dtype="<f4").reshape(24, 10)
    store = MemoryStore()
    plain = zarr.create_array(store, name="plain", shape=data.shape, chunks=(5, 4), dtype="f4")
    plain[...] = data
    plain[2:7, 3] = -1
    data[2:7, 3] = -1
    np.testing.assert_array_equal(plain[...], data)
    sharded = zarr.create_array(
        store,
        name="sharded",
        shape=data.shape,
        dtype="f4",
        chunks=(6, 5),
        shards=(12, 10),
        compressors=BloscCodec(),
    )
    assert isinstance(sharded.async_array.codec_pipeline, ManifestCodecPipeline)
    assert any(isinstance(c, ShardingCodec) for c in sharded.async_array.codec_pipeline)
    sharded[...] = data
    np.testing.assert_array_equal(sharded[3:20, 1:9], data[3:20, 1:9])


# --------------------------------------------------------------------------- zlib streams


def test_zlib_streams_inflate_to_the_codecs_bytes() -> None:
    """libdeflate stands in for numcodecs' zlib only where it yields the same bytes; a
    stream it refuses (trailing bytes after the stream, a wrong size) goes to the codec."""
    from zarr.codecs.numcodecs import Shuffle, Zlib
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.dtype import parse_data_type

    values = np.arange(600, dtype="<i4").reshape(20, 30) * 7919
    raw = values.tobytes()
    spec = ArraySpec(
        shape=(20, 30),
        dtype=parse_data_type("<i4", zarr_format=3),
        fill_value=0,
        config=zarr.core.array_spec.ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    shuffle, zlib_codec = Shuffle(elementsize=4), Zlib(level=6)
    shuffled = shuffle._encode_sync(default_buffer_prototype().buffer.from_bytes(raw), spec)
    assert shuffled is not None
    for codecs, stored in [
        ((zlib_codec,), zlib.compress(raw)),
        ((zlib_codec,), zlib.compress(raw) + b"trailing bytes"),
        ((shuffle, zlib_codec), zlib.compress(shuffled.to_bytes())),
    ]:
        got = bytes_decoders.bytes_decoder(codecs)(stored, spec, 20 * 30 * 4)
        assert bytes(got) == raw
    with pytest.raises(zlib.error, match="incomplete or truncated"):
        bytes_decoders.bytes_decoder((zlib_codec,))(zlib.compress(raw)[:-30], spec, 20 * 30 * 4)


def test_transposes_are_undone_by_numpys_inverse_orders() -> None:
    """The axis orders undoing transposes (inverted in Python) are NumPy's argsort of
    each order, in decode order, for every order of up to four axes."""
    import itertools

    from zarr.codecs.transpose import TransposeCodec

    for ndim in range(1, 5):
        orders = list(itertools.permutations(range(ndim)))
        for first, second in itertools.product(orders, repeat=2):
            codecs = [TransposeCodec(order=first), TransposeCodec(order=second)]
            expected = tuple(tuple(np.argsort(o).tolist()) for o in (second, first))
            assert raw_layout.inverse_orders(codecs) == expected
            values = np.arange(math.prod(range(2, ndim + 2))).reshape(range(2, ndim + 2))
            undone = values.transpose(first).transpose(second)
            for order in raw_layout.inverse_orders(codecs):
                undone = undone.transpose(order)
            assert np.array_equal(undone, values)
