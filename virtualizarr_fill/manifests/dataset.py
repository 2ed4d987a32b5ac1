"""The virtual dataset of a parsed file, built from what the parser already knows.

VirtualiZarr's ``ManifestStore.to_virtual_dataset`` builds the dataset of virtual
variables, then opens the whole store with ``xr.open_zarr`` to get the variables it
loads (by default the dimension coordinates), which makes zarr parse every array's
metadata document and read each coordinate through its asynchronous read path: most of
the time of a parse-to-dataset of a small file, for a GeoTIFF's ``band``, ``x`` and
``y`` whose values are already in memory (inlined in the manifest).

:func:`virtual_dataset` returns the same dataset: the virtual variables are
VirtualiZarr's (``ManifestGroup.to_virtual_dataset``); each array is opened as xarray's
zarr backend opens it (dimensions, attributes, the encoding it records: chunks, codecs,
fill value), from the parsed metadata object rather than its JSON document, its values
decoded straight from inlined chunks or read lazily through zarr for chunks in the
file; xarray's CF decoding (``xr.decode_cf``, with the arguments ``xr.open_zarr``
passes) decodes them; and VirtualiZarr's ``replace_virtual_with_loadable_vars`` keeps
the ones to load and merges them with the virtual ones.
``tests/manifests/test_virtual_dataset.py`` compares the result with VirtualiZarr's on every
corpus file.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec
from zarr.codecs import BytesCodec
from zarr.core.metadata.v3 import RegularChunkGridMetadata

from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, data_edges, is_sharded


def _compact_chunk_sizes(sizes: tuple[tuple[int, ...], ...]) -> tuple[Any, ...]:
    """xarray's representation of chunk sizes in ``encoding["chunks"]``: an int where
    the sizes are regular (a shorter last chunk allowed), else the tuple of sizes."""
    compacted: list[Any] = []
    for axis in sizes:
        if not axis:
            compacted.append((0,))
        elif len(set(axis[:-1])) <= 1 and axis[-1] <= axis[0]:
            compacted.append(axis[0])
        else:
            compacted.append(tuple(axis))
    return tuple(compacted)


def _encoding(array: ManifestArray, dims: tuple[Hashable, ...]) -> dict[str, Any]:
    """The encoding xarray's zarr backend records for a Zarr format 3 array."""
    metadata = array.metadata
    codecs = metadata.codecs
    grid = metadata.chunk_grid
    if isinstance(grid, RegularChunkGridMetadata):
        chunks: tuple[Any, ...] = tuple(grid.chunk_shape)  # zarr's ``Array.chunks``
    else:  # ``Array.read_chunk_sizes``: each chunk's length inside the array
        chunks = _compact_chunk_sizes(tuple(data_edges(d) for d in chunk_grid(metadata).dimensions))
    encoding: dict[str, Any] = {
        "chunks": chunks,
        "preferred_chunks": dict(zip(dims, chunks, strict=True)),
    }
    native = metadata.data_type.to_native_dtype()
    if native.kind == "T":
        encoding["dtype"] = native
    encoding.update(
        {
            "compressors": tuple(c for c in codecs if isinstance(c, BytesBytesCodec)),
            "filters": tuple(c for c in codecs if isinstance(c, ArrayArrayCodec)),
            "shards": None,
            "serializer": next(c for c in codecs if isinstance(c, ArrayBytesCodec)),
            "fill_value": metadata.fill_value,
        }
    )
    return encoding


def _plain_dtype(array: ManifestArray) -> np.dtype | None:
    """The stored data type of a one-chunk array of plain numbers (no codec but
    ``bytes``), whose one chunk is its values in C order; None for any other array."""
    metadata = array.metadata
    if not isinstance(metadata.chunk_grid, RegularChunkGridMetadata):
        return None
    if tuple(metadata.chunk_grid.chunk_shape) != tuple(metadata.shape) or not metadata.shape:
        return None
    codecs = metadata.codecs
    if len(codecs) != 1 or type(codecs[0]) is not BytesCodec:
        return None
    native = metadata.data_type.to_native_dtype()
    if native.kind not in "biufc" or native.itemsize == 0:
        return None
    # zarr's BytesCodec holds "little", "big" or (for one-byte types) None
    big = str(codecs[0].endian) in {"big", "Endian.big"}
    return native.newbyteorder(">" if big else "<")


def _plain_values(array: ManifestArray, stored: np.dtype, data: Any) -> np.ndarray | None:
    values = np.frombuffer(data, dtype=stored)
    if values.size != int(np.prod(array.metadata.shape)):
        return None
    native = array.metadata.data_type.to_native_dtype()
    return values.reshape(array.metadata.shape).astype(native, copy=False)


def _inlined_values(array: ManifestArray) -> np.ndarray | None:
    """The values of a one-chunk array of plain numbers whose bytes are inlined in its
    manifest (the TIFF parser's coordinates), else None."""
    inlined = getattr(array.manifest, "_inlined", None)
    if not inlined or len(inlined) != 1:
        return None
    stored = _plain_dtype(array)
    return None if stored is None else _plain_values(array, stored, next(iter(inlined.values())))


