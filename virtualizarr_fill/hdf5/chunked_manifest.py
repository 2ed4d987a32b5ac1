"""The manifest of a chunked dataset: one reference per allocated chunk.

The chunk table comes from the index's bytes where
:mod:`~virtualizarr_fill.hdf5.format.chunk_index` reads that index (B-tree v1 and v2,
fixed and paged fixed array, single chunk, implicit), else from h5py's ``chunk_iter``
(extensible arrays); it is checked against the chunk grid, the file's size and the
chunk size, and chunks whose stored bytes the codec chain cannot decode as they are
(filters skipped, unfiltered partial edge chunks, padding inside the netCDF shape)
are left to :mod:`~virtualizarr_fill.hdf5.materialise`. HDF5 stores edge chunks at
full size, so the Zarr grid is the HDF5 chunk grid.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import h5py
import numpy as np

from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.hdf5.array_context import (
    DatasetRefused,
    StoredDataset,
    empty_manifest,
)
from virtualizarr_fill.hdf5.dtypes import has_file_form
from virtualizarr_fill.hdf5.file_checks import file_reader
from virtualizarr_fill.hdf5.format.chunk_btree import btree_problem
from virtualizarr_fill.hdf5.format.chunk_index import (
    ChunkTable,
    CorruptChunkIndex,
    DatasetGeometry,
    read_chunk_table,
)

_log = logging.getLogger(__name__)


def _max_encoded_size(nbytes: int) -> int:
    """A generous bound on any HDF5 filter chain's output for ``nbytes`` of input.

    Compressors expand incompressible data by well under 1% plus a small header (zlib,
    bzip2, LZ4, Zstandard, Blosc; bitshuffle adds 4 bytes per 8 KiB block; fletcher32 4
    bytes); an optional filter that fails leaves the data as is.
    """
    return nbytes + nbytes // 8 + 4096


def direct_chunk_table(ds: StoredDataset) -> ChunkTable | None:
    """The chunk table read from the index's bytes (see
    :mod:`~virtualizarr_fill.hdf5.format.chunk_index`), or None for libhdf5 to list."""
    reader = ds.context.reader(ds.context.url)
    if reader is None:
        return None
    dataset = ds.dataset
    geometry = DatasetGeometry(
        shape=ds.stored_shape,
        maxshape=tuple(None if m is None else int(m) for m in dataset.maxshape),
        chunks=tuple(int(c) for c in dataset.chunks),
        filtered=ds.dcpl.get_nfilters() > 0,
    )
    header = _libhdf5.object_address(dataset.id)
    checks = ds.context.checks(ds.context.url)
    stored = None if checks is None else checks.object(header, f"dataset {ds.name!r}")
    try:
        return read_chunk_table(
            file_reader(reader),
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


def iterated_chunk_table(ds: StoredDataset) -> ChunkTable:
    """The chunk table as libhdf5 lists it (h5py's ``chunk_iter``)."""
    infos: list[Any] = []
    dsid = ds.dataset.id
    try:
        if hasattr(dsid, "chunk_iter"):
            dsid.chunk_iter(infos.append)
        else:
            infos = [dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks())]
    except Exception as exc:  # corrupt chunk index
        raise DatasetRefused("corrupt", f"chunk index unreadable ({exc})") from None
    n = len(infos)
    ndim = len(ds.dataset.chunks)
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


def check_unfiltered_chunk_sizes(ds: StoredDataset, chunks: tuple[int, ...]) -> None:
    """Refuse a materialised dataset without filters whose stored chunks are not of
    the chunk's byte size.

    libhdf5 reads an unfiltered chunk as the chunk's byte size from its address,
    whatever the index stores: a chunk stored smaller (N-bit packed data whose N-bit
    filter is gone from the pipeline) is read together with the bytes after it, which
    are no values of the dataset.
    """
    if ds.layout != h5py.h5d.CHUNKED or ds.dcpl.get_nfilters() > 0:
        return
    if has_file_form(ds.dataset.id.get_type()):
        return  # stored in a form whose size libhdf5 does not report
    table = ds.table if ds.table is not None else iterated_chunk_table(ds)
    if not len(table.sizes):
        return
    expected = math.prod(chunks) * ds.dataset.id.get_type().get_size()
    sizes = table.sizes
    wrong = np.flatnonzero((sizes != expected) & (sizes != 0))
    if wrong.size:
        detail = f" ({ds.plan.reason})" if ds.plan.reason else ""
        raise DatasetRefused(
            "corrupt",
            f"its filter pipeline does not match its datatype{detail}: chunks are stored "
            f"in {int(sizes[wrong[0]])} bytes without a filter, not the {expected} bytes "
            "of a chunk (a missing N-bit filter?)",
        )


