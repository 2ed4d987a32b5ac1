"""The one door to the internals of zarr, VirtualiZarr, xarray and Icechunk.

Every private name, private field and constructor bypass of those packages that
virtualizarr-fill relies on is here, and only here (h5py's and libhdf5's are in
:mod:`virtualizarr_fill.hdf5._libhdf5`); ``tests/project/test_upstream_door.py`` keeps it so.
Public names are used wherever they exist.

Each internal is checked for presence once (not by version number): a release that keeps
it works, one that drops or renames it either takes the public route (the constructor
instead of a bypass, the public entries instead of the reference arrays) or fails with
:class:`~virtualizarr_fill.errors.UpstreamFeatureError` naming the package, its installed
version and the missing feature, at the first operation that needs it (never at import).

What passes through and why: ``docs/architecture.md`` ("Living alongside VirtualiZarr
and zarr"). The bypasses of validating constructors exist for speed (thousands of arrays
per archive) and are used only while the class holds nothing but the state they set.

:mod:`virtualizarr_fill.upstream_checks` holds the presence checks, the error and the
record of the releases tested, which touch no internal themselves.
:func:`supports_rectilinear` tells whether VirtualiZarr's own ``ManifestArray`` accepts
rectilinear chunk grids (its PR #954); once it does, the writers hand such arrays to
VirtualiZarr's writers instead of to this package's own.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
from virtualizarr.manifests.indexing import SubChunkIndexingError as SubChunkIndexingError
from virtualizarr.manifests.manifest import ChunkManifest

from virtualizarr_fill.upstream_checks import NEWEST_TESTED as NEWEST_TESTED
from virtualizarr_fill.upstream_checks import _checked as _checked
from virtualizarr_fill.upstream_checks import clear_feature_checks as clear_feature_checks
from virtualizarr_fill.upstream_checks import has_feature as has_feature
from virtualizarr_fill.upstream_checks import missing_feature as missing_feature
from virtualizarr_fill.upstream_checks import warn_if_untested as warn_if_untested

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry
    from virtualizarr.manifests import ManifestArray, ManifestGroup
    from zarr.core.group import GroupMetadata
    from zarr.core.metadata.v3 import ArrayV3Metadata


def _private(module: str, name: str, purpose: str) -> Callable[..., Any]:
    """``module.name`` when it exists, else a function raising a clear error when called."""
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        found = None
    if callable(found):
        return found  # type: ignore[no-any-return]

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise missing_feature(module.partition(".")[0], f"{module}.{name}", purpose)

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


def icechunk_encoding_keys() -> frozenset[str]:
    """The keys of a variable's encoding that VirtualiZarr's Icechunk writer stores as
    array attributes (the CF encoding xarray decodes)."""
    import virtualizarr.writers.icechunk as writer

    keys = getattr(writer, "ENCODING_KEYS", None)
    if keys is None:  # the constant moved or was renamed: VirtualiZarr 2.8's keys
        keys = ("_FillValue", "missing_value", "scale_factor", "add_offset")
    return frozenset(keys)


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


# -- VirtualiZarr's chunk manifests ---------------------------------------------------------

_STRINGS = np.dtypes.StringDType()
_UINT64 = np.dtype(np.uint64)
_MANIFEST_FIELDS = {"_paths", "_offsets", "_lengths", "_inlined"}


def _manifest_state_is_arrays() -> bool:
    """Is a ChunkManifest's whole state its paths, offsets, lengths and inlined chunks?"""
    probe = ChunkManifest.from_arrays(
        paths=cast(Any, np.array(["/a"], dtype=_STRINGS)),
        offsets=np.zeros(1, dtype=np.uint64),
        lengths=np.ones(1, dtype=np.uint64),
        validate_paths=False,
    )
    return set(vars(probe)) == _MANIFEST_FIELDS


class ManifestEntries(NamedTuple):
    """A chunk manifest's references as VirtualiZarr holds them (not copies): the path,
    offset and length of every chunk in arrays of the chunk grid's shape (path ``""``:
    no chunk), and the bytes of inlined chunks by grid index."""

    paths: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    inlined: dict[tuple[int, ...], bytes]


def manifest_entries(manifest: ChunkManifest) -> ManifestEntries:
    """``manifest``'s reference arrays (its private ``_paths``, ``_offsets``,
    ``_lengths`` and ``_inlined``), or, for a VirtualiZarr that holds them otherwise,
    the same rebuilt from its public entries (a copy then)."""
    if has_feature("ChunkManifest state", _manifest_state_is_arrays):
        return ManifestEntries(
            manifest._paths, manifest._offsets, manifest._lengths, manifest._inlined
        )
    shape = manifest.shape_chunk_grid
    paths: np.ndarray = np.full(shape, "", dtype=_STRINGS)
    offsets = np.zeros(shape, dtype=np.uint64)
    lengths = np.zeros(shape, dtype=np.uint64)
    inlined: dict[tuple[int, ...], bytes] = {}
    for key, entry in manifest.dict().items():
        index = () if not shape else tuple(int(i) for i in key.replace("/", ".").split("."))
        paths[index], offsets[index], lengths[index] = (
            entry["path"],
            entry["offset"],
            entry["length"],
        )
        if "data" in entry:
            inlined[index] = entry["data"]
    return ManifestEntries(paths, offsets, lengths, inlined)


