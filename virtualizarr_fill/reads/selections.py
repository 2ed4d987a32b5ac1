"""A selection of a ManifestArray read into an output array, planned without zarr's
per-chunk objects (inside :func:`virtualizarr_fill.fast_reads`).

Before it calls the codec pipeline, zarr builds three objects for every chunk of a read:
a chunk projection from the indexer, a ``StorePath`` for the chunk key (which the
pipeline then parses back into grid indices) and, on rectilinear grids, an
``ArraySpec``: most of the time taken to read an array of ten thousand small chunks.
:func:`read_selection` instead

1. projects the selection per dimension (zarr's own dimension indexers, or for step-1
   slices and integers the same projections worked out from the chunk edges) and plans
   the read from the manifest's arrays at once
   (:mod:`~virtualizarr_fill.reads.planning`);
2. hands the decoders one lazily built chunk description per chunk
   (:class:`ChunkDescriptions`, one ``ArraySpec`` per distinct chunk shape);
3. for a step-1 selection of many small chunks on a lattice, reads the chunks into one
   array of whole chunks and copies the selected part at once
   (:mod:`~virtualizarr_fill.reads.block_reads`), or reads chunks stored one after the
   other in a local file as one range (:mod:`~virtualizarr_fill.reads.spans`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.chunk_grids import FixedDimension
from zarr.core.chunk_utils import fill_value_or_default
from zarr.core.indexing import (
    BasicIndexer,
    ChunkDimProjection,
    IntDimIndexer,
    OrthogonalIndexer,
    SliceDimIndexer,
)

from virtualizarr_fill.reads import lattice, planning
from virtualizarr_fill.reads.block_reads import SPLIT_MIN_WIDTH, read_blocks
from virtualizarr_fill.reads.chunk_failures import naming_failures
from virtualizarr_fill.reads.decoders import output_decoder
from virtualizarr_fill.reads.deinterleave import splits_fast
from virtualizarr_fill.reads.lattice import Lattice, plain_numbers
from virtualizarr_fill.reads.spans import read_in_place

if TYPE_CHECKING:
    from zarr.core.buffer import BufferPrototype
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.indexing import Indexer
    from zarr.core.metadata import ArrayMetadata

    from virtualizarr_fill.manifests.upstream import ManifestEntries
    from virtualizarr_fill.reads.decoders import CodecChain
    from virtualizarr_fill.reads.scheduling import Runner

#: Decoded chunk size up to which a read of many chunks is assembled from one array of
#: whole chunks (one copy into the output for all of them); larger chunks are copied
#: into the output one at a time, which saves that extra copy.
BLOCK_CHUNK_BYTES = 64 << 10
#: Fewest chunks in a read assembled from an array of whole chunks.
BLOCK_MIN_CHUNKS = 16

#: Most decoded bytes of a read of several pixel-interleaved chunks that are decoded
#: side by side and split into bands at once (``block_reads.read_blocks``, where OpenCV
#: splits them); larger reads split each chunk on its own, keeping the memory they take
#: near the output's. Split one at a time into their places, each plane's rows apart, the
#: 128x128 tiles of a 512x384 RGB image took twice as long to copy.
SPLIT_AT_ONCE_BYTES = 16 << 20


class ChunkDescriptions(Sequence[tuple[None, ArraySpec, tuple[Any, ...], tuple[Any, ...], bool]]):
    """The chunk descriptions (:data:`~virtualizarr_fill.reads.decoders.ChunkInfo`, without
    a ``ByteGetter``) of the chunks of a basic selection, in zarr's order (the product
    of the dimensions' projections), each built when asked for."""

    def __init__(
        self,
        dims: list[list[ChunkDimProjection]],
        specs: list[list[int]] | ArraySpec,
        spec_of: Any,
    ) -> None:
        self._sizes = [len(d) for d in dims][::-1]  # innermost first, as items unravel
        self._count = math.prod(self._sizes)
        self._chunk_selections = [[p.dim_chunk_sel for p in d] for d in dims]
        # A dimension an integer selects is dropped from the output: no place in it.
        self._out_selections = [
            [p.dim_out_sel for p in d] for d in dims if d and d[0].dim_out_sel is not None
        ]
        self._out_dims = [k for k, d in enumerate(dims) if d and d[0].dim_out_sel is not None]
        self._complete = [[p.is_complete_chunk for p in d] for d in dims]
        self._specs = specs
        self._spec_of = spec_of

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, item: Any) -> Any:
        if not isinstance(item, int):
            raise TypeError("one chunk at a time")
        if not 0 <= item < self._count:
            raise IndexError(item)
        # ``map`` with ``operator.getitem``: a description costs a few C calls per
        # dimension instead of a generator each (a read of a few small chunks builds
        # one per chunk, about as long as decoding a small strip).
        picks = []
        for size in self._sizes:
            item, k = divmod(item, size)
            picks.append(k)
        picks.reverse()
        if isinstance(self._specs, ArraySpec):
            spec = self._specs
        else:
            spec = self._spec_of(tuple(map(operator.getitem, self._specs, picks)))
        out_picks = [picks[k] for k in self._out_dims]
        return (
            None,
            spec,
            tuple(map(operator.getitem, self._chunk_selections, picks)),
            tuple(map(operator.getitem, self._out_selections, out_picks)),
            all(map(operator.getitem, self._complete, picks)),
        )


