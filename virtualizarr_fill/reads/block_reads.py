"""Many small chunks on a lattice decoded into one array of whole chunks, whose selected
part is copied into the output at once.

A read of many small chunks spends most of its time on each chunk's copy into the
output. Decoded side by side into one array of whole chunks (in the order of the
product of the lattice's ranges), they are copied into the output in a few boxes
(:func:`copy_lattice`); chunks stored as plain numbers are not even decoded one by one:
their bytes are joined and viewed as that array (:func:`stored_blocks`), read as one
range where they are one run of a file (:mod:`~virtualizarr_fill.reads.spans`).
zarr's per-chunk projections are not needed, nor built.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np
from zarr.core.chunk_utils import fill_value_or_default

from virtualizarr_fill.reads import planning
from virtualizarr_fill.reads.chunk_failures import naming_failures
from virtualizarr_fill.reads.decoders import block_decoder, stored_bytes_decoder
from virtualizarr_fill.reads.deinterleave import split_planes
from virtualizarr_fill.reads.lattice import Lattice
from virtualizarr_fill.reads.spans import read_span, read_span_in_pieces, short_prefix

#: Decoded bytes up to which chunks stored as plain numbers are joined into one bytes
#: object (one call, where copying each into an array costs time per chunk); a
#: larger read copies them, keeping its peak memory at twice the array.
JOIN_BYTES = 64 << 20

#: Fewest samples in a row of a chunk for its bands to be split by OpenCV into planes
#: of their own before they are copied into place (:func:`_band_planes`). Shorter
#: rows are quicker copied into place by NumPy straight from the interleaved samples
#: (measured on 64x64 and 128x128 RGB tiles: the crossover lies between them).
SPLIT_MIN_WIDTH = 128


async def read_blocks(lattice: Lattice) -> None:
    """A step-1 basic selection of chunks on a lattice: every chunk decoded into one
    array of whole chunks (in the order of the product of ``ranges``), its selected
    part copied into ``target`` at once."""
    store, pipeline, target = lattice.store, lattice.pipeline, lattice.target
    spec, short = lattice.layout
    chunk_shape = spec.shape
    counts = [len(r) for r in lattice.ranges]
    selection, view = lattice.selection
    items: list[Any] = [None] * math.prod(counts)  # the decoders need only the count
    if pipeline.raw is not None and pipeline.raw.rows_whole(spec, short):
        if await read_span_in_pieces(lattice):
            return
        blocks = await stored_blocks(lattice, items)
    else:
        plan = lattice.plan
        blocks = np.empty((len(items), *chunk_shape), dtype=target.dtype)
        plan.decoded_nbytes = blocks.nbytes
        decode = block_decoder(pipeline, blocks, spec, short)
        await lattice.run(store, plan, items, naming_failures(decode, store, lattice.entries, plan))
        if plan.missing:
            blocks[plan.missing] = fill_value_or_default(spec)
    copy_lattice(view, blocks, counts, chunk_shape, selection)


def copy_lattice(
    view: np.ndarray[Any, Any],
    blocks: np.ndarray[Any, Any],
    counts: list[int],
    chunk_shape: tuple[int, ...],
    selection: list[slice],
) -> None:
    """``view[...] = lattice_array(blocks, counts, chunk_shape)[selection]``, copied
    once: the chunks are not joined into one array first (a copy of its own).

    Along each axis the selection is cut into its whole chunks and the parts of chunks
    at either end (:func:`_axis_boxes`); each box of the product of those cuts is one
    copy, from the chunks into the output viewed with the same axes split in two
    (chunk, within the chunk), which splitting an axis of any view gives as a view.
    Pixel-interleaved chunks are split into bands all at once first
    (:func:`_band_planes`). NumPy's assignment converts a stored byte order."""
    blocks = _band_planes(blocks)
    lattice = blocks.reshape(*counts, *chunk_shape)
    ndim = len(chunk_shape)
    chunk_axes_first = [*range(0, 2 * ndim, 2), *range(1, 2 * ndim, 2)]
    if all(
        part.start == 0 and part.stop == n * length
        for part, n, length in zip(selection, counts, chunk_shape, strict=True)
    ):  # the whole lattice, the read of a whole array: one box
        split = [size for pair in zip(counts, chunk_shape, strict=True) for size in pair]
        view.reshape(split).transpose(chunk_axes_first)[...] = lattice
        return
    for boxes in itertools.product(*map(_axis_boxes, selection, chunk_shape)):
        out = view[tuple(box.out for box in boxes)]
        split = [size for box in boxes for size in box.split]
        source = lattice[tuple(box.chunks for box in boxes) + tuple(box.within for box in boxes)]
        out.reshape(split).transpose(chunk_axes_first)[...] = source


class _AxisBox(NamedTuple):
    """A run of chunks along one axis, and the same part of each: where it is in the
    output, which chunks (of the lattice's), and which items of each."""

    out: slice
    chunks: slice
    within: slice
    split: tuple[int, int]  # how many chunks, how many items of each


