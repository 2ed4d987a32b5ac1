"""The stored bytes of a planned read: byte ranges in, bytes out.

Each file of a :class:`~virtualizarr_fill.reads.planning.ReadPlan` is found in the
ManifestStore's registry and its ranges read with one call
(:func:`~virtualizarr_fill.io.byte_ranges.get_ranges`: obstore's ``get_ranges``,
which coalesces nearby ranges on object stores, or ``os.pread`` for a few ranges of a
local file). :func:`fetch` runs on zarr's event loop, :func:`fetch_blocking` in the
calling or a worker thread.

A file that cannot be read, or no longer holds a chunk's bytes, is a
:class:`~virtualizarr_fill.errors.StoreReadError` naming it, as zarr's own read through
the parsers' store reports it: obstore raises its own errors, panics (which are not
``Exception``), or returns fewer bytes for a range that runs past the end of a file
that shrank since it was parsed.
"""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

from obstore.store import LocalStore, MemoryStore

from virtualizarr_fill.errors import StoreReadError
from virtualizarr_fill.io.byte_ranges import get_ranges
from virtualizarr_fill.io.files import store_read_error
from virtualizarr_fill.io.registries import resolve
from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.reads.planning import ReadPlan


def file_store(store: Any, url: str) -> tuple[Any, str]:
    """The obstore store and the object path of the file ``url`` of a ManifestStore."""
    registry = upstream.store_registry(store)
    if registry is None:  # the read path checks the store before it plans a read
        raise TypeError(f"{type(store).__name__} has no object-store registry")
    return resolve(registry, url)


def _failure(error: BaseException, url: str, starts: list[int], ends: list[int]) -> NoReturn:
    """Raise ``error``, raised reading ``starts[i]:ends[i]`` of ``url``, as a
    :class:`StoreReadError` naming the file (the interpreter's own, as it is)."""
    start = min(starts)
    failure = store_read_error(error, url, start, max(ends) - start)
    if failure is None:
        raise error
    raise failure from error


def _whole(got: list[Any], url: str, starts: list[int], ends: list[int]) -> list[Any]:
    """``got``, the ranges ``starts[i]:ends[i]`` of ``url``, when each is whole."""
    for data, start, end in zip(got, starts, ends, strict=True):
        if len(data) != end - start:
            raise StoreReadError(
                f"{url}: reading {end - start} bytes at offset {start} returned {len(data)}: "
                "the object is shorter than when it was parsed"
            )
    return got


def _ranges(obj_store: Any, path: str, url: str, starts: list[int], ends: list[int]) -> list[Any]:
    """The ranges of ``url``, read with blocking calls (see the module)."""
    try:
        got = get_ranges(obj_store, path, starts, ends)
    except BaseException as error:
        _failure(error, url, starts, ends)
    return _whole(got, url, starts, ends)


async def fetch(store: Any, plan: ReadPlan, count: int) -> list[Any]:
    """Every chunk's stored bytes (None where missing), one ``get_ranges`` per file."""
    chunks: list[Any] = [None] * count
    for item, data in plan.inlined.items():
        chunks[item] = data
    remote = []
    for url, (items, starts, ends) in plan.by_file.items():
        obj_store, path = file_store(store, url)
        if isinstance(obj_store, (LocalStore, MemoryStore)):
            # A small read of local memory or disk returns sooner than a hand-off to
            # obstore's async runtime and back would.
            got = _ranges(obj_store, path, url, starts, ends)
            for item, stored in zip(items, got, strict=True):
                chunks[item] = stored
        else:
            remote.append((obj_store, path, url, items, starts, ends))

    async def one_file(
        obj_store: Any, path: str, url: str, items: list[int], starts: list[int], ends: list[int]
    ) -> None:
        try:
            if len(items) == 1:
                got = [await obj_store.get_range_async(path, start=starts[0], end=ends[0])]
            else:
                got = await obj_store.get_ranges_async(path, starts=starts, ends=ends)
        except BaseException as error:
            _failure(error, url, starts, ends)
        for item, data in zip(items, _whole(got, url, starts, ends), strict=True):
            chunks[item] = data

    await asyncio.gather(*(one_file(*where) for where in remote))
    return chunks


def fetch_blocking(store: Any, plan: ReadPlan) -> dict[int, Any]:
    """The stored bytes of the chunks of ``plan`` that are not missing, by item, read
    with blocking calls."""
    chunks: dict[int, Any] = dict(plan.inlined)
    for url, (items, starts, ends) in plan.by_file.items():
        obj_store, path = file_store(store, url)
        chunks.update(zip(items, _ranges(obj_store, path, url, starts, ends), strict=True))
    return chunks


__all__ = ["fetch", "fetch_blocking", "file_store"]
