"""One Icechunk array's document, as this package's Icechunk writer writes it: a
rectilinear chunk grid with explicit edges, written once and without indentation with the
attributes VirtualiZarr's writer would set, and compared with a stored array's before
references are added under it."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from xarray.backends.zarr import encode_zarr_attr_value
from zarr.core.buffer import default_buffer_prototype
from zarr.core.metadata.v3 import ArrayV3Metadata, RectilinearChunkGridMetadata
from zarr.core.sync import sync

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, codec_edges, is_rectilinear

if TYPE_CHECKING:
    import xarray as xr
    from zarr import Array, Group

__all__ = [
    "array_key",
    "check_matches_stored",
    "explicit_edges",
    "stored_attributes",
    "write_array_metadata",
]


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


def array_key(group: Group, name: str) -> str:
    """The store key of the array ``name`` of ``group``."""
    return name if group.name == "/" else f"{group.name.strip('/')}/{name}"


def write_array_metadata(store: Any, key: str, metadata: ArrayV3Metadata) -> None:
    """Write ``metadata`` as the array's document, without indentation: the edges of a
    large rectilinear array are hundreds of thousands of numbers, which zarr's indented
    JSON puts on a line each (7 MB instead of 1 MB for 400,000 chunks, held again by
    every Icechunk snapshot that holds the array)."""
    text = json.dumps(metadata.to_dict(), separators=(",", ":"), allow_nan=True)
    document = default_buffer_prototype().buffer.from_bytes(text.encode())
    sync(store.set(f"{key}/zarr.json", document))


def stored_attributes(var: xr.Variable) -> dict[str, Any]:
    """The attributes VirtualiZarr's Icechunk writer gives the array of ``var``: each
    attribute as xarray encodes it, then the variable's CF encoding keys."""
    keys = upstream.icechunk_encoding_keys()
    attributes = {k: encode_zarr_attr_value(v) for k, v in var.attrs.items()}
    attributes.update({k: encode_zarr_attr_value(v) for k, v in var.encoding.items() if k in keys})
    return attributes


def _comparable(metadata: ArrayV3Metadata) -> dict[str, Any]:
    """The metadata's JSON without attributes, empty dimension names as none."""
    names = tuple(metadata.dimension_names or ()) or None
    return dataclasses.replace(metadata, attributes={}, dimension_names=names).to_dict()


def check_matches_stored(existing: Array, metadata: ArrayV3Metadata, name: str) -> None:
    """Refuse to write references under a stored array whose metadata differs from
    ``metadata`` (attributes aside): they would be decoded with the stored codecs.

    VirtualiZarr's writer makes the same check, but compares a scalar's empty dimension
    names with the stored array's, which zarr keeps as none, and so refuses to write a
    scalar (a GeoTIFF's ``spatial_ref``) again when files are appended. JSON forms are
    compared, as there: two NaN fill values are equal in JSON."""
    requested, stored = _comparable(metadata), _comparable(existing.metadata)  # type: ignore[arg-type]
    differing = sorted(
        k for k in requested.keys() | stored.keys() if requested.get(k) != stored.get(k)
    )
    if differing:
        raise IncompatibleArraysError(
            f"cannot write {name!r}: the stored array differs in {', '.join(differing)}, so "
            "the new references would be decoded as the stored ones; rewrite the group "
            "(mode='w') instead"
        )
