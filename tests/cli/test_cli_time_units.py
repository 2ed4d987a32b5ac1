"""``virtualizarr-fill build`` of files whose time variables each have their own units.

The stores are real Icechunk repositories read back with
``virtualizarr_fill.open_icechunk``; the expected dates are those ``xr.open_mfdataset``
reads from the files with h5netcdf (each file decoded with its own units).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import virtualizarr_fill
from tests._cli import run_cli as _run
from tests.assemble.test_time_units import WEEKS, bounded_weeks, native, observed, stations
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK


def test_build_reads_time_bounds_with_each_files_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = bounded_weeks(tmp_path / "data", WEEKS)
    repo = tmp_path / "weeks.icechunk"
    code, _, err = _run(capsys, "build", *paths[::-1], "--concat-dim", "time", "--out", repo)
    assert code == EXIT_OK, err
    read = virtualizarr_fill.open_icechunk(repo).load()
    expected = native(paths)
    for name in ("time", "time_bnds", "tas"):
        np.testing.assert_array_equal(read[name].values, expected[name].values, err_msg=name)
    code, out, err = _run(capsys, "verify", repo, "--against", *paths)
    assert code == EXIT_OK, out + err


def test_build_appending_a_file_in_other_units_reads_its_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = bounded_weeks(tmp_path / "data", WEEKS)
    repo = tmp_path / "grown.icechunk"
    assert _run(capsys, "build", *paths[:2], "--concat-dim", "time", "--out", repo)[0] == EXIT_OK
    code, _, err = _run(capsys, "build", paths[2], "--out", repo, "--append")
    assert code == EXIT_OK, err
    read = virtualizarr_fill.open_icechunk(repo).load()
    expected = native(paths)
    for name in ("time", "time_bnds"):
        np.testing.assert_array_equal(read[name].values, expected[name].values, err_msg=name)


def test_build_reads_an_xarray_datetime_variable_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = observed(tmp_path / "data", "netcdf4")
    repo = tmp_path / "obs.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--concat-dim", "time", "--out", repo)
    assert code == EXIT_OK, err
    read = virtualizarr_fill.open_icechunk(repo).load()
    np.testing.assert_array_equal(read.obs_time.values, native(paths).obs_time.values)
    code, out, err = _run(capsys, "verify", repo, "--against", *paths)
    assert code == EXIT_OK, out + err
    assert "all equal" in out


def test_build_refuses_times_it_cannot_read_in_one_set_of_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = stations(tmp_path, ["days since 2000-01-01", "hours since 1990-01-01"])
    repo = tmp_path / "st.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--concat-dim", "time", "--out", repo)
    assert code == EXIT_BAD_INPUT, err
    lines = [line for line in err.splitlines() if line.startswith("virtualizarr-fill: error:")]
    assert len(lines) == 1, err
    assert "'last_seen'" in lines[0] and "'hours since 1990-01-01'" in lines[0]
    assert paths[0].name in lines[0] and paths[1].name in lines[0]
    assert not repo.exists()
