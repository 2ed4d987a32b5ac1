"""Version 1 B-tree chunk indexes checked against what libhdf5 lists.

The manifest lists a dataset's chunks by iterating its chunk index (h5py's
``chunk_iter``), but libhdf5 *reads* a chunk by searching the index for its key. In a
version 1 B-tree (the index of every chunked dataset written with the default, earliest
file format -- most netCDF-4 files) a key holds the chunk's offsets plus one more, which
must be 0, and internal nodes hold copies of their children's boundary keys. A corrupt
key that iteration reports correctly (that extra offset set, an internal key that no
longer matches its child) makes the search miss the chunk: libhdf5 then reads fill
values where the manifest points at data, a silent disagreement.

h5py exposes neither the keys' extra offset nor the index's nodes, so this module reads
the nodes itself (hand-written: no library offers it): it finds the index's root in the
dataset's layout message, walks every node once (vectorised over each node's keys), and
checks keys, levels and children against the iterated chunks. It only uses bytes the
reader has already fetched -- libhdf5 read all of them for the iteration -- and gives
up silently (no check) if any is missing.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator

import numpy as np

#: (absolute file position, length) -> the bytes if already fetched, else None
Reader = Callable[[int, int], bytes | None]

_LAYOUT = 0x0008
_CONTINUATION = 0x0010
_MAX_HEADER_BLOCKS = 64


class _Unavailable(Exception):
    """The bytes needed are not at hand, or the structure is not one this module reads."""


def _read(read: Reader, position: int, length: int) -> bytes:
    data = read(position, length)
    if data is None or len(data) < length:
        raise _Unavailable
    return data


def _messages(
    read: Reader, base: int, header: int, sizes: tuple[int, int]
) -> Iterator[tuple[int, bytes]]:
    """(type, data) of every message of the object header at (relative) ``header``."""
    address_size, length_size = sizes
    head = _read(read, base + header, 16)
    blocks: list[tuple[int, int]]
    if head[:4] == b"OHDR":
        flags = head[5]
        position = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        prefix = _read(read, base + header + position, width)
        blocks = [(header + position + width, int.from_bytes(prefix, "little"))]
        version, message_header = 2, 6 if flags & 0x04 else 4
    elif head[0] == 1:
        blocks = [(header + 16, int.from_bytes(head[8:12], "little"))]
        version, message_header = 1, 8
    else:
        raise _Unavailable
    for _ in range(_MAX_HEADER_BLOCKS):
        if not blocks:
            return
        start, size = blocks.pop(0)
        block = _read(read, base + start, size)
        position = 0
        while position + message_header <= size:
            if version == 1:
                kind = int.from_bytes(block[position : position + 2], "little")
                length = int.from_bytes(block[position + 2 : position + 4], "little")
            else:
                kind = block[position]
                length = int.from_bytes(block[position + 1 : position + 3], "little")
            data = block[position + message_header : position + message_header + length]
            position += message_header + length
            if kind == _CONTINUATION and len(data) >= address_size + length_size:
                address = int.from_bytes(data[:address_size], "little")
                extent = int.from_bytes(data[address_size : address_size + length_size], "little")
                if version == 1:
                    blocks.append((address, extent))
                else:  # "OCHK" signature first, checksum last
                    blocks.append((address + 4, extent - 8))
            else:
                yield kind, data


def _btree_root(
    read: Reader, base: int, header: int, sizes: tuple[int, int]
) -> tuple[int, int] | None:
    """(root address, key dimensionality) of a chunked layout indexed by a version 1
    B-tree, or None."""
    address_size = sizes[0]
    for kind, data in _messages(read, base, header, sizes):
        if kind != _LAYOUT or len(data) < 3:
            continue
        version = data[0]
        if version == 3 and data[1] == 2:
            dimensionality, at = data[2], 3
        elif version in (1, 2) and data[2] == 2:
            dimensionality, at = data[1], 8
        else:
            return None
        if len(data) < at + address_size:
            return None
        return int.from_bytes(data[at : at + address_size], "little"), dimensionality
    return None


#: Entries read with a node's header in one go (two per child for the default B-tree
#: rank of 32); larger nodes take a second read.
_ENTRIES_GUESS = 64


def _node(read: Reader, position: int, head_size: int, entry_size: int, key_size: int) -> bytes:
    """A node's header, entries and final key."""
    guess = read(position, head_size + _ENTRIES_GUESS * entry_size + key_size)
    head = guess if guess is not None else _read(read, position, head_size)
    used = int.from_bytes(head[6:8], "little")
    size = head_size + used * entry_size + key_size
    if len(head) >= size:
        return head
    return _read(read, position, size)


def _increasing(keys: np.ndarray) -> np.ndarray:
    """Per consecutive pair of rows: whether the second is lexicographically greater.

    Rows of big-endian integers compare as byte strings in the same order (NumPy's
    fixed-width bytes ignore trailing zero bytes, which never changes the order of
    strings of equal width).
    """
    rows = np.ascontiguousarray(keys, dtype=">u8").view(f"S{8 * keys.shape[1]}").ravel()
    return np.asarray(rows[1:] > rows[:-1])


