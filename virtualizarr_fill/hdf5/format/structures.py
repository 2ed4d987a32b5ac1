"""What the checks of HDF5 metadata structures share.

libhdf5 trusts the structures it walks: a B-tree child pointing back at its own node
makes it recurse until the stack overflows, a record count larger than a node makes it
read past its buffers, a size field of 2**31 makes it allocate that much. The modules
that check a structure from its bytes before libhdf5 may follow it
(:mod:`~virtualizarr_fill.hdf5.format.symbol_table`, :mod:`~virtualizarr_fill.hdf5.format.btree_v2`,
:mod:`~virtualizarr_fill.hdf5.format.fractal_heap`,
:mod:`~virtualizarr_fill.hdf5.format.object_storage`) read bytes through a ``read(position,
length)`` function (None past the end of the file) and report the first problem as a
:class:`CorruptStructure` naming the structure and its byte position.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: (absolute file position, length) -> the bytes, or None past the end of the file.
Reader = Callable[[int, int], bytes | None]


class CorruptStructure(Exception):
    """A metadata structure contradicts itself or the file (the message says which,
    where, and how)."""


@dataclass(frozen=True)
class FileFacts:
    """What every check needs to know about the file: the position of the superblock
    (HDF5 addresses are relative to it), the size of offsets and lengths, and the
    file's size in bytes."""

    #: HDF5's undefined address (all bits set) for the file's size of offsets.
    undefined_address: int = field(init=False, default=0)

    base: int
    address_size: int
    length_size: int
    size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "undefined_address", (1 << (8 * self.address_size)) - 1)

    def defined(self, address: int) -> bool:
        return address != self.undefined_address

    def position(self, address: int, length: int, what: str) -> int:
        """The file position of ``length`` bytes at (relative) ``address``; raises when
        they do not lie inside the file."""
        position = self.base + address
        if address == self.undefined_address or position + length > self.size:
            raise CorruptStructure(
                f"{what} at address {address} (+{length} bytes) lies past the end of the "
                f"file ({self.size} bytes)"
            )
        return position


def fetch(read: Reader, facts: FileFacts, address: int, length: int, what: str) -> bytes:
    """``length`` bytes of ``what`` at (relative) ``address``, checked to lie inside the
    file."""
    position = facts.position(address, length, what)
    data = read(position, length)
    if data is None or len(data) < length:
        raise CorruptStructure(f"{what} at byte {position} is cut off by the end of the file")
    return bytes(data) if not isinstance(data, bytes) else data


def uint(data: bytes, at: int, width: int) -> int:
    """The little-endian unsigned integer of ``width`` bytes at ``at``."""
    return int.from_bytes(data[at : at + width], "little")


def encoded_size(value: int) -> int:
    """Bytes libhdf5 uses to encode values up to ``value`` (``H5VM_limit_enc_size``)."""
    return (max(value, 1).bit_length() - 1) // 8 + 1


def power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


__all__ = [
    "CorruptStructure",
    "FileFacts",
    "Reader",
    "encoded_size",
    "fetch",
    "power_of_two",
    "uint",
]
