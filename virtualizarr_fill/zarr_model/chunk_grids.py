"""Chunk-grid arithmetic on Zarr v3 array metadata.

Chunk edges come from zarr's own :class:`zarr.core.chunk_grids.ChunkGrid`: the *codec
edge* of a chunk (``chunk_size``, the shape the codecs see) and its *data edge*
(``data_size``, the part inside the array) differ for a padded boundary chunk. This
module turns metadata into grids and edges, and edges back into grid metadata that stays
regular whenever the edges allow it. It knows nothing of codec chains or fill values;
the merges of :mod:`virtualizarr_fill.zarr_model`, the array operations of
:mod:`virtualizarr_fill.manifests` and the writers build on it.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np
from zarr.codecs import ShardingCodec
from zarr.core.chunk_grids import ChunkGrid, DimensionGrid, FixedDimension, VaryingDimension
from zarr.core.metadata.v3 import (
    ArrayV3Metadata,
    ChunkGridMetadata,
    RectilinearChunkGridMetadata,
    create_chunk_grid_metadata,
)


@functools.lru_cache(maxsize=256)
def _cached_grid(grid: ChunkGridMetadata, shape: tuple[int, ...]) -> ChunkGrid:
    if isinstance(grid, RectilinearChunkGridMetadata):
        return ChunkGrid.from_sizes(shape, grid.chunk_shapes)
    return ChunkGrid.from_sizes(shape, tuple(grid.chunk_shape))


@functools.lru_cache(maxsize=256)
def _cached_grid_shape(grid: ChunkGridMetadata, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_cached_grid(grid, shape).grid_shape)


def grid_shape(metadata: ArrayV3Metadata) -> tuple[int, ...]:
    """The number of chunks along each axis (cached: zarr computes it at every call)."""
    return _cached_grid_shape(metadata.chunk_grid, metadata.shape)


def chunk_grid(metadata: ArrayV3Metadata) -> ChunkGrid:
    """The array's chunk grid (the shard grid for a sharded array) with its extents.

    Grids are immutable and many combined arrays share one, so they are cached.
    """
    return _cached_grid(metadata.chunk_grid, metadata.shape)


def is_sharded(metadata: ArrayV3Metadata) -> bool:
    """Whether the array's chunks are shards (its codec chain is one sharding codec)."""
    codecs = metadata.codecs
    return len(codecs) == 1 and isinstance(codecs[0], ShardingCodec)


def is_rectilinear(metadata: ArrayV3Metadata) -> bool:
    """Whether the metadata declares a rectilinear chunk grid."""
    return isinstance(metadata.chunk_grid, RectilinearChunkGridMetadata)


def codec_edges(dim: DimensionGrid) -> tuple[int, ...]:
    """Per-chunk lengths the codecs decode (a padded boundary chunk counts in full)."""
    if isinstance(dim, FixedDimension):
        return (dim.size,) * dim.nchunks
    if isinstance(dim, VaryingDimension):
        return dim.edges[: dim.nchunks]
    return tuple(dim.chunk_size(i) for i in range(dim.nchunks))


def data_edges(dim: DimensionGrid) -> tuple[int, ...]:
    """Per-chunk lengths inside the array (a boundary chunk clipped at the extent)."""
    if isinstance(dim, FixedDimension):
        if dim.nchunks == 0:
            return ()
        return (dim.size,) * (dim.nchunks - 1) + (dim.data_size(dim.nchunks - 1),)
    return tuple(dim.data_size(i) for i in range(dim.nchunks))


def dimension_from_edges(edges: Sequence[int], extent: int) -> DimensionGrid:
    """A dimension grid with these codec edges: regular when they allow it.

    Uniform edges that just cover the extent are a regular dimension (a short data
    edge at the end is the regular grid's boundary chunk); anything else is explicit.
    """
    edges = tuple(edges)
    if not edges:
        raise ValueError("a dimension needs at least one chunk edge")
    first = edges[0]
    if all(e == first for e in edges) and len(edges) == max(1, math.ceil(extent / first)):
        return FixedDimension(size=first, extent=extent)
    return VaryingDimension(edges, extent=extent)


def grid_metadata(dimensions: Sequence[DimensionGrid]) -> ChunkGridMetadata:
    """Regular chunk grid metadata when every dimension is regular, else rectilinear."""
    if all(isinstance(d, FixedDimension) for d in dimensions):
        return create_chunk_grid_metadata(ChunkGrid(dimensions=tuple(dimensions)))
    shapes: list[int | tuple[int, ...]] = []
    for dim in dimensions:
        if isinstance(dim, FixedDimension):
            shapes.append(dim.size)
        else:
            shapes.append(codec_edges(dim))
    return _rectilinear_metadata(tuple(shapes))


def _rectilinear_metadata(shapes: tuple[int | tuple[int, ...], ...]) -> ChunkGridMetadata:
    """RectilinearChunkGridMetadata for edges taken from zarr dimension grids.

    The edges were validated when those grids were built; zarr's constructor would parse
    each one again (a large share of the cost of combining thousands of files), so a
    vectorized positivity check stands in for it.
    """
    for edges in shapes:
        values = np.fromiter(edges, dtype=np.int64) if isinstance(edges, tuple) else edges
        if np.any(np.asarray(values) < 1):
            listed = [int(v) for v in np.ravel(values)]
            raise ValueError(f"chunk edges must be >= 1, got {format_edges(listed)}")
    metadata = object.__new__(RectilinearChunkGridMetadata)
    object.__setattr__(metadata, "chunk_shapes", shapes)
    return metadata


def format_edges(edges: Sequence[int], max_groups: int = 8) -> str:
    """Compact, run-length form of a list of chunk edges for messages and reprs.

    ``[12x12, 6]`` is twelve 12s then a 6; long lists keep their first and last runs.
    """
    parts = []
    for value, group in itertools.groupby(edges):
        count = len(list(group))
        parts.append(f"{value}x{count}" if count > 1 else str(value))
    if len(parts) > max_groups:
        parts = [*parts[: max_groups - 2], "...", parts[-1], f"{len(edges)} chunks"]
    return "[" + ", ".join(parts) + "]"


__all__ = [
    "chunk_grid",
    "codec_edges",
    "data_edges",
    "dimension_from_edges",
    "format_edges",
    "grid_metadata",
    "grid_shape",
    "is_rectilinear",
    "is_sharded",
]
