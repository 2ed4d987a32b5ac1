"""Every example in examples/ runs to success on the small data it generates.

Each example is run as ``python examples/NAME.py OUT_DIR`` would run it (its ``__main__``
block, in this process to save interpreter start-up); the examples compare what they
read back with tifffile, h5netcdf and rioxarray themselves and exit non-zero on any
difference. The tests also check the files the examples promise to leave behind.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run_example(name: str, out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / name), str(out_dir)])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return int(exit_info.value.code or 0)


def test_geotiffs_to_icechunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "geotiffs"
    assert _run_example("geotiffs_to_icechunk.py", out, monkeypatch) == 0
    printed = capsys.readouterr().out
    assert "FAIL" not in printed and printed.count("OK") == 3
    tiles = sorted((out / "tiles").glob("*.tif"))
    assert len(tiles) == 8
    # the example's premise: every tile has a partial last strip, stored short or padded
    stored_rows = set()
    for tile in tiles:
        with tifffile.TiffFile(tile) as tif:
            page = tif.pages.first
            assert page.imagelength % page.rowsperstrip
            stored_rows.add(int(page.databytecounts[-1]) // (page.imagewidth * 4))
    assert stored_rows == {45 % 8, 8}
    png = (out / "mosaic.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
    assert (out / "mosaic.icechunk").is_dir()


def test_netcdf_timeseries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import h5py

    out = tmp_path / "netcdf"
    assert _run_example("netcdf_timeseries.py", out, monkeypatch) == 0
    printed = capsys.readouterr().out
    assert "FAIL" not in printed and printed.count("OK") == 2
    files = sorted((out / "series").glob("*.nc"))
    with h5py.File(files[0]) as f:  # the premise: time length not a chunk multiple
        assert f["tas"].shape[0] % f["tas"].chunks[0]
    assert (out / "series.icechunk").is_dir() and (out / "series.json").is_file()


def test_rioxarray_and_dask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rio"
    assert _run_example("rioxarray_and_dask.py", out, monkeypatch) == 0
    printed = capsys.readouterr().out
    assert "FAIL" not in printed and printed.count("OK") == 8
    # dask chunks are the tiles' strips: 5 of 8 rows and a 5-row last strip per tile
    line = next(x for x in printed.splitlines() if x.startswith("dask chunks along y"))
    assert line.endswith(str(((8,) * 5 + (5,)) * 4))
    assert np.isfinite(float(printed.count("CRS EPSG:32633")))
