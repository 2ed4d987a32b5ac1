"""Zarr v3 array metadata validated once per distinct input and copied afterwards.

Validating an ``ArrayV3Metadata`` (parsing the data type, fill value and chunk grid,
evolving and validating every codec against the array) costs more than reading a small
file's header. The files of one archive share their data types, codecs, fill values and
grids, so :func:`array_metadata` validates each distinct combination once (the
template) and copies the validated metadata for later files
(:mod:`.metadata_copies`), changing only what validation never looks at: the
attributes. The cache key holds every other constructor argument in the exact form of
:mod:`.json_values`, so a copy is indistinguishable from a fresh build; arguments
without such a form (record data types, objects) are built afresh.
Both parsers build their arrays' metadata here.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.zarr_model.json_values import Uncacheable, exact_key
from virtualizarr_fill.zarr_model.metadata_copies import copy_with_attributes

CHUNK_KEY_ENCODING: dict[str, Any] = {"name": "default", "configuration": {"separator": "/"}}
#: Distinct metadata kept validated (each a few kilobytes).
TEMPLATE_CACHE_SIZE = 256


def _codec_key(codec: Any) -> Hashable:
    # The serialized form is what a reader rebuilds the codec from; the class guards
    # against two implementations sharing a name.
    if type(codec) is dict:
        return exact_key(codec)
    known = _codec_keys.get(id(codec))
    if known is not None and known[0] is codec:
        return known[1]
    key = (type(codec), exact_key(codec.to_dict()))
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
        raise Uncacheable
    return dtype.str


_DEFAULT_STRING_DTYPE = np.dtypes.StringDType()


def _grid_key(chunk_grid: Any) -> Hashable:
    return exact_key(chunk_grid) if type(chunk_grid) is dict else chunk_grid


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
    (see the module docstring). ``data_type`` is zarr's data type of ``dtype``
    (:func:`.data_types.zarr_data_type`)."""
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
            exact_key(fill_value),
            tuple(_codec_key(codec) for codec in codecs),
            tuple(dimension_names),
            _encoding_key(chunk_key_encoding),
        )
        recipe = _Recipe(key, arguments)
    except (Uncacheable, TypeError):
        return ArrayV3Metadata(**arguments, attributes=attributes, storage_transformers=None)
    return copy_with_attributes(_validated(recipe), attributes)


_DEFAULT_ENCODING = copy.deepcopy(CHUNK_KEY_ENCODING)
_DEFAULT_ENCODING_KEY = exact_key(_DEFAULT_ENCODING)


def _encoding_key(chunk_key_encoding: Any) -> Hashable:
    # The default's key is known; ``==`` against a snapshot of its strings tells whether
    # the module-level dict still holds them.
    if chunk_key_encoding is CHUNK_KEY_ENCODING and chunk_key_encoding == _DEFAULT_ENCODING:
        return _DEFAULT_ENCODING_KEY
    return exact_key(chunk_key_encoding)


def clear_cache() -> None:
    """Forget every validated metadata (for tests and memory-bound processes)."""
    _validated.cache_clear()
    _codec_keys.clear()


__all__ = ["CHUNK_KEY_ENCODING", "TEMPLATE_CACHE_SIZE", "array_metadata", "clear_cache"]
