"""Parse deadlines against a stalled object store, and store failures as project errors.

The store is moto's S3 server on loopback behind a proxy (``fixtures/servers.py``) that
accepts connections and then never answers. The user's store keeps obstore's default
settings (30 s a request, retried for up to three minutes): the parse's deadline alone
must end the parse, with a :class:`StoreReadError` naming the file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from fixtures.servers import FaultyProxy, S3Server, faulty_proxy
from virtualizarr_fill import HDF5Parser, StoreReadError, TIFFParser
from virtualizarr_fill.formats import AutoParser
from virtualizarr_fill.io.deadlines import RETRY_CONFIG
from virtualizarr_fill.io.files import StoreFile

BUCKET = "stall-tests"
#: A deadline short enough for a test, long enough for a loaded machine's round trip.
DEADLINE = 2.0
#: How late past the deadline the error may come (thread hand-offs on a busy machine).
SLACK = 3.0


@pytest.fixture(scope="module")
def uploaded(
    s3_server: S3Server, corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> str:
    import h5py

    s3_server.create_bucket(BUCKET)
    s3_server.upload(BUCKET, "byte.tif", corpus_dir / "rasterio+rasterio" / "byte.tif")
    path = tmp_path_factory.mktemp("deadline") / "small.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10)
    s3_server.upload(BUCKET, "small.h5", path)
    s3_server.put_bytes(BUCKET, "empty.bin", b"")
    return BUCKET


@pytest.fixture
def stalled(s3_server: S3Server, uploaded: str) -> Iterator[FaultyProxy]:
    with faulty_proxy(s3_server) as proxy:
        proxy.stall()
        yield proxy


def _registry(store: Any) -> ObjectStoreRegistry:
    return ObjectStoreRegistry({f"s3://{BUCKET}": store})


@pytest.mark.parametrize(
    ("name", "parser"),
    [
        ("byte.tif", TIFFParser(deadline=DEADLINE)),
        ("byte.tif", AutoParser(tiff=TIFFParser(deadline=DEADLINE))),
        ("small.h5", HDF5Parser(reader_options={"deadline": DEADLINE})),
    ],
    ids=["tiff", "auto", "hdf5"],
)
def test_stalled_store_ends_at_the_parse_deadline(
    s3_server: S3Server, stalled: FaultyProxy, name: str, parser: Any
) -> None:
    store = s3_server.store(BUCKET, endpoint=stalled.endpoint)  # obstore's defaults
    url = f"s3://{BUCKET}/{name}"
    started = time.monotonic()
    with pytest.raises(StoreReadError, match="within the parse deadline of 2 s") as info:
        parser(url, _registry(store))
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE + SLACK, elapsed
    assert name in str(info.value)
    assert stalled.requests >= 1


def test_tiff_parse_deadline_is_a_parser_option(s3_server: S3Server, stalled: FaultyProxy) -> None:
    """The default is a minute; ``None`` turns it off (obstore's own timeouts then apply)."""
    assert TIFFParser().deadline == 60
    store = s3_server.store(
        BUCKET,
        endpoint=stalled.endpoint,
        client_options={"timeout": "1s", "connect_timeout": "1s"},
        retry_config={"max_retries": 0},
    )
    with pytest.raises(StoreReadError, match=r"byte\.tif") as info:
        TIFFParser(deadline=None)(f"s3://{BUCKET}/byte.tif", _registry(store))
    assert "parse deadline" not in str(info.value)


def test_failed_get_is_not_retried_through_head(s3_server: S3Server, stalled: FaultyProxy) -> None:
    """A GET that timed out is not followed by a HEAD (and its own retries)."""
    store = s3_server.store(
        BUCKET,
        endpoint=stalled.endpoint,
        client_options={"timeout": "1s", "connect_timeout": "1s"},
        retry_config={
            "max_retries": 1,
            "retry_timeout": timedelta(seconds=3),
            "backoff": {
                "init_backoff": timedelta(milliseconds=10),
                "max_backoff": timedelta(milliseconds=20),
                "base": 2,
            },
        },
    )
    reader = StoreFile(store, "byte.tif", deadline=None)
    with pytest.raises(StoreReadError, match=r"byte\.tif"):
        reader.read(10)
    assert stalled.methods and set(stalled.methods) == {"GET"}, stalled.methods


def test_empty_object_on_s3_has_size_zero(s3_server: S3Server, uploaded: str) -> None:
    """An empty object refuses the ranged GET (416): then, and only then, HEAD tells."""
    reader = StoreFile(s3_server.store(BUCKET), "empty.bin")
    assert reader.size == 0 and reader.read(10) == b""


def test_stores_the_cli_builds_have_bounded_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    from virtualizarr_fill.io import registries

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setattr(registries, "_STORES", {})
    store, _ = registries.registry_for(["s3://some-bucket/a.tif"]).resolve("s3://some-bucket/a.tif")
    assert store.retry_config["max_retries"] == RETRY_CONFIG["max_retries"]
    assert store.retry_config["retry_timeout"] == RETRY_CONFIG["retry_timeout"]


# -- a file that changes while it is read ----------------------------------------------------


def _shrunk(tmp_path: Path, *cached: int) -> tuple[StoreFile, Path]:
    """A reader that learnt the size of a 64 KiB file and fetched 4 KiB blocks 0 and
    ``cached``; the file then shrinks to 5000 bytes."""
    path = tmp_path / "shrinking.tif"
    path.write_bytes(bytes(range(256)) * 256)
    reader = StoreFile(LocalStore(tmp_path), path.name, block_size=4096, first_request=4096)
    assert reader.size == 65536
    for block in cached:
        reader.read_range(block * 4096, 1)
    path.write_bytes(path.read_bytes()[:5000])
    return reader, path


def test_ranges_of_a_shrunk_file_are_a_store_read_error(tmp_path: Path) -> None:
    """obstore panics (a BaseException) on several ranges past the end of a local file."""
    reader, path = _shrunk(tmp_path, 2)
    with pytest.raises(StoreReadError, match=path.name):
        reader.read_range(4096, 3 * 4096)  # blocks 1 and 3: two ranges, one request


def test_range_past_the_end_of_a_shrunk_file_is_a_store_read_error(tmp_path: Path) -> None:
    reader, path = _shrunk(tmp_path)
    with pytest.raises(StoreReadError, match=path.name):
        reader.read_range(3 * 4096, 10)


def test_short_answer_of_a_shrunk_file_is_a_store_read_error(tmp_path: Path) -> None:
    reader, path = _shrunk(tmp_path)
    with pytest.raises(StoreReadError, match=f"{path.name}.*changed while being read"):
        reader.read_range(4096, 100)
