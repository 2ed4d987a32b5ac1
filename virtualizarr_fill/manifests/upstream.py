"""The VirtualiZarr internals virtualizarr-fill relies on, found by feature detection.

VirtualiZarr has public types (``ManifestArray``, ``ChunkManifest``, ``ManifestStore``)
but no public functions to merge, subset or broadcast chunk manifests, and no public
accessor for a manifest's path array. The subclasses in :mod:`virtualizarr_fill.manifests`
use the private ones listed here, each looked up once and checked for presence rather
than for a version number: a VirtualiZarr release that keeps them works, one that drops
or renames one fails with an error naming what is missing, at the first operation that
needs it (never at import).

:func:`warn_if_untested` warns once per process when the installed zarr or VirtualiZarr
is newer than the newest release these adaptations were tested with.

:func:`supports_rectilinear` tells whether VirtualiZarr's own ``ManifestArray`` accepts
rectilinear chunk grids (its PR #954); once it does, the writers hand such arrays to
VirtualiZarr's writers instead of to this package's own.

The fast read path (:mod:`virtualizarr_fill.reads`) reads a manifest's reference arrays and
a store's group and registry, which VirtualiZarr keeps in private attributes, through
:func:`manifest_entries`, :func:`store_group` and :func:`store_registry`; each answers
None where the installed VirtualiZarr holds them otherwise, and the read is then left to
zarr.
"""

from __future__ import annotations

import functools
import importlib
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from packaging.version import Version
from virtualizarr.manifests.indexing import SubChunkIndexingError
from virtualizarr.manifests.manifest import ChunkManifest

from virtualizarr_fill.errors import MissingUpstreamFeatureError as MissingUpstreamFeatureError
from virtualizarr_fill.errors import UntestedVersionWarning

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry
    from virtualizarr.manifests import ManifestGroup

#: Newest releases the adaptations were tested with (CI runs them and the oldest
#: supported ones; ``pyproject.toml`` states the lower bounds).
NEWEST_TESTED = {"virtualizarr": Version("2.8.0"), "zarr": Version("3.4.2")}


def _private(module: str, name: str, purpose: str) -> Callable[..., Any]:
    """``module.name`` when it exists, else a function raising a clear error when called."""
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        found = None
    if callable(found):
        return found  # type: ignore[no-any-return]

    def missing(*args: Any, **kwargs: Any) -> Any:
        import virtualizarr

        raise MissingUpstreamFeatureError(
            f"virtualizarr {virtualizarr.__version__} has no {module}.{name}, which "
            f"virtualizarr-fill uses {purpose}; install a virtualizarr release that has it "
            f"(tested up to {NEWEST_TESTED['virtualizarr']})"
        )

    return missing


concat_manifests = _private(
    "virtualizarr.manifests.array_api", "_concat_manifests", "to concatenate chunk manifests"
)
stack_manifests = _private(
    "virtualizarr.manifests.array_api", "_stack_manifests", "to stack chunk manifests"
)
broadcast_manifest = _private(
    "virtualizarr.manifests.array_api", "_broadcast_manifest", "to broadcast chunk manifests"
)
subset_manifest = _private(
    "virtualizarr.manifests.indexing", "_subset_manifest", "to select chunks of a manifest"
)
_sanitize_indexer = _private(
    "virtualizarr.manifests.indexing",
    "check_and_sanitize_indexer_type",
    "to index manifest arrays",
)
_expand_ellipsis = _private(
    "virtualizarr.manifests.indexing",
    "check_shape_and_maybe_replace_ellipsis",
    "to index manifest arrays",
)
index_regular = _private(
    "virtualizarr.manifests.indexing", "index", "to index manifest arrays on regular grids"
)


@functools.cache
def icechunk_writer(name: str) -> Callable[..., Any]:
    """A function of VirtualiZarr's Icechunk writer module (public or private)."""
    return _private("virtualizarr.writers.icechunk", name, "to write to Icechunk")


@functools.cache
def kerchunk_writer(name: str) -> Callable[..., Any]:
    """A function of VirtualiZarr's kerchunk writer module."""
    return _private("virtualizarr.writers.kerchunk", name, "to write kerchunk references")


def normalize_indexer(key: Any, ndim: int) -> Any:
    """``key`` as VirtualiZarr's indexing normalizes it: one entry per axis, ``...``
    expanded, ``None`` entries kept."""
    return _expand_ellipsis(_sanitize_indexer(key), ndim)


def handled_functions() -> dict[Any, Callable[..., Any]]:
    """VirtualiZarr's array-function table (read, never modified)."""
    from virtualizarr.manifests import array_api

    return dict(getattr(array_api, "MANIFESTARRAY_HANDLED_ARRAY_FUNCTIONS", {}))