@functools.lru_cache(maxsize=64)
def _node_dtypes(dimensionality: int, address_size: int) -> tuple[np.dtype, np.dtype]:
    """(key, entry) layouts of a chunk B-tree node."""
    key = np.dtype([("size", "<u4"), ("mask", "<u4"), ("offsets", "<u8", (dimensionality,))])
    return key, np.dtype([("key", key), ("child", f"<u{address_size}")])


def _locate(nodes: list[int], firsts: np.ndarray, key: int, base: int) -> str:
    """Which node, and which of its keys, the ``key``-th key of a level is."""
    number = int(np.searchsorted(firsts, key, side="right")) - 1
    return f"node at byte {base + nodes[number]}, key {key - int(firsts[number])},"


def _check_tree(
    read: Reader,
    base: int,
    root: int,
    dimensionality: int,
    address_size: int,
    budget: int,
) -> tuple[np.ndarray, np.ndarray] | str:
    """Walk the tree level by level: (leaf keys, leaf children) in key order, or the
    first problem found. Each level's keys are checked in one go: strictly increasing
    along the level, each node bounded by the keys its parent holds for it (a node's
    last key is its right neighbour's first), leaf keys' extra offset 0."""
    key_dtype, entry = _node_dtypes(dimensionality, address_size)
    head_size = 8 + 2 * address_size
    nodes = [root]
    # The keys the parent level holds for each node: first and last (None at the root).
    bounds: tuple[np.ndarray, np.ndarray] | None = None
    level = -1
    visited = 0
    while True:
        visited += len(nodes)
        if visited > budget:
            return "the chunk index has more nodes than chunks (a cycle)"
        counts, entries_parts, last_parts = [], [], []
        for address in nodes:
            node = _node(read, base + address, head_size, entry.itemsize, key_dtype.itemsize)
            where = f"node at byte {base + address}"
            if node[:4] != b"TREE" or node[4] != 1:
                return f"{where} is not a chunk B-tree node"
            used = int.from_bytes(node[6:8], "little")
            if level >= 0 and node[5] != level:
                return f"{where} has level {node[5]} under a node of level {level + 1}"
            if used == 0:
                return f"{where} holds no entries"
            level = node[5]
            counts.append(used)
            split = head_size + used * entry.itemsize
            entries_parts.append(node[head_size:split])
            last_parts.append(node[split : split + key_dtype.itemsize])
        entries = np.frombuffer(b"".join(entries_parts), dtype=entry)
        keys = entries["key"]["offsets"]
        lasts = np.frombuffer(b"".join(last_parts), dtype=key_dtype)["offsets"]
        firsts = np.array(list(itertools.accumulate(counts[:-1], initial=0)))
        bad = np.flatnonzero(~_increasing(np.concatenate([keys, lasts[-1:]])))
        if bad.size:
            return f"{_locate(nodes, firsts, int(bad[0]), base)}: keys out of order"
        where = f"level {level}"
        if len(nodes) > 1 and not np.array_equal(lasts[:-1], keys[firsts[1:]]):
            return f"{where}: a node's last key is not its right neighbour's first key"
        if bounds is not None and not (
            np.array_equal(keys[firsts], bounds[0]) and np.array_equal(lasts, bounds[1])
        ):
            return f"{where}: a node's keys differ from those its parent holds for it"
        children = entries["child"].astype(np.uint64)
        if level == 0:
            extra = np.flatnonzero(keys[:, -1] != 0)
            if extra.size:
                index = int(extra[0])
                return (
                    f"{_locate(nodes, firsts, index, base)} is {keys[index].tolist()}; the "
                    "last offset of a chunk key must be 0"
                )
            return keys[:, :-1], children
        # Entry k's child spans keys k .. k+1 (the node's last key after its last entry).
        following = np.concatenate([keys[1:], lasts[-1:]])
        ends = np.cumsum(counts) - 1
        following[ends] = lasts
        bounds = (keys, following)
        nodes = [int(child) for child in children]
        level -= 1


def btree_problem(
    read: Reader,
    *,
    base: int,
    header: int,
    sizes: tuple[int, int],
    offsets: np.ndarray,
    addresses: np.ndarray,
) -> str | None:
    """Why libhdf5's key search could disagree with the iterated chunks, or None.

    ``header`` is the dataset's object header address (relative to ``base``, the
    superblock's position), ``sizes`` the file's (size of offsets, size of lengths),
    ``offsets`` (chunks x rank, element offsets) and ``addresses`` (absolute byte
    offsets) the chunks in iteration order. Returns None as well when the index is not a
    version 1 B-tree or its bytes are not at hand.
    """
    address_size = sizes[0]
    if address_size not in (2, 4, 8):
        return None
    try:
        found = _btree_root(read, base, header, sizes)
        if found is None:
            return None
        root, dimensionality = found
        if dimensionality != offsets.shape[1] + 1:
            return None
        walked = _check_tree(
            read, base, root, dimensionality, address_size, budget=2 * len(offsets) + 16
        )
    except _Unavailable:
        return None
    if isinstance(walked, str):
        return f"chunk index (B-tree at byte {base + root}): {walked}"
    keys, children = walked[0], walked[1] + np.uint64(base)
    if keys.shape != offsets.shape or not (
        np.array_equal(keys, offsets) and np.array_equal(children, addresses)
    ):
        return (
            f"chunk index (B-tree at byte {base + root}): its leaves do not hold the "
            f"{len(offsets)} chunks libhdf5 lists"
        )
    return None


__all__ = ["btree_problem"]
