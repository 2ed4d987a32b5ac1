"""Where each GeoTIFF tile of a mosaic goes, by ``rasterio.merge.merge``'s rules.

The mosaic's grid is the one ``rasterio.merge.merge`` computes for the same tiles: its
resolution the first tile's, its origin the west-most left edge and north-most top edge
of all tiles, its size the union bounding box in pixels, rounded. A tile's offset on
that grid is rasterio's too: the fractional offset ``v`` in pixels becomes
``floor(v + 0.1)`` (rasterio's ``win_align``, from ``gdal_merge.py``).

Tile generators and text round trips leave origins a few millionths of a pixel off the
exact grid, so a tile is accepted when it lies less than :data:`SNAP` (half a pixel) to
the right of (or below) the pixel edge rasterio places it on, and at most 0.1 pixel to
the left (above): over that whole range rasterio's rounding and rounding to the nearest
pixel agree, so the tile is where both rasterio and GDAL's VRT put it. Farther off, the
tile does not sit on the mosaic's pixels and is refused, naming it and its offset in
pixels. Resolutions are compared with the relative tolerance :data:`RESOLUTION_RTOL`.

The tiles' edges cut the mosaic into rows and columns of cells; each tile must fill
whole cells. A cell that no tile covers is a hole (refused unless ``allow_gaps``, then
read as nodata, as rasterio fills it); a cell that two tiles cover is an overlap,
refused naming both tiles unless an ``overlap`` method says which tile it takes, with
rasterio.merge's names: ``"first"``, the tile given earliest, or ``"last"``, the one
given latest. With a method, a tile may also be cut by other tiles' edges: each cell
takes a window of its tile (see :mod:`.windows`).
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from virtualizarr_fill.assemble.parts import FilePart
from virtualizarr_fill.errors import IncompatibleArraysError

X, Y = "x", "y"
GRID_MAPPING = "spatial_ref"

#: A tile whose origin lies less than this fraction of a pixel right of (below) the
#: pixel edge rasterio.merge rounds it to, or at most 0.1 pixel left of (above) it, is
#: snapped to that edge: in this range ``floor(v + 0.1)`` (rasterio) and rounding to the
#: nearest pixel (GDAL) agree.
SNAP = 0.5
#: Below this offset (in pixels) rasterio.merge's rounding moves a tile one pixel left.
_ROUNDING_SLACK = 0.1
#: Resolutions equal within this relative difference are one resolution: at most 0.04
#: pixel of drift across a 40000-pixel tile, far more than text round trips leave.
RESOLUTION_RTOL = 1e-6

AFFINE = tuple[float, float, float, float, float, float]
#: Which tile an overlap takes, by rasterio.merge's method names.
Overlap = Literal["first", "last"]


def number(value: float) -> str:
    """``value`` to ten significant digits: no float noise (``10.9995``, not
    ``10.999500000000001``)."""
    return f"{value:.10g}"


@dataclass(frozen=True, slots=True)
class Placed:
    """One tile on the mosaic's grid: its offset and size in the mosaic's pixels."""

    part: FilePart
    row: int
    col: int
    height: int
    width: int


@dataclass(frozen=True)
class Layout:
    """The mosaic: its transform (``a, b, c, d, e, f``), shape, the row and column
    edges (pixel offsets, from 0 to the height/width) and the tile of each cell (None
    for a hole); with an ``overlap`` method, the tiles covering each cell that more than
    one covers, in the order given."""

    transform: AFFINE
    height: int
    width: int
    row_edges: list[int]
    col_edges: list[int]
    cells: dict[tuple[int, int], Placed]
    overlap: Overlap | None = None
    covering: dict[tuple[int, int], list[Placed]] = field(default_factory=dict)
    #: Every tile, in the order given.
    placed: list[Placed] = field(default_factory=list)

    def cell(self, i: int, j: int) -> Placed | None:
        return self.cells.get((i, j))

    def merged(self) -> Layout:
        """The layout with neighbouring cells of one tile joined: only the edges where,
        in some row (column), the cells on either side take different tiles (or one is
        a hole) stay, so that a tile is cut no more than the overlaps need. Each joined
        cell takes one tile (its cells, linked row by row and column by column, do)."""
        rows, cols = len(self.row_edges) - 1, len(self.col_edges) - 1

        def differ(a: Placed | None, b: Placed | None) -> bool:
            return a is not b

        keep_cols = {0, cols} | {
            j for j in range(1, cols) for i in range(rows)
            if differ(self.cell(i, j - 1), self.cell(i, j))
        }  # fmt: skip
        keep_rows = {0, rows} | {
            i for i in range(1, rows) for j in range(cols)
            if differ(self.cell(i - 1, j), self.cell(i, j))
        }  # fmt: skip
        row_index, col_index = sorted(keep_rows), sorted(keep_cols)
        cells = {
            (a, b): tile
            for a, i in enumerate(row_index[:-1])
            for b, j in enumerate(col_index[:-1])
            if (tile := self.cell(i, j)) is not None
        }
        return dataclasses.replace(
            self,
            row_edges=[self.row_edges[i] for i in row_index],
            col_edges=[self.col_edges[j] for j in col_index],
            cells=cells,
            covering={},
        )


def crs_of(part: FilePart) -> Any:
    attributes = part.var_attrs.get(GRID_MAPPING)
    if attributes is None:
        return None
    return attributes.get("crs_wkt", attributes.get("spatial_ref"))


def transform_of(part: FilePart) -> AFFINE:
    """The tile's transform: its GeoTransform (the exact numbers rasterio reads), else
    the one its pixel-centre coordinates describe."""
    missing = [d for d in (X, Y) if d not in part.coords]
    if missing:
        raise IncompatibleArraysError(
            f"{part.url}: no {' or '.join(missing)} coordinate; a mosaic needs "
            "georeferenced images (a GeoTransform or tie points)"
        )
    geotransform = part.var_attrs.get(GRID_MAPPING, {}).get("GeoTransform")
    if isinstance(geotransform, str):
        try:
            c, a, b, f, d, e = (float(v) for v in geotransform.split())
            return (a, b, c, d, e, f)
        except ValueError:
            pass
    x = part.coords[X].values
    y = part.coords[Y].values
    if x.size < 2 or y.size < 2:
        raise IncompatibleArraysError(
            f"{part.url}: one pixel wide or high and no GeoTransform; its resolution is unknown"
        )
    a = float(x[1] - x[0])
    e = float(y[1] - y[0])
    return (a, 0.0, float(x[0]) - a / 2, 0.0, e, float(y[0]) - e / 2)


def odd_one(
    parts: Sequence[FilePart], key: Callable[[FilePart], Hashable]
) -> tuple[FilePart, FilePart] | None:
    """A tile whose ``key`` differs from the majority's, and a tile of the majority."""
    keys = [key(p) for p in parts]
    counts = Counter(keys)
    if len(counts) < 2:
        return None
    common, _ = counts.most_common(1)[0]
    majority = parts[keys.index(common)]
    odd = next(p for p, k in zip(parts, keys, strict=True) if k != common)
    return odd, majority


