"""zarr's array read and group open for ManifestCodecPipeline reads of ManifestStores
(``virtualizarr_fill.reads.installation`` and the modules it installs).

Every value must equal h5py's / tifffile's bit for bit (and zarr's own read), through
each way the module reads: chunk by chunk into the output, assembled from an array of
whole chunks (joined stored bytes, copied stored bytes, chunks decoded by the codec
chain), in the calling thread and on zarr's event loop, in worker threads, with missing,
inlined and multi-file chunks, rectilinear grids and edge codecs. Reads it does not
handle must go to zarr's own functions and behave exactly as there.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
import zarr
import zarr.api.asynchronous as zarr_async
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestStore
from zarr.core.buffer import default_buffer_prototype
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.errors import ChunkNotFoundError
from zarr.storage import MemoryStore

import virtualizarr_fill
from fixtures import make_tiff_fixtures
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
from virtualizarr_fill import HDF5Parser, TIFFParser
from virtualizarr_fill.codecs.tiff_predictor import TiffPredictorCodec
from virtualizarr_fill.errors import StoreReadError
from virtualizarr_fill.reads import (
    block_reads,
    bytes_decoders,
    decoders,
    deinterleave,
    installation,
    lattice,
    planning,
    scheduling,
    selections,
    spans,
    zarr_opens,
    zarr_originals,
    zarr_selections,
)
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline

__all__ = ["concat_fixtures"]

TIFF_FIXTURES = [
    "strip_padded_planar_zstd",  # regular grid, truncate codec, planar
    "strip_short_rgb_chunky_deflate",  # rectilinear grid (short last strip), transpose
    "strip_short_planar_lzw",  # rectilinear, planar
    "tiles_sparse_deflate",  # missing tiles
    "tiles_planar_none",  # uncompressed: stored bytes viewed directly
    "predictor2_tiles_padded_strip_be",  # big-endian, predictor codec
    "strip_rps10_150rows_deflate",
]

#: Datasets of the generated HDF5 file: many small chunks take the assembled way.
HDF5_NAMES = [
    "tiny_raw",
    "tiny_raw_be",
    "tiny_zlib",
    "tiny_shuffle_zlib",
    "tiny_sparse_be",
    "tiny_3d",
    "large_chunks",
    "scalar",
    "contiguous",
    "contiguous_be",
    "compact",
    "shuffle_after_fletcher32",
    "tiny_lzf",
    "tiny_fletcher32_shuffle_zlib",
]


@pytest.fixture
def manifest_pipeline() -> Iterator[None]:
    with virtualizarr_fill.fast_reads():
        yield


@pytest.fixture
def only_this_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any read or open handed to zarr's own functions or pipeline."""

    async def refuse_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read handed to zarr's pipeline")

    def refuse(name: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> None:
            raise AssertionError(f"handed to zarr's {name}")

        return refused

    monkeypatch.setattr(BatchedCodecPipeline, "read", refuse_read)
    monkeypatch.setattr(zarr_originals, "get_selection", refuse("_get_selection"))
    monkeypatch.setattr(zarr_originals, "get_basic_selection", refuse("get_basic_selection"))
    monkeypatch.setattr(
        zarr_originals, "get_orthogonal_selection", refuse("get_orthogonal_selection")
    )
    monkeypatch.setattr(zarr_originals, "group_getitem", refuse("Group.__getitem__"))


@pytest.fixture(scope="module")
def hdf5_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("zarr_read_path") / "small_chunks.h5"
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


@pytest.fixture(scope="module")
def tiff_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("zarr_read_path_tiff")
    return make_tiff_fixtures.write_fixtures(directory, TIFF_FIXTURES)


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


SELECTIONS: list[Any] = [
    Ellipsis,
    (slice(3, 19), slice(None)),
    (slice(1, None), slice(2, 17)),  # starts inside a chunk
    (7, slice(None)),  # integer indices drop axes
    (slice(None), -1),
    (-2, 5),
    (slice(None, None, 3), slice(1, 16, 5)),  # steps: chunk by chunk
    (slice(5, 5), slice(None)),  # empty
]


@pytest.mark.parametrize("name", HDF5_NAMES)
def test_whole_arrays_equal_h5py(
    manifest_pipeline: None, only_this_module: None, hdf5_file: Path, name: str
) -> None:
    store = _local(HDF5Parser(), hdf5_file)
    _same(zarr.open_group(store, mode="r")[name][...], _h5(hdf5_file, name))


@pytest.mark.parametrize("selection", SELECTIONS, ids=range(len(SELECTIONS)))
@pytest.mark.parametrize(
    "name", ["tiny_raw", "tiny_raw_be", "tiny_shuffle_zlib", "tiny_sparse_be", "contiguous_be"]
)
def test_selections_equal_h5py(
    manifest_pipeline: None, only_this_module: None, hdf5_file: Path, name: str, selection: Any
) -> None:
    array = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")[name]
    _same(array[selection], _h5(hdf5_file, name)[selection])


def test_three_dimensional_selections(
    manifest_pipeline: None, only_this_module: None, hdf5_file: Path
) -> None:
    array = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")["tiny_3d"]
    expected = _h5(hdf5_file, "tiny_3d")
    for selection in [(Ellipsis, 4), (2, slice(3, 8), slice(None)), (slice(1, 5), 0, 9)]:
        _same(array[selection], expected[selection])
    rows = [0, 3, 8]
    _same(array.oindex[[1, 4], rows, :], expected[[1, 4]][:, rows, :])
    _same(array.oindex[:, 2:7, 1], expected[:, 2:7, 1])
    points = (np.array([0, 5, 2]), np.array([8, 0, 4]), np.array([1, 9, 3]))
    _same(array.vindex[points], expected[points])


#: Selections of every kind ``Array.__getitem__`` takes, and whether it reads them as
#: basic selections itself (slices, integers and an ellipsis) or leaves them to zarr's
#: own ``__getitem__``.
GETITEM_SELECTIONS: list[tuple[Any, bool]] = [
    (Ellipsis, True),
    (3, True),
    (-1, True),
    (slice(2, 9), True),
    ((), True),
    ((slice(None), 4), True),  # zarr's own reads a tuple as an orthogonal selection
    ((Ellipsis, slice(1, 30, 4)), True),
    ((2, Ellipsis), True),
    ((np.int64(3), slice(None)), False),  # a NumPy integer
    ([1, 4, 7], False),  # integer lists: orthogonal
    ((slice(None), [0, 2]), False),
    (np.arange(41 * 31).reshape(41, 31) % 3 == 0, False),  # a mask
]


@pytest.mark.parametrize(
    ("selection", "basic"), GETITEM_SELECTIONS, ids=range(len(GETITEM_SELECTIONS))
)
def test_getitem_reads_slices_and_integers_as_basic_selections(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
    selection: Any,
    basic: bool,
) -> None:
    """``array[selection]`` of slices, integers and an ellipsis is read as the basic
    selection it is, without zarr's own ``__getitem__``; every other selection goes to
    zarr's. The values are h5py's either way."""
    left_to_zarr: list[Any] = []
    original = zarr_originals.array_getitem

    def zarrs_getitem(array: Any, selection: Any) -> Any:
        left_to_zarr.append(selection)
        return original(array, selection)

    monkeypatch.setattr(zarr_originals, "array_getitem", zarrs_getitem)
    array = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")["tiny_raw"]
    _same(array[selection], _h5(hdf5_file, "tiny_raw")[selection])
    assert (not left_to_zarr) == basic


@pytest.mark.parametrize(
    "selection",
    [41, -42, (0, 0, 0), (slice(None, None, -1), 0), slice(2, 9, -1)],
    ids=["past-the-end", "before-the-start", "too-many", "negative-step", "negative-step-1d"],
)
def test_getitem_raises_zarrs_errors(
    manifest_pipeline: None, hdf5_file: Path, selection: Any
) -> None:
    """A selection of slices and integers that zarr refuses is refused the same way."""
    array = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")["tiny_raw"]
    with pytest.raises(Exception) as ours:
        array[selection]
    with pytest.raises(Exception) as zarrs:
        zarr_originals.array_getitem(array, selection)
    assert type(ours.value) is type(zarrs.value)
    assert str(ours.value) == str(zarrs.value)


@pytest.mark.parametrize(
    "setting",
    [
        {(block_reads, "JOIN_BYTES"): 1},  # stored bytes copied into one array, not joined
        {(selections, "BLOCK_MIN_CHUNKS"): 10**9},  # chunk by chunk into the output
        {(selections, "BLOCK_CHUNK_BYTES"): 10**9},  # large chunks assembled too
    ],
    ids=["copied", "chunk-by-chunk", "all-assembled"],
)
def test_each_way_reads_the_same(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
    setting: dict[tuple[Any, str], int],
) -> None:
    for (module, attribute), value in setting.items():
        monkeypatch.setattr(module, attribute, value)
    group = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")
    for name in HDF5_NAMES:
        _same(group[name][...], _h5(hdf5_file, name))
        if name not in ("scalar", "compact"):
            _same(group[name][1:, 2:], _h5(hdf5_file, name)[1:, 2:])


@pytest.mark.parametrize("few", [0, 10**6], ids=["numpy-plan", "entry-plan"])
def test_threaded_and_planned_both_ways(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    hdf5_file: Path,
    few: int,
) -> None:
    """Worker threads read pieces (from the calling thread's read and from zarr's loop)."""
    monkeypatch.setattr(scheduling, "THREADED_BYTES", 1)
    monkeypatch.setattr(planning, "PIECE_BYTES", 500)
    monkeypatch.setattr(planning, "FEW_CHUNKS", few)
    store = _local(HDF5Parser(), hdf5_file)
    group = zarr.open_group(store, mode="r")
    for name in HDF5_NAMES:
        _same(group[name][...], _h5(hdf5_file, name))

    async def read_async() -> list[Any]:
        return [
            await (await zarr_async.open_array(store=store, path=name, mode="r")).getitem(...)
            for name in HDF5_NAMES
        ]

    for name, got in zip(HDF5_NAMES, asyncio.run(read_async()), strict=True):
        _same(got, _h5(hdf5_file, name))


@pytest.mark.parametrize("large", ["THREADED_BYTES", "THREADED_DECODED_BYTES"])
@pytest.mark.parametrize("workers", [1, 2, 5])
def test_large_reads_shared_between_the_calling_thread_and_workers(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    tiff_files: dict[str, Path],
    workers: int,
    large: str,
) -> None:
    """A read large enough for threads, stored or decoded, is cut into one piece per
    worker (at most), and the calling thread decodes the first piece itself instead of
    waiting."""
    import threading

    monkeypatch.setattr(scheduling, "THREADED_BYTES", 10**12)
    monkeypatch.setattr(scheduling, "THREADED_DECODED_BYTES", 10**12)
    monkeypatch.setattr(scheduling, large, 1)
    monkeypatch.setattr(scheduling, "SHARED_CHUNK_BYTES", 1)
    monkeypatch.setattr(scheduling, "_thread_pool", None)  # sized for ``workers``
    pieces: list[tuple[int, int]] = []  # (thread, chunks) per piece
    original = scheduling.fetch_and_decode

    def recording(store: Any, piece: Any, batch: Any, decode: Any) -> None:
        count = sum(len(items) for items, _, _ in piece.by_file.values())
        pieces.append((threading.get_ident(), count))
        original(store, piece, batch, decode)

    monkeypatch.setattr(scheduling, "fetch_and_decode", recording)
    path = tiff_files["strip_rps10_150rows_deflate"]  # 15 compressed strips
    try:
        with zarr.config.set({"codec_pipeline.max_workers": workers}):
            array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
            np.testing.assert_array_equal(array[...], _tiff(path), strict=True)
    finally:
        scheduling._forget_pool()
    assert sum(count for _, count in pieces) == 15
    assert len(pieces) == workers
    assert [thread for thread, _ in pieces].count(threading.get_ident()) == 1


def test_reads_of_small_chunks_stay_in_one_thread(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    tiff_files: dict[str, Path],
) -> None:
    """A read that decodes to many bytes in small chunks is not cut among threads (its
    per-chunk work holds the GIL): the calling thread reads it whole."""
    import threading

    monkeypatch.setattr(scheduling, "THREADED_DECODED_BYTES", 1)
    pieces: list[int] = []
    original = scheduling.fetch_and_decode

    def recording(store: Any, piece: Any, batch: Any, decode: Any) -> None:
        pieces.append(threading.get_ident())
        original(store, piece, batch, decode)

    monkeypatch.setattr(scheduling, "fetch_and_decode", recording)
    path = tiff_files["strip_rps10_150rows_deflate"]  # 15 strips of 10 rows
    with zarr.config.set({"codec_pipeline.max_workers": 4}):
        array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
        np.testing.assert_array_equal(array[...], _tiff(path), strict=True)
    assert pieces == [threading.get_ident()]


def test_async_api_reads_on_the_event_loop(
    manifest_pipeline: None, only_this_module: None, hdf5_file: Path
) -> None:
    """``AsyncArray`` reads go through the same selection, awaited on the loop."""
    store = _local(HDF5Parser(), hdf5_file)

    async def read() -> list[Any]:
        got = []
        for name in HDF5_NAMES:
            array = await zarr_async.open_array(store=store, path=name, mode="r")
            got.append(await array.getitem(...))
            if array.ndim == 2:
                got.append(await array.getitem((slice(2, None), 3)))
        return got

    got = iter(asyncio.run(read()))
    for name in HDF5_NAMES:
        expected = _h5(hdf5_file, name)
        _same(next(got), expected)
        if expected.ndim == 2:
            _same(next(got), expected[2:, 3])


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
    directory = tmp_path_factory.mktemp("zarr_read_path_predictor")
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


@pytest.mark.parametrize("name", TIFF_FIXTURES)
def test_tiff_fixtures_equal_tifffile(
    manifest_pipeline: None, only_this_module: None, tiff_files: dict[str, Path], name: str
) -> None:
    path = tiff_files[name]
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    expected = _tiff(path)
    np.testing.assert_array_equal(array[...], expected, strict=True)
    selection = tuple(slice(1, None) for _ in range(expected.ndim))
    np.testing.assert_array_equal(array[selection], expected[selection], strict=True)


#: Uncompressed strips one after the other, more than make a block read.
CONTIGUOUS_STRIPS = [
    "strips_many_short_f8_none",  # short last strip: a prefix of a whole one
    "strips_many_padded_u2_none",  # padded last strip: regular grid
    "strips_many_short_be_i2_none",  # big-endian: swapped in the output
    "strips_many_short_rgb_none",  # pixel-interleaved: transposed, never in place
    "strips_many_short_rgb_be_u2_none",  # and big-endian
]
STRIP_SELECTIONS: list[Any] = [
    Ellipsis,
    (0, slice(0, 64)),  # whole strips from the first
    (0, slice(0, 63)),  # ends inside a strip
    (0, slice(5, 80)),  # starts inside one
    (0, slice(None), slice(3, 30)),  # part of each row: not one run
    (0, 17),  # one row: one strip
    (0, 40, slice(2, 9)),  # part of one row: one run
]


@pytest.fixture
def in_place(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the buffers ranges of local files are read into with one call."""
    sizes: list[int] = []
    original_into, original_at = spans.read_into, spans.read_at

    def counting_into(store: Any, key: str, start: int, buffer: np.ndarray) -> bool:
        sizes.append(buffer.nbytes)
        return original_into(store, key, start, buffer)

    def counting_at(descriptor: int, start: int, buffer: np.ndarray) -> bool:
        sizes.append(buffer.nbytes)
        return original_at(descriptor, start, buffer)

    monkeypatch.setattr(spans, "read_into", counting_into)
    monkeypatch.setattr(spans, "read_at", counting_at)
    return sizes


@pytest.fixture(scope="module")
def contiguous_strips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("contiguous_strips")
    return make_tiff_fixtures.write_fixtures(directory, CONTIGUOUS_STRIPS)


@pytest.mark.parametrize("selection", STRIP_SELECTIONS, ids=range(len(STRIP_SELECTIONS)))
@pytest.mark.parametrize("name", CONTIGUOUS_STRIPS)
def test_contiguous_strips_equal_tifffile(
    manifest_pipeline: None,
    only_this_module: None,
    contiguous_strips: dict[str, Path],
    name: str,
    selection: Any,
    in_place: list[int],
) -> None:
    """Strips laid one after the other are read as one range, straight into the output
    where the selection is one run of their bytes; the values are tifffile's."""
    path = contiguous_strips[name]
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    assert array.cdata_shape[1] >= selections.BLOCK_MIN_CHUNKS
    expected = _tiff(path)
    np.testing.assert_array_equal(array[selection], expected[selection], strict=True)
    one_run = selection != (0, slice(None), slice(3, 30))
    if "rgb" not in name and one_run:
        # the output's own bytes, read from the file
        assert in_place == [expected[selection].nbytes]
    elif "rgb" in name and selection not in STRIP_SELECTIONS[-2:]:
        assert in_place, "one range read, not a range per strip"


def _recorded_splits(monkeypatch: pytest.MonkeyPatch, module: Any, splitter: str) -> list[bool]:
    """Whether OpenCV split each band copy ``module`` makes (any size), with OpenCV or
    (``splitter`` "numpy") as if it were not installed."""
    monkeypatch.setattr(deinterleave, "SPLIT_MIN_BYTES", 0)
    if splitter == "numpy":
        monkeypatch.setattr(deinterleave, "_opencv", lambda: None)
    return _recorded_answers(monkeypatch, module, "copy_planes")


def _recorded_answers(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """What each call of ``module``'s function ``name`` answers, in order."""
    answers: list[Any] = []
    original = getattr(module, name)

    def recording(*args: Any) -> Any:
        answers.append(original(*args))
        return answers[-1]

    monkeypatch.setattr(module, name, recording)
    return answers


@pytest.mark.parametrize("splitter", ["opencv", "numpy"])
@pytest.mark.parametrize("threads", [False, True], ids=["calling-thread", "worker-threads"])
@pytest.mark.parametrize("selection", STRIP_SELECTIONS, ids=range(len(STRIP_SELECTIONS)))
@pytest.mark.parametrize("name", CONTIGUOUS_STRIPS)
def test_contiguous_strips_copied_a_piece_at_a_time(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    contiguous_strips: dict[str, Path],
    name: str,
    selection: Any,
    threads: bool,
    splitter: str,
    in_place: list[int],
) -> None:
    """Strips laid one after the other whose bytes are not the output's (bands
    interleaved, part of each row) are read a piece at a time, each copied into the
    output (bands split by OpenCV where installed, else by NumPy), in the calling
    thread or split among worker threads, synchronously and on zarr's event loop; the
    values are tifffile's."""
    piece = 700
    monkeypatch.setattr(spans, "SPAN_PIECE_BYTES", piece)
    monkeypatch.setattr(scheduling, "THREADED_BYTES", 1 if threads else 10**12)
    split_by_opencv = _recorded_splits(monkeypatch, spans, splitter)  # pieces of 700 B
    path = contiguous_strips[name]
    store = _local(TIFFParser(), path)
    expected = _tiff(path)[selection]
    np.testing.assert_array_equal(
        zarr.open_group(store, mode="r")["band_data"][selection], expected, strict=True
    )
    many_strips = selection in STRIP_SELECTIONS[:5]
    if many_strips and ("rgb" in name or selection == (0, slice(None), slice(3, 30))):
        with tifffile.TiffFile(path) as tif:
            strip = int(tif.pages[0].databytecounts[0])
        assert len(in_place) > 1
        assert max(in_place) <= max(piece, strip)  # a piece holds at least one strip
    # Every band of whole rows of interleaved bands goes to OpenCV; nothing else does
    # (big-endian samples are swapped by NumPy's copy).
    every_band = selection is Ellipsis and name == "strips_many_short_rgb_none"
    assert any(split_by_opencv) == (every_band and splitter == "opencv")

    async def read_async() -> Any:
        array = await zarr_async.open_array(store=store, path="band_data", mode="r")
        return await array.getitem(selection)

    np.testing.assert_array_equal(asyncio.run(read_async()), expected, strict=True)


#: Selections of uncompressed tiles (7 rows of 6, laid one after the other), and whether
#: their tiles are one run of the file (whole rows of tiles from one to another).
TILE_SELECTIONS: list[tuple[Any, bool]] = [
    (Ellipsis, True),
    ((slice(None), slice(16, 80)), True),  # whole rows of tiles
    ((slice(None), slice(20, 75), slice(5, 90)), True),  # inside them
    ((slice(None), slice(None), slice(0, 48)), False),  # three columns of tiles
    ((1, slice(40, 100), slice(16, 90)), False),  # the last tiles of the last rows
]


@pytest.mark.parametrize("splitter", ["opencv", "numpy"])
@pytest.mark.parametrize(("selection", "one_run"), TILE_SELECTIONS, ids=range(len(TILE_SELECTIONS)))
def test_contiguous_tiles_read_as_one_range_where_they_are_one_run(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    selection: Any,
    one_run: bool,
    splitter: str,
) -> None:
    """Uncompressed tiles written one after the other: a selection whose tiles are one
    run of the file reads that range a piece at a time, others tile by tile; the values
    are tifffile's either way."""
    monkeypatch.setattr(spans, "SPAN_PIECE_BYTES", 1000)
    if splitter == "numpy":
        monkeypatch.setattr(deinterleave, "_opencv", lambda: None)
    one_spans = _recorded_answers(monkeypatch, planning, "one_span")
    name = "tiles_many_rgb_none"
    path = make_tiff_fixtures.write_fixtures(tmp_path_factory.mktemp("tiles"), [name])[name]
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    assert array.shape == (3, 100, 90) and array.chunks == (3, 16, 16)
    expected = _tiff(path)
    np.testing.assert_array_equal(array[selection], expected[selection], strict=True)
    assert one_spans, "the lattice of tiles was read by span or not"
    assert any(span is not None for span in one_spans) == one_run


def test_stacked_uncompressed_files_read_a_file_at_a_time(
    manifest_pipeline: None,
    only_this_module: None,
    concat_fixtures: dict[str, Path],
    in_place: list[int],
) -> None:
    """Uncompressed files stacked: their strips are no one run of one file, but each
    file's are one run of it, read straight into the output; a read of every file
    reads strip by strip. The values are tifffile's."""
    paths = [concat_fixtures[f"strip_short_{k}"] for k in range(3)]
    stacked = stack([tiff_manifest_array(path) for path in paths])
    expected = np.stack([native_tiff(path) for path in paths])
    array = zarr.open_group(manifest_store({"a": stacked}), mode="r")["a"]
    np.testing.assert_array_equal(array[...], expected, strict=True)
    in_place.clear()
    for k in range(len(paths)):
        np.testing.assert_array_equal(array[k], expected[k], strict=True)
        np.testing.assert_array_equal(array[k, 30:100], expected[k, 30:100], strict=True)
    assert in_place == [expected[0].nbytes, expected[0, 30:100].nbytes] * len(paths)


#: Selections of a 300x200 RGB image of 128x128 tiles: every tile in part, a window
#: cutting tiles at both ends of both axes, and whole tiles only.
INTERLEAVED_TILE_SELECTIONS = [
    Ellipsis,
    (slice(None), slice(10, 290), slice(5, 160)),
    (slice(None), slice(0, 256), slice(0, 128)),
    (1, slice(130, 250), slice(None)),
]


@pytest.mark.parametrize("splitter", ["opencv", "numpy"])
@pytest.mark.parametrize("at_once", [True, False], ids=["split-at-once", "tile-by-tile"])
@pytest.mark.parametrize(
    "selection", INTERLEAVED_TILE_SELECTIONS, ids=["all", "window", "whole-tiles", "band"]
)
def test_decoded_interleaved_tiles_split_into_their_places(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    selection: Any,
    at_once: bool,
    splitter: str,
) -> None:
    """Deflate tiles of pixel-interleaved RGB: decoded side by side, their bands split
    at once by OpenCV and copied into the output (cut where the selection cuts tiles),
    or (reads too large for that, or without OpenCV) each tile decoded and its bands
    copied into its place, rows with gaps between them, by OpenCV where installed,
    else by NumPy: tifffile's values every way."""
    if not at_once:
        monkeypatch.setattr(selections, "SPLIT_AT_ONCE_BYTES", 0)
    tile_splits = _recorded_splits(monkeypatch, decoders, splitter)  # edge tiles too
    split_at_once = _recorded_answers(monkeypatch, block_reads, "split_planes")
    name = "tiles_few_rgb_deflate"
    path = make_tiff_fixtures.write_fixtures(tmp_path_factory.mktemp("rgb_tiles"), [name])[name]
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    assert array.chunks == (3, 128, 128)
    np.testing.assert_array_equal(array[selection], _tiff(path)[selection], strict=True)
    if (
        isinstance(selection, tuple) and selection[0] == 1
    ):  # one band: nothing to split, at once or tile by tile
        assert not split_at_once and not any(tile_splits)
    elif at_once and splitter == "opencv":
        assert split_at_once == [True] and not tile_splits
    else:
        assert not split_at_once
        assert tile_splits, "each tile's bands copied into the output"
        assert all(tile_splits) == (splitter == "opencv")


def test_file_shortened_after_parsing_fails_the_read(
    manifest_pipeline: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A file cut short after it was parsed: the read fails, never returns part of it."""
    monkeypatch.setattr(spans, "SPAN_PIECE_BYTES", 700)
    path = make_tiff_fixtures.write_fixtures(tmp_path, ["strips_many_short_rgb_none"])[
        "strips_many_short_rgb_none"
    ]
    store = _local(TIFFParser(), path)
    array = zarr.open_group(store, mode="r")["band_data"]
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - 4000)
    with pytest.raises(StoreReadError, match="shorter than when it was parsed") as raised:
        array[...]
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("name", "selection"),
    [
        ("contiguous", Ellipsis),
        ("contiguous", (slice(0, 9), slice(None))),
        ("contiguous", 4),
        ("contiguous", (7, slice(3, 11))),
        ("contiguous", (slice(2, 5), slice(None))),
        ("contiguous_be", Ellipsis),
        ("contiguous_be", (slice(None, 7),)),
    ],
)
def test_one_chunk_of_plain_numbers_read_in_place(
    manifest_pipeline: None,
    only_this_module: None,
    hdf5_file: Path,
    name: str,
    selection: Any,
    in_place: list[int],
) -> None:
    """A contiguous dataset (one chunk) read by whole rows, or part of one, is read into
    the output itself, swapped there when stored big-endian; the values are h5py's."""
    array = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")[name]
    expected = _h5(hdf5_file, name)[selection]
    _same(array[selection], expected)
    assert in_place == [expected.nbytes]


@pytest.mark.parametrize("name", CONTIGUOUS_STRIPS)
def test_contiguous_strips_from_another_store(
    manifest_pipeline: None, contiguous_strips: dict[str, Path], name: str
) -> None:
    """The one range of a store that is not a local file is fetched by the store (and
    padded to whole strips in memory)."""
    from obstore.store import MemoryStore as ObstoreMemory

    path = contiguous_strips[name]
    memory = ObstoreMemory()
    memory.put("strips.tif", path.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = TIFFParser()("memory:///strips.tif", ObjectStoreRegistry({"memory://": memory}))
    array = zarr.open_group(store, mode="r")["band_data"]
    expected = _tiff(path)
    for selection in STRIP_SELECTIONS:
        np.testing.assert_array_equal(array[selection], expected[selection], strict=True)


@pytest.mark.parametrize("threaded", [False, True])
def test_several_files_rectilinear_truncate_and_crop(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    concat_fixtures: dict[str, Path],
    threaded: bool,
) -> None:
    if threaded:
        monkeypatch.setattr(scheduling, "THREADED_BYTES", 1)
        monkeypatch.setattr(planning, "PIECE_BYTES", 2000)

    def read(marr: Any, selection: Any = Ellipsis) -> np.ndarray:
        group = zarr.open_group(manifest_store({"a": marr}), mode="r")
        return np.asarray(group["a"][selection])

    strips = ["strip_short_zlib_0", "strip_padded_zlib_1", "strip_short_zlib_2"]
    rectilinear = concatenate([tiff_manifest_array(concat_fixtures[n]) for n in strips])
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in strips])
    np.testing.assert_array_equal(read(rectilinear), expected, strict=True)
    np.testing.assert_array_equal(read(rectilinear, (slice(3, -2), 4)), expected[3:-2, 4])

    tiles = [concat_fixtures[f"tiled_{k}"] for k in range(2)]
    along_x = concatenate([tiff_manifest_array(p) for p in tiles], axis=1)
    expected = np.concatenate([native_tiff(p) for p in tiles], axis=1)
    np.testing.assert_array_equal(read(along_x), expected, strict=True)

    paths = [concat_fixtures[f"chunked_gzip_{k}"] for k in range(3)]
    result = concatenate([hdf5_manifest_array(p) for p in paths], axis=2)
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=2)
    np.testing.assert_array_equal(read(result), expected, strict=True)


@pytest.mark.corpus
@pytest.mark.parametrize(
    "relative",
    [
        "rasterio+rasterio/RGB.byte.tif",  # 240 uncompressed strips, rectilinear
        "image-rs+image-tiff/planar-rgb-u8.tif",
    ],
)
def test_corpus_tiff(
    manifest_pipeline: None, only_this_module: None, corpus_dir: Path, relative: str
) -> None:
    path = corpus_dir / relative
    array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
    np.testing.assert_array_equal(array[...], tifffile_reference(path), strict=True)


@pytest.mark.corpus
def test_corpus_many_small_chunks(
    manifest_pipeline: None, only_this_module: None, corpus_dir: Path
) -> None:
    """jhdf's chunked datasets: thousands of one-element chunks, raw and gzip."""
    path = corpus_dir / "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/chunked_v4_datasets.hdf5"
    group = zarr.open_group(_local(HDF5Parser(), path), mode="r")
    with h5py.File(path) as f:
        for name in ("btree_v2/large_int16", "filtered_extensible_array/large_int16"):
            expected = f[name][()]
            np.testing.assert_array_equal(group[name][...], expected, strict=True)


@pytest.mark.corpus
def test_corpus_scalars_of_every_type(
    manifest_pipeline: None, only_this_module: None, corpus_dir: Path
) -> None:
    """jhdf's scalar datasets, numbers and a variable-length string: h5py's values."""
    relative = "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_scalar_empty_datasets_latest.hdf5"
    path = corpus_dir / relative
    group = zarr.open_group(_local(HDF5Parser(), path), mode="r")
    names = sorted(group.array_keys())
    assert "scalar_string" in names and "scalar_uint_64" in names
    with h5py.File(path) as f:
        for name in names:
            expected = f[name][()]
            got = group[name][...]
            if isinstance(expected, bytes):
                assert got == expected.decode("utf-8")
            else:
                np.testing.assert_array_equal(got, expected, strict=True)


# --------------------------------------------------------------------------- fallbacks


def test_zarrs_pipelines_and_other_stores_use_zarrs_functions(
    hdf5_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the manifest pipeline, or on another store, zarr's own functions read."""
    calls: list[str] = []
    original = zarr_originals.get_selection

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append("zarr")
        return await original(*args, **kwargs)

    monkeypatch.setattr(zarr_originals, "get_selection", counting)
    store = _local(HDF5Parser(), hdf5_file)
    # outside fast_reads() nothing of zarr's is replaced
    assert zarr.core.array._get_selection is not zarr_selections.get_selection
    with virtualizarr_fill.fast_reads():
        assert zarr.core.array._get_selection is zarr_selections.get_selection
        batched = "zarr.core.codec_pipeline.BatchedCodecPipeline"
        with zarr.config.set({"codec_pipeline.path": batched}):
            group = zarr.open_group(store, mode="r")
            _same(group["tiny_zlib"][...], _h5(hdf5_file, "tiny_zlib"))
        assert calls == ["zarr"]
        memory = zarr.create_array(MemoryStore(), shape=(30, 20), chunks=(3, 4), dtype="i2")
        values = np.arange(600, dtype="i2").reshape(30, 20)
        memory[...] = values
        np.testing.assert_array_equal(memory[...], values)
        np.testing.assert_array_equal(memory[2:9, 3], values[2:9, 3])
    assert calls == ["zarr"] * 3


def test_strict_missing_chunks_out_and_fields_go_to_zarr(
    manifest_pipeline: None, hdf5_file: Path
) -> None:
    store = _local(HDF5Parser(), hdf5_file)
    expected = _h5(hdf5_file, "tiny_sparse_be")
    with zarr.config.set({"array.read_missing_chunks": False}):
        strict = zarr.open_group(store, mode="r")["tiny_sparse_be"]
        _same(strict[:6, :9], expected[:6, :9])
        with pytest.raises(ChunkNotFoundError):
            strict[...]
    array = zarr.open_group(store, mode="r")["tiny_raw"]
    out = default_buffer_prototype().nd_buffer.create(
        shape=array.shape, dtype=np.dtype("<f4"), fill_value=0
    )
    array.get_basic_selection(Ellipsis, out=out)
    _same(out.as_numpy_array(), _h5(hdf5_file, "tiny_raw"))


def test_group_open_matches_zarrs(manifest_pipeline: None, hdf5_file: Path) -> None:
    """Opening in the calling thread gives what zarr's own open gives, errors included."""
    store = _local(HDF5Parser(), hdf5_file)
    group = zarr.open_group(store, mode="r")
    for name in HDF5_NAMES:
        ours, zarrs = group[name], zarr_originals.group_getitem(group, name)
        assert ours.metadata == zarrs.metadata
        assert ours.path == zarrs.path
        assert dict(ours.attrs) == dict(zarrs.attrs)
    with pytest.raises(KeyError):
        group["no such array"]


def test_group_open_runs_here_and_matches_zarrs(
    manifest_pipeline: None, hdf5_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``zarr.open_group`` of a ManifestStore opened read-only never hands the open to
    zarr's event loop (refused here), and gives what zarr's own open gives, with or
    without a zarr format; other modes still go to zarr."""
    import zarr.core.sync

    store = _local(HDF5Parser(), hdf5_file)
    zarrs = zarr_originals.open_group(store, mode="r")

    def refuse(*args: Any, **kwargs: Any) -> None:
        for arg in args:
            if asyncio.iscoroutine(arg):
                arg.close()
        raise AssertionError("handed to zarr's event loop")

    with monkeypatch.context() as refusing:
        refusing.setattr(zarr.core.sync, "sync", refuse)
        refusing.setattr(zarr.api.synchronous, "sync", refuse)
        opened = [zarr.open_group(store, mode="r", zarr_format=f) for f in (None, 3)]
        with pytest.raises(AssertionError, match="event loop"):
            zarr.open_group(store, mode="a")
    assert opened[0].store is store  # read-only and open: the open's kept parse
    for ours in opened:
        assert ours.metadata == zarrs.metadata
        assert ours.path == zarrs.path
        assert type(ours.store) is type(zarrs.store)
        assert dict(ours.attrs) == dict(zarrs.attrs)
        assert sorted(ours.array_keys()) == sorted(zarrs.array_keys())
    assert zarr.open_group is zarr_opens.open_group is zarr.api.synchronous.open_group


def test_group_opens_own_their_attributes(manifest_pipeline: None, hdf5_file: Path) -> None:
    """Group opens share one parse of ``zarr.json`` but each may change its attributes
    (as zarr's updates do in place) without touching the next; opens with a path, or
    asking for consolidated metadata, are zarr's own."""
    store = _local(HDF5Parser(), hdf5_file)
    first = zarr.open_group(store, mode="r")
    first.metadata.attributes["changed"] = 1
    second = zarr.open_group(store, mode="r", zarr_format=3, use_consolidated=False)
    assert "changed" not in second.metadata.attributes
    assert second.metadata == zarr_originals.open_group(store, mode="r").metadata
    with pytest.raises(ValueError, match=r"(?i)consolidated"):
        zarr.open_group(store, mode="r", use_consolidated=True)


def test_array_opens_share_what_depends_on_metadata_and_configuration(
    manifest_pipeline: None, hdf5_file: Path
) -> None:
    """Opens of one array share its chunk grid, configuration and pipeline, equal to
    zarr's own open; each owns its metadata; a changed configuration or another store
    over the same manifests opens anew."""
    store = _local(HDF5Parser(), hdf5_file)
    group = zarr.open_group(store, mode="r")
    first, second = group["tiny_zlib"].async_array, group["tiny_zlib"].async_array
    zarrs = asyncio.run(zarr_originals.get_node_v3(store, "tiny_zlib"))
    for opened in (first, second):
        assert opened.metadata == zarrs.metadata
        assert opened.config == zarrs.config
        assert opened._chunk_grid == zarrs._chunk_grid
        assert opened.store_path.path == zarrs.store_path.path
        assert opened.store_path.store is group.store
        assert list(opened.codec_pipeline) == list(zarrs.codec_pipeline)
    assert second._chunk_grid is first._chunk_grid
    assert second.codec_pipeline is first.codec_pipeline
    assert second.metadata is not first.metadata
    first.metadata.attributes["changed"] = 1
    assert "changed" not in group["tiny_zlib"].metadata.attributes

    with zarr.config.set({"array.order": "F"}):
        in_f = group["tiny_zlib"].async_array
        assert in_f.config == asyncio.run(zarr_originals.get_node_v3(store, "tiny_zlib")).config
    assert in_f.config.order == "F" and first.config.order == "C"
    assert in_f.codec_pipeline is not first.codec_pipeline

    other = ManifestStore(group=store._group, registry=store._registry)
    elsewhere = zarr.open_group(other, mode="r")["tiny_zlib"]
    assert elsewhere.async_array.store_path.store is other
    _same(elsewhere[...], _h5(hdf5_file, "tiny_zlib"))
    _same(group["tiny_zlib"][...], _h5(hdf5_file, "tiny_zlib"))


def test_uninstall_restores_zarr(hdf5_file: Path) -> None:
    import zarr.core.array as zarr_array
    from zarr.core.group import Group

    installation.uninstall()
    try:
        assert zarr_array._get_selection is zarr_originals.get_selection
        assert zarr_array.Array.__getitem__ is zarr_originals.array_getitem
        assert Group.__getitem__ is zarr_originals.group_getitem
        assert zarr.open_group is zarr_originals.open_group
        with virtualizarr_fill.fast_reads():
            group = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")
            _same(group["tiny_raw"][...], _h5(hdf5_file, "tiny_raw"))
    finally:
        installation.install()
    assert zarr_array._get_selection is zarr_selections.get_selection
    assert zarr_array.Array.__getitem__ is zarr_selections.array_getitem


# --------------------------------------------------------------------------- opening


def test_parsed_metadata_is_kept_but_each_open_owns_its_attributes(
    manifest_pipeline: None, hdf5_file: Path
) -> None:
    """Opens parse each ``zarr.json`` once; every open equals zarr's own parse and may
    change its attributes (as zarr's attribute updates do) without touching the next."""
    import zarr.core.group as zarr_group

    store = _local(HDF5Parser(), hdf5_file)
    group = zarr.open_group(store, mode="r")
    parses = []
    original = zarr_originals.read_metadata_v3

    async def counting(*args: Any, **kwargs: Any) -> Any:
        parses.append(args)
        return await original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(zarr_originals, "read_metadata_v3", counting)
        first = group["tiny_zlib"]
        first.metadata.attributes["changed"] = 1
        second = group["tiny_zlib"]
    assert len(parses) == 1
    assert "changed" not in second.metadata.attributes
    zarrs = asyncio.run(original(store, "tiny_zlib"))
    assert second.metadata == zarrs
    assert zarr_group._read_metadata_v3 is zarr_opens.read_metadata_v3
    _same(second[...], _h5(hdf5_file, "tiny_zlib"))


def test_pipelines_built_once_per_codec_list(manifest_pipeline: None, hdf5_file: Path) -> None:
    """Arrays opened from the same parsed metadata share one pipeline, equal to the one
    zarr builds (same codecs, same chunk spec); a changed configuration builds anew."""
    from zarr.core.array import create_codec_pipeline

    group = zarr.open_group(_local(HDF5Parser(), hdf5_file), mode="r")
    first, second = group["tiny_shuffle_zlib"], group["tiny_shuffle_zlib"]
    pipeline = first.async_array.codec_pipeline
    assert isinstance(pipeline, ManifestCodecPipeline)
    assert second.async_array.codec_pipeline is pipeline
    # zarr's own construction (without a store: from_codecs, then the same chunk spec)
    assert list(pipeline) == list(create_codec_pipeline(first.metadata))
    with zarr.config.set({"array.order": "F"}):
        third = group["tiny_shuffle_zlib"]
    assert third.async_array.codec_pipeline is not pipeline
    _same(third[...], _h5(hdf5_file, "tiny_shuffle_zlib"))


def test_short_last_chunks_are_assembled(
    manifest_pipeline: None,
    only_this_module: None,
    monkeypatch: pytest.MonkeyPatch,
    tiff_files: dict[str, Path],
) -> None:
    """Rectilinear strips whose last strip is short take the assembled way too."""
    layouts = _recorded_answers(monkeypatch, lattice, "block_layout")
    monkeypatch.setattr(selections, "BLOCK_MIN_CHUNKS", 2)
    for name in ("strip_short_rgb_chunky_deflate", "strip_short_planar_lzw"):
        path = tiff_files[name]
        array = zarr.open_group(_local(TIFFParser(), path), mode="r")["band_data"]
        expected = _tiff(path)
        np.testing.assert_array_equal(array[...], expected, strict=True)
        np.testing.assert_array_equal(array[..., 1:, :-1], expected[..., 1:, :-1], strict=True)
    assert any(layout is not None and layout[1] for layout in layouts)


@pytest.mark.parametrize(
    "chunks", [(4, 5), ((3, 3, 1, 6, 2), (5, 5, 5, 5, 2)), ((7, 7, 1), 4)], ids=str
)
def test_step_one_projections_are_zarrs(chunks: Any) -> None:
    """The projections of step-1 slices and integers, worked out from the chunk edges,
    are zarr's own dimension indexers' for every such selection, on regular grids
    (short last chunk) and rectilinear ones."""
    from zarr.core.indexing import BasicIndexer

    shape = (15, 22)
    array = zarr.create_array(MemoryStore(), shape=shape, chunks=chunks, dtype="u1")
    grid = array._chunk_grid
    picks: list[Any] = [0, 5, 14, -1, slice(None)]
    picks += [slice(a, b) for a in range(0, 15, 2) for b in range(a + 1, 16, 3)]
    checked = 0
    for first in picks:
        for second in [3, -2, slice(None), slice(4, 21), slice(20, 22), slice(0, 1)]:
            indexer = BasicIndexer((first, second), shape, grid)
            ranges = selections.step_one_ranges(indexer)
            assert ranges is not None
            expected = [list(dim) for dim in indexer.dim_indexers]
            assert selections.step_one_projections(indexer, ranges) == expected
            checked += 1
    assert checked == len(picks) * 6


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
