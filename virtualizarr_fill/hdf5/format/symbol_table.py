"""Groups stored as symbol tables, checked before libhdf5 may follow them.

Groups written with the earliest file format (most netCDF-4 and HDF5 1.6 files) keep
their members in a *symbol table*: a version 1 B-tree whose leaves point at symbol
nodes ("SNOD", up to 2 x the group leaf K entries each), and a local heap holding the
member names. libhdf5 recurses into a B-tree child whatever it points at: a child
pointing back at its own node (or an ancestor) makes it recurse until the stack
overflows. It also walks the heap's free list as it finds it, and compares names by
``strcmp`` on the heap's bytes.

:func:`check_symbol_table` checks the whole structure: the local heap (signature,
version, data segment inside the file, a free list that stays inside the segment and
ends), every B-tree node (signature, group node type, inside the file, visited once,
levels going down by one to the leaves, entries within the file's group internal K),
every symbol node (signature, version, entries within the group leaf K), and every name
offset (keys, entries, soft link values) pointing at a NUL-terminated string inside
the heap. Per the HDF5 file format specification ("Version 1 B-trees", "Group Symbol
Table Nodes", "Local Heaps"); hand-written, as no library exposes the structures.
"""

from __future__ import annotations

from dataclasses import dataclass

from virtualizarr_fill.hdf5.format.structures import (
    CorruptStructure,
    FileFacts,
    Reader,
    fetch,
    uint,
)

#: libhdf5's defaults for the group leaf K and group internal K.
DEFAULT_LEAF_K = 4
DEFAULT_INTERNAL_K = 16
_BTREE_K_MESSAGE = 0x13
#: libhdf5 marks the end of a local heap's free list with this offset.
_FREE_LIST_END = 1


@dataclass(frozen=True)
class GroupKs:
    """The superblock's group B-tree ranks: a symbol node holds up to ``2 * leaf``
    entries, a B-tree node up to ``2 * internal`` children."""

    leaf: int = DEFAULT_LEAF_K
    internal: int = DEFAULT_INTERNAL_K


def group_ks(
    read: Reader, facts: FileFacts, extension_messages: list[tuple[int, bytes]]
) -> GroupKs:
    """The group ranks of the file: from a version 0/1 superblock, else from the
    "B-tree 'K' values" message of the superblock extension (``extension_messages``,
    its (type, data) pairs), else libhdf5's defaults."""
    head = read(facts.base, 20)
    if head is not None and len(head) >= 20 and head[8] in (0, 1):
        return GroupKs(uint(head, 16, 2) or DEFAULT_LEAF_K, uint(head, 18, 2) or DEFAULT_INTERNAL_K)
    for kind, data in extension_messages:
        if kind == _BTREE_K_MESSAGE and len(data) >= 7 and data[0] == 0:
            return GroupKs(
                uint(data, 5, 2) or DEFAULT_LEAF_K, uint(data, 3, 2) or DEFAULT_INTERNAL_K
            )
    return GroupKs()


