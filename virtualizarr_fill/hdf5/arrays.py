"""One HDF5 dataset as one virtual Zarr array (:class:`ManifestArray`).

:func:`build_array` plans the data type and reads the attributes, then picks the codec
chain, the chunk shape and the manifest builder for the dataset's storage layout:

* **chunked** (every chunk index): one reference per allocated chunk,
  :mod:`~virtualizarr_fill.hdf5.chunked_manifest`; unallocated chunks are absent and
  read as the fill value; one stored chunk of a filtered dataset is decoded at parse
  time (:mod:`~virtualizarr_fill.hdf5.chunk_verification`);
* **contiguous** and **external raw storage**:
  :mod:`~virtualizarr_fill.hdf5.contiguous_manifest`;
* **compact**, data types that must be converted, and chunks the codec chain cannot
  decode as stored: read through h5py, re-encoded and inlined
  (:mod:`~virtualizarr_fill.hdf5.materialise`); never is a chunk handed to a decoder
  it was not written with;
* **virtual**: :mod:`~virtualizarr_fill.hdf5.virtual`.

The Zarr metadata (fill value after the HDF5 fill policy, codecs, dimension names) is
made here once the manifest tells whether chunks are missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import h5py
import numpy as np
from virtualizarr.manifests import ChunkManifest, ManifestArray
from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill import upstream
from virtualizarr_fill.fill.hdf5 import consolidate_hdf5_fill
from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.hdf5.array_context import (
    ArrayContext,
    DatasetRefused,
    StoredDataset,
    Target,
    clamped,
    grid_shape,
    plain_numeric,
)
from virtualizarr_fill.hdf5.attrs import FILL_ATTRIBUTES, convert_attributes
from virtualizarr_fill.hdf5.chunk_verification import verify_one_chunk
from virtualizarr_fill.hdf5.chunked_manifest import (
    check_unfiltered_chunk_sizes,
    chunked_manifest,
    direct_chunk_table,
)
from virtualizarr_fill.hdf5.contiguous_manifest import contiguous_manifest, external_segments
from virtualizarr_fill.hdf5.dtypes import (
    Storage,
    UnsupportedDtypeError,
    plan_dtype,
)
from virtualizarr_fill.hdf5.fill_checks import fill_message_problem, undefined_values_problem
from virtualizarr_fill.hdf5.filters import (
    UnsupportedFilterError,
    filter_codecs,
    read_pipeline,
)
from virtualizarr_fill.hdf5.materialise import encode_pending, materialised_manifest
from virtualizarr_fill.hdf5.pipeline_checks import pipeline_message_problem
from virtualizarr_fill.hdf5.virtual import build_virtual_array
from virtualizarr_fill.manifests import FillManifestArray
from virtualizarr_fill.zarr_model import metadata_templates
from virtualizarr_fill.zarr_model.data_types import zarr_data_type

# ---------------------------------------------------------------------------------
# entry point


def build_array(
    dataset: h5py.Dataset,
    target: Target,
    context: ArrayContext,
    raw_attributes: dict[str, Any] | None = None,
) -> ManifestArray:
    """Turn ``dataset`` into a :class:`ManifestArray`, or raise :class:`DatasetRefused`.

    ``raw_attributes`` (from :func:`~virtualizarr_fill.hdf5.attrs.read_raw_attributes`)
    saves reading the attributes again.
    """
    space = dataset.id.get_space()
    if space.get_simple_extent_type() == h5py.h5s.NULL:
        raise DatasetRefused("dataspace", "null dataspace (the dataset holds no elements)")
    try:
        plan = plan_dtype(dataset)
    except UnsupportedDtypeError as exc:
        raise DatasetRefused("datatype", f"unsupported datatype: {exc}") from None
    # h5py's cached copy of the creation property list (listing the attributes made
    # it), rather than another copy; and the dtype once (h5py derives it on every call).
    dcpl = _libhdf5.cached_creation_plist(dataset)
    dtype = dataset.dtype
    nbytes = math.prod(int(s) for s in dataset.shape) * dtype.itemsize
    if nbytes >= 2**63:
        # Larger than any file can hold: the dataspace message is garbage.
        raise DatasetRefused("corrupt", f"implausible shape {dataset.shape} ({nbytes} bytes)")
    if raw_attributes is None and context.attributes_problem is not None:
        problem = context.attributes_problem(dataset, f"dataset {target.path or dataset.name!r}")
        if problem is not None:
            raise DatasetRefused("corrupt", problem)
    json_attrs, typed = convert_attributes(
        dataset,
        source=context.url,
        keep_typed=FILL_ATTRIBUTES,
        raw=raw_attributes,
        path=target.path,
        path_of=context.object_path,
        vlen=context.vlen_attribute,
    )
    fill_problem, fill_message = fill_message_problem(dataset, context, target.path or dataset.name)
    if fill_problem is not None:
        raise DatasetRefused("corrupt", fill_problem)
    pipeline_problem = pipeline_message_problem(dataset, context, target.path or dataset.name)
    if pipeline_problem is not None:
        raise DatasetRefused("corrupt", pipeline_problem)
    stored = StoredDataset(dataset, dtype, dcpl, plan, target, context)
    stored.fill_message = fill_message
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        return _build_virtual(stored, {**json_attrs, **typed})
    return _build(stored, {**json_attrs, **typed})


# ---------------------------------------------------------------------------------
# metadata


def array_metadata(
    *,
    shape: tuple[int, ...],
    dtype: np.dtype,
    chunks: tuple[int, ...],
    fill_value: Any,
    codecs: list[dict[str, Any]],
    attributes: dict[str, Any],
    dimension_names: tuple[str, ...],
) -> ArrayV3Metadata:
    """Zarr v3 metadata of a regular-grid array with the given codec chain (validated
    once per distinct input, see :mod:`virtualizarr_fill.zarr_model.metadata_templates`)."""
    chain = list(codecs)
    if dtype.kind == "T" and not chain:
        chain = [{"name": "vlen-utf8", "configuration": {}}]
    return metadata_templates.array_metadata(
        shape=shape,
        data_type=zarr_data_type(dtype),
        dtype=dtype,
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": chunks}},
        chunk_key_encoding={"name": "default"},
        fill_value=fill_value,
        codecs=chain,
        attributes=attributes,
        dimension_names=dimension_names,
    )


def _header_fill(dtype: np.dtype, dcpl: h5py.h5p.PropDCID) -> Any:
    """The header fill value as :func:`consolidate_hdf5_fill` expects it: h5py's
    ``dataset.fillvalue`` (the same calls, with the dataset's dtype at hand)."""
    try:
        defined = dcpl.fill_value_defined()
        if defined == h5py.h5d.FILL_VALUE_UNDEFINED:
            return None
        value = np.zeros((1,), dtype=dtype)
        if defined == h5py.h5d.FILL_VALUE_DEFAULT and plain_numeric(dtype):
            # libhdf5 zero-fills a default fill value without a type conversion
            # (H5P_get_fill_value); the conversion path costs more than the read.
            return value[0]
        dcpl.get_fill_value(value)
        return value[0]
    except Exception:  # fill message of a type h5py cannot convert
        return None


# ---------------------------------------------------------------------------------
# stages


def _build(ds: StoredDataset, attributes: dict[str, Any]) -> ManifestArray:
    if ds.layout == h5py.h5d.CHUNKED:
        # Read (and check) the chunk index before any libhdf5 call that walks it
        # (storage sizes, reads of materialised values).
        ds.table = direct_chunk_table(ds)
    undefined = undefined_values_problem(ds.fill_message, _has_stored_values(ds))
    if undefined is not None:
        raise DatasetRefused("corrupt", undefined)
    materialise = ds.plan.storage is Storage.MATERIALISE or ds.layout == h5py.h5d.COMPACT
    if materialise:
        chunks = _materialised_chunk_shape(ds)
        codecs = _materialised_codecs(ds)
        check_unfiltered_chunk_sizes(ds, chunks)
    else:
        chunks = _chunk_shape(ds)
        codecs = [_bytes_codec(ds), *_filter_codecs(ds, chunks)]
    grid = grid_shape(ds.shape, chunks)
    if math.prod(grid) > ds.context.max_chunks:
        raise DatasetRefused(
            "size",
            f"a grid of {math.prod(grid)} chunks exceeds max_chunks={ds.context.max_chunks} "
            "(HDF5Parser(max_chunks=...) admits larger grids, at about 40 bytes a chunk)",
        )
    metadata_for = _metadata_factory(ds, attributes, chunks, codecs)
    if materialise:
        manifest_parts = materialised_manifest(ds, chunks, grid)
    elif ds.layout == h5py.h5d.CHUNKED:
        manifest_parts = chunked_manifest(ds, chunks, grid)
    elif ds.layout == h5py.h5d.CONTIGUOUS:
        manifest_parts = contiguous_manifest(ds, chunks, grid)
    else:
        raise DatasetRefused("layout", f"unknown storage layout {ds.layout}")
    paths, offsets, lengths, pending = manifest_parts
    stored = int(np.count_nonzero(lengths)) + len(pending)
    metadata = metadata_for(stored < math.prod(grid))
    if not materialise and ds.layout == h5py.h5d.CHUNKED and ds.filters:
        verify_one_chunk(ds, metadata, chunks, offsets, lengths)
    inlined = encode_pending(ds, metadata, chunks, pending)
    for index, data in inlined.items():
        paths[index] = INLINED_CHUNK_PATH
        offsets[index] = 0
        lengths[index] = len(data)
    manifest = ChunkManifest.from_arrays(
        paths=paths,  # type: ignore[arg-type]  # a StringDType array
        offsets=offsets,
        lengths=lengths,
        validate_paths=False,
        inlined=inlined,
    )
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest)


