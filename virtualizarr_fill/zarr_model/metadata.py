"""Zarr v3 array metadata validated once per distinct input and copied afterwards.

Validating an ``ArrayV3Metadata`` (parsing the data type, fill value and chunk grid,
evolving and validating every codec against the array) costs more than reading a small
file's header. The files of one archive share their data types, codecs, fill values and
grids, so :func:`array_metadata` validates each distinct combination once and copies
the validated metadata for later files, changing only what validation never looks at:
the attributes. The cache key holds every other constructor argument, in a form that
tells apart values that compare equal but serialize differently (``0.0`` and ``-0.0``,
``1`` and ``True``, NaN payloads), so a copy is indistinguishable from a fresh build;
arguments without such a form (record data types, objects) are built afresh.
Both parsers build their arrays' metadata here.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import struct
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from zarr.codecs import BytesCodec
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata
from zarr.dtype import parse_data_type

CHUNK_KEY_ENCODING: dict[str, Any] = {"name": "default", "configuration": {"separator": "/"}}
#: Distinct metadata kept validated (each a few kilobytes).
TEMPLATE_CACHE_SIZE = 256


@functools.lru_cache(maxsize=512)
def _cached_data_type(dtype: np.dtype) -> Any:
    return parse_data_type(dtype, zarr_format=3)


def zarr_data_type(dtype: np.dtype) -> Any:
    """Zarr's data-type object for a NumPy dtype. Resolving one walks zarr's whole
    dtype registry, so it is done once per dtype (afresh for the rare unhashable one,
    such as a dtype whose metadata holds unhashable values)."""
    try:
        return _cached_data_type(dtype)
    except TypeError:
        return parse_data_type(dtype, zarr_format=3)


class _Uncacheable(Exception):
    """A constructor argument has no exact hashable form: build the metadata afresh."""


_PLAIN_TYPES = frozenset({str, bytes, int, bool, type(None)})
_NUMPY_VALUES = (np.generic, np.ndarray)


def _exact(value: Any) -> Hashable:
    """A hashable form of ``value`` equal only for values that serialize identically."""
    kind = type(value)
    if kind in _PLAIN_TYPES:  # exact types: ``1`` and ``True`` stay apart
        return (kind, value)
    if kind is dict:
        return (dict, tuple((_exact(k), _exact(v)) for k, v in value.items()))
    if kind is list or kind is tuple:
        if value and all(type(v) is float for v in value):
            # Long lists of floats (GCP tiepoints): their IEEE bytes, in one call.
            return (kind, float, struct.pack(f"<{len(value)}d", *value))
        return (kind, tuple(_exact(v) for v in value))
    if isinstance(value, _NUMPY_VALUES):
        if value.dtype.hasobject:
            raise _Uncacheable
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float | complex):
        # repr tells -0.0 from 0.0, the bytes NaN payloads apart.
        return (kind, repr(value), np.asarray(value).tobytes())
    raise _Uncacheable


#: Raised by :func:`exact_key` for a value without an exact hashable form.
Uncacheable = _Uncacheable


def exact_key(value: Any) -> Hashable:
    """A hashable form of a JSON-like ``value`` (dicts, lists, numbers, strings, NumPy
    scalars and arrays) equal only for values that serialize identically; raises
    :data:`Uncacheable` for anything else."""
    return _exact(value)


def _codec_key(codec: Any) -> Hashable:
    # The serialized form is what a reader rebuilds the codec from; the class guards
    # against two implementations sharing a name.
    if type(codec) is dict:
        return _exact(codec)
    known = _codec_keys.get(id(codec))
    if known is not None and known[0] is codec:
        return known[1]
    key = (type(codec), _exact(codec.to_dict()))
    if len(_codec_keys) >= _CODEC_KEYS_SIZE:
        _codec_keys.clear()
    # The entry holds the codec, so its id cannot pass to another object meanwhile.
    _codec_keys[id(codec)] = (codec, key)
    return key


#: Keys of codec instances seen, by identity: parsers that reuse their (immutable) codec
#: instances, as the TIFF parser does, skip serializing them for every array.
_CODEC_KEYS_SIZE = 1024
_codec_keys: dict[int, tuple[Any, Hashable]] = {}


def _dtype_key(dtype: np.dtype) -> Hashable:
    # ``dtype.str`` names plain types exactly (byte order, size, string length); records,
    # objects, variable-length strings other than NumPy's default StringDType (the one
    # the HDF5 parser materialises them into) and dtypes carrying h5py metadata do not
    # reduce to it, so their metadata is built afresh.
    dtype = np.dtype(dtype)
    if dtype == _DEFAULT_STRING_DTYPE:
        return "StringDType()"
    if dtype.fields is not None or dtype.metadata or dtype.kind not in "biufcSUmM":
        raise _Uncacheable
    return dtype.str


_DEFAULT_STRING_DTYPE = np.dtypes.StringDType()


def _grid_key(chunk_grid: Any) -> Hashable:
    return _exact(chunk_grid) if type(chunk_grid) is dict else chunk_grid


class _Recipe:
    """Constructor arguments of one ArrayV3Metadata, hashed and compared by their key."""

    __slots__ = ("_hash", "arguments", "key")

    def __init__(self, key: Hashable, arguments: dict[str, Any]) -> None:
        self.key = key
        self.arguments = arguments
        self._hash = hash(key)  # raises TypeError for an unhashable key

    def __hash__(self) -> int:
        return self._hash

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
COPY_BY_FIELDS = _state_is_its_fields()


_CONTAINERS = frozenset({dict, list})


def json_copy(value: Any) -> Any:
    """A copy of the dicts and lists in a JSON value (its scalars are immutable), for
    handing out a kept value the caller may change: many times faster than
    ``copy.deepcopy``, and the same for JSON."""
    if type(value) is dict:
        return {k: json_copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) if type(v) in _CONTAINERS else v for v in value]
    return value


def copy_with_attributes(template: ArrayV3Metadata, attributes: dict[str, Any]) -> ArrayV3Metadata:
    """A copy of ``template`` with its own ``attributes`` (as ``copy.copy`` and
    ``object.__setattr__`` would make it, for a frozen dataclass, in a third of the time)."""
    if not COPY_BY_FIELDS:
        return dataclasses.replace(template, attributes=dict(attributes))
    metadata: ArrayV3Metadata = object.__new__(ArrayV3Metadata)
    metadata.__dict__.update(template.__dict__)
    object.__setattr__(metadata, "attributes", dict(attributes))
    object.__setattr__(metadata, "extra_fields", dict(template.extra_fields))
    return metadata


def copy_without_dimension_names(
    template: ArrayV3Metadata, attributes: dict[str, Any]
) -> ArrayV3Metadata:
    """``template`` with ``attributes`` and no dimension names: what VirtualiZarr's
    ``copy_and_replace_metadata`` makes of it through a JSON round trip, without one."""
    if not COPY_BY_FIELDS:
        return dataclasses.replace(template, attributes=dict(attributes), dimension_names=None)
    metadata = copy_with_attributes(template, attributes)
    object.__setattr__(metadata, "dimension_names", None)
    return metadata


def array_metadata(
    *,
    shape: tuple[int, ...],
    data_type: Any,
    dtype: np.dtype,
    chunk_grid: Any,
    fill_value: Any,
    codecs: Sequence[Any],
    attributes: dict[str, Any],
    dimension_names: tuple[str, ...],
    chunk_key_encoding: dict[str, Any] = CHUNK_KEY_ENCODING,
) -> ArrayV3Metadata:
    """``ArrayV3Metadata`` of a parser array (no storage transformers), validated once
    per distinct combination of everything but ``attributes`` and copied afterwards
    (see the module docstring). ``data_type`` is zarr's data type of ``dtype``."""
    arguments = {
        "shape": shape,
        "data_type": data_type,
        "chunk_grid": chunk_grid,
        "chunk_key_encoding": chunk_key_encoding,
        "fill_value": fill_value,
        "codecs": list(codecs),
        "dimension_names": dimension_names,
    }
    try:
        key = (
            tuple(int(n) for n in shape),
            _dtype_key(dtype),
            _grid_key(chunk_grid),
            _exact(fill_value),
            tuple(_codec_key(codec) for codec in codecs),
            tuple(dimension_names),
            _encoding_key(chunk_key_encoding),
        )
        recipe = _Recipe(key, arguments)
    except (_Uncacheable, TypeError):
        return ArrayV3Metadata(**arguments, attributes=attributes, storage_transformers=None)
    return copy_with_attributes(_validated(recipe), attributes)


_DEFAULT_ENCODING = copy.deepcopy(CHUNK_KEY_ENCODING)
_DEFAULT_ENCODING_KEY = _exact(_DEFAULT_ENCODING)


def _encoding_key(chunk_key_encoding: Any) -> Hashable:
    # The default's key is known; ``==`` against a snapshot of its strings tells whether
    # the module-level dict still holds them.
    if chunk_key_encoding is CHUNK_KEY_ENCODING and chunk_key_encoding == _DEFAULT_ENCODING:
        return _DEFAULT_ENCODING_KEY
    return _exact(chunk_key_encoding)


def clear_cache() -> None:
    """Forget every validated metadata (for tests and memory-bound processes)."""
    _validated.cache_clear()
    _codec_keys.clear()


__all__ = [
    "CHUNK_KEY_ENCODING",
    "TEMPLATE_CACHE_SIZE",
    "array_metadata",
    "clear_cache",
    "Uncacheable",
    "copy_with_attributes",
    "exact_key",
    "zarr_data_type",
]
