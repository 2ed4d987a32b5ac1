"""Chunks on a lattice: a step-1 selection whose chunks all have one shape, but the last
along a dimension, which may be shorter.

Regular grids are such a lattice, and so are rectilinear dimensions whose chunks all
have one size but the grid's last (a TIFF's short last strip, a file concatenated last):
that chunk fills the start of its place in the lattice (:func:`block_layout`). The
chunks of a lattice can be decoded into one array of whole chunks
(:mod:`~virtualizarr_fill.reads.block_reads`) or, stored as plain numbers one after the
other in a file, read as one range (:mod:`~virtualizarr_fill.reads.spans`), instead of
chunk by chunk. A :class:`Lattice` is such a read.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.core.array_spec import ArraySpec
from zarr.core.chunk_grids import FixedDimension
from zarr.core.indexing import BasicIndexer, IntDimIndexer, OrthogonalIndexer, SliceDimIndexer

from virtualizarr_fill.reads import planning

if TYPE_CHECKING:
    from virtualizarr_fill.manifests.upstream import ManifestEntries
    from virtualizarr_fill.reads.decoders import CodecChain
    from virtualizarr_fill.reads.planning import ReadPlan
    from virtualizarr_fill.reads.scheduling import Runner


def block_layout(
    grids: Sequence[Any],
    ranges: list[range],
    spec_of: Callable[[tuple[int, ...]], ArraySpec],
) -> tuple[ArraySpec, dict[int, ArraySpec]] | None:
    """The spec of a whole chunk when the chunks of ``ranges`` lie on a regular lattice,
    and the specs of the chunks that are shorter (by item, in their product's order).

    Regular grids are such a lattice; so are rectilinear dimensions whose chunks all have
    one size but the grid's last, which may be shorter (a TIFF's last strip, a file
    concatenated last): that chunk fills the start of its place in the lattice. None for
    other rectilinear grids."""
    sizes = []
    shorts: dict[int, int] = {}  # axis -> short size, for dimensions reading a short last chunk
    for axis, (grid, indices) in enumerate(zip(grids, ranges, strict=True)):
        if isinstance(grid, FixedDimension):
            sizes.append(grid.size)
            continue
        edges = getattr(grid, "edges", None)
        if not edges:
            return None
        size = edges[0]
        uniform = edges.count(size)  # a C loop: rectilinear grids may have many edges
        if uniform != len(edges) and not (uniform == len(edges) - 1 and edges[-1] < size):
            return None
        sizes.append(size)
        if edges[-1] < size and indices[-1] == len(edges) - 1:
            shorts[axis] = edges[-1]
    short: dict[int, ArraySpec] = {}
    if shorts:
        # The chunks at the last index of a short axis, each with its shape: their
        # product indices picked directly (a lattice may hold many chunks, few short).
        counts = [len(r) for r in ranges]
        strides = [math.prod(counts[axis + 1 :]) for axis in range(len(counts))]
        for axis in shorts:
            picks = [range(n) if other != axis else (n - 1,) for other, n in enumerate(counts)]
            for pick in itertools.product(*picks):
                item = sum(k * stride for k, stride in zip(pick, strides, strict=True))
                if item not in short:
                    short[item] = spec_of(
                        tuple(
                            shorts[a] if a in shorts and k == counts[a] - 1 else size
                            for a, (k, size) in enumerate(zip(pick, sizes, strict=True))
                        )
                    )
    return spec_of(tuple(sizes)), short


@dataclasses.dataclass(frozen=True)
class Lattice:
    """A step-1 selection of chunks on a lattice (:func:`block_layout`) to read into
    ``target``: what :func:`~virtualizarr_fill.reads.spans.read_in_place` and
    :func:`~virtualizarr_fill.reads.block_reads.read_blocks` take. ``manifest`` is the
    ChunkManifest whose ``entries`` these are."""

    store: Any
    manifest: object
    entries: ManifestEntries
    pipeline: CodecChain
    layout: tuple[ArraySpec, dict[int, ArraySpec]]
    indexer: BasicIndexer | OrthogonalIndexer
    ranges: list[range]
    target: np.ndarray[Any, Any]
    run: Runner

    @functools.cached_property
    def plan(self) -> ReadPlan:
        """Where the chunks are (located once for both ways of reading them)."""
        return planning.plan_ranges(self.entries, self.ranges)

    @functools.cached_property
    def selection(self) -> tuple[list[slice], np.ndarray[Any, Any]]:
        """The selection within the whole chunks, and ``target`` with the axes it drops
        put back (size 1), so that the two have the same dimensions."""
        selection, dropped = _block_selection(self.indexer, self.ranges, self.layout[0].shape)
        view = np.expand_dims(self.target, tuple(dropped)) if dropped else self.target
        return selection, view


def _block_selection(
    indexer: BasicIndexer | OrthogonalIndexer, ranges: list[range], chunk_shape: tuple[int, ...]
) -> tuple[list[slice], list[int]]:
    """The selection within the whole chunks of ``ranges``, and the axes it drops."""
    selection = []
    dropped = []
    for axis, (dim_indexer, indices) in enumerate(zip(indexer.dim_indexers, ranges, strict=True)):
        first = indices.start * chunk_shape[axis]
        if isinstance(dim_indexer, IntDimIndexer):
            start, stop = dim_indexer.dim_sel - first, dim_indexer.dim_sel - first + 1
            dropped.append(axis)
        else:
            assert isinstance(dim_indexer, SliceDimIndexer)  # selections.step_one_ranges checked
            start, stop = dim_indexer.start - first, dim_indexer.stop - first
        selection.append(slice(start, stop))
    return selection, dropped


def lattice_array(
    blocks: np.ndarray[Any, Any], counts: list[int], chunk_shape: tuple[int, ...]
) -> np.ndarray[Any, Any]:
    """Whole chunks (one per item, in the order of the product of ``counts`` chunks per
    dimension) as the one array they tile."""
    ndim = len(chunk_shape)
    whole = blocks.reshape(*counts, *chunk_shape)
    whole = whole.transpose([k for d in range(ndim) for k in (d, ndim + d)])
    return whole.reshape([n * c for n, c in zip(counts, chunk_shape, strict=True)])


def plain_numbers(pipeline: CodecChain) -> bool:
    """Whether the chunks are stored as plain numbers in the array's own order (no
    compression, no transposes): candidates for
    :func:`~virtualizarr_fill.reads.spans.read_in_place`."""
    raw = pipeline.raw
    return (
        raw is not None
        and not raw.inverse_orders
        and raw.predictor is None
        and not pipeline.inner.bytes_bytes_codecs
    )


__all__ = ["Lattice", "block_layout", "lattice_array", "plain_numbers"]