def _sizes(part: FilePart) -> tuple[int, int]:
    return part.coords[Y].size, part.coords[X].size


def _check_same(parts: Sequence[FilePart], transforms: dict[str, AFFINE]) -> None:
    odd = odd_one(parts, crs_of)
    if odd is not None:
        raise IncompatibleArraysError(
            f"{odd[0].url} is in another coordinate reference system than the other tiles "
            f"(such as {odd[1].url}); reproject it to their CRS first"
        )
    for part in parts:
        a, b, _, d, e, _ = transforms[part.url]
        if b != 0 or d != 0:
            raise IncompatibleArraysError(
                f"{part.url}: a rotated transform; a mosaic (like rasterio.merge) needs "
                "north-up tiles"
            )
        if a <= 0 or e >= 0:
            raise IncompatibleArraysError(
                f"{part.url}: a flipped transform (pixel size {number(a)}, {number(e)}); a "
                "mosaic (like rasterio.merge) needs north-up tiles"
            )

    def resolution(part: FilePart) -> tuple[int, int]:
        a, _, _, _, e, _ = transforms[part.url]
        # on a logarithmic scale, so that nearly equal resolutions share one key
        step = math.log1p(RESOLUTION_RTOL)
        return round(math.log(a) / step), round(math.log(-e) / step)

    keys = [resolution(p) for p in parts]
    other = parts[keys.index(Counter(keys).most_common(1)[0][0])]
    majority = transforms[other.url]
    for part in parts:
        ta = transforms[part.url]
        for index, axis in ((0, X), (4, Y)):
            if not math.isclose(ta[index], majority[index], rel_tol=RESOLUTION_RTOL):
                raise IncompatibleArraysError(
                    f"{part.url} has a resolution of {number(abs(ta[index]))} along "
                    f"{axis!r}, the other tiles (such as {other.url}) "
                    f"{number(abs(majority[index]))}; resample it to their resolution first"
                )


