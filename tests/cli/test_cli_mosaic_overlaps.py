"""``virtualizarr-fill build --overlap first|last`` of overlapping tiles: the store
equals ``rasterio.merge.merge(method=...)`` read back through Icechunk and kerchunk with
xarray; without the flag, one line naming both tiles and the flag."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import virtualizarr_fill
from tests.assemble.test_mosaic_overlaps import merged, overlapping_tiles
from tests.cli.test_cli_build import _error_line, _run
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE


@pytest.mark.parametrize(("suffix", "method"), [("icechunk", "first"), ("json", "last")])
def test_overlapping_tiles_build_with_overlap_equal_rasterio_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, method: str
) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    paths = overlapping_tiles(tmp_path / "tiles", 13)
    out = tmp_path / f"mosaic.{suffix}"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", "0")
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "overlap by" in line and "--overlap first|last" in line
    assert not out.exists()

    code, summary, err = _run(
        capsys, "build", *paths, "--out", out, "--overlap", method, "--workers", "0"
    )
    assert code == EXIT_OK, err
    assert "stored as values where tiles overlap inside a chunk" in summary
    if suffix == "icechunk":
        ds = virtualizarr_fill.open_icechunk(out, mask_and_scale=False)
    else:
        from tests._manifest_builders import kerchunk_read

        ds = kerchunk_read(str(out))
    expected, transform, _ = merged(paths, method)
    np.testing.assert_array_equal(ds["band_data"].values, expected)  # no nodata pixels
    assert ds.rio.transform() == transform


def test_overlap_with_concat_dim_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = overlapping_tiles(tmp_path / "tiles", 5)
    code, _, err = _run(
        capsys, "build", *paths, "--out", tmp_path / "m.icechunk", "--overlap", "first",
        "--concat-dim", "x",
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert "--overlap" in _error_line(err)


def test_overlap_with_append_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = overlapping_tiles(tmp_path / "tiles", 5)
    code, _, err = _run(
        capsys, "build", *paths, "--out", tmp_path / "m.icechunk", "--overlap", "first",
        "--append",
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert "drop --overlap" in _error_line(err)
