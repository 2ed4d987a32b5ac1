"""Synchronous reads from VirtualiZarr's ManifestStore, for zarr's fused codec pipeline,
and its ``zarr.json`` documents encoded once instead of at every request.

zarr's ``FusedCodecPipeline`` reads and decodes a whole batch of chunks in a thread pool
instead of scheduling one coroutine per chunk, which is most of the cost of reading an
array with many small chunks. It takes that path only for stores with zarr's synchronous
store surface (``get_sync``, ``set_sync``, ``delete_sync``). VirtualiZarr's
``ManifestStore`` has only the asynchronous one, so this module adds the synchronous
surface: ``get_sync`` reads a chunk's byte range with obstore's blocking ``get_range``
(inlined chunks from memory); the store is read-only, so the write methods raise as its
asynchronous ones do.

Nothing changes until a user opts in to the fused pipeline::

    zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"})

The chunk lookup mirrors ``ManifestStore.get`` (same key parsing, same path-in-store rule
for stores with a prefix); object paths are resolved once per file, not once per chunk.

``ManifestStore.get`` encodes a node's metadata to JSON at every request for its
``zarr.json``, and zarr requests it when the group is opened and again for every array
opened: on files with large attributes that is most of the time taken to open them. The
metadata objects are immutable, so the encoded document is kept with the object (and
dropped with it) and served from there by both ``get`` and ``get_sync``.

Nodes are looked up in each group's own mapping (:func:`deepest_node`):
``ManifestGroup.arrays`` builds a dict of every member at each access, which made
opening each array of a group of thousands cost as much as all of them. And
:func:`get_ranges` reads a few byte ranges of a local file with ``os.pread`` instead of
obstore's ``LocalStore`` (whose every call is a hop to its runtime's threads).
"""

from __future__ import annotations

import contextlib
import os
import re
import weakref
from collections.abc import Iterator
from typing import Any, Literal
from urllib.parse import urlparse

import obstore
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestGroup
from virtualizarr.manifests import store as vz_store
from virtualizarr.manifests.store import ManifestStore
from virtualizarr.manifests.utils import parse_manifest_index
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

_V2_METADATA_KEYS = (".zattrs", ".zgroup", ".zarray", ".zmetadata")


def _path_in_store(store: Any, url: str) -> str:
    """The object's path inside ``store`` (``ManifestStore.get``'s rule, store prefix removed)."""
    path = urlparse(url).path
    if getattr(store, "prefix", None):
        prefix = str(store.prefix).lstrip("/")
    elif hasattr(store, "url"):
        prefix = urlparse(store.url).path.lstrip("/")
    else:
        prefix = ""
    return path.lstrip("/").removeprefix(prefix).lstrip("/")


# Per registry (held weakly), the resolved (store, path) of each file URL: a read resolves
# its file once, not once per chunk.
_resolved: weakref.WeakKeyDictionary[ObjectStoreRegistry, dict[str, tuple[Any, str]]] = (
    weakref.WeakKeyDictionary()
)


_metadata_json: dict[int, Buffer] = {}


def _zarr_json(metadata: Any) -> Buffer:
    """``metadata``'s ``zarr.json`` document, encoded once per metadata object."""
    key = id(metadata)
    found = _metadata_json.get(key)
    if found is None:
        found = metadata.to_buffer_dict(prototype=default_buffer_prototype())["zarr.json"]
        _metadata_json[key] = found
        # The id may be reused once the object is gone: forget it with the object.
        weakref.finalize(metadata, _metadata_json.pop, key, None)
    return found


def _member(group: ManifestGroup, name: str) -> Any:
    """``group``'s array or subgroup ``name``, or None.

    Looked up in the group's own mapping: ``ManifestGroup.arrays`` and ``.groups`` build
    a new dict of every member at each access, which made opening each of the arrays of
    a group of thousands cost as much as all of them."""
    return group.get(name) if name and "/" not in name else None


# Retire when VirtualiZarr's ManifestGroup looks members up without building dicts.
def deepest_node(group: ManifestGroup, key: str) -> tuple[Any, str]:
    """VirtualiZarr's ``_get_deepest_group_or_array`` (the deepest group or array ``key``
    leads to, and the rest of ``key``), without rebuilding member dicts (:func:`_member`)."""
    node: Any = group
    while True:
        part, _, suffix = key.partition("/")
        found = _member(node, part)
        if found is None:
            return node, suffix or part
        if not isinstance(found, ManifestGroup):
            return found, suffix
        node, key = found, suffix