def manifest_paths(manifest: ChunkManifest) -> np.ndarray:
    """The manifest's array of chunk paths (``""`` for a missing chunk), in grid shape."""
    return manifest_entries(manifest).paths


def chunk_manifest(
    paths: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, *, no_empty: bool = False
) -> ChunkManifest:
    """``ChunkManifest.from_arrays(..., validate_paths=False)``: built directly when the
    arrays meet what ``from_arrays`` checks (string paths, uint64 offsets and lengths,
    one shape, no zero length; ``no_empty`` when the caller knows no length is zero),
    which the common case shows in a few attribute comparisons; otherwise (or for a
    VirtualiZarr whose manifests hold more) through ``from_arrays``."""
    if (
        paths.dtype == _STRINGS
        and offsets.dtype == _UINT64
        and lengths.dtype == _UINT64
        and paths.shape == offsets.shape == lengths.shape
        and (no_empty or lengths.all())
        and has_feature("ChunkManifest state", _manifest_state_is_arrays)
    ):
        manifest: ChunkManifest = object.__new__(ChunkManifest)
        manifest._paths = cast(Any, paths)
        manifest._offsets = offsets
        manifest._lengths = lengths
        manifest._inlined = {}
        return manifest
    return ChunkManifest.from_arrays(
        paths=cast(Any, paths), offsets=offsets, lengths=lengths, validate_paths=False
    )


# -- VirtualiZarr's arrays, groups and stores ----------------------------------------------


def _probe_metadata(chunk_grid: Any) -> ArrayV3Metadata:
    """Metadata of a small uint8 array on ``chunk_grid``, for probing upstream behaviour."""
    from zarr.codecs import BytesCodec
    from zarr.core.dtype import UInt8
    from zarr.core.metadata.v3 import ArrayV3Metadata

    return ArrayV3Metadata(
        shape=(3,),
        data_type=UInt8(),
        chunk_grid=chunk_grid,
        chunk_key_encoding={"name": "default"},
        fill_value=0,
        codecs=(BytesCodec(),),
        attributes={},
        dimension_names=None,
    )


def _array_state_is_metadata_and_manifest() -> bool:
    """Is a ManifestArray's whole state its metadata and manifest? (VirtualiZarr 2.x)"""
    from virtualizarr.manifests import ManifestArray
    from zarr.core.metadata.v3 import RegularChunkGridMetadata

    metadata = _probe_metadata(RegularChunkGridMetadata(chunk_shape=(3,)))
    probe = ManifestArray(metadata=metadata, chunkmanifest=ChunkManifest({}, shape=(1,)))
    return set(vars(probe)) == {"_metadata", "_manifest"}


def set_array_state(
    array: ManifestArray, metadata: ArrayV3Metadata, manifest: ChunkManifest
) -> None:
    """Give ``array`` (a ManifestArray subclass being built) its metadata and manifest,
    as ``ManifestArray.__init__`` does once it has checked them (the caller checks them
    for grids VirtualiZarr's constructor refuses)."""
    if not has_feature("ManifestArray state", _array_state_is_metadata_and_manifest):
        raise missing_feature(
            "virtualizarr",
            "ManifestArray state of exactly _metadata and _manifest",
            "to build manifest arrays on rectilinear chunk grids",
        )
    array._metadata = metadata
    array._manifest = manifest


def manifest_array[A: ManifestArray](
    cls: type[A], metadata: ArrayV3Metadata, manifest: ChunkManifest, like: A | None = None
) -> A:
    """A ``cls`` (ManifestArray or a subclass) of ``metadata`` and ``manifest`` that
    already passed ``cls``'s checks together (a copy, a subset of its attributes),
    without running them again, with the further instance attributes of ``like`` (a
    subclass's own). Through the constructor for a VirtualiZarr whose arrays hold more."""
    extra = {} if like is None else vars(like)
    if has_feature("ManifestArray state", _array_state_is_metadata_and_manifest):
        array: A = object.__new__(cls)
        array.__dict__.update(extra)  # (its _metadata and _manifest replaced below)
        array._metadata = metadata
        array._manifest = manifest
        return array
    built = cls(metadata=metadata, chunkmanifest=manifest)
    built.__dict__.update({k: v for k, v in extra.items() if k not in vars(built)})
    return built


