"""A chunked dataset's data layout message, read from its object header's bytes.

The chunk index readers (:mod:`~virtualizarr_fill.hdf5.format.chunk_index`) need what h5py
does not expose: the index's type, its address and its parameters (page bits of a
fixed array, the stored size and filter mask of a filtered single chunk). This module
finds the layout message among the object header's messages (following continuation
blocks) and decodes it, per the HDF5 file format specification (object header
versions 1 and 2, data layout message versions 1 to 5). Hand-written: no library
exposes these fields.

Bytes come through a reader ``read(position, length) -> bytes | None``; anything that is
not at hand, or not in a form this module knows, raises :class:`Unavailable` and the
caller falls back to libhdf5.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

#: (absolute file position, length) -> the bytes, or None if they are not at hand
Reader = Callable[[int, int], bytes | None]

_LAYOUT = 0x0008
_CONTINUATION = 0x0010
_MAX_HEADER_BLOCKS = 64

#: Chunk index types of a version 4 layout message (``H5D_chunk_index_t`` + 0 for the
#: version 1 B-tree every earlier layout version uses).
BTREE_V1 = 0
SINGLE_CHUNK = 1
IMPLICIT = 2
FIXED_ARRAY = 3
EXTENSIBLE_ARRAY = 4
BTREE_V2 = 5

#: Bytes of index parameters per index type in a version 4 layout message (a filtered
#: single chunk adds its size and filter mask, see :func:`_v4_layout`).
_INDEX_INFO_SIZE = {SINGLE_CHUNK: 0, IMPLICIT: 0, FIXED_ARRAY: 1, EXTENSIBLE_ARRAY: 5, BTREE_V2: 6}


class Unavailable(Exception):
    """The bytes needed are not at hand, or the structure is not one this module reads."""


def read_exactly(read: Reader, position: int, length: int) -> bytes:
    """``length`` bytes at ``position``, or :class:`Unavailable`."""
    data = read(position, length)
    if data is None or len(data) < length:
        raise Unavailable
    return data


def undefined(address: int, address_size: int) -> bool:
    """Whether ``address`` is HDF5's undefined address (all bits set)."""
    return address == (1 << (8 * address_size)) - 1


@dataclass(frozen=True)
class ChunkedLayout:
    """The chunk index fields of a chunked dataset's layout message."""

    #: Layout message version (1-5).
    version: int
    #: One of :data:`BTREE_V1`, :data:`SINGLE_CHUNK`, ... :data:`BTREE_V2`.
    index_type: int
    #: The index's address (relative to the superblock), or None when undefined (no
    #: chunk was ever written).
    address: int | None
    #: Chunk dimensions followed by the element size in bytes.
    dims: tuple[int, ...]
    #: Version 4 layout flags (bit 0: partial edge chunks unfiltered; bit 1: a filtered
    #: single chunk).
    flags: int = 0
    #: Version 4 index parameters, as stored.
    index_info: bytes = b""


def messages(
    read: Reader, base: int, header: int, sizes: tuple[int, int]
) -> Iterator[tuple[int, bytes]]:
    """(type, data) of every message of the object header at (relative) ``header``."""
    for kind, _flags, data in flagged_messages(read, base, header, sizes):
        yield kind, data


