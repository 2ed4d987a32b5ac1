"""Byte ranges of the files a manifest points into, read with few calls.

A manifest's chunks are ``(url, offset, length)`` references resolved through an
obspec-utils ``ObjectStoreRegistry`` (:func:`virtualizarr_fill.io.registries.resolve`);
:func:`get_ranges` reads several ranges of one file at once: obstore's ``get_ranges``
(which coalesces nearby ranges on object stores), or, for a few ranges of a local file,
``os.pread`` (obstore answers every ``LocalStore`` call on its runtime's worker threads,
which costs more than reading a small range). :func:`read_into` and :func:`read_at` fill
a caller's buffer from a local file directly.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

from obstore.store import LocalStore

#: Most byte ranges of one read that :func:`get_ranges` reads from a local file itself;
#: obstore's own loop over more is quicker than ours in Python.
LOCAL_RANGES = 64
#: Largest gap between byte ranges of a local file read as one (obstore's coalescing
#: takes up to 1 MiB; a strip or tile gap is usually a few bytes or none).
LOCAL_GAP_BYTES = 64 << 10

# Object paths whose filesystem path cannot differ from the path itself (obstore
# percent-encodes other characters).
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._+,=@/-]+")

# Per LocalStore prefix and object path, the object's filesystem path, or None where
# it is not read directly (LocalStores are neither hashable nor weakly referable).
_local_paths: dict[tuple[str | None, str], str | None] = {}


def _local_path(store: Any, path: str) -> str | None:
    """The file ``path`` names in the obstore ``LocalStore`` ``store``, when its size
    checks out against obstore's own answer; None otherwise."""
    prefix = store.prefix
    key = (None if prefix is None else str(prefix), path)
    if key in _local_paths:
        return _local_paths[key]
    found = None
    if _PLAIN_PATH.fullmatch(path) and hasattr(os, "pread"):
        candidate = os.path.join("/" if prefix is None else str(prefix), path)
        with contextlib.suppress(Exception):
            if os.stat(candidate).st_size == store.head(path)["size"]:
                found = candidate
    _local_paths[key] = found
    return found


# Retire when obstore's LocalStore reads a small range without a hop to other threads.
def get_ranges(store: Any, path: str, starts: list[int], ends: list[int]) -> list[Any]:
    """The byte ranges ``starts[i]:ends[i]`` of object ``path`` of ``store`` (obstore's
    blocking ``get_ranges``).

    obstore answers a ``LocalStore`` call on its runtime's worker threads, which even
    for one small range costs most of reading a small array: a few ranges
    of a local file are read here with ``os.pread`` (the same bytes). A range past the
    end of the file goes to obstore, which reports it."""
    if isinstance(store, LocalStore) and len(starts) <= LOCAL_RANGES:
        local = _local_path(store, path)
        got = _pread(local, starts, ends) if local is not None else None
        if got is not None:
            return got
    return store.get_ranges(path, starts=starts, ends=ends)  # type: ignore[no-any-return]


def read_into(store: Any, path: str, start: int, buffer: Any) -> bool:
    """Fill ``buffer`` (a NumPy ``uint8`` array) from ``start`` of a file of an obstore
    ``LocalStore`` with ``os.preadv``; False, and nothing read, for other stores, or
    when the file cannot be read or is shorter.

    A large range read into a new ``bytes`` object and then copied costs several times
    the read itself (the copy touches fresh pages twice)."""
    with local_descriptor(store, path) as descriptor:
        return descriptor is not None and read_at(descriptor, start, buffer)


@contextlib.contextmanager
def local_descriptor(store: Any, path: str) -> Iterator[int | None]:
    """A descriptor of the file ``path`` of an obstore ``LocalStore`` open for reading
    (closed on leaving the block), for :func:`read_at`; None for other stores, or when
    the file cannot be opened."""
    local = _local_path(store, path) if isinstance(store, LocalStore) else None
    descriptor = None
    if local is not None and hasattr(os, "preadv"):
        with contextlib.suppress(OSError):
            descriptor = os.open(local, os.O_RDONLY)
    try:
        yield descriptor
    finally:
        if descriptor is not None:
            os.close(descriptor)


def read_at(descriptor: int, start: int, buffer: Any) -> bool:
    """Fill ``buffer`` (a NumPy ``uint8`` array) from ``start`` of the open file
    ``descriptor`` (:func:`local_descriptor`); False when the file is shorter or
    cannot be read."""
    try:
        return os.preadv(descriptor, [memoryview(buffer).cast("B")], start) == buffer.nbytes
    except OSError:
        return False


def _pread(local: str, starts: list[int], ends: list[int]) -> list[Any] | None:
    """The ranges of a local file, read-only (``bytes``, or views of one ``bytes``
    object where ranges at most :data:`LOCAL_GAP_BYTES` apart are read together, as
    obstore coalesces them); None if it cannot be opened, or a range is empty or runs
    past the file's end (obstore then reads, or reports the problem its own way)."""
    if any(end <= start for start, end in zip(starts, ends, strict=True)):
        return None
    try:
        descriptor = os.open(local, os.O_RDONLY)
    except OSError:
        return None
    try:
        order = sorted(range(len(starts)), key=starts.__getitem__)
        got: list[Any] = [None] * len(starts)
        first = 0
        while first < len(order):
            low, high = starts[order[first]], ends[order[first]]
            last = first
            while last + 1 < len(order) and starts[order[last + 1]] - high <= LOCAL_GAP_BYTES:
                last += 1
                high = max(high, ends[order[last]])
            data = os.pread(descriptor, high - low, low)
            if len(data) != high - low:
                return None
            if first == last:
                got[order[first]] = data
            else:
                view = memoryview(data)
                for i in order[first : last + 1]:
                    got[i] = view[starts[i] - low : ends[i] - low]
            first = last + 1
        return got
    finally:
        os.close(descriptor)


__all__ = [
    "LOCAL_GAP_BYTES",
    "LOCAL_RANGES",
    "get_ranges",
    "local_descriptor",
    "read_at",
    "read_into",
]
