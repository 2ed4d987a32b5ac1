"""Version 1 B-tree chunk indexes, walked from their bytes and checked.

A version 1 B-tree indexes the chunks of every chunked dataset written with the
default, earliest file format (most netCDF-4 files). Its leaves hold one key per chunk
(stored size, filter mask, the chunk's element offsets plus one more, which must be 0)
and the chunk's address, so :func:`btree_leaves` reads the chunk table straight from
them (see :mod:`~virtualizarr_fill.hdf5.format.chunk_index`), one vectorised decode per level
instead of h5py's per-chunk ``chunk_iter`` callbacks.

The same walk checks what libhdf5's reads depend on: libhdf5 *reads* a chunk by
searching the tree for its key, and internal nodes hold copies of their children's
boundary keys. A corrupt key that iteration reports correctly (the extra offset set, an
internal key that no longer matches its child) makes the search miss the chunk:
libhdf5 then reads fill values where the manifest points at data, a silent
disagreement. Keys must increase along each level, bound each node as its parent says,
and end in 0. :func:`btree_problem` runs the same checks against chunks listed by
``chunk_iter`` (when the table had to come from libhdf5), using only bytes already
fetched.

Hand-written (h5py exposes neither the keys' extra offset nor the index's nodes), per
the HDF5 file format specification ("Version 1 B-trees").
"""

from __future__ import annotations

import collections
import functools
import itertools

import numpy as np

from virtualizarr_fill.hdf5.format.layout_message import (
    BTREE_V1,
    Reader,
    Unavailable,
    chunked_layout,
    messages,
    read_exactly,
)


def _btree_root(
    read: Reader, base: int, header: int, sizes: tuple[int, int]
) -> tuple[int, int] | None:
    """(root address, key dimensionality) of a chunked layout indexed by a version 1
    B-tree, or None."""
    layout = chunked_layout(read, base, header, sizes)
    if layout is None or layout.index_type != BTREE_V1 or layout.address is None:
        return None
    return layout.address, len(layout.dims)


#: Entries read with a node's header in one go (two per child for the default B-tree
#: rank of 32); larger nodes take a second read.
_ENTRIES_GUESS = 64

#: libhdf5's default rank K of chunk B-trees (a node holds at most 2K entries; libhdf5
#: refuses nodes with more than the file's own 2K).
_DEFAULT_K = 32
_BTREE_K_MESSAGE = 0x13


def chunk_btree_k(read: Reader, base: int, sizes: tuple[int, int]) -> int:
    """The rank K of chunk B-trees the superblock at ``base`` records (its "indexed
    storage internal node K": in version 1 superblocks, or the "B-tree 'K' values"
    message of the superblock extension of versions 2 and 3), else libhdf5's default."""
    address_size = sizes[0]
    head = read_exactly(read, base, 12 + 2 * address_size)
    version = head[8]
    if version == 1:
        return int.from_bytes(read_exactly(read, base + 24, 2), "little") or _DEFAULT_K
    if version not in (2, 3):
        return _DEFAULT_K
    extension = int.from_bytes(head[12 + address_size : 12 + 2 * address_size], "little")
    if extension == (1 << (8 * address_size)) - 1:
        return _DEFAULT_K
    for kind, data in messages(read, base, extension, sizes):
        if kind == _BTREE_K_MESSAGE and len(data) >= 3 and data[0] == 0:
            return int.from_bytes(data[1:3], "little") or _DEFAULT_K
    return _DEFAULT_K


def _node(read: Reader, position: int, head_size: int, entry_size: int, key_size: int) -> bytes:
    """A node's header, entries and final key."""
    guess = read(position, head_size + _ENTRIES_GUESS * entry_size + key_size)
    head = guess if guess is not None else read_exactly(read, position, head_size)
    used = int.from_bytes(head[6:8], "little")
    size = head_size + used * entry_size + key_size
    if len(head) >= size:
        return head
    return read_exactly(read, position, size)


#: A level's nodes are read in one go when they lie within this many times the bytes
#: they hold (libhdf5 allocates a level's nodes close together), else one by one.
_SPREAD = 4
#: ... and no two neighbours lie further apart than this: every block of the file the
#: read fetches (64 KiB or more) then holds a node, which libhdf5 would fetch too.
_MAX_GAP = 64 << 10


def _span(read: Reader, base: int, nodes: list[int], full: int) -> tuple[int, bytes] | None:
    """(first address, bytes) covering a level's nodes of at most ``full`` bytes each,
    when they lie close together and the bytes are at hand."""
    ordered = sorted(nodes)
    low, high = ordered[0], ordered[-1] + full
    if high - low > _SPREAD * full * len(nodes):
        return None
    if len(ordered) > 16:  # one vectorised pass over large levels
        if int(np.diff(np.asarray(ordered, dtype=np.int64)).max()) > _MAX_GAP:
            return None
    elif any(b - a > _MAX_GAP for a, b in itertools.pairwise(ordered)):
        return None
    span = read(base + low, high - low)
    if span is None or len(span) != high - low:
        return None
    return low, span


