"""FileManifestStore's synchronous surface and its byte-range reads.

With zarr's fused codec pipeline, reads go through ``get_sync``; every value must equal
the native reader's, and every byte ``get_sync`` returns must equal what VirtualiZarr's
own asynchronous ``get`` returns for the same key and byte range.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestStore
from zarr.abc.store import (
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
    _store_supports_sync_io,
)
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from fixtures import make_tiff_fixtures
from fixtures.servers import S3Server
from tests._native_references import tifffile_reference
from virtualizarr_fill import HDF5Parser, TIFFParser

FUSED = "zarr.core.codec_pipeline.FusedCodecPipeline"
TIFF_FIXTURES = [
    "strip_padded_planar_zstd",  # regular grid, truncate codec, planar
    "strip_short_rgb_chunky_deflate",  # rectilinear grid (short last strip)
    "tiles_sparse_deflate",  # missing tiles read as the fill value
    "predictor2_tiles_padded_strip_be",  # big-endian, predictor codec
    "strip_rps10_150rows_deflate",
    "packed_4bit_strips",  # packed samples
    "jpeg_ycbcr_strips_short",  # an image codec as the array->bytes codec
]


@pytest.fixture
def fused() -> Iterator[None]:
    with zarr.config.set({"codec_pipeline.path": FUSED}):
        yield


@pytest.fixture(scope="module")
def tiff_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("sync_tiff")
    return make_tiff_fixtures.write_fixtures(directory, TIFF_FIXTURES)


@pytest.fixture(scope="module")
def hdf5_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Padded edge chunks, an unallocated chunk, and a contiguous dataset."""
    path = tmp_path_factory.mktemp("sync_hdf5") / "data.h5"
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "chunked",
            data=rng.integers(-1000, 1000, (23, 17), dtype="<i4"),
            chunks=(5, 4),
            compression="gzip",
            shuffle=True,
        )
        sparse = f.create_dataset("sparse", shape=(10, 10), chunks=(5, 5), dtype="<f8")
        sparse[:5, :5] = rng.random((5, 5))
        f.create_dataset("contiguous", data=rng.random((7, 3)).astype(">f4"))
    return path


def _tiff_reference(path: Path) -> np.ndarray:
    """The written values where tifffile cannot decode the fixture (padded compressed
    strips), else tifffile's decode."""
    truth = make_tiff_fixtures.TRUTHS.get(path.stem)
    return truth() if truth is not None else tifffile_reference(path)


def _parse(parser: Any, path: Path) -> ManifestStore:
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store: ManifestStore = parser(f"file://{path}", registry)
    return store


def _chunk_keys(array: zarr.Array) -> list[str]:
    return [
        "c/" + "/".join(str(i) for i in index) for index in np.ndindex(*array._chunk_grid_shape)
    ]


def test_manifest_store_has_the_sync_surface(hdf5_file: Path) -> None:
    store = _parse(HDF5Parser(), hdf5_file)
    assert _store_supports_sync_io(store)
    # the parsers' store has it; VirtualiZarr's own class is left as it is
    assert not hasattr(ManifestStore, "get_sync")
    with pytest.raises(NotImplementedError, match="read-only"):
        store.set_sync("chunked/c/0/0", default_buffer_prototype().buffer.from_bytes(b"x"))  # type: ignore[attr-defined]
    with pytest.raises(NotImplementedError, match="read-only"):
        store.delete_sync("chunked/c/0/0")  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", TIFF_FIXTURES)
def test_fused_tiff_read_equals_tifffile(
    fused: None, tiff_files: dict[str, Path], name: str
) -> None:
    path = tiff_files[name]
    store = _parse(TIFFParser(), path)
    values = zarr.open_array(store, path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(path), strict=True)


@pytest.mark.parametrize("name", ["chunked", "sparse", "contiguous"])
def test_fused_hdf5_read_equals_h5py(fused: None, hdf5_file: Path, name: str) -> None:
    store = _parse(HDF5Parser(), hdf5_file)
    values = zarr.open_array(store, path=name, mode="r")[...]
    with h5py.File(hdf5_file) as f:
        expected = f[name][()]
    np.testing.assert_array_equal(values, expected.astype(expected.dtype.newbyteorder("=")))


def _both(store: ManifestStore, key: str, byte_range: Any = None) -> tuple[Any, Any]:
    prototype = default_buffer_prototype()
    blocking = store.get_sync(key, prototype=prototype, byte_range=byte_range)  # type: ignore[attr-defined]
    upstream = sync(store.get(key, prototype, byte_range))
    return blocking, upstream