def chunked_manifest(
    ds: StoredDataset, chunks: tuple[int, ...], grid: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    paths, offsets, lengths = empty_manifest(grid)
    table = ds.table
    if table is None:
        table = iterated_chunk_table(ds)
    _log.debug("%s: chunk table from %s (%d chunks)", ds.name, table.source, len(table.sizes))
    pending: list[tuple[int, ...]] = []
    if not len(table.sizes):
        return paths, offsets, lengths, pending
    index_type = _libhdf5.get_chunk_index_type(ds.dataset.id)
    _check_single_chunk_index(ds, index_type, grid)
    n = len(table.sizes)
    ndim = len(chunks)
    coords, byte_offsets, sizes, masks = table.coords, table.addresses, table.sizes, table.masks
    positions = _grid_positions(ds, table, chunks, grid)
    file_size = ds.context.file_size
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
        _check_index_keys(ds, index_type, coords, byte_offsets)
    expected = math.prod(chunks) * ds.dtype.itemsize
    if not ds.filters:
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
        needs_rewrite |= _edge_rewrites(ds, positions, chunks, grid)
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
    paths[present] = ds.context.url
    skipped_all = (1 << len(ds.filters)) - 1
    for row in np.flatnonzero(needs_rewrite):
        index = tuple(int(i) for i in np.unravel_index(int(positions[row]), grid))
        pending.append(index)
        if (
            ds.filters
            and int(masks[row]) & skipped_all == skipped_all
            and int(sizes[row]) == expected
        ):
            ds.unfiltered[index] = (int(byte_offsets[row]), int(sizes[row]))
        paths[index] = ""
        offsets[index] = 0
        lengths[index] = 0
    return paths, offsets, lengths, pending


def _grid_positions(
    ds: StoredDataset, table: ChunkTable, chunks: tuple[int, ...], grid: tuple[int, ...]
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
    ds: StoredDataset, index_type: int | None, coords: np.ndarray, byte_offsets: np.ndarray
) -> None:
    """libhdf5 reads a chunk of a B-tree index by searching its key, while the
    manifest comes from iterating the index: the two must agree (see
    :mod:`~virtualizarr_fill.hdf5.format.chunk_btree`). Iteration visits B-tree keys in
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
    reader = ds.context.reader(ds.context.url)
    # An unknown index type (no ctypes access): the layout message tells.
    if index_type not in (_libhdf5.CHUNK_INDEX_BTREE, None) or reader is None:
        return
    problem = btree_problem(
        reader.cached_range,
        base=reader.base,
        header=_libhdf5.object_address(ds.dataset.id),
        sizes=(reader.address_size, reader.length_size),
        offsets=coords,
        addresses=byte_offsets,
    )
    if problem is not None:
        raise DatasetRefused(
            "corrupt", f"{problem}: libhdf5 would read fill values where chunks are"
        )


def _check_single_chunk_index(
    ds: StoredDataset, index_type: int | None, grid: tuple[int, ...]
) -> None:
    """A "single chunk" index holds one chunk, which libhdf5 then serves for every
    chunk position: with chunk dimensions smaller than the dataset, the header
    contradicts itself (no writer produces that)."""
    if math.prod(grid) > 1 and index_type == _libhdf5.CHUNK_INDEX_SINGLE:
        raise DatasetRefused(
            "corrupt",
            f"a single-chunk index, but chunks {tuple(ds.dataset.chunks)} make a grid "
            f"of {math.prod(grid)} chunks over shape {ds.stored_shape}",
        )


def _edge_rewrites(
    ds: StoredDataset, positions: np.ndarray, chunks: tuple[int, ...], grid: tuple[int, ...]
) -> np.ndarray:
    """Chunks whose stored bytes cannot be decoded as they are (see module doc);
    ``positions`` are the chunks' row-major positions in ``grid``."""
    rewrite = np.zeros(len(positions), dtype=bool)
    # Per axis, chunks starting past ``limit`` reach past the stored shape; only
    # axes whose last grid row starts past it can have such chunks.
    limits = [s - c for s, c in zip(ds.stored_shape, chunks, strict=True)]
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
    if ds.filters and partial.any():
        options = _libhdf5.get_chunk_opts(ds.dcpl)
        if options is None:
            raise DatasetRefused(
                "layout",
                "cannot tell whether partial edge chunks are filtered "
                "(H5Pget_chunk_opts unavailable)",
            )
        if options & _libhdf5.DONT_FILTER_PARTIAL_CHUNKS:
            rewrite |= partial
    for axis, reaches in beyond.items():
        if ds.shape[axis] > ds.stored_shape[axis]:
            # Padding of the last stored chunk becomes visible inside the netCDF shape.
            rewrite |= reaches
    return rewrite


__all__ = ["chunked_manifest", "direct_chunk_table", "iterated_chunk_table"]