def flagged_messages(
    read: Reader, base: int, header: int, sizes: tuple[int, int]
) -> Iterator[tuple[int, int, bytes]]:
    """(type, flags, data) of every message of the object header at (relative)
    ``header`` (flag bit 1: the data is a reference to a shared message)."""
    address_size, length_size = sizes
    head = read_exactly(read, base + header, 16)
    blocks: list[tuple[int, int]]
    if head[:4] == b"OHDR":
        flags = head[5]
        position = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        prefix = read_exactly(read, base + header + position, width)
        blocks = [(header + position + width, int.from_bytes(prefix, "little"))]
        version, message_header = 2, 6 if flags & 0x04 else 4
    elif head[0] == 1:
        blocks = [(header + 16, int.from_bytes(head[8:12], "little"))]
        version, message_header = 1, 8
    else:
        raise Unavailable
    for _ in range(_MAX_HEADER_BLOCKS):
        if not blocks:
            return
        start, size = blocks.pop(0)
        block = read_exactly(read, base + start, size)
        position = 0
        while position + message_header <= size:
            if version == 1:
                kind = int.from_bytes(block[position : position + 2], "little")
                length = int.from_bytes(block[position + 2 : position + 4], "little")
                flags = block[position + 4]
            else:
                kind = block[position]
                length = int.from_bytes(block[position + 1 : position + 3], "little")
                flags = block[position + 3]
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
                yield kind, flags, data


def _address(data: bytes, at: int, address_size: int) -> int | None:
    if len(data) < at + address_size:
        raise Unavailable
    address = int.from_bytes(data[at : at + address_size], "little")
    return None if undefined(address, address_size) else address


def _v4_layout(version: int, data: bytes, sizes: tuple[int, int]) -> ChunkedLayout:
    address_size, length_size = sizes
    if len(data) < 5:
        raise Unavailable
    flags, dimensionality, width = data[2], data[3], data[4]
    if not 1 <= width <= 8 or dimensionality < 2 or flags & ~0x03:
        raise Unavailable
    at = 5 + dimensionality * width
    if len(data) < at + 1:
        raise Unavailable
    dims = tuple(
        int.from_bytes(data[5 + i * width : 5 + (i + 1) * width], "little")
        for i in range(dimensionality)
    )
    index_type = data[at]
    if index_type not in _INDEX_INFO_SIZE:
        raise Unavailable
    info_size = _INDEX_INFO_SIZE[index_type]
    if index_type == SINGLE_CHUNK and flags & 0x02:
        info_size = length_size + 4
    info = data[at + 1 : at + 1 + info_size]
    if len(info) != info_size:
        raise Unavailable
    address = _address(data, at + 1 + info_size, address_size)
    return ChunkedLayout(version, index_type, address, dims, flags, info)


def chunked_layout(
    read: Reader,
    base: int,
    header: int,
    sizes: tuple[int, int],
    stored: Iterable[tuple[int, bytes]] | None = None,
) -> ChunkedLayout | None:
    """The layout of the dataset whose object header is at (relative) ``header``, or
    None when it is not chunked (``stored``: the header's messages, when already read).
    Raises :class:`Unavailable` for bytes not at hand or a message this module does not
    know."""
    address_size = sizes[0]
    for kind, data in stored if stored is not None else messages(read, base, header, sizes):
        if kind != _LAYOUT or len(data) < 3:
            continue
        version = data[0]
        if version in (4, 5):
            # Version 5 (libhdf5 2.0) shares version 4's fields; only the width of
            # filtered chunk sizes in the index differs.
            return _v4_layout(version, data, sizes) if data[1] == 2 else None
        if version == 3:
            if data[1] != 2:
                return None
            dimensionality, at = data[2], 3
        elif version in (1, 2):
            if data[2] != 2:
                return None
            dimensionality, at = data[1], 8
        else:
            raise Unavailable
        address = _address(data, at, address_size)
        start = at + address_size
        if len(data) < start + 4 * dimensionality:
            raise Unavailable
        dims = tuple(
            int.from_bytes(data[start + 4 * i : start + 4 * (i + 1)], "little")
            for i in range(dimensionality)
        )
        return ChunkedLayout(version, BTREE_V1, address, dims)
    return None


__all__ = [
    "BTREE_V1",
    "BTREE_V2",
    "EXTENSIBLE_ARRAY",
    "FIXED_ARRAY",
    "IMPLICIT",
    "SINGLE_CHUNK",
    "ChunkedLayout",
    "Reader",
    "Unavailable",
    "chunked_layout",
    "messages",
    "read_exactly",
    "undefined",
]
