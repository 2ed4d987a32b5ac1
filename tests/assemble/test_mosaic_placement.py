"""Mosaics of the tile sets users have: origins off the exact grid by float noise or a
fraction of a pixel, missing tiles, tiles of another resolution. Every accepted set
must equal ``rasterio.merge.merge`` of the same files (values, shape, transform,
nodata); every refused set gets one line naming the odd tile.

The tiles are the "dangling pixel" case: 3 x 3 geographic tiles of 100 pixels in
32-pixel internal tiles (100 is no multiple of 32), written in shuffled order.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import virtualizarr_fill
from tests._manifest_builders import read_manifest_array
from tests._native_references import rasterio_merge
from virtualizarr_fill import IncompatibleArraysError

rasterio = pytest.importorskip("rasterio")

from tests.assemble.test_assemble import REGISTRY  # noqa: E402

SIZE, BLOCK, RES = 100, 32, 0.001
ORIGIN = (10.0, 20.0)
NODATA = 255


def _tiles(
    directory: Path,
    *,
    shift: dict[tuple[int, int], tuple[float, float]] | None = None,
    drop: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset(),
    res: dict[tuple[int, int], float] | None = None,
) -> list[Path]:
    """3 x 3 tiles ``tile_{row}_{col}.tif`` (EPSG:4326, uint8, nodata 255), shuffled.
    ``shift`` moves a tile by (columns, rows) in pixels (east, south), ``drop`` leaves
    tiles out, ``res`` gives a tile another pixel size."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(35)
    full = rng.integers(0, 250, (2, 3 * SIZE, 3 * SIZE)).astype("uint8")
    paths = []
    for r in range(3):
        for c in range(3):
            if (r, c) in drop:
                continue
            dx, dy = (shift or {}).get((r, c), (0.0, 0.0))
            pixel = (res or {}).get((r, c), RES)
            path = directory / f"tile_{r}_{c}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=SIZE, height=SIZE, count=2, dtype="uint8",
                crs="EPSG:4326",
                transform=from_origin(
                    ORIGIN[0] + (c * SIZE + dx) * RES, ORIGIN[1] - (r * SIZE + dy) * RES,
                    pixel, pixel,
                ),
                nodata=NODATA, compress="deflate", tiled=True, blockxsize=BLOCK,
                blockysize=BLOCK,
            ) as dst:  # fmt: skip
                dst.write(full[:, r * SIZE : (r + 1) * SIZE, c * SIZE : (c + 1) * SIZE])
            paths.append(path)
    random.Random(7).shuffle(paths)
    return paths


def _mosaic(paths: list[Path], **kwargs: Any) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return virtualizarr_fill.open_virtual_mosaic(
            [f"file://{p}" for p in paths], REGISTRY, **kwargs
        )


def _assert_equals_rasterio_merge(mosaic: xr.Dataset, paths: list[Path]) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    merged, transform = rasterio_merge(paths)
    values = read_manifest_array(mosaic.band_data.data)
    assert values.shape == merged.shape
    np.testing.assert_array_equal(values, merged)
    assert mosaic.rio.transform() == transform
    assert mosaic.rio.transform(recalc=True).almost_equals(transform, precision=1e-12)
    band_data = mosaic.band_data
    assert band_data.attrs.get("_FillValue", band_data.encoding.get("_FillValue")) == NODATA


# --------------------------------------------------------------------------- tolerance

#: 1e-12 degrees, as tile generators and text round trips leave it, in pixels.
NOISE = 1e-12 / RES


@pytest.mark.parametrize(
    "shift",
    [
        {(0, 0): (NOISE, -NOISE), (1, 1): (-NOISE, NOISE), (2, 2): (NOISE, NOISE)},
        {(1, 1): (0.4, 0.0), (0, 2): (0.0, 0.4), (2, 0): (0.25, 0.3)},
        {(0, 0): (0.4, 0.4)},
        {(2, 2): (0.4, 0.4)},
    ],
    ids=["noise-1e-12", "0.4px-inner", "0.4px-top-left", "0.4px-bottom-right"],
)
def test_origins_off_the_grid_are_snapped_as_rasterio_merge(
    tmp_path: Path, shift: dict[tuple[int, int], tuple[float, float]]
) -> None:
    paths = _tiles(tmp_path, shift=shift)
    _assert_equals_rasterio_merge(_mosaic(paths), paths)


