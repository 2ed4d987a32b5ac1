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


def _row_of_tiles(directory: Path, odd: dict[str, object]) -> list[Path]:
    """Five tiles in a row (rasterio), two bands and nodata 0, the first one with
    ``odd`` options (``count`` or ``nodata``) instead."""
    import rasterio
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(5):
        options: dict[str, object] = {"count": 2, "nodata": 0, **(odd if k == 0 else {})}
        path = directory / f"tile_{k}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=16, height=16, dtype="uint8", crs="EPSG:32633",
            transform=from_origin(500_000.0 + 160.0 * k, 4_000_000.0, 10.0, 10.0), **options,
        ) as dst:  # fmt: skip
            dst.write(np.full((dst.count, 16, 16), k + 1, dtype="uint8"))
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    ("odd", "workers", "expected"),
    [
        ({"count": 3}, "0", "has 3 bands, the other tiles (such as {other}) 2 bands"),
        ({"count": 3}, "2", "has 3 bands, the other tiles (such as {other}) 2 bands"),
        ({"nodata": 7}, "0", ": the nodata of 'band_data' is 7, in the other tiles (such as "
                             "{other}) 0"),
    ],
)  # fmt: skip
def test_the_tile_that_differs_from_the_majority_is_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    odd: dict[str, object],
    workers: str,
    expected: str,
) -> None:
    """The first of five tiles differs: it is the one named, not the four others."""
    paths = _row_of_tiles(tmp_path / "tiles", odd)
    out = tmp_path / "mosaic.json"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", workers)
    assert code == EXIT_BAD_INPUT, err
    line = _error_line(err)
    first = f"file://{paths[0].resolve()}"
    # (with workers, the example of the majority is the first tile of some batch)
    others = [expected.format(other=f"file://{p.resolve()}") for p in paths[1:]]
    assert any(f"{first}{'' if e.startswith(':') else ' '}{e}" in line for e in others), line
    assert line.count("tiles/tile_") == 2, line  # the odd tile and one of the others
    if "nodata" in odd:
        assert "--on-fill-conflict use_first" in line
        code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", workers,
                            "--on-fill-conflict", "use_first")  # fmt: skip
        assert code == EXIT_OK, err


def test_python_api_names_the_tile_that_differs(tmp_path: Path) -> None:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    registry = ObjectStoreRegistry({"file:///": LocalStore("/")})
    for odd, expected in (({"count": 1}, "has 1 band, "), ({"nodata": 7}, "the nodata of")):
        paths = _row_of_tiles(tmp_path / str(odd), odd)
        urls = [f"file://{p.resolve()}" for p in paths]
        with pytest.raises(virtualizarr_fill.IncompatibleArraysError) as caught:
            virtualizarr_fill.open_virtual_mosaic(urls, registry=registry)
        assert str(caught.value).startswith(urls[0]), caught.value
        assert expected in str(caught.value)
        assert urls[2] not in str(caught.value)
