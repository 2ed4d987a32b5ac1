"""Where a planned read's chunks are fetched and decoded: zarr's event loop, the calling
thread, worker threads.

A small read is fetched and decoded at once. A large one (stored or decoded) is cut into
pieces (:func:`~virtualizarr_fill.reads.planning.pieces`) that worker threads fetch and
decode, so that reading one piece overlaps decoding another (zlib, zstd, imagecodecs and
file reads release the GIL), the bytes in memory stay bounded and zarr's event loop,
shared by every thread reading, is not held up. :func:`read_planned` runs on zarr's
event loop (the codec pipeline's ``read``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import zarr

from virtualizarr_fill.reads import planning
from virtualizarr_fill.reads.fetching import fetch, fetch_blocking
from virtualizarr_fill.reads.planning import ReadPlan

if TYPE_CHECKING:
    from virtualizarr_fill.reads.decoders import Decode

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


def threaded(plan: ReadPlan) -> bool:
    """Whether a read is large enough, stored or decoded, for threads."""
    if plan.nbytes >= THREADED_BYTES:
        return True
    return plan.decoded_nbytes >= THREADED_DECODED_BYTES and sharing_workers(plan) > 1


def sharing_workers(plan: ReadPlan) -> int:
    """The threads a threaded read is shared among: each takes a piece; one for reads of
    small chunks (:data:`SHARED_CHUNK_BYTES`)."""
    chunks = len(plan.inlined) + sum(len(items) for items, _, _ in plan.by_file.values())
    size = plan.decoded_nbytes or plan.nbytes
    if not chunks or size < SHARED_CHUNK_BYTES * chunks:
        return 1
    return max_workers()


async def read_planned(store: Any, plan: ReadPlan, batch: Sequence[Any], decode: Decode) -> None:
    """Fetch the chunks ``plan`` locates and ``decode`` them (the missing ones are left),
    on zarr's event loop; large reads in worker threads, a piece each."""
    if threaded(plan):
        loop = asyncio.get_running_loop()
        pool = thread_pool()
        await asyncio.gather(
            *(
                loop.run_in_executor(pool, fetch_and_decode, store, piece, batch, decode)
                for piece in planning.pieces(plan, sharing_workers(plan))
            )
        )
    else:
        chunks = await fetch(store, plan, len(batch))
        decode(batch, chunks, [i for i, data in enumerate(chunks) if data is not None])


def fetch_and_decode(store: Any, piece: ReadPlan, batch: Sequence[Any], decode: Decode) -> None:
    """Read one piece's byte ranges (blocking) and decode them."""
    chunks = fetch_blocking(store, piece)
    decode(batch, chunks, list(chunks))


_thread_pool: ThreadPoolExecutor | None = None


def thread_pool() -> ThreadPoolExecutor:
    """The worker threads of the read path (:func:`max_workers` of them), made at the
    first read that needs them."""
    global _thread_pool
    if _thread_pool is None:
        _thread_pool = ThreadPoolExecutor(max_workers(), thread_name_prefix="manifest-read")
    return _thread_pool


def _forget_pool() -> None:
    """A forked child inherits the pool object but not its threads."""
    global _thread_pool
    _thread_pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def max_workers() -> int:
    """zarr's ``codec_pipeline.max_workers`` setting, else the processors."""
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
    "SHARED_CHUNK_BYTES",
    "THREADED_BYTES",
    "THREADED_DECODED_BYTES",
    "fetch_and_decode",
    "max_workers",
    "read_planned",
    "sharing_workers",
    "thread_pool",
    "threaded",
]
