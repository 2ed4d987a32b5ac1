"""A batch of chunks of an Icechunk store read with a few calls: whole keys fetched
together, decoded in worker threads.

zarr's own pipeline asks the store for each chunk alone, one ``get`` per chunk. Each of
Icechunk's ``get`` crosses into its Rust runtime and back, which costs more than
fetching a 16 KB TIFF strip does, and a store of thousands of small files holds
hundreds of thousands of such strips. Icechunk's ``get_partial_values`` fetches a list
of keys in one call (concurrently, as its ``get_partial_values_concurrency`` setting
says), with the same checks as ``get`` (a file modified since the repository recorded
it is refused). For a read of such a store,
:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline` cuts the batch into
pieces, fetches each piece's keys with one call on zarr's event loop, and decodes the
piece with the array's own codecs in a worker thread (zlib and the other decompressors
release the GIL), so that fetching one piece overlaps decoding another.

A piece whose fetch or decode fails (a missing chunk, which Icechunk's
``get_partial_values`` does not return as missing, a file that cannot be read, bytes
that do not decode) is read again by zarr's own pipeline, whose values and errors are
then those of the read: nothing is read differently, only faster.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import GetResult
from zarr.storage import StorePath

from virtualizarr_fill.reads.chunk_failures import read_naming_failures
from virtualizarr_fill.reads.decoders import output_decoder
from virtualizarr_fill.reads.scheduling import max_workers, thread_pool

if TYPE_CHECKING:
    from zarr.core.buffer import NDBuffer

    from virtualizarr_fill.reads.decoders import ChunkInfo, CodecChain, Decode

__all__ = ["PIECE_BYTES", "batches_keys", "read", "reads_keys"]

#: Decoded bytes of one piece of a read: large enough that a piece's fetch and
#: decode hand-offs are few, small enough that the pieces of a read of a few files
#: keep every worker thread busy and the fetched bytes in memory stay bounded.
PIECE_BYTES = 4 << 20


def batches_keys(store: Any) -> bool:
    """Whether ``store``'s ``get_partial_values`` fetches a list of whole keys in one
    call: Icechunk's store, or a store whose class says so (``batches_keys = True``,
    as :class:`~virtualizarr_fill.writers.icechunk_reads.ChangedFilesNamingStore`,
    which wraps Icechunk's)."""
    if getattr(type(store), "batches_keys", False) is True:
        return True
    try:
        from icechunk import IcechunkStore
    except ImportError:
        return False
    return isinstance(store, IcechunkStore)


def reads_keys(batch: Sequence[ChunkInfo], out: NDBuffer) -> bool:
    """Whether this module reads ``batch`` (every chunk a key of one such store, read
    into host memory)."""
    if len(batch) < 2 or not isinstance(out.as_ndarray_like(), np.ndarray):
        return False
    first = batch[0][0]
    if not isinstance(first, StorePath) or not batches_keys(first.store):
        return False
    store = first.store
    return all(isinstance(info[0], StorePath) and info[0].store is store for info in batch)


def _pieces(batch: Sequence[ChunkInfo]) -> list[list[int]]:
    """The batch's items cut into consecutive pieces of about :data:`PIECE_BYTES`
    decoded, at least one per worker thread when the batch has that many chunks."""
    spec = batch[0][1]
    chunk_bytes = max(1, math.prod(spec.shape) * spec.dtype.to_native_dtype().itemsize)
    per_piece = max(1, PIECE_BYTES // chunk_bytes)
    per_piece = min(per_piece, max(1, -(-len(batch) // max_workers())))
    return [list(range(k, min(k + per_piece, len(batch)))) for k in range(0, len(batch), per_piece)]


async def read(
    pipeline: CodecChain,
    batch: Sequence[ChunkInfo],
    out: NDBuffer,
    drop_axes: tuple[int, ...] = (),
) -> tuple[GetResult, ...]:
    """Every chunk of ``batch`` read into ``out``, a piece of keys per store call."""
    keys = [_key(info) for info in batch]
    store = batch[0][0].store  # type: ignore[attr-defined]  # reads_keys checked
    target: Any = out.as_ndarray_like()
    decode = output_decoder(pipeline, drop_axes, target)
    loop = asyncio.get_running_loop()
    pool = thread_pool()
    # pieces in flight: one decoding per worker thread, one more being fetched
    slots = asyncio.Semaphore(max_workers() + 1)

    async def one_piece(items: list[int]) -> tuple[GetResult, ...]:
        part = [batch[i] for i in items]
        async with slots:
            try:
                prototype = part[0][1].prototype
                fetched = await store.get_partial_values(
                    prototype, [(keys[i], None) for i in items]
                )
                chunks = [buffer.as_numpy_array() for buffer in fetched]
                await loop.run_in_executor(pool, _decode_all, decode, part, chunks)
            except Exception:
                # zarr's pipeline reads the piece again: its values, or its error.
                return await read_naming_failures(pipeline.inner, part, out, drop_axes)
        return tuple(GetResult(status="present") for _ in part)

    results = await asyncio.gather(*(one_piece(items) for items in _pieces(batch)))
    return tuple(result for piece in results for result in piece)


def _key(info: ChunkInfo) -> str:
    path: str = info[0].path  # type: ignore[attr-defined]  # a StorePath (reads_keys)
    return path


def _decode_all(decode: Decode, part: Sequence[ChunkInfo], chunks: list[Any]) -> None:
    if len(chunks) != len(part) or any(data is None for data in chunks):
        raise ValueError("the store returned fewer chunks than asked for")
    decode(part, chunks, list(range(len(part))))
