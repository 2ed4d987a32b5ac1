"""Metadata of virtually concatenated and stacked arrays.

Along the concatenation axis every input keeps its own chunk edges, and an input's last
chunk is cut to its logical length when more data follows it; other axes must have the
same data edges in every input. The grid stays regular when the edges allow it
(:mod:`virtualizarr_fill.zarr_model.chunk_grids`), the codec chain gains the edge codec the inputs'
padded chunks need (:mod:`.edge_decisions`), and the fill information follows the
fill-conflict policy (:mod:`.inputs`, :mod:`virtualizarr_fill.fill.conflicts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from zarr.core.chunk_grids import ChunkGrid, DimensionGrid, FixedDimension
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.zarr_model.axes import codecs_with_new_axis
from virtualizarr_fill.zarr_model.chunk_grids import (
    codec_edges,
    data_edges,
    dimension_from_edges,
    format_edges,
    grid_metadata,
)
from virtualizarr_fill.zarr_model.concat_inputs import (
    Describe,
    check_inputs,
    default_describe,
    first_difference,
)
from virtualizarr_fill.zarr_model.edge_decisions import (
    NeedsCollector,
    PairCache,
    axis_pairs,
    final_codecs,
)


def _non_concat_dimension(
    grids: Sequence[ChunkGrid],
    axis: int,
    describe: Describe,
    what: str,
) -> DimensionGrid:
    """The result's dimension along an axis every input shares."""
    first_dim = grids[0].dimensions[axis]
    first_data = data_edges(first_dim)
    last_codec_edges: set[int] = set()
    same_dims = True
    for i, grid in enumerate(grids):
        dim = grid.dimensions[axis]
        if dim is first_dim or dim == first_dim:
            continue
        same_dims = False
        edges = data_edges(dim)
        if edges != first_data:
            raise IncompatibleArraysError(
                f"cannot {what} {describe(0)} and {describe(i)}: different chunk edges on "
                f"axis {axis}, which is not the {what} axis ({format_edges(first_data)} vs "
                f"{format_edges(edges)})"
            )
        if edges:
            last_codec_edges.add(codec_edges(dim)[-1])
    if same_dims or not first_data:
        return first_dim
    last_codec_edges.add(codec_edges(first_dim)[-1])
    edges = (*first_data[:-1], min(last_codec_edges))
    return dimension_from_edges(edges, first_dim.extent)