def _group_state_is_metadata_and_members() -> bool:
    """Is a ManifestGroup's whole state its GroupMetadata and members? (VirtualiZarr 2.x)"""
    from virtualizarr.manifests import ManifestGroup

    return set(vars(ManifestGroup(arrays={}, attributes={"a": 1}))) == {"_metadata", "_members"}


def manifest_group(
    arrays: dict[str, ManifestArray], groups: dict[str, ManifestGroup], metadata: GroupMetadata
) -> ManifestGroup:
    """``ManifestGroup(arrays=..., groups=..., attributes=metadata.attributes)`` holding the
    already validated ``metadata``, when the caller has checked what the constructor
    checks (every array a ManifestArray, no name both an array and a group)."""
    from virtualizarr.manifests import ManifestGroup

    if not has_feature("ManifestGroup state", _group_state_is_metadata_and_members):
        return ManifestGroup(arrays=arrays, groups=groups, attributes=metadata.attributes)
    group: ManifestGroup = object.__new__(ManifestGroup)
    group._metadata = metadata
    group._members = {**arrays, **groups}
    return group


def store_group(store: Any) -> ManifestGroup | None:
    """The root group of a ``ManifestStore`` (its private ``_group``), or None (the fast
    read path then leaves the read to zarr)."""
    return getattr(store, "_group", None)


def store_registry(store: Any) -> ObjectStoreRegistry | None:
    """The object-store registry of a ``ManifestStore`` (its private ``_registry``), or
    None."""
    return getattr(store, "_registry", None)


def group_of(store: Any) -> ManifestGroup:
    """The root group of a ``ManifestStore`` (VirtualiZarr has no public accessor)."""
    if (group := store_group(store)) is None:
        raise missing_feature("virtualizarr", "ManifestStore._group", "to read a store's groups")
    return group


def registry_of(store: Any) -> ObjectStoreRegistry:
    """The object-store registry of a ``ManifestStore`` (no public accessor either)."""
    if (registry := store_registry(store)) is None:
        raise missing_feature("virtualizarr", "ManifestStore._registry", "to resolve its URLs")
    return registry


# -- zarr's metadata, codecs and stores ----------------------------------------------------


_fields: dict[type, tuple[frozenset[str], tuple[str, ...]]] = {}


def replaced[D](template: D, **changes: Any) -> D:
    """``dataclasses.replace(template, **changes)`` for zarr's frozen metadata
    dataclasses (``ArrayV3Metadata``, ``GroupMetadata``) when ``changes`` need no
    validation (attributes, names, or fields of another validated instance): a copy of
    the validated fields (not of values a property may have cached), in a third of the
    time, while an instance holds nothing but its fields; their dictionaries not in
    ``changes`` are copied too."""
    cls = type(template)
    if not has_feature(f"{cls.__qualname__} state", lambda: _holds_only_fields(template)):
        return dataclasses.replace(template, **changes)  # type: ignore[type-var]
    names, dicts = _fields[cls]
    copy: D = object.__new__(cls)
    state = copy.__dict__
    state.update(template.__dict__)
    if len(state) > len(names):
        for name in [name for name in state if name not in names]:
            del state[name]
    for name in dicts:
        if name not in changes and type(state.get(name)) is dict:
            state[name] = dict(state[name])
    state.update(changes)
    return copy


def _holds_only_fields(template: Any) -> bool:
    """Whether ``template`` holds nothing but its dataclass fields; notes the field names
    and those holding a dictionary for :func:`replaced`."""
    cls = type(template)
    names = frozenset(field.name for field in dataclasses.fields(cls))
    state = vars(template)
    _fields[cls] = (names, tuple(name for name in names if type(state.get(name)) is dict))
    return set(state) <= names


def rectilinear_grid_metadata(shapes: tuple[int | tuple[int, ...], ...]) -> Any:
    """zarr's ``RectilinearChunkGridMetadata(chunk_shapes=shapes)`` for edges the caller
    has validated (zarr's constructor would parse each again), or through the
    constructor for a zarr whose grid holds more than its ``chunk_shapes``."""
    from zarr.core.metadata.v3 import RectilinearChunkGridMetadata

    def probe() -> bool:
        grid = RectilinearChunkGridMetadata(chunk_shapes=((1,),))
        return set(vars(grid)) == {"chunk_shapes"}

    if not has_feature("RectilinearChunkGridMetadata state", probe):
        return RectilinearChunkGridMetadata(chunk_shapes=shapes)
    metadata = object.__new__(RectilinearChunkGridMetadata)
    object.__setattr__(metadata, "chunk_shapes", shapes)
    return metadata