def manifest_paths(manifest: ChunkManifest) -> np.ndarray:
    """The manifest's array of chunk paths (``""`` for a missing chunk), in grid shape."""
    paths = getattr(manifest, "_paths", None)
    if isinstance(paths, np.ndarray):
        return paths
    # Without the private array: rebuild it from the public entries.
    result = np.full(manifest.shape_chunk_grid, "", dtype=np.dtypes.StringDType())
    for indices, entry in manifest.iter_refs():
        result[indices] = entry["path"]
    return result


class ManifestEntries(NamedTuple):
    """A chunk manifest's references as VirtualiZarr holds them (not copies): the path,
    offset and length of every chunk in arrays of the chunk grid's shape (path ``""``:
    no chunk), and the bytes of inlined chunks by grid index."""

    paths: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    inlined: dict[tuple[int, ...], bytes]


def manifest_entries(manifest: ChunkManifest) -> ManifestEntries | None:
    """``manifest``'s reference arrays (its private ``_paths``, ``_offsets``,
    ``_lengths`` and ``_inlined``), or None for a VirtualiZarr that holds them otherwise."""
    try:
        return ManifestEntries(
            manifest._paths, manifest._offsets, manifest._lengths, manifest._inlined
        )
    except AttributeError:
        return None


def store_group(store: Any) -> ManifestGroup | None:
    """The root group of a ``ManifestStore`` (its private ``_group``), or None."""
    return getattr(store, "_group", None)


def store_registry(store: Any) -> ObjectStoreRegistry | None:
    """The object-store registry of a ``ManifestStore`` (its private ``_registry``), or
    None."""
    return getattr(store, "_registry", None)


@functools.cache
def store_walk_known() -> bool:
    """Whether VirtualiZarr's ``ManifestStore`` finds the node of a key by the walk
    :func:`virtualizarr_fill.manifests.store.deepest_node` repeats (its private
    ``_get_deepest_group_or_array``): the fast read path locates chunks that way."""
    from virtualizarr.manifests import store

    return hasattr(store, "_get_deepest_group_or_array")


_warned = False
_warn_lock = threading.Lock()


def warn_if_untested() -> None:
    """Warn once per process if zarr or VirtualiZarr is newer than the newest release
    the adaptations were tested with (they may still work: nothing is refused)."""
    global _warned
    if _warned:
        return
    with _warn_lock:
        if _warned:
            return
        _warned = True
        import virtualizarr
        import zarr

        for name, found in (("virtualizarr", virtualizarr.__version__), ("zarr", zarr.__version__)):
            version = Version(Version(found).base_version)
            newest = NEWEST_TESTED[name]
            if (version.major, version.minor) > (newest.major, newest.minor):
                warnings.warn(
                    f"virtualizarr-fill was tested with {name} up to {newest}; found {found}. "
                    "It adapts a few of its internals (virtualizarr_fill.manifests.upstream): "
                    "if something fails, please report it with this version.",
                    UntestedVersionWarning,
                    stacklevel=3,
                )


@functools.cache
def supports_rectilinear() -> bool:
    """Whether VirtualiZarr's own ``ManifestArray`` accepts a rectilinear chunk grid."""
    from virtualizarr.manifests import ManifestArray
    from zarr.codecs import BytesCodec
    from zarr.core.dtype import UInt8
    from zarr.core.metadata.v3 import ArrayV3Metadata, RectilinearChunkGridMetadata

    metadata = ArrayV3Metadata(
        shape=(3,),
        data_type=UInt8(),
        chunk_grid=RectilinearChunkGridMetadata(chunk_shapes=((1, 2),)),
        chunk_key_encoding={"name": "default"},
        fill_value=0,
        codecs=(BytesCodec(),),
        attributes={},
        dimension_names=None,
    )
    try:
        ManifestArray(metadata=metadata, chunkmanifest=ChunkManifest(entries={}, shape=(2,)))
    except (NotImplementedError, TypeError, ValueError):
        return False
    return True


__all__ = [
    "NEWEST_TESTED",
    "ManifestEntries",
    "MissingUpstreamFeatureError",
    "SubChunkIndexingError",
    "broadcast_manifest",
    "concat_manifests",
    "handled_functions",
    "icechunk_writer",
    "kerchunk_writer",
    "index_regular",
    "manifest_entries",
    "manifest_paths",
    "normalize_indexer",
    "stack_manifests",
    "store_group",
    "store_registry",
    "store_walk_known",
    "subset_manifest",
    "supports_rectilinear",
    "warn_if_untested",
]
