"""Zarr array metadata and manifests of the TIFF parser's arrays.

Band arrays get metadata validated once per distinct input and copied with each file's
attributes (:mod:`virtualizarr_fill.zarr_model.metadata_templates`). Inlined arrays
(coordinates, ``spatial_ref``) are one chunk held in the manifest: :func:`inlined_array`
builds their one-entry manifest from small arrays directly, and arrays holding the same
bytes share it (a ChunkManifest is immutable).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import numpy as np
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup
from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH
from zarr.codecs import BytesCodec
from zarr.core.group import GroupMetadata
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata

from virtualizarr_fill import upstream
from virtualizarr_fill.manifests import FillManifestArray
from virtualizarr_fill.tiff import caches
from virtualizarr_fill.zarr_model import metadata_copies, metadata_templates
from virtualizarr_fill.zarr_model.data_types import zarr_data_type
from virtualizarr_fill.zarr_model.json_values import json_copy
from virtualizarr_fill.zarr_model.metadata_copies import copy_with_attributes
from virtualizarr_fill.zarr_model.metadata_templates import (
    CHUNK_KEY_ENCODING,
    TEMPLATE_CACHE_SIZE,
)

_STRING_DTYPE = np.dtypes.StringDType()


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
    """Metadata of a band array (default chunk key encoding), validated once per
    distinct input (see :func:`virtualizarr_fill.zarr_model.metadata_templates.array_metadata`)."""
    return metadata_templates.array_metadata(
        shape=shape,
        data_type=zarr_data_type(dtype),
        dtype=dtype,
        chunk_grid=chunk_grid,
        fill_value=fill_value,
        codecs=codecs,
        attributes=attributes,
        dimension_names=dimension_names,
    )


def manifest_array(array_metadata: ArrayV3Metadata, manifest: ChunkManifest) -> ManifestArray:
    """A :class:`~virtualizarr_fill.manifests.FillManifestArray` (any chunk grid)."""
    return FillManifestArray(metadata=array_metadata, chunkmanifest=manifest)


def copied_array(array: ManifestArray) -> ManifestArray:
    """A ManifestArray sharing ``array``'s manifest and validated metadata fields, with
    its own copy of the attributes (so that changing one array's attributes leaves the
    other's alone)."""
    metadata = copy_with_attributes(array.metadata, json_copy(array.metadata.attributes))
    # ``array`` passed ManifestArray's checks with the same manifest, grid and class;
    # only the attributes differ, which the checks never read.
    return upstream.manifest_array(type(array), metadata, array.manifest, like=array)


def segment_manifest(
    paths: np.ndarray[Any, np.dtypes.StringDType],
    offsets: np.ndarray[Any, np.dtype[np.uint64]],
    lengths: np.ndarray[Any, np.dtype[np.uint64]],
    *,
    no_empty: bool = False,
) -> ChunkManifest:
    """``ChunkManifest.from_arrays(..., validate_paths=False)`` for chunk references of
    one file, without its checks where a few attribute comparisons show them passed
    (:func:`virtualizarr_fill.upstream.chunk_manifest`)."""
    return upstream.chunk_manifest(paths, offsets, lengths, no_empty=no_empty)


# -- groups ----------------------------------------------------------------------------------


@functools.cache
def _empty_group_metadata() -> GroupMetadata:
    return GroupMetadata(attributes={})


def manifest_group(
    *,
    arrays: dict[str, ManifestArray] | None = None,
    groups: dict[str, ManifestGroup] | None = None,
    attributes: dict[str, Any],
) -> ManifestGroup:
    """``ManifestGroup(arrays=..., groups=..., attributes=...)`` without validating the
    group metadata afresh for every group.

    The invariants VirtualiZarr's constructor checks are checked here too (every array
    a ManifestArray, no name both an array and a group, attribute names strings); the
    Zarr v3 group metadata is a copy of one validated with no attributes, holding a copy
    of ``attributes``, which is all ``GroupMetadata(attributes=...)`` would differ by.
    """
    arrays = {} if arrays is None else arrays
    groups = {} if groups is None else groups
    if (
        not all(isinstance(array, ManifestArray) for array in arrays.values())
        or not all(type(name) is str for name in attributes)
        or any(name in arrays for name in groups)
    ):
        return ManifestGroup(arrays=arrays, groups=groups, attributes=attributes)
    metadata = upstream.replaced(_empty_group_metadata(), attributes=dict(attributes))
    return upstream.manifest_group(arrays, groups, metadata)


#: Sets of arrays kept by :func:`kept_arrays`.
KEPT_ARRAYS_SIZE = 256
_kept: caches.ResultCache[dict[str, ManifestArray]] = caches.ResultCache(KEPT_ARRAYS_SIZE)


def kept_arrays(
    key: Hashable | None, build: Callable[[], dict[str, ManifestArray]]
) -> dict[str, ManifestArray]:
    """``build()``'s arrays, built once per ``key`` and copied afterwards.

    ``key`` must determine everything ``build`` returns (None: build afresh). Each call
    gets its own ManifestArrays and attribute dictionaries (:func:`copied_array`); the
    immutable manifests and validated metadata fields are shared.
    """
    if key is None or not caches.ENABLED:
        return build()
    known = _kept.get(key)
    if known is None:
        known = build()
        _kept.put(key, known)
    return {name: copied_array(array) for name, array in known.items()}


def clear_kept_arrays() -> None:
    """Forget the arrays kept by :func:`kept_arrays`."""
    _kept.clear()


def clear_caches() -> None:
    """Forget every validated metadata and every cached result of the TIFF parser
    (:mod:`.caches`), for tests and memory-bound processes."""
    metadata_templates.clear_cache()
    caches.clear_all()
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
    if not metadata_copies.COPY_BY_FIELDS:
        return dataclasses.replace(
            _inlined_template(dtype, len(shape)),
            shape=shape,
            chunk_grid=RegularChunkGridMetadata(chunk_shape=shape),
            dimension_names=dims,
        )
    metadata = copy_with_attributes(_inlined_template(dtype, len(shape)), {})
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
    return FillManifestArray(
        metadata=copy_with_attributes(metadata, attributes or {}),
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
    "copied_array",
    "inlined_array",
    "kept_arrays",
    "manifest_array",
    "manifest_group",
    "segment_manifest",
    "zarr_data_type",
]
