"""Fractal heaps, walked from their bytes and checked before libhdf5 may follow them.

A fractal heap holds the link messages of a group with dense link storage and the
attribute messages of an object with dense attribute storage; version 2 B-trees index
them by heap ID (see :mod:`~virtualizarr_fill.hdf5.format.btree_v2`). libhdf5 sizes its tables
from the header's doubling-table fields (a heap address width that does not cover the
first row makes it allocate gigabytes), reads whole blocks at the sizes the table
implies, and follows indirect block entries as it finds them.

:func:`read_fractal_heap` checks the header (version, power-of-two block sizes, a heap
address width that covers them, a root that fits the table) and walks every block:
signature, version, back-pointer to the header, offset in the heap, position inside the
file, each block visited once (checksums are libhdf5's to verify: it does, before it
follows a block). :meth:`FractalHeap.check_ids` then checks that
every heap ID an index holds names an object inside a direct block (managed objects) or
inside the file (huge objects stored directly), and :meth:`FractalHeap.object_bytes`
returns an object's bytes. Per the HDF5 file format specification ("Fractal Heap") and
libhdf5's H5HFcache.c, H5HFdtable.c and H5HFman.c; hand-written, as no library exposes
the structure.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from virtualizarr_fill.hdf5.format import btree_v2
from virtualizarr_fill.hdf5.format.structures import (
    CorruptStructure,
    FileFacts,
    Reader,
    encoded_size,
    fetch,
    power_of_two,
    uint,
)

_MANAGED, _HUGE, _TINY = 0x00, 0x10, 0x20
#: Up to this many heap IDs are checked in plain Python.
_FEW = 64
#: Blocks a heap may have: far beyond any real heap (each block costs libhdf5 a read).
_MAX_BLOCKS = 1 << 16


@dataclass
class FractalHeap:
    """A checked fractal heap: where its objects are."""

    address: int
    id_length: int
    #: Bytes of a managed object's heap offset and length in its heap ID.
    offset_size: int
    length_size: int
    max_managed_size: int
    filtered: bool
    #: Bytes before the objects of a direct block.
    block_header_size: int
    #: Direct blocks in heap offset order: heap offsets, sizes, file positions.
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    huge_btree: int | None = None

    def check_ids(self, ids: np.ndarray, facts: FileFacts, read: Reader, what: str) -> None:
        """Check heap IDs (rows of bytes, as an index's records hold them)."""
        if not len(ids):
            return
        if len(ids) <= _FEW:
            self._check_few_ids(ids, facts, read, what)
            return
        kinds = ids[:, 0]
        if np.any(kinds & 0xC0) or np.any((kinds & 0x30) == 0x30):
            raise CorruptStructure(f"{what}: a heap ID of unknown version or type")
        managed = ids[(kinds & 0x30) == _MANAGED]
        if len(managed):
            self._check_managed(managed, what)
        huge = ids[(kinds & 0x30) == _HUGE]
        if len(huge):
            self._check_huge(huge, facts, read, what)
        tiny = ids[(kinds & 0x30) == _TINY]
        # (IDs of more than 18 bytes encode a tiny object's length in 12 bits.)
        if len(tiny) and self.id_length <= 18 and np.any((tiny[:, 0] & 0x0F) + 2 > ids.shape[1]):
            raise CorruptStructure(f"{what}: a tiny object longer than its heap ID")

    def _managed_fields(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        width = 1 + self.offset_size + self.length_size
        if width > ids.shape[1]:
            raise CorruptStructure(
                f"fractal heap at address {self.address}: heap IDs of {ids.shape[1]} bytes "
                f"cannot hold offsets of {self.offset_size} and lengths of {self.length_size}"
            )
        padded = np.zeros((len(ids), 16), dtype=np.uint8)
        padded[:, : self.offset_size] = ids[:, 1 : 1 + self.offset_size]
        padded[:, 8 : 8 + self.length_size] = ids[:, 1 + self.offset_size : width]
        values = padded.view("<u8")
        return values[:, 0], values[:, 1]

    def _check_managed(self, ids: np.ndarray, what: str) -> None:
        offsets, lengths = self._managed_fields(ids)
        if len(ids) <= _FEW:
            self._check_few(offsets.tolist(), lengths.tolist(), what)
            return
        block = np.searchsorted(self.offsets, offsets, side="right") - 1
        inside = block >= 0
        start = np.where(inside, self.offsets[np.maximum(block, 0)], 0)
        end = start + np.where(inside, self.sizes[np.maximum(block, 0)], 0)
        bad = (
            ~inside
            | (lengths == 0)
            | (lengths > np.uint64(self.max_managed_size))
            | (offsets < start + np.uint64(self.block_header_size))
            | (offsets >= end)
            | (offsets + lengths > end)
        )
        if bad.any():
            first = int(np.argmax(bad))
            raise CorruptStructure(
                f"{what}: heap object at heap offset {int(offsets[first])} "
                f"({int(lengths[first])} bytes) lies in no direct block of the fractal heap "
                f"at address {self.address}"
            )

    def _check_few_ids(self, ids: np.ndarray, facts: FileFacts, read: Reader, what: str) -> None:
        """:meth:`check_ids` in plain Python (NumPy's per-call cost would dominate)."""
        width = ids.shape[1]
        start, middle = 1 + self.offset_size, 1 + self.offset_size + self.length_size
        offsets, lengths, huge = [], [], []
        for number in range(len(ids)):
            row = ids[number].tobytes()
            kind = row[0] & 0x30
            if row[0] & 0xC0 or kind == 0x30:
                raise CorruptStructure(f"{what}: a heap ID of unknown version or type")
            if kind == _MANAGED:
                if middle > width:
                    self._managed_fields(ids)  # raises, naming the sizes
                offsets.append(int.from_bytes(row[1:start], "little"))
                lengths.append(int.from_bytes(row[start:middle], "little"))
            elif kind == _HUGE:
                huge.append(number)
            elif self.id_length <= 18 and (row[0] & 0x0F) + 2 > width:
                raise CorruptStructure(f"{what}: a tiny object longer than its heap ID")
        self._check_few(offsets, lengths, what)
        if huge:
            self._check_huge(ids[huge], facts, read, what)

    def _check_few(self, offsets: list[int], lengths: list[int], what: str) -> None:
        """:meth:`_check_managed` for a few IDs (NumPy's per-call cost would dominate)."""
        starts = self.offsets.tolist()
        sizes = self.sizes.tolist()
        for offset, length in zip(offsets, lengths, strict=True):
            block = bisect.bisect_right(starts, offset) - 1
            if not (
                block >= 0
                and 0 < length <= self.max_managed_size
                and starts[block] + self.block_header_size <= offset
                and offset + length <= starts[block] + sizes[block]
            ):
                raise CorruptStructure(
                    f"{what}: heap object at heap offset {offset} ({length} bytes) lies in no "
                    f"direct block of the fractal heap at address {self.address}"
                )

    def _check_huge(self, ids: np.ndarray, facts: FileFacts, read: Reader, what: str) -> None:
        if self.huge_btree is None:
            raise CorruptStructure(f"{what}: a huge heap object, but the heap has no huge objects")
        o, ln = facts.address_size, facts.length_size
        # libhdf5 stores a huge object's place in its ID when the ID has room for it.
        direct = self.id_length - 1 >= (o + 2 * ln + 4 if self.filtered else o + ln)
        if direct:
            for row in ids:
                address, length = uint(bytes(row), 1, o), uint(bytes(row), 1 + o, ln)
                facts.position(address, length, f"{what}: huge heap object")
            return
        kind = 3 if self.filtered else 1
        huge = btree_v2.read_btree_v2(
            read,
            facts,
            self.huge_btree,
            types={kind: btree_v2.huge_record_sizes(o, ln)[kind]},
            what=f"huge objects index of the fractal heap at address {self.address}",
        )
        for record in huge.records:
            data = bytes(record)
            address, length = uint(data, 0, o), uint(data, o, ln)
            facts.position(address, length, f"{what}: huge heap object")

    def object_bytes(self, heap_id: bytes, read: Reader) -> bytes | None:
        """The bytes of the managed or tiny object ``heap_id`` names (None: a huge object,
        or a filtered heap, whose objects need decoding)."""
        kind = heap_id[0] & 0x30
        if kind == _TINY and self.id_length <= 18:
            return heap_id[1 : 1 + (heap_id[0] & 0x0F) + 1]
        if kind != _MANAGED or self.filtered:
            return None
        row = np.frombuffer(heap_id, np.uint8).reshape(1, -1)
        offsets, lengths = self._managed_fields(row)
        offset, length = int(offsets[0]), int(lengths[0])
        block = int(np.searchsorted(self.offsets, offset, side="right")) - 1
        if block < 0:
            return None
        position = int(self.positions[block]) + offset - int(self.offsets[block])
        data = read(position, length)
        return None if data is None or len(data) != length else bytes(data)


def read_fractal_heap(
    read: Reader, facts: FileFacts, address: int, what: str = "fractal heap"
) -> FractalHeap:
    """The fractal heap whose header is at (relative) ``address``, checked (see the
    module's documentation); raises :class:`CorruptStructure` naming ``what``."""
    o, ln = facts.address_size, facts.length_size
    base_size = 4 + 1 + 2 + 2 + 1 + 4 + ln + o + ln + o + 8 * ln + 2 + ln + ln + 2 + 2 + o + 2
    head = fetch(read, facts, address, base_size, f"{what} header")
    where = f"{what} header at address {address}"
    if head[:4] != b"FRHP" or head[4] != 0:
        raise CorruptStructure(f"{where}: not a version 0 fractal heap header")
    id_length, filter_length, flags = uint(head, 5, 2), uint(head, 7, 2), head[9]
    at = 10
    max_managed = uint(head, at, 4)
    huge_btree = uint(head, at + 4 + ln, o)
    at += 4 + ln + o + ln + o  # past huge info and free-space info
    at += 8 * ln  # heap statistics
    width, start_size = uint(head, at, 2), uint(head, at + 2, ln)
    max_direct, max_bits = uint(head, at + 2 + ln, ln), uint(head, at + 2 + 2 * ln, 2)
    root = uint(head, at + 4 + 2 * ln + 2, o)
    root_rows = uint(head, at + 4 + 2 * ln + 2 + o, 2)
    size = base_size + 4 + (ln + 4 + filter_length if filter_length else 0)
    header = fetch(read, facts, address, size, f"{what} header")
    if not 1 <= id_length <= 4096 or flags & ~0x03:
        raise CorruptStructure(f"{where}: heap ID length {id_length}, flags {flags:#x}")
    if not (power_of_two(width) and power_of_two(start_size) and power_of_two(max_direct)):
        raise CorruptStructure(
            f"{where}: table width {width}, starting block size {start_size} and maximum "
            f"direct block size {max_direct} must be powers of two"
        )
    start_bits, direct_bits = start_size.bit_length() - 1, max_direct.bit_length() - 1
    first_row_bits = start_bits + width.bit_length() - 1
    if not (start_bits <= direct_bits and first_row_bits <= max_bits <= 64 and max_managed):
        raise CorruptStructure(
            f"{where}: a heap address width of {max_bits} bits does not fit blocks of "
            f"{start_size}-{max_direct} bytes in rows of {width}"
        )
    table = _Table(width, start_size, direct_bits - start_bits + 2, max_bits - first_row_bits + 1)
    if root_rows > table.max_root_rows:
        raise CorruptStructure(
            f"{where}: a root of {root_rows} rows (at most {table.max_root_rows})"
        )
    checksummed = bool(flags & 0x02)
    offset_size = (max_bits + 7) // 8
    heap = FractalHeap(
        address=address,
        id_length=id_length,
        offset_size=offset_size,
        length_size=encoded_size(min(max_direct, max_managed)),
        max_managed_size=max_managed,
        filtered=filter_length > 0,
        block_header_size=5 + o + offset_size + (4 if checksummed else 0),
        huge_btree=huge_btree if facts.defined(huge_btree) else None,
    )
    if facts.defined(root):
        filtered_root = uint(header, base_size, ln) if filter_length else None
        walk = _Walk(read, facts, heap, table, checksummed, what)
        if root_rows == 0:
            walk.direct(root, 0, start_size, filtered_root)
        else:
            walk.indirect(root, 0, root_rows)
        order = np.argsort(np.asarray(walk.offsets, dtype=np.uint64), kind="stable")
        heap.offsets = np.asarray(walk.offsets, dtype=np.uint64)[order]
        heap.sizes = np.asarray(walk.sizes, dtype=np.uint64)[order]
        heap.positions = np.asarray(walk.positions, dtype=np.uint64)[order]
    return heap


@dataclass(frozen=True)
class _Table:
    """The heap's doubling table (libhdf5's ``H5HF_dtable_t``)."""

    width: int
    start_size: int
    max_direct_rows: int
    max_root_rows: int

    def row_size(self, row: int) -> int:
        return self.start_size if row == 0 else self.start_size << (row - 1)

    def row_offset(self, row: int) -> int:
        return 0 if row == 0 else self.width * self.start_size << (row - 1)

    def rows_of(self, block_size: int) -> int:
        """Rows of a child indirect block covering ``block_size`` bytes of heap."""
        first_row = self.start_size * self.width
        return (block_size.bit_length() - 1) - (first_row.bit_length() - 1) + 1


class _Walk:
    def __init__(
        self,
        read: Reader,
        facts: FileFacts,
        heap: FractalHeap,
        table: _Table,
        checksummed: bool,
        what: str,
    ) -> None:
        self.read, self.facts, self.heap, self.table = read, facts, heap, table
        self.checksummed, self.what = checksummed, what
        self.visited: set[int] = set()
        self.offsets: list[int] = []
        self.sizes: list[int] = []
        self.positions: list[int] = []

    def _visit(self, address: int, where: str) -> None:
        if address in self.visited:
            raise CorruptStructure(f"{where} is reached twice (a cycle)")
        if len(self.visited) >= _MAX_BLOCKS:
            raise CorruptStructure(f"{self.what}: more than {_MAX_BLOCKS} blocks")
        self.visited.add(address)

    def _prefix(self, data: bytes, signature: bytes, offset: int, where: str) -> None:
        o, heap = self.facts.address_size, self.heap
        if data[:4] != signature or data[4] != 0:
            raise CorruptStructure(f"{where}: expected a version 0 {signature.decode()} block")
        if uint(data, 5, o) != heap.address:
            raise CorruptStructure(f"{where}: names another heap header")
        if uint(data, 5 + o, heap.offset_size) != offset:
            raise CorruptStructure(
                f"{where}: at heap offset {uint(data, 5 + o, heap.offset_size)}, expected {offset}"
            )

    def direct(self, address: int, offset: int, size: int, filtered_size: int | None) -> None:
        where = f"{self.what} direct block at address {address}"
        self._visit(address, where)
        stored = size if filtered_size is None else filtered_size
        if stored < self.heap.block_header_size and filtered_size is None:
            raise CorruptStructure(f"{where}: {size} bytes cannot hold the block header")
        if filtered_size is not None:
            # Compressed: only its place can be checked; libhdf5 decodes it.
            self.facts.position(address, stored, where)
        else:
            self.facts.position(address, size, where)
            data = fetch(self.read, self.facts, address, self.heap.block_header_size, where)
            self._prefix(data, b"FHDB", offset, where)
        self.offsets.append(offset)
        self.sizes.append(size)
        self.positions.append(self.facts.base + address)

    def indirect(self, address: int, offset: int, rows: int) -> None:
        where = f"{self.what} indirect block at address {address}"
        self._visit(address, where)
        o, ln, table, heap = self.facts.address_size, self.facts.length_size, self.table, self.heap
        direct_rows = min(rows, table.max_direct_rows)
        entry = o + (ln + 4 if heap.filtered else 0)
        entries = direct_rows * table.width * entry + (rows - direct_rows) * table.width * o
        size = 5 + o + heap.offset_size + entries + 4
        data = fetch(self.read, self.facts, address, size, where)
        self._prefix(data, b"FHIB", offset, where)
        at = 5 + o + heap.offset_size
        for row in range(rows):
            block_size = table.row_size(row)
            for column in range(table.width):
                child = uint(data, at, o)
                child_offset = offset + table.row_offset(row) + column * block_size
                if row < table.max_direct_rows:
                    filtered_size = uint(data, at + o, ln) if heap.filtered else None
                    at += entry
                    if self.facts.defined(child):
                        self.direct(child, child_offset, block_size, filtered_size)
                else:
                    at += o
                    if self.facts.defined(child):
                        self.indirect(child, child_offset, table.rows_of(block_size))


__all__ = ["FractalHeap", "read_fractal_heap"]
