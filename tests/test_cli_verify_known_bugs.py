"""Open bug of ``virtualizarr-fill verify``, reproduced (``pytest -m known_bug`` runs it).

``verify`` of a store whose array is rectilinear only after combining (netCDF-4 files
whose length is not a multiple of the chunk length: each file alone is on a regular
grid) opens the store before anything turned zarr's ``array.rectilinear_chunks`` flag
on in its process, and fails with an internal error (exit 5) instead of comparing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest


@pytest.mark.known_bug
def test_verify_reads_a_series_that_is_rectilinear_only_when_combined(tmp_path: Path) -> None:
    for k in range(2):
        with h5py.File(tmp_path / f"part_{k}.h5", "w") as f:
            f.create_dataset("data", data=np.arange(10, dtype="f4") + 10 * k, chunks=(4,))
    environment = {k: v for k, v in os.environ.items() if k != "ZARR_ARRAY__RECTILINEAR_CHUNKS"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "virtualizarr_fill.cli", *args],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
        )

    built = cli("build", "part_0.h5", "part_1.h5", "--concat-dim", "phony_dim_0", "--out", "s")
    assert built.returncode == 0, built.stderr
    verified = cli(
        "verify", "s", "--against", "part_0.h5", "part_1.h5", "--concat-dim", "phony_dim_0"
    )
    assert verified.returncode == 0, verified.stderr
