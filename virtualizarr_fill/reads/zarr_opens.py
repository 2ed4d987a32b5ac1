"""zarr's group and array opens for ManifestStores read with the manifest pipeline,
installed only inside :func:`virtualizarr_fill.fast_reads`.

Every synchronous group member access is handed to zarr's event-loop thread and waited
for, and every open parses the member's ``zarr.json`` again and builds the array's
chunk grid, runtime configuration and codec pipeline anew: most of reading a file of
many small arrays. For a ManifestStore read with
:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`, these replacements

* run ``Group`` member opens (:func:`group_getitem`) and read-only ``zarr.open_group``
  (:func:`open_group`) in the calling thread (:mod:`.calling_thread`): opening from a
  ManifestStore never waits on anything, so zarr's event loop is not involved;
* parse each node's ``zarr.json`` once (:func:`read_metadata_v3`), giving every open
  its own copy, and build each array's chunk grid, runtime configuration and codec
  pipeline once per configuration (:func:`get_node_v3`).

Every other open goes to zarr's own functions (:mod:`.zarr_originals`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import zarr
import zarr.api.asynchronous as zarr_async_api
import zarr.core.array as zarr_array
import zarr.core.group as zarr_group
from virtualizarr.manifests.store import ManifestStore
from zarr.core.array import AsyncArray
from zarr.core.array_spec import ArrayConfig
from zarr.core.group import AsyncGroup, Group, GroupMetadata
from zarr.core.metadata import ArrayV3Metadata
from zarr.storage._common import StorePath
from zarr.storage._utils import _join_paths

from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.manifests.store import metadata_node
from virtualizarr_fill.reads import zarr_originals
from virtualizarr_fill.reads.calling_thread import WAITS, run_here
from virtualizarr_fill.reads.object_cache import ObjectCache
from virtualizarr_fill.reads.pipeline import PIPELINE_PATH
from virtualizarr_fill.zarr_metadata import copy_with_attributes, json_copy


def group_getitem(self: Any, path: str) -> Any:
    """zarr's ``Group.__getitem__``, opened in the calling thread for a group of a
    ManifestStore read with the manifest pipeline.

    zarr hands every open to its event loop thread and waits (most of the cost of
    opening one array of a file with a thousand); opening from a ManifestStore never
    waits on anything (its ``zarr.json`` documents are in memory, see
    :class:`~virtualizarr_fill.manifests.FileManifestStore`), so the same coroutine runs to
    its end here.
    Anything that would wait goes to zarr's own ``__getitem__``."""
    async_group = self._async_group
    if (
        isinstance(async_group.store_path.store, ManifestStore)
        and async_group.metadata.zarr_format == 3
        and _reads_with_manifest_pipeline()
    ):
        opened = run_here(async_group.getitem(path))
        if opened is not WAITS:
            return zarr_array.Array(opened) if isinstance(opened, AsyncArray) else Group(opened)
    return zarr_originals.group_getitem(self, path)


# zarr's ``open_group``, run in the calling thread for a ManifestStore opened read-only
# and read with the manifest pipeline. zarr hands the open to its event-loop thread and
# waits, most of what the open costs (a good part of reading a small TIFF whole);
# nothing in opening a ManifestStore waits (see :func:`group_getitem`), so zarr's own
# coroutine runs to its end here. Any other open, or one that would wait, is zarr's own.
# It keeps zarr's name, docstring and signature: it replaces zarr's public function.
@functools.wraps(zarr_originals.open_group)
def open_group(store: Any = None, **kwargs: Any) -> Any:
    if (
        isinstance(store, ManifestStore)
        and kwargs.get("mode") == "r"
        and _reads_with_manifest_pipeline()
    ):
        if kwargs.get("zarr_format") is None:
            # A ManifestStore holds zarr format 3 only; zarr would look for both formats
            # at once, which takes an event loop.
            kwargs = {**kwargs, "zarr_format": 3}
        kept = _kept_group(store, kwargs)
        if kept is not None:
            return kept
        opened = run_here(zarr_async_api.open_group(store, **kwargs))
        if opened is not WAITS:
            return Group(opened)
    return zarr_originals.open_group(store, **kwargs)


#: The arguments of a plain read-only open of a group (:func:`_kept_group`).
_PLAIN_OPEN = frozenset({"mode", "zarr_format", "path", "use_consolidated", "storage_options"})


def _kept_group(store: ManifestStore, kwargs: dict[str, Any]) -> Any:
    """A plain read-only open of the group at the store's root: the group with a copy of
    its kept parse (:func:`read_metadata_v3`), which is what zarr's open parses from the
    same ``zarr.json`` (half the time of opening it); None for anything else."""
    if (
        not (store.read_only and store._is_open)  # zarr would open it or copy it
        or not _PLAIN_OPEN.issuperset(kwargs)
        or kwargs.get("path") not in (None, "")
        or kwargs.get("use_consolidated") not in (None, False)
        or kwargs.get("storage_options")
    ):
        return None
    parsed = run_here(_parsed_node(store, ""))
    if parsed is WAITS or parsed is None:
        return None
    metadata = parsed.fresh_metadata()
    if not isinstance(metadata, GroupMetadata) or metadata.consolidated_metadata is not None:
        return None
    return Group(AsyncGroup(metadata=metadata, store_path=StorePath(store, "")))