def _axis_boxes(selected: slice, chunk_length: int) -> list[_AxisBox]:
    """The step-1 ``selected`` items of chunks of ``chunk_length`` laid one after the
    other, as the whole chunks it holds and the parts of chunks at either end."""
    start, stop = selected.start, selected.stop

    def box(chunk_from: int, chunk_to: int, low: int, high: int) -> _AxisBox:
        out_from = chunk_from * chunk_length + low - start
        out_to = (chunk_to - 1) * chunk_length + high - start
        return _AxisBox(
            slice(out_from, out_to),
            slice(chunk_from, chunk_to),
            slice(low, high),
            (chunk_to - chunk_from, high - low),
        )

    first, last = start // chunk_length, (stop - 1) // chunk_length
    head, tail = start - first * chunk_length, stop - last * chunk_length
    if first == last:
        return [box(first, first + 1, head, tail)]
    boxes = []
    if head:
        boxes.append(box(first, first + 1, head, chunk_length))
    whole_from, whole_to = first + (head > 0), last + (tail == chunk_length)
    if whole_from < whole_to:
        boxes.append(box(whole_from, whole_to, 0, chunk_length))
    if tail < chunk_length:
        boxes.append(box(last, last + 1, 0, tail))
    return boxes


def _band_planes(blocks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``blocks`` (chunk, band, y, x) viewing pixel-interleaved chunks laid one after
    the other: the same values as a new array of contiguous band planes, split by
    OpenCV (:func:`~virtualizarr_fill.reads.deinterleave.split_planes`), whose rows the
    boxes of :func:`copy_lattice` then copy whole, where its rows are long enough
    (:data:`SPLIT_MIN_WIDTH`); ``blocks`` itself otherwise."""
    if blocks.ndim != 4 or blocks.shape[-1] < SPLIT_MIN_WIDTH:
        return blocks
    count, bands, rows, width = blocks.shape
    if blocks.strides[0] != rows * blocks.strides[2]:
        return blocks  # the chunks' rows are not one run of rows: no one split
    # (band, every chunk's rows, x): a view, rows following one another
    source = blocks.transpose(1, 0, 2, 3).reshape(bands, count * rows, width)
    planes = np.empty((bands, count, rows, width), dtype=blocks.dtype)
    if not split_planes(planes.reshape(bands, count * rows, width), source):
        return blocks
    return planes.transpose(1, 0, 2, 3)


async def stored_blocks(lattice: Lattice, batch: list[Any]) -> np.ndarray[Any, Any]:
    """Whole chunks stored as plain numbers, as one array: each chunk's bytes with the
    bytes->bytes codecs undone, joined (or copied, for large reads) and viewed as an
    array of the ``bytes`` codec's order, a TIFF predictor undone over all of them at
    once, then the transposes undone as views."""
    store, pipeline, (spec, short) = lattice.store, lattice.pipeline, lattice.layout
    raw = pipeline.raw
    assert raw is not None
    stored_shape = raw.stored_shape(spec)
    nbytes = math.prod(stored_shape) * raw.view_dtype.itemsize
    count = len(batch)
    span = None
    if not pipeline.inner.bytes_bytes_codecs:
        short_last = short_prefix(raw, stored_shape, short, count)
        span = planning.one_span(
            lattice.manifest, lattice.entries, lattice.ranges, nbytes, short_last
        )
    plan = None
    if span is not None:
        data = await read_span(store, span, count * nbytes, lattice.run)
    else:
        plan = lattice.plan
        parts: list[Any] | np.ndarray[Any, Any]
        parts = (
            [None] * count if count * nbytes <= JOIN_BYTES else np.empty((count, nbytes), np.uint8)
        )
        plan.decoded_nbytes = count * nbytes
        decode = stored_bytes_decoder(pipeline, parts, spec, short)
        await lattice.run(store, plan, batch, naming_failures(decode, store, lattice.entries, plan))
        if plan.missing:
            fill = np.full(stored_shape, fill_value_or_default(spec), dtype=raw.view_dtype)
            for i in plan.missing:
                parts[i] = fill.reshape(-1).view(np.uint8)
        data = b"".join(parts) if isinstance(parts, list) else parts
    blocks = np.frombuffer(data, dtype=raw.view_dtype).reshape(count, *stored_shape)
    if raw.predictor is not None:
        # one pass over every chunk (rows are independent); the fill value is not
        # differenced, so missing chunks take it afterwards
        # an array ``data`` is this read's own buffer (bytes joined are read-only)
        blocks = raw.undo_predictor(blocks, overwrite=isinstance(data, np.ndarray))
        if plan is not None and plan.missing:
            blocks[plan.missing] = fill_value_or_default(spec)
    return raw.untransposed(blocks)


__all__ = ["JOIN_BYTES", "SPLIT_MIN_WIDTH", "copy_lattice", "read_blocks", "stored_blocks"]