async def read_selection(
    store: Any,
    manifest: object,
    entries: ManifestEntries,
    metadata: ArrayMetadata,
    pipeline: CodecChain,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    indexer: Indexer,
    prototype: BufferPrototype,
    target: np.ndarray[Any, Any],
    run: Runner,
) -> None:
    """Read the selection of ``indexer`` of an array (``metadata``, read with
    ``pipeline``) of a ManifestStore into ``target``: what zarr's ``_get_selection``
    reads. ``entries`` are the entries of the array's ``manifest``; ``run`` fetches and
    decodes (on zarr's event loop or in the calling thread)."""

    def spec_of(shape: tuple[int, ...]) -> ArraySpec:
        return chunk_spec(shape, metadata.dtype, metadata.fill_value, config, prototype)

    ndim = len(metadata.shape)
    batch: Sequence[Any]
    if isinstance(indexer, BasicIndexer) or _slices_and_integers(indexer):
        grids = chunk_grid._dimensions
        ranges = step_one_ranges(indexer)
        count = math.prod(len(r) for r in ranges) if ranges is not None else 0
        many = count >= BLOCK_MIN_CHUNKS
        # Pixel-interleaved chunks, enough bytes together for OpenCV to split them into
        # bands at once (see SPLIT_AT_ONCE_BYTES).
        raw = pipeline.raw
        split = count > 1 and raw is not None and raw.interleaved and splits_fast(target.nbytes)
        if ranges is not None and (many or split or plain_numbers(pipeline)):
            layout = lattice.block_layout(grids, ranges, spec_of)
            if layout is not None:
                on_lattice = Lattice(
                    store, manifest, entries, pipeline, layout, indexer, ranges, target, run
                )
                if await read_in_place(on_lattice):
                    return
                chunk_nbytes = math.prod(layout[0].shape) * target.itemsize
                if (many and chunk_nbytes <= BLOCK_CHUNK_BYTES) or (
                    split and _split_at_once(layout[0].shape, count * chunk_nbytes, target)
                ):
                    await read_blocks(on_lattice)
                    return
        if ranges is not None:
            dims = step_one_projections(indexer, ranges)
            plan = planning.plan_ranges(entries, ranges)
        else:
            dims = [list(d) for d in indexer.dim_indexers]
            plan = planning.plan_indices(entries, [[p.dim_chunk_ix for p in d] for d in dims])
        per_dim = [
            [g.chunk_size(p.dim_chunk_ix) for p in dim] for g, dim in zip(grids, dims, strict=True)
        ]
        regular = all(isinstance(g, FixedDimension) for g in grids)
        specs = spec_of(chunk_grid.chunk_shape) if regular else per_dim
        batch = ChunkDescriptions(dims, specs, spec_of)
        drop_axes: tuple[int, ...] = ()
    else:
        projections = list(indexer)
        batch = [
            (
                None,
                spec_of(
                    tuple(
                        g.chunk_size(i)
                        for g, i in zip(chunk_grid._dimensions, p.chunk_coords, strict=True)
                    )
                ),
                p.chunk_selection,
                p.out_selection,
                p.is_complete_chunk,
            )
            for p in projections
        ]
        coords = [tuple(p.chunk_coords) for p in projections]
        if len(coords) <= planning.FEW_CHUNKS:
            plan = planning.plan_entries(entries, coords)
        else:
            rows = np.array(coords, dtype=np.intp).reshape(len(coords), ndim)
            plan = planning.plan_rows(entries, rows)
        drop_axes = indexer.drop_axes
    plan.decoded_nbytes = target.nbytes
    decode = output_decoder(pipeline, drop_axes, target)
    await run(store, plan, batch, naming_failures(decode, store, entries, plan))
    for i in plan.missing:
        _, spec, _, out_selection, _ = batch[i]
        target[out_selection] = fill_value_or_default(spec)


#: zarr's chunk specs (:func:`chunk_spec`), by chunk shape, buffer prototype and the ids
#: of the other arguments: zarr's parse of a spec's shape and fill value costs as much as
#: planning the rest of the read of a small file. Each entry keeps those arguments, so
#: that their ids are not reused while it lives; emptied when :data:`SPECS_KEPT` are kept.
_specs: dict[tuple[Any, ...], tuple[Any, ...]] = {}
#: Chunk specs kept.
SPECS_KEPT = 256