@pytest.mark.parametrize(
    "byte_range",
    [None, RangeByteRequest(1, 7), OffsetByteRequest(3), SuffixByteRequest(4)],
    ids=["whole", "range", "offset", "suffix"],
)
def test_get_sync_equals_async_get(hdf5_file: Path, byte_range: Any) -> None:
    store = _parse(HDF5Parser(), hdf5_file)
    compared = 0
    for name in ("chunked", "sparse", "contiguous"):
        array = zarr.open_array(store, path=name, mode="r")
        for key in _chunk_keys(array):
            blocking, upstream = _both(store, f"{name}/{key}", byte_range)
            if upstream is None:
                assert blocking is None
                continue
            assert blocking.to_bytes() == upstream.to_bytes()
            compared += 1
    assert compared > 20


def test_get_sync_metadata_and_inlined_chunks(tiff_files: dict[str, Path]) -> None:
    store = _parse(TIFFParser(), tiff_files["strip_short_rgb_chunky_deflate"])
    for key in ("zarr.json", "band_data/zarr.json", "band/c/0", "band/c/0"):
        blocking, upstream = _both(store, key)
        assert blocking.to_bytes() == upstream.to_bytes()
    assert store.get_sync("band_data/.zarray") is None  # type: ignore[attr-defined]
    blocking, upstream = _both(store, "band/c/0", RangeByteRequest(8, 16))
    assert blocking.to_bytes() == upstream.to_bytes() == np.int64(2).tobytes()


def test_zarr_json_encoded_once_and_never_stale(tiff_files: dict[str, Path]) -> None:
    """``zarr.json`` is served from a cache kept per metadata object: the same bytes the
    metadata encodes to, the same object on a second request, and a new document once
    the array's metadata is replaced."""
    import gc

    from virtualizarr_fill.manifests import store as store_module

    store = _parse(TIFFParser(), tiff_files["strip_short_rgb_chunky_deflate"])
    prototype = default_buffer_prototype()
    group = store._group
    for key, metadata in (("zarr.json", group.metadata), ("band_data/zarr.json", None)):
        metadata = metadata or group.arrays["band_data"].metadata
        fresh = metadata.to_buffer_dict(prototype=prototype)["zarr.json"].to_bytes()
        first = sync(store.get(key, prototype))
        assert first.to_bytes() == fresh
        assert sync(store.get(key, prototype)) is first
        assert store.get_sync(key, prototype=prototype) is first  # type: ignore[attr-defined]

    array = group.arrays["band_data"]
    renamed = array.metadata.update_attributes({"long_name": "replaced"})
    group._members["band_data"] = type(array)(metadata=renamed, chunkmanifest=array.manifest)
    served = json.loads(sync(store.get("band_data/zarr.json", prototype)).to_bytes())
    assert served["attributes"]["long_name"] == "replaced"

    cached = len(store_module._metadata_json)
    del array, renamed, group, store
    gc.collect()
    assert len(store_module._metadata_json) < cached


