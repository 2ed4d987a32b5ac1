"""What an object's header makes libhdf5 walk, checked before any listing or lookup.

Listing a group's members, opening a member by name, listing or reading an object's
attributes: libhdf5 serves each from structures the object header points at, and
follows them without checking them against each other or the file. This module reads
the object header's messages and checks every such structure from its bytes:

* a group's *symbol table* (message 0x11: version 1 B-tree, symbol nodes, local heap),
  see :mod:`~virtualizarr_fill.hdf5.format.symbol_table`;
* dense link storage (link info, message 0x02) and dense attribute storage (attribute
  info, message 0x15): a fractal heap and its name and creation-order indexes (version
  2 B-trees), every heap ID the indexes hold pointing into the heap, see
  :mod:`~virtualizarr_fill.hdf5.format.fractal_heap` and
  :mod:`~virtualizarr_fill.hdf5.format.btree_v2`.

Links and attribute messages stored in the header itself need no walk. The outcome
(:class:`ObjectStorage`) keeps a problem per kind: a group whose link storage is corrupt
cannot be listed, while its datasets' attributes may still be sound, and the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from virtualizarr_fill.hdf5.format import btree_v2
from virtualizarr_fill.hdf5.format.btree_v2 import BTree2, read_btree_v2
from virtualizarr_fill.hdf5.format.fractal_heap import FractalHeap, read_fractal_heap
from virtualizarr_fill.hdf5.format.layout_message import Unavailable, flagged_messages
from virtualizarr_fill.hdf5.format.structures import CorruptStructure, FileFacts, Reader, uint
from virtualizarr_fill.hdf5.format.symbol_table import GroupKs, check_symbol_table

_LINK_INFO = 0x02
_ATTRIBUTE = 0x0C
_SYMBOL_TABLE = 0x11
_ATTRIBUTE_INFO = 0x15
#: Bytes of a heap ID in dense link records and in dense attribute records.
_LINK_ID, _ATTRIBUTE_ID = 7, 8


@dataclass
class DenseAttributes:
    """A checked dense attribute storage: the heap and its name index."""

    heap: FractalHeap
    names: BTree2


@dataclass
class ObjectStorage:
    """What one object header points at, checked."""

    #: The header's (type, data) messages, as stored (None: the header is unreadable).
    messages: list[tuple[int, bytes]] | None = None
    #: Types of the messages stored as references to shared messages.
    shared_types: frozenset[int] = frozenset()
    #: Why the object's links cannot be listed safely (groups), else None.
    links_problem: str | None = None
    #: Why the object's attributes cannot be listed or read safely, else None.
    attributes_problem: str | None = None
    dense_attributes: DenseAttributes | None = None
    #: Attribute name -> the data of its message, once read (see
    #: :func:`~virtualizarr_fill.hdf5.format.vlen_descriptors.attribute_data`).
    attribute_data: dict[bytes, Any] | None = None

    @property
    def attribute_messages(self) -> list[bytes]:
        """The attribute messages stored in the header itself."""
        return [data for kind, data in self.messages or () if kind == _ATTRIBUTE]


def inspect_object(
    read: Reader, facts: FileFacts, header: int, ks: GroupKs, what: str
) -> ObjectStorage:
    """Check what the object header at (relative) ``header`` points at (``what`` names
    the object in problems)."""
    storage = ObjectStorage()
    try:
        flagged = list(
            flagged_messages(read, facts.base, header, (facts.address_size, facts.length_size))
        )
    except (Unavailable, IndexError, ValueError):
        problem = f"{what}: object header at address {header} cannot be read"
        storage.links_problem = storage.attributes_problem = problem
        return storage
    storage.messages = [(kind, data) for kind, _, data in flagged]
    storage.shared_types = frozenset(kind for kind, flags, _ in flagged if flags & 0x02)
    for kind, data in storage.messages:
        try:
            if kind == _SYMBOL_TABLE:
                _symbol_table(read, facts, data, ks, what)
            elif kind == _LINK_INFO:
                _dense_links(read, facts, data, what)
            elif kind == _ATTRIBUTE_INFO:
                storage.dense_attributes = _dense_attributes(read, facts, data, what)
        except CorruptStructure as exc:
            if kind == _ATTRIBUTE_INFO:
                storage.attributes_problem = str(exc)
            else:
                storage.links_problem = str(exc)
        except (IndexError, ValueError) as exc:  # a message too short for its fields
            problem = f"{what}: message {kind:#x} of the object header is corrupt ({exc})"
            if kind == _ATTRIBUTE_INFO:
                storage.attributes_problem = problem
            else:
                storage.links_problem = problem
    return storage


def _addresses(data: bytes, at: int, count: int, width: int, what: str) -> list[int]:
    if len(data) < at + count * width:
        raise CorruptStructure(f"{what}: a message too short for its addresses")
    return [uint(data, at + i * width, width) for i in range(count)]


def _symbol_table(read: Reader, facts: FileFacts, data: bytes, ks: GroupKs, what: str) -> None:
    btree, heap = _addresses(data, 0, 2, facts.address_size, f"{what}: symbol table message")
    check_symbol_table(read, facts, btree, heap, ks, what)


def _index_addresses(data: bytes, facts: FileFacts, order_width: int, what: str) -> list[int]:
    """Heap, name index and (when indexed) creation-order index addresses of a link or
    attribute info message (``order_width``: bytes of its maximum creation index)."""
    if len(data) < 2 or data[0] != 0:
        raise CorruptStructure(f"{what}: unknown version of the info message")
    flags = data[1]
    at = 2 + (order_width if flags & 0x01 else 0)
    count = 3 if flags & 0x02 else 2
    return _addresses(data, at, count, facts.address_size, f"{what}: info message")


def _dense_links(read: Reader, facts: FileFacts, data: bytes, what: str) -> None:
    addresses = _index_addresses(data, facts, 8, f"{what}: link info")
    heap_address, indexes = addresses[0], addresses[1:]
    if not facts.defined(heap_address):
        return  # links stored in the header
    heap = read_fractal_heap(read, facts, heap_address, f"{what}: link heap")
    for address, kind, start in zip(
        indexes, (btree_v2.LINK_NAME, btree_v2.LINK_ORDER), (4, 8), strict=False
    ):
        if not facts.defined(address):
            raise CorruptStructure(f"{what}: dense links without their index")
        tree = read_btree_v2(
            read,
            facts,
            address,
            types={kind: btree_v2.RECORD_SIZES[kind]},
            what=f"{what}: link index",
        )
        heap.check_ids(
            tree.records[:, start : start + _LINK_ID], facts, read, f"{what}: link index"
        )


def _dense_attributes(
    read: Reader, facts: FileFacts, data: bytes, what: str
) -> DenseAttributes | None:
    addresses = _index_addresses(data, facts, 2, f"{what}: attribute info")
    heap_address, indexes = addresses[0], addresses[1:]
    if not facts.defined(heap_address):
        return None  # attributes stored in the header
    heap = read_fractal_heap(read, facts, heap_address, f"{what}: attribute heap")
    trees = []
    for address, kind in zip(
        indexes, (btree_v2.ATTRIBUTE_NAME, btree_v2.ATTRIBUTE_ORDER), strict=False
    ):
        if not facts.defined(address):
            raise CorruptStructure(f"{what}: dense attributes without their index")
        tree = read_btree_v2(
            read,
            facts,
            address,
            types={kind: btree_v2.RECORD_SIZES[kind]},
            what=f"{what}: attribute index",
        )
        records = tree.records
        if any(flags & 0x01 for flags in records[:, _ATTRIBUTE_ID].tolist()):
            # Shared attribute messages live in the file's shared message heap, which
            # is not checked here.
            raise CorruptStructure(f"{what}: dense attributes stored as shared messages")
        heap.check_ids(records[:, :_ATTRIBUTE_ID], facts, read, f"{what}: attribute index")
        trees.append(tree)
    return DenseAttributes(heap, trees[0])


__all__ = ["DenseAttributes", "ObjectStorage", "inspect_object"]