def _sync_method(codec: Any, name: str) -> Callable[..., Any]:
    try:
        return getattr(codec, name)  # type: ignore[no-any-return]
    except AttributeError:
        raise missing_feature(
            "zarr", f"{type(codec).__name__}.{name}", "to run codecs outside an event loop"
        ) from None


def decode_sync(codec: Any, data: Any, spec: Any) -> Any:
    """``codec``'s synchronous decode (``_decode_sync`` of zarr's ``SupportsSyncCodec``)."""
    return _sync_method(codec, "_decode_sync")(data, spec)


def encode_sync(codec: Any, data: Any, spec: Any) -> Any:
    """``codec``'s synchronous encode (``_encode_sync`` of zarr's ``SupportsSyncCodec``)."""
    return _sync_method(codec, "_encode_sync")(data, spec)


def defines_sync_decode(cls: type) -> bool:
    """Whether class ``cls`` itself (not a base) defines the synchronous decode."""
    return "_decode_sync" in cls.__dict__


try:  # zarr's wrappers of numcodecs codecs (private: without them, decoding takes zarr's way)
    from zarr.codecs.numcodecs._codecs import _NumcodecsBytesBytesCodec
except ImportError:
    _NumcodecsBytesBytesCodec = None  # type: ignore[assignment,misc]


def numcodecs_codec(codec: Any) -> Any:
    """The numcodecs codec zarr's wrapper of a bytes->bytes numcodecs codec (checksums,
    compressors) decodes with, or None for other codecs and for subclasses that decode
    their own way. Its decode takes the chunk's bytes as a ``uint8`` array and returns
    bytes-like, as the wrapper's synchronous decode passes and takes them."""
    if _NumcodecsBytesBytesCodec is None or not isinstance(codec, _NumcodecsBytesBytesCodec):
        return None
    if type(codec)._decode_sync is not _NumcodecsBytesBytesCodec._decode_sync:
        return None
    return getattr(codec, "_codec", None)


def wrapped_store(store: Any) -> Any | None:
    """The store a zarr ``WrapperStore`` wraps (its private ``_store``: zarr has no
    public accessor), or None for a store that wraps none."""
    from zarr.storage import WrapperStore

    if not isinstance(store, WrapperStore):
        return None
    try:
        return store._store
    except AttributeError:
        raise missing_feature("zarr", "WrapperStore._store", "to reach a wrapped store") from None


def get_many(store: Any, requests: Any) -> Any:
    """``store._get_many(requests)``: zarr's batched get (an async iterator)."""
    return _sync_method(store, "_get_many")(requests)


# -- xarray --------------------------------------------------------------------------------


def _variable_holds_given_dicts() -> bool:
    """Does an xarray Variable whose ``_attrs`` and ``_encoding`` are set hand those very
    dictionaries out as its ``attrs`` and ``encoding``?"""
    import xarray as xr

    variable, attrs, encoding = xr.Variable(("x",), [0]), {"a": 1}, {"e": 1}
    variable._attrs = attrs
    variable._encoding = encoding
    return variable.attrs is attrs and variable.encoding is encoding


def variable_sharing(dims: Any, data: Any, attrs: dict[str, Any], encoding: dict[str, Any]) -> Any:
    """``xr.Variable(dims, data, attrs, encoding)`` holding ``attrs`` and ``encoding``
    themselves rather than copies (the caller only reads them)."""
    import xarray as xr

    if not has_feature("Variable attrs", _variable_holds_given_dicts):
        return xr.Variable(dims, data, attrs=attrs, encoding=encoding)
    variable = xr.Variable(dims, data)
    variable._attrs = attrs or None
    variable._encoding = encoding or None
    return variable


@functools.cache
def store_walk_known() -> bool:
    """Whether VirtualiZarr's ``ManifestStore`` finds the node of a key by the walk
    :func:`virtualizarr_fill.manifests.store.deepest_node` repeats (its private
    ``_get_deepest_group_or_array``): the manifest pipeline's batch reads
    (:mod:`virtualizarr_fill.reads.batch_reads`) locate chunks that way, and leave every
    read to zarr's own pipeline where it does not."""
    from virtualizarr.manifests import store

    return hasattr(store, "_get_deepest_group_or_array")


@functools.cache
def supports_rectilinear() -> bool:
    """Whether VirtualiZarr's own ``ManifestArray`` accepts a rectilinear chunk grid."""
    from virtualizarr.manifests import ManifestArray
    from zarr.core.metadata.v3 import RectilinearChunkGridMetadata

    metadata = _probe_metadata(RectilinearChunkGridMetadata(chunk_shapes=((1, 2),)))
    try:
        ManifestArray(metadata=metadata, chunkmanifest=ChunkManifest(entries={}, shape=(2,)))
    except (NotImplementedError, TypeError, ValueError):
        return False
    return True

