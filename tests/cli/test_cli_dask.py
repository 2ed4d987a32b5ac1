"""``virtualizarr-fill build --dask-scheduler``: files parsed and merged on a dask
cluster of worker processes (started here, on loopback), with the same results,
reports and one-line errors as a build in one process.

Expected values come from tifffile (the mosaic on a cluster is in test_cli_build.py);
stores are real Icechunk repositories on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

import virtualizarr_fill
from tests._manifest_builders import concat_fixtures
from tests.cli.test_cli_build import _error_line, _run
from virtualizarr_fill.assemble import collecting
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK

__all__ = ["concat_fixtures"]

SHORT = ["strip_short_0", "strip_short_1", "strip_short_2"]


@pytest.fixture(scope="module")
def scheduler(local_cluster: Any) -> str:
    return str(local_cluster.scheduler_address)


@pytest.fixture(autouse=True)
def binary_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two results per merge task, so that a few files make a tree of several levels."""
    monkeypatch.setattr(collecting, "FAN_IN", 2)


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "not_a_tiff.tif"
    path.write_bytes(b"not an image at all" * 10)
    return path


def _series(concat_fixtures: dict[str, Path], names: list[str]) -> list[Path]:
    return [concat_fixtures[n] for n in names]


def test_series_on_the_cluster_equals_tifffile(
    concat_fixtures: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scheduler: str,
) -> None:
    files = _series(concat_fixtures, SHORT)
    repo = tmp_path / "series.icechunk"
    args = ["build", *files, "--concat-dim", "y", "--out", repo]
    code, out, err = _run(capsys, *args, "--dask-scheduler", scheduler)
    assert code == EXIT_OK, err
    assert "files:     3 virtualized" in out
    stored = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    expected = np.concatenate([tifffile.imread(p) for p in files])[np.newaxis]
    np.testing.assert_array_equal(stored["band_data"].values, expected)


@pytest.mark.parametrize("skip_bad", [False, True], ids=["stops", "skip-bad"])
@pytest.mark.parametrize("position", [0, 2], ids=["first", "later"])
def test_a_bad_file_is_named(
    concat_fixtures: dict[str, Path],
    bad_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scheduler: str,
    position: int,
    skip_bad: bool,
) -> None:
    """A file that fails stops the build naming it, or is listed and left out with
    --skip-bad, whether it is the file parsed first or one parsed in a batch."""
    good = _series(concat_fixtures, SHORT)
    files = [*good]
    files.insert(position, bad_file)
    repo = tmp_path / "repo"
    args = ["build", *files, "--concat-dim", "y", "--out", repo, "--dask-scheduler", scheduler]
    code, out, err = _run(capsys, *args, *(["--skip-bad"] if skip_bad else []))
    problem = f"{bad_file.as_uri()}: unrecognised file format"
    if not skip_bad:
        assert code == EXIT_BAD_INPUT
        line = _error_line(err)
        assert problem in line and "--skip-bad" in line
        assert not repo.exists() and out == ""
        return
    assert code == EXIT_OK, err
    assert "files:     3 virtualized, 1 skipped" in out and problem in out
    stored = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    expected = np.concatenate([tifffile.imread(p) for p in good])[np.newaxis]
    np.testing.assert_array_equal(stored["band_data"].values, expected)


def test_files_that_cannot_be_combined_fail_in_one_line(
    concat_fixtures: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scheduler: str,
) -> None:
    files = _series(concat_fixtures, ["strip_short_0", "strip_short_1", "strip_short_zlib_1"])
    repo = tmp_path / "r"
    args = ["build", *files, "--concat-dim", "y", "--out", repo, "--dask-scheduler", scheduler]
    code, _, err = _run(capsys, *args)
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "cannot be combined along 'y'" in line and "strip_short_zlib_1.tif" in line
    assert "different codecs" in line
    assert not repo.exists()
