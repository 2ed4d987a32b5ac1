"""Zarr array metadata and manifests of the parser's arrays, built once per distinct input.

Validating a Zarr v3 ``ArrayV3Metadata`` (parsing the data type, fill value and chunk
grid, evolving and validating every codec against the array) costs more than reading a
small TIFF header. Files of one archive share their data type, codecs, fill value and
grid, so :func:`array_metadata` validates each distinct combination once and copies the
validated metadata for later files, changing only what validation never looks at: the
attributes. The cache key holds every other constructor argument, in a form that tells
apart values that compare equal but serialize differently (``0.0`` and ``-0.0``,
``1`` and ``True``, NaN payloads), so a copy is indistinguishable from a fresh build.

Inlined arrays (coordinates, ``spatial_ref``) are one chunk held in the manifest:
:func:`inlined_array` builds their one-entry manifest from small arrays directly, and
arrays holding the same bytes share it (a ChunkManifest is immutable).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Hashable, Sequence
from typing import Any, cast

import numpy as np
from virtualizarr.manifests import ChunkManifest, ManifestArray
from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH
from zarr.codecs import BytesCodec
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata
from zarr.dtype import parse_data_type

from virtualizarr_fill._vz_adapter import install as install_vz_adapter

CHUNK_KEY_ENCODING = {"name": "default", "configuration": {"separator": "/"}}
#: Distinct metadata kept validated (each a few kilobytes).
TEMPLATE_CACHE_SIZE = 256

_STRING_DTYPE = np.dtypes.StringDType()


@functools.lru_cache(maxsize=64)
def zarr_data_type(dtype: np.dtype) -> Any:
    """Zarr's data-type object for a NumPy dtype (zarr's own lookup is slow; cached)."""
    return parse_data_type(dtype, zarr_format=3)


def manifest_array(array_metadata: ArrayV3Metadata, manifest: ChunkManifest) -> ManifestArray:
    """A ManifestArray for regular and rectilinear chunk grids (the latter via the adapter)."""
    if not isinstance(array_metadata.chunk_grid, RegularChunkGridMetadata):
        install_vz_adapter()
    return ManifestArray(metadata=array_metadata, chunkmanifest=manifest)


# -- validated metadata, copied ---------------------------------------------------------


class _Uncacheable(Exception):
    """A constructor argument has no exact hashable form: build the metadata afresh."""


_PLAIN_TYPES = frozenset({str, bytes, int, bool, type(None)})


def _exact(value: Any) -> Hashable:
    """A hashable form of ``value`` equal only for values that serialize identically."""
    kind = type(value)
    if kind in _PLAIN_TYPES:  # exact types: ``1`` and ``True`` stay apart
        return (kind, value)
    if kind is dict:
        return (dict, tuple((_exact(k), _exact(v)) for k, v in value.items()))
    if kind is list or kind is tuple:
        return (kind, tuple(_exact(v) for v in value))
    if isinstance(value, np.generic | np.ndarray):
        if value.dtype.hasobject:
            raise _Uncacheable
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float | complex):
        # repr tells -0.0 from 0.0, the bytes NaN payloads apart.
        return (kind, repr(value), np.asarray(value).tobytes())
    raise _Uncacheable


def _codec_key(codec: Any) -> Hashable:
    # The serialized form is what a reader rebuilds the codec from; the class guards
    # against two implementations sharing a name.
    return (type(codec), _exact(codec.to_dict()))


class _Recipe:
    """Constructor arguments of one ArrayV3Metadata, hashed and compared by their key."""

    __slots__ = ("arguments", "key")

    def __init__(self, key: Hashable, arguments: dict[str, Any]) -> None:
        self.key = key
        self.arguments = arguments

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Recipe) and self.key == other.key


@functools.lru_cache(maxsize=TEMPLATE_CACHE_SIZE)
def _validated(recipe: _Recipe) -> ArrayV3Metadata:
    return ArrayV3Metadata(**recipe.arguments, attributes={}, storage_transformers=None)


def _state_is_its_fields() -> bool:
    """Is an ArrayV3Metadata's whole state its dataclass fields (no cached or derived
    attributes that a field-by-field copy would carry over stale)? True for zarr
    3.4-3.5; checked at import so that a zarr that changes it gets validated copies."""
    probe = ArrayV3Metadata(
        shape=(1,),
        data_type=zarr_data_type(np.dtype("uint8")),
        chunk_grid=RegularChunkGridMetadata(chunk_shape=(1,)),
        chunk_key_encoding=CHUNK_KEY_ENCODING,  # type: ignore[arg-type]
        fill_value=0,
        codecs=[BytesCodec()],
        attributes={},
        dimension_names=None,
        storage_transformers=None,
    )
    probe.ndim, probe.chunks  # noqa: B018  (properties that could cache state)
    fields = {field.name for field in dataclasses.fields(ArrayV3Metadata)}
    return set(vars(probe)) <= fields


# Adapts zarr internals: retire if ArrayV3Metadata gains a cheap validated copy.
_COPY_BY_FIELDS = _state_is_its_fields()


def _with_attributes(template: ArrayV3Metadata, attributes: dict[str, Any]) -> ArrayV3Metadata:
    """A copy of ``template`` with its own ``attributes`` (as ``copy.copy`` and
    ``object.__setattr__`` would make it, for a frozen dataclass, in a third of the time)."""
    if not _COPY_BY_FIELDS:
        return dataclasses.replace(template, attributes=dict(attributes))
    metadata: ArrayV3Metadata = object.__new__(ArrayV3Metadata)
    metadata.__dict__.update(template.__dict__)
    object.__setattr__(metadata, "attributes", dict(attributes))
    object.__setattr__(metadata, "extra_fields", dict(template.extra_fields))
    return metadata


def array_metadata(
    *,
    shape: tuple[int, ...],
    dtype: np.dtype,
    chunk_grid: Any,
    fill_value: Any,
    codecs: Sequence[Any],
    attributes: dict[str, Any],
    dimension_names: tuple[str, ...],
) -> ArrayV3Metadata:
    """``ArrayV3Metadata`` of a parser array (default chunk key encoding, no storage
    transformers), validated once per distinct combination of everything but
    ``attributes`` and copied afterwards (see the module docstring)."""
    arguments = {
        "shape": shape,
        "data_type": zarr_data_type(dtype),
        "chunk_grid": chunk_grid,
        "chunk_key_encoding": CHUNK_KEY_ENCODING,
        "fill_value": fill_value,
        "codecs": list(codecs),
        "dimension_names": dimension_names,
    }
    try:
        key = (
            tuple(int(n) for n in shape),
            np.dtype(dtype).str,
            chunk_grid,
            _exact(fill_value),
            tuple(_codec_key(codec) for codec in codecs),
            tuple(dimension_names),
        )
        hash(key)
    except (_Uncacheable, TypeError):
        return ArrayV3Metadata(**arguments, attributes=attributes, storage_transformers=None)
    return _with_attributes(_validated(_Recipe(key, arguments)), attributes)


def clear_caches() -> None:
    """Forget every validated metadata (for tests and memory-bound processes)."""
    _validated.cache_clear()
    _inlined_template.cache_clear()
    _inlined_metadata.cache_clear()
    _shared_manifest.cache_clear()


# -- inlined arrays ------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _inlined_template(dtype: np.dtype, ndim: int) -> ArrayV3Metadata:
    """Validated metadata of a one-chunk little-endian array of shape all ones."""
    shape = (1,) * ndim
    return ArrayV3Metadata(
        shape=shape,
        data_type=zarr_data_type(dtype),
        chunk_grid=RegularChunkGridMetadata(chunk_shape=shape),
        chunk_key_encoding=CHUNK_KEY_ENCODING,  # type: ignore[arg-type]
        fill_value=0,
        codecs=[BytesCodec(endian="little")],
        attributes={},
        dimension_names=("_",) * ndim,
        storage_transformers=None,
    )


@functools.lru_cache(maxsize=TEMPLATE_CACHE_SIZE)
def _inlined_metadata(
    dtype: np.dtype, shape: tuple[int, ...], dims: tuple[str, ...]
) -> ArrayV3Metadata:
    """Metadata of a one-chunk array, from the template of its data type and rank.

    With the ``bytes`` codec alone, validation depends on the data type only: arrays of
    other shapes (every image size has its own x and y) differ from the template in
    shape, chunk shape, dimension names and attributes, none of which it looks at.
    """
    if not _COPY_BY_FIELDS:
        return dataclasses.replace(
            _inlined_template(dtype, len(shape)),
            shape=shape,
            chunk_grid=RegularChunkGridMetadata(chunk_shape=shape),
            dimension_names=dims,
        )
    metadata = _with_attributes(_inlined_template(dtype, len(shape)), {})
    object.__setattr__(metadata, "shape", shape)
    object.__setattr__(metadata, "chunk_grid", RegularChunkGridMetadata(chunk_shape=shape))
    object.__setattr__(metadata, "dimension_names", dims)
    return metadata


#: Inlined chunks up to this size share one manifest between arrays holding the same bytes.
SHARED_MANIFEST_BYTES = 64 * 1024


def _one_entry_manifest(data: bytes, ndim: int) -> ChunkManifest:
    """The manifest of one inlined chunk (grid shape all ones)."""
    grid = (1,) * ndim
    paths = np.array(INLINED_CHUNK_PATH, dtype=_STRING_DTYPE).reshape(grid)
    return ChunkManifest.from_arrays(
        paths=cast("np.ndarray[Any, np.dtypes.StringDType]", paths),
        offsets=np.zeros(grid, dtype=np.uint64),
        lengths=np.full(grid, len(data), dtype=np.uint64),
        validate_paths=False,
        inlined={(0,) * ndim: data},
    )


# ChunkManifest is immutable, so arrays with the same inlined bytes (the band numbers of
# every single-band file, every ``spatial_ref``, the x/y of tiles on one grid) can share it.
_shared_manifest = functools.lru_cache(maxsize=TEMPLATE_CACHE_SIZE)(_one_entry_manifest)


def inlined_array(
    values: np.ndarray, dims: tuple[str, ...], *, attributes: dict[str, Any] | None = None
) -> ManifestArray:
    """A one-chunk array whose bytes live in the manifest (loads without file access)."""
    values = np.asarray(values)
    little = values.dtype.newbyteorder("<")
    data = np.ascontiguousarray(values, dtype=little).tobytes()
    metadata = _inlined_metadata(values.dtype.newbyteorder("="), values.shape, tuple(dims))
    return ManifestArray(
        metadata=_with_attributes(metadata, attributes or {}),
        chunkmanifest=(
            _shared_manifest(data, values.ndim)
            if len(data) <= SHARED_MANIFEST_BYTES
            else _one_entry_manifest(data, values.ndim)
        ),
    )


__all__ = [
    "CHUNK_KEY_ENCODING",
    "SHARED_MANIFEST_BYTES",
    "TEMPLATE_CACHE_SIZE",
    "array_metadata",
    "clear_caches",
    "inlined_array",
    "manifest_array",
    "zarr_data_type",
]
