"""Many files into one virtual dataset, without one xarray Dataset per file.

* :func:`open_virtual_series`: files along one dimension, ordered by their coordinate,
  gaps and overlaps refused;
* :func:`open_virtual_mosaic`: GeoTIFF tiles placed on one grid by their georeferencing.

Both return what xarray's nested combine returns for the same files in the right order
(see :mod:`.series` and :mod:`.mosaic`), at a fraction of its cost per file: each file
after the first is reduced to its manifests and coordinate values (:mod:`.parts`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Literal

import xarray as xr

from virtualizarr_fill.assemble.attributes import dropped_attributes
from virtualizarr_fill.assemble.collecting import Collector, collect
from virtualizarr_fill.assemble.mosaic import X, Y, combine_tiles, tile_grid
from virtualizarr_fill.assemble.parts import FilePart
from virtualizarr_fill.assemble.placement import Overlap
from virtualizarr_fill.assemble.series import combine_parts, order_parts

if TYPE_CHECKING:
    from distributed import Client
    from obspec_utils.registry import ObjectStoreRegistry

OnFillConflict = Literal["error", "use_first", "drop"]


def fill_rule(on_fill_conflict: OnFillConflict) -> contextlib.AbstractContextManager[Any]:
    """The rule for files whose fill values differ, as a context (none for ``error``)."""
    from virtualizarr_fill.fill.conflicts import fill_conflicts

    if on_fill_conflict == "error":
        return contextlib.nullcontext()
    return fill_conflicts(on_fill_conflict)


def open_virtual_series(
    urls: Iterable[str],
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any],
    dim: str,
    *,
    new_dim: bool = False,
    allow_gaps: bool = False,
    decode_times: bool | None = None,
    on_fill_conflict: OnFillConflict = "error",
    executor: Executor | Client | None = None,
) -> xr.Dataset:
    """Open files as one virtual dataset along ``dim``, in the order of their coordinate.

    Parameters
    ----------
    urls
        The files (any order: they are placed by their coordinate along ``dim``).
    registry
        Resolves the URLs to object stores.
    parser
        A parser (``TIFFParser()``, ``HDF5Parser()``, ...).
    dim
        The dimension to concatenate along, or with ``new_dim`` the new one to stack
        along (then in the order given).
    new_dim
        Stack the files along a new dimension ``dim`` instead.
    allow_gaps
        Accept files whose regularly spaced coordinates do not abut.
    decode_times
        As for ``open_virtual_dataset``.
    on_fill_conflict
        Files whose fill values differ: ``"error"`` (default), or combine them the way
        :func:`virtualizarr_fill.fill_conflicts` says.
    executor
        Parse the files in batches with this executor (a ``concurrent.futures``
        executor such as a process pool, whose tasks each send back their files'
        manifests and coordinate values, compacted), or on a dask cluster (a
        ``distributed.Client`` or its ``get_executor()``), where the batches are also
        merged on the cluster as a tree, so that one result reaches this process.

    Returns
    -------
    xarray.Dataset
        What ``xr.combine_nested(datasets, concat_dim=dim, data_vars="minimal",
        coords="minimal", compat="override", join="exact",
        combine_attrs="drop_conflicts")`` returns for the files' virtual datasets in
        coordinate order (``data_vars="all"`` with ``new_dim``); the attributes that
        rule dropped are listed by :func:`virtualizarr_fill.dropped_attributes`.

    Raises
    ------
    virtualizarr_fill.IncompatibleArraysError
        Files that overlap, leave gaps, differ in their other coordinates or variables,
        or cannot share one virtual array (codecs, data types, fill values, or CF
        encoding such as ``scale_factor``, ``add_offset`` or ``units``), naming them.
    virtualizarr_fill.TimeCoordinateError
        Along ``"time"``, two files holding one time each (scenes, parsed with
        ``TIFFParser(time_from=...)``) of the same time, as
        :func:`virtualizarr_fill.assemble.time_stack.stack_by_time` refuses them (the
        same message, naming both files and the time); such files are ordered by its
        rule too.
    """
    urls = list(urls)
    if not urls:
        raise ValueError("no files to open")
    collector = Collector([dim], new_dim=new_dim, decode_times=decode_times)
    collect(urls, registry, parser, executor, collector)
    base = collector.template()
    first = collector.parts[0].url
    if new_dim and dim in base.dims:
        raise ValueError(f"{dim!r} is already a dimension of {first}; drop new_dim")
    if not new_dim and dim not in base.dims:
        raise ValueError(f"{first} has no dimension {dim!r} (dimensions: {list(base.dims)})")
    parts = collector.parts
    ordered = parts if new_dim else order_parts(parts, dim, allow_gaps=allow_gaps)
    with fill_rule(on_fill_conflict):
        return combine_parts(base, ordered, dim, new_dim=new_dim)


def open_virtual_mosaic(
    urls: Iterable[str],
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any] | None = None,
    *,
    allow_gaps: bool = False,
    overlap: Overlap | None = None,
    on_fill_conflict: OnFillConflict = "error",
    executor: Executor | Client | None = None,
) -> xr.Dataset:
    """Open GeoTIFF tiles as one virtual mosaic, placed by their georeferencing.

    Parameters
    ----------
    urls
        The tiles, in any order.
    registry
        Resolves the URLs to object stores.
    parser
        The TIFF parser to use (default ``TIFFParser()``).
    allow_gaps
        Accept tiles that do not abut (the rows and columns must still form a grid).
    overlap
        Which tile a part that tiles overlap takes, as ``rasterio.merge.merge``'s
        ``method``: ``"first"``, the tile given earliest, or ``"last"``, the one given
        latest; None (default) refuses overlaps. Where the kept part of a tile starts
        inside a stored chunk, that chunk is read and stored as values (counted in the
        variable's ``encoding["materialised_chunks"]``). Refused where rasterio would
        fill the winning tile's nodata pixels from another tile.
    on_fill_conflict
        Tiles whose nodata values differ: ``"error"`` (default), or combine them the way
        :func:`virtualizarr_fill.fill_conflicts` says.
    executor
        Parse the tiles with this executor or dask client, in batches (as for
        :func:`open_virtual_series`).

    Returns
    -------
    xarray.Dataset
        The mosaic, shaped as rioxarray opens a GeoTIFF (``band_data(band, y, x)``), its
        ``spatial_ref`` the top-left tile's: values and transform equal
        ``rasterio.merge.merge`` of the tiles.

    Raises
    ------
    virtualizarr_fill.IncompatibleArraysError
        Tiles in different CRSs or resolutions, off one pixel grid, overlapping (without
        ``overlap``), leaving gaps, not forming a grid, or with different bands or data
        types, naming them; a tile whose internal mask or alpha band hides pixels that do
        not hold its nodata (``rasterio.merge.merge`` writes nodata there), naming it.
    """
    if parser is None:
        from virtualizarr_fill.tiff import TIFFParser

        parser = TIFFParser()
    urls = list(urls)
    if not urls:
        raise ValueError("no tiles to open")
    collector = collect(
        urls, registry, parser, executor, Collector([Y, X], new_dim=False, decode_times=None)
    )
    collector.check_tiles()
    grid = tile_grid(collector.parts, allow_gaps=allow_gaps, overlap=overlap)
    with fill_rule(on_fill_conflict):
        return combine_tiles(collector.template(), grid, registry)


__all__ = [
    "Collector",
    "FilePart",
    "OnFillConflict",
    "dropped_attributes",
    "fill_rule",
    "open_virtual_mosaic",
    "open_virtual_series",
]
