"""A chunked dataset's chunk table, read straight from its chunk index.

h5py lists a dataset's chunks through ``chunk_iter``, which calls back into Python once
per chunk, a cost that grows with the chunk count before any work. The index
structures themselves are compact arrays of fixed-size records, so this module reads
them with NumPy, one vectorised decode per node, page or block:

* version 1 B-tree (layout versions 1-3: the default, earliest file format, most
  netCDF-4 files): :mod:`~virtualizarr_fill.hdf5.format.chunk_btree`, which also checks the
  keys libhdf5's lookups depend on, in the same walk;
* version 2 B-tree (layout version 4 with unlimited dimensions):
  :mod:`~virtualizarr_fill.hdf5.format.btree_v2`, whose walk checks the tree's structure, and
  keys in increasing order (libhdf5 finds a chunk by searching them);
* fixed array, paged or not, filtered or not:
  :mod:`~virtualizarr_fill.hdf5.format.chunk_fixed_array`;
* single chunk and implicit indexes: the layout message alone.

Hand-written (no library exposes these structures), per the HDF5 file format
specification. The B-trees are read whole and checked before libhdf5 may follow them:
a B-tree that contradicts itself or the file (a node reached twice, levels that do not
go down, counts beyond a node's capacity, bytes past the end) raises
:class:`CorruptChunkIndex`, as do other corruptions found on the way (a failed
checksum, keys libhdf5's search would miss). What this module does not read -- the
extensible array index, unexpected versions of the other structures -- returns None:
the caller then lists the chunks through libhdf5.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from virtualizarr_fill.hdf5.format import btree_v2
from virtualizarr_fill.hdf5.format.chunk_btree import btree_leaves, chunk_btree_k
from virtualizarr_fill.hdf5.format.chunk_fixed_array import (
    CorruptIndex,
    chunk_size_width,
    read_fixed_array,
)
from virtualizarr_fill.hdf5.format.layout_message import (
    BTREE_V1,
    BTREE_V2,
    FIXED_ARRAY,
    IMPLICIT,
    SINGLE_CHUNK,
    ChunkedLayout,
    Reader,
    Unavailable,
    chunked_layout,
)
from virtualizarr_fill.hdf5.format.structures import CorruptStructure, FileFacts

#: Names of the index types read here, for :attr:`ChunkTable.source`.
SOURCES = {
    BTREE_V1: "btree-v1",
    SINGLE_CHUNK: "single-chunk",
    IMPLICIT: "implicit",
    FIXED_ARRAY: "fixed-array",
    BTREE_V2: "btree-v2",
}


class CorruptChunkIndex(Exception):
    """The chunk index is corrupt; the message says where and how."""


@dataclass(frozen=True)
class ChunkTable:
    """Every written chunk of a dataset, as h5py's ``chunk_iter`` would list them."""

    #: Which index was read (a value of :data:`SOURCES`).
    source: str
    #: (chunks x rank) element offsets of each chunk's first element (int64).
    coords: np.ndarray
    #: Absolute byte offsets in the file (uint64).
    addresses: np.ndarray
    #: Stored sizes in bytes (uint64).
    sizes: np.ndarray
    #: Filter masks (int64; bit i set: filter i skipped).
    masks: np.ndarray
    #: For indexes that list chunks by grid position (fixed array, implicit): each
    #: chunk's row-major position (int64) in :attr:`grid`, else None.
    positions: np.ndarray | None = None
    #: The chunk grid :attr:`positions` count in (that of the maximum shape).
    grid: tuple[int, ...] | None = None