def _level(
    read: Reader, base: int, nodes: list[int], head_size: int, entry_size: int, key_size: int
) -> list[bytes | memoryview]:
    """The bytes of each node of a level (header, entries, final key)."""
    full = head_size + _ENTRIES_GUESS * entry_size + key_size
    found = _span(read, base, nodes, full) if len(nodes) > 1 else None
    if found is None:
        return [_node(read, base + address, head_size, entry_size, key_size) for address in nodes]
    low, span = found
    view = memoryview(span)
    level: list[bytes | memoryview] = []
    for address in nodes:
        node = view[address - low : address - low + full]
        used = int.from_bytes(node[6:8], "little")
        if head_size + used * entry_size + key_size > full:
            level.append(_node(read, base + address, head_size, entry_size, key_size))
        else:
            level.append(node)
    return level


_SIGNATURE = np.frombuffer(b"TREE\x01", dtype=np.uint8)

#: (entries per node, entries, final keys, level) of one level of the tree.
Level = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def _decode_level_at_once(
    read: Reader,
    base: int,
    nodes: list[int],
    head_size: int,
    dtypes: tuple[np.dtype, np.dtype],
    level: int,
) -> Level | None:
    """A level of well-formed nodes decoded in a few NumPy operations (gathers from the
    level's bytes), or None: too few or too scattered nodes, bytes not at hand, or any
    node the per-node decoder should look at (and name, if it is corrupt)."""
    key_dtype, entry = dtypes
    full = head_size + _ENTRIES_GUESS * entry.itemsize + key_dtype.itemsize
    if len(nodes) < 2:
        return None
    found = _span(read, base, nodes, full)
    if found is None:
        return None
    low, span = found
    starts = np.asarray(nodes, dtype=np.int64) - low
    heads = _gather(span, np.dtype((np.uint8, 8)), starts)
    used = heads[:, 6].astype(np.int64) | (heads[:, 7].astype(np.int64) << 8)
    levels = heads[:, 5]
    well_formed = (
        bool((heads[:, :5] == _SIGNATURE).all())
        and bool((levels == levels[0]).all())
        and (level < 0 or int(levels[0]) == level)
        and int(used.min()) > 0
        and head_size + int(used.max()) * entry.itemsize + key_dtype.itemsize <= full
    )
    if not well_formed:
        return None
    total = int(used.sum())
    firsts = np.cumsum(used) - used
    within = np.arange(total, dtype=np.int64) - np.repeat(firsts, used)
    entry_starts = np.repeat(starts + head_size, used) + within * entry.itemsize
    entries = _gather(span, entry, entry_starts)
    last_starts = starts + head_size + used * entry.itemsize
    lasts = _gather(span, key_dtype, last_starts)
    return used, entries, lasts, int(levels[0])


def _gather(data: bytes, dtype: np.dtype, starts: np.ndarray) -> np.ndarray:
    """The ``dtype`` records of ``data`` starting at byte positions ``starts``.

    One gather from a view holding an opaque record at every byte (what
    ``sliding_window_view`` makes, in one constructor call), then a view as ``dtype``:
    copying opaque records is several times faster than gathering structured ones.
    """
    opaque = np.dtype(f"V{dtype.itemsize}")
    count = max(len(data) - dtype.itemsize + 1, 0)
    records = np.ndarray((count,), dtype=opaque, buffer=data, strides=(1,))
    return records[starts].view(dtype)