@pytest.mark.parametrize(
    ("shift", "message"),
    [
        ((0.6, 0.0), r"tile_1_1.tif is not on the grid of .*tile_\d_0.tif along 'x': \+0.60 px"),
        ((0.0, 0.6), r"tile_1_1.tif is not on the grid of .*tile_0_\d.tif along 'y': \+0.60 px"),
        # rasterio.merge would move this tile a whole pixel west (floor(v + 0.1))
        ((-0.4, 0.0), r"tile_1_1.tif is not on the grid of .*along 'x': \+0.60 px"),
    ],
)
def test_origins_farther_off_are_refused_naming_the_tile(
    tmp_path: Path, shift: tuple[float, float], message: str
) -> None:
    paths = _tiles(tmp_path, shift={(1, 1): shift})
    with pytest.raises(IncompatibleArraysError, match=message) as refused:
        _mosaic(paths)
    assert "\n" not in str(refused.value)


def test_a_tile_of_another_resolution_is_named_with_clean_numbers(tmp_path: Path) -> None:
    paths = _tiles(tmp_path, res={(2, 2): 0.0010005})
    with pytest.raises(IncompatibleArraysError) as refused:
        _mosaic(paths)
    message = str(refused.value)
    assert message.startswith(f"file://{tmp_path}/tile_2_2.tif has a resolution of 0.0010005")
    assert "the other tiles (such as file://" in message and " 0.001;" in message


def test_resolutions_within_the_relative_tolerance_are_one(tmp_path: Path) -> None:
    paths = _tiles(tmp_path, res={(1, 2): RES * (1 + 1e-9)})
    _assert_equals_rasterio_merge(_mosaic(paths), paths)


# --------------------------------------------------------------------------- holes

HOLES = {
    "centre": {(1, 1)},
    "corner": {(0, 0)},
    "row": {(1, 0), (1, 1), (1, 2)},
    "scattered": {(0, 2), (2, 0), (1, 1)},
}


@pytest.mark.parametrize("case", list(HOLES))
def test_holes_read_as_nodata_with_allow_gaps(tmp_path: Path, case: str) -> None:
    paths = _tiles(tmp_path, drop=HOLES[case])
    _assert_equals_rasterio_merge(_mosaic(paths, allow_gaps=True), paths)


def test_a_hole_is_refused_naming_where_and_the_keyword_that_helps(tmp_path: Path) -> None:
    paths = _tiles(tmp_path, drop={(1, 1)})
    with pytest.raises(IncompatibleArraysError) as refused:
        _mosaic(paths)
    message = str(refused.value)
    assert message.startswith("no tile covers rows 100-199, columns 100-199 of the mosaic")
    assert "tile_1_0.tif" in message and "allow_gaps=True" in message
    _mosaic(paths, allow_gaps=True)  # the keyword the message names exists and helps


def test_overlapping_tiles_are_refused_naming_both(tmp_path: Path) -> None:
    paths = _tiles(tmp_path, shift={(1, 1): (-37.0, 0.0)})
    with pytest.raises(IncompatibleArraysError, match=r"overlap by 100 x 37 pixels") as refused:
        _mosaic(paths)
    assert "tile_1_0.tif" in str(refused.value) and "tile_1_1.tif" in str(refused.value)


# --------------------------------------------------------------------------- stores


