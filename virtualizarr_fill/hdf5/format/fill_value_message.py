"""A dataset's fill-value messages, checked against its datatype.

libhdf5 decodes the fill-value message (0x05, versions 1 to 3) and the old fill-value
message (0x04) without comparing the value's size with the datatype's: a value of the
wrong size is converted from bytes that are not a value of the type (or from past the
message), and flags outside their defined values select behaviours no writer asked
for. A dataset without storage then reads as that garbage. This module decodes both
messages from the header's bytes (HDF5 file format specification, "Fill Value
Message") and says what is wrong with them:

* a version other than 1, 2 or 3;
* a space allocation time (versions 1, 2) outside 0-3, a fill-value write time outside
  0-2, a "fill value defined" byte other than 0 or 1 (versions 1, 2), reserved flag
  bits set, or both "undefined" and "has a value" set (version 3);
* a value whose size is neither 0 nor the datatype's size, or (version 3) a value of 0
  bytes where the flags say there is one;
* fields that do not fill the message (its stored length, less the padding to 8 bytes
  that version 1 object headers add): the bytes were written as another version.

Messages stored as references to shared messages are not decoded here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from virtualizarr_fill.hdf5.format.structures import uint

OLD_FILL_VALUE = 0x04
FILL_VALUE = 0x05

#: libhdf5's fill-value write times (``H5D_fill_time_t``).
FILL_TIME_ALLOC, FILL_TIME_NEVER, FILL_TIME_IFSET = 0, 1, 2
#: Padding a version 1 object header adds to every message (to a multiple of 8 bytes).
_PADDING = 8


@dataclass(frozen=True)
class FillValueMessage:
    """The decoded fields of a fill-value message."""

    version: int
    #: One of :data:`FILL_TIME_ALLOC`, :data:`FILL_TIME_NEVER`, :data:`FILL_TIME_IFSET`.
    fill_time: int
    #: Whether the message defines a fill value at all (``False``: undefined).
    defined: bool
    #: Size of the stored value in bytes (0: none stored, the library default).
    size: int


class CorruptFillValueMessage(Exception):
    """A fill-value message that is not what any writer stores."""


def decode_fill_value_message(data: bytes, datatype_size: int | None) -> FillValueMessage:
    """Decode and check a fill-value message (0x05) for a datatype of
    ``datatype_size`` bytes (None: a size not known, not compared); raises
    :class:`CorruptFillValueMessage`."""
    if len(data) < 2:
        raise CorruptFillValueMessage("too short for its version")
    version = data[0]
    if version in (1, 2):
        if len(data) < 4:
            raise CorruptFillValueMessage(f"version {version}: too short for its fields")
        allocation, fill_time, defined = data[1], data[2], data[3]
        if allocation > 3:
            raise CorruptFillValueMessage(f"undefined space allocation time {allocation}")
        if fill_time > FILL_TIME_IFSET:
            raise CorruptFillValueMessage(f"undefined fill-value write time {fill_time}")
        if defined > 1:
            raise CorruptFillValueMessage(f"undefined 'fill value defined' byte {defined}")
        has_size = version == 1 or defined == 1
        at = 4
    elif version == 3:
        flags = data[1]
        fill_time = (flags >> 2) & 0x03
        if flags & 0xC0:
            raise CorruptFillValueMessage(f"reserved flag bits set (flags {flags:#04x})")
        if fill_time > FILL_TIME_IFSET:
            raise CorruptFillValueMessage(f"undefined fill-value write time {fill_time}")
        if flags & 0x10 and flags & 0x20:
            raise CorruptFillValueMessage("both 'undefined' and 'has a value' flags set")
        defined = 0 if flags & 0x10 else 1
        has_size = bool(flags & 0x20)
        at = 2
    else:
        raise CorruptFillValueMessage(f"unknown version {version}")
    size = 0
    if has_size:
        if len(data) < at + 4:
            raise CorruptFillValueMessage(f"version {version}: cut off before its size")
        size = uint(data, at, 4)
        at += 4 + size
        if version == 3 and size == 0:
            # libhdf5 refuses every read of it ("invalid combination of fill-value info").
            raise CorruptFillValueMessage("version 3: the 'has a value' flag with a 0-byte value")
    _check_value(size, datatype_size, at, len(data), f"version {version}")
    return FillValueMessage(version, fill_time, bool(defined), size)


def check_old_fill_value_message(data: bytes, datatype_size: int | None) -> None:
    """Check an old fill-value message (0x04): a size and the value."""
    if len(data) < 4:
        raise CorruptFillValueMessage("old message (0x04): too short for its size")
    size = uint(data, 0, 4)
    _check_value(size, datatype_size, 4 + size, len(data), "old message (0x04)")


def _check_value(size: int, datatype_size: int | None, end: int, stored: int, what: str) -> None:
    if datatype_size is not None and size not in (0, datatype_size):
        raise CorruptFillValueMessage(
            f"{what}: a {size}-byte value for a {datatype_size}-byte datatype"
        )
    if end > stored or stored - end >= _PADDING:
        raise CorruptFillValueMessage(
            f"{what}: {stored} bytes whose fields take {end} (written as another version)"
        )


def fill_value_problem(
    messages: Iterable[tuple[int, bytes]], datatype_size: int | None, shared: Iterable[int] = ()
) -> tuple[str | None, FillValueMessage | None]:
    """Why the fill-value messages among an object header's ``messages`` are corrupt
    (None: sound), and the decoded fill-value message (None: absent or shared)."""
    skip = set(shared)
    decoded = None
    for kind, data in messages:
        if kind in skip:
            continue
        try:
            if kind == FILL_VALUE:
                decoded = decode_fill_value_message(data, datatype_size)
            elif kind == OLD_FILL_VALUE:
                check_old_fill_value_message(data, datatype_size)
        except CorruptFillValueMessage as exc:
            return f"corrupt fill-value message ({exc})", None
    return None, decoded


__all__ = [
    "FILL_TIME_NEVER",
    "FILL_VALUE",
    "OLD_FILL_VALUE",
    "CorruptFillValueMessage",
    "FillValueMessage",
    "check_old_fill_value_message",
    "decode_fill_value_message",
    "fill_value_problem",
]
