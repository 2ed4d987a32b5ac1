"""What the commands take as input and what they show while running: recursive patterns
over directory-symlink loops, file names that read as patterns, model calendars without
cftime, and progress lines in a log file.

The commands run as users run them (``python -m virtualizarr_fill.cli`` in a process of
its own where a hang or an environment matters); values are compared with tifffile and
netCDF4 reading the files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import tifffile

import virtualizarr_fill
from virtualizarr_fill.cli import EXIT_IO, EXIT_OK, EXIT_USAGE, main
from virtualizarr_fill.cli._inputs import expand_inputs
from virtualizarr_fill.cli.progress import Progress

# the package under test, also in the processes the tests start
PACKAGE_ROOT = Path(virtualizarr_fill.__file__).resolve().parents[1]


def _command(*argv: str | Path, prelude: str = "") -> list[str]:
    code = (
        f"{prelude}import sys; from virtualizarr_fill.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    return [sys.executable, "-c", code, *map(str, argv)]


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}


def _tiff(path: Path, value: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, np.full((32, 48), value, dtype="uint16"), tile=(16, 16))
    return path


# --------------------------------------------------------------------------- patterns


def test_recursive_pattern_over_symlink_loops_finds_each_file_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    files = [_tiff(data / "a" / "one.tif", 1), _tiff(data / "a" / "deep" / "two.tif", 2)]
    files.append(_tiff(data / "b" / "three.tif", 3))
    (data / "a" / "up").symlink_to("..")  # two loops: back to data/, and b/ -> a/ -> data/
    (data / "b" / "side").symlink_to("../a")
    started = time.monotonic()
    result = subprocess.run(
        _command("inspect", "--json", f"{data}/**/*.tif"),
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == EXIT_OK, result.stderr
    assert time.monotonic() - started < 60
    listed = [entry["url"] for entry in json.loads(result.stdout)["files"]]
    # pathlib's rglob does not follow directory symlinks: each real file once
    expected = sorted(p.resolve().as_posix() for p in data.rglob("*.tif"))
    assert sorted(url.removeprefix("file://") for url in listed) == expected
    assert len(expected) == len(files) == 3


def test_a_file_named_like_a_pattern_is_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bracketed = _tiff(tmp_path / "a[1].tif", 7)
    _tiff(tmp_path / "a1.tif", 9)  # what the name matches as a pattern
    assert expand_inputs([str(bracketed)]) == ["file://" + str(bracketed.resolve())]
    repo = tmp_path / "one.icechunk"
    assert main(["build", str(bracketed), "--out", str(repo)]) == EXIT_OK
    ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    np.testing.assert_array_equal(ds["band_data"].values[0], tifffile.imread(bracketed))

    questioned = _tiff(tmp_path / "a?b.tif", 5)
    _tiff(tmp_path / "axb.tif", 6)
    capsys.readouterr()
    assert main(["build", str(questioned), "--out", str(tmp_path / "q.icechunk")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "a?b.tif" in err and "axb.tif" not in err


# --------------------------------------------------------------------------- model calendars


def _julian(path: Path) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("time", 4)
        ds.createDimension("x", 3)
        time_ = ds.createVariable("time", "f8", ("time",))
        time_.units = "days since 1582-10-01"
        time_.calendar = "julian"
        time_[:] = np.arange(4)
        ds.createVariable("v", "f4", ("time", "x"))[:] = np.ones((4, 3), dtype="f4")
    return path


def test_inspect_describes_a_julian_calendar_file_without_cftime(tmp_path: Path) -> None:
    path = _julian(tmp_path / "julian.nc")
    no_cftime = "import sys; sys.modules['cftime'] = None; "  # an environment without it
    result = subprocess.run(
        _command("inspect", "--json", path, prelude=no_cftime),
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == EXIT_OK, result.stderr
    (group,) = json.loads(result.stdout)["files"][0]["groups"]
    shapes = {a["name"]: a["shape"] for a in group["arrays"]}
    with netCDF4.Dataset(path) as ds:
        assert shapes == {name: list(ds[name].shape) for name in ("v", "time")}


def test_build_without_cftime_names_the_file_and_the_package(tmp_path: Path) -> None:
    path = _julian(tmp_path / "julian.nc")
    no_cftime = "import sys; sys.modules['cftime'] = None; "
    argv = ["build", path, "--out", tmp_path / "r.icechunk", "--workers", "0"]
    result = subprocess.run(
        _command(*argv, prelude=no_cftime),
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == EXIT_IO, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("virtualizarr-fill: error:")]
    assert "julian.nc" in line and "'julian'" in line and "pip install cftime" in line
    assert "internal error" not in line and not (tmp_path / "r.icechunk").exists()


# --------------------------------------------------------------------------- progress


def test_progress_lines_reach_a_log_file_as_they_happen(tmp_path: Path) -> None:
    log_path = tmp_path / "stderr.log"
    with log_path.open("w") as log, Progress("parse", 3, "files", stream=log, log_interval=0):
        pass
    with log_path.open("w") as log:
        progress = Progress("parse", 3, "files", stream=log, log_interval=0)
        for done in (1, 2):
            progress.advance()
            lines = log_path.read_text().splitlines()  # read through another handle
            assert len(lines) == done and f"{done}/3 files" in lines[-1]
        progress.advance()
        progress.close()
    assert [line.split("]")[1].split()[0] for line in log_path.read_text().splitlines()] == [
        "1/3",
        "2/3",
        "3/3",
    ]


def test_a_build_logging_to_a_file_shows_each_parsed_file_while_it_runs(tmp_path: Path) -> None:
    first = _tiff(tmp_path / "first.tif", 1)
    blocked = tmp_path / "second.tif"
    os.mkfifo(blocked)  # opening it waits for a writer: the build stays in its parse phase
    log_path = tmp_path / "stderr.log"
    argv = ["build", first, blocked, "--concat-dim", "x", "--out", tmp_path / "r.icechunk"]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            _command(*argv, "--workers", "0"), env=_environment(), stderr=log
        )
    try:
        deadline = time.monotonic() + 120
        while "1/2 files" not in log_path.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()
            time.sleep(0.2)
        assert "1/2 files" in log_path.read_text()
        assert process.poll() is None  # still parsing
    finally:
        with blocked.open("wb"):  # an empty file ends the wait; the build then refuses it
            pass
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