def _check_data_types(parts: Sequence[FilePart]) -> None:
    """Refuse the tile whose arrays have another data type than the majority's (before
    the concatenation, which would name the first tiles it compares)."""
    for name in parts[0].arrays:

        def data_type(part: FilePart, name: str = name) -> str | None:
            array = part.arrays.get(name)
            return None if array is None else str(array.dtype)

        odd = odd_one(parts, data_type)
        if odd is not None:
            tile, other = odd
            found = tile.arrays[name].dtype if name in tile.arrays else "none"
            raise IncompatibleArraysError(
                f"{tile.url}: {name!r} is {found}, in the other tiles (such as {other.url}) "
                f"{other.arrays[name].dtype}; one virtual array has one data type"
            )


def _offset(part: FilePart, v: float, axis: str, anchor: FilePart) -> int:
    """rasterio.merge's pixel offset of an edge ``v`` pixels from the mosaic's origin
    (``floor(v + 0.1)``), refused beyond the snapping tolerance."""
    offset = math.floor(v + _ROUNDING_SLACK)
    if v - offset >= SNAP:
        raise IncompatibleArraysError(
            f"{part.url} is not on the grid of {anchor.url} along {axis!r}: {v - offset:+.2f} "
            f"px off its pixel edges (tiles within {-_ROUNDING_SLACK:+.1f} to +{SNAP:.1f} px "
            "are snapped, as rasterio.merge places them); resample it onto the grid first"
        )
    return offset


def place(parts: Sequence[FilePart]) -> tuple[AFFINE, int, int, list[Placed]]:
    """The mosaic's transform and shape, and each tile's placement (rasterio.merge's)."""
    transforms = {part.url: transform_of(part) for part in parts}
    _check_same(parts, transforms)
    _check_data_types(parts)
    first = transforms[parts[0].url]
    res_x, res_y = first[0], -first[4]
    lefts, rights, tops, bottoms = [], [], [], []
    for part in parts:
        a, _, c, _, e, f = transforms[part.url]
        height, width = _sizes(part)
        lefts.append(c)
        rights.append(width * a + c)
        tops.append(f)
        bottoms.append(height * e + f)
    west, east, north, south = min(lefts), max(rights), max(tops), min(bottoms)
    width = round((east - west) / res_x)
    height = round((north - south) / res_y)
    west_tile = parts[lefts.index(west)]
    north_tile = parts[tops.index(north)]
    placed = []
    for part, left, top in zip(parts, lefts, tops, strict=True):
        rows, cols = _sizes(part)
        col = _offset(part, (left - west) / res_x, X, west_tile)
        row = _offset(part, (north - top) / res_y, Y, north_tile)
        if row + rows > height or col + cols > width:  # rasterio would read it resampled
            raise IncompatibleArraysError(
                f"{part.url} reaches past the mosaic's edge by a fraction of a pixel once "
                "snapped to its grid; resample it onto the grid first"
            )
        placed.append(Placed(part, row, col, rows, cols))
    return (res_x, 0.0, west, 0.0, -res_y, north), height, width, placed


