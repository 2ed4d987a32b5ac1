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
import functools
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Literal

import xarray as xr

from virtualizarr_fill.assemble.mosaic import X, Y, combine_tiles, tile_grid
from virtualizarr_fill.assemble.parts import FilePart, compact, file_part, part_dataset
from virtualizarr_fill.assemble.series import check_same_structure, combine_parts, order_parts

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry

    from virtualizarr_fill.manifests.store import FileManifestStore

OnFillConflict = Literal["error", "use_first", "drop"]


class Collector:
    """Parsed files for a combination along ``dims``: each checked against the first
    and compacted as it arrives (:func:`~.parts.compact`), so that what is kept grows
    with the chunk references only; the first file's part gives the template."""

    def __init__(self, dims: Sequence[str], *, new_dim: bool, decode_times: bool | None):
        self.dims = list(dims)
        self.new_dim = new_dim
        self.decode_times = decode_times
        self.parts: list[FilePart] = []
        self._reference: FilePart | None = None
        self._combined: list[str] = []

    def add(self, store: FileManifestStore) -> None:
        """Check and keep one parsed file."""
        self.add_part(file_part(store, decode_times=self.decode_times))

    def add_part(self, part: FilePart) -> None:
        """Check and keep one file's part (as :func:`~.parts.file_part` makes it, with
        this collector's ``decode_times``)."""
        if self._reference is None:
            self._reference = part
            self._combined = part.combined(self.dims, self.new_dim)
        check_same_structure(self._reference, part, self.dims)
        self.parts.append(compact(part, self._reference, self._combined, self.dims))

    def template(self) -> xr.Dataset:
        """The first file's virtual dataset."""
        if self._reference is None:
            raise ValueError("no files to combine")
        return part_dataset(self._reference)


#: Files per task an executor parses: enough that sending a task and its result costs
#: little next to parsing its files, few enough that the work spreads.
BATCH_FILES = 64


def parse_parts(
    urls: Sequence[str],
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any],
    decode_times: bool | None,
) -> list[FilePart]:
    """Each file's :class:`FilePart` (one task of an executor): what travels back is the
    files' manifests and coordinate values, not stores or datasets."""
    return [
        file_part(parser(url=url, registry=registry), decode_times=decode_times) for url in urls
    ]


def _workers(executor: Executor) -> int:
    """How many tasks the executor runs at once (a guess of 4 where it does not say)."""
    client = getattr(executor, "_client", None)  # distributed's ClientExecutor
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return max(1, int(getattr(executor, "_max_workers", 0) or 4))


def _batches(urls: Sequence[str], executor: Executor) -> list[list[str]]:
    workers = _workers(executor)
    size = max(1, min(BATCH_FILES, -(-len(urls) // (workers * 4))))
    return [list(urls[i : i + size]) for i in range(0, len(urls), size)]


def _collect(
    urls: Sequence[str],
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any],
    executor: Executor | None,
    collector: Collector,
) -> Collector:
    if executor is None:
        for url in urls:
            collector.add(parser(url=url, registry=registry))
        return collector
    task = functools.partial(
        parse_parts, registry=registry, parser=parser, decode_times=collector.decode_times
    )
    for parts in executor.map(task, _batches(urls, executor)):
        for part in parts:
            collector.add_part(part)
    return collector


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
    executor: Executor | None = None,
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
        Parse the files with this executor's ``map`` (processes, or a dask cluster
        through ``client.get_executor()``), in batches: each task sends back its files'
        manifests and coordinate values.

    Returns
    -------
    xarray.Dataset
        What ``xr.combine_nested(datasets, concat_dim=dim, data_vars="minimal",
        coords="minimal", compat="override", join="exact",
        combine_attrs="drop_conflicts")`` returns for the files' virtual datasets in
        coordinate order (``data_vars="all"`` with ``new_dim``).

    Raises
    ------
    virtualizarr_fill.IncompatibleArraysError
        Files that overlap, leave gaps, differ in their other coordinates or variables,
        or cannot share one virtual array (codecs, data types, fill values), naming them.
    """
    urls = list(urls)
    if not urls:
        raise ValueError("no files to open")
    collector = Collector([dim], new_dim=new_dim, decode_times=decode_times)
    _collect(urls, registry, parser, executor, collector)
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
    on_fill_conflict: OnFillConflict = "error",
    executor: Executor | None = None,
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
    on_fill_conflict
        Tiles whose nodata values differ: ``"error"`` (default), or combine them the way
        :func:`virtualizarr_fill.fill_conflicts` says.
    executor
        Parse the tiles with this executor's ``map``, in batches (as for
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
        Tiles in different CRSs or resolutions, off one pixel grid, overlapping, leaving
        gaps, not forming a grid, or with different bands or data types, naming them.
    """
    if parser is None:
        from virtualizarr_fill.tiff import TIFFParser

        parser = TIFFParser()
    urls = list(urls)
    if not urls:
        raise ValueError("no tiles to open")
    collector = _collect(
        urls, registry, parser, executor, Collector([Y, X], new_dim=False, decode_times=None)
    )
    grid = tile_grid(collector.parts, allow_gaps=allow_gaps)
    with fill_rule(on_fill_conflict):
        return combine_tiles(collector.template(), grid)


__all__ = [
    "Collector",
    "FilePart",
    "OnFillConflict",
    "fill_rule",
    "parse_parts",
    "open_virtual_mosaic",
    "open_virtual_series",
]
