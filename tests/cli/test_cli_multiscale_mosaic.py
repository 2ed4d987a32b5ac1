"""``virtualizarr-fill build --overviews`` of shuffled COG tiles without ``--concat-dim``:
every level placed as the full resolution is (snapped origins, holes with
``--allow-gaps``, overlaps with ``--overlap``), each equal to ``rasterio.merge.merge`` of
that overview level of the tiles (``rasterio.open(path, overview_level=k)``), and
``verify`` passing on every level; a level whose tiles leave the grid is refused naming
the level."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import virtualizarr_fill
from tests.cli.test_cli_build import _error_line, _run
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK

rasterio = pytest.importorskip("rasterio")

SIZE, RES, FACTORS = 64, 10.0, [2, 4]


def _tiles(directory: Path, overlap: int, *, drop: tuple[int, int] | None = None) -> list[Path]:
    """3 x 2 tiles of SIZE pixels overlapping by ``overlap`` pixels, each of its own
    random values, with overviews (``build_overviews``), written in shuffled order."""
    from rasterio.enums import Resampling
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(overlap)
    step = SIZE - overlap
    paths = []
    for r in range(2):
        for c in range(3):
            values = rng.integers(0, 250, (2, SIZE, SIZE)).astype("uint8")
            if (r, c) == drop:
                continue
            path = directory / f"tile_{r}_{c}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=SIZE, height=SIZE, count=2, dtype="uint8",
                crs="EPSG:32633", nodata=255, tiled=True, blockxsize=16, blockysize=16,
                compress="deflate",
                transform=from_origin(500_000.0 + c * step * RES, 4_000_000.0 - r * step * RES,
                                      RES, RES),
            ) as dst:  # fmt: skip
                dst.write(values)
                dst.build_overviews(FACTORS, Resampling.nearest)
            paths.append(path)
    random.Random(5).shuffle(paths)
    return paths


def _merged(paths: list[Path], level: int, method: str) -> tuple[np.ndarray, object]:
    from rasterio.merge import merge

    overview = None if level == 0 else level - 1
    sources = [rasterio.open(p, overview_level=overview) for p in paths]
    try:
        return merge(sources, method=method)
    finally:
        for source in sources:
            source.close()


@pytest.mark.parametrize(
    ("overlap", "flags", "method", "drop"),
    [
        (0, ["--mosaic"], "first", None),
        (8, ["--overlap", "first"], "first", None),
        (8, ["--overlap", "last"], "last", None),
        (0, ["--allow-gaps"], "first", (1, 1)),
    ],
)
def test_every_level_equals_rasterio_merge_of_that_overview_level(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    overlap: int,
    flags: list[str],
    method: str,
    drop: tuple[int, int] | None,
) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    paths = _tiles(tmp_path / "tiles", overlap, drop=drop)
    out = tmp_path / "pyramid.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--overviews", *flags)
    assert code == EXIT_OK, err
    for level in range(len(FACTORS) + 1):
        ds = virtualizarr_fill.open_icechunk(out, group=str(level), mask_and_scale=False)
        expected, transform = _merged(paths, level, method)
        assert ds["band_data"].shape == expected.shape, level
        np.testing.assert_array_equal(ds["band_data"].values, expected, err_msg=str(level))
        assert ds.rio.transform() == transform, level
    code, out_text, err = _run(capsys, "verify", out, "--against", *paths)
    assert code == EXIT_OK, out_text + err
    assert f"of {len(paths)} files: all equal" in out_text


def test_a_level_whose_tiles_leave_the_grid_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 6-pixel overlap is 1.5 pixels at the 4x overview: its tiles are off its grid."""
    paths = _tiles(tmp_path / "tiles", 6)
    out = tmp_path / "pyramid.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--overviews", "--overlap", "first")
    assert code == EXIT_BAD_INPUT, err
    line = _error_line(err)
    assert "level 2 of the tiles: " in line and "is not on the grid of" in line, line
    assert not out.exists()
