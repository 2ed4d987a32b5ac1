"""One HDF5 dataset as one virtual Zarr array (:class:`ManifestArray`).

Storage layouts:

* **chunked** (every chunk index: B-tree v1/v2, fixed and paged fixed array,
  extensible array, single chunk, implicit): one manifest entry per allocated chunk,
  read straight from the index's bytes where :mod:`~virtualizarr_fill.hdf5.chunk_index`
  reads that index (B-tree v1, fixed array, single chunk, implicit), else from h5py's
  ``chunk_iter``; unallocated chunks are absent and read as the fill value.
  HDF5 stores edge chunks at full size, so the Zarr grid is the HDF5 chunk grid and
  no truncation is needed for a single file.
* **contiguous**: one chunk covering the array; never-written data has no chunk.
* **compact**: the bytes live in the object header; they are read and inlined.
* **external raw storage**: references into the external files when the segments
  tile the array along its first axis.
* **virtual**: see :mod:`virtualizarr_fill.hdf5.virtual`.

A chunk whose stored bytes the codec chain cannot decode as they are is
*materialised*: read through h5py (which honours the chunk's filter mask and the
"don't filter partial edge chunks" option), re-encoded with the array's codecs and
inlined. That covers chunks stored with some optional filter skipped, unfiltered
partial edge chunks, and edge chunks whose padding h5netcdf shows as fill (a variable
shorter than its unlimited dimension). Never is a chunk handed to a decoder it was
not written with.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import h5py
import numpy as np
from virtualizarr.manifests import ChunkManifest, ManifestArray
from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH
from zarr.abc.codec import BytesBytesCodec, SupportsSyncCodec
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync

from virtualizarr_fill import zarr_metadata
from virtualizarr_fill.codecs.inflate import inflate, inflates_to_chunk
from virtualizarr_fill.fill.hdf5 import consolidate_hdf5_fill
from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.hdf5.attrs import FILL_ATTRIBUTES, VlenReader, convert_attributes
from virtualizarr_fill.hdf5.chunk_btree import btree_problem
from virtualizarr_fill.hdf5.chunk_index import (
    ChunkTable,
    CorruptChunkIndex,
    DatasetGeometry,
    read_chunk_table,
)
from virtualizarr_fill.hdf5.dtypes import (
    DtypePlan,
    Storage,
    UnsupportedDtypeError,
    little_endian,
    plan_dtype,
)
from virtualizarr_fill.hdf5.file_checks import FileChecks
from virtualizarr_fill.hdf5.filters import (
    FilterInfo,
    UnsupportedFilterError,
    filter_codecs,
    read_pipeline,
)
from virtualizarr_fill.hdf5.global_heap import (
    CorruptGlobalHeapError,
    ImplausibleVlenError,
    vlen_payload_bytes,
)
from virtualizarr_fill.hdf5.reader import HDF5File
from virtualizarr_fill.hdf5.urls import join_url
from virtualizarr_fill.hdf5.vlen_descriptors import (
    DescriptorsUnavailable,
    VlenDescriptors,
    compact_data,
    element_size,
    unfiltered,
)
from virtualizarr_fill.hdf5.vlen_descriptors import table as descriptor_table
from virtualizarr_fill.manifests import FillManifestArray

_log = logging.getLogger(__name__)

RefusalKind = Literal[
    "datatype", "filter", "layout", "dataspace", "size", "corrupt", "unreadable", "external"
]


#: Parse-time verification of one chunk per filtered dataset (only when its bytes are
#: already fetched): largest chunk it decodes (decoding costs 1-3 ms per MiB, paid once
#: per dataset), and largest stored chunk it picks (a corrupt chunk can decode to far
#: more than its chunk dimensions say; deflate expands at most ~1000-fold).
VERIFY_CHUNK_MAX_BYTES = 1 << 20
VERIFY_STORED_MAX_BYTES = 64 << 10


def _no_reader(url: str) -> HDF5File | None:
    return None


def _no_refusal(url: str, target_url: str, what: str) -> str | None:
    return None


def _no_checks(url: str) -> FileChecks | None:
    return None


class DatasetRefused(Exception):
    """A dataset that cannot become a virtual array; ``kind`` groups the reasons."""

    def __init__(self, kind: RefusalKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: RefusalKind = kind
        self.reason = reason


@dataclass(frozen=True)
class ArrayContext:
    """What building arrays needs to know about the file and the parser's options."""

    url: str
    file_size: int
    on_fill_out_of_range: Literal["warn", "raise"]
    max_inline_bytes: int
    #: HEAD-like check that an object exists (external raw storage targets).
    exists: Callable[[str], bool]
    #: Open another HDF5 file of the session: (h5py file, size in bytes) (VDS sources).
    open_file: Callable[[str], tuple[h5py.File, int]]
    #: Largest chunk grid a manifest may have (a dense manifest costs ~40 bytes a chunk).
    max_chunks: int = 1 << 22
    #: The open reader of a file of the session (for bytes it has already fetched and
    #: the file's superblock facts), or None.
    reader: Callable[[str], HDF5File | None] = _no_reader
    #: The path of an object opened through an object reference (None: unknown; default:
    #: libhdf5's name for it).
    object_path: Callable[[Any], str | bytes | None] | None = None
    #: Why a reference from one file (URL) to another (URL), described by the third
    #: argument, may not be followed (the path policy), or None.
    refusal: Callable[[str, str, str], str | None] = _no_refusal
    #: The object at a path of an opened file, opened one checked group at a time
    #: (None: h5py's lookup).
    open_path: Callable[[str, str], Any] | None = None
    #: Reads the stored descriptors of variable-length attributes (None: their values
    #: are read unbounded, as h5py reads them).
    vlen_attribute: VlenReader | None = None
    #: Why an object's attributes cannot be read safely (their storage checked), or
    #: None; for datasets whose attributes the caller has not read.
    attributes_problem: Callable[[Any, str], str | None] | None = None
    #: The structure checks of an opened file of the session (by URL), or None.
    checks: Callable[[str], FileChecks | None] = _no_checks


