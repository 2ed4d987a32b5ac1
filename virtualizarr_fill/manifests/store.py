"""``FileManifestStore``: the ManifestStore virtualizarr-fill's parsers return.

It is VirtualiZarr's ``ManifestStore`` for one parsed file, with

* a one-line ``str`` naming the file: zarr formats ``str(store)`` into every group and
  array it opens, and VirtualiZarr's renders every array and manifest of the store
  (opening one array of a file with a thousand datasets cost as much as opening all);
* each node's ``zarr.json`` encoded once per (immutable) metadata object rather than at
  every request, and ``None`` for the ``zarr.json`` of a path that names no node
  (VirtualiZarr's serves the deepest existing ancestor's, so ``group["typo"]`` opened
  the root group);
* members looked up in each group's own mapping (``ManifestGroup.arrays`` builds a dict
  of every member at each access);
* zarr's synchronous store surface (``get_sync``; the write methods raise as the
  asynchronous ones do), which zarr's ``FusedCodecPipeline`` needs before it reads a
  batch of chunks in a thread pool instead of one coroutine per chunk;
* a failed chunk read (obstore's errors, and its panics, which are not exceptions)
  raised as a :class:`~virtualizarr_fill.errors.StoreReadError` naming the file and the
  chunk;
* ``to_virtual_dataset`` whose oversized-chunk warning reads chunk edges from zarr's
  chunk grid (VirtualiZarr's raises for rectilinear grids).
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import obstore
from virtualizarr.manifests import ManifestArray, ManifestGroup
from virtualizarr.manifests.store import ManifestStore
from virtualizarr.manifests.utils import parse_manifest_index
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from virtualizarr_fill.io.files import store_read_error
from virtualizarr_fill.io.registries import resolve
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, codec_edges

if TYPE_CHECKING:
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry

_V2_METADATA_KEYS = (".zattrs", ".zgroup", ".zarray", ".zmetadata")

_metadata_json: dict[int, Buffer] = {}


def zarr_json(metadata: Any) -> Buffer:
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
    """``group``'s array or subgroup ``name``, or None (looked up in the group's own
    mapping, without building a dict of every member)."""
    return group.get(name) if name and "/" not in name else None


def deepest_node(group: ManifestGroup, key: str) -> tuple[Any, str]:
    """The deepest group or array ``key`` leads to, and the rest of ``key`` (as
    VirtualiZarr's ``ManifestStore.get`` walks it)."""
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


def byte_span(request: ByteRequest | None, start: int, end: int) -> tuple[int, int]:
    """The file bytes ``[start, end)`` of a chunk narrowed by zarr's byte request."""
    if request is None:
        return start, end
    if isinstance(request, RangeByteRequest):
        if request.end > end - start:
            raise ValueError(f"Chunk ends before byte {end} but request end was {request.end}")
        return start + request.start, start + request.end
    if isinstance(request, OffsetByteRequest):
        return start + request.offset, end
    if isinstance(request, SuffixByteRequest):
        return end - request.suffix, end
    raise ValueError(f"Unexpected byte_range, got {request}")


class FileManifestStore(ManifestStore):
    """VirtualiZarr's ``ManifestStore`` for one parsed file (see the module docstring).

    Parameters
    ----------
    group
        The file's root group.
    registry
        Resolves the file's URL (and those of files it references) to object stores.
    url
        The parsed file's URL, named by ``str(store)``.
    """

    def __init__(self, group: ManifestGroup, *, registry: ObjectStoreRegistry, url: str) -> None:
        super().__init__(group, registry=registry)
        self.url = url

    def __str__(self) -> str:
        return f"ManifestStore({self.url!r})"

    def __repr__(self) -> str:
        return str(self)

    # ----------------------------------------------------------------- reads

    async def get(
        self,
        key: str,
        prototype: BufferPrototype,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """See ``ManifestStore.get``."""
        if key.endswith("zarr.json"):
            found = metadata_node(self._group, key)
            return None if found is None else zarr_json(found.metadata)
        try:
            return await super().get(key, prototype, byte_range)
        except BaseException as error:
            raise self._read_error(error, key) from error

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """Blocking twin of :meth:`get`."""
        prototype = prototype or default_buffer_prototype()
        if key.endswith("zarr.json"):
            found = metadata_node(self._group, key)
            return None if found is None else zarr_json(found.metadata)
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
            start, end = byte_span(byte_range, 0, len(inlined))
            return prototype.buffer.from_bytes(inlined[start:end])
        entry = manifest.get_entry(index)
        if entry is None:
            return None
        store, path = resolve(self._registry, entry["path"])
        offset = int(entry["offset"])
        start, end = byte_span(byte_range, offset, offset + int(entry["length"]))
        try:
            data = obstore.get_range(store, path, start=start, end=end)
        except BaseException as error:
            failure = store_read_error(error, entry["path"], start, end - start)
            if failure is None:
                raise
            raise failure from error
        return prototype.buffer.from_bytes(data)  # type: ignore[arg-type]

    def _read_error(self, error: BaseException, key: str) -> BaseException:
        """A failure reading chunk ``key`` as a :class:`StoreReadError` naming the file
        and the chunk (obstore's errors and panics), or ``error`` itself when it is the
        interpreter's (``KeyboardInterrupt``...) or already names what failed."""
        from virtualizarr_fill.errors import VirtualizarrFillError

        if isinstance(error, VirtualizarrFillError):
            return error
        node, _ = deepest_node(self._group, key)
        entry = None
        with contextlib.suppress(Exception):
            separator: Literal[".", "/"] = getattr(
                node.metadata.chunk_key_encoding, "separator", "."
            )
            entry = node.manifest.get_entry(
                parse_manifest_index(key, separator, expand_pattern=True)
            )
        if entry is None:
            return error
        offset, length = int(entry["offset"]), int(entry["length"])
        failure = store_read_error(error, f"{entry['path']} (chunk {key})", offset, length)
        return error if failure is None else failure

    def set_sync(self, *args: Any, **kwargs: Any) -> None:
        """The store is read-only."""
        raise NotImplementedError("ManifestStore is read-only")

    def delete_sync(self, *args: Any, **kwargs: Any) -> None:
        """The store is read-only."""
        raise NotImplementedError("ManifestStore is read-only")

    # ----------------------------------------------------------------- xarray

    def to_virtual_dataset(
        self,
        group: str = "",
        loadable_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
    ) -> xr.Dataset:
        """A virtual ``xarray.Dataset`` of one group of the file.

        As ``ManifestStore.to_virtual_dataset``: variables wrap
        :class:`~virtualizarr_fill.manifests.FillManifestArray` objects, except
        ``loadable_variables`` (by default the dimension coordinates), which are read.
        The dataset is built from the parsed metadata (:mod:`.dataset`), without
        opening the store with zarr.
        """
        from virtualizarr.xarray import construct_virtual_dataset

        from virtualizarr_fill.manifests import dataset

        if loadable_variables and self._registry.map is None:
            raise ValueError(
                f"ManifestStore contains an empty store registry, but {loadable_variables} "
                "were provided as loadable variables. Must provide an ObjectStore instance "
                "in order to load variables."
            )
        if not group and dataset.can_build(self._group):
            vds = dataset.virtual_dataset(
                self,
                self._group,
                loadable_variables=loadable_variables,
                decode_times=decode_times,
            )
        else:
            vds = construct_virtual_dataset(
                manifest_store=self,
                group=group,
                loadable_variables=loadable_variables,
                decode_times=decode_times,
            )
        warn_about_oversized_chunks(vds)
        from virtualizarr_fill.manifests.array import FillManifestArray

        for name, variable in vds.variables.items():
            # each virtual variable's array was built for it: named, for the refusals
            # of a concatenation (xarray hands np.concatenate arrays, not names)
            if isinstance(variable.data, FillManifestArray):
                variable.data.named(str(name))
        return vds


def warn_about_oversized_chunks(vds: xr.Dataset) -> None:
    """VirtualiZarr's warning about chunks longer than their array, on any chunk grid."""
    oversized = []
    for name, var in vds.variables.items():
        data = var.data
        if isinstance(data, ManifestArray):
            dims = chunk_grid(data.metadata).dimensions
            if any(d.nchunks and max(codec_edges(d)) > d.extent for d in dims):
                oversized.append(name)
    if oversized:
        warnings.warn(
            f"Variable(s) {oversized} have a chunk shape larger than their array shape, which "
            "typically happens for variables along an unlimited dimension. They read and write "
            "as virtual references correctly, but cannot be concatenated along that axis "
            "without loading them. Pass them to loadable_variables to load them as in-memory "
            "arrays if you need to concatenate them.",
            UserWarning,
            stacklevel=3,
        )


__all__ = [
    "FileManifestStore",
    "byte_span",
    "deepest_node",
    "metadata_node",
    "warn_about_oversized_chunks",
    "zarr_json",
]