def test_store_with_a_prefix(fused: None, tiff_files: dict[str, Path]) -> None:
    """A store rooted at the file's directory: the path inside it drops the prefix."""
    path = tiff_files["tiles_sparse_deflate"]
    registry = ObjectStoreRegistry({f"file://{path.parent}": LocalStore(prefix=path.parent)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = TIFFParser()(f"file://{path}", registry)
    values = zarr.open_array(store, path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(path), strict=True)


def test_fused_read_over_s3(fused: None, s3_server: S3Server, tiff_files: dict[str, Path]) -> None:
    bucket = "sync-store"
    s3_server.create_bucket(bucket)
    path = tiff_files["predictor2_tiles_padded_strip_be"]
    s3_server.upload(bucket, "tiles/pred2.tif", path)
    registry = ObjectStoreRegistry({f"s3://{bucket}": s3_server.store(bucket)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = TIFFParser()(f"s3://{bucket}/tiles/pred2.tif", registry)
    values = zarr.open_array(store, path="band_data", mode="r")[...]
    np.testing.assert_array_equal(values, _tiff_reference(path), strict=True)


def test_fused_reads_do_not_use_the_async_get(
    fused: None, tiff_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the array is open, chunks come through get_sync alone (no per-chunk coroutine)."""
    path = tiff_files["strip_rps10_150rows_deflate"]
    store = _parse(TIFFParser(), path)
    array = zarr.open_array(store, path="band_data", mode="r")

    async def no_async_get(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("chunk read through the asynchronous get")

    monkeypatch.setattr(type(store), "get", no_async_get)
    np.testing.assert_array_equal(array[...], _tiff_reference(path), strict=True)


# --------------------------------------------------------------------------- local ranges


def test_local_ranges_equal_obstores(tmp_path: Path) -> None:
    """A few ranges of a local file are read with ``os.pread``: the same bytes as
    obstore's, with and without a store prefix; more ranges, unusual names and ranges
    past the end go to obstore (which reports the last in its own words)."""
    import obstore

    from virtualizarr_fill.io import byte_ranges

    data = bytes(range(256)) * 64
    plain = tmp_path / "plain_name-1.bin"
    odd = tmp_path / "odd name %.bin"
    for path in (plain, odd):
        path.write_bytes(data)
    starts, ends = [0, 5, 1000, 16000], [3, 6, 4000, 16384]
    expected = [data[a:b] for a, b in zip(starts, ends, strict=True)]
    root, rooted = LocalStore(), LocalStore(prefix=tmp_path)
    for store, key in [
        (root, str(plain).lstrip("/")),
        (rooted, plain.name),
        (root, str(odd).lstrip("/")),
        (rooted, odd.name),
    ]:
        got = byte_ranges.get_ranges(store, key, starts, ends)
        assert [bytes(g) for g in got] == expected
        assert [bytes(g) for g in obstore.get_ranges(store, key, starts=starts, ends=ends)] == (
            expected
        )
    assert byte_ranges._local_path(rooted, plain.name) == str(plain)
    assert byte_ranges._local_path(rooted, odd.name) is None  # obstore encodes such names
    many = list(range(0, 2 * byte_ranges.LOCAL_RANGES))
    got = byte_ranges.get_ranges(rooted, plain.name, many, [s + 7 for s in many])
    assert [bytes(g) for g in got] == [data[s : s + 7] for s in many]

    def outcome(read: Any, start: int, end: int) -> Any:
        try:
            return [bytes(g) for g in read(rooted, plain.name, [start], [end])]
        except Exception as error:
            return type(error)

    def theirs(store: Any, key: str, starts: list[int], ends: list[int]) -> Any:
        return obstore.get_ranges(store, key, starts=starts, ends=ends)

    for start, end in [(len(data) - 2, len(data) + 5), (len(data) + 3, len(data) + 9), (5, 5)]:
        assert outcome(byte_ranges.get_ranges, start, end) == outcome(theirs, start, end)
    plain.unlink()
    with pytest.raises(FileNotFoundError):
        byte_ranges.get_ranges(rooted, plain.name, [0], [3])


def test_local_ranges_read_together_where_close(tmp_path: Path) -> None:
    """Ranges of a local file close to one another are read with one ``pread`` and
    handed out as read-only views (a decoder must not write into bytes another chunk
    shares); unsorted, repeated and overlapping ranges (tiles that share their bytes)
    and ranges far apart give obstore's bytes."""
    import obstore

    from virtualizarr_fill.io import byte_ranges

    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 3 * byte_ranges.LOCAL_GAP_BYTES, dtype=np.uint8).tobytes()
    path = tmp_path / "ranges.bin"
    path.write_bytes(data)
    store = LocalStore(prefix=tmp_path)
    far = 2 * byte_ranges.LOCAL_GAP_BYTES + 10
    starts = [100, 0, 100, 150, far, far - 4, 40_000]
    ends = [200, 50, 200, 300, far + 10, far + 1, 40_001]
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(descriptor: int, size: int, offset: int) -> bytes:
        reads.append(size)
        return real_pread(descriptor, size, offset)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "pread", counting_pread)
        got = byte_ranges.get_ranges(store, path.name, starts, ends)
    theirs = obstore.get_ranges(store, path.name, starts=starts, ends=ends)
    assert [bytes(g) for g in got] == [bytes(t) for t in theirs]
    assert [bytes(g) for g in got] == [data[a:b] for a, b in zip(starts, ends, strict=True)]
    assert reads == [40_001, 14], "two runs: the ranges up to 40,001, and the two far ones"
    assert all(memoryview(g).readonly for g in got)
    # A run reaching past the file's end goes to obstore, which answers its own way.
    starts, ends = [0, len(data) - 2], [10, len(data) + 5]
    got = byte_ranges.get_ranges(store, path.name, starts, ends)
    theirs = obstore.get_ranges(store, path.name, starts=starts, ends=ends)
    assert [bytes(g) for g in got] == [bytes(t) for t in theirs]
    assert not any(isinstance(g, memoryview) for g in got)
