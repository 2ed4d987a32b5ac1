"""COG tiles with overviews as one multiscale mosaic: every level placed as the full
resolution is (:mod:`.placement`: origins snapped, holes with ``allow_gaps``, overlaps
with ``overlap``), so that each level equals ``rasterio.merge.merge`` of that overview
level of the tiles (``rasterio.open(path, overview_level=k)``).

A level's tiles carry their own GeoTransform (GDAL's overview georeferencing: the full
resolution transform scaled to the overview's size), so a level whose tiles no longer
sit on one grid (a tile size or an overlap that is not a multiple of the decimation
factor) is refused, naming the level, as the full resolution would be.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.assemble.collecting import Collector
from virtualizarr_fill.assemble.mosaic import combine_tiles, tile_grid
from virtualizarr_fill.assemble.parts import FilePart, file_part
from virtualizarr_fill.assemble.placement import Overlap, X, Y
from virtualizarr_fill.errors import IncompatibleArraysError, VirtualizarrFillError
from virtualizarr_fill.multiscales.conventions import MASK_VARIABLE, Level, describe

if TYPE_CHECKING:
    import xarray as xr

    from virtualizarr_fill.manifests.store import FileManifestStore

__all__ = ["level_parts", "mosaic_level", "mosaic_multiscales"]


def level_parts(store: FileManifestStore, names: Sequence[str]) -> dict[str, FilePart]:
    """The part of each level ``names`` of a file parsed with
    ``TIFFParser(overviews="multiscales")``."""
    from virtualizarr_fill.manifests.store import FileManifestStore

    parts = {}
    for name in names:
        group = store._group.groups[name]
        parts[name] = file_part(FileManifestStore(group, registry=store._registry, url=store.url))
    return parts


def _combined(
    parts: Sequence[FilePart], allow_gaps: bool, overlap: Overlap | None, registry: Any
) -> xr.Dataset:
    collector = Collector([Y, X], new_dim=False, decode_times=None)
    for part in parts:
        collector.add_part(part)
    collector.check_tiles()
    grid = tile_grid(collector.parts, allow_gaps=allow_gaps, overlap=overlap)
    return combine_tiles(collector.template(), grid, registry)


def mosaic_level(
    name: str,
    parts: Sequence[FilePart],
    *,
    allow_gaps: bool = False,
    overlap: Overlap | None = None,
    registry: Any = None,
) -> xr.Dataset:
    """Level ``name`` of the tiles (``parts``, in the order given) as one mosaic. Its
    masks are left out, with a warning, where they alone cannot be placed (a bit-packed
    mask tile cut inside the mosaic).

    Raises
    ------
    IncompatibleArraysError
        The level's tiles cannot be placed; the message names the level.
    """
    try:
        return _combined(parts, allow_gaps, overlap, registry)
    except (ValueError, NotImplementedError, VirtualizarrFillError) as error:
        failure = error
    if any(MASK_VARIABLE in part.arrays for part in parts):
        without = [_without_mask(part) for part in parts]
        try:
            combined = _combined(without, allow_gaps, overlap, registry)
        except (ValueError, NotImplementedError, VirtualizarrFillError):
            pass
        else:
            warnings.warn(
                f"level {name}: the masks cannot be placed in the mosaic and are left out "
                f"({failure})",
                UserWarning,
                stacklevel=2,
            )
            return combined
    raise IncompatibleArraysError(f"level {name} of the tiles: {failure}") from None


def _without_mask(part: FilePart) -> FilePart:
    import dataclasses

    keep = {n: a for n, a in part.arrays.items() if n != MASK_VARIABLE}
    return dataclasses.replace(
        part,
        arrays=keep,
        dims={n: d for n, d in part.dims.items() if n in keep},
        var_attrs={n: a for n, a in part.var_attrs.items() if n in keep},
    )


def mosaic_multiscales(
    parts: Sequence[dict[str, FilePart]],
    names: Sequence[str],
    *,
    resampling: str | None = None,
    allow_gaps: bool = False,
    overlap: Overlap | None = None,
    registry: Any = None,
) -> xr.DataTree:
    """The tiles' levels ``names`` (each tile's :func:`level_parts`) as one multiscale
    group, each level a mosaic (see the module docstring)."""
    import xarray as xr

    from virtualizarr_fill.assemble.mosaic import GRID_MAPPING

    children: dict[str, xr.DataTree] = {}
    levels: list[Level] = []
    for name in names:
        combined = mosaic_level(
            name,
            [tile[name] for tile in parts],
            allow_gaps=allow_gaps,
            overlap=overlap,
            registry=registry,
        )
        children[name] = xr.DataTree(combined)
        geotransform = combined[GRID_MAPPING].attrs.get("GeoTransform")
        transform = None
        if isinstance(geotransform, str):
            c, a, b, f, d, e = (float(v) for v in geotransform.split())
            transform = (a, b, c, d, e, f)
        levels.append(Level(name, int(combined.sizes[Y]), int(combined.sizes[X]), transform))
    attributes = describe(levels, resampling)
    return xr.DataTree.from_dict({"/": xr.Dataset(attrs=attributes), **children})
