"""Writing rectilinear virtual arrays to Icechunk and to kerchunk parquet references.

``vds.vz.to_icechunk`` and ``vds.vz.to_kerchunk`` reach these functions through
:mod:`virtualizarr_fill._vz_adapter` for what VirtualiZarr cannot write itself:

* **Icechunk** (format 2) stores rectilinear chunk grids with explicit edges on every
  axis. Appending along a dimension merges the stored array's metadata with the new
  data's exactly as a concatenation does: a stored last chunk that overhangs the array
  (a padded boundary chunk) is cut to its logical length and gets the truncate or crop
  codec it now needs, instead of having its padding read as data.
* **Kerchunk parquet** references hold Zarr format 3 metadata here. fsspec's parquet
  reference reader finds an array's chunk records through a ``<array>/.zarray`` entry
  giving the number of chunks per axis, so each array gets such an index entry (shape =
  chunk-grid shape, chunks = 1, no data type: a Zarr format 2 reader cannot mistake it
  for an array) next to its ``zarr.json``, and chunk keys use the ``v2`` chunk key
  encoding (``<array>/0.3``) that reader expects.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import xarray as xr
from xarray.backends.zarr import encode_zarr_attr_value
from zarr.core.buffer import default_buffer_prototype
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.metadata.v3 import ArrayV3Metadata, RectilinearChunkGridMetadata
from zarr.core.sync import sync

from virtualizarr_fill.concat import (
    FILL_ATTRIBUTES,
    chunk_grid,
    codec_edges,
    concatenation_metadata,
    is_rectilinear,
)
from virtualizarr_fill.errors import IncompatibleArraysError

if TYPE_CHECKING:
    from virtualizarr.manifests import ManifestArray
    from zarr import Array, Group


# --------------------------------------------------------------------------- icechunk


def explicit_edges(metadata: ArrayV3Metadata) -> ArrayV3Metadata:
    """Rectilinear metadata with every axis as a list of edges (Icechunk format 2 needs it).

    A regular axis keeps its codec edges, so a padded boundary chunk still overhangs the
    array and decodes exactly as before.
    """
    if not is_rectilinear(metadata):
        return metadata
    dims = chunk_grid(metadata).dimensions
    shapes = tuple(codec_edges(d) or (1,) for d in dims)
    return dataclasses.replace(
        metadata, chunk_grid=RectilinearChunkGridMetadata(chunk_shapes=shapes)
    )


def _array_key(group: Group, name: str) -> str:
    return name if group.name == "/" else f"{group.name.strip('/')}/{name}"


def _write_array_metadata(store: Any, key: str, metadata: ArrayV3Metadata) -> None:
    document = metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"]
    sync(store.set(f"{key}/zarr.json", document))


def create_virtual_variable_in_icechunk(
    store: Any, group: Group, name: str, var: xr.Variable, last_updated_at: datetime | None
) -> None:
    """Create (or reuse an identical) rectilinear array and write its virtual references."""
    from virtualizarr.writers.icechunk import (
        _check_existing_array_matches,
        update_attributes,
        write_manifest_to_icechunk,
    )

    ma = cast("ManifestArray", var.data)
    dims = [str(d) for d in var.dims]
    metadata = explicit_edges(
        dataclasses.replace(
            ma.metadata,
            attributes={},
            dimension_names=tuple(dims),
            # Icechunk parses chunk keys as ``c/i/j``: the default encoding.
            chunk_key_encoding=DefaultChunkKeyEncoding(separator="/"),
        )
    )
    existing = group.get(name)
    if existing is not None:
        _check_existing_array_matches(cast("Array", existing), metadata, dims)
    else:
        _write_array_metadata(store, _array_key(group, name), metadata)
    arr = cast("Array", group[name])
    update_attributes(arr, var.attrs, encoding=var.encoding)
    write_manifest_to_icechunk(
        store=store,
        group=group,
        arr_name=name,
        manifest=ma.manifest,
        chunk_index_offsets=(0,) * ma.ndim,
        last_updated_at=last_updated_at,
    )


def _same_attribute(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def append_virtual_variable_to_icechunk(
    store: Any,
    group: Group,
    name: str,
    var: xr.Variable,
    append_dim: str,
    last_updated_at: datetime | None,
) -> None:
    """Append a virtual variable to an existing array along ``append_dim``.

    The stored array and the new data combine as a concatenation
    (:func:`virtualizarr_fill.concat.concatenation_metadata`): the result may become
    rectilinear and gain a truncate/crop codec; incompatible data is refused before
    anything is written.
    """
    from virtualizarr.writers.icechunk import check_compatible_encodings, write_manifest_to_icechunk

    ma = cast("ManifestArray", var.data)
    existing = group[name]
    dims = [str(d) for d in var.dims]
    axis = dims.index(append_dim)
    stored = cast(ArrayV3Metadata, existing.metadata)
    if not isinstance(stored, ArrayV3Metadata):
        raise IncompatibleArraysError(
            f"cannot append to {name!r}: the stored array is not Zarr format 3"
        )
    check_compatible_encodings(var.encoding, existing.attrs)
    for attr in FILL_ATTRIBUTES:
        if attr in var.attrs or attr in existing.attrs:
            new = encode_zarr_attr_value(var.attrs[attr]) if attr in var.attrs else None
            old = existing.attrs.get(attr)
            if not _same_attribute(new, old):
                raise IncompatibleArraysError(
                    f"cannot append to {name!r}: the stored array has {attr}={old!r} but the "
                    f"appended data has {attr}={new!r}"
                )

    def describe(index: int) -> str:
        return f"the stored array {name!r}" if index == 0 else f"the data appended to {name!r}"

    merged = concatenation_metadata(
        [
            dataclasses.replace(stored, attributes={}, dimension_names=None),
            dataclasses.replace(ma.metadata, attributes={}, dimension_names=None),
        ],
        axis,
        describe,
    )
    final = explicit_edges(
        dataclasses.replace(
            merged, attributes=stored.attributes, dimension_names=stored.dimension_names
        )
    )
    offsets = [0] * ma.ndim
    offsets[axis] = chunk_grid(stored).dimensions[axis].nchunks
    _write_array_metadata(store, _array_key(group, name), final)
    write_manifest_to_icechunk(
        store=store,
        group=group,
        arr_name=name,
        manifest=ma.manifest,
        chunk_index_offsets=tuple(offsets),
        last_updated_at=last_updated_at,
    )


# --------------------------------------------------------------------------- kerchunk parquet


def _v2_keyed(metadata: dict[str, Any]) -> dict[str, Any]:
    document = dict(metadata)
    document["chunk_key_encoding"] = {"name": "v2", "configuration": {"separator": "."}}
    return document


def _chunk_index_key(metadata: ArrayV3Metadata, chunk_key: str) -> str:
    indices = metadata.chunk_key_encoding.decode_chunk_key(chunk_key)
    return ".".join(str(i) for i in indices) if indices else "0"


def kerchunk_refs_v3_for_parquet(ds: xr.Dataset) -> tuple[dict[str, Any], dict[str, Any]]:
    """Zarr format 3 references of ``ds`` laid out for fsspec's parquet reference reader.

    Returns ``(metadata, chunk_refs)``: the metadata documents (including each array's
    chunk-count index entry) and the chunk references keyed ``<array>/<i>.<j>``.
    """
    from virtualizarr.writers.kerchunk import dataset_to_kerchunk_refs

    refs = dataset_to_kerchunk_refs(ds, zarr_format=3)["refs"]
    metadata: dict[str, Any] = {}
    documents: dict[str, ArrayV3Metadata] = {}
    for key, value in refs.items():
        if key == "zarr.json":
            metadata[key] = json.loads(value)
        elif key.endswith("/zarr.json"):
            array = key.removesuffix("/zarr.json")
            document = json.loads(value)
            parsed = ArrayV3Metadata.from_dict(document)
            documents[array] = parsed
            metadata[key] = _v2_keyed(document)
            grid_shape = chunk_grid(parsed).grid_shape
            metadata[f"{array}/.zarray"] = {
                "shape": list(grid_shape),
                "chunks": [1] * len(grid_shape),
            }
    chunk_refs: dict[str, Any] = {}
    for key, value in refs.items():
        if key == "zarr.json" or key.endswith("/zarr.json"):
            continue
        array, _, chunk_key = key.partition("/")
        chunk_refs[f"{array}/{_chunk_index_key(documents[array], chunk_key)}"] = value
    return metadata, chunk_refs


def write_kerchunk_parquet_v3(
    ds: xr.Dataset, url: str, *, record_size: int = 100_000, categorical_threshold: int = 10
) -> None:
    """Write ``ds``'s Zarr format 3 references as a kerchunk parquet reference store.

    Read it back with ``fsspec.filesystem("reference", fo=url, ...)`` and open the
    mapper with ``zarr_format=3``.
    """
    import fsspec
    from fsspec.implementations.reference import LazyReferenceMapper

    metadata, chunk_refs = kerchunk_refs_v3_for_parquet(ds)
    fs, root = fsspec.core.url_to_fs(url)
    out = LazyReferenceMapper.create(
        root=root, fs=fs, record_size=record_size, categorical_threshold=categorical_threshold
    )
    for key, document in metadata.items():
        if "/" in key:
            # Array documents go straight into the consolidated metadata the reader serves.
            out.zmetadata[key] = document
        else:
            out[key] = json.dumps(document)
    for key in sorted(chunk_refs, key=_ref_sort_key):
        out[key] = chunk_refs[key]
    out.flush()


def _ref_sort_key(key: str) -> tuple[str, tuple[int, ...]]:
    array, _, index = key.rpartition("/")
    return array, tuple(int(i) for i in index.split("."))


__all__ = [
    "append_virtual_variable_to_icechunk",
    "create_virtual_variable_in_icechunk",
    "explicit_edges",
    "kerchunk_refs_v3_for_parquet",
    "write_kerchunk_parquet_v3",
]