@dataclass(frozen=True)
class Target:
    """The array a dataset becomes: its netCDF shape and dimension names, and the path
    it is reported under (default: the dataset's own name)."""

    shape: tuple[int, ...]
    dimension_names: tuple[str, ...]
    path: str | None = None


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
    dcpl = getattr(dataset, "_dcpl", None)
    if dcpl is None:
        dcpl = dataset.id.get_create_plist()
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
    builder = _ArrayBuilder(dataset, dtype, dcpl, plan, target, context)
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        return builder.build_virtual({**json_attrs, **typed})
    return builder.build({**json_attrs, **typed})


# ---------------------------------------------------------------------------------
# helpers


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
    once per distinct input, see :mod:`virtualizarr_fill.zarr_metadata`)."""
    chain = list(codecs)
    if dtype.kind == "T" and not chain:
        chain = [{"name": "vlen-utf8", "configuration": {}}]
    return zarr_metadata.array_metadata(
        shape=shape,
        data_type=zarr_metadata.zarr_data_type(dtype),
        dtype=dtype,
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": chunks}},
        chunk_key_encoding={"name": "default"},
        fill_value=fill_value,
        codecs=chain,
        attributes=attributes,
        dimension_names=dimension_names,
    )


def _clamped(shape: Sequence[int]) -> tuple[int, ...]:
    # Zarr forbids zero-length chunk edges; HDF5 allows zero-length arrays.
    return tuple(max(int(s), 1) for s in shape)


def _grid_shape(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    return tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))


def _header_fill(dtype: np.dtype, dcpl: h5py.h5p.PropDCID) -> Any:
    """The header fill value as :func:`consolidate_hdf5_fill` expects it: h5py's
    ``dataset.fillvalue`` (the same calls, with the dataset's dtype at hand)."""
    try:
        defined = dcpl.fill_value_defined()
        if defined == h5py.h5d.FILL_VALUE_UNDEFINED:
            return None
        value = np.zeros((1,), dtype=dtype)
        if defined == h5py.h5d.FILL_VALUE_DEFAULT and _plain_numeric(dtype):
            # libhdf5 zero-fills a default fill value without a type conversion
            # (H5P_get_fill_value); the conversion path costs more than the read.
            return value[0]
        dcpl.get_fill_value(value)
        return value[0]
    except Exception:  # fill message of a type h5py cannot convert
        return None


def _plain_numeric(dtype: np.dtype) -> bool:
    """An integer, float or complex dtype without fields or h5py metadata."""
    return dtype.kind in "biufc" and dtype.fields is None and not dtype.metadata


@functools.cache
def _array_config() -> ArrayConfig:
    # Parsing zarr's runtime config costs more than decoding a small chunk; the codecs
    # run here (size checks, re-encoding) do not depend on it.
    return ArrayConfig.from_dict({})


def _chunk_spec(metadata: ArrayV3Metadata, chunks: tuple[int, ...]) -> ArraySpec:
    return ArraySpec(
        shape=chunks,
        dtype=metadata.data_type,
        fill_value=metadata.fill_value,
        config=_array_config(),
        prototype=default_buffer_prototype(),
    )


def _decoded_size(
    metadata: ArrayV3Metadata, chunks: tuple[int, ...], data: bytes, expected: int
) -> int:
    """Length of one stored chunk after the array's bytes->bytes codecs.

    Decoded codec by codec, synchronously where the codec allows it (all but one of the
    codecs the parser writes): a trip through zarr's event loop would cost more than
    decoding a small chunk. A deflate stream, alone or under size-preserving shuffles,
    is first inflated by libdeflate into ``expected`` bytes (about twice zlib's speed);
    a stream that does not fit, or that libdeflate refuses, goes the general way, which
    names the problem.
    """
    bb_codecs = [c for c in metadata.codecs if isinstance(c, BytesBytesCodec)]
    if bb_codecs and inflates_to_chunk(bb_codecs, len(bb_codecs) - 1):
        inflated = inflate(data, expected)
        if inflated is not None:  # else the general path decodes again and reports it
            return len(inflated)
    spec = _chunk_spec(metadata, chunks)
    buffer = default_buffer_prototype().buffer.from_bytes(data)
    for codec in reversed(metadata.codecs):
        if not isinstance(codec, BytesBytesCodec):
            break
        if isinstance(codec, SupportsSyncCodec):
            buffer = codec._decode_sync(buffer, spec)
        else:
            decoded = next(iter(sync(codec.decode([(buffer, spec)]))))
            if decoded is None:
                raise ValueError(f"codec {codec.to_dict()['name']} decoded nothing")
            buffer = decoded
    return len(buffer)


def _encode_sync(codecs: Sequence[Any], spec: ArraySpec, values: np.ndarray) -> bytes | None:
    """One chunk through a chain of synchronous codecs, in order, each seeing the chunk
    spec the previous one resolved (as zarr's codec pipeline does); None if a codec
    encoded nothing."""
    chunk: Any = default_buffer_prototype().nd_buffer.from_numpy_array(values)
    for codec in codecs:
        chunk = codec._encode_sync(chunk, spec)
        if chunk is None:
            return None
        spec = codec.resolve_metadata(spec)
    return bytes(chunk.to_bytes())


def _max_encoded_size(nbytes: int) -> int:
    """A generous bound on any HDF5 filter chain's output for ``nbytes`` of input.

    Compressors expand incompressible data by well under 1% plus a small header (zlib,
    bzip2, LZ4, Zstandard, Blosc; bitshuffle adds 4 bytes per 8 KiB block; fletcher32 4
    bytes); an optional filter that fails leaves the data as is.
    """
    return nbytes + nbytes // 8 + 4096


@functools.cache
def _load_filter_plugins() -> None:
    """Let h5py decode third-party filters (LZ4, bitshuffle, Blosc, Zstd, ...) when values
    must be read at parse time; hdf5plugin is optional."""
    with contextlib.suppress(ImportError):
        import hdf5plugin  # noqa: F401


class _ArrayBuilder:
    def __init__(
        self,
        dataset: h5py.Dataset,
        dtype: np.dtype,
        dcpl: h5py.h5p.PropDCID,
        plan: DtypePlan,
        target: Target,
        context: ArrayContext,
    ) -> None:
        self.dataset = dataset
        self.dtype = dtype  # the dataset's (h5py's ``dataset.dtype``)
        self.dcpl = dcpl
        self.plan = plan
        self.target = target
        self.context = context
        self.layout = dcpl.get_layout()
        self.stored_shape = tuple(int(s) for s in dataset.shape)
        self.shape = target.shape
        self.name = target.path if target.path is not None else dataset.name
        #: Rewritten chunks stored with every filter skipped: (byte offset, length).
        self.unfiltered: dict[tuple[int, ...], tuple[int, int]] = {}
        #: The chunk table read from the index (None: libhdf5 lists the chunks).
        self.table: ChunkTable | None = None

    # -- top level ---------------------------------------------------------------

    def build(self, attributes: dict[str, Any]) -> ManifestArray:
        if self.layout == h5py.h5d.CHUNKED:
            # Read (and check) the chunk index before any libhdf5 call that walks it
            # (storage sizes, reads of materialised values).
            self.table = self._direct_chunk_table()
        materialise = self.plan.storage is Storage.MATERIALISE or self.layout == h5py.h5d.COMPACT
        if materialise:
            chunks = self._materialised_chunk_shape()
            codecs = self._materialised_codecs()
        else:
            chunks = self._chunk_shape()
            codecs = [self._bytes_codec(), *self._filter_codecs(chunks)]
        grid = _grid_shape(self.shape, chunks)
        if math.prod(grid) > self.context.max_chunks:
            raise DatasetRefused(
                "size",
                f"a grid of {math.prod(grid)} chunks exceeds max_chunks={self.context.max_chunks} "
                "(HDF5Parser(max_chunks=...) admits larger grids, at about 40 bytes a chunk)",
            )
        metadata_for = self._metadata_factory(attributes, chunks, codecs)
        if materialise:
            manifest_parts = self._materialised_manifest(chunks, grid)
        elif self.layout == h5py.h5d.CHUNKED:
            manifest_parts = self._chunked_manifest(chunks, grid)
        elif self.layout == h5py.h5d.CONTIGUOUS:
            manifest_parts = self._contiguous_manifest(chunks, grid)
        else:
            raise DatasetRefused("layout", f"unknown storage layout {self.layout}")
        paths, offsets, lengths, pending = manifest_parts
        stored = int(np.count_nonzero(lengths)) + len(pending)
        metadata = metadata_for(stored < math.prod(grid))
        if not materialise and self.layout == h5py.h5d.CHUNKED and self.filters:
            self._verify_one_chunk(metadata, chunks, offsets, lengths)
        inlined = self._encode_pending(metadata, chunks, pending)
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

    def build_virtual(self, attributes: dict[str, Any]) -> ManifestArray:
        """A virtual dataset (VDS): references into its source datasets."""
        from virtualizarr_fill.hdf5.virtual import build_virtual_array

        if self.plan.storage is not Storage.REFERENCE:
            raise DatasetRefused(
                "layout",
                f"virtual dataset (VDS) of a type that must be materialised ({self.plan.reason})",
            )

        def finish(
            chunks: tuple[int, ...], codecs: list[dict[str, Any]], manifest: ChunkManifest
        ) -> ManifestArray:
            stored = int(np.count_nonzero(manifest._lengths))
            grid = _grid_shape(self.shape, chunks)
            metadata = self._metadata_factory(attributes, chunks, codecs)(stored < math.prod(grid))
            return FillManifestArray(metadata=metadata, chunkmanifest=manifest)

        return build_virtual_array(self.dataset, self.dcpl, self.target, self.context, finish)

    # -- codecs ------------------------------------------------------------------

    def _bytes_codec(self) -> dict[str, Any]:
        endian = self.plan.endian or "little"
        return {"name": "bytes", "configuration": {"endian": endian}}

    def _filter_codecs(self, chunks: Sequence[int]) -> list[dict[str, Any]]:
        self.filters: list[FilterInfo] = read_pipeline(self.dcpl)
        try:
            return filter_codecs(self.filters, dtype=self.dtype, chunk_shape=chunks)
        except UnsupportedFilterError as exc:
            raise DatasetRefused("filter", str(exc)) from None

    def _materialised_codecs(self) -> list[dict[str, Any]]:
        if self.plan.is_string:
            return []  # array_metadata adds vlen-utf8
        return [{"name": "bytes", "configuration": {"endian": "little"}}]

    def _metadata_factory(
        self, attributes: dict[str, Any], chunks: tuple[int, ...], codecs: list[dict[str, Any]]
    ) -> Callable[[bool], ArrayV3Metadata]:
        def make(has_unallocated: bool) -> ArrayV3Metadata:
            fill_dtype = self.dtype if self.plan.is_string else self.plan.dtype
            decision = consolidate_hdf5_fill(
                _header_fill(self.dtype, self.dcpl),
                attributes,
                fill_dtype,
                source=self.context.url,
                on_out_of_range=self.context.on_fill_out_of_range,
                has_unallocated_chunks=has_unallocated,
                dataset=self.name,
            )
            return array_metadata(
                shape=self.shape,
                dtype=self.plan.dtype,
                chunks=chunks,
                fill_value=decision.fill_value,
                codecs=codecs,
                attributes=decision.attributes,
                dimension_names=self.target.dimension_names,
            )

        return make

    # -- chunk shapes --------------------------------------------------------------

    def _chunk_shape(self) -> tuple[int, ...]:
        if self.layout == h5py.h5d.CHUNKED:
            return tuple(int(c) for c in self.dataset.chunks)
        if self.dcpl.get_external_count() > 0 and math.prod(self.stored_shape) > 0:
            self._external = self._external_segments()
            rows = self._external[0]
            return _clamped((rows, *self.stored_shape[1:])) if self.stored_shape else ()
        return _clamped(self.stored_shape)

    def _materialised_chunk_shape(self) -> tuple[int, ...]:
        if self.layout == h5py.h5d.CHUNKED and self.dataset.chunks is not None:
            return tuple(int(c) for c in self.dataset.chunks)
        return _clamped(self.shape)

    # -- manifests -----------------------------------------------------------------

    def _empty(self, grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        paths = np.empty(grid, dtype=np.dtypes.StringDType())  # all ""
        offsets = np.zeros(grid, dtype=np.uint64)
        lengths = np.zeros(grid, dtype=np.uint64)
        return paths, offsets, lengths

    def _fetch(self, reader: HDF5File) -> Callable[[int, int], bytes | None]:
        """Read bytes of the file (fetching what is missing), None past its end."""
        size = reader.size

        def read(position: int, length: int) -> bytes | None:
            if position < 0 or length < 0 or position + length > size:
                return None
            return reader.read_range(position, length)

        return read

    def _direct_chunk_table(self) -> ChunkTable | None:
        """The chunk table read from the index's bytes (see
        :mod:`~virtualizarr_fill.hdf5.chunk_index`), or None for libhdf5 to list."""
        reader = self.context.reader(self.context.url)
        if reader is None:
            return None
        dataset = self.dataset
        geometry = DatasetGeometry(
            shape=self.stored_shape,
            maxshape=tuple(None if m is None else int(m) for m in dataset.maxshape),
            chunks=tuple(int(c) for c in dataset.chunks),
            filtered=self.dcpl.get_nfilters() > 0,
        )
        header = _libhdf5.object_address(dataset.id)
        checks = self.context.checks(self.context.url)
        stored = None if checks is None else checks.object(header, f"dataset {self.name!r}")
        try:
            return read_chunk_table(
                self._fetch(reader),
                base=reader.base,
                header=header,
                sizes=(reader.address_size, reader.length_size),
                geometry=geometry,
                file_size=reader.size,
                stored=None if stored is None else stored.messages,
            )
        except CorruptChunkIndex as exc:
            raise DatasetRefused("corrupt", str(exc)) from None
        except (ValueError, IndexError, OverflowError):
            return None  # a structure outside what the reader expects: libhdf5 decides

    def _iterated_chunk_table(self) -> ChunkTable:
        """The chunk table as libhdf5 lists it (h5py's ``chunk_iter``)."""
        infos: list[Any] = []
        dsid = self.dataset.id
        try:
            if hasattr(dsid, "chunk_iter"):
                dsid.chunk_iter(infos.append)
            else:
                infos = [dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks())]
        except Exception as exc:  # corrupt chunk index
            raise DatasetRefused("corrupt", f"chunk index unreadable ({exc})") from None
        n = len(infos)
        ndim = len(self.dataset.chunks)
        if not n:
            empty = np.zeros(0, dtype=np.uint64)
            return ChunkTable(
                "chunk_iter", np.zeros((0, ndim), np.int64), empty, empty, empty.astype(np.int64)
            )
        # One transposition of h5py's StoreInfo tuples (chunk_offset, filter_mask,
        # byte_offset, size) instead of a Python loop per field.
        chunk_offsets, filter_masks, addresses, stored_sizes = zip(*infos, strict=True)
        return ChunkTable(
            source="chunk_iter",
            coords=np.array(chunk_offsets, dtype=np.int64).reshape(n, ndim),
            addresses=np.array(addresses, dtype=np.uint64),
            sizes=np.array(stored_sizes, dtype=np.uint64),
            masks=np.array(filter_masks, dtype=np.int64),
        )

    def _chunked_manifest(
        self, chunks: tuple[int, ...], grid: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
        paths, offsets, lengths = self._empty(grid)
        table = self.table
        if table is None:
            table = self._iterated_chunk_table()
        _log.debug("%s: chunk table from %s (%d chunks)", self.name, table.source, len(table.sizes))
        pending: list[tuple[int, ...]] = []
        if not len(table.sizes):
            return paths, offsets, lengths, pending
        index_type = _libhdf5.get_chunk_index_type(self.dataset.id)
        self._check_single_chunk_index(index_type, grid)
        n = len(table.sizes)
        ndim = len(chunks)
        coords, byte_offsets, sizes, masks = table.coords, table.addresses, table.sizes, table.masks
        positions = self._grid_positions(table, chunks, grid)
        file_size = self.context.file_size
        ends = byte_offsets + sizes
        wrapped = np.flatnonzero(ends < byte_offsets)  # past 2**64: in Python integers
        if wrapped.size:
            first = int(wrapped[0])
            end = int(byte_offsets[first]) + int(sizes[first])
        else:
            end = int(ends.max()) if n else 0
        if end > file_size:
            raise DatasetRefused(
                "corrupt",
                f"chunks extend to byte {end} past the end of the file "
                f"({file_size} bytes): the file is truncated",
            )
        if table.source == "chunk_iter":
            # Tables read from the index list each chunk once by construction (array
            # indexes) or by the walk's checks (B-tree keys strictly increasing).
            flat = np.sort(positions) if ndim else coords
            if ndim and np.any(flat[1:] == flat[:-1]):
                raise DatasetRefused("corrupt", "chunk index lists the same chunk twice")
            self._check_index_keys(index_type, coords, byte_offsets)
        expected = math.prod(chunks) * self.dtype.itemsize
        if not self.filters:
            if np.any((sizes != expected) & (sizes != 0)):
                raise DatasetRefused(
                    "corrupt",
                    f"unfiltered chunks stored with sizes other than their {expected} bytes",
                )
        elif int(sizes.max()) > _max_encoded_size(expected):
            # No filter expands data this much: the chunk shape is not what was stored.
            raise DatasetRefused(
                "corrupt",
                f"a stored chunk of {int(sizes.max())} bytes is larger than any encoding of "
                f"a {expected}-byte chunk: the chunk shape does not match the stored chunks",
            )
        needs_rewrite = masks != 0
        if ndim:
            needs_rewrite |= self._edge_rewrites(positions, chunks, grid)
        # Flat views of the fresh (contiguous) arrays: assigning at flat positions costs
        # a fraction of assigning at a tuple of per-axis indices.
        offsets.reshape(-1)[positions] = byte_offsets
        lengths.reshape(-1)[positions] = sizes
        # An allocated chunk of no bytes holds nothing to decode: treat as absent.
        stored = sizes != 0
        needs_rewrite &= stored
        # A boolean mask assigns strings several times faster than an index tuple.
        present = np.zeros(grid, dtype=bool)
        present.reshape(-1)[positions] = stored
        paths[present] = self.context.url
        skipped_all = (1 << len(self.filters)) - 1
        for row in np.flatnonzero(needs_rewrite):
            index = tuple(int(i) for i in np.unravel_index(int(positions[row]), grid))
            pending.append(index)
            if (
                self.filters
                and int(masks[row]) & skipped_all == skipped_all
                and int(sizes[row]) == expected
            ):
                self.unfiltered[index] = (int(byte_offsets[row]), int(sizes[row]))
            paths[index] = ""
            offsets[index] = 0
            lengths[index] = 0
        return paths, offsets, lengths, pending

    def _grid_positions(
        self, table: ChunkTable, chunks: tuple[int, ...], grid: tuple[int, ...]
    ) -> np.ndarray:
        """Each listed chunk's row-major position in the manifest's chunk grid; refuses
        chunks off that grid. Array indexes list positions in the grid of the maximum
        shape: when that is the manifest's grid they serve as they are."""
        if table.positions is not None and table.grid == grid:
            return table.positions
        index_columns = []
        for axis, (chunk, extent) in enumerate(zip(chunks, grid, strict=True)):
            # Per-axis columns: NumPy reduces an (n, rank) array along its first axis
            # an order of magnitude slower than the rank 1-D columns.
            scaled, remainder = np.divmod(table.coords[:, axis], chunk)
            # Offsets past 2**63 read as negative int64.
            if remainder.any() or int(scaled.max()) >= extent or int(scaled.min()) < 0:
                raise DatasetRefused("corrupt", "chunk index lists chunks off the chunk grid")
            index_columns.append(scaled)
        if not index_columns:
            return np.zeros(len(table.sizes), dtype=np.intp)
        return np.ravel_multi_index(tuple(index_columns), grid)

    def _check_index_keys(
        self, index_type: int | None, coords: np.ndarray, byte_offsets: np.ndarray
    ) -> None:
        """libhdf5 reads a chunk of a B-tree index by searching its key, while the
        manifest comes from iterating the index: the two must agree (see
        :mod:`~virtualizarr_fill.hdf5.chunk_btree`). Iteration visits B-tree keys in
        order, so chunks listed out of order mean keys a search would miss. (A table
        read from a version 1 B-tree was checked by the walk that read it.)"""
        keyed = (_libhdf5.CHUNK_INDEX_BTREE, _libhdf5.CHUNK_INDEX_BT2)
        if index_type in keyed and len(coords) > 1 and coords.shape[1]:
            later, earlier = coords[1:], coords[:-1]
            differs = later != earlier
            first = np.argmax(differs, axis=1)
            rows = np.arange(len(first))
            backwards = np.flatnonzero(later[rows, first] < earlier[rows, first])
            if backwards.size:
                row = int(backwards[0])
                raise DatasetRefused(
                    "corrupt",
                    f"chunk index lists chunk {coords[row + 1].tolist()} after "
                    f"{coords[row].tolist()}: its keys are out of order, and libhdf5's "
                    "search would not find every chunk",
                )
        reader = self.context.reader(self.context.url)
        # An unknown index type (no ctypes access): the layout message tells.
        if index_type not in (_libhdf5.CHUNK_INDEX_BTREE, None) or reader is None:
            return
        problem = btree_problem(
            reader.cached_range,
            base=reader.base,
            header=_libhdf5.object_address(self.dataset.id),
            sizes=(reader.address_size, reader.length_size),
            offsets=coords,
            addresses=byte_offsets,
        )
        if problem is not None:
            raise DatasetRefused(
                "corrupt", f"{problem}: libhdf5 would read fill values where chunks are"
            )

    def _check_single_chunk_index(self, index_type: int | None, grid: tuple[int, ...]) -> None:
        """A "single chunk" index holds one chunk, which libhdf5 then serves for every
        chunk position: with chunk dimensions smaller than the dataset, the header
        contradicts itself (no writer produces that)."""
        if math.prod(grid) > 1 and index_type == _libhdf5.CHUNK_INDEX_SINGLE:
            raise DatasetRefused(
                "corrupt",
                f"a single-chunk index, but chunks {tuple(self.dataset.chunks)} make a grid "
                f"of {math.prod(grid)} chunks over shape {self.stored_shape}",
            )

    def _verify_one_chunk(
        self,
        metadata: ArrayV3Metadata,
        chunks: tuple[int, ...],
        offsets: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        """Decode the smallest referenced chunk with the array's codecs, when its bytes
        are already fetched (no request; decoding costs little for chunks up to
        :data:`VERIFY_CHUNK_MAX_BYTES`, stored in up to :data:`VERIFY_STORED_MAX_BYTES`).

        Chunk dimensions or a filter pipeline that do not match the stored chunks (a
        corrupt layout or filter message) then fail here, at parse time, instead of in
        every read: libhdf5 silently uses the first bytes of a decoded chunk larger than
        the chunk dimensions say, so such references could never read back what h5py
        shows. A corrupt or checksum-failing chunk is refused the same way.
        """
        expected = math.prod(chunks) * self.dtype.itemsize
        if expected > VERIFY_CHUNK_MAX_BYTES or not lengths.size:
            return
        candidates = np.where(lengths > 0, lengths, np.iinfo(np.uint64).max)
        flat = int(np.argmin(candidates))
        length = int(lengths.flat[flat])
        if length == 0 or length > VERIFY_STORED_MAX_BYTES:
            return
        offset = int(offsets.flat[flat])
        reader = self.context.reader(self.context.url)
        data = None if reader is None else reader.cached_range(offset, length)
        if data is None:
            return
        try:
            size = _decoded_size(metadata, chunks, data, expected)
        except Exception as exc:  # the codecs' own complaint is the detail
            problem = f"does not decode ({type(exc).__name__}: {exc})"
        else:
            if size == expected:
                return
            problem = f"decodes to {size} bytes, not the {expected} bytes of a {chunks} chunk"
        index = tuple(int(i) for i in np.unravel_index(flat, lengths.shape))
        raise DatasetRefused(
            "corrupt",
            f"chunk {index} ({length} bytes at byte {offset}) {problem}: the chunk is "
            "corrupt, or the chunk dimensions or filters do not match the stored chunks",
        )

    def _edge_rewrites(
        self, positions: np.ndarray, chunks: tuple[int, ...], grid: tuple[int, ...]
    ) -> np.ndarray:
        """Chunks whose stored bytes cannot be decoded as they are (see module doc);
        ``positions`` are the chunks' row-major positions in ``grid``."""
        rewrite = np.zeros(len(positions), dtype=bool)
        # Per axis, chunks starting past ``limit`` reach past the stored shape; only
        # axes whose last grid row starts past it can have such chunks.
        limits = [s - c for s, c in zip(self.stored_shape, chunks, strict=True)]
        axes = [
            axis
            for axis, (limit, chunk, extent) in enumerate(zip(limits, chunks, grid, strict=True))
            if (extent - 1) * chunk > limit
        ]
        if not axes:
            return rewrite  # every chunk lies inside the stored shape
        indices = np.unravel_index(positions, grid)
        starts = {axis: indices[axis] * chunks[axis] for axis in axes}
        beyond = {
            axis: column > limits[axis]
            for axis, column in starts.items()
            if int(column.max()) > limits[axis]
        }
        if not beyond:
            return rewrite
        partial = np.logical_or.reduce(list(beyond.values()))
        if self.filters and partial.any():
            options = _libhdf5.get_chunk_opts(self.dcpl)
            if options is None:
                raise DatasetRefused(
                    "layout",
                    "cannot tell whether partial edge chunks are filtered "
                    "(H5Pget_chunk_opts unavailable)",
                )
            if options & _libhdf5.DONT_FILTER_PARTIAL_CHUNKS:
                rewrite |= partial
        for axis, reaches in beyond.items():
            if self.shape[axis] > self.stored_shape[axis]:
                # Padding of the last stored chunk becomes visible inside the netCDF shape.
                rewrite |= reaches
        return rewrite

    def _contiguous_manifest(
        self, chunks: tuple[int, ...], grid: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
        paths, offsets, lengths = self._empty(grid)
        pending: list[tuple[int, ...]] = []
        if self.dcpl.get_external_count() > 0:
            self._external_manifest(chunks, paths, offsets, lengths)
            return paths, offsets, lengths, pending
        offset = self.dataset.id.get_offset()
        nbytes = math.prod(self.stored_shape) * self.dtype.itemsize
        if offset is None or nbytes == 0:
            return paths, offsets, lengths, pending  # never written: reads as fill
        size = self.dataset.id.get_storage_size()
        if size < nbytes:
            raise DatasetRefused(
                "corrupt", f"contiguous storage of {size} bytes holds less than {nbytes} bytes"
            )
        if offset + nbytes > self.context.file_size:
            raise DatasetRefused(
                "corrupt",
                f"data ends at byte {offset + nbytes}, past the end of the file "
                f"({self.context.file_size} bytes): the file is truncated",
            )
        index = (0,) * len(grid)
        paths[index] = self.context.url
        offsets[index] = offset
        lengths[index] = nbytes
        return paths, offsets, lengths, pending

    def _external_segments(self) -> tuple[int, list[tuple[str, int, int]]]:
        """External raw storage as (rows per segment, [(url, offset), ...]).

        The segments of other files are concatenated in order; they are expressible as
        references when one segment holds the whole array, or when every segment holds
        the same whole number of rows (the last may hold more than the rest needs).
        """
        segments = [self.dcpl.get_external(i) for i in range(self.dcpl.get_external_count())]
        itemsize = self.dtype.itemsize
        nbytes = math.prod(self.stored_shape) * itemsize
        rows_total = self.stored_shape[0] if self.stored_shape else 1
        if len(segments) == 1 or not self.stored_shape:
            name, offset, size = segments[0]
            if size != h5py.h5f.UNLIMITED and size < nbytes:
                raise DatasetRefused(
                    "external",
                    f"external raw segment of {size} bytes is shorter than the {nbytes}-byte array",
                )
            return max(rows_total, 1), [(self._external_url(name), int(offset), int(size))]
        row_bytes = math.prod(self.stored_shape[1:]) * itemsize
        sizes = [int(size) for _, _, size in segments]
        first = sizes[0]
        if row_bytes == 0 or first % row_bytes or any(s != first for s in sizes[:-1]):
            raise DatasetRefused(
                "external",
                f"external raw storage segments of {sizes} bytes do not tile rows of "
                f"{row_bytes} bytes",
            )
        rows = first // row_bytes
        needed = math.ceil(rows_total / rows) if rows else 0
        if rows == 0 or needed > len(segments):
            raise DatasetRefused("external", "external raw storage segments are too short")
        last_needed = (rows_total - rows * (needed - 1)) * row_bytes
        if needed and sizes[needed - 1] != h5py.h5f.UNLIMITED and sizes[needed - 1] < last_needed:
            raise DatasetRefused("external", "the last external raw segment is too short")
        return rows, [(self._external_url(n), int(o), int(z)) for n, o, z in segments[:needed]]

    def _external_manifest(
        self,
        chunks: tuple[int, ...],
        paths: np.ndarray,
        offsets: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        if math.prod(self.stored_shape) == 0:
            return
        rows, segments = self._external
        itemsize = self.dtype.itemsize
        row_bytes = math.prod(self.stored_shape[1:]) * itemsize if self.stored_shape else itemsize
        total_rows = self.stored_shape[0] if self.stored_shape else 1
        for number, (url, offset, size) in enumerate(segments):
            index = (number,) + (0,) * (paths.ndim - 1) if paths.ndim else ()
            rows_here = min(rows, total_rows - number * rows)
            if rows_here < rows and (size == h5py.h5f.UNLIMITED or size < rows * row_bytes):
                # The codec chain decodes whole chunks; a short last one would not reshape.
                raise DatasetRefused(
                    "external", "the last external raw segment holds only part of a chunk"
                )
            paths[index] = url
            offsets[index] = offset
            lengths[index] = rows * row_bytes if paths.ndim else row_bytes

    def _external_url(self, name: bytes | str) -> str:
        text = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
        url = join_url(self.context.url, text)
        refusal = self.context.refusal(self.context.url, url, f"external raw storage {text!r}")
        if refusal is not None:
            raise DatasetRefused("external", refusal)
        if not self.context.exists(url):
            raise DatasetRefused(
                "external", f"external raw storage file {text!r} not found (looked for {url})"
            )
        return url

    def _materialised_manifest(
        self, chunks: tuple[int, ...], grid: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
        paths, offsets, lengths = self._empty(grid)
        nbytes = math.prod(self.shape) * max(self.plan.dtype.itemsize, 1)
        if self.plan.is_string:
            nbytes = max(nbytes, self.dataset.id.get_storage_size())
        if nbytes > self.context.max_inline_bytes:
            what = self.plan.reason or "compact storage"
            raise DatasetRefused(
                "size",
                f"{what} must be read and inlined, but {nbytes} bytes exceed "
                f"max_inline_bytes={self.context.max_inline_bytes}",
            )
        if math.prod(self.stored_shape) == 0 or not self._has_storage():
            return paths, offsets, lengths, []
        if self.plan.is_string:
            self._check_vlen_payload()
        pending = [tuple(int(i) for i in index) for index in np.ndindex(grid)]
        return paths, offsets, lengths, pending

    def _check_vlen_payload(self) -> None:
        """Bound what the strings' stored descriptors claim before h5py reads them:
        libhdf5 allocates each claimed length before it reads the heap."""
        what = f"variable-length strings of {self.name!r}"
        checks = self.context.checks(self.context.url)
        if checks is None:
            return  # not parsed through a session: read unbounded, as h5py would
        try:
            stored = self._stored_descriptors(checks)
        except DescriptorsUnavailable as exc:
            raise DatasetRefused("unreadable", f"{what}: descriptors unreadable ({exc})") from None
        if stored is None:
            return  # nothing written
        address_size = checks.facts.address_size
        descriptors = VlenDescriptors(
            stored, address_size, _libhdf5.vlen_base_size(self.dataset.id)
        )
        try:
            payload = vlen_payload_bytes(descriptors, self.context.file_size, what=what)
        except ImplausibleVlenError as exc:
            raise DatasetRefused("corrupt", str(exc)) from None
        if payload > self.context.max_inline_bytes:
            raise DatasetRefused(
                "size",
                f"{what} must be read and inlined, but they hold {payload} bytes, more than "
                f"max_inline_bytes={self.context.max_inline_bytes}",
            )

    def _stored_descriptors(self, checks: FileChecks) -> np.ndarray | None:
        """The descriptors of every stored element, read from the file's bytes (rows of
        ``8 + size of offsets`` bytes), or None when nothing was written."""
        count = math.prod(self.stored_shape)
        address_size = checks.facts.address_size
        size = element_size(address_size)
        if self.layout == h5py.h5d.COMPACT:
            header = _libhdf5.object_address(self.dataset.id)
            data = compact_data(checks.object(header, f"dataset {self.name!r}").messages or ())
            if data is None:
                raise DescriptorsUnavailable("the layout message holds no compact data")
            return descriptor_table(data, count, address_size)
        if self.layout == h5py.h5d.CONTIGUOUS:
            if self.dcpl.get_external_count() > 0:
                raise DescriptorsUnavailable("strings in external raw storage")
            offset = self.dataset.id.get_offset()
            if offset is None:
                return None
            return descriptor_table(self._stored_bytes(offset, count * size), count, address_size)
        table = self.table if self.table is not None else self._iterated_chunk_table()
        if not len(table.sizes):
            return None
        chunks = tuple(int(c) for c in self.dataset.chunks)
        per_chunk = math.prod(chunks)
        filters = [(f.filter_id, f.cd_values) for f in read_pipeline(self.dcpl)]
        rows = []
        for coords, address, stored, mask in zip(
            table.coords, table.addresses, table.sizes, table.masks, strict=True
        ):
            data = unfiltered(
                self._stored_bytes(int(address), int(stored)), filters, int(mask), per_chunk * size
            )
            block = descriptor_table(data, per_chunk, address_size).reshape(*chunks, size)
            region = tuple(
                slice(0, max(min(c, s - int(o)), 0))
                for c, s, o in zip(chunks, self.stored_shape, coords, strict=True)
            )
            rows.append(block[region].reshape(-1, size))
        return np.concatenate(rows)

    def _stored_bytes(self, offset: int, length: int) -> bytes:
        if offset < 0 or offset + length > self.context.file_size:
            raise DatasetRefused(
                "corrupt",
                f"storage of {self.name!r} ends at byte {offset + length}, past the end of the "
                f"file ({self.context.file_size} bytes): the file is truncated",
            )
        reader = self.context.reader(self.context.url)
        if reader is None:
            raise DescriptorsUnavailable("the file's bytes are not at hand")
        return reader.read_range(offset, length)

    def _has_storage(self) -> bool:
        if self.layout == h5py.h5d.COMPACT:
            return True
        try:
            return self.dataset.id.get_storage_size() > 0
        except Exception:
            return True

    # -- materialised chunks --------------------------------------------------------

    def _read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        _load_filter_plugins()
        try:
            if self.plan.is_string:
                values = self.dataset.asstr()[region] if region else self.dataset.asstr()[()]
                return np.asarray(values, dtype=object).astype(np.dtypes.StringDType())
            values = self.dataset[region] if region else self.dataset[()]
            return np.asarray(values).astype(self.plan.dtype)
        except UnicodeDecodeError as exc:
            raise DatasetRefused(
                "datatype", f"variable-length strings that are not valid UTF-8 ({exc.reason})"
            ) from None
        except CorruptGlobalHeapError as exc:
            raise DatasetRefused("corrupt", str(exc)) from None
        except Exception as exc:  # e.g. a filter h5py cannot decode
            raise DatasetRefused("unreadable", f"h5py cannot read it ({exc})") from None

    def _chunk_values(
        self, index: tuple[int, ...], chunks: tuple[int, ...], fill: Any
    ) -> np.ndarray:
        # ``fill`` is the array's fill value: the header fill, as HDF5 returns (and
        # h5netcdf pads with) for unwritten elements.
        out = np.full(chunks, fill, dtype=self.plan.dtype)
        starts = [i * c for i, c in zip(index, chunks, strict=True)]
        region = tuple(
            slice(start, min(start + c, s))
            for start, c, s in zip(starts, chunks, self.stored_shape, strict=True)
        )
        if any(r.start >= r.stop for r in region):
            return out
        within = tuple(slice(0, r.stop - r.start) for r in region)
        values = self._unfiltered_values(index, chunks, within)
        if values is None:
            values = self._read_region(region)
        out[within] = values
        return out

    def _unfiltered_values(
        self, index: tuple[int, ...], chunks: tuple[int, ...], within: tuple[slice, ...]
    ) -> np.ndarray | None:
        """The values of a chunk stored with every filter skipped (a partial edge chunk
        of a dataset that does not filter those), from its bytes when they are at hand:
        what libhdf5 reads for it, as the chunk holds the array's own element layout
        (plain numbers only; anything else is read through h5py). None otherwise."""
        stored = self.unfiltered.get(index)
        dtype = self.plan.dtype
        if (
            stored is None
            or self.plan.storage is not Storage.REFERENCE
            or dtype.kind not in "iufc"
            or not _plain_numeric(dtype)
        ):
            return None
        reader = self.context.reader(self.context.url)
        data = None if reader is None else reader.cached_range(*stored)
        if data is None:
            return None
        return np.frombuffer(data, dtype=dtype).reshape(chunks)[within]

    def _direct_encoder(self, metadata: ArrayV3Metadata) -> Callable[[np.ndarray], bytes] | None:
        """Encoders for the two plain chains, avoiding a trip through zarr's event loop."""
        names = [codec.to_dict()["name"] for codec in metadata.codecs]
        if names == ["vlen-utf8"]:
            from numcodecs.vlen import VLenUTF8

            codec = VLenUTF8()
            return lambda values: bytes(codec.encode(np.asarray(values, dtype=object)))
        if names != ["bytes"] or self.plan.dtype.kind == "T":
            return None
        big = self.plan.endian == "big" and self.plan.storage is Storage.REFERENCE
        big = big and self.layout != h5py.h5d.COMPACT
        if big and self.plan.dtype.names is not None:
            return None  # rare (unfiltered big-endian compound): zarr's own encoder

        def encode(values: np.ndarray) -> bytes:
            if values.dtype.names is not None:
                values = values.astype(little_endian(values.dtype))  # zarr packs structs
            elif values.dtype.itemsize > 1:
                values = values.astype(values.dtype.newbyteorder(">" if big else "<"))
            return np.ascontiguousarray(values).tobytes()

        return encode

    def _encode_pending(
        self, metadata: ArrayV3Metadata, chunks: tuple[int, ...], pending: list[tuple[int, ...]]
    ) -> dict[tuple[int, ...], bytes]:
        if not pending:
            return {}
        direct = self._direct_encoder(metadata)
        if direct is not None:
            return {
                index: direct(self._chunk_values(index, chunks, metadata.fill_value))
                for index in pending
            }
        spec = _chunk_spec(metadata, chunks)
        if all(isinstance(codec, SupportsSyncCodec) for codec in metadata.codecs):
            # A trip through zarr's event loop costs more than encoding a few chunks.
            inlined = {}
            for index in pending:
                values = self._chunk_values(index, chunks, metadata.fill_value)
                data = _encode_sync(metadata.codecs, spec, values)
                if data is None:
                    raise DatasetRefused("unreadable", "a chunk could not be re-encoded")
                inlined[index] = data
            return inlined
        pipeline = BatchedCodecPipeline.from_codecs(metadata.codecs, batch_size=len(pending))
        nd_buffer = default_buffer_prototype().nd_buffer
        batch = [
            (
                nd_buffer.from_numpy_array(self._chunk_values(index, chunks, metadata.fill_value)),
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


__all__ = ["ArrayContext", "DatasetRefused", "Target", "build_array"]