def _check_shapes_except(
    metadatas: Sequence[ArrayV3Metadata], axis: int | None, describe: Describe, what: str
) -> None:
    def key(m: ArrayV3Metadata) -> tuple[int, ...]:
        return tuple(s for a, s in enumerate(m.shape) if a != axis)

    index = first_difference(metadatas, key)
    if index is not None:
        where = "except along the concatenation axis" if axis is not None else ""
        raise IncompatibleArraysError(
            f"cannot {what} {describe(0)} and {describe(index)}: shapes {metadatas[0].shape} "
            f"and {metadatas[index].shape} differ {where}".rstrip()
        )


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise IndexError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def concatenation_metadata(
    metadatas: Sequence[ArrayV3Metadata],
    axis: int,
    describe: Describe | None = None,
    grid_shapes: Sequence[tuple[int, ...]] | None = None,
) -> ArrayV3Metadata:
    """Metadata of the concatenation of arrays with these metadata along ``axis``.

    The chunk grid along ``axis`` lists every input's chunk edges, each input's last
    chunk cut to its logical length except the final input's; other axes must have the
    same data edges in every input. The codec chain is the inputs' common chain with
    the truncate or crop codec their padded chunks need.

    ``describe(i)`` names input ``i`` in messages; ``grid_shapes``, when given, are the
    chunk-grid shapes of the inputs' chunk manifests, checked against their metadata.

    Raises :class:`~virtualizarr_fill.errors.IncompatibleArraysError` naming the inputs
    and the difference when no single array can describe them.
    """
    describe = describe or default_describe
    profiles, (fill_value, attributes) = check_inputs(metadatas, describe, grid_shapes)
    ndim = metadatas[0].ndim
    axis = _normalize_axis(axis, ndim)
    _check_shapes_except(metadatas, axis, describe, "concatenate")
    grids = [p.grid for p in profiles]

    # Along the concatenation axis: every input's data edges, the final input's last
    # edge as its codec edge (an overhanging final chunk needs no trimming).
    concat_edges: list[int] = []
    extent = 0
    last_nonempty = max(
        (i for i, g in enumerate(grids) if g.dimensions[axis].nchunks), default=None
    )
    for i, grid in enumerate(grids):
        dim = grid.dimensions[axis]
        extent += dim.extent
        if i == last_nonempty:
            concat_edges.extend(data_edges(dim)[:-1])
            concat_edges.append(codec_edges(dim)[-1])
        else:
            concat_edges.extend(data_edges(dim))

    dims: list[DimensionGrid] = []
    for a in range(ndim):
        if a == axis:
            if concat_edges:
                dims.append(dimension_from_edges(concat_edges, extent))
            else:
                dims.append(grids[0].dimensions[a])
        else:
            dims.append(_non_concat_dimension(grids, a, describe, "concatenate"))

    collector = NeedsCollector(describe)
    out_codec = [codec_edges(d) for d in dims]
    pairs_of = PairCache(out_codec)
    offset = 0
    for i, profile in enumerate(profiles):
        per_axis = []
        for a, dim in enumerate(profile.grid.dimensions):
            if a == axis:
                in_edges = codec_edges(dim)
                out = out_codec[a][offset : offset + len(in_edges)]
                offset += len(in_edges)
                per_axis.append(axis_pairs(in_edges, out))
            else:
                per_axis.append(pairs_of(a, dim))
        collector.add(i, profile, per_axis)

    codecs = final_codecs(profiles[0].base_codecs, collector.needs, describe)
    shape = list(metadatas[0].shape)
    shape[axis] = extent
    return dataclasses.replace(
        metadatas[0],
        shape=tuple(shape),
        chunk_grid=grid_metadata(dims),
        codecs=tuple(codecs),
        fill_value=fill_value,
        attributes=attributes,
    )


def stack_metadata(
    metadatas: Sequence[ArrayV3Metadata],
    axis: int,
    describe: Describe | None = None,
    grid_shapes: Sequence[tuple[int, ...]] | None = None,
) -> ArrayV3Metadata:
    """Metadata of stacking arrays with these metadata along a new axis ``axis``.

    The new axis has chunks of length one; every other axis must have the same data
    edges in every input (padded and unpadded edge chunks combine as for
    :func:`concatenation_metadata`).
    """
    describe = describe or default_describe
    profiles, (fill_value, attributes) = check_inputs(metadatas, describe, grid_shapes)
    ndim = metadatas[0].ndim
    axis = _normalize_axis(axis, ndim + 1)
    _check_shapes_except(metadatas, None, describe, "stack")
    grids = [p.grid for p in profiles]
    dims = [_non_concat_dimension(grids, a, describe, "stack") for a in range(ndim)]
    out_codec = [codec_edges(d) for d in dims]
    pairs_of = PairCache(out_codec)
    collector = NeedsCollector(describe)
    for i, profile in enumerate(profiles):
        per_axis = [pairs_of(a, dim) for a, dim in enumerate(profile.grid.dimensions)]
        collector.add(i, profile, per_axis)
    codecs = final_codecs(profiles[0].base_codecs, collector.needs, describe)
    dims.insert(axis, FixedDimension(size=1, extent=len(metadatas)))
    shape = list(metadatas[0].shape)
    shape.insert(axis, len(metadatas))
    names = metadatas[0].dimension_names
    return dataclasses.replace(
        metadatas[0],
        shape=tuple(shape),
        chunk_grid=grid_metadata(dims),
        codecs=tuple(codecs_with_new_axis(codecs, axis)),
        fill_value=fill_value,
        attributes=attributes,
        dimension_names=None if names is None else (*names[:axis], None, *names[axis:]),
    )


__all__ = ["concatenation_metadata", "stack_metadata"]
