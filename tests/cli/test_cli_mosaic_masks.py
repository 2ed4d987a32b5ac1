"""``virtualizarr-fill build`` of tiles with internal masks: one line naming the tile
where a mask hides data (which rasterio.merge writes as nodata), and a store equal to
``rasterio.merge.merge`` where the masks hide only nodata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import virtualizarr_fill
from tests.assemble.test_mosaic_masks import SIZE, masked_tiles
from tests.assemble.test_mosaic_overlaps import merged
from tests.cli.test_cli_build import _error_line, _run
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK

pytest.importorskip("rasterio")


@pytest.mark.parametrize("flags", [[], ["--overlap", "first"]], ids=["plain", "overlap"])
def test_build_refuses_a_mask_hiding_data_and_builds_one_hiding_nodata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    step = SIZE if not flags else SIZE - 9
    paths = masked_tiles(tmp_path / "data", step=step, masked=(1,))
    out = tmp_path / "refused.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", "0", *flags)
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert f"{paths[1]} has an internal mask, which rasterio.merge applies" in line
    assert not out.exists()

    paths = masked_tiles(tmp_path / "nodata", step=step, hidden_data=False)
    out = tmp_path / "mosaic.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", "0", *flags)
    assert code == EXIT_OK, err
    ds = virtualizarr_fill.open_icechunk(out, mask_and_scale=False)
    expected, transform, _ = merged(paths, "first")
    np.testing.assert_array_equal(ds["band_data"].values, expected)
    assert ds.rio.transform() == transform
