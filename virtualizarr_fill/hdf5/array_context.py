"""What building one virtual array knows and shares: the file and the parser's options
(:class:`ArrayContext`), the array a dataset becomes (:class:`Target`), the dataset's
stored facts as the stages find them (:class:`StoredDataset`), the refusal every stage
may raise (:class:`DatasetRefused`), and the small helpers the manifest builders share.

The stages (:mod:`~virtualizarr_fill.hdf5.arrays` over
:mod:`~virtualizarr_fill.hdf5.chunked_manifest`,
:mod:`~virtualizarr_fill.hdf5.contiguous_manifest`,
:mod:`~virtualizarr_fill.hdf5.materialise`,
:mod:`~virtualizarr_fill.hdf5.chunk_verification` and
:mod:`~virtualizarr_fill.hdf5.virtual`) import this module; it imports none of them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import h5py
import numpy as np
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.hdf5.attrs import VlenReader
from virtualizarr_fill.hdf5.dtypes import (
    DtypePlan,
)
from virtualizarr_fill.hdf5.file_checks import FileChecks
from virtualizarr_fill.hdf5.filters import (
    FilterInfo,
)
from virtualizarr_fill.hdf5.format.chunk_index import (
    ChunkTable,
)
from virtualizarr_fill.hdf5.format.fill_value_message import FillValueMessage
from virtualizarr_fill.hdf5.reader import HDF5File

RefusalKind = Literal[
    "datatype", "filter", "layout", "dataspace", "size", "corrupt", "unreadable", "external"
]


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


class StoredDataset:
    """One dataset on its way to an array: what the stages read once and share."""

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
        #: The filter pipeline (read with the codecs of stored chunks).
        self.filters: list[FilterInfo] = []
        #: Rewritten chunks stored with every filter skipped: (byte offset, length).
        self.unfiltered: dict[tuple[int, ...], tuple[int, int]] = {}
        #: The chunk table read from the index (None: libhdf5 lists the chunks).
        self.table: ChunkTable | None = None
        #: External raw storage: (rows per segment, [(url, offset, size), ...]).
        self.external: tuple[int, list[tuple[str, int, int]]] = (0, [])
        #: The decoded fill-value message (None: absent or not at hand).
        self.fill_message: FillValueMessage | None = None


def empty_manifest(grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    paths = np.empty(grid, dtype=np.dtypes.StringDType())  # all ""
    offsets = np.zeros(grid, dtype=np.uint64)
    lengths = np.zeros(grid, dtype=np.uint64)
    return paths, offsets, lengths


def clamped(shape: Sequence[int]) -> tuple[int, ...]:
    # Zarr forbids zero-length chunk edges; HDF5 allows zero-length arrays.
    return tuple(max(int(s), 1) for s in shape)


def grid_shape(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    return tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))


def plain_numeric(dtype: np.dtype) -> bool:
    """An integer, float or complex dtype without fields or h5py metadata."""
    return dtype.kind in "biufc" and dtype.fields is None and not dtype.metadata


@functools.cache
def _array_config() -> ArrayConfig:
    # Parsing zarr's runtime config costs more than decoding a small chunk; the codecs
    # run here (size checks, re-encoding) do not depend on it.
    return ArrayConfig.from_dict({})


def chunk_spec(metadata: ArrayV3Metadata, chunks: tuple[int, ...]) -> ArraySpec:
    return ArraySpec(
        shape=chunks,
        dtype=metadata.data_type,
        fill_value=metadata.fill_value,
        config=_array_config(),
        prototype=default_buffer_prototype(),
    )


__all__ = [
    "ArrayContext",
    "DatasetRefused",
    "StoredDataset",
    "Target",
    "chunk_spec",
    "clamped",
    "empty_manifest",
    "grid_shape",
    "plain_numeric",
]