async def read_metadata_v3(store: Any, path: str) -> Any:
    """zarr's ``_read_metadata_v3`` (the metadata object of the node at ``path``), for a
    ManifestStore read with the manifest pipeline parsed once per node and path.

    zarr parses a node's ``zarr.json`` into a metadata object at every open, most of
    the cost of opening a small array. A ManifestStore's documents do not change
    (``FileManifestStore`` encodes each once), so the first parse is
    kept with the node's metadata and each open gets a copy of it whose attributes are
    its own (zarr updates them in place), equal to a fresh parse."""
    parsed = await _parsed_node(store, path)
    if parsed is None:
        return await zarr_originals.read_metadata_v3(store, path)
    return parsed.fresh_metadata()


async def get_node_v3(store: Any, path: str) -> Any:
    """zarr's ``_get_node_v3`` (the array or group at ``path``), for an array of a
    ManifestStore read with the manifest pipeline built once per node and configuration.

    zarr's ``AsyncArray`` parses its runtime configuration from ``zarr.config``, derives
    its chunk grid and builds a codec pipeline at every open: most of the cost of
    opening an array whose metadata is already parsed (:func:`read_metadata_v3`). All three
    depend only on that metadata, the store and the configuration, so the first open's
    array is kept and each later open is a copy of it with its own metadata copy."""
    parsed = await _parsed_node(store, path)
    if parsed is None:
        return await zarr_originals.get_node_v3(store, path)
    metadata = parsed.fresh_metadata()
    if not isinstance(metadata, ArrayV3Metadata):
        return zarr_group._build_node(store=store, path=path, metadata=metadata)
    config = _array_config()
    kept = parsed.array
    if kept is None or kept.config is not config or kept.store_path.store is not store:
        # Built on a copy of its own, never handed out: opens may change theirs.
        kept = parsed.array = AsyncArray(
            parsed.fresh_metadata(), store_path=StorePath(store, path), config=config
        )
    opened = copy.copy(kept)
    object.__setattr__(opened, "metadata", metadata)
    return opened


class _ParsedNode:
    """A ManifestStore node's parsed metadata, and the array first opened from it."""

    __slots__ = ("array", "metadata")

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self.array: AsyncArray[Any] | None = None

    def fresh_metadata(self) -> Any:
        """A copy of the parsed metadata with attributes of its own."""
        attributes = json_copy(self.metadata.attributes)
        if isinstance(self.metadata, ArrayV3Metadata):
            return copy_with_attributes(self.metadata, attributes)
        fresh = copy.copy(self.metadata)
        object.__setattr__(fresh, "attributes", attributes)
        return fresh


async def _parsed_node(store: Any, path: str) -> _ParsedNode | None:
    """The kept parse of the node at ``path``, parsed now if it is the first open; None
    for any other store or pipeline, or a path with no node."""
    if not (isinstance(store, ManifestStore) and _reads_with_manifest_pipeline()):
        return None
    group = upstream.store_group(store)
    node = None if group is None else metadata_node(group, _join_paths([path, "zarr.json"]))
    if node is None:
        return None
    parsed = _parsed.get(node.metadata, dict)
    found = parsed.get(path)
    if found is None:
        found = parsed[path] = _ParsedNode(await zarr_originals.read_metadata_v3(store, path))
    return found


#: The names of zarr's runtime array configuration, each read from ``zarr.config``.
_ARRAY_CONFIG_NAMES = tuple(f.name for f in dataclasses.fields(ArrayConfig))
#: zarr's array configuration, by the configuration values it was parsed from: parsing
#: it costs more than the rest of an open whose metadata is kept. Emptied when 16 are
#: kept (a process uses one or two).
_array_configs: dict[tuple[Any, ...], ArrayConfig] = {}


def _array_config() -> ArrayConfig:
    """The ``ArrayConfig`` zarr derives from ``zarr.config`` for an array opened without
    one, the same object while those values stay the same (parsing it anew costs more
    than reading the values)."""
    # One lookup of the section: a ``zarr.config.get`` per name costs one each open.
    section = zarr.config.get("array", None)
    if isinstance(section, dict):
        values = tuple(section.get(name) for name in _ARRAY_CONFIG_NAMES)
    else:
        values = tuple(zarr.config.get(f"array.{name}") for name in _ARRAY_CONFIG_NAMES)
    try:
        found = _array_configs.get(values)
    except TypeError:  # a value that does not hash
        return ArrayConfig.from_dict({})
    if found is None:
        if len(_array_configs) >= 16:
            _array_configs.clear()
        found = _array_configs[values] = ArrayConfig.from_dict({})
    return found


#: The parsed metadata of each ManifestStore node (by path), kept with the node's own
#: metadata object while it lives (hashing one costs a conversion to a dict).
_parsed: ObjectCache[dict[str, _ParsedNode]] = ObjectCache()


def _reads_with_manifest_pipeline() -> bool:
    return zarr.config.get("codec_pipeline.path", None) == PIPELINE_PATH


__all__ = ["get_node_v3", "group_getitem", "open_group", "read_metadata_v3"]