def chunk_spec(
    shape: tuple[int, ...], dtype: Any, fill_value: Any, config: ArrayConfig, prototype: Any
) -> ArraySpec:
    """zarr's ``ArraySpec`` of a chunk: the same object for the same arguments (an
    ``ArraySpec`` is immutable, and zarr's parse of its shape and fill value costs as
    much as planning the rest of the read of a small file). Every open of an array
    shares its metadata's data type and fill value objects
    (:func:`~virtualizarr_fill.reads.zarr_opens.read_metadata_v3`)."""
    # A buffer prototype is a new tuple at every read: compared by value (two classes).
    key = (shape, id(dtype), id(fill_value), id(config), prototype)
    kept = _specs.get(key)
    if kept is not None:
        return kept[-1]  # type: ignore[no-any-return]
    spec = ArraySpec(
        shape=shape, dtype=dtype, fill_value=fill_value, config=config, prototype=prototype
    )
    if len(_specs) >= SPECS_KEPT:
        _specs.clear()
    _specs[key] = (dtype, fill_value, config, prototype, spec)
    return spec


def _slices_and_integers(indexer: Indexer) -> TypeGuard[OrthogonalIndexer]:
    """An orthogonal selection of slices and integers only: a basic one (zarr's
    ``Array.__getitem__`` reads every tuple of slices and integers, xarray's reads
    among them, as an orthogonal selection)."""
    return isinstance(indexer, OrthogonalIndexer) and all(
        isinstance(dim, (IntDimIndexer, SliceDimIndexer)) for dim in indexer.dim_indexers
    )


def step_one_ranges(indexer: BasicIndexer | OrthogonalIndexer) -> list[range] | None:
    """The grid indices of the chunks a basic selection of step-1 slices and integers
    reads, per dimension (every chunk in each range holds selected items); None for
    other selections."""
    ranges = []
    for dim in indexer.dim_indexers:
        grid = dim.dim_grid
        if isinstance(dim, IntDimIndexer):
            index = grid.index_to_chunk(dim.dim_sel)
            ranges.append(range(index, index + 1))
        elif isinstance(dim, SliceDimIndexer) and dim.step == 1 and dim.start < dim.stop:
            first, last = grid.index_to_chunk(dim.start), grid.index_to_chunk(dim.stop - 1)
            ranges.append(range(first, last + 1))
        else:
            return None
    return ranges


def step_one_projections(
    indexer: BasicIndexer | OrthogonalIndexer, ranges: list[range]
) -> list[list[ChunkDimProjection]]:
    """What zarr's dimension indexers yield (``list(dim_indexer)`` per dimension) for a
    selection of step-1 slices and integers whose chunks are ``ranges``
    (:func:`step_one_ranges`): the same projections, from each chunk's offset and size
    in zarr's grid. zarr's iterators handle any step, at a cost per chunk as large as
    the rest of planning the read of a few small chunks."""
    dims = []
    for dim, indices in zip(indexer.dim_indexers, ranges, strict=True):
        grid = dim.dim_grid
        projections = []
        if isinstance(dim, IntDimIndexer):
            index = indices.start
            offset = grid.chunk_offset(index)
            projections.append(
                ChunkDimProjection(index, dim.dim_sel - offset, None, grid.data_size(index) == 1)
            )
        else:
            assert isinstance(dim, SliceDimIndexer)  # step_one_ranges checked
            start, stop = dim.start, dim.stop
            for index in indices:
                offset = grid.chunk_offset(index)
                limit = offset + grid.data_size(index)
                first = max(start, offset)
                last = min(stop, limit)
                projections.append(
                    ChunkDimProjection(
                        index,
                        slice(first - offset, last - offset, 1),
                        slice(first - start, last - start),
                        first == offset and stop >= limit,
                    )
                )
        dims.append(projections)
    return dims


def _split_at_once(chunk_shape: tuple[int, ...], nbytes: int, target: np.ndarray[Any, Any]) -> bool:
    """Whether pixel-interleaved chunks of ``chunk_shape`` (band, y, x), ``nbytes``
    together, are split into bands at once for a read of every band into ``target``."""
    return (
        chunk_shape[-1] >= SPLIT_MIN_WIDTH
        and nbytes <= SPLIT_AT_ONCE_BYTES
        and target.ndim == 3
        and target.shape[0] == chunk_shape[0]
    )


__all__ = [
    "BLOCK_CHUNK_BYTES",
    "BLOCK_MIN_CHUNKS",
    "SPLIT_AT_ONCE_BYTES",
    "ChunkDescriptions",
    "chunk_spec",
    "read_selection",
    "step_one_projections",
    "step_one_ranges",
]
