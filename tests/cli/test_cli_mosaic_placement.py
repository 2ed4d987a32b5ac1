"""``virtualizarr-fill build`` of the tile sets users have: origins off the exact grid
by float noise or a fraction of a pixel, and missing tiles (``--allow-gaps``). The store
must equal ``rasterio.merge.merge`` of the tiles and ``verify`` must pass on it; the
refusals are one line naming the tile or the hole and the flag that helps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import virtualizarr_fill
from tests._native_references import rasterio_merge
from tests.assemble.test_mosaic_placement import NODATA, NOISE, _tiles
from tests.cli.test_cli_build import _error_line, _run
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK

SHIFT = {(0, 0): (NOISE, -NOISE), (1, 2): (0.4, 0.0), (2, 1): (0.0, 0.3)}


@pytest.mark.parametrize("suffix", ["icechunk", "json"])
def test_snapped_tiles_with_a_hole_build_with_allow_gaps_and_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    paths = _tiles(tmp_path / "tiles", shift=SHIFT, drop={(1, 1)})
    out = tmp_path / f"mosaic.{suffix}"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", "0")
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "no tile covers rows 100-199, columns 100-199 of the mosaic" in line
    assert "--allow-gaps" in line
    assert not out.exists()

    code, _, err = _run(capsys, "build", *paths, "--out", out, "--allow-gaps", "--workers", "0")
    assert code == EXIT_OK, err
    if suffix == "icechunk":
        ds = virtualizarr_fill.open_icechunk(out, mask_and_scale=False)
    else:
        from tests._manifest_builders import kerchunk_read

        ds = kerchunk_read(str(out))
    merged, transform = rasterio_merge(paths)
    values = ds["band_data"].values
    if suffix == "json":  # xarray masks the nodata (the hole included)
        values = np.where(np.isnan(values), NODATA, values)
    np.testing.assert_array_equal(values, merged)
    assert ds.rio.transform() == transform

    # verify places each tile by its own coordinates, within the half pixel it was snapped
    code, out_text, err = _run(capsys, "verify", out, "--against", *paths)
    assert code == EXIT_OK, out_text + err
    assert "arrays of 8 files: all equal" in out_text


def test_a_tile_farther_off_the_grid_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _tiles(tmp_path / "tiles", shift={(2, 2): (0.0, 0.6)})
    code, _, err = _run(capsys, "build", *paths, "--out", tmp_path / "m.icechunk")
    assert code == EXIT_BAD_INPUT
    assert "tile_2_2.tif is not on the grid of" in _error_line(err)
    assert "along 'y': +0.60 px" in _error_line(err)
