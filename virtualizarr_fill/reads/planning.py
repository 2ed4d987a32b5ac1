"""Where the chunks of a read are: a manifest's entries and chunk grid indices in, byte
ranges per file out.

A :class:`ReadPlan` groups the chunks of one read by the file holding them (with their
byte ranges), and lists the chunks held in the manifest itself and those that are
missing. The plans are made from the manifest's arrays
(:class:`~virtualizarr_fill.manifests.upstream.ManifestEntries`): entry by entry for a
few chunks, with NumPy for many, and by slicing the arrays for the chunks of step-1
ranges of grid indices. :func:`pieces` cuts a plan into pieces for worker threads, and
:func:`one_span` finds the one byte range holding chunks laid one after the other in a
file (uncompressed strips and tiles, HDF5 contiguous datasets).

Nothing here reads a file or knows zarr.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill.reads.object_cache import ObjectCache

if TYPE_CHECKING:
    from virtualizarr_fill.manifests.upstream import ManifestEntries

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


def plan_product(entries: ManifestEntries, indices: Sequence[Sequence[int]]) -> ReadPlan:
    """The plan of the chunks of the product of per-dimension grid indices (zarr's order)."""
    count = math.prod(len(ix) for ix in indices)
    if count <= FEW_CHUNKS:
        return plan_entries(entries, list(itertools.product(*indices)))
    if not indices:
        return plan_rows(entries, np.zeros((1, 0), dtype=np.intp))
    ix = [np.asarray(i, dtype=np.intp) for i in indices]
    rows = np.stack(np.meshgrid(*ix, indexing="ij"), axis=-1).reshape(-1, len(ix))
    return plan_rows(entries, rows)


def plan_indices(entries: ManifestEntries, indices: list[list[int]]) -> ReadPlan:
    """:func:`plan_product`, by :func:`plan_ranges` where each dimension's indices are
    consecutive."""
    ranges = [range(ix[0], ix[-1] + 1) if ix else range(0) for ix in indices]
    if all(len(r) == len(ix) and list(r) == ix for r, ix in zip(ranges, indices, strict=True)):
        return plan_ranges(entries, ranges)
    return plan_product(entries, indices)


def plan_ranges(entries: ManifestEntries, ranges: list[range]) -> ReadPlan:
    """:func:`plan_product` of step-1 ranges: the manifest's arrays sliced, which costs
    far less than indexing them with the grid indices of every chunk."""
    count = math.prod(len(r) for r in ranges)
    if count <= FEW_CHUNKS or entries.inlined or not entries.paths.ndim:
        return plan_product(entries, ranges)
    where = tuple(slice(r.start, r.stop) for r in ranges)
    return plan_located(
        entries.paths[where].reshape(-1),
        entries.offsets[where].reshape(-1),
        entries.lengths[where].reshape(-1),
        {},
    )


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


# --------------------------------------------------------------------------- spans


@dataclasses.dataclass(frozen=True)
class ManifestRun:
    """Chunks that are one run of one file: in the C order of the grid, each of
    ``chunk_bytes`` but the last (``last_bytes``, no more), each starting where the one
    before ends (an uncompressed TIFF's strips, an HDF5 contiguous dataset)."""

    url: str
    start: int
    chunk_bytes: int
    last_bytes: int


#: Each manifest's run (:func:`find_run`; None: not one), kept while the manifest lives.
#: A manifest's entries do not change (VirtualiZarr's operations make new manifests),
#: and comparing every chunk's entry costs more than reading a small file: each later
#: read of any part of it finds its span by arithmetic. Bounded by the manifests alive.
_runs: ObjectCache[ManifestRun | None] = ObjectCache()


def one_span(
    manifest: object,
    entries: ManifestEntries,
    ranges: list[range],
    nbytes: int,
    short_last: bool | None,
) -> tuple[str, int, int] | None:
    """The one byte range of one file holding every chunk of the product of ``ranges``
    one after the other (in that product's order), each of ``nbytes``, but the last,
    which is shorter when ``short_last``; None otherwise (and where ``short_last`` is
    None). ``entries`` are ``manifest``'s (whose run is kept with it).

    Uncompressed strips and tiles written one after the other (most uncompressed
    TIFFs) are then read as one range and viewed as the whole chunks at once, instead
    of each range handled on its own (most of the time of reading one such file)."""
    if short_last is None or entries.inlined or not entries.paths.ndim:
        return None
    run = _runs.get(manifest, lambda: find_run(entries))
    if run is None or run.chunk_bytes != nbytes:
        return _scanned_span(entries, ranges, nbytes, short_last)
    # The chunks of the product of ranges are one run of the manifest's C order when
    # they are as many as the items from the first to the last.
    shape = entries.paths.shape
    first = last = 0
    for r, n in zip(ranges, shape, strict=True):
        first, last = first * n + r.start, last * n + r.stop - 1
    if last - first + 1 != math.prod(len(r) for r in ranges):
        return None
    at_end = last == math.prod(shape) - 1
    if (at_end and run.last_bytes < nbytes) != short_last:
        return None
    end = run.start + last * nbytes + (run.last_bytes if at_end else nbytes)
    return run.url, run.start + first * nbytes, end


def _scanned_span(
    entries: ManifestEntries, ranges: list[range], nbytes: int, short_last: bool
) -> tuple[str, int, int] | None:
    """:func:`one_span` for a manifest that is not one run (:func:`find_run`), from the
    entries of the chunks of ``ranges``: each file of a concatenation may be."""
    where = tuple(slice(r.start, r.stop) for r in ranges)
    run = _run_of(entries.paths[where], entries.offsets[where], entries.lengths[where], nbytes)
    if run is None or (run.last_bytes < nbytes) != short_last:
        return None
    count = math.prod(len(r) for r in ranges)
    return run.url, run.start, run.start + (count - 1) * nbytes + run.last_bytes


def find_run(entries: ManifestEntries) -> ManifestRun | None:
    """A manifest's chunks as one run of one file, or None."""
    if entries.inlined or not entries.lengths.size:
        return None
    lengths = entries.lengths
    return _run_of(entries.paths, entries.offsets, lengths, int(lengths.flat[0]))


def _run_of(
    paths: np.ndarray[Any, Any],
    starts: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    chunk_bytes: int,
) -> ManifestRun | None:
    """The manifest entries ``paths``, ``starts``, ``lengths`` (any shape, C order) as
    one run of chunks of ``chunk_bytes``, or None."""
    paths, starts, lengths = paths.reshape(-1), starts.reshape(-1), lengths.reshape(-1)
    if not len(paths) or paths[0] == "" or not (paths == paths[0]).all():
        return None
    last = int(lengths[-1])
    if not 0 < last <= chunk_bytes or not (lengths[:-1] == chunk_bytes).all():
        return None
    if not (starts[1:] == starts[:-1] + chunk_bytes).all():
        return None
    return ManifestRun(str(paths[0]), int(starts[0]), chunk_bytes, last)


__all__ = [
    "FEW_CHUNKS",
    "PIECE_BYTES",
    "ManifestRun",
    "ReadPlan",
    "find_run",
    "one_span",
    "pieces",
    "plan_entries",
    "plan_indices",
    "plan_located",
    "plan_product",
    "plan_ranges",
    "plan_rows",
]
