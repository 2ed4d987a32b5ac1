"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import hdf5plugin
import pytest

from tests.servers import S3Server, running_s3

# netCDF4, once imported, points HDF5_PLUGIN_PATH at its own filter plugins, which are
# built against its own copy of libhdf5: h5py loading one of them to write or read a
# blosc or bitshuffle dataset fails or crashes, depending on which test ran first.
# Registered filters take precedence over the plugin path, so h5py always uses
# hdf5plugin's, whatever the test order.
hdf5plugin.register(force=True)

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The real-file conformance corpus (``../shared/corpus``).

    CI always has it, so there a missing corpus is a failure. Elsewhere (a contributor's
    checkout without the corpus) the corpus tests are skipped with the reason.
    """
    if not (CORPUS_DIR / "MANIFEST.tsv").is_file():
        message = f"conformance corpus not found at {CORPUS_DIR}"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return CORPUS_DIR


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3-compatible server (moto) on loopback for the whole session."""
    with running_s3() as server:
        yield server
