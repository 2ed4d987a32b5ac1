"""A read's chunks decoded with the array's codec chain: stored bytes in, arrays out.

Each function here makes, for the chunks of one read, a function decoding some of them
(by item) from their stored bytes: into the read's output (:func:`output_decoder`, which
also copies each chunk's selected part into place), into an array of whole chunks
(:func:`block_decoder`), or, for chunks stored as plain numbers, into their bytes with
the bytes->bytes codecs undone (:func:`stored_bytes_decoder`). They run the same codecs
in the same order as zarr's ``ChunkTransform``, without its per-chunk objects:
transposes are undone as NumPy views, each chunk shape's specs resolved once, chunks
stored as plain numbers viewed as arrays (:mod:`~virtualizarr_fill.reads.raw_layout`) and
bytes->bytes codecs undone on the bytes (:mod:`~virtualizarr_fill.reads.bytes_decoders`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from zarr.codecs.bytes import BytesCodec
from zarr.codecs.transpose import TransposeCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.codec_pipeline import BatchedCodecPipeline, resolve_aa_specs

from virtualizarr_fill import upstream
from virtualizarr_fill.codecs.inflate import inflates_into_chunk
from virtualizarr_fill.codecs.tiff_packints import TiffPackintsCodec
from virtualizarr_fill.reads.bytes_decoders import bytes_decoder
from virtualizarr_fill.reads.deinterleave import copy_planes
from virtualizarr_fill.reads.raw_layout import RawLayout, inverse_orders

if TYPE_CHECKING:
    from zarr.abc.store import ByteGetter
    from zarr.core.chunk_utils import ChunkTransform
    from zarr.core.indexing import SelectorTuple

#: zarr's description of one chunk of a read: where it is, its spec, the selection in
#: the chunk and in the output, and whether the chunk is selected whole. The fast read
#: path's own descriptions hold None for the first: their plan says where chunks are.
ChunkInfo = tuple["ByteGetter", ArraySpec, "SelectorTuple", "SelectorTuple", bool]
#: decode(chunk descriptions, stored bytes by item, items): decodes those items.
Decode = Callable[[Sequence[ChunkInfo], Any, list[int]], None]


class CodecChain(Protocol):
    """What the decoders take of a
    :class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`: zarr's batched
    pipeline, its synchronous codec chain (None: a codec has none) and the chunks' layout
    where they are stored as plain numbers."""

    @property
    def inner(self) -> BatchedCodecPipeline: ...

    @property
    def transform(self) -> ChunkTransform | None: ...

    @property
    def raw(self) -> RawLayout | None: ...


#: A chunk's specs after each array->array codec, and for the array->bytes codec.
_Resolved = tuple[tuple[ArraySpec, ...], ArraySpec]
#: zarr's chunk specs after each array->array codec (:func:`resolved_specs`), by the ids
#: of the codecs and the chunk's spec: resolving a transpose builds a new spec, at every
#: read of a band-first TIFF otherwise. Each entry keeps both objects, so their ids are
#: not reused while it lives; emptied when :data:`RESOLVED_KEPT` are kept.
_resolved: dict[tuple[int, int], tuple[Any, ArraySpec, _Resolved]] = {}
#: Resolved specs kept.
RESOLVED_KEPT = 256


def resolved_specs(aa_codecs: tuple[Any, ...], spec: ArraySpec) -> _Resolved:
    """zarr's ``resolve_aa_specs``, the same objects for the same codecs and spec.

    The reads of an array share its codecs, and resolving a transpose builds a new spec
    at every read of a band-first TIFF, which takes as long as reading one of its small strips."""
    key = (id(aa_codecs), id(spec))
    found = _resolved.get(key)
    if found is not None:
        return found[2]
    resolved = resolve_aa_specs(aa_codecs, spec)
    if len(_resolved) >= RESOLVED_KEPT:
        _resolved.clear()
    _resolved[key] = (aa_codecs, spec, resolved)
    return resolved


def block_decoder(
    pipeline: CodecChain,
    blocks: np.ndarray[Any, Any],
    spec: ArraySpec,
    short: dict[int, ArraySpec],
) -> Decode:
    """A function decoding chunks with the codec chain into ``blocks[item]`` (one
    whole chunk of shape ``spec.shape`` each; the chunks in ``short`` have their own,
    smaller, spec and fill the start of theirs), for reads assembling many chunks."""
    decode_chunk = chunk_decoder(pipeline)

    def decode(batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> None:
        for i in items:
            own = short.get(i) if short else None
            decoded = decode_chunk(chunks[i], own or spec)
            if own is None:
                blocks[i] = decoded
            else:
                blocks[i][tuple(slice(0, n) for n in own.shape)] = decoded

    return decode


def chunk_decoder(pipeline: CodecChain) -> Callable[[Any, ArraySpec], Any]:
    """A function decoding one chunk's stored bytes with the codec chain into an
    array, for the chunks of one read (whose specs differ only in shape): what zarr's
    ``ChunkTransform.decode_chunk`` returns, by the same codecs in the same order.

    Transposes are undone as NumPy views, and each shape's specs resolved once,
    where zarr's codec objects would cost as much per chunk as decoding a small JPEG
    tile. Before the ``bytes`` codec, the bytes->bytes codecs are undone on the bytes
    themselves (:func:`~virtualizarr_fill.reads.bytes_decoders.bytes_decoder`: zlib by
    libdeflate, checksums without buffers)."""
    transform = pipeline.transform
    assert transform is not None  # reads_manifests checked
    # all synchronous (the transform exists)
    bb_codecs: tuple[Any, ...] = pipeline.inner.bytes_bytes_codecs
    ab_codec: Any = pipeline.inner.array_bytes_codec
    aa_codecs: tuple[Any, ...] = pipeline.inner.array_array_codecs
    plain_bytes = type(ab_codec) is BytesCodec
    transposes = all(type(c) is TransposeCodec for c in aa_codecs)
    if not transposes and not (
        plain_bytes and any(inflates_into_chunk(bb_codecs, k) for k in range(len(bb_codecs)))
    ):

        def decode_with_zarr(data: Any, spec: ArraySpec) -> Any:
            buffer = spec.prototype.buffer.from_bytes(data)
            return transform.decode_chunk(buffer, spec).as_ndarray_like()

        return decode_with_zarr
    # The chunk's decoded size is the size of the bytes->bytes codecs' output only
    # before the ``bytes`` codec.
    undo = bytes_decoder(bb_codecs, sized=plain_bytes)
    undo_orders = inverse_orders(aa_codecs) if transposes else ()
    # Packed samples (TIFF masks, bilevel images) unpack without zarr's buffers,
    # which cost as much as unpacking a small mask tile.
    packed = type(ab_codec) is TiffPackintsCodec
    resolved: dict[tuple[int, ...], tuple[tuple[ArraySpec, ...], ArraySpec, np.dtype]] = {}

    def decode(data: Any, spec: ArraySpec) -> Any:
        found = resolved.get(spec.shape)
        if found is None:
            aa_specs, ab_spec = resolved_specs(aa_codecs, spec)
            native = np.dtype(ab_spec.dtype.to_native_dtype())
            found = resolved[spec.shape] = (aa_specs, ab_spec, native)
        aa_specs, ab_spec, native = found
        if bb_codecs:
            nbytes = math.prod(ab_spec.shape) * native.itemsize if plain_bytes else 0
            data = undo(data, ab_spec, nbytes)
        if packed:  # not plain bytes, so only transposes come before it here
            array = ab_codec.decode_array(data, ab_spec.shape, native)
        else:
            decoded = upstream.decode_sync(
                ab_codec, ab_spec.prototype.buffer.from_bytes(data), ab_spec
            )
            if not transposes:
                for codec, codec_spec in zip(reversed(aa_codecs), reversed(aa_specs), strict=True):
                    decoded = upstream.decode_sync(codec, decoded, codec_spec)
                return decoded.as_ndarray_like()
            array = decoded.as_ndarray_like()
        for order in undo_orders:
            array = array.transpose(order)
        return array

    return decode


def stored_bytes_decoder(
    pipeline: CodecChain,
    parts: list[Any] | np.ndarray[Any, Any],
    spec: ArraySpec,
    short: dict[int, ArraySpec],
) -> Decode:
    """For chunks stored as plain numbers (``pipeline.raw``): a function putting each
    chunk's bytes, bytes->bytes codecs undone (so in the ``bytes`` codec's byte order
    and layout, a predictor not yet undone), at ``parts[item]`` (a list, or a row of
    a ``uint8`` array of one row per chunk), every chunk of shape ``spec.shape``: the
    chunks in ``short`` have their own, smaller, spec and are placed at the start of
    a chunk of that shape."""
    raw, bb_codecs = pipeline.raw, pipeline.inner.bytes_bytes_codecs
    assert raw is not None
    undo = bytes_decoder(bb_codecs)
    into_list = isinstance(parts, list)
    _, ab_spec = resolved_specs(raw.aa_codecs, spec)
    stored_shape = ab_spec.shape
    itemsize = raw.view_dtype.itemsize
    whole_nbytes = math.prod(stored_shape) * itemsize

    def undone(data: Any, ab_spec: ArraySpec, nbytes: int) -> Any:
        if bb_codecs:
            data = undo(data, ab_spec, nbytes)
        size = memoryview(data).nbytes
        if size != nbytes:
            raise ValueError(
                f"a chunk holds {size} bytes, its shape {ab_spec.shape} "
                f"of {raw.view_dtype} needs {nbytes}"
            )
        return data

    def padded(data: Any, own: ArraySpec) -> Any:
        _, own_ab = resolved_specs(raw.aa_codecs, own)
        own_nbytes = math.prod(own_ab.shape) * itemsize
        array = np.frombuffer(undone(data, own_ab, own_nbytes), dtype=raw.view_dtype)
        whole = np.zeros(stored_shape, dtype=raw.view_dtype)
        whole[tuple(slice(0, n) for n in own_ab.shape)] = array.reshape(own_ab.shape)
        return whole.reshape(-1).view(np.uint8)

    def decode(batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> None:
        for i in items:
            own = short.get(i) if short else None
            data = (
                undone(chunks[i], ab_spec, whole_nbytes) if own is None else padded(chunks[i], own)
            )
            parts[i] = data if into_list else np.frombuffer(data, dtype=np.uint8)

    return decode


def output_decoder(pipeline: CodecChain, drop_axes: tuple[int, ...], target: Any) -> Decode:
    """A function decoding some chunks of a batch into ``target``."""
    transform, raw, bb_codecs = pipeline.transform, pipeline.raw, pipeline.inner.bytes_bytes_codecs
    assert transform is not None  # the read path checked (reads_manifests)
    if raw is None:
        decode_chunk = chunk_decoder(pipeline)

        def decode(batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> None:
            for i in items:
                _, spec, chunk_selection, out_selection, _ = batch[i]
                array = decode_chunk(chunks[i], spec)
                _scatter(array[chunk_selection], target, out_selection, drop_axes)
                del array  # its memory is the next chunk's (see decode_raw)

        return decode

    # The chunks of one read differ only in shape (edge chunks of rectilinear grids),
    # and hashing a whole ArraySpec per chunk would cost more than the decode.
    shapes: dict[tuple[int, ...], tuple[ArraySpec, tuple[int, ...]]] = {}

    def stored(spec: ArraySpec) -> tuple[ArraySpec, tuple[int, ...]]:
        found = shapes.get(spec.shape)
        if found is None:
            _, ab_spec = resolved_specs(raw.aa_codecs, spec)
            found = shapes[spec.shape] = (ab_spec, ab_spec.shape)
        return found

    undo = bytes_decoder(bb_codecs)
    itemsize = raw.view_dtype.itemsize

    def decode_raw(batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> None:
        for i in items:
            _, spec, chunk_selection, out_selection, _ = batch[i]
            ab_spec, shape = stored(spec)
            data = chunks[i]
            own = False
            if bb_codecs:
                fetched = data
                data = undo(data, ab_spec, math.prod(shape) * itemsize)
                # A decompressor's output is ours to overwrite; bytes passed through
                # (a truncate) may be shared with other chunks of the same range.
                own = not np.may_share_memory(
                    np.frombuffer(data, np.uint8), np.frombuffer(fetched, np.uint8)
                )
            array = np.frombuffer(data, dtype=raw.view_dtype).reshape(shape)
            array = raw.undo_predictor(array, overwrite=own)
            for order in raw.inverse_orders:
                array = array.transpose(order)
            _scatter(array[chunk_selection], target, out_selection, drop_axes)
            # Freed before the next chunk is decoded, whose buffer can then take
            # the same memory instead of fresh pages (a large tile's cost).
            del data, array

    return decode_raw


def _scatter(
    selected: Any, target: Any, out_selection: SelectorTuple, drop_axes: tuple[int, ...]
) -> None:
    """``target[out_selection] = selected`` (a chunk's selected part), the axes an
    integer selects dropped."""
    if drop_axes:
        selected = selected.squeeze(axis=drop_axes)
    if (
        isinstance(selected, np.ndarray)
        and selected.ndim == 3
        and isinstance(out_selection, tuple)
        and all(type(part) is slice for part in out_selection)
    ):
        # A view of the output (slices only): a decoded pixel-interleaved chunk's bands
        # are split by OpenCV where it can (virtualizarr_fill.reads.deinterleave).
        copy_planes(target[out_selection], selected)
        return
    target[out_selection] = selected  # converts a stored byte order to the native one


__all__ = [
    "ChunkInfo",
    "CodecChain",
    "Decode",
    "block_decoder",
    "chunk_decoder",
    "output_decoder",
    "resolved_specs",
    "stored_bytes_decoder",
]
