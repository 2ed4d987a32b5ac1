"""Chunks stored as plain numbers one after the other in a file, read as one byte range.

Uncompressed strips and tiles written one after the other (most uncompressed TIFFs) and
HDF5 contiguous datasets are one run of their file
(:func:`~virtualizarr_fill.reads.planning.one_span` finds it). A read of a lattice of
such chunks (:class:`~virtualizarr_fill.reads.lattice.Lattice`) then reads that range

* straight into the output where the selection is one run of the chunks' bytes
  (:func:`read_in_place`: one ``os.preadv``, no buffer, no copy);
* a piece at a time where the output's layout differs (bands interleaved, part of each
  row), each piece copied into the output while it is still in the processor's cache
  (:func:`read_span_in_pieces`);
* whole, into one buffer viewed as the whole chunks (:func:`read_span`), for other
  stores or where the above do not apply.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from obstore.store import LocalStore
from zarr.core.array_spec import ArraySpec

from virtualizarr_fill.errors import StoreReadError
from virtualizarr_fill.manifests.byte_ranges import local_descriptor, read_at, read_into
from virtualizarr_fill.reads import planning, scheduling
from virtualizarr_fill.reads.deinterleave import copy_planes
from virtualizarr_fill.reads.fetching import file_store
from virtualizarr_fill.reads.lattice import Lattice, lattice_array, plain_numbers
from virtualizarr_fill.reads.planning import ReadPlan

if TYPE_CHECKING:
    from virtualizarr_fill.reads.raw_layout import RawLayout
    from virtualizarr_fill.reads.scheduling import Runner

#: Bytes read at a time from one run of chunks stored as plain numbers whose layout the
#: output changes (:func:`read_span_in_pieces`): small enough to stay in the
#: processor's cache between the read and the copy, large enough that the Python around
#: each piece costs little next to it.
SPAN_PIECE_BYTES = 512 << 10


async def read_in_place(lattice: Lattice) -> bool:
    """Read a step-1 selection of chunks on a lattice straight into ``target`` when it
    is one run of the chunks' bytes (:func:`_contiguous_offset`), laid one after the
    other in one local file (:func:`~virtualizarr_fill.reads.planning.one_span`); False,
    nothing read, otherwise.

    That is reading an uncompressed strip TIFF, or an HDF5 contiguous dataset, whole
    or by rows: one read, no buffer, no copy (a large buffer's fresh pages cost as
    much as the read)."""
    pipeline = lattice.pipeline
    raw = pipeline.raw
    if raw is None or not plain_numbers(pipeline):
        return False
    spec, short = lattice.layout
    selection, view = lattice.selection
    counts = [len(r) for r in lattice.ranges]
    if not view.flags.c_contiguous or raw.view_dtype.newbyteorder("=") != view.dtype:
        return False
    offset = _contiguous_offset(counts, spec.shape, selection)
    if offset is None:
        return False
    count = math.prod(counts)
    nbytes = math.prod(spec.shape) * raw.view_dtype.itemsize
    short_last = short_prefix(raw, spec.shape, short, count)
    span = planning.one_span(lattice.manifest, lattice.entries, lattice.ranges, nbytes, short_last)
    if span is None:
        return False
    url, start, end = span
    out = view.reshape(-1).view(np.uint8)
    start += offset * raw.view_dtype.itemsize
    if start + out.nbytes > end:
        return False
    obj_store, path = file_store(lattice.store, url)
    if lattice.run is scheduling.read_planned_here or out.nbytes < scheduling.THREADED_BYTES:
        done = read_into(obj_store, path, start, out)
    else:  # a large read, on zarr's event loop: not there
        loop = asyncio.get_running_loop()
        done = await loop.run_in_executor(
            scheduling.thread_pool(), read_into, obj_store, path, start, out
        )
    if done and raw.view_dtype != view.dtype:
        view.byteswap(inplace=True)
    return done


def _contiguous_offset(
    counts: list[int], chunk_shape: tuple[int, ...], selection: list[slice]
) -> int | None:
    """Where ``selection`` starts (in items) in the whole chunks laid one after the
    other (``counts`` of ``chunk_shape`` per dimension, each in C order), when those
    are the combined array in C order and the selection is one run of it; None
    otherwise.

    The chunks are the combined array when they split one dimension, every dimension
    before it of size 1; a selection is one run when every dimension after its last
    partly selected one is selected whole, and every one before it is one item."""
    split = [axis for axis, n in enumerate(counts) if n > 1]
    if len(split) > 1 or any(size != 1 for size in chunk_shape[: split[0] if split else 0]):
        return None
    extents = [n * size for n, size in zip(counts, chunk_shape, strict=True)]
    partial = [
        axis
        for axis, (part, extent) in enumerate(zip(selection, extents, strict=True))
        if part.start != 0 or part.stop != extent
    ]
    before = selection[: partial[-1]] if partial else []
    if any(part.stop - part.start != 1 for part in before):
        return None
    offset, stride = 0, 1
    for part, extent in zip(reversed(selection), reversed(extents), strict=True):
        offset += part.start * stride
        stride *= extent
    return offset


async def read_span_in_pieces(lattice: Lattice) -> bool:
    """Read chunks stored as plain numbers that lie one after the other in one local
    file (:func:`~virtualizarr_fill.reads.planning.one_span`) a piece of
    :data:`SPAN_PIECE_BYTES` at a time, each piece copied into the output (predictor
    undone, transposes undone) while it is still in the processor's cache; False,
    nothing read, for other reads, small ones, or where a piece cannot be read (the
    caller then reads the usual way, which reports why).

    That is a large pixel-interleaved uncompressed TIFF, whose bands are separated by a
    copy (:func:`~virtualizarr_fill.reads.deinterleave.copy_planes`): read whole into a new
    buffer first, the buffer's fresh pages and the cache misses of copying out of it
    cost twice the copy. The file is opened once for all pieces. Reads of
    :data:`~virtualizarr_fill.reads.scheduling.THREADED_BYTES` or more split the pieces
    among worker threads (NumPy's strided copies release the GIL), unless OpenCV split
    the first piece: its copy is then quicker than the hand-off."""
    pipeline, (spec, short) = lattice.pipeline, lattice.layout
    raw = pipeline.raw
    if raw is None or pipeline.inner.bytes_bytes_codecs:
        return False
    counts = [len(r) for r in lattice.ranges]
    count = math.prod(counts)
    stored_shape = raw.stored_shape(spec)
    nbytes = math.prod(stored_shape) * raw.view_dtype.itemsize
    split = next((axis for axis, n in enumerate(counts) if n > 1), None)
    if split is None or count * nbytes < 2 * SPAN_PIECE_BYTES:
        return False
    short_last = short_prefix(raw, stored_shape, short, count)
    span = planning.one_span(lattice.manifest, lattice.entries, lattice.ranges, nbytes, short_last)
    if span is None:
        return False
    url, start, end = span
    obj_store, path = file_store(lattice.store, url)
    if not isinstance(obj_store, LocalStore):
        return False  # one request for the span: pieces would each be one
    # Axes before ``split`` hold one chunk each, so a range of indices along it is one
    # run of items, and of the span's bytes.
    per_index = math.prod(counts[split + 1 :]) * nbytes
    step = max(1, SPAN_PIECE_BYTES // per_index)
    selection, view = lattice.selection
    chunk_length = spec.shape[split]
    first_selected, last_selected = selection[split].start, selection[split].stop
    # Every chunk of the lattice holds selected items.
    pieces = [(a, min(a + step, counts[split])) for a in range(0, counts[split], step)]

    # The selection along every axis but ``split`` (along it, per piece).
    across = list(selection)
    across[split] = slice(None)

    def piece_values(scratch: np.ndarray[Any, Any], chunks: int) -> np.ndarray[Any, Any]:
        """The values of ``chunks`` chunks along ``split`` read to the start of
        ``scratch``, selected along every other axis: a view of ``scratch`` without a
        predictor. Chunks follow one another along ``split`` in the piece (axes before it
        have one each), so a shorter piece is a prefix of a longer one."""
        blocks = scratch[: chunks * per_index].view(raw.view_dtype).reshape(-1, *stored_shape)
        blocks = raw.untransposed(raw.undo_predictor(blocks))
        piece_counts = [*counts[:split], chunks, *counts[split + 1 :]]
        return lattice_array(blocks, piece_counts, spec.shape)[tuple(across)]

    def scratch_and_values() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]:
        """A buffer for one piece, and the view of it every piece's values are; None
        where the values are a new array, made after each read (a predictor undone,
        or tiles side by side, which a view cannot join into rows)."""
        scratch = np.empty(step * per_index, dtype=np.uint8)
        if raw.predictor is not None:
            return scratch, None
        values = piece_values(scratch, step)
        # NumPy collapses a chain of views to the array owning the memory.
        return scratch, values if values.base is scratch else None

    def copy_pieces(
        descriptor: int,
        mine: list[tuple[int, int]],
        buffers: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None] | None = None,
    ) -> bool | None:
        """Read and copy the pieces ``mine``: None if one cannot be read, else whether
        the last was split by OpenCV (:func:`~virtualizarr_fill.reads.deinterleave.copy_planes`)."""
        scratch, values = buffers or scratch_and_values()
        # Along ``split`` only: ``values`` is selected along the other axes.
        source_at: list[slice] = [slice(None)] * view.ndim
        dest_at: list[slice] = [slice(None)] * view.ndim
        split_fast = False
        for a, b in mine:
            wanted = (b - a) * per_index
            size = min(wanted, end - start - a * per_index)
            if not read_at(descriptor, start + a * per_index, scratch[:size]):
                return None
            if size < wanted:
                scratch[size:wanted] = 0  # the short last chunk's missing end: never selected
            lo = max(first_selected, a * chunk_length)
            hi = min(last_selected, b * chunk_length)
            source_at[split] = slice(lo - a * chunk_length, hi - a * chunk_length)
            dest_at[split] = slice(lo - first_selected, hi - first_selected)
            source = values if values is not None else piece_values(scratch, b - a)
            split_fast = copy_planes(view[tuple(dest_at)], source[tuple(source_at)])
        return split_fast

    with local_descriptor(obj_store, path) as descriptor:
        if descriptor is None:
            return False
        # pread takes its own offset: threads share the descriptor.
        if count * nbytes < scheduling.THREADED_BYTES:
            return copy_pieces(descriptor, pieces) is not None
        mine = scratch_and_values()
        split_fast = copy_pieces(descriptor, pieces[:1], mine)
        if split_fast is None:
            return False
        rest = pieces[1:]
        # OpenCV's split is quicker than handing pieces to other threads.
        workers = 1 if split_fast else min(scheduling.max_workers(), len(rest))
        if workers < 2:
            return copy_pieces(descriptor, rest, mine) is not None
        share = -(-len(rest) // workers)
        parts = [rest[k : k + share] for k in range(0, len(rest), share)]
        pool = scheduling.thread_pool()
        if lattice.run is scheduling.read_planned_here:
            others = [pool.submit(copy_pieces, descriptor, part) for part in parts[1:]]
            done = copy_pieces(descriptor, parts[0], mine) is not None
            return all([future.result() is not None for future in others]) and done
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(pool, copy_pieces, descriptor, part) for part in parts)
        )
        return all(result is not None for result in results)


def short_prefix(
    raw: RawLayout, stored_shape: tuple[int, ...], short: dict[int, ArraySpec], count: int
) -> bool | None:
    """For :func:`~virtualizarr_fill.reads.planning.one_span`: False without short
    chunks; True when the only one is the last and its stored bytes are the start of a
    whole chunk's (it is shorter in one stored dimension, all before it of size 1, as a
    TIFF's short last strip is); None otherwise."""
    if not short:
        return False
    own = short.get(count - 1)
    if own is None or len(short) > 1:
        return None
    own_shape = raw.stored_shape(own)
    # C order: rows of a shorter outer dimension are a prefix (dimensions of size 1
    # before it change nothing).
    differ = [a for a, (o, w) in enumerate(zip(own_shape, stored_shape, strict=True)) if o != w]
    prefix = len(differ) == 1 and all(n == 1 for n in stored_shape[: differ[0]])
    return True if prefix else None


async def read_span(store: Any, span: tuple[str, int, int], size: int, run: Runner) -> Any:
    """The bytes of ``span`` (one file's range) followed by zeros up to ``size``."""
    url, start, end = span
    buffer = np.empty(size, dtype=np.uint8)
    buffer[end - start :] = 0
    obj_store, path = file_store(store, url)
    if read_into(obj_store, path, start, buffer[: end - start]):
        return buffer
    got: list[Any] = []

    def keep(batch: Sequence[Any], chunks: Any, items: list[int]) -> None:
        got.append(chunks[0])

    await run(store, ReadPlan({url: ([0], [start], [end])}, {}, [], end - start), [None], keep)
    if memoryview(got[0]).nbytes != end - start:
        raise StoreReadError(
            f"{url}: bytes {start} to {end} of the manifest's chunks could not be read "
            f"({memoryview(got[0]).nbytes} returned): the object is shorter than when it "
            "was parsed"
        )
    if end - start == size:
        return got[0]
    buffer[: end - start] = np.frombuffer(got[0], dtype=np.uint8)
    return buffer


__all__ = [
    "SPAN_PIECE_BYTES",
    "read_in_place",
    "read_span",
    "read_span_in_pieces",
    "short_prefix",
]