@dataclass(frozen=True)
class DatasetGeometry:
    """What h5py reports about a chunked dataset, to check the index against."""

    shape: tuple[int, ...]
    #: Maximum shape, None for unlimited dimensions.
    maxshape: tuple[int | None, ...]
    chunks: tuple[int, ...]
    filtered: bool

    def grid(self, shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(-(-int(s) // c) for s, c in zip(shape, self.chunks, strict=True))


def _table(
    source: str,
    geometry: DatasetGeometry,
    coords: np.ndarray,
    addresses: np.ndarray,
    sizes: np.ndarray,
    masks: np.ndarray,
    positions: np.ndarray | None = None,
    grid: tuple[int, ...] | None = None,
) -> ChunkTable:
    return ChunkTable(
        source=source,
        coords=coords.astype(np.int64, copy=False).reshape(len(addresses), len(geometry.chunks)),
        addresses=addresses.astype(np.uint64, copy=False),
        sizes=sizes.astype(np.uint64, copy=False),
        masks=masks.astype(np.int64, copy=False),
        positions=positions,
        grid=grid,
    )


def _empty(source: str, geometry: DatasetGeometry) -> ChunkTable:
    none = np.zeros(0, dtype=np.uint64)
    return _table(source, geometry, np.zeros((0, len(geometry.chunks))), none, none, none)


def _absolute(relative: np.ndarray, base: int) -> np.ndarray:
    """File positions of addresses relative to the superblock at ``base``."""
    relative = relative.astype(np.uint64, copy=False)
    if base and len(relative) and int(relative.max()) > np.iinfo(np.uint64).max - base:
        raise CorruptChunkIndex("chunk index: a chunk address past any file's end")
    return relative + np.uint64(base)


def _grid_coords(indices: np.ndarray, grid: tuple[int, ...], chunks: tuple[int, ...]) -> np.ndarray:
    """Element offsets of the chunks at row-major ``indices`` of ``grid``."""
    coords = np.empty((len(indices), len(grid)), dtype=np.int64)
    if not grid:
        return coords
    # Column by column (np.stack along axis 1 costs several times more).
    for axis, (scaled, chunk) in enumerate(
        zip(np.unravel_index(indices, grid), chunks, strict=True)
    ):
        np.multiply(scaled, chunk, out=coords[:, axis])
    return coords


def _btree_v1(
    read: Reader,
    base: int,
    layout: ChunkedLayout,
    geometry: DatasetGeometry,
    sizes: tuple[int, int],
) -> ChunkTable:
    source = SOURCES[BTREE_V1]
    if layout.address is None:
        return _empty(source, geometry)
    largest = [
        s if m is None else max(s, m)
        for s, m in zip(geometry.shape, geometry.maxshape, strict=True)
    ]
    budget = 2 * math.prod(geometry.grid(largest)) + 16
    leaves = btree_leaves(
        read,
        base=base,
        root=layout.address,
        dimensionality=len(layout.dims),
        address_size=sizes[0],
        budget=budget,
        k=chunk_btree_k(read, base, sizes),
    )
    if isinstance(leaves, str):
        raise CorruptChunkIndex(leaves)
    keys = leaves["key"]
    return _table(
        source,
        geometry,
        keys["offsets"][:, :-1],
        _absolute(leaves["child"], base),
        keys["size"],
        keys["mask"],
    )


def _btree_v2(
    read: Reader,
    facts: FileFacts,
    layout: ChunkedLayout,
    geometry: DatasetGeometry,
) -> ChunkTable:
    source = SOURCES[BTREE_V2]
    if layout.address is None:
        return _empty(source, geometry)
    rank = len(geometry.chunks)
    o = facts.address_size
    width = chunk_size_width(_chunk_bytes(layout), layout.version, facts.length_size)
    kind = btree_v2.FILTERED_CHUNK if geometry.filtered else btree_v2.CHUNK
    extra = width + 4 if geometry.filtered else 0
    try:
        tree = btree_v2.read_btree_v2(
            read,
            facts,
            layout.address,
            types={kind: o + extra + 8 * rank},
            what="chunk index",
            verify=True,
        )
    except CorruptStructure as exc:
        raise CorruptChunkIndex(str(exc)) from None
    records = tree.records
    count = len(records)
    addresses = _unsigned(records[:, :o])
    if geometry.filtered:
        sizes = _unsigned(records[:, o : o + width])
        masks = records[:, o + width : o + width + 4].copy().view("<u4").ravel().astype(np.uint64)
    else:
        sizes = np.full(count, _chunk_bytes(layout), dtype=np.uint64)
        masks = np.zeros(count, dtype=np.uint64)
    scaled = records[:, o + extra :].copy().view("<u8").reshape(count, rank)
    if count > 1 and rank:
        keys = scaled.astype(">u8").view(f"S{8 * rank}").ravel()
        backwards = np.flatnonzero(keys[1:] <= keys[:-1])
        if backwards.size:
            row = int(backwards[0])
            raise CorruptChunkIndex(
                f"chunk index (version 2 B-tree at address {layout.address}) lists chunk "
                f"{scaled[row + 1].tolist()} after {scaled[row].tolist()}: libhdf5's search "
                "would not find every chunk"
            )
    if count and int(scaled.max(initial=0)) >= 1 << 62:
        raise CorruptChunkIndex("chunk index: a chunk offset beyond any dataset")
    coords = scaled.astype(np.int64) * np.asarray(geometry.chunks, dtype=np.int64)
    return _table(source, geometry, coords, _absolute(addresses, facts.base), sizes, masks)


def _unsigned(raw: np.ndarray) -> np.ndarray:
    """Rows of little-endian unsigned bytes (1-8 per row) as uint64."""
    padded = np.zeros((len(raw), 8), dtype=np.uint8)
    padded[:, : raw.shape[1]] = raw
    return padded.view("<u8").ravel()


def _chunk_bytes(layout: ChunkedLayout) -> int:
    """Bytes of an unfiltered chunk: the chunk dimensions times the element size the
    layout records (a stored element, e.g. 16 bytes for variable-length data)."""
    return math.prod(layout.dims)


def _single_chunk(
    base: int, layout: ChunkedLayout, geometry: DatasetGeometry, length_size: int
) -> ChunkTable:
    source = SOURCES[SINGLE_CHUNK]
    with_filter = bool(layout.flags & 0x02)
    if with_filter != geometry.filtered:
        raise Unavailable
    if layout.address is None:
        return _empty(source, geometry)
    if with_filter:
        size = int.from_bytes(layout.index_info[:length_size], "little")
        mask = int.from_bytes(layout.index_info[length_size : length_size + 4], "little")
    else:
        size, mask = _chunk_bytes(layout), 0
    return _table(
        source,
        geometry,
        np.zeros((1, len(geometry.chunks))),
        np.array([base + layout.address], dtype=np.uint64),
        np.array([size], dtype=np.uint64),
        np.array([mask], dtype=np.uint64),
    )


def _implicit(base: int, layout: ChunkedLayout, geometry: DatasetGeometry) -> ChunkTable:
    source = SOURCES[IMPLICIT]
    # Written by libhdf5 only for unfiltered datasets of fixed shape, all chunks
    # allocated at creation; anything else is left to libhdf5.
    if geometry.filtered or tuple(geometry.maxshape) != tuple(geometry.shape):
        raise Unavailable
    if layout.address is None:
        return _empty(source, geometry)
    grid = geometry.grid(geometry.shape)
    count = math.prod(grid)
    indices = np.arange(count, dtype=np.int64)
    addresses = np.uint64(base + layout.address) + indices.astype(np.uint64) * np.uint64(
        _chunk_bytes(layout)
    )
    return _table(
        source,
        geometry,
        _grid_coords(indices, grid, geometry.chunks),
        addresses,
        np.full(count, _chunk_bytes(layout), dtype=np.uint64),
        np.zeros(count, dtype=np.uint64),
        indices,
        grid,
    )


def _fixed_array(
    read: Reader,
    base: int,
    layout: ChunkedLayout,
    geometry: DatasetGeometry,
    sizes: tuple[int, int],
) -> ChunkTable:
    source = SOURCES[FIXED_ARRAY]
    if any(m is None for m in geometry.maxshape) or len(layout.index_info) != 1:
        raise Unavailable
    if layout.address is None:
        return _empty(source, geometry)
    grid = geometry.grid([int(m) for m in geometry.maxshape])  # type: ignore[arg-type]
    try:
        indices, addresses, stored, masks = read_fixed_array(
            read,
            base=base,
            address=layout.address,
            sizes=sizes,
            page_bits=layout.index_info[0],
            elements=math.prod(grid),
            filtered=geometry.filtered,
            chunk_bytes=_chunk_bytes(layout),
            size_width=chunk_size_width(_chunk_bytes(layout), layout.version, sizes[1]),
        )
    except CorruptIndex as exc:
        raise CorruptChunkIndex(f"chunk index: {exc}") from None
    return _table(
        source,
        geometry,
        _grid_coords(indices, grid, geometry.chunks),
        _absolute(addresses, base),
        stored,
        masks,
        indices.astype(np.int64, copy=False),
        grid,
    )


def read_chunk_table(
    read: Reader,
    *,
    base: int,
    header: int,
    sizes: tuple[int, int],
    geometry: DatasetGeometry,
    file_size: int | None = None,
    stored: Iterable[tuple[int, bytes]] | None = None,
) -> ChunkTable | None:
    """The chunk table of the chunked dataset whose object header is at (relative)
    ``header``, read from its index, or None when this module does not read that index
    (the caller then asks libhdf5).

    ``read(position, length)`` returns the file's bytes (None past its end), ``base`` is
    the superblock's position, ``sizes`` the file's (size of offsets, size of lengths),
    ``file_size`` its length (default: wherever ``read`` stops), ``stored`` the object
    header's messages when already read. Raises :class:`CorruptChunkIndex` when the
    index is corrupt.
    """
    try:
        layout = chunked_layout(read, base, header, sizes, stored)
        if layout is None or layout.dims[:-1] != geometry.chunks or layout.dims[-1] < 1:
            return None
        if layout.index_type == BTREE_V1 and sizes[0] in (2, 4, 8):
            try:
                return _btree_v1(read, base, layout, geometry, sizes)
            except Unavailable:
                raise CorruptChunkIndex(
                    "chunk index (version 1 B-tree): a node lies past the end of the file"
                ) from None
        if layout.index_type == BTREE_V2:
            size = file_size if file_size is not None else 1 << 64
            facts = FileFacts(base, sizes[0], sizes[1], size)
            return _btree_v2(read, facts, layout, geometry)
        if layout.index_type == SINGLE_CHUNK:
            return _single_chunk(base, layout, geometry, sizes[1])
        if layout.index_type == IMPLICIT:
            return _implicit(base, layout, geometry)
        if layout.index_type == FIXED_ARRAY:
            return _fixed_array(read, base, layout, geometry, sizes)
    except Unavailable:
        return None
    return None


__all__ = [
    "SOURCES",
    "ChunkTable",
    "CorruptChunkIndex",
    "DatasetGeometry",
    "read_chunk_table",
]
