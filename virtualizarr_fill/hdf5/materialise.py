"""Chunks read through h5py, re-encoded with the array's codecs and inlined.

Compact datasets, data types that must be converted (variable-length strings, ...),
and chunks whose stored bytes the codec chain cannot decode as they are: chunks
stored with some optional filter skipped, unfiltered partial edge chunks, edge chunks
whose padding h5netcdf shows as fill. The stored descriptors of variable-length strings
are bounded first, from the file's bytes, since libhdf5 allocates what they claim.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import h5py
import numpy as np
from zarr.abc.codec import SupportsSyncCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync

from virtualizarr_fill import upstream
from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.hdf5.array_context import (
    DatasetRefused,
    StoredDataset,
    chunk_spec,
    empty_manifest,
    plain_numeric,
)
from virtualizarr_fill.hdf5.chunked_manifest import iterated_chunk_table
from virtualizarr_fill.hdf5.dtypes import (
    Storage,
    little_endian,
)
from virtualizarr_fill.hdf5.file_checks import FileChecks
from virtualizarr_fill.hdf5.filters import (
    read_pipeline,
)
from virtualizarr_fill.hdf5.format.global_heap import (
    CorruptGlobalHeapError,
    ImplausibleVlenError,
    vlen_payload_bytes,
)
from virtualizarr_fill.hdf5.format.vlen_descriptors import (
    DescriptorsUnavailable,
    VlenDescriptors,
    compact_data,
    element_size,
    unfiltered,
)
from virtualizarr_fill.hdf5.format.vlen_descriptors import table as descriptor_table


def _encode_sync(codecs: Sequence[Any], spec: ArraySpec, values: np.ndarray) -> bytes | None:
    """One chunk through a chain of synchronous codecs, in order, each seeing the chunk
    spec the previous one resolved (as zarr's codec pipeline does); None if a codec
    encoded nothing."""
    chunk: Any = default_buffer_prototype().nd_buffer.from_numpy_array(values)
    for codec in codecs:
        chunk = upstream.encode_sync(codec, chunk, spec)
        if chunk is None:
            return None
        spec = codec.resolve_metadata(spec)
    return bytes(chunk.to_bytes())


@functools.cache
def _load_filter_plugins() -> None:
    """Let h5py decode third-party filters (LZ4, bitshuffle, Blosc, Zstd, ...) when values
    must be read at parse time; hdf5plugin is optional."""
    with contextlib.suppress(ImportError):
        import hdf5plugin  # noqa: F401


def materialised_manifest(
    ds: StoredDataset, chunks: tuple[int, ...], grid: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    paths, offsets, lengths = empty_manifest(grid)
    nbytes = math.prod(ds.shape) * max(ds.plan.dtype.itemsize, 1)
    if ds.plan.is_string:
        nbytes = max(nbytes, ds.dataset.id.get_storage_size())
    if nbytes > ds.context.max_inline_bytes:
        what = ds.plan.reason or "compact storage"
        raise DatasetRefused(
            "size",
            f"{what} must be read and inlined, but {nbytes} bytes exceed "
            f"max_inline_bytes={ds.context.max_inline_bytes}",
        )
    if math.prod(ds.stored_shape) == 0 or not _has_storage(ds):
        return paths, offsets, lengths, []
    if ds.plan.is_string:
        _check_vlen_payload(ds)
    pending = [tuple(int(i) for i in index) for index in np.ndindex(grid)]
    return paths, offsets, lengths, pending


def _check_vlen_payload(ds: StoredDataset) -> None:
    """Bound what the strings' stored descriptors claim before h5py reads them:
    libhdf5 allocates each claimed length before it reads the heap."""
    what = f"variable-length strings of {ds.name!r}"
    checks = ds.context.checks(ds.context.url)
    if checks is None:
        return  # not parsed through a session: read unbounded, as h5py would
    try:
        stored = _stored_descriptors(ds, checks)
    except DescriptorsUnavailable as exc:
        raise DatasetRefused("unreadable", f"{what}: descriptors unreadable ({exc})") from None
    if stored is None:
        return  # nothing written
    address_size = checks.facts.address_size
    descriptors = VlenDescriptors(stored, address_size, _libhdf5.vlen_base_size(ds.dataset.id))
    try:
        payload = vlen_payload_bytes(descriptors, ds.context.file_size, what=what)
    except ImplausibleVlenError as exc:
        raise DatasetRefused("corrupt", str(exc)) from None
    if payload > ds.context.max_inline_bytes:
        raise DatasetRefused(
            "size",
            f"{what} must be read and inlined, but they hold {payload} bytes, more than "
            f"max_inline_bytes={ds.context.max_inline_bytes}",
        )


def _stored_descriptors(ds: StoredDataset, checks: FileChecks) -> np.ndarray | None:
    """The descriptors of every stored element, read from the file's bytes (rows of
    ``8 + size of offsets`` bytes), or None when nothing was written."""
    count = math.prod(ds.stored_shape)
    address_size = checks.facts.address_size
    size = element_size(address_size)
    if ds.layout == h5py.h5d.COMPACT:
        header = _libhdf5.object_address(ds.dataset.id)
        data = compact_data(checks.object(header, f"dataset {ds.name!r}").messages or ())
        if data is None:
            raise DescriptorsUnavailable("the layout message holds no compact data")
        return descriptor_table(data, count, address_size)
    if ds.layout == h5py.h5d.CONTIGUOUS:
        if ds.dcpl.get_external_count() > 0:
            raise DescriptorsUnavailable("strings in external raw storage")
        offset = ds.dataset.id.get_offset()
        if offset is None:
            return None
        return descriptor_table(_stored_bytes(ds, offset, count * size), count, address_size)
    table = ds.table if ds.table is not None else iterated_chunk_table(ds)
    if not len(table.sizes):
        return None
    chunks = tuple(int(c) for c in ds.dataset.chunks)
    per_chunk = math.prod(chunks)
    filters = [(f.filter_id, f.cd_values) for f in read_pipeline(ds.dcpl)]
    rows = []
    for coords, address, stored, mask in zip(
        table.coords, table.addresses, table.sizes, table.masks, strict=True
    ):
        data = unfiltered(
            _stored_bytes(ds, int(address), int(stored)), filters, int(mask), per_chunk * size
        )
        block = descriptor_table(data, per_chunk, address_size).reshape(*chunks, size)
        region = tuple(
            slice(0, max(min(c, s - int(o)), 0))
            for c, s, o in zip(chunks, ds.stored_shape, coords, strict=True)
        )
        rows.append(block[region].reshape(-1, size))
    return np.concatenate(rows)


def _stored_bytes(ds: StoredDataset, offset: int, length: int) -> bytes:
    if offset < 0 or offset + length > ds.context.file_size:
        raise DatasetRefused(
            "corrupt",
            f"storage of {ds.name!r} ends at byte {offset + length}, past the end of the "
            f"file ({ds.context.file_size} bytes): the file is truncated",
        )
    reader = ds.context.reader(ds.context.url)
    if reader is None:
        raise DescriptorsUnavailable("the file's bytes are not at hand")
    return reader.read_range(offset, length)


def _has_storage(ds: StoredDataset) -> bool:
    if ds.layout == h5py.h5d.COMPACT:
        return True
    try:
        return ds.dataset.id.get_storage_size() > 0
    except Exception:
        return True


def _read_region(ds: StoredDataset, region: tuple[slice, ...]) -> np.ndarray:
    _load_filter_plugins()
    try:
        if ds.plan.is_string:
            values = ds.dataset.asstr()[region] if region else ds.dataset.asstr()[()]
            return np.asarray(values, dtype=object).astype(np.dtypes.StringDType())
        values = ds.dataset[region] if region else ds.dataset[()]
        return np.asarray(values).astype(ds.plan.dtype)
    except UnicodeDecodeError as exc:
        raise DatasetRefused(
            "datatype", f"variable-length strings that are not valid UTF-8 ({exc.reason})"
        ) from None
    except CorruptGlobalHeapError as exc:
        raise DatasetRefused("corrupt", str(exc)) from None
    except Exception as exc:  # e.g. a filter h5py cannot decode
        raise DatasetRefused("unreadable", f"h5py cannot read it ({exc})") from None


def _chunk_values(
    ds: StoredDataset, index: tuple[int, ...], chunks: tuple[int, ...], fill: Any
) -> np.ndarray:
    # ``fill`` is the array's fill value: the header fill, as HDF5 returns (and
    # h5netcdf pads with) for unwritten elements.
    out = np.full(chunks, fill, dtype=ds.plan.dtype)
    starts = [i * c for i, c in zip(index, chunks, strict=True)]
    region = tuple(
        slice(start, min(start + c, s))
        for start, c, s in zip(starts, chunks, ds.stored_shape, strict=True)
    )
    if any(r.start >= r.stop for r in region):
        return out
    within = tuple(slice(0, r.stop - r.start) for r in region)
    values = unfiltered_values(ds, index, chunks, within)
    if values is None:
        values = _read_region(ds, region)
    out[within] = values
    return out


def unfiltered_values(
    ds: StoredDataset, index: tuple[int, ...], chunks: tuple[int, ...], within: tuple[slice, ...]
) -> np.ndarray | None:
    """The values of a chunk stored with every filter skipped (a partial edge chunk
    of a dataset that does not filter those), from its bytes when they are at hand:
    what libhdf5 reads for it, as the chunk holds the array's own element layout
    (plain numbers only; anything else is read through h5py). None otherwise."""
    stored = ds.unfiltered.get(index)
    dtype = ds.plan.dtype
    if (
        stored is None
        or ds.plan.storage is not Storage.REFERENCE
        or dtype.kind not in "iufc"
        or not plain_numeric(dtype)
    ):
        return None
    reader = ds.context.reader(ds.context.url)
    data = None if reader is None else reader.cached_range(*stored)
    if data is None:
        return None
    return np.frombuffer(data, dtype=dtype).reshape(chunks)[within]


def _direct_encoder(
    ds: StoredDataset, metadata: ArrayV3Metadata
) -> Callable[[np.ndarray], bytes] | None:
    """Encoders for the two plain chains, avoiding a trip through zarr's event loop."""
    names = [codec.to_dict()["name"] for codec in metadata.codecs]
    if names == ["vlen-utf8"]:
        from numcodecs.vlen import VLenUTF8

        codec = VLenUTF8()
        return lambda values: bytes(codec.encode(np.asarray(values, dtype=object)))
    if names != ["bytes"] or ds.plan.dtype.kind == "T":
        return None
    big = ds.plan.endian == "big" and ds.plan.storage is Storage.REFERENCE
    big = big and ds.layout != h5py.h5d.COMPACT
    if big and ds.plan.dtype.names is not None:
        return None  # rare (unfiltered big-endian compound): zarr's own encoder

    def encode(values: np.ndarray) -> bytes:
        if values.dtype.names is not None:
            values = values.astype(little_endian(values.dtype))  # zarr packs structs
        elif values.dtype.itemsize > 1:
            values = values.astype(values.dtype.newbyteorder(">" if big else "<"))
        return np.ascontiguousarray(values).tobytes()

    return encode