class _Heap:
    """A checked local heap's data segment: where names may start."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def check_names(self, offsets: list[int], what: str) -> None:
        """Every offset must start a NUL-terminated string inside the segment (libhdf5
        compares names with ``strcmp`` on the heap's bytes)."""
        data, size = self.data, self.size
        for offset in offsets:
            if offset >= size or data.find(b"\0", offset) < 0:
                raise CorruptStructure(
                    f"{what}: a name at heap offset {offset} is not a string inside the "
                    f"{size}-byte local heap"
                )


def _local_heap(read: Reader, facts: FileFacts, address: int, what: str) -> _Heap:
    o, ln = facts.address_size, facts.length_size
    where = f"{what}: local heap at address {address}"
    head = fetch(read, facts, address, 8 + 2 * ln + o, where)
    if head[:4] != b"HEAP" or head[4] != 0:
        raise CorruptStructure(f"{where}: not a version 0 local heap")
    size, free, data_address = uint(head, 8, ln), uint(head, 8 + ln, ln), uint(head, 8 + 2 * ln, o)
    data = fetch(read, facts, data_address, size, f"{where}: data segment")
    # libhdf5 walks the free list as it loads the heap, allocating an entry per block.
    seen: set[int] = set()
    while free != _FREE_LIST_END:
        if free in seen or free + 2 * ln > size:
            raise CorruptStructure(f"{where}: free list entry at heap offset {free} is corrupt")
        seen.add(free)
        following, length = uint(data, free, ln), uint(data, free + ln, ln)
        if free + length > size:
            raise CorruptStructure(f"{where}: free block at heap offset {free} runs past the heap")
        free = following
    return _Heap(data)


def _node_bytes(read: Reader, facts: FileFacts, address: int, most: int, what: str) -> bytes:
    """The bytes of a node of at most ``most`` bytes (what the file holds of them: the
    used part is checked by the caller)."""
    position = facts.position(address, 8, what)
    data = read(position, min(most, facts.size - position))
    if data is None:
        raise CorruptStructure(f"{what} is cut off by the end of the file")
    return data


def check_symbol_table(
    read: Reader, facts: FileFacts, btree: int, heap: int, ks: GroupKs, what: str = "group"
) -> int:
    """Check the symbol table of a group (B-tree root and local heap at the relative
    addresses ``btree`` and ``heap``, from its symbol table message); the number of
    members. Raises :class:`CorruptStructure` naming ``what`` and the structure."""
    names = _local_heap(read, facts, heap, what)
    o, ln = facts.address_size, facts.length_size
    full = 8 + 2 * o + 2 * ks.internal * (ln + o) + ln
    visited: set[int] = set()
    nodes: list[int] = [btree]
    level: int | None = None
    members = 0
    while nodes:
        children: list[int] = []
        keys: list[int] = []
        for address in nodes:
            where = f"{what}: symbol table B-tree node at address {address}"
            if address in visited:
                raise CorruptStructure(f"{where} is reached twice (a cycle)")
            visited.add(address)
            body = _node_bytes(read, facts, address, full, where)
            if body[:4] != b"TREE" or body[4] != 0:
                raise CorruptStructure(f"{where}: not a group B-tree node")
            if level is not None and body[5] != level:
                raise CorruptStructure(f"{where}: level {body[5]} below a level-{level + 1} node")
            level = body[5]
            used = uint(body, 6, 2)
            if used > 2 * ks.internal:
                raise CorruptStructure(
                    f"{where}: {used} children, more than the file's {2 * ks.internal}"
                )
            if len(body) < 8 + 2 * o + used * (ln + o) + ln:
                raise CorruptStructure(f"{where} is cut off by the end of the file")
            for sibling in (uint(body, 8, o), uint(body, 8 + o, o)):
                if facts.defined(sibling) and facts.base + sibling >= facts.size:
                    raise CorruptStructure(f"{where}: a sibling past the end of the file")
            at = 8 + 2 * o
            for _ in range(used):
                keys.append(uint(body, at, ln))
                children.append(uint(body, at + ln, o))
                at += ln + o
            keys.append(uint(body, at, ln))
        names.check_names(keys, f"{what}: symbol table B-tree key")
        assert level is not None
        if level == 0:
            for address in children:
                members += _symbol_node(read, facts, address, names, ks, visited, what)
            return members
        nodes, level = children, level - 1
    return members


def _symbol_node(
    read: Reader,
    facts: FileFacts,
    address: int,
    names: _Heap,
    ks: GroupKs,
    visited: set[int],
    what: str,
) -> int:
    o = facts.address_size
    where = f"{what}: symbol table node at address {address}"
    if address in visited:
        raise CorruptStructure(f"{where} is reached twice (a cycle)")
    visited.add(address)
    entry = 2 * o + 24
    body = _node_bytes(read, facts, address, 8 + 2 * ks.leaf * entry, where)
    if body[:4] != b"SNOD" or body[4] != 1:
        raise CorruptStructure(f"{where}: not a version 1 symbol table node")
    count = uint(body, 6, 2)
    if count > 2 * ks.leaf:
        raise CorruptStructure(f"{where}: {count} entries, more than the file's {2 * ks.leaf}")
    if len(body) < 8 + count * entry:
        raise CorruptStructure(f"{where} is cut off by the end of the file")
    offsets = []
    for number in range(count):
        at = 8 + number * entry
        offsets.append(uint(body, at, o))
        header, cache = uint(body, at + o, o), uint(body, at + 2 * o, 4)
        if cache > 2:
            raise CorruptStructure(f"{where}: entry {number} has cache type {cache}")
        if cache == 2:  # a soft link: its value is a name in the heap
            offsets.append(uint(body, at + 2 * o + 8, 4))
        elif not facts.defined(header) or facts.base + header >= facts.size:
            raise CorruptStructure(f"{where}: entry {number} points past the end of the file")
        if cache == 1:  # the member group's B-tree and heap, cached
            for cached in (uint(body, at + 2 * o + 8, o), uint(body, at + 3 * o + 8, o)):
                if facts.base + cached >= facts.size:
                    raise CorruptStructure(
                        f"{where}: entry {number} caches an address past the end"
                    )
    names.check_names(offsets, where)
    return count


__all__ = ["GroupKs", "check_symbol_table", "group_ks"]
