"""A chunk that cannot be decoded, named: its array, its index in the chunk grid, its
file and byte range.

A corrupt or changed file shows up at read time, when a chunk's bytes go through its
codecs: a decompressor's own error ("imcd_lzw_decode returned IMCD_LZW_CORRUPT"), or a
reshape of the wrong number of values, neither naming the file. The manifest read path
(:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`, selected with
:func:`virtualizarr_fill.use_manifest_pipeline`) wraps each decode of a read
(:func:`naming_failures`) so that such an error becomes a
:class:`~virtualizarr_fill.errors.ChunkDecodeError` saying which chunk of which file
failed and why. Reads it leaves to zarr's own pipeline (other stores, such as Icechunk)
are named by their store key (:func:`read_naming_failures`).

Only the failing read pays: the chunk is found by decoding the chunks of the failed
call again one at a time, and located in the manifest afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import ChunkDecodeError, UnregisteredURLError

if TYPE_CHECKING:
    from zarr.abc.codec import GetResult
    from zarr.core.buffer import NDBuffer

    from virtualizarr_fill.reads.decoders import ChunkInfo, Decode
    from virtualizarr_fill.reads.planning import ReadPlan
    from virtualizarr_fill.upstream import ManifestEntries

__all__ = ["naming_failures", "read_naming_failures"]

#: Errors a decode raises that are not the chunk's, or already name it.
_NOT_DECODING = (MemoryError, ChunkDecodeError)
#: Errors of zarr's read (fetch and decode) that are not the chunk's: the store failed
#: (named by the store), or this package's errors that say what failed.
_NOT_READING = (OSError, MemoryError, ChunkDecodeError, UnregisteredURLError)


def naming_failures(decode: Decode, store: Any, entries: ManifestEntries, plan: ReadPlan) -> Decode:
    """``decode`` (the decode of a read planned as ``plan`` from the manifest
    ``entries`` of an array of ``store``), raising :class:`ChunkDecodeError` naming the
    chunk that fails."""

    def decode_naming_failures(batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> None:
        try:
            decode(batch, chunks, items)
        except _NOT_DECODING:
            raise
        except Exception as error:
            item = _failing_item(decode, batch, chunks, items)
            raise ChunkDecodeError(
                f"{_describe(store, entries, plan, item)}: cannot be decoded "
                f"({type(error).__name__}: {error})"
            ) from error

    return decode_naming_failures


def _failing_item(decode: Decode, batch: Sequence[ChunkInfo], chunks: Any, items: list[int]) -> int:
    """The first of ``items`` whose decode fails alone (the first item if none does)."""
    if len(items) > 1:
        for item in items:
            try:
                decode(batch, chunks, [item])
            except Exception:
                return item
    return items[0]


def _describe(store: Any, entries: ManifestEntries, plan: ReadPlan, item: int) -> str:
    """ "chunk (i, j) of NAME in URL (bytes START to END)" for one item of a read."""
    where = "inlined in the manifest"
    found: tuple[str, int, int] | None = None
    for url, (items, starts, ends) in plan.by_file.items():
        if item in items:
            k = items.index(item)
            found = (url, starts[k], ends[k])
            where = f"in {url} (bytes {starts[k]} to {ends[k]})"
            break
    index = _grid_index(entries, found, plan.inlined.get(item))
    chunk = f"chunk {index}" if index is not None else "a chunk"
    name = _array_name(store, entries)
    return f"{chunk} of {name} {where}" if name else f"{chunk} {where}"


def _grid_index(
    entries: ManifestEntries, found: tuple[str, int, int] | None, inlined: bytes | None
) -> tuple[int, ...] | None:
    """The chunk's index in the grid, from its file and offset (or its inlined bytes)."""
    if found is not None:
        url, start, end = found
        match = (
            (entries.paths == url) & (entries.offsets == start) & (entries.lengths == end - start)
        )
        hits = np.argwhere(match)
        return tuple(int(i) for i in hits[0]) if len(hits) else None
    if inlined is not None and entries.inlined:
        for index, data in entries.inlined.items():
            if data is inlined:
                return tuple(int(i) for i in index)
    return None


def _array_name(store: Any, entries: ManifestEntries) -> str | None:
    """The path in ``store`` of the array whose manifest holds ``entries``."""
    group = upstream.store_group(store)
    pending = [("", group)] if group is not None else []
    while pending:
        prefix, node = pending.pop()
        for name, array in getattr(node, "arrays", {}).items():
            found = upstream.manifest_entries(array.manifest)
            if found is not None and found.paths is entries.paths:
                return f"{prefix}{name}"
        pending.extend(
            (f"{prefix}{name}/", child) for name, child in getattr(node, "groups", {}).items()
        )
    return None


async def read_naming_failures(
    inner: Any, batch: Sequence[ChunkInfo], out: NDBuffer, drop_axes: tuple[int, ...]
) -> tuple[GetResult, ...]:
    """zarr's pipeline ``inner`` reading ``batch``, raising :class:`ChunkDecodeError`
    naming the store key of a chunk that fails to decode (the chunk found by reading
    the batch's chunks again one at a time)."""
    try:
        result: tuple[GetResult, ...] = await inner.read(batch, out, drop_axes)
        return result
    except _NOT_READING:
        raise
    except Exception as error:
        failing = batch[0]
        if len(batch) > 1:
            for info in batch:
                try:
                    await inner.read([info], out, drop_axes)
                except Exception:
                    failing = info
                    break
        key = failing[0]
        store = getattr(key, "store", None)
        # a store's own description, on one line (Icechunk's spans several)
        where = (str(store).strip().splitlines() or [type(store).__name__])[0]
        raise ChunkDecodeError(
            f"chunk {getattr(key, 'path', key)!s} of {where}: "
            f"cannot be read or decoded ({type(error).__name__}: {error})"
        ) from error
