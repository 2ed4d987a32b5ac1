"""Version 2 B-trees, walked from their bytes and checked before libhdf5 may follow them.

Version 2 B-trees index dense link storage (record types 5 and 6), dense attribute
storage (types 8 and 9), the huge objects of fractal heaps (types 1-4) and the chunks
of datasets written with the latest file format (types 10 and 11). libhdf5 takes the
header's word for the node size, record size, depth and record counts: a node size of
2**31 makes it allocate 2 GiB, a record type that does not match the index makes it
decode records with the wrong layout, a total record count of 2**28 makes an attribute
listing allocate a table that large, and a child pointing at an ancestor makes it
recurse without end.

:func:`read_btree_v2` walks the whole tree and returns its records in key order,
after checking: the header's type, record size and node size (against what the index
holds and the file's length), every node's signature, version, type, position inside
the file, each node visited once, levels going down by one to the leaves,
record counts within each node's capacity (computed as libhdf5 computes it) and equal
to what the parent says, and the header's total equal to the records found. Checksums
are verified on request (for chunk indexes, whose records become references without
libhdf5 reading them; libhdf5 verifies them itself before it follows a node). Per the
HDF5 file format specification ("Version 2 B-trees") and libhdf5's H5B2hdr.c and
H5B2cache.c; hand-written, as no library exposes the structure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from virtualizarr_fill.hdf5 import checksum
from virtualizarr_fill.hdf5.format.structures import (
    CorruptStructure,
    FileFacts,
    Reader,
    encoded_size,
    fetch,
    uint,
)

#: Signature, version, type and checksum: the overhead of every node.
_PREFIX = 10
#: No writer makes nodes larger (libhdf5 uses 512 and 2048 bytes): a larger node size is
#: a corrupt field, and libhdf5 would allocate buffers that large.
MAX_NODE_SIZE = 1 << 20
#: Deeper trees cannot be addressed with 64-bit record counts.
_MAX_DEPTH = 32

#: Record types: huge fractal heap objects, dense links by name and by creation order,
#: dense attributes by name and by creation order, chunks without and with filters.
HUGE_TYPES = (1, 2, 3, 4)
LINK_NAME, LINK_ORDER = 5, 6
ATTRIBUTE_NAME, ATTRIBUTE_ORDER = 8, 9
CHUNK, FILTERED_CHUNK = 10, 11


@dataclass(frozen=True)
class BTree2:
    """A checked version 2 B-tree: its record type and its records, in key order."""

    address: int
    type: int
    record_size: int
    #: (records x record size) bytes, in the order an in-order walk visits them.
    records: np.ndarray


@dataclass(frozen=True)
class _Level:
    """Capacity of the nodes of one level (libhdf5's ``H5B2_node_info_t``)."""

    #: Records a node of this level holds at most.
    max_records: int
    #: Records a subtree rooted at this level holds at most, and the bytes that count
    #: takes (the "total records in child" field of the level above).
    cumulative: int
    cumulative_size: int
    #: Bytes of one child pointer of a node of this level (0 for leaves).
    pointer_size: int = 0
    #: Bytes of the pointer's "total records in child" field (levels above 1).
    total_size: int = 0


def _levels(node_size: int, record_size: int, depth: int, address_size: int) -> list[_Level]:
    """Node capacities per level, as ``H5B2__hdr_init`` computes them; also the bytes of
    a pointer's "records in child" field (enough for a full leaf)."""
    leaf_max = (node_size - _PREFIX) // record_size
    if leaf_max < 1:
        raise CorruptStructure(f"node size {node_size} holds no record of {record_size} bytes")
    levels = [_Level(leaf_max, leaf_max, encoded_size(leaf_max))]
    count_size = encoded_size(leaf_max)
    for level in range(1, depth + 1):
        below = levels[level - 1]
        total_size = below.cumulative_size if level > 1 else 0
        pointer = address_size + count_size + total_size
        most = (node_size - (_PREFIX + pointer)) // (record_size + pointer)
        if most < 1:
            raise CorruptStructure(
                f"a tree of depth {depth} whose level-{level} nodes of {node_size} bytes "
                "hold no record"
            )
        cumulative = (most + 1) * below.cumulative + most
        levels.append(_Level(most, cumulative, encoded_size(cumulative), pointer, total_size))
    return levels


def read_btree_v2(
    read: Reader,
    facts: FileFacts,
    address: int,
    *,
    types: Mapping[int, int],
    what: str = "version 2 B-tree",
    verify: bool = False,
) -> BTree2:
    """The records of the version 2 B-tree whose header is at (relative) ``address``,
    checked (see the module's documentation).

    ``types`` maps the record types the index may hold to the size their records take
    there (libhdf5 decodes records with that layout whatever the header says);
    ``verify`` checks every node's checksum too. Raises :class:`CorruptStructure`
    naming ``what``.
    """
    o, ln = facts.address_size, facts.length_size
    header_size = _PREFIX + 4 + 2 + 2 + 1 + 1 + o + 2 + ln
    header = fetch(read, facts, address, header_size, f"{what} header")
    where = f"{what} header at address {address}"
    if header[:4] != b"BTHD" or header[4] != 0:
        raise CorruptStructure(f"{where}: not a version 2 B-tree header")
    if verify:
        _verify(header, header_size, where)
    kind = header[5]
    node_size = uint(header, 6, 4)
    stored_record_size = uint(header, 10, 2)
    depth = uint(header, 12, 2)
    root = uint(header, 16, o)
    root_records = uint(header, 16 + o, 2)
    total = uint(header, 18 + o, ln)
    if kind not in types:
        raise CorruptStructure(f"{where}: record type {kind}, expected one of {sorted(types)}")
    expected = types[kind]
    if stored_record_size != expected:
        raise CorruptStructure(
            f"{where}: records of {stored_record_size} bytes, but type {kind} records here "
            f"take {expected}"
        )
    if not _PREFIX < node_size <= min(MAX_NODE_SIZE, facts.size):
        raise CorruptStructure(f"{where}: implausible node size {node_size}")
    if depth > _MAX_DEPTH:
        raise CorruptStructure(f"{where}: implausible depth {depth}")
    if not facts.defined(root):
        if root_records or total:
            raise CorruptStructure(f"{where}: no root node, but {total} records")
        return BTree2(address, kind, stored_record_size, _no_records(stored_record_size))
    levels = _levels(node_size, stored_record_size, depth, o)
    walker = _Walk(read, facts, kind, stored_record_size, levels, what, verify)
    records = walker.node(root, depth, root_records, None)
    if total != walker.count:
        raise CorruptStructure(
            f"{where}: the header counts {total} records, the tree holds {walker.count}"
        )
    return BTree2(address, kind, stored_record_size, records)


#: Record sizes of the index types whose records do not depend on the file's sizes of
#: offsets and lengths: a hash or creation order and a 7-byte (links) or 8-byte
#: (attributes) heap ID, plus flags and creation order for attributes.
RECORD_SIZES = {LINK_NAME: 11, LINK_ORDER: 15, ATTRIBUTE_NAME: 17, ATTRIBUTE_ORDER: 13}


def huge_record_sizes(address_size: int, length_size: int) -> dict[int, int]:
    """Record sizes of the huge object index types 1-4 (address, length, then filter
    mask and memory size for filtered objects, then the object's ID for indirect ones)."""
    o, ln = address_size, length_size
    return {1: o + 2 * ln, 2: o + ln, 3: o + 3 * ln + 4, 4: o + 2 * ln + 4}


def _no_records(record_size: int) -> np.ndarray:
    return np.zeros((0, record_size), dtype=np.uint8)


def _verify(data: bytes, end: int, where: str) -> None:
    """The lookup3 checksum in the last 4 bytes of ``data[:end]``."""
    if checksum.verified(data, 0, end) is False:
        raise CorruptStructure(f"{where}: checksum mismatch")


class _Walk:
    def __init__(
        self,
        read: Reader,
        facts: FileFacts,
        kind: int,
        record_size: int,
        levels: list[_Level],
        what: str,
        verify: bool,
    ) -> None:
        self.read = read
        self.verify = verify
        self.facts = facts
        self.kind = kind
        self.record_size = record_size
        self.levels = levels
        self.what = what
        self.count_size = levels[0].cumulative_size
        self.visited: set[int] = set()
        self.count = 0

    def node(self, address: int, level: int, records: int, total: int | None) -> np.ndarray:
        """The records of the subtree at ``address`` (a node of ``level`` holding
        ``records`` records, ``total`` in its subtree when the parent says), in key
        order."""
        where = f"{self.what} node at address {address}"
        if address in self.visited:
            raise CorruptStructure(f"{where} is reached twice (a cycle)")
        self.visited.add(address)
        info = self.levels[level]
        if records > info.max_records:
            raise CorruptStructure(
                f"{where}: {records} records, more than a level-{level} node holds "
                f"({info.max_records})"
            )
        size = _PREFIX + records * self.record_size + (records + 1) * info.pointer_size
        data = fetch(self.read, self.facts, address, size, where)
        signature = b"BTIN" if level else b"BTLF"
        if data[:4] != signature or data[4] != 0 or data[5] != self.kind:
            raise CorruptStructure(
                f"{where}: expected a version 0 {signature.decode()} node of type {self.kind}"
            )
        if self.verify:
            _verify(data, size, where)
        own = np.frombuffer(data, np.uint8, records * self.record_size, 6).reshape(
            records, self.record_size
        )
        if level == 0:
            self.count += records
            if total is not None and total != records:
                raise CorruptStructure(f"{where}: holds {records} records, its parent says {total}")
            return own
        start = self.count
        pointers = 6 + records * self.record_size
        parts: list[np.ndarray] = []
        o = self.facts.address_size
        for child in range(records + 1):
            at = pointers + child * info.pointer_size
            child_address = uint(data, at, o)
            child_records = uint(data, at + o, self.count_size)
            child_total = (
                uint(data, at + o + self.count_size, info.total_size) if level > 1 else None
            )
            parts.append(self.node(child_address, level - 1, child_records, child_total))
            if child < records:
                parts.append(own[child : child + 1])
        self.count += records
        if total is not None and self.count - start != total:
            raise CorruptStructure(
                f"{where}: its subtree holds {self.count - start} records, its parent says {total}"
            )
        return np.concatenate(parts) if parts else own


__all__ = [
    "ATTRIBUTE_NAME",
    "ATTRIBUTE_ORDER",
    "CHUNK",
    "FILTERED_CHUNK",
    "HUGE_TYPES",
    "LINK_NAME",
    "LINK_ORDER",
    "MAX_NODE_SIZE",
    "RECORD_SIZES",
    "BTree2",
    "huge_record_sizes",
    "read_btree_v2",
]