def _referenced_values(store: ManifestStore, array: ManifestArray) -> np.ndarray | None:
    """The values of a one-chunk array of plain numbers whose chunk is a reference into
    a file (a netCDF coordinate stored contiguously), read with one ranged read; None
    for other arrays."""
    from virtualizarr_fill.io.byte_ranges import get_ranges
    from virtualizarr_fill.io.files import store_read_error
    from virtualizarr_fill.io.registries import resolve

    stored = _plain_dtype(array)
    if stored is None:
        return None
    entry = array.manifest.get_entry((0,) * len(array.metadata.shape))
    if entry is None or int(entry["length"]) != stored.itemsize * int(np.prod(array.shape)):
        return None
    url, start = entry["path"], int(entry["offset"])
    end = start + int(entry["length"])
    try:
        found, path = resolve(store._registry, url)
        data = get_ranges(found, path, [start], [end])[0]
    except BaseException as error:
        failure = store_read_error(error, url, start, end - start)
        if failure is None:
            raise
        raise failure from error
    return _plain_values(array, stored, data)


def _values(store: ManifestStore, path: str, array: ManifestArray) -> Any:
    """The array's values: inlined ones decoded here, others read lazily through zarr
    (as xarray's zarr backend wraps them)."""
    found = _inlined_values(array)
    if found is not None:
        return found
    import zarr
    from xarray.backends.zarr import ZarrArrayWrapper
    from xarray.core.indexing import LazilyIndexedArray
    from zarr.core.array import AsyncArray
    from zarr.storage import StorePath

    opened = zarr.Array(AsyncArray(metadata=array.metadata, store_path=StorePath(store, path)))
    return LazilyIndexedArray(ZarrArrayWrapper(opened))


def _fill_value_attribute(value: Any, array: ManifestArray) -> Any:
    from xarray.backends.zarr import FillValueCoder

    return FillValueCoder.decode(value, array.metadata.data_type.to_native_dtype())


def loadable_variable(store: ManifestStore, path: str, array: ManifestArray) -> xr.Variable:
    """The variable xarray's zarr backend opens for ``array`` (before CF decoding)."""
    return _variable(array, _values(store, path, array))


def _variable(array: ManifestArray, values: Any) -> xr.Variable:
    metadata = array.metadata
    dims = tuple(metadata.dimension_names or ())
    if len(dims) != len(metadata.shape):
        raise KeyError(
            "Zarr object is missing the `dimension_names` metadata which is "
            "required for xarray to determine variable dimensions."
        )
    attributes = dict(metadata.attributes)
    if "_FillValue" in attributes:
        attributes["_FillValue"] = _fill_value_attribute(attributes["_FillValue"], array)
    return xr.Variable(dims, values, attributes, _encoding(array, dims))


def loaded_variables(
    store: ManifestStore, arrays: Mapping[str, ManifestArray]
) -> dict[str, xr.Variable]:
    """:func:`loadable_variable` of each array, its values read now: plain one-chunk
    arrays (most coordinates) with one ranged read each, the others through zarr
    together, in one pass of zarr's event loop (a file's few small coordinates would
    otherwise cost a round trip to it each)."""
    import asyncio

    from zarr.core.array import AsyncArray
    from zarr.core.sync import sync
    from zarr.storage import StorePath

    values: dict[str, Any] = {
        name: _inlined_values(array)
        if getattr(array.manifest, "_inlined", None)
        else _referenced_values(store, array)
        for name, array in arrays.items()
    }
    pending = {
        name: AsyncArray(metadata=arrays[name].metadata, store_path=StorePath(store, name))
        for name, found in values.items()
        if found is None
    }

    async def read_all() -> list[Any]:
        return await asyncio.gather(*(array.getitem(...) for array in pending.values()))

    if pending:
        values.update(zip(pending, (np.asarray(v) for v in sync(read_all())), strict=True))
    return {name: _variable(array, np.asarray(values[name])) for name, array in arrays.items()}


def can_build(group: ManifestGroup) -> bool:
    """Whether :func:`virtual_dataset` builds this group's dataset (arrays with dimension
    names, not sharded; anything else goes to VirtualiZarr's own construction)."""
    for array in group.arrays.values():
        metadata = array.metadata
        if is_sharded(metadata) or metadata.zarr_format != 3:
            return False
        if metadata.dimension_names is None and len(metadata.shape):
            return False
    return True


def virtual_dataset(
    store: ManifestStore,
    group: ManifestGroup,
    *,
    loadable_variables: Iterable[Hashable] | None,
    decode_times: bool | None,
) -> xr.Dataset:
    """The dataset VirtualiZarr's ``construct_virtual_dataset`` builds for the root group
    ``group`` of ``store``, built without opening the store with zarr."""
    from virtualizarr.xarray import replace_virtual_with_loadable_vars

    if loadable_variables is not None and not isinstance(loadable_variables, list):
        raise ValueError(
            "loadable_variables must be an iterable of string variable names,"
            f" or None, but got type {type(loadable_variables)}"
        )
    fully_virtual = group.to_virtual_dataset()
    # Every array, as xarray's zarr backend opens them (values lazily, except those
    # inlined in the manifest): which ones are loaded is decided on the decoded
    # variables, as VirtualiZarr decides (a netCDF character array is a dimension
    # coordinate only once its characters are joined).
    raw = xr.Dataset(
        {name: loadable_variable(store, name, array) for name, array in group.arrays.items()},
        # the attributes xarray's zarr backend reads (it leaves out netCDF-C's own)
        attrs={
            k: v for k, v in group.metadata.attributes.items() if not k.lower().startswith("_nc")
        },
    )
    decode: dict[str, Any] = {}
    if decode_times is not None:
        decode["decode_times"] = decode_times
    loadable = xr.decode_cf(raw, **decode)
    return replace_virtual_with_loadable_vars(fully_virtual, loadable, loadable_variables)


__all__ = ["can_build", "loadable_variable", "virtual_dataset"]
