"""Where the chunks of a read are: a manifest's entries and chunk grid indices in, byte
ranges per file out.

A :class:`ReadPlan` groups the chunks of one read by the file holding them (with their
byte ranges), and lists the chunks held in the manifest itself and those that are
missing. The plans are made from the manifest's arrays
(:class:`~virtualizarr_fill.upstream.ManifestEntries`): entry by entry for a
few chunks, with NumPy for many. :func:`pieces` cuts a plan into pieces for worker
threads.

Nothing here reads a file or knows zarr.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from virtualizarr_fill.upstream import ManifestEntries

#: Reads of at most this many chunks are planned entry by entry, larger ones with numpy.
FEW_CHUNKS = 16
#: Stored bytes one worker-thread task fetches and decodes.
PIECE_BYTES = 4 << 20


@dataclasses.dataclass
class ReadPlan:
    """Where each chunk of one read is: file chunks grouped by file, inlined bytes, missing."""

    by_file: dict[str, tuple[list[int], list[int], list[int]]]  # url -> (items, starts, ends)
    inlined: dict[int, bytes]  # item -> bytes held in the manifest
    missing: list[int]  # items with no chunk: the fill value
    nbytes: int  # bytes to fetch
    # Bytes the chunks decode to, where the read knows it (else 0): a read of a few
    # hundred kilobytes of JPEG or Deflate tiles decodes to megabytes.
    decoded_nbytes: int = 0


def plan_entries(entries: ManifestEntries, indices: Sequence[tuple[int, ...]]) -> ReadPlan:
    """The plan of a few chunks (grid indices, one per item), entry by entry (numpy's
    per-call cost would dominate)."""
    plan = ReadPlan({}, {}, [], 0)
    paths, offsets, lengths, inlined = entries
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


def plan_rows(entries: ManifestEntries, indices: np.ndarray[Any, Any]) -> ReadPlan:
    """The plan of the chunks at ``indices`` (grid indices, one row each), from the
    manifest's arrays."""
    paths, offsets, lengths, inlined = entries
    where = tuple(indices.T) if paths.ndim else ()
    count = len(indices)
    found: dict[int, bytes] = {}
    if inlined:
        for item, row in enumerate(indices.tolist()):
            data = inlined.get(tuple(row))
            if data is not None:
                found[item] = data
    return plan_located(
        np.broadcast_to(paths[where], (count,)),
        np.broadcast_to(offsets[where], (count,)),
        np.broadcast_to(lengths[where], (count,)),
        found,
    )


def plan_located(
    paths: np.ndarray[Any, Any],
    offsets: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    inlined: dict[int, bytes],
) -> ReadPlan:
    """The plan of chunks whose manifest entries are given (one per item, in order)."""
    offsets = offsets.astype(np.int64)
    lengths = lengths.astype(np.int64)
    if not inlined and len(paths):
        # Most reads are of chunks all in one file: one comparison of the paths says so.
        first = paths[0]
        if first != "" and (paths == first).all():
            ends = offsets + lengths
            located = (list(range(len(paths))), offsets.tolist(), ends.tolist())
            return ReadPlan({str(first): located}, {}, [], int(lengths.sum()))
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
    return ReadPlan(by_file, inlined, missing, int(lengths[items].sum()))


def pieces(plan: ReadPlan, workers: int = 1) -> Iterator[ReadPlan]:
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
                yield ReadPlan({url: piece}, inlined, [], size)
                inlined, begin, size = {}, k + 1, 0
    if inlined:
        yield ReadPlan({}, inlined, [], 0)


__all__ = [
    "FEW_CHUNKS",
    "PIECE_BYTES",
    "ReadPlan",
    "pieces",
    "plan_entries",
    "plan_located",
    "plan_rows",
]