def encode_pending(
    ds: StoredDataset,
    metadata: ArrayV3Metadata,
    chunks: tuple[int, ...],
    pending: list[tuple[int, ...]],
) -> dict[tuple[int, ...], bytes]:
    if not pending:
        return {}
    direct = _direct_encoder(ds, metadata)
    if direct is not None:
        return {
            index: direct(_chunk_values(ds, index, chunks, metadata.fill_value))
            for index in pending
        }
    spec = chunk_spec(metadata, chunks)
    if all(isinstance(codec, SupportsSyncCodec) for codec in metadata.codecs):
        # A trip through zarr's event loop costs more than encoding a few chunks.
        inlined = {}
        for index in pending:
            values = _chunk_values(ds, index, chunks, metadata.fill_value)
            data = _encode_sync(metadata.codecs, spec, values)
            if data is None:
                raise DatasetRefused("unreadable", "a chunk could not be re-encoded")
            inlined[index] = data
        return inlined
    pipeline = BatchedCodecPipeline.from_codecs(metadata.codecs, batch_size=len(pending))
    nd_buffer = default_buffer_prototype().nd_buffer
    batch = [
        (
            nd_buffer.from_numpy_array(_chunk_values(ds, index, chunks, metadata.fill_value)),
            spec,
        )
        for index in pending
    ]
    encoded = sync(pipeline.encode(batch))
    inlined = {}
    for index, buffer in zip(pending, encoded, strict=True):
        if buffer is None:
            raise DatasetRefused("unreadable", "a chunk could not be re-encoded")
        inlined[index] = buffer.to_bytes()
    return inlined


__all__ = ["encode_pending", "materialised_manifest", "unfiltered_values"]
