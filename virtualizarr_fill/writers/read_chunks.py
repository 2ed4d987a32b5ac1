"""Dask chunks for reading a virtual store: whole stored chunks merged up to a target size.

A store of many small files holds many small chunks (one per TIFF strip, often a few
kilobytes), and xarray's default gives one dask task per stored chunk, whose scheduling
costs more than the read. :func:`whole_chunk_dask_chunks` merges consecutive stored
chunks along each dimension, following the array's own (possibly rectilinear) chunk
edges, until a dask chunk holds about ``target_bytes`` of decoded values. Each dask
chunk is thus made of whole stored chunks: no stored chunk is read by two tasks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "STORED_MULTIPLES",
    "merged_edges",
    "stored_edges",
    "whole_chunk_dask_chunks",
    "with_whole_chunk_dask_chunks",
]

#: The default decoded size of one dask chunk (dask's own default target).
DEFAULT_CHUNK_BYTES = 128 * 2**20

#: The ``chunks=`` value of :func:`~virtualizarr_fill.open_icechunk` asking for dask
#: chunks made of whole stored chunks (its default).
STORED_MULTIPLES = "stored-multiples"


def stored_edges(
    chunks: Sequence[int | Sequence[int]], shape: Sequence[int]
) -> list[tuple[int, ...]]:
    """The stored chunk edges along each dimension, as zarr's chunk sizes describe them
    (an int for a regular dimension, whose last chunk may overhang the array; the
    sizes themselves for a rectilinear one)."""
    edges: list[tuple[int, ...]] = []
    for size, extent in zip(chunks, shape, strict=True):
        if isinstance(size, int):
            if extent == 0:
                edges.append((0,))
                continue
            full, rest = divmod(extent, size)
            edges.append((size,) * full + ((rest,) if rest else ()))
        else:
            edges.append(tuple(int(s) for s in size))
    return edges


def merged_edges(edges: Sequence[int], limit: int) -> tuple[int, ...]:
    """Consecutive ``edges`` merged while a merged chunk stays within ``limit`` elements
    (each merged chunk holds at least one stored chunk)."""
    merged: list[int] = []
    current = 0
    for edge in edges:
        if current and current + edge > limit:
            merged.append(current)
            current = 0
        current += edge
    if current or not merged:
        merged.append(current)
    return tuple(merged)


def whole_chunk_dask_chunks(
    edges: Sequence[Sequence[int]], itemsize: int, target_bytes: int = DEFAULT_CHUNK_BYTES
) -> tuple[tuple[int, ...], ...]:
    """Dask chunks of whole stored chunks, about ``target_bytes`` each.

    The last dimensions are merged first (whole rows are contiguous in memory and
    usually in the files), each dimension given the budget the later ones leave once
    the earlier ones hold their largest stored chunk, the least they can hold.
    """
    total = max(1, target_bytes // max(1, itemsize))
    least = [max(axis_edges, default=1) or 1 for axis_edges in edges]
    chosen: list[tuple[int, ...]] = []
    later = 1
    for axis in reversed(range(len(edges))):
        budget = max(1, total // (later * math.prod(least[:axis])))
        merged = merged_edges(edges[axis], budget)
        chosen.append(merged)
        later *= max(merged) or 1
    return tuple(reversed(chosen))


def with_whole_chunk_dask_chunks(
    ds: xr.Dataset, target_bytes: int = DEFAULT_CHUNK_BYTES, token: str = ""
) -> xr.Dataset:
    """``ds`` (opened with ``chunks=None``) with every non-index variable a dask array
    chunked by :func:`whole_chunk_dask_chunks` of its stored chunks (its ``encoding``
    ``chunks``); ``token`` names the source in the dask keys."""
    from dask.base import tokenize

    replaced: dict[str, Any] = {}
    for name, variable in ds.variables.items():
        if name in ds.indexes or variable.ndim == 0 or "chunks" not in variable.encoding:
            continue
        edges = stored_edges(variable.encoding["chunks"], variable.shape)
        chunks = whole_chunk_dask_chunks(edges, variable.dtype.itemsize, target_bytes)
        key = f"open_icechunk-{name}-{tokenize(token, name, chunks, math.prod(variable.shape))}"
        replaced[str(name)] = variable.chunk(
            dict(zip(variable.dims, chunks, strict=True)), name=key
        )
    return ds.assign_coords({n: v for n, v in replaced.items() if n in ds.coords}).assign(
        {n: v for n, v in replaced.items() if n not in ds.coords}
    )