def _has_stored_values(ds: StoredDataset) -> bool:
    """Whether any value of the dataset is stored (a dataset of no elements counts
    as stored: there is nothing to read). Chunked: from the chunk table already read
    and checked, never from a libhdf5 call that walks an unchecked index."""
    if math.prod(ds.stored_shape) == 0:
        return True
    if ds.layout == h5py.h5d.COMPACT or ds.dcpl.get_external_count() > 0:
        return True
    if ds.layout == h5py.h5d.CHUNKED:
        if ds.table is not None:
            return bool(len(ds.table.sizes))
        return True  # the manifest builder lists the chunks (and refuses a bad index)
    try:
        size = ds.dataset.id.get_storage_size()
        offset = ds.dataset.id.get_offset()
    except Exception:  # the manifest builders report what cannot be read
        return True
    if size == 0 and offset is not None:
        # libhdf5 reads from a defined address whatever the size says (h5py reads
        # the values there); the layout message contradicts itself.
        raise DatasetRefused(
            "corrupt",
            f"contiguous storage at byte {offset} of 0 bytes: the layout message "
            "contradicts itself",
        )
    return bool(size > 0)


def _build_virtual(ds: StoredDataset, attributes: dict[str, Any]) -> ManifestArray:
    """A virtual dataset (VDS): references into its source datasets."""

    if ds.plan.storage is not Storage.REFERENCE:
        raise DatasetRefused(
            "layout",
            f"virtual dataset (VDS) of a type that must be materialised ({ds.plan.reason})",
        )

    def finish(
        chunks: tuple[int, ...], codecs: list[dict[str, Any]], manifest: ChunkManifest
    ) -> ManifestArray:
        stored = int(np.count_nonzero(upstream.manifest_entries(manifest).lengths))
        grid = grid_shape(ds.shape, chunks)
        metadata = _metadata_factory(ds, attributes, chunks, codecs)(stored < math.prod(grid))
        return FillManifestArray(metadata=metadata, chunkmanifest=manifest)

    return build_virtual_array(
        ds.dataset, ds.dcpl, ds.target, ds.context, finish, build_source=build_array
    )


