"""Reads of ManifestStore chunks a whole batch at a time, for
:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`.

zarr hands a codec pipeline every chunk of one read (``array[...]``) in one ``read``
call. Its own pipelines then treat each chunk alone: one store lookup, one ranged GET
and one scheduled decode per chunk, which dominates reading the many small strips and
chunks of typical TIFF and HDF5 files. For a read from a ManifestStore, this module

1. looks every chunk up in the array's manifest at once (paths, offsets, lengths);
2. fetches the byte ranges with one ``get_ranges`` call per file, on zarr's event loop
   (obstore coalesces nearby ranges on object stores); large reads are cut into pieces
   that worker threads fetch and decode, so reading overlaps decoding;
3. decodes each chunk with the array's own codecs (zarr's synchronous codec chain;
   plain ``bytes`` + transpose chunks are viewed as arrays directly, and zlib streams
   are inflated by libdeflate), and copies it into the output.

The values are those zarr's own pipelines read, bit for bit (tests/test_read_pipeline.py
compares them with tifffile and h5py). :mod:`virtualizarr_fill.reads.zarr_read_path`
calls the planning, fetching and decoding here directly inside
:func:`virtualizarr_fill.fast_reads`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import imagecodecs
import numcodecs
import numpy as np
import zarr
from obstore.store import LocalStore, MemoryStore
from virtualizarr.manifests import ManifestArray
from virtualizarr.manifests import store as vz_store
from virtualizarr.manifests.store import ManifestStore
from zarr.abc.codec import ArrayBytesCodecPartialDecodeMixin, GetResult
from zarr.codecs.bytes import BytesCodec
from zarr.codecs.transpose import TransposeCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import NDBuffer
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding
from zarr.core.chunk_utils import fill_value_or_default
from zarr.core.codec_pipeline import BatchedCodecPipeline, resolve_aa_specs
from zarr.core.dtype.common import HasEndianness
from zarr.storage._common import StorePath

from virtualizarr_fill.codecs._common import expected_nbytes
from virtualizarr_fill.codecs.hdf5_bitshuffle import HDF5BitshuffleCodec
from virtualizarr_fill.codecs.hdf5_lzf import HDF5LZFCodec
from virtualizarr_fill.codecs.hdf5_shuffle import HDF5ShuffleCodec, unshuffle
from virtualizarr_fill.codecs.inflate import inflate, inflates_into_chunk
from virtualizarr_fill.codecs.tiff_packints import TiffPackintsCodec
from virtualizarr_fill.codecs.tiff_predictor import TiffPredictorCodec, undo_predictor
from virtualizarr_fill.codecs.truncate import TruncateCodec, truncator
from virtualizarr_fill.manifests.byte_ranges import get_ranges
from virtualizarr_fill.manifests.byte_ranges import resolve as _resolve
from virtualizarr_fill.manifests.store import deepest_node
from virtualizarr_fill.reads.deinterleave import copy_planes
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline

if TYPE_CHECKING:
    from zarr.abc.store import ByteGetter
    from zarr.core.indexing import SelectorTuple

    ChunkInfo = tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]
    # decode(batch, stored bytes by item, items): decodes those items into the output
    _Decode = Callable[[Sequence[ChunkInfo], Any, list[int]], None]

#: The VirtualiZarr internals the chunk lookup relies on (tested with VirtualiZarr 2.8);
#: without them every read goes to zarr's own pipeline.
_KNOWS_VIRTUALIZARR = hasattr(vz_store, "_get_deepest_group_or_array")

#: Stored bytes in one read from which chunks are fetched and decoded in worker threads
#: (zlib, zstd, imagecodecs and file reads release the GIL); below it the hand-off to
#: threads costs more than it saves.
THREADED_BYTES = 1 << 20
#: Decoded bytes from which a read of large chunks is shared among threads however
#: small it is stored.
THREADED_DECODED_BYTES = 1 << 20
#: Fewest bytes a read's chunks decode to, on average, for it to be cut into a piece
#: per thread. Decoding a small chunk is mostly Python, which holds the GIL: threads
#: sharing a read of 2,667 one-row Deflate strips (nocog.tif) took turns at it and
#: read it in four times the time of one thread.
SHARED_CHUNK_BYTES = 64 << 10
#: Reads of at most this many chunks are planned entry by entry, larger ones with numpy.
FEW_CHUNKS = 16
#: Stored bytes one worker-thread task fetches and decodes.
PIECE_BYTES = 4 << 20


@dataclass
class _Plan:
    """Where each chunk of one read is: file chunks grouped by file, inlined bytes, missing."""

    by_file: dict[str, tuple[list[int], list[int], list[int]]]  # url -> (items, starts, ends)
    inlined: dict[int, bytes]  # item -> bytes held in the manifest
    missing: list[int]  # items with no chunk: the fill value
    nbytes: int  # bytes to fetch
    # Bytes the chunks decode to, where the read knows it (else 0): a read of a few
    # hundred kilobytes of JPEG or Deflate tiles decodes to megabytes.
    decoded_nbytes: int = 0


@dataclass(frozen=True)
class _RawLayout:
    """Chunks stored as plain numbers (``bytes`` codec, transposes before it, and a
    TIFF predictor between them): decoded by viewing the bytes as an array instead of
    through zarr's buffer objects, which is most of the per-chunk cost of small
    strips. Same result as the codecs: the ``bytes`` codec's stored byte order, the
    predictor undone (native order), then each transpose undone."""

    view_dtype: np.dtype[Any]
    aa_codecs: tuple[TransposeCodec, ...]
    inverse_orders: tuple[tuple[int, ...], ...]  # in decode order (last codec first)
    predictor: TiffPredictorCodec | None = None

    def undo_predictor(
        self, stored: np.ndarray[Any, Any], *, overwrite: bool = False
    ) -> np.ndarray[Any, Any]:
        """``stored`` (one or more chunks' ``bytes``-codec arrays, in :attr:`view_dtype`,
        any axes before a chunk's) with the predictor undone, in native order; ``stored``
        itself without a predictor. The predictor works row by row, so a stack of
        chunks is undone at once. ``overwrite``: ``stored`` is the caller's own buffer,
        which may be decoded in place."""
        codec = self.predictor
        if codec is None:
            return stored
        return undo_predictor(
            stored, codec.predictor, codec.axis, codec.endian, overwrite=overwrite
        )

    def stored_shape(self, spec: ArraySpec) -> tuple[int, ...]:
        """The shape of a chunk of ``spec`` as the ``bytes`` codec stores it: permuted
        by each transpose in turn, as ``TransposeCodec.resolve_metadata`` does (without
        building a spec per codec, which costs more than the read of a small chunk)."""
        shape = tuple(spec.shape)
        for codec in self.aa_codecs:
            shape = tuple(shape[axis] for axis in codec.order)
        return shape

    def untransposed(self, blocks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A stack of chunks in stored order (first axis: the chunk) with the transposes
        undone, as a view."""
        for order in self.inverse_orders:
            blocks = blocks.transpose((0, *(1 + o for o in order)))
        return blocks

    def rows_whole(self, spec: ArraySpec, short: dict[int, ArraySpec]) -> bool:
        """Whether every chunk in ``short`` has whole predictor rows of a chunk of
        ``spec`` (is shorter only in axes before the predictor's row axis): then, padded
        at the end to a whole chunk, its rows undo as a whole chunk's would."""
        if self.predictor is None or not short:
            return True
        axis = self.predictor.axis
        whole = self.stored_shape(spec)[axis:]
        return all(self.stored_shape(own)[axis:] == whole for own in short.values())


#: A chunk's specs after each array->array codec, and for the array->bytes codec.
_Resolved = tuple[tuple[ArraySpec, ...], ArraySpec]
#: zarr's chunk specs after each array->array codec (:func:`_resolved_specs`), by the
#: ids of the codecs and the chunk's spec, each kept with both (so the ids are not reused).
_resolved: dict[tuple[int, int], tuple[Any, ArraySpec, _Resolved]] = {}
#: Resolved specs kept.
RESOLVED_KEPT = 256


def _resolved_specs(aa_codecs: tuple[Any, ...], spec: ArraySpec) -> _Resolved:
    """zarr's ``resolve_aa_specs``, the same objects for the same codecs and spec.

    Reads share their chunk specs (``zarr_read_path._array_spec``) and an array its
    codecs, and resolving a transpose builds a new spec at every read of a band-first
    TIFF, which takes as long as reading one of its small strips."""
    key = (id(aa_codecs), id(spec))
    found = _resolved.get(key)
    if found is not None:
        return found[2]
    resolved = resolve_aa_specs(aa_codecs, spec)
    if len(_resolved) >= RESOLVED_KEPT:
        _resolved.clear()
    _resolved[key] = (aa_codecs, spec, resolved)
    return resolved


def _inverse_orders(transposes: Sequence[TransposeCodec]) -> tuple[tuple[int, ...], ...]:
    """The axis orders undoing ``transposes``, in decode order (last codec first).
    Inverted in Python: for a few axes ``np.argsort``'s call costs more than the work."""
    return tuple(_inverse_permutation(c.order) for c in reversed(transposes))


def _inverse_permutation(order: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(order)
    for position, axis in enumerate(order):
        inverse[axis] = position
    return tuple(inverse)


def raw_layout(pipeline: BatchedCodecPipeline, array_spec: ArraySpec) -> _RawLayout | None:
    ab = pipeline.array_bytes_codec
    if type(ab) is not BytesCodec:
        return None
    aa_codecs = pipeline.array_array_codecs
    predictor = None
    if aa_codecs and type(aa_codecs[-1]) is TiffPredictorCodec:
        predictor, aa_codecs = aa_codecs[-1], aa_codecs[:-1]
    if not all(type(c) is TransposeCodec for c in aa_codecs):
        return None
    dtype = array_spec.dtype.to_native_dtype()
    if dtype.kind not in "biufc" or dtype.fields is not None:
        return None
    if isinstance(array_spec.dtype, HasEndianness):
        view = replace(array_spec.dtype, endianness=ab.endian).to_native_dtype()  # type: ignore[call-arg]
    else:
        view = dtype
    aa = tuple(c for c in aa_codecs if isinstance(c, TransposeCodec))
    return _RawLayout(view, aa, _inverse_orders(aa), predictor)


def reads_manifests(pipeline: ManifestCodecPipeline) -> bool:
    """Whether the pipeline can read chunks from a manifest itself (else zarr's does)."""
    if pipeline.transform is None or not _KNOWS_VIRTUALIZARR:
        return False
    return not (
        pipeline.inner.supports_partial_decode
        and isinstance(pipeline.inner.array_bytes_codec, ArrayBytesCodecPartialDecodeMixin)
    )


async def read(
    pipeline: ManifestCodecPipeline,
    batch_info: Iterable[ChunkInfo],
    out: NDBuffer,
    drop_axes: tuple[int, ...] = (),
) -> tuple[GetResult, ...]:
    batch = batch_info if isinstance(batch_info, list) else list(batch_info)
    located = locate(pipeline, batch, out)
    if located is None:
        return await pipeline.inner.read(batch, out, drop_axes)
    store, plan = located
    target: Any = out.as_ndarray_like()
    await read_planned(store, plan, batch, decoder(pipeline, drop_axes, target))
    for i in plan.missing:
        _, spec, _, out_selection, _ = batch[i]
        target[out_selection] = fill_value_or_default(spec)
    missing = set(plan.missing)
    return tuple(
        GetResult(status="missing" if i in missing else "present") for i in range(len(batch))
    )


def locate(
    pipeline: ManifestCodecPipeline, batch: Sequence[ChunkInfo], out: NDBuffer
) -> tuple[ManifestStore, _Plan] | None:
    """The chunks' places in the manifest, or None where this pipeline does not apply."""
    if not batch or not reads_manifests(pipeline):
        return None  # e.g. sharding: the codec fetches inner chunks itself
    first = batch[0][0]
    if not isinstance(first, StorePath) or not isinstance(first.store, ManifestStore):
        return None
    if not isinstance(out.as_ndarray_like(), np.ndarray):
        return None
    store = first.store
    if not hasattr(store, "_group") or not hasattr(store, "_registry"):
        return None
    node, suffix = deepest_node(store._group, first.path)
    if not isinstance(node, ManifestArray) or suffix.endswith("zarr.json"):
        return None
    manifest = node.manifest
    if not all(hasattr(manifest, a) for a in ("_paths", "_offsets", "_lengths", "_inlined")):
        return None  # a VirtualiZarr whose manifest layout this module does not know
    prefix = first.path[: len(first.path) - len(suffix)]
    keys = []
    for getter, *_ in batch:
        if not isinstance(getter, StorePath) or getter.store is not store:
            return None
        keys.append(getter.path)
    if not all(key.startswith(prefix) for key in keys):
        return None
    keys = [key[len(prefix) :] for key in keys]
    if len(keys) <= FEW_CHUNKS:
        return store, _plan_few(node, manifest, keys)
    return store, _plan(manifest, _grid_indices(node, keys, manifest._paths.ndim))


def block_decoder(
    pipeline: ManifestCodecPipeline,
    blocks: np.ndarray[Any, Any],
    spec: ArraySpec,
    short: dict[int, ArraySpec],
) -> _Decode:
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


def chunk_decoder(pipeline: ManifestCodecPipeline) -> Callable[[Any, ArraySpec], Any]:
    """A function decoding one chunk's stored bytes with the codec chain into an
    array, for the chunks of one read (whose specs differ only in shape): what zarr's
    ``ChunkTransform.decode_chunk`` returns, by the same codecs in the same order.

    Transposes are undone as NumPy views, and each shape's specs resolved once,
    where zarr's codec objects would cost as much per chunk as decoding a small JPEG
    tile. Before the ``bytes`` codec, the bytes->bytes codecs are undone on the bytes
    themselves (:func:`_bytes_decoder`: zlib by libdeflate, checksums without
    buffers)."""
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
    undo = _bytes_decoder(bb_codecs, sized=plain_bytes)
    inverse_orders = _inverse_orders(aa_codecs) if transposes else ()
    # Packed samples (TIFF masks, bilevel images) unpack without zarr's buffers,
    # which cost as much as unpacking a small mask tile.
    packed = type(ab_codec) is TiffPackintsCodec
    resolved: dict[tuple[int, ...], tuple[tuple[ArraySpec, ...], ArraySpec, np.dtype]] = {}

    def decode(data: Any, spec: ArraySpec) -> Any:
        found = resolved.get(spec.shape)
        if found is None:
            aa_specs, ab_spec = _resolved_specs(aa_codecs, spec)
            native = np.dtype(ab_spec.dtype.to_native_dtype())
            found = resolved[spec.shape] = (aa_specs, ab_spec, native)
        aa_specs, ab_spec, native = found
        if bb_codecs:
            nbytes = math.prod(ab_spec.shape) * native.itemsize if plain_bytes else 0
            data = undo(data, ab_spec, nbytes)
        if packed:  # not plain bytes, so only transposes come before it here
            array = ab_codec.decode_array(data, ab_spec.shape, native)
        else:
            decoded = ab_codec._decode_sync(ab_spec.prototype.buffer.from_bytes(data), ab_spec)
            if not transposes:
                for codec, codec_spec in zip(
                    reversed(aa_codecs), reversed(aa_specs), strict=True
                ):
                    decoded = codec._decode_sync(decoded, codec_spec)
                return decoded.as_ndarray_like()
            array = decoded.as_ndarray_like()
        for order in inverse_orders:
            array = array.transpose(order)
        return array

    return decode


def stored_bytes_decoder(
    pipeline: ManifestCodecPipeline,
    parts: list[Any] | np.ndarray[Any, Any],
    spec: ArraySpec,
    short: dict[int, ArraySpec],
) -> _Decode:
    """For chunks stored as plain numbers (:attr:`raw`): a function putting each
    chunk's bytes, bytes->bytes codecs undone (so in the ``bytes`` codec's byte order
    and layout, a predictor not yet undone), at ``parts[item]`` (a list, or a row of
    a ``uint8`` array of one row per chunk), every chunk of shape ``spec.shape``: the
    chunks in ``short`` have their own, smaller, spec and are placed at the start of
    a chunk of that shape."""
    raw, bb_codecs = pipeline.raw, pipeline.inner.bytes_bytes_codecs
    assert raw is not None
    undo = _bytes_decoder(bb_codecs)
    into_list = isinstance(parts, list)
    _, ab_spec = _resolved_specs(raw.aa_codecs, spec)
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
        _, own_ab = _resolved_specs(raw.aa_codecs, own)
        own_nbytes = math.prod(own_ab.shape) * itemsize
        array = np.frombuffer(undone(data, own_ab, own_nbytes), dtype=raw.view_dtype)
        whole = np.zeros(stored_shape, dtype=raw.view_dtype)
        whole[tuple(slice(0, n) for n in own_ab.shape)] = array.reshape(own_ab.shape)
        return whole.reshape(-1).view(np.uint8)

    def decode(batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> None:
        for i in items:
            own = short.get(i) if short else None
            data = (
                undone(chunks[i], ab_spec, whole_nbytes)
                if own is None
                else padded(chunks[i], own)
            )
            parts[i] = data if into_list else np.frombuffer(data, dtype=np.uint8)

    return decode


def decoder(pipeline: ManifestCodecPipeline, drop_axes: tuple[int, ...], target: Any) -> _Decode:
    """A function decoding some chunks of a batch into ``target``."""
    transform, raw, bb_codecs = pipeline.transform, pipeline.raw, pipeline.inner.bytes_bytes_codecs
    assert transform is not None  # _locate checked
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
            _, ab_spec = _resolved_specs(raw.aa_codecs, spec)
            found = shapes[spec.shape] = (ab_spec, ab_spec.shape)
        return found

    undo = _bytes_decoder(bb_codecs)
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



def _decode_bytes(
    bb_codecs: tuple[Any, ...],
    data: Any,
    ab_spec: ArraySpec,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
) -> Any:
    """Undo the bytes->bytes codecs of one chunk (last codec first); see :func:`_bytes_decoder`."""
    return _bytes_decoder(bb_codecs)(data, ab_spec, math.prod(shape) * dtype.itemsize)


def _bytes_decoder(
    bb_codecs: tuple[Any, ...], *, sized: bool = True
) -> Callable[[Any, ArraySpec, int], Any]:
    """A function undoing ``bb_codecs`` for one chunk of ``nbytes`` decoded bytes
    (``sized``: the codecs' output is the ``bytes`` codec's input, whose size that is;
    otherwise ``nbytes`` is not used), for the chunks of one array (one data type).

    A zlib stream that decodes into the chunk's bytes (nothing but shuffles or the
    truncate codec after it) is inflated by :func:`~virtualizarr_fill.codecs.inflate.inflate`
    (libdeflate, or zlib itself for small chunks): its size is bounded, which libdeflate
    needs, and inflating is deterministic, so the bytes are the same. Anything it
    refuses goes to the codec itself.

    Each codec's direct decode (:func:`_direct_decode`) is bound to a chunk shape once:
    a read of many small chunks would otherwise work out each one's sizes again, which
    costs as much as decoding a strip of a few hundred bytes."""
    inflating = frozenset(
        k for k in range(len(bb_codecs)) if sized and inflates_into_chunk(bb_codecs, k)
    )
    direct = [_direct_decode(bb_codecs, k, sized=sized) for k in range(len(bb_codecs))]
    order = range(len(bb_codecs) - 1, -1, -1)  # last codec first
    bound: dict[tuple[tuple[int, ...], int], _BoundSteps] = {}
    # The spec and size of the chunk before and their steps, one tuple replaced whole
    # (threads may share a decoder): most chunks of a read have the spec object of the
    # one before, for which even the lookup by shape costs noticeably per chunk.
    last: list[tuple[Any, int, _BoundSteps]] = [(None, -1, ((), False))]

    def bind(ab_spec: ArraySpec, nbytes: int) -> _BoundSteps:
        steps: list[Callable[[Any], Any] | None] = []
        for k in order:
            decoder = direct[k]
            step = None if decoder is None else decoder(ab_spec, nbytes)
            if step is not None and k in inflating:
                step = _inflated_or(step, nbytes)
            steps.append(step)
        return tuple(steps), None not in steps

    def decode(data: Any, ab_spec: ArraySpec, nbytes: int) -> Any:
        spec, size, (steps, direct_only) = last[0]
        if spec is not ab_spec or size != nbytes:
            key = (ab_spec.shape, nbytes)
            found = bound.get(key)
            if found is None:
                found = bound[key] = bind(ab_spec, nbytes)
            last[0] = (ab_spec, nbytes, found)
            steps, direct_only = found
        if direct_only:
            for step in steps:
                data = step(data)  # type: ignore[misc]  # direct_only: none is None
            return data
        buffer = None
        for k, step in zip(order, steps, strict=True):
            if buffer is None:
                if step is not None:
                    data = step(data)
                    continue
                if k in inflating:
                    inflated = inflate(data, nbytes)
                    if inflated is not None:
                        data = inflated
                        continue
                buffer = ab_spec.prototype.buffer.from_bytes(data)
            buffer = bb_codecs[k]._decode_sync(buffer, ab_spec)
        return data if buffer is None else buffer.as_numpy_array()

    return decode


#: A chunk shape's steps undoing the bytes->bytes codecs, last codec first (None: the
#: codec's own decode), and whether every step is a direct one.
_BoundSteps = tuple[tuple[Callable[[Any], Any] | None, ...], bool]


def _inflated_or(step: Callable[[Any], Any], nbytes: int) -> Callable[[Any], Any]:
    """``step`` after :func:`~virtualizarr_fill.codecs.inflate.inflate` refuses a stream."""

    def inflated(data: Any) -> Any:
        out = inflate(data, nbytes)
        return step(data) if out is None else out

    return inflated


#: What :func:`_direct_decode` returns: given a chunk's spec and decoded size, the
#: function decoding such a chunk's bytes.
_DirectDecode = Callable[[ArraySpec, int], Callable[[Any], Any]]


def _uint8(data: Any) -> np.ndarray[Any, Any]:
    return np.frombuffer(data, dtype=np.uint8)


def _direct_decode(bb_codecs: Sequence[Any], k: int, *, sized: bool = True) -> _DirectDecode | None:
    """What bytes->bytes codec ``k`` (in chain order) does to a chunk's bytes, where it
    is known exactly: a function of (the chunk's spec, its decoded size) returning the
    function from the stored bytes-like to the decoded bytes-like; None otherwise.
    Without ``sized`` the chunk's decoded size is not the size of the codecs' output and
    is not used.

    zarr's codecs take and return ``Buffer`` objects, whose creation costs about as much
    as undoing a checksum: these call the same function the codec calls, on the bytes
    themselves."""
    codec = bb_codecs[k]
    if type(codec) in _DECODE_BYTES:
        decode_bytes = codec.decode_bytes
        return lambda spec, nbytes: decode_bytes
    numcodec = _numcodec(codec)
    if type(numcodec) is numcodecs.Shuffle and numcodec.elementsize > 1:
        # numcodecs' argument checks cost more than unshuffling a small chunk (HDF5
        # files of tiny chunks); its loop is faster on large ones.
        elementsize = numcodec.elementsize

        def unshuffled(data: Any) -> Any:
            if memoryview(data).nbytes <= SMALL_SHUFFLE_BYTES:
                return unshuffle(data, elementsize)
            return numcodec.decode(_uint8(data))

        return lambda spec, nbytes: unshuffled
    if type(numcodec) is numcodecs.Fletcher32:
        # libhdf5's own checksum, called on the stored bytes, costs half of numcodecs'
        # decode with its argument checks; anything it does not confirm goes to
        # numcodecs, which decides (and names a mismatch) as before.
        from virtualizarr_fill.hdf5 import checksum  # the HDF5 package imports this module

        def verified(data: Any) -> Any:
            if type(data) is not bytes and memoryview(data).nbytes <= SMALL_CHECKSUM_BYTES:
                data = bytes(data)  # obstore's buffers: a copy costs less than a pointer
            if type(data) is bytes and checksum.fletcher32_verified(data):
                return memoryview(data)[:-4]
            return numcodec.decode(_uint8(data))

        return lambda spec, nbytes: verified
    if numcodec is not None:
        numcodec_decode = numcodec.decode
        return lambda spec, nbytes: lambda data: numcodec_decode(_uint8(data))
    decode = _imagecodecs_function(codec)
    lzw_sized = sized and all(type(c) is TruncateCodec for c in bb_codecs[:k])
    if decode is imagecodecs.lzw_decode and lzw_sized:
        # Decoding LZW into a buffer of known size takes much less time than letting it
        # find the size. imagecodecs stops at the buffer's end: that is the truncate
        # codec's cut when it follows; else one byte more, so that a stream decoding
        # to more than the chunk still fails the size check, as through the codecs.
        # The buffer is an array's memory, of which imagecodecs returns the part
        # written: given a size instead, it shrinks the bytes it made to what was
        # written, a copy of the whole chunk that costs several times the decoding.
        # imagecodecs reads any bytes-like object.
        extra = 0 if k else 1

        def lzw(spec: ArraySpec, nbytes: int) -> Callable[[Any], Any]:
            if expected_nbytes(spec) is None:  # variable-length items: no size to trust
                return decode
            size = nbytes + extra
            return lambda data: decode(data, out=memoryview(np.empty(size, dtype=np.uint8)))

        return lzw
    if decode is not None:
        return lambda spec, nbytes: decode
    if k == 0 and type(codec) is TruncateCodec:
        # Next to the ``bytes`` codec: its length limit is the chunk's decoded size.
        return lambda spec, nbytes: truncator(spec)
    return None


#: Chunk size up to which a byte shuffle is undone by NumPy rather than numcodecs.
SMALL_SHUFFLE_BYTES = 2048
#: Stored chunk size up to which a Fletcher-32 checksum not in a ``bytes`` object is
#: copied into one for libhdf5's function; larger ones go to numcodecs.
SMALL_CHECKSUM_BYTES = 64 << 10

#: This package's bytes->bytes codecs whose ``decode_bytes`` is what their
#: ``_decode_sync`` does to the chunk's bytes.
_DECODE_BYTES = (HDF5LZFCodec, HDF5ShuffleCodec, HDF5BitshuffleCodec)


def _imagecodecs_function(codec: Any) -> Callable[[Any], Any] | None:
    """imagecodecs' decode function that the imagecodecs-zarr codec ``codec`` calls on the
    chunk's bytes as a ``uint8`` array, for the codecs without configuration (LZW,
    PackBits); None for others, subclasses, or another implementation."""
    module = type(codec).__module__
    if module != "imagecodecs.zarr":
        return None
    name = type(codec).__name__
    function = {"Lzw": "lzw_decode", "Packbits": "packbits_decode"}.get(name)
    if function is None or "_decode_sync" not in type(codec).__dict__:
        return None
    return cast("Callable[[Any], Any] | None", getattr(imagecodecs, function, None))


try:  # zarr's wrappers of numcodecs codecs (private: a zarr without them decodes its way)
    from zarr.codecs.numcodecs._codecs import _NumcodecsBytesBytesCodec
except ImportError:
    _NumcodecsBytesBytesCodec = None  # type: ignore[assignment,misc]


def _numcodec(codec: Any) -> Any:
    """The numcodecs codec zarr's wrapper of a bytes->bytes numcodecs codec (checksums,
    compressors) decodes with, or None for other codecs. Its decode takes the chunk's
    bytes as a ``uint8`` array and returns bytes-like, as the wrapper's ``_decode_sync``
    passes and takes them, so calling it directly skips a ``Buffer`` on either side
    (most of the time of undoing a checksum of a small chunk)."""
    if _NumcodecsBytesBytesCodec is None or not isinstance(codec, _NumcodecsBytesBytesCodec):
        return None
    if type(codec)._decode_sync is not _NumcodecsBytesBytesCodec._decode_sync:
        return None  # a subclass that decodes its own way
    return codec._codec


def _scatter(
    selected: Any, target: Any, out_selection: SelectorTuple, drop_axes: tuple[int, ...]
) -> None:
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


def _grid_indices(node: ManifestArray, keys: list[str], ndim: int) -> np.ndarray[Any, Any]:
    """Chunk keys (inside the array) -> their grid indices, one row per key.

    Parsed all at once (one split of the joined keys) because a read of a small-chunked
    array has tens of thousands of keys; the result is checked against what the array's
    chunk key encoding writes for those indices."""
    if ndim == 0 or not keys:
        return np.zeros((len(keys), ndim), dtype=np.intp)
    encoding = node.metadata.chunk_key_encoding
    separator: str = getattr(encoding, "separator", ".")
    if isinstance(encoding, DefaultChunkKeyEncoding):
        head = 1  # "c<sep>i<sep>j..."
    elif isinstance(encoding, V2ChunkKeyEncoding):
        head = 0  # "i<sep>j..."
    else:
        rows = [encoding.decode_chunk_key(key) for key in keys]
        return np.array(rows, dtype=np.intp).reshape(len(keys), ndim)
    tokens = separator.join(keys).split(separator)
    if len(tokens) != len(keys) * (head + ndim):
        raise ValueError(f"chunk keys of a {ndim}-d grid expected: {keys[:3]}")
    if head:
        if set(tokens[:: head + ndim]) != {"c"}:
            raise ValueError(f"chunk keys without the 'c' prefix: {keys[:3]}")
        del tokens[:: head + ndim]
    indices = np.fromiter(map(int, tokens), dtype=np.intp, count=len(tokens)).reshape(
        len(keys), ndim
    )
    if encoding.encode_chunk_key(tuple(indices[-1].tolist())) != keys[-1]:
        raise ValueError(f"chunk key {keys[-1]!r} does not round-trip")
    return indices


def _plan_few(node: ManifestArray, manifest: Any, keys: list[str]) -> _Plan:
    """:func:`_plan` for a few chunks named by their keys."""
    encoding = node.metadata.chunk_key_encoding
    ndim = manifest._paths.ndim
    indices = []
    for key in keys:
        index = encoding.decode_chunk_key(key) if ndim else ()
        if len(index) != ndim or encoding.encode_chunk_key(index) != key:
            raise ValueError(f"chunk key {key!r} does not name a chunk of a {ndim}-d grid")
        indices.append(tuple(index))
    return plan_entries(manifest, indices)


def plan_entries(manifest: Any, indices: Sequence[tuple[int, ...]]) -> _Plan:
    """:func:`_plan` for a few chunks, entry by entry (numpy's per-call cost would
    dominate)."""
    plan = _Plan({}, {}, [], 0)
    paths, offsets, lengths, inlined = (
        manifest._paths,
        manifest._offsets,
        manifest._lengths,
        manifest._inlined,
    )
    for item, index in enumerate(indices):
        data = inlined.get(index) if inlined else None
        url = str(paths[index])
        if data is not None:
            plan.inlined[item] = data
        elif url == "":
            plan.missing.append(item)
        else:
            offset, length = int(offsets[index]), int(lengths[index])
            items, starts, ends = plan.by_file.setdefault(url, ([], [], []))
            items.append(item)
            starts.append(offset)
            ends.append(offset + length)
            plan.nbytes += length
    return plan


def _plan(manifest: Any, indices: np.ndarray[Any, Any]) -> _Plan:
    """Where the chunks at ``indices`` (one row each) are, from the manifest's arrays."""
    where = tuple(indices.T) if manifest._paths.ndim else ()
    count = len(indices)
    inlined: dict[int, bytes] = {}
    if manifest._inlined:
        for item, row in enumerate(indices.tolist()):
            data = manifest._inlined.get(tuple(row))
            if data is not None:
                inlined[item] = data
    return plan_located(
        np.broadcast_to(manifest._paths[where], (count,)),
        np.broadcast_to(manifest._offsets[where], (count,)),
        np.broadcast_to(manifest._lengths[where], (count,)),
        inlined,
    )


def plan_located(
    paths: np.ndarray[Any, Any],
    offsets: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    inlined: dict[int, bytes],
) -> _Plan:
    """The plan of chunks whose manifest entries are given (one per item, in order)."""
    offsets = offsets.astype(np.int64)
    lengths = lengths.astype(np.int64)
    if not inlined and len(paths):
        # Most reads are of chunks all in one file: one comparison of the paths says so.
        first = paths[0]
        if first != "" and (paths == first).all():
            ends = offsets + lengths
            located = (list(range(len(paths))), offsets.tolist(), ends.tolist())
            return _Plan({str(first): located}, {}, [], int(lengths.sum()))
    present = paths != ""
    for item in inlined:
        present[item] = False
    missing = [i for i in np.flatnonzero(paths == "").tolist() if i not in inlined]
    by_file: dict[str, tuple[list[int], list[int], list[int]]] = {}
    items = np.flatnonzero(present)
    if len(items):
        urls = paths[items]
        first = urls[0]
        # Most reads are of one file: comparing with it is cheaper than sorting them.
        for url in [first] if (urls == first).all() else np.unique(urls).tolist():
            same = urls == url
            mine = items if same.all() else items[same]
            starts = offsets[mine]
            by_file[str(url)] = (mine.tolist(), starts.tolist(), (starts + lengths[mine]).tolist())
    return _Plan(by_file, inlined, missing, int(lengths[items].sum()))


def threaded(plan: _Plan) -> bool:
    """Whether a read is large enough, stored or decoded, for threads."""
    if plan.nbytes >= THREADED_BYTES:
        return True
    return plan.decoded_nbytes >= THREADED_DECODED_BYTES and sharing_workers(plan) > 1


def sharing_workers(plan: _Plan) -> int:
    """The threads a threaded read is shared among: each takes a piece
    (:func:`_pieces`); one for reads of small chunks (:data:`SHARED_CHUNK_BYTES`)."""
    chunks = len(plan.inlined) + sum(len(items) for items, _, _ in plan.by_file.values())
    size = plan.decoded_nbytes or plan.nbytes
    if not chunks or size < SHARED_CHUNK_BYTES * chunks:
        return 1
    return _max_workers()


async def read_planned(
    store: ManifestStore, plan: _Plan, batch: Sequence[ChunkInfo], decode: _Decode
) -> None:
    """Fetch the chunks ``plan`` locates and ``decode`` them (the missing ones are left)."""
    if threaded(plan):
        # Fetch and decode in worker threads, a piece at a time, so reading one piece
        # overlaps decoding another, the bytes in memory stay bounded and zarr's event
        # loop (shared by every thread reading) is not held up.
        loop = asyncio.get_running_loop()
        pool = _pool()
        await asyncio.gather(
            *(
                loop.run_in_executor(pool, _fetch_and_decode, store, piece, batch, decode)
                for piece in _pieces(plan, sharing_workers(plan))
            )
        )
    else:
        chunks = await _fetch(store, plan, len(batch))
        decode(batch, chunks, [i for i, data in enumerate(chunks) if data is not None])


async def _fetch(store: ManifestStore, plan: _Plan, count: int) -> list[Any]:
    """Every chunk's stored bytes (None where missing), one ``get_ranges`` per file."""
    chunks: list[Any] = [None] * count
    for item, data in plan.inlined.items():
        chunks[item] = data
    remote = []
    for url, (items, starts, ends) in plan.by_file.items():
        obj_store, path = _resolve(store._registry, url)
        if isinstance(obj_store, (LocalStore, MemoryStore)):
            # A small read of local memory or disk returns sooner than a hand-off to
            # obstore's async runtime and back would.
            got = get_ranges(obj_store, path, starts, ends)
            for item, stored in zip(items, got, strict=True):
                chunks[item] = stored
        else:
            remote.append((obj_store, path, items, starts, ends))

    async def one_file(
        obj_store: Any, path: str, items: list[int], starts: list[int], ends: list[int]
    ) -> None:
        if len(items) == 1:
            got = [await obj_store.get_range_async(path, start=starts[0], end=ends[0])]
        else:
            got = await obj_store.get_ranges_async(path, starts=starts, ends=ends)
        for item, data in zip(items, got, strict=True):
            chunks[item] = data

    await asyncio.gather(*(one_file(*where) for where in remote))
    return chunks


def _pieces(plan: _Plan, workers: int = 1) -> Iterator[_Plan]:
    """``plan`` cut into pieces (inlined chunks in the first) of about :data:`PIECE_BYTES`,
    or of a ``workers``-th of the read where that is less, so that a read of a few
    megabytes is shared among the threads instead of decoded by one of them (as
    tifffile shares a file's tiles)."""
    piece_bytes = min(PIECE_BYTES, max(1, -(-plan.nbytes // workers)))
    inlined = plan.inlined
    for url, (items, starts, ends) in plan.by_file.items():
        begin, size = 0, 0
        for k in range(len(items)):
            size += ends[k] - starts[k]
            if size >= piece_bytes or k == len(items) - 1:
                piece = (items[begin : k + 1], starts[begin : k + 1], ends[begin : k + 1])
                yield _Plan({url: piece}, inlined, [], size)
                inlined, begin, size = {}, k + 1, 0
    if inlined:
        yield _Plan({}, inlined, [], 0)


def _fetch_and_decode(
    store: ManifestStore,
    piece: _Plan,
    batch: Sequence[ChunkInfo],
    decode: _Decode,
) -> None:
    """Worker thread: read one piece's byte ranges (blocking) and decode them."""
    chunks: dict[int, Any] = dict(piece.inlined)
    for url, (items, starts, ends) in piece.by_file.items():
        obj_store, path = _resolve(store._registry, url)
        got = get_ranges(obj_store, path, starts, ends)
        chunks.update(zip(items, got, strict=True))
    decode(batch, chunks, list(chunks))


_thread_pool: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _thread_pool
    if _thread_pool is None:
        _thread_pool = ThreadPoolExecutor(_max_workers(), thread_name_prefix="manifest-read")
    return _thread_pool


def _forget_pool() -> None:
    """A forked child inherits the pool object but not its threads."""
    global _thread_pool
    _thread_pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _max_workers() -> int:
    configured = zarr.config.get("codec_pipeline.max_workers", None)
    with contextlib.suppress(TypeError, ValueError):
        if configured is not None:
            return max(1, int(configured))
    return _cpu_count()


@functools.cache
def _cpu_count() -> int:
    """The processors, counted once: ``os.cpu_count`` reads a file at every call."""
    return os.cpu_count() or 1


__all__ = [
    "block_decoder",
    "chunk_decoder",
    "decoder",
    "locate",
    "raw_layout",
    "read",
    "read_planned",
    "reads_manifests",
    "stored_bytes_decoder",
]
