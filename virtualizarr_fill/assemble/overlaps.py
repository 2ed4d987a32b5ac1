"""Overlapping tiles, resolved as ``rasterio.merge.merge`` resolves them, or refused.

rasterio.merge paints the tiles in the order given. With ``method="first"`` a tile's
pixel is copied only where the mosaic still holds the nodata value (the first tile's
nodata, or 0 when it has none) and the pixel is not the tile's own nodata; with
``method="last"`` wherever the pixel is not the tile's nodata. So the tile given
earliest (latest) wins an overlap, except at its nodata pixels (and, with ``"first"``,
at pixels equal to the mosaic's nodata), which the other tiles fill. A virtual mosaic
reads each pixel from one tile: at build time the overlap windows of all the tiles
covering it are read and rasterio's rule applied; where it takes any pixel from another
tile than the winner, the mosaic is refused, naming both tiles, rather than differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import zarr
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore

from virtualizarr_fill.assemble.placement import Layout, Placed, X, Y
from virtualizarr_fill.errors import IncompatibleArraysError


def read_window(array: ManifestArray, registry: Any, window: tuple[slice, ...]) -> np.ndarray:
    """The stored values of ``window`` of ``array``, read through zarr (as a user's read
    decodes them, before CF decoding)."""
    store = ManifestStore(ManifestGroup(arrays={"a": array}), registry=registry)
    return np.asarray(zarr.open_array(store, path="a", mode="r", zarr_format=3)[window])


def tile_bounds(
    tile: Placed, dims: Sequence[str], shape: Sequence[int], rows: tuple[int, int],
    cols: tuple[int, int],
) -> list[tuple[int, int]]:  # fmt: skip
    """The window (start, stop per axis) of the mosaic's ``rows`` and ``cols`` in the
    tile's own pixels."""
    bounds = []
    for dim, n in zip(dims, shape, strict=True):
        if dim == Y:
            bounds.append((rows[0] - tile.row, rows[1] - tile.row))
        elif dim == X:
            bounds.append((cols[0] - tile.col, cols[1] - tile.col))
        else:
            bounds.append((0, n))
    return bounds


def _nodata(tile: Placed, name: str) -> float | None:
    """The tile's GDAL nodata value, as rasterio reads it (a float), or None."""
    attributes = tile.part.var_attrs.get(name, {})
    value = attributes.get("gdal_no_data")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _is(values: np.ndarray, nodata: Any, *, close: bool) -> np.ndarray:
    """Pixels equal to ``nodata`` as rasterio compares them (NaN by ``isnan``, floats of
    the mosaic by ``isclose`` when ``close``)."""
    if nodata is None:
        return np.zeros(values.shape, dtype=bool)
    if isinstance(nodata, float) and math.isnan(nodata):
        return np.isnan(values)
    if close and not np.issubdtype(values.dtype, np.integer):
        return np.isclose(values, nodata)
    return np.asarray(values == nodata)


def check_overlaps(grid: Layout, name: str, dims: Sequence[str], shape: Sequence[int],
                   registry: Any, first_tile: Placed) -> None:  # fmt: skip
    """Refuse where rasterio.merge would take a pixel of an overlap from another tile
    than the one the mosaic reads (see the module)."""
    mosaic_nodata = _nodata(first_tile, name)
    start = 0 if mosaic_nodata is None else mosaic_nodata
    for (i, j), tiles in sorted(grid.covering.items()):
        rows = (grid.row_edges[i], grid.row_edges[i + 1])
        cols = (grid.col_edges[j], grid.col_edges[j + 1])
        winner = grid.cells[(i, j)]
        values = {}
        for tile in tiles:
            bounds = tile_bounds(tile, dims, shape, rows, cols)
            array = tile.part.arrays[name]
            values[id(tile)] = read_window(array, registry, tuple(slice(a, b) for a, b in bounds))
        merged = np.full(values[id(winner)].shape, start, dtype=values[id(winner)].dtype)
        source = np.full(merged.shape, -1)
        for index, tile in enumerate(tiles):
            data = values[id(tile)]
            copy = ~_is(data, _nodata(tile, name), close=False)
            if grid.overlap == "first":
                copy &= _is(merged, start, close=True)
            np.copyto(merged, data, where=copy)
            source[copy] = index
        ours = values[id(winner)]
        same = (merged == ours) | (_is(ours, _nodata(winner, name), close=False) & (source < 0))
        if ours.dtype.kind in "fc":
            same |= np.isnan(merged) & np.isnan(ours)
        if not same.all():
            other = tiles[int(source[~same].flat[0])]
            raise IncompatibleArraysError(
                f"{winner.part.url} and {other.part.url} overlap in rows {rows[0]}-{rows[1] - 1}, "
                f"columns {cols[0]}-{cols[1] - 1} of the mosaic, where rasterio.merge "
                f'(method="{grid.overlap}") takes {int((~same).sum())} pixels of '
                f"{name!r} from {other.part.url} ({winner.part.url} holds nodata there); "
                "a virtual mosaic reads each part of an overlap from one tile: fill the "
                "nodata, or merge these tiles with rasterio"
            )


__all__ = ["check_overlaps", "read_window", "tile_bounds"]
