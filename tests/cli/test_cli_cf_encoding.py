"""``build`` over netCDF-4 files whose CF encoding differs: refused in one line, before
anything is written; files packed alike read back as ``xr.open_mfdataset`` reads them;
descriptive attributes that differ are dropped and listed in the summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import virtualizarr_fill
from tests._cli import error_line as _error_line
from tests._cli import run_cli as _run
from tests._cli import snapshot_count as _snapshots
from tests.assemble.test_cf_encoding_conflicts import CONFLICTS, native, packed
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK


@pytest.mark.parametrize(
    ("encodings", "attribute", "values"),
    [c[1:] for c in CONFLICTS],
    ids=[c[0] for c in CONFLICTS],
)
def test_build_refuses_files_encoded_differently(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    encodings: list[dict[str, Any]],
    attribute: str,
    values: tuple[str, str],
) -> None:
    paths = packed(tmp_path / "data", encodings)
    repo = tmp_path / "x.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--concat-dim", "time", "--out", repo)
    assert code == EXIT_BAD_INPUT, err
    line = _error_line(err)
    assert "'v'" in line and f"{attribute} is" in line
    assert paths[0].name in line and paths[1].name in line
    assert values[0] in line and values[1] in line
    assert "separate stores" in line
    assert not repo.exists()


def test_build_of_files_packed_alike_reads_back_as_xarray_and_lists_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encodings = [
        {"scale_factor": 0.02, "add_offset": 100.0, "comment": f"run {k}"} for k in range(3)
    ]
    history = [{"history": f"written {k}", "title": "one series"} for k in range(3)]
    paths = packed(tmp_path / "data", encodings, dataset_attrs=history)
    repo = tmp_path / "x.icechunk"
    code, out, err = _run(capsys, "build", *paths, "--concat-dim", "time", "--out", repo)
    assert code == EXIT_OK, err
    assert "refusals:  0" in out
    assert "dropped attributes (they differ between files): v: comment; (dataset): history" in out
    read = virtualizarr_fill.open_icechunk(repo).load()
    expected = native(paths)
    assert read.v.dtype == expected.v.dtype
    np.testing.assert_array_equal(read.v.values, expected.v.values)
    assert "comment" not in read.v.attrs and read.attrs["title"] == "one series"


def test_append_of_a_file_packed_differently_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = {"scale_factor": 0.01, "add_offset": 0.0}
    paths = packed(tmp_path / "data", [first, first, {"scale_factor": 0.02, "add_offset": 0.0}])
    repo = tmp_path / "x.icechunk"
    code, _, err = _run(capsys, "build", *paths[:2], "--concat-dim", "time", "--out", repo)
    assert code == EXIT_OK, err
    before = _snapshots(repo)
    code, _, err = _run(capsys, "build", paths[2], "--out", repo, "--append")
    assert code == EXIT_BAD_INPUT, err
    line = _error_line(err)
    assert "'v'" in line and "scale_factor is 0.01" in line and "0.02" in line
    assert _snapshots(repo) == before