def metadata_node(group: ManifestGroup, key: str) -> Any:
    """The group or array whose ``zarr.json`` is ``key``, or ``None`` if no node has that path."""
    node: Any = group
    for part in key.split("/")[:-1]:
        if not isinstance(node, ManifestGroup):
            return None  # a path below an array
        node = _member(node, part)
        if node is None:
            return None
    return node


def _resolve(registry: ObjectStoreRegistry, url: str) -> tuple[Any, str]:
    known = _resolved.get(registry)
    if known is None:
        known = _resolved.setdefault(registry, {})
    found = known.get(url)
    if found is None:
        store, _ = registry.resolve(url)
        if not store:
            raise ValueError(f"Could not find a store to use for {url} in the store registry")
        found = known[url] = (store, _path_in_store(store, url))
    return found


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

    obstore answers a ``LocalStore`` call on its runtime's worker threads, about 60 µs
    even for one small range, the cost of reading most of a small array: a few ranges
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


# Retire when VirtualiZarr's ManifestStore implements zarr's synchronous store surface.
def get_sync(
    self: ManifestStore,
    key: str,
    *,
    prototype: BufferPrototype | None = None,
    byte_range: ByteRequest | None = None,
) -> Buffer | None:
    """Blocking twin of ``ManifestStore.get``."""
    prototype = prototype or default_buffer_prototype()
    if key.endswith("zarr.json"):
        found = metadata_node(self._group, key)
        return None if found is None else _zarr_json(found.metadata)
    node, suffix = deepest_node(self._group, key)
    if suffix.endswith(_V2_METADATA_KEYS):
        return None
    if isinstance(node, ManifestGroup):
        raise ValueError("Key requested is a group but the key does not end in `zarr.json`")
    manifest = node.manifest
    separator: Literal[".", "/"] = getattr(node.metadata.chunk_key_encoding, "separator", ".")
    index = parse_manifest_index(key, separator, expand_pattern=True)
    inlined = manifest._inlined.get(index)
    if inlined is not None:
        if byte_range is not None:
            span = vz_store._transform_byte_range(
                byte_range, chunk_start=0, chunk_end_exclusive=len(inlined)
            )
            inlined = inlined[span.start : span.end]
        return prototype.buffer.from_bytes(inlined)
    entry = manifest.get_entry(index)
    if entry is None:
        return None
    store, path = _resolve(self._registry, entry["path"])
    offset = int(entry["offset"])
    span = vz_store._transform_byte_range(
        byte_range, chunk_start=offset, chunk_end_exclusive=offset + int(entry["length"])
    )
    data = obstore.get_range(store, path, start=span.start, end=span.end)
    return prototype.buffer.from_bytes(data)  # type: ignore[arg-type]


def _read_only(self: ManifestStore, *args: Any, **kwargs: Any) -> None:
    raise NotImplementedError("ManifestStore is read-only")


_upstream_get = ManifestStore.get


# Retire when VirtualiZarr's ManifestStore caches its encoded metadata and answers
# requests for missing nodes with None.
async def get(
    self: ManifestStore,
    key: str,
    prototype: BufferPrototype,
    byte_range: ByteRequest | None = None,
) -> Buffer | None:
    """``ManifestStore.get``, with ``zarr.json`` documents encoded once and ``None`` for
    a ``zarr.json`` of a path that names no node."""
    if key.endswith("zarr.json"):
        found = metadata_node(self._group, key)
        return None if found is None else _zarr_json(found.metadata)
    return await _upstream_get(self, key, prototype, byte_range)


def install() -> None:
    """Give ManifestStore the synchronous store surface and cached ``zarr.json``
    documents (idempotent; upstream's synchronous surface is kept if it has one)."""
    ManifestStore.get = get  # type: ignore[method-assign]
    if getattr(ManifestStore, "get_sync", get_sync) is not get_sync:
        return  # upstream implements it
    ManifestStore.get_sync = get_sync  # type: ignore[attr-defined]
    ManifestStore.set_sync = _read_only  # type: ignore[attr-defined]
    ManifestStore.delete_sync = _read_only  # type: ignore[attr-defined]


__all__ = [
    "LOCAL_RANGES",
    "deepest_node",
    "get_ranges",
    "get_sync",
    "install",
    "metadata_node",
]
