"""Concatenation, stacking, broadcasting and chunk-aligned indexing of manifest arrays
on any chunk grid.

Each operation returns the new array's metadata and chunk manifest;
:class:`~virtualizarr_fill.manifests.FillManifestArray` wraps them. Chunk grids and codec
chains come from :mod:`virtualizarr_fill.zarr_model`; manifests are merged and subset by
VirtualiZarr's own manifest functions (:mod:`virtualizarr_fill.manifests.upstream`).

VirtualiZarr's versions of these operations accept only regular grids and arrays whose
lengths are chunk multiples, and know nothing of edge codecs (remove this module's
grid handling once VirtualiZarr's rectilinear support, its PR #954, is released).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from virtualizarr.manifests.array import ManifestArray
from virtualizarr.manifests.manifest import ChunkManifest
from zarr.core.chunk_grids import DimensionGrid, FixedDimension
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.zarr_model.axes import codecs_with_new_axis, codecs_without_axis
from virtualizarr_fill.zarr_model.chunk_grids import (
    chunk_grid,
    codec_edges,
    data_edges,
    dimension_from_edges,
    format_edges,
    grid_metadata,
    grid_shape,
)
from virtualizarr_fill.zarr_model.merges import concatenation_metadata, stack_metadata

Built = tuple[ArrayV3Metadata, ChunkManifest]


def first_path(manifest: ChunkManifest) -> str | None:
    """The path of the first stored chunk of ``manifest`` (None when it has none)."""
    for path in upstream.manifest_paths(manifest).reshape(-1):
        if path:
            return str(path)
    return None


def describer(arrays: Sequence[ManifestArray]) -> Callable[[int], str]:
    """Names input ``i`` by position and the file its first chunk comes from."""

    def describe(index: int) -> str:
        path = first_path(arrays[index].manifest)
        return f"input {index} ({path})" if path else f"input {index}"

    return describe


def check_manifest_matches_grid(metadata: ArrayV3Metadata, manifest: ChunkManifest) -> None:
    """Refuse a manifest whose chunk-grid shape is not the metadata's."""
    shape = grid_shape(metadata)
    if manifest.shape_chunk_grid != shape:
        raise ValueError(
            f"chunk manifest of shape {manifest.shape_chunk_grid} does not match the "
            f"chunk grid of shape {shape} of an array of shape {metadata.shape}"
        )


def _insert_name(names: tuple[str | None, ...] | None, axis: int) -> tuple[str | None, ...] | None:
    return None if names is None else (*names[:axis], None, *names[axis:])


# --------------------------------------------------------------------------- combining


def concatenated(arrays: Sequence[ManifestArray], axis: int) -> Built:
    """Metadata and manifest of ``arrays`` concatenated along ``axis``."""
    metadata = concatenation_metadata(
        [a.metadata for a in arrays],
        axis,
        describer(arrays),
        grid_shapes=[a.manifest.shape_chunk_grid for a in arrays],
    )
    axis = axis % arrays[0].ndim
    manifest = upstream.concat_manifests([a.manifest for a in arrays], axis=axis)
    return metadata, manifest


def stacked(arrays: Sequence[ManifestArray], axis: int) -> Built:
    """Metadata and manifest of ``arrays`` stacked along a new axis ``axis``."""
    metadata = stack_metadata(
        [a.metadata for a in arrays],
        axis,
        describer(arrays),
        grid_shapes=[a.manifest.shape_chunk_grid for a in arrays],
    )
    axis = axis % (arrays[0].ndim + 1)
    manifest = upstream.stack_manifests([a.manifest for a in arrays], axis=axis)
    return metadata, manifest


def broadcast(x: ManifestArray, shape: tuple[int, ...]) -> Built:
    """Metadata and manifest of ``x`` broadcast to ``shape`` (length-one axes repeat
    their one chunk; new axes are prepended with chunks of length one)."""
    new_shape = tuple(int(s) for s in shape)
    if np.broadcast_shapes(x.shape, new_shape) != new_shape:
        raise ValueError(f"array of shape {x.shape} cannot be broadcast to shape {new_shape}")
    n_new = len(new_shape) - x.ndim
    dims: list[DimensionGrid] = [FixedDimension(size=1, extent=new_shape[a]) for a in range(n_new)]
    for a, dim in enumerate(chunk_grid(x.metadata).dimensions):
        target = new_shape[n_new + a]
        if target == dim.extent:
            dims.append(dim)
        elif codec_edges(dim) == (1,):
            dims.append(FixedDimension(size=1, extent=target))
        else:
            raise UnsupportedFeatureError(
                f"cannot broadcast axis {a} of length 1 to {target}: its one chunk is "
                f"{codec_edges(dim)[0]} long (padded), so repeating it would repeat padding"
            )
    codecs: list[Any] = list(x.metadata.codecs)
    names = x.metadata.dimension_names
    for _ in range(n_new):
        codecs = codecs_with_new_axis(codecs, 0)
        names = _insert_name(names, 0)
    grid_shape = tuple(d.nchunks for d in dims)
    manifest = upstream.broadcast_manifest(x.manifest, shape=grid_shape)
    metadata = dataclasses.replace(
        x.metadata,
        shape=new_shape,
        chunk_grid=grid_metadata(dims),
        codecs=tuple(codecs),
        dimension_names=names,
    )
    return metadata, manifest


