"""Overlapping tiles with ``overlap="first"`` or ``"last"``: equal to
``rasterio.merge.merge(method=...)`` of the same files in the same (shuffled) order,
values, shape, transform and nodata, for overlaps of odd sizes that cut the tiles'
32-pixel internal tiles (the mosaic then stores the cut chunks' parts as values), and
DEM tiles sharing their edge row and column. Where rasterio would fill the winning
tile's nodata from another tile, the mosaic is refused.
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

rasterio = pytest.importorskip("rasterio")

from tests.assemble.test_assemble import REGISTRY  # noqa: E402

SIZE, BLOCK, RES = 100, 32, 0.001
ORIGIN = (10.0, 20.0)


def overlapping_tiles(
    directory: Path,
    overlap: int,
    *,
    dtype: str = "uint8",
    nodata: float | None = 255,
    holes: dict[tuple[int, int], tuple[slice, slice]] | None = None,
    seed: int = 7,
) -> list[Path]:
    """2 x 2 tiles of SIZE pixels overlapping their neighbours by ``overlap`` pixels
    (rows and columns), each of its own random values (so that which tile an overlap
    takes shows), in 32-pixel internal tiles, written in shuffled order. ``holes`` sets
    a window of a tile to nodata."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(overlap)
    step = SIZE - overlap
    paths = []
    for r in range(2):
        for c in range(2):
            values = rng.integers(0, 250, (2, SIZE, SIZE)).astype(dtype)
            if dtype.startswith("float"):
                values += rng.random((2, SIZE, SIZE)).astype(dtype)
            if holes and (r, c) in holes:
                values[(slice(None), *holes[(r, c)])] = nodata
            path = directory / f"tile_{r}_{c}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=SIZE, height=SIZE, count=2, dtype=dtype,
                crs="EPSG:4326",
                transform=from_origin(ORIGIN[0] + c * step * RES, ORIGIN[1] - r * step * RES,
                                      RES, RES),
                nodata=nodata, compress="deflate", tiled=True, blockxsize=BLOCK,
                blockysize=BLOCK,
            ) as dst:  # fmt: skip
                dst.write(values)
            paths.append(path)
    random.Random(seed).shuffle(paths)
    return paths


def mosaic(paths: list[Path], **kwargs: Any) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return virtualizarr_fill.open_virtual_mosaic(
            [f"file://{p}" for p in paths], REGISTRY, **kwargs
        )


def merged(paths: list[Path], method: str) -> tuple[np.ndarray, Any, Any]:
    """rasterio.merge.merge's values, transform and nodata."""
    from rasterio.merge import merge

    sources = [rasterio.open(p) for p in paths]
    try:
        values, transform = merge(sources, method=method)
        return values, transform, sources[0].nodata
    finally:
        for source in sources:
            source.close()


def assert_equals_rasterio_merge(result: xr.Dataset, paths: list[Path], method: str) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    expected, transform, nodata = merged(paths, method)
    values = read_manifest_array(result.band_data.data)
    assert values.shape == expected.shape
    np.testing.assert_array_equal(values, expected)
    assert result.rio.transform() == transform
    band_data = result.band_data
    assert band_data.attrs.get("_FillValue", band_data.encoding.get("_FillValue")) == nodata


@pytest.mark.parametrize("method", ["first", "last"])
@pytest.mark.parametrize("overlap", [5, 13, 37])
def test_overlaps_inside_chunks_equal_rasterio_merge(
    tmp_path: Path, overlap: int, method: str
) -> None:
    paths = overlapping_tiles(tmp_path, overlap)
    result = mosaic(paths, overlap=method)
    assert_equals_rasterio_merge(result, paths, method)
    # the kept part of the tiles right of or below an overlap starts inside a chunk
    assert result.band_data.encoding["materialised_chunks"] > 0