def _where(layout_edges: list[int], i: int, axis: str) -> str:
    return f"{'rows' if axis == Y else 'columns'} {layout_edges[i]}-{layout_edges[i + 1] - 1}"


def layout(
    parts: Sequence[FilePart], *, allow_gaps: bool = False, overlap: Overlap | None = None
) -> Layout:
    """The tiles on the mosaic's grid, cell by cell; see the module."""
    if overlap not in (None, "first", "last"):
        raise ValueError(f"overlap must be 'first', 'last' or None, not {overlap!r}")
    transform, height, width, placed = place(parts)
    row_edges = sorted({0, height, *(p.row for p in placed), *(p.row + p.height for p in placed)})
    col_edges = sorted({0, width, *(p.col for p in placed), *(p.col + p.width for p in placed)})
    cells: dict[tuple[int, int], Placed] = {}
    covering: dict[tuple[int, int], list[Placed]] = {}
    spanning: list[Placed] = []
    for tile in placed:
        i0, i1 = bisect_left(row_edges, tile.row), bisect_left(row_edges, tile.row + tile.height)
        j0, j1 = bisect_left(col_edges, tile.col), bisect_left(col_edges, tile.col + tile.width)
        if i1 - i0 > 1 or j1 - j0 > 1:
            spanning.append(tile)
        for i in range(i0, i1):
            for j in range(j0, j1):
                other = cells.setdefault((i, j), tile)
                if other is tile:
                    continue
                if overlap is None:
                    _refuse_overlap(other, tile)
                covering.setdefault((i, j), [other]).append(tile)
                if overlap == "last":
                    cells[(i, j)] = tile
    if spanning and overlap is None:
        tile = spanning[0]
        raise IncompatibleArraysError(
            f"the tiles do not form a grid: the edges of other tiles cut {tile.part.url} "
            f"(rows {tile.row}-{tile.row + tile.height - 1}, columns "
            f"{tile.col}-{tile.col + tile.width - 1} of the mosaic); every row of tiles must "
            "span the same x ranges and every column the same y ranges, or cut the tiles "
            'where they meet with --overlap first|last (overlap="first"), which stores the '
            "chunks along the cuts as values"
        )
    result = Layout(
        transform, height, width, row_edges, col_edges, cells, overlap, covering, placed
    )
    if not allow_gaps:
        for i in range(len(row_edges) - 1):
            for j in range(len(col_edges) - 1):
                if (i, j) not in cells:
                    _refuse_hole(result, i, j)
    return result


def _refuse_overlap(first: Placed, second: Placed) -> None:
    rows = min(first.row + first.height, second.row + second.height) - max(first.row, second.row)
    cols = min(first.col + first.width, second.col + second.width) - max(first.col, second.col)
    raise IncompatibleArraysError(
        f"{first.part.url} and {second.part.url} overlap by {rows} x {cols} pixels "
        "(rows x columns); say which tile an overlap takes (--overlap first|last, "
        'overlap="first" or "last", as rasterio.merge\'s method) or remove one of them'
    )


def _refuse_hole(result: Layout, i: int, j: int) -> None:
    neighbours = [
        tile.part.url
        for tile in (
            result.cell(i, j - 1),
            result.cell(i, j + 1),
            result.cell(i - 1, j),
            result.cell(i + 1, j),
        )
        if tile is not None
    ]
    beside = f" (next to {', '.join(neighbours[:2])})" if neighbours else ""
    raise IncompatibleArraysError(
        f"no tile covers {_where(result.row_edges, i, Y)}, "
        f"{_where(result.col_edges, j, X)} of the mosaic{beside}; add the missing tile, "
        "or allow gaps (--allow-gaps, allow_gaps=True) to read the hole as nodata"
    )


__all__ = [
    "GRID_MAPPING",
    "RESOLUTION_RTOL",
    "SNAP",
    "Layout",
    "Overlap",
    "Placed",
    "X",
    "Y",
    "layout",
    "odd_one",
]
