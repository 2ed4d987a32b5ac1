"""GeoTIFF tiles combined into one virtual mosaic, placed as :mod:`.placement` says.

Every variable along ``y`` and ``x`` becomes one array: the cells of the layout (each a
tile's array, or, for a hole, an array of the same chunking with no chunks, which reads
as the fill value: the nodata rasterio fills holes with) concatenated along ``x`` row by
row, the rows along ``y``. The ``x`` and ``y`` coordinates are the pixel centres of the
mosaic's transform (rioxarray's floating-point operations), and the ``spatial_ref``
variable is the top-left tile's with the mosaic's GeoTransform: values, transform and
nodata equal ``rasterio.merge.merge`` of the same tiles.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ChunkManifest, ManifestArray
from zarr.core.chunk_grids import FixedDimension

from virtualizarr_fill.assemble.attributes import common_attributes
from virtualizarr_fill.assemble.blocks import concatenated
from virtualizarr_fill.assemble.masks import check_masks
from virtualizarr_fill.assemble.overlaps import check_overlaps, read_window, tile_bounds
from virtualizarr_fill.assemble.parts import FilePart
from virtualizarr_fill.assemble.placement import (
    AFFINE,
    GRID_MAPPING,
    Layout,
    Overlap,
    Placed,
    X,
    Y,
    layout,
    odd_one,
)
from virtualizarr_fill.assemble.series import assembled, index_values, leading, whole_chunk
from virtualizarr_fill.assemble.windows import Materialised, natural_cuts, window
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.fill.combine import FillConflictError
from virtualizarr_fill.fill.conflicts import (
    FILL_CONFLICT_ADVICE,
    combining_variable,
    fill_conflict_rule,
)
from virtualizarr_fill.fill.tiff import GDAL_NODATA_ATTR
from virtualizarr_fill.manifests.array import FillManifestArray
from virtualizarr_fill.zarr_model.chunk_grids import (
    chunk_grid,
    codec_edges,
    dimension_from_edges,
    grid_metadata,
)


def tile_grid(
    parts: Sequence[FilePart], *, allow_gaps: bool = False, overlap: Overlap | None = None
) -> Layout:
    """The tiles placed on the mosaic's grid (see :mod:`.placement`)."""
    return layout(parts, allow_gaps=allow_gaps, overlap=overlap)


