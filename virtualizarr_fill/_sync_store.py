"""Synchronous reads from VirtualiZarr's ManifestStore, for zarr's fused codec pipeline.

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
"""

from __future__ import annotations

import weakref
from typing import Any, Literal
from urllib.parse import urlparse

import obstore
from obspec_utils.registry import ObjectStoreRegistry
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
    node, suffix = vz_store._get_deepest_group_or_array(self._group, key)
    if suffix.endswith("zarr.json"):
        return node.metadata.to_buffer_dict(prototype=default_buffer_prototype())["zarr.json"]
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


def install() -> None:
    """Give ManifestStore the synchronous store surface (idempotent; kept if upstream has it)."""
    if getattr(ManifestStore, "get_sync", get_sync) is not get_sync:
        return  # upstream implements it
    ManifestStore.get_sync = get_sync  # type: ignore[attr-defined]
    ManifestStore.set_sync = _read_only  # type: ignore[attr-defined]
    ManifestStore.delete_sync = _read_only  # type: ignore[attr-defined]


__all__ = ["get_sync", "install"]