def test_snapped_mosaic_with_holes_reads_back_through_icechunk_and_kerchunk(
    tmp_path: Path,
) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    from tests._manifest_builders import (
        icechunk_read,
        icechunk_repo,
        icechunk_write,
        kerchunk_read,
    )

    data = tmp_path / "data"
    paths = _tiles(data, shift={(0, 1): (NOISE, 0.0), (2, 1): (0.4, 0.0)}, drop={(1, 1), (2, 2)})
    mosaic = _mosaic(paths, allow_gaps=True)
    merged, transform = rasterio_merge(paths)

    repo = icechunk_repo(tmp_path / "repo", data)
    icechunk_write(repo, mosaic)
    refs = tmp_path / "refs.json"
    virtualizarr_fill.to_kerchunk(mosaic, refs, format="json")
    for read in (icechunk_read(repo), kerchunk_read(str(refs))):
        # xarray masks nodata: the holes and the tiles' own nodata pixels read as NaN
        values = read.band_data.values
        np.testing.assert_array_equal(np.isnan(values), merged == NODATA)
        np.testing.assert_array_equal(np.where(np.isnan(values), NODATA, values), merged)
        assert read.rio.transform() == transform


def test_a_tile_cut_by_other_tiles_edges_is_refused_as_no_grid(tmp_path: Path) -> None:
    """Row 0 of one tile twice as wide above two tiles: the wide tile would have to be
    split inside its chunks."""
    import rioxarray  # noqa: F401  (the .rio accessor)
    from rasterio.transform import from_origin

    tmp_path.mkdir(exist_ok=True)
    data = np.ones((1, SIZE, 2 * SIZE), "uint8")
    paths = []
    for name, left, top, width in [
        ("wide", 0, 0, 2 * SIZE),
        ("low_0", 0, SIZE, SIZE),
        ("low_1", SIZE, SIZE, SIZE),
    ]:
        path = tmp_path / f"{name}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=width, height=SIZE, count=1, dtype="uint8",
            crs="EPSG:4326",
            transform=from_origin(ORIGIN[0] + left * RES, ORIGIN[1] - top * RES, RES, RES),
            tiled=True, blockxsize=BLOCK, blockysize=BLOCK,
        ) as dst:  # fmt: skip
            dst.write(data[:, :, :width])
        paths.append(path)
    with pytest.raises(IncompatibleArraysError, match=r"do not form a grid: .*wide.tif") as no:
        _mosaic(paths)
    assert '--overlap first|last (overlap="first")' in str(no.value)
    # what the message suggests: the wide tile cut inside its chunks, where the others meet
    cut = _mosaic(paths, overlap="first")
    assert cut.band_data.encoding["materialised_chunks"] > 0
    merged, transform = rasterio_merge(paths)
    np.testing.assert_array_equal(read_manifest_array(cut.band_data.data), merged)
    assert cut.rio.transform() == transform


def test_a_south_up_tile_is_refused_as_rasterio_merge_refuses_it(tmp_path: Path) -> None:
    from rasterio.transform import Affine

    paths = _tiles(tmp_path, drop={(2, 2)})
    flipped = tmp_path / "flipped.tif"
    with rasterio.open(
        flipped, "w", driver="GTiff", width=SIZE, height=SIZE, count=2, dtype="uint8",
        crs="EPSG:4326", nodata=NODATA,
        transform=Affine(RES, 0, ORIGIN[0] + 2 * SIZE * RES, 0, RES, ORIGIN[1] - 3 * SIZE * RES),
    ) as dst:  # fmt: skip
        dst.write(np.zeros((2, SIZE, SIZE), "uint8"))
    with pytest.raises(IncompatibleArraysError, match=r"flipped.tif: a flipped transform"):
        _mosaic([*paths, flipped])


def test_a_tile_of_another_data_type_is_named_not_the_first_files(tmp_path: Path) -> None:
    paths = _tiles(tmp_path)
    odd = tmp_path / "tile_0_0.tif"  # the top-left tile, which the mosaic starts from
    with rasterio.open(odd) as src:
        profile, data = src.profile, src.read()
    profile.update(dtype="uint16")
    with rasterio.open(odd, "w", **profile) as dst:
        dst.write(data.astype("uint16"))
    paths = sorted(paths, key=lambda p: p.name)  # the odd tile given first
    with pytest.raises(IncompatibleArraysError) as refused:
        _mosaic(paths)
    message = str(refused.value)
    assert message.startswith(f"file://{odd}: 'band_data' is uint16, in the other tiles")
    assert "uint8; one virtual array has one data type" in message