def missing_element_mask(x: ManifestArray) -> np.ndarray:
    """Elementwise: whether the element lies in a chunk missing from the manifest."""
    mask = upstream.manifest_paths(x.manifest) == ""
    for axis, dim in enumerate(chunk_grid(x.metadata).dimensions):
        mask = np.repeat(mask, data_edges(dim), axis=axis)
    return np.asarray(mask)


# --------------------------------------------------------------------------- indexing


def _select_1d(
    dim: DimensionGrid, indexer: int | slice, axis: int
) -> tuple[int | slice, DimensionGrid | None]:
    """Chunk-grid selector and resulting dimension (None when the axis is dropped)."""
    extent = dim.extent
    boundaries_message = (
        f"a slice along axis {axis} must start and stop on chunk boundaries (chunk edges "
        f"{format_edges(data_edges(dim))}); a ManifestArray cannot split a stored chunk"
    )
    if isinstance(indexer, int | np.integer):
        i = int(indexer)
        if i < 0:
            i += extent
        if not 0 <= i < extent:
            raise IndexError(f"index {indexer} is out of bounds for axis {axis} with size {extent}")
        chunk = dim.index_to_chunk(i)
        if dim.chunk_offset(chunk) != i or dim.chunk_size(chunk) != 1:
            raise upstream.SubChunkIndexingError(
                f"an integer index along axis {axis} needs chunks of length 1 there; "
                + boundaries_message
            )
        return chunk, None
    start, stop, step = indexer.indices(extent)
    if step != 1:
        raise upstream.SubChunkIndexingError(
            f"a slice with step {step} along axis {axis} would split stored chunks"
        )
    stop = max(stop, start)
    if start == stop:
        raise NotImplementedError(
            f"an empty selection along axis {axis} of a rectilinear ManifestArray is not supported"
        )
    first = dim.index_to_chunk(start)
    if dim.chunk_offset(first) != start:
        raise upstream.SubChunkIndexingError(boundaries_message)
    if stop == extent:
        end = dim.nchunks
    else:
        end = dim.index_to_chunk(stop)
        if dim.chunk_offset(end) != stop:
            raise upstream.SubChunkIndexingError(boundaries_message)
    edges = codec_edges(dim)[first:end]
    return slice(first, end, 1), dimension_from_edges(edges, stop - start)


def normalized_indexer(x: ManifestArray, key: Any) -> tuple[Any, ...]:
    """``key`` as one entry per axis (``...`` expanded), ``None`` entries kept."""
    return tuple(upstream.normalize_indexer(key, x.ndim))


def indexed(x: ManifestArray, indexer: tuple[Any, ...]) -> Built:
    """Metadata and manifest of the chunk-aligned basic selection ``indexer``
    (:func:`normalized_indexer`, ``None`` entries ignored: the caller inserts them)."""
    basic = [i for i in indexer if i is not None]
    dims = chunk_grid(x.metadata).dimensions
    selectors: list[int | slice] = []
    new_dims: list[DimensionGrid] = []
    dropped: list[int] = []
    for axis, (dim, ind) in enumerate(zip(dims, basic, strict=True)):
        if isinstance(ind, np.ndarray):
            raise NotImplementedError(
                "reindexing or fancy indexing a rectilinear ManifestArray is not supported "
                "(xarray alignment along a rectilinear axis needs labels on chunk boundaries); "
                "align the inputs before virtualizing or load the variable"
            )
        selector, new_dim = _select_1d(dim, cast(int | slice, ind), axis)
        selectors.append(selector)
        if new_dim is None:
            dropped.append(axis)
        else:
            new_dims.append(new_dim)
    full = all(
        isinstance(s, slice) and s == slice(0, d.nchunks, 1)
        for s, d in zip(selectors, dims, strict=True)
    )
    if full:
        return x.metadata, x.manifest
    manifest = upstream.subset_manifest(x.manifest, tuple(selectors))
    codecs: list[Any] = list(x.metadata.codecs)
    for axis in reversed(dropped):
        codecs = codecs_without_axis(codecs, axis)
    names = x.metadata.dimension_names
    if names is not None:
        names = tuple(n for a, n in enumerate(names) if a not in dropped)
    metadata = dataclasses.replace(
        x.metadata,
        shape=tuple(d.extent for d in new_dims),
        chunk_grid=grid_metadata(new_dims),
        codecs=tuple(codecs),
        dimension_names=names,
    )
    return metadata, manifest


def new_axis_positions(indexer: tuple[Any, ...]) -> list[int]:
    """Where ``None`` entries insert axes: numpy puts each after the output axes of the
    entries before it (integer entries have none)."""
    positions = []
    position = 0
    for item in indexer:
        if item is None:
            positions.append(position)
        if not isinstance(item, int | np.integer):
            position += 1
    return positions


__all__ = [
    "Built",
    "broadcast",
    "check_manifest_matches_grid",
    "concatenated",
    "describer",
    "first_path",
    "indexed",
    "missing_element_mask",
    "new_axis_positions",
    "normalized_indexer",
    "stacked",
]
