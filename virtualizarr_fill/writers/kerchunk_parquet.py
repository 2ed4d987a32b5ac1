"""Kerchunk parquet references of Zarr format 3 metadata, which VirtualiZarr does not write.

Kerchunk parquet references hold Zarr format 3 metadata here as follows. fsspec's
parquet reference reader finds an array's chunk records through a ``<array>/.zarray``
entry giving the number of chunks per axis, so each array gets such an index entry
(shape = chunk-grid shape, chunks = 1, no data type: a Zarr format 2 reader cannot
mistake it for an array) next to its ``zarr.json``, and chunk keys use the ``v2`` chunk
key encoding (``<array>/0.3``) that reader expects.

Arrays with chunks missing from their manifest keep their chunk paths out of fsspec's
categorical columns (see :data:`_NEVER_CATEGORICAL`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

import xarray as xr
from virtualizarr.manifests import ManifestArray
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid


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
    refs = upstream.kerchunk_writer("dataset_to_kerchunk_refs")(ds, zarr_format=3)["refs"]
    metadata: dict[str, Any] = {}
    documents: dict[str, ArrayV3Metadata] = {}
    for key, value in refs.items():
        if key == "zarr.json":
            metadata[key] = json.loads(value)
        elif key.endswith("/zarr.json"):
            array = key.removesuffix("/zarr.json")
            document = json.loads(value)
            # parsed from its own copy: codecs decode their settings in place (base64 JPEG
            # tables into bytes), which the JSON of the parquet metadata cannot hold
            parsed = ArrayV3Metadata.from_dict(json.loads(value))
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


#: A ``categorical_threshold`` fsspec never reaches: its parquet reader reads a missing
#: chunk's null path as NaN in a categorical column (None otherwise), and then fails with
#: a ``TypeError`` instead of reporting the chunk missing (read as the fill value).
_NEVER_CATEGORICAL = sys.maxsize


def parquet_categorical_threshold(datasets: Iterable[xr.Dataset], requested: int) -> int:
    """``requested``, or :data:`_NEVER_CATEGORICAL` when an array of ``datasets`` has
    chunks missing from its manifest (the holes of a mosaic, unwritten HDF5 chunks)."""
    for ds in datasets:
        for variable in ds.variables.values():
            data = variable.data
            if (
                isinstance(data, ManifestArray)
                and (upstream.manifest_paths(data.manifest) == "").any()
            ):
                return _NEVER_CATEGORICAL
    return requested


def write_kerchunk_parquet_v3(
    ds: xr.Dataset, url: str, *, record_size: int = 100_000, categorical_threshold: int = 10
) -> None:
    """Write ``ds``'s Zarr format 3 references as a kerchunk parquet reference store.

    Read it back with ``fsspec.filesystem("reference", fo=url, ...)`` and open the
    mapper with ``zarr_format=3``.
    """
    metadata, chunk_refs = kerchunk_refs_v3_for_parquet(ds)
    _write_parquet_v3(
        metadata,
        chunk_refs,
        url,
        record_size=record_size,
        categorical_threshold=parquet_categorical_threshold([ds], categorical_threshold),
    )


def write_kerchunk_parquet_v3_groups(
    root_attributes: dict[str, Any],
    groups: dict[str, xr.Dataset],
    url: str,
    *,
    record_size: int = 100_000,
    categorical_threshold: int = 10,
) -> None:
    """Write a root group holding the datasets ``groups`` (each under its name, e.g. the
    levels ``"0"``, ``"1"``... of a multiscale group) as one kerchunk parquet reference
    store of Zarr format 3 metadata, laid out as :func:`write_kerchunk_parquet_v3` lays
    out one dataset.

    Read it back with ``virtualizarr_fill.open_kerchunk(url, group=name)``.
    """
    metadata: dict[str, Any] = {
        "zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": root_attributes}
    }
    chunk_refs: dict[str, Any] = {}
    for name, ds in groups.items():
        group_metadata, group_refs = kerchunk_refs_v3_for_parquet(ds)
        metadata.update({f"{name}/{key}": value for key, value in group_metadata.items()})
        chunk_refs.update({f"{name}/{key}": value for key, value in group_refs.items()})
    _write_parquet_v3(
        metadata,
        chunk_refs,
        url,
        record_size=record_size,
        categorical_threshold=parquet_categorical_threshold(groups.values(), categorical_threshold),
    )


def _write_parquet_v3(
    metadata: dict[str, Any],
    chunk_refs: dict[str, Any],
    url: str,
    *,
    record_size: int,
    categorical_threshold: int,
) -> None:
    import fsspec
    from fsspec.implementations.reference import LazyReferenceMapper

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
    "kerchunk_refs_v3_for_parquet",
    "parquet_categorical_threshold",
    "write_kerchunk_parquet_v3",
    "write_kerchunk_parquet_v3_groups",
]
