"""GeoTIFF tiles placed on one grid by their georeferencing.

The tiles' ``x`` and ``y`` coordinates (pixel centres, from each file's transform, as
rioxarray builds them) say where each tile goes: tiles sharing ``y`` values form a row,
rows are ordered by ``y`` in the direction of the first tile's (north up: decreasing),
tiles within a row by ``x``. The tiles must form a full grid in which every row has the
same columns and every column the same rows (edge tiles may be narrower or shorter), with
one CRS, one resolution and one pixel grid, and no gaps or overlaps; anything else is
refused with a message naming the tiles, as ``gdalbuildvrt`` users would want it refused
rather than silently misplaced. The result is the dataset of the top-left tile (its
``spatial_ref`` and transform give the mosaic's origin) with every variable along ``y``
and ``x`` combined: the values and transform equal ``rasterio.merge.merge`` of the same
tiles.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray

from virtualizarr_fill.assemble.parts import FilePart, common_attributes
from virtualizarr_fill.assemble.series import assembled, leading, order_parts, whole_chunk
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.fill.conflicts import combining_variable

X, Y = "x", "y"
GRID_MAPPING = "spatial_ref"


def _crs(part: FilePart) -> Any:
    attributes = part.var_attrs.get(GRID_MAPPING)
    if attributes is None:
        return None
    return attributes.get("crs_wkt", attributes.get("spatial_ref"))


def _check_tiles(parts: Sequence[FilePart]) -> None:
    reference = parts[0]
    for part in parts:
        missing = [d for d in (X, Y) if d not in part.coords]
        if missing:
            raise IncompatibleArraysError(
                f"{part.url}: no {' or '.join(missing)} coordinate; a mosaic needs "
                "georeferenced images (a GeoTransform or tie points)"
            )
    crs = _crs(reference)
    for part in parts[1:]:
        if _crs(part) != crs:
            raise IncompatibleArraysError(
                f"{part.url} and {reference.url} have different coordinate reference "
                "systems; reproject the tiles to one CRS first"
            )
    for axis in (X, Y):
        steps = {}
        for part in parts:
            values = np.asarray(part.coords[axis].values)
            if values.size > 1:
                steps[part.url] = float(values[1] - values[0])
        if len({round(s, 9) for s in steps.values()}) > 1:
            listed = ", ".join(f"{url}: {step:g}" for url, step in list(steps.items())[:4])
            raise IncompatibleArraysError(
                f"the tiles have different resolutions along {axis!r} ({listed}); "
                "resample them to one resolution first"
            )


def _key(values: np.ndarray) -> tuple[Any, ...]:
    return tuple(np.asarray(values).tolist())


def tile_grid(parts: Sequence[FilePart], *, allow_gaps: bool = False) -> list[list[FilePart]]:
    """The tiles as rows (top to bottom) of columns (left to right); see the module."""
    _check_tiles(parts)
    rows: dict[tuple[Any, ...], list[FilePart]] = {}
    for part in parts:
        rows.setdefault(_key(part.coords[Y].values), []).append(part)
    row_heads = order_parts([row[0] for row in rows.values()], Y, allow_gaps=allow_gaps)
    grid: list[list[FilePart]] = []
    columns: list[tuple[Any, ...]] | None = None
    for head in row_heads:
        row = order_parts(rows[_key(head.coords[Y].values)], X, allow_gaps=allow_gaps)
        keys = [_key(part.coords[X].values) for part in row]
        if len(set(keys)) != len(keys):
            same = [p.url for p, k in zip(row, keys, strict=True) if keys.count(k) > 1]
            raise IncompatibleArraysError(f"tiles overlap: {', '.join(same[:4])}")
        if columns is None:
            columns = keys
        elif keys != columns:
            raise IncompatibleArraysError(
                f"the tiles do not form a grid: the row of {head.url} has other columns than "
                f"the row of {grid[0][0].url} (every row must span the same x ranges)"
            )
        grid.append(row)
    return grid


def combine_tiles(template: xr.Dataset, grid: Sequence[Sequence[FilePart]]) -> xr.Dataset:
    """The mosaic of ``grid`` (rows of tiles; ``template`` the top-left tile's dataset)."""
    parts = [part for row in grid for part in row]
    variables: dict[Hashable, xr.Variable] = {}
    dropped: dict[str, set[Hashable]] = {}
    for name, variable in template.variables.items():
        key = str(name)
        along = [d for d in (Y, X) if d in variable.dims]
        if not along:
            variables[name] = leading(grid[0][0], key, variable)
            continue
        if isinstance(variable.data, ManifestArray):
            rows: list[list[Any]] = [[part.arrays[key] for part in row] for row in grid]
            data: Any
            with combining_variable(key):
                if X in variable.dims:
                    x_axis = variable.dims.index(X)
                    rows = [[np.concatenate(row, axis=x_axis)] for row in rows]  # type: ignore[arg-type]
                else:
                    rows = [[row[0]] for row in rows]
                if Y in variable.dims:
                    data = np.concatenate([row[0] for row in rows], axis=variable.dims.index(Y))  # type: ignore[arg-type]
                else:
                    data = rows[0][0]
            attrs = common_attributes(
                [part.var_attrs[key] for part in parts], dropped.setdefault(key, set())
            )
        elif key in (X, Y):
            pieces = grid[0] if key == X else [row[0] for row in grid]
            data = np.concatenate([part.coords[key].values for part in pieces])
            attrs = common_attributes(
                [part.coords[key].attrs for part in pieces], dropped.setdefault(key, set())
            )
            variables[name] = xr.Variable(
                variable.dims, data, attrs, whole_chunk(pieces[0].coords[key], len(data))
            )
            continue
        else:
            raise IncompatibleArraysError(
                f"{name!r} is loaded in memory and is not the x or y coordinate; a mosaic "
                "cannot combine it"
            )
        variables[name] = xr.Variable(variable.dims, data, attrs, dict(variable.encoding))
    return assembled(template, variables, parts, dropped)


__all__ = ["combine_tiles", "tile_grid"]