def _decode_level(
    read: Reader,
    base: int,
    nodes: list[int],
    head_size: int,
    dtypes: tuple[np.dtype, np.dtype],
    level: int,
    max_entries: int | None,
) -> Level | str:
    """A level decoded node by node, or the first problem found."""
    key_dtype, entry = dtypes
    counts, entries_parts, last_parts = [], [], []
    level_nodes = _level(read, base, nodes, head_size, entry.itemsize, key_dtype.itemsize)
    for address, node in zip(nodes, level_nodes, strict=True):
        where = f"node at byte {base + address}"
        if node[:4] != b"TREE" or node[4] != 1:
            return f"{where} is not a chunk B-tree node"
        used = int.from_bytes(node[6:8], "little")
        if level >= 0 and node[5] != level:
            return f"{where} has level {node[5]} under a node of level {level + 1}"
        if used == 0:
            return f"{where} holds no entries"
        if max_entries is not None and used > max_entries:
            return f"{where} holds {used} entries, more than the file's {max_entries}"
        level = node[5]
        counts.append(used)
        split = head_size + used * entry.itemsize
        entries_parts.append(node[head_size:split])
        last_parts.append(node[split : split + key_dtype.itemsize])
    entries = np.frombuffer(b"".join(entries_parts), dtype=entry)
    lasts = np.frombuffer(b"".join(last_parts), dtype=key_dtype)
    return np.array(counts, dtype=np.int64), entries, lasts, level


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
    max_entries: int | None = None,
) -> np.ndarray | str:
    """Walk the tree level by level: the leaf entries in key order (structured: key
    ``size``, ``mask``, ``offsets`` and ``child``), or the first problem found. Each
    level's keys are checked in one go: strictly increasing along the level, each node
    bounded by the keys its parent holds for it (a node's last key is its right
    neighbour's first), leaf keys' extra offset 0.

    Raises :class:`Unavailable` when bytes are not at hand. Levels must go down by one
    from the root to the leaves, so no node can lead back to itself; ``budget`` bounds
    the nodes visited, ``max_entries`` the entries of a node (the file's B-tree rank).
    """
    key_dtype, entry = _node_dtypes(dimensionality, address_size)
    head_size = 8 + 2 * address_size
    nodes = [root]
    # The keys the parent level holds for each node: first and last (None at the root).
    bounds: tuple[np.ndarray, np.ndarray] | None = None
    level = -1
    seen: set[int] = set()
    while True:
        level_nodes = set(nodes)
        repeated = seen & level_nodes
        if len(level_nodes) != len(nodes):
            repeated |= {a for a, n in collections.Counter(nodes).items() if n > 1}
        if repeated:
            return f"node at byte {base + min(repeated)} is reached twice (a cycle)"
        seen.update(nodes)
        if len(seen) > budget:
            return "the chunk index has more nodes than the dataset has chunks"
        dtypes = (key_dtype, entry)
        decoded: Level | str | None = _decode_level_at_once(
            read, base, nodes, head_size, dtypes, level
        )
        if decoded is None:
            decoded = _decode_level(read, base, nodes, head_size, dtypes, level, max_entries)
        if isinstance(decoded, str):
            return decoded
        counts, entries, last_keys, level = decoded
        if max_entries is not None and int(counts.max()) > max_entries:
            return f"level {level}: a node holds more than the file's {max_entries} entries"
        keys = entries["key"]["offsets"]
        lasts = last_keys["offsets"]
        firsts = np.cumsum(counts) - counts
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
        if level == 0:
            extra = np.flatnonzero(keys[:, -1] != 0)
            if extra.size:
                index = int(extra[0])
                return (
                    f"{_locate(nodes, firsts, index, base)} is {keys[index].tolist()}; the "
                    "last offset of a chunk key must be 0"
                )
            return entries
        # Entry k's child spans keys k .. k+1 (the node's last key after its last entry).
        following = np.concatenate([keys[1:], lasts[-1:]])
        ends = np.cumsum(counts) - 1
        following[ends] = lasts
        bounds = (keys, following)
        nodes = entries["child"].tolist()
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
    except Unavailable:
        return None
    if isinstance(walked, str):
        return f"chunk index (B-tree at byte {base + root}): {walked}"
    keys = walked["key"]["offsets"][:, :-1]
    children = walked["child"].astype(np.uint64) + np.uint64(base)
    if keys.shape != offsets.shape or not (
        np.array_equal(keys, offsets) and np.array_equal(children, addresses)
    ):
        return (
            f"chunk index (B-tree at byte {base + root}): its leaves do not hold the "
            f"{len(offsets)} chunks libhdf5 lists"
        )
    return None


def btree_leaves(
    read: Reader,
    *,
    base: int,
    root: int,
    dimensionality: int,
    address_size: int,
    budget: int,
    k: int = _DEFAULT_K,
) -> np.ndarray | str:
    """The leaf entries of the chunk B-tree at (relative) ``root``, in key order, checked
    as :func:`btree_problem` checks them: a structured array (``key`` with ``size``,
    ``mask`` and ``offsets`` -- the chunk's element offsets then the extra 0 --, and
    ``child``, the chunk's relative address), or the first problem found.

    A walk visiting more than ``budget`` nodes, or a node holding more entries than the
    B-tree rank ``k`` allows (see :func:`chunk_btree_k`), is a problem too. Raises
    :class:`~virtualizarr_fill.hdf5.format.layout_message.Unavailable` when bytes are not at
    hand (past the end of the file, for a reader of the whole file).
    """
    if address_size not in (2, 4, 8):
        raise Unavailable
    walked = _check_tree(
        read,
        base,
        root,
        dimensionality,
        address_size,
        budget=budget,
        max_entries=2 * k,
    )
    if isinstance(walked, str):
        return f"chunk index (B-tree at byte {base + root}): {walked}"
    return walked


__all__ = ["btree_leaves", "btree_problem", "chunk_btree_k"]