def pixel_centres(transform: AFFINE, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """x and y of the pixel centres, with rioxarray's floating-point operations (as the
    TIFF parser computes each tile's)."""
    a, b, c, d, e, f = transform
    x = np.arange(width, dtype=np.float64)
    x *= a
    x += 0.0 * b
    x += a * 0.5 + b * 0.5 + c
    y = np.arange(height, dtype=np.float64)
    y *= e
    y += 0.0 * d
    y += d * 0.5 + e * 0.5 + f
    return x, y


def gdal_geotransform(transform: AFFINE) -> str:
    """GDAL's GeoTransform string ``"c a b f d e"`` (as rioxarray writes it)."""
    a, b, c, d, e, f = transform
    return " ".join(repr(float(v)) for v in (c, a, b, f, d, e))


def _hole(
    name: str, dims: tuple[str, ...], grid: Layout, i: int, j: int, donor: ManifestArray
) -> FillManifestArray:
    """An array without chunks for the hole at cell ``(i, j)``: chunked along ``y`` as
    the tiles of its row and along ``x`` as those of its column, so that it concatenates
    with them (where the whole row or column is a hole, in the donor's chunk length)."""
    row = next((t for t in (grid.cell(i, k) for k in range(len(grid.col_edges) - 1)) if t), None)
    col = next((t for t in (grid.cell(k, j) for k in range(len(grid.row_edges) - 1)) if t), None)
    shape = list(donor.shape)
    dimensions = list(chunk_grid(donor.metadata).dimensions)
    for axis, tile, edges, index in ((Y, row, grid.row_edges, i), (X, col, grid.col_edges, j)):
        if axis not in dims:
            continue
        position = dims.index(axis)
        length = edges[index + 1] - edges[index]
        shape[position] = length
        if tile is not None:
            dimensions[position] = chunk_grid(tile.part.arrays[name].metadata).dimensions[position]
        else:
            chunk = codec_edges(dimensions[position])[0]
            dimensions[position] = FixedDimension(size=chunk, extent=length)
    metadata = dataclasses.replace(
        donor.metadata, shape=tuple(shape), chunk_grid=grid_metadata(dimensions)
    )
    empty = ChunkManifest(entries={}, shape=chunk_grid(metadata).grid_shape)
    return FillManifestArray(metadata=metadata, chunkmanifest=empty)


def _cells_cut(
    key: str, dims: tuple[str, ...], grid: Layout, registry: Any, count: Materialised
) -> list[list[ManifestArray]]:
    """The cells of a mosaic of overlapping tiles, each the window of its tile (or a
    hole), chunked along ``y`` at every chunk edge of its row of cells and along ``x``
    at every one of its column, so that they concatenate (see :mod:`.windows`)."""
    grid = grid.merged()
    rows, cols = len(grid.row_edges) - 1, len(grid.col_edges) - 1
    y_cuts: list[set[int]] = [{grid.row_edges[i], grid.row_edges[i + 1]} for i in range(rows)]
    x_cuts: list[set[int]] = [{grid.col_edges[j], grid.col_edges[j + 1]} for j in range(cols)]
    for (i, j), tile in grid.cells.items():
        array = tile.part.arrays[key]
        bounds = _bounds(tile, key, dims, grid, i, j)
        for axis, dim in enumerate(dims):
            if dim == Y:
                cut = natural_cuts(array, axis, *bounds[axis])
                y_cuts[i].update(c + tile.row for c in cut)
            elif dim == X:
                cut = natural_cuts(array, axis, *bounds[axis])
                x_cuts[j].update(c + tile.col for c in cut)
    donor = grid.placed[0].part.arrays[key]
    result = []
    for i in range(rows if Y in dims else 1):
        row: list[ManifestArray] = []
        for j in range(cols if X in dims else 1):
            cell = grid.cell(i, j)
            shift = {Y: cell.row, X: cell.col} if cell is not None else {Y: 0, X: 0}
            array = donor if cell is None else cell.part.arrays[key]
            cuts = []
            for axis, dim in enumerate(dims):
                if dim in (X, Y):
                    edges = y_cuts[i] if dim == Y else x_cuts[j]
                    cuts.append(sorted(c - shift[dim] for c in edges))
                else:
                    cuts.append(natural_cuts(array, axis, 0, array.shape[axis]))
            if cell is None:
                row.append(_empty(donor, cuts))
                continue
            part, counted = window(
                array, cuts, functools.partial(read_window, array, registry),
                f"{cell.part.url}: {key!r}",
            )  # fmt: skip
            count.add(counted)
            row.append(part)
        result.append(row)
    return result


def _bounds(
    tile: Placed, key: str, dims: tuple[str, ...], grid: Layout, i: int, j: int
) -> list[tuple[int, int]]:
    """The window of the tile that cell ``(i, j)`` takes, in the tile's pixels."""
    rows = (grid.row_edges[i], grid.row_edges[i + 1])
    cols = (grid.col_edges[j], grid.col_edges[j + 1])
    return tile_bounds(tile, dims, tile.part.arrays[key].shape, rows, cols)


def _empty(donor: ManifestArray, cuts: list[list[int]]) -> FillManifestArray:
    """A hole among overlapping tiles: no chunks, chunked at ``cuts``."""
    dimensions = [dimension_from_edges(np.diff(c).tolist(), c[-1] - c[0]) for c in cuts]
    metadata = dataclasses.replace(
        donor.metadata,
        shape=tuple(c[-1] - c[0] for c in cuts),
        chunk_grid=grid_metadata(dimensions),
    )
    empty = ChunkManifest(entries={}, shape=chunk_grid(metadata).grid_shape)
    return FillManifestArray(metadata=metadata, chunkmanifest=empty)


def _nodata_key(part: FilePart, name: str) -> tuple[str, str, str] | None:
    """What says which values of the tile's ``name`` are missing: its Zarr fill value,
    ``_FillValue`` and ``missing_value``."""
    array = part.arrays.get(name)
    if array is None:
        return None
    attributes = part.var_attrs.get(name, {})
    return (
        repr(array.metadata.fill_value),
        repr(attributes.get("_FillValue")),
        repr(attributes.get("missing_value")),
    )


def _nodata_text(part: FilePart, name: str) -> str:
    attributes = part.var_attrs.get(name, {})
    for key in (GDAL_NODATA_ATTR, "_FillValue", "missing_value"):
        if key in attributes:
            return str(attributes[key])
    return "none"


def _check_nodata(parts: Sequence[FilePart], template: xr.Dataset) -> None:
    """Refuse, unless a fill-conflict rule is set, the tile whose nodata differs from
    the majority's, naming it (the concatenation would name the first tiles it meets)."""
    if fill_conflict_rule() != "error":
        return
    for name, variable in template.variables.items():
        if X not in variable.dims or Y not in variable.dims:
            continue
        key = str(name)
        odd = odd_one(parts, functools.partial(_nodata_key, name=key))
        if odd is None:
            continue
        tile, other = odd
        raise FillConflictError(
            f"{tile.url}: the nodata of {key!r} is {_nodata_text(tile, key)}, in the other "
            f"tiles (such as {other.url}) {_nodata_text(other, key)}; a virtual mosaic has "
            "one nodata value, so this tile's nodata would read as data (or the others' "
            "data as nodata)",
            FILL_CONFLICT_ADVICE,
        )


def combine_tiles(template: xr.Dataset, grid: Layout, registry: Any = None) -> xr.Dataset:
    """The mosaic of the tiles in ``grid`` (``template``: the first tile's dataset;
    ``registry``: resolves the tiles' URLs, to read the windows of overlapping tiles).

    Where tiles overlap inside a chunk, the number of chunks stored as values is in the
    ``encoding`` of each variable, as ``"materialised_chunks"`` and
    ``"materialised_bytes"``.
    """
    tiles = list({id(t): t for t in (grid.cells[key] for key in sorted(grid.cells))}.values())
    parts = [tile.part for tile in tiles]
    _check_nodata([tile.part for tile in grid.placed] or parts, template)
    top_left = parts[0]
    rows, cols = len(grid.row_edges) - 1, len(grid.col_edges) - 1
    x_values, y_values = pixel_centres(grid.transform, grid.height, grid.width)
    variables: dict[Hashable, xr.Variable] = {}
    dropped: dict[str, set[Hashable]] = {}
    for name, variable in template.variables.items():
        key = str(name)
        dims = tuple(str(d) for d in variable.dims)
        if key in (X, Y):
            values = x_values if key == X else y_values
            coordinate = top_left.coords[key]
            attrs = common_attributes(
                (part.coords[key].attrs for part in parts), dropped.setdefault(key, set())
            )
            variables[name] = xr.Variable(
                variable.dims, index_values(values), attrs, whole_chunk(coordinate, len(values))
            )
            continue
        if X not in dims and Y not in dims:
            variables[name] = leading(top_left, key, variable)
            if key == GRID_MAPPING:
                attrs = {**variables[name].attrs, "GeoTransform": gdal_geotransform(grid.transform)}
                variables[name].attrs = attrs
            continue
        if not isinstance(variable.data, ManifestArray):
            raise IncompatibleArraysError(
                f"{name!r} is loaded in memory and is not the x or y coordinate; a mosaic "
                "cannot combine it"
            )
        donor = top_left.arrays[key]
        data: Any
        count = Materialised()
        if registry is not None:
            check_masks(grid.placed, key, registry, overlaps=bool(grid.covering))
        if grid.covering:
            check_overlaps(grid, key, dims, donor.shape, registry, grid.placed[0])
        with combining_variable(key):
            layout_cells: Iterable[Iterable[ManifestArray]]
            if grid.overlap is not None:
                layout_cells = _cells_cut(key, dims, grid, registry, count)
            else:
                # built row by row as they are concatenated (see .blocks)
                layout_cells = (
                    (
                        tile.part.arrays[key]
                        if (tile := grid.cell(i, j)) is not None
                        else _hole(key, dims, grid, i, j, donor)
                        for j in range(cols if X in dims else 1)
                    )
                    for i in range(rows if Y in dims else 1)
                )
            # (an axis a variable lacks has one cell, never concatenated along)
            x_axis = dims.index(X) if X in dims else 0
            y_axis = dims.index(Y) if Y in dims else 0
            data = concatenated((concatenated(cells, x_axis) for cells in layout_cells), y_axis)
        attrs = common_attributes(
            (part.var_attrs[key] for part in parts), dropped.setdefault(key, set())
        )
        encoding = dict(variable.encoding)
        if count.chunks:
            encoding.update(materialised_chunks=count.chunks, materialised_bytes=count.nbytes)
        variables[name] = xr.Variable(variable.dims, data, attrs, encoding)
    return assembled(template, variables, parts, dropped)


__all__ = ["X", "Y", "combine_tiles", "tile_grid"]