def _bytes_codec(ds: StoredDataset) -> dict[str, Any]:
    endian = ds.plan.endian or "little"
    return {"name": "bytes", "configuration": {"endian": endian}}


def _filter_codecs(ds: StoredDataset, chunks: Sequence[int]) -> list[dict[str, Any]]:
    ds.filters = read_pipeline(ds.dcpl)
    try:
        return filter_codecs(ds.filters, dtype=ds.dtype, chunk_shape=chunks)
    except UnsupportedFilterError as exc:
        raise DatasetRefused("filter", str(exc)) from None


def _materialised_codecs(ds: StoredDataset) -> list[dict[str, Any]]:
    if ds.plan.is_string:
        return []  # array_metadata adds vlen-utf8
    return [{"name": "bytes", "configuration": {"endian": "little"}}]


def _metadata_factory(
    ds: StoredDataset,
    attributes: dict[str, Any],
    chunks: tuple[int, ...],
    codecs: list[dict[str, Any]],
) -> Callable[[bool], ArrayV3Metadata]:
    def make(has_unallocated: bool) -> ArrayV3Metadata:
        fill_dtype = ds.dtype if ds.plan.is_string else ds.plan.dtype
        decision = consolidate_hdf5_fill(
            _header_fill(ds.dtype, ds.dcpl),
            attributes,
            fill_dtype,
            source=ds.context.url,
            on_out_of_range=ds.context.on_fill_out_of_range,
            has_unallocated_chunks=has_unallocated,
            dataset=ds.name,
        )
        return array_metadata(
            shape=ds.shape,
            dtype=ds.plan.dtype,
            chunks=chunks,
            fill_value=decision.fill_value,
            codecs=codecs,
            attributes=decision.attributes,
            dimension_names=ds.target.dimension_names,
        )

    return make


def _chunk_shape(ds: StoredDataset) -> tuple[int, ...]:
    if ds.layout == h5py.h5d.CHUNKED:
        return tuple(int(c) for c in ds.dataset.chunks)
    if ds.dcpl.get_external_count() > 0 and math.prod(ds.stored_shape) > 0:
        ds.external = external_segments(ds)
        rows = ds.external[0]
        return clamped((rows, *ds.stored_shape[1:])) if ds.stored_shape else ()
    return clamped(ds.stored_shape)


def _materialised_chunk_shape(ds: StoredDataset) -> tuple[int, ...]:
    if ds.layout == h5py.h5d.CHUNKED and ds.dataset.chunks is not None:
        return tuple(int(c) for c in ds.dataset.chunks)
    return clamped(ds.shape)


__all__ = ["array_metadata", "build_array"]
