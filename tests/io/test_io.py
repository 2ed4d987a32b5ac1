"""StoreFile against a local store and a real S3-compatible server on loopback."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile
from obstore.store import LocalStore

from fixtures.servers import S3Server, faulty_proxy
from virtualizarr_fill import StoreReadError, VirtualizarrFillError
from virtualizarr_fill.io.files import StoreFile

BUCKET = "io-tests"


@pytest.fixture(scope="module")
def sample_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("io") / "sample.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8).tobytes())
    return path


@pytest.fixture(scope="module")
def s3_sample(s3_server: S3Server, sample_file: Path) -> str:
    s3_server.create_bucket(BUCKET)
    s3_server.upload(BUCKET, "data/sample.bin", sample_file)
    return "data/sample.bin"


def _check_ranges(reader: StoreFile, expected: bytes) -> None:
    rng = np.random.default_rng(1)
    assert reader.size == len(expected)
    for _ in range(50):
        start = int(rng.integers(0, len(expected) + 10))
        length = int(rng.integers(0, 150_000))
        reader.seek(start)
        assert reader.read(length) == expected[start : start + length]
    reader.seek(-10, 2)
    assert reader.read() == expected[-10:]
    reader.seek(0)
    buffer = bytearray(1000)
    assert reader.readinto(buffer) == 1000 and bytes(buffer) == expected[:1000]


def test_local_ranges_equal_file(sample_file: Path) -> None:
    reader = StoreFile(LocalStore(sample_file.parent), sample_file.name, block_size=4096)
    _check_ranges(reader, sample_file.read_bytes())


def test_s3_ranges_equal_file(s3_server: S3Server, s3_sample: str, sample_file: Path) -> None:
    reader = StoreFile(s3_server.store(BUCKET), s3_sample, block_size=16384)
    _check_ranges(reader, sample_file.read_bytes())
    # Every byte received was asked for in whole blocks, and each block once.
    assert reader.stats.bytes_read <= len(sample_file.read_bytes()) + 16384


def test_small_header_costs_one_request(s3_server: S3Server, corpus_dir: Path) -> None:
    path = corpus_dir / "rasterio+rasterio" / "byte.tif"
    s3_server.create_bucket("io-header")
    s3_server.upload("io-header", "byte.tif", path)
    reader = StoreFile(s3_server.store("io-header"), "byte.tif")
    with tifffile.TiffFile(reader) as remote, tifffile.TiffFile(path) as local:
        assert remote.pages[0].dataoffsets == local.pages[0].dataoffsets
        assert remote.pages[0].databytecounts == local.pages[0].databytecounts
    assert reader.stats.requests == 1


def test_h5py_reads_through_store_file(tmp_path: Path) -> None:
    path = tmp_path / "a.h5"
    data = np.arange(1000, dtype="f8").reshape(10, 100)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(5, 50), compression="gzip")
    reader = StoreFile(LocalStore(tmp_path), "a.h5")
    with h5py.File(reader, "r") as remote:
        np.testing.assert_array_equal(remote["x"][...], data)
        assert remote["x"].chunks == (5, 50)
    assert reader.stats.requests >= 1


def test_retries_through_a_burst_of_503(
    s3_server: S3Server, s3_sample: str, sample_file: Path
) -> None:
    with faulty_proxy(s3_server) as proxy:
        store = s3_server.store(
            BUCKET,
            endpoint=proxy.endpoint,
            retry_config={
                "max_retries": 5,
                "backoff": {
                    "init_backoff": timedelta(milliseconds=10),
                    "max_backoff": timedelta(milliseconds=50),
                    "base": 2,
                },
                "retry_timeout": timedelta(seconds=20),
            },
        )
        proxy.fail_next(3, status=503)
        reader = StoreFile(store, s3_sample)
        assert reader.read(100) == sample_file.read_bytes()[:100]
        assert proxy.requests >= 4


def test_dead_server_gives_a_clear_timeout_error(s3_server: S3Server, s3_sample: str) -> None:
    with faulty_proxy(s3_server) as proxy:
        store = s3_server.store(
            BUCKET,
            endpoint=proxy.endpoint,
            client_options={"timeout": "1s", "connect_timeout": "1s"},
            retry_config={
                "max_retries": 1,
                "backoff": {
                    "init_backoff": timedelta(milliseconds=10),
                    "max_backoff": timedelta(milliseconds=20),
                    "base": 2,
                },
                "retry_timeout": timedelta(seconds=3),
            },
        )
        proxy.stall()
        reader = StoreFile(store, s3_sample)
        started = time.monotonic()
        with pytest.raises(StoreReadError, match=r"sample\.bin") as info:
            reader.read(10)
        assert time.monotonic() - started < 30
        assert isinstance(info.value, VirtualizarrFillError) and isinstance(info.value, OSError)


def test_missing_object_is_a_store_read_error(tmp_path: Path) -> None:
    with pytest.raises(StoreReadError, match=r"nope\.tif"):
        StoreFile(LocalStore(tmp_path), "nope.tif").read(4)


def test_requests_seen_by_store_wrappers(corpus_dir: Path) -> None:
    """Benchmarks count every parser's requests the same way, through a store wrapper."""
    from obspec_utils.wrappers import RequestTrace, TracingReadableStore

    from benchmarks._counting_store import CountingStore

    trace = RequestTrace()
    counted = CountingStore(LocalStore(corpus_dir / "rasterio+rasterio"))
    traced = TracingReadableStore(counted, trace)
    reader = StoreFile(traced, "RGB.byte.tif")
    with tifffile.TiffFile(reader) as tif:
        assert len(tif.pages[0].dataoffsets) == 240
    assert trace.total_requests == reader.stats.requests == counted.stats.requests
    assert counted.stats.bytes_read == reader.stats.bytes_read
    # The file is 1.7 MB; the header took two block-sized reads.
    assert reader.stats.bytes_read < 200_000


def test_empty_object_has_size_zero(tmp_path: Path) -> None:
    (tmp_path / "empty.tif").write_bytes(b"")
    reader = StoreFile(LocalStore(tmp_path), "empty.tif")
    assert reader.size == 0
    assert reader.read(10) == b""


def test_cached_range_returns_only_fetched_bytes(sample_file: Path) -> None:
    expected = sample_file.read_bytes()
    reader = StoreFile(
        LocalStore(sample_file.parent), sample_file.name, block_size=4096, first_request=8192
    )
    assert reader.size == len(expected)  # the first request: the head, two blocks
    requests = reader.stats.requests
    assert reader.cached_range(100, 8000) == expected[100:8100]
    assert reader.cached_range(8000, 500) is None  # reaches an unfetched block
    assert reader.cached_range(len(expected) - 10, 20) is None  # past the end
    assert reader.cached_range(0, 0) is None
    assert reader.stats.requests == requests  # asking never fetches
    reader.read_range(200_000, 10)
    assert reader.cached_range(200_000, 10) == expected[200_000:200_010]
