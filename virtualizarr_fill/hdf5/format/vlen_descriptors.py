"""The stored descriptors of variable-length data, read from the file's bytes.

Each element of a variable-length string or sequence is stored as a descriptor: the
sequence length (4 bytes), the address of a global heap collection and an object index
(4 bytes). libhdf5 allocates whatever length a descriptor claims before it reads the
heap, and h5py only ever asks libhdf5 for values, so the descriptors are read here, from
the bytes libhdf5 would convert, and bounded (see
:func:`~virtualizarr_fill.hdf5.format.global_heap.vlen_payload_bytes`) before any value is
read:

* an attribute's data is the tail of its attribute message (versions 1-3), found among
  the object header's messages or, for dense attribute storage, in the checked
  fractal heap (see :mod:`~virtualizarr_fill.hdf5.format.object_storage`);
* a dataset's is its contiguous storage, its compact storage (in the layout message),
  or its chunks, undone of the deflate, shuffle and Fletcher-32 filters that string
  datasets are written with.

No library reads these bytes (libhdf5 converts them on every read; asking it for them
unconverted would take a conversion path registered in libhdf5 for the whole process,
which every h5py user of the process would then share). Hand-written per the HDF5 file
format specification ("Attribute Message", "Data Layout Message", "Filter Pipeline").
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from virtualizarr_fill.hdf5.format.object_storage import ObjectStorage
from virtualizarr_fill.hdf5.format.structures import FileFacts, Reader, uint

_LAYOUT = 0x08
_DEFLATE, _SHUFFLE, _FLETCHER32 = 1, 2, 3


class VlenDescriptors:
    """The stored descriptors of variable-length elements, in element order: a sequence
    length (u32), a global heap collection address and an object index (u32) each; and
    the stored size of one base element (a character, for strings)."""

    def __init__(self, table: np.ndarray, address_size: int, base_size: int) -> None:
        self._table = table  # elements x (8 + address_size) bytes
        self._address_size = address_size
        self.base_size = base_size

    def total_length(self) -> int:
        """Base elements all elements claim together."""
        return int(self._table[:, :4].copy().view("<u4").sum(dtype=np.uint64))

    @property
    def lengths(self) -> np.ndarray:
        """Base elements (characters for strings) each element claims, as uint64."""
        return self._table[:, :4].copy().view("<u4").ravel().astype(np.uint64)

    @property
    def addresses(self) -> np.ndarray:
        """Global heap collection address of each element (0: empty), as uint64."""
        padded = np.zeros((len(self._table), 8), dtype=np.uint8)
        padded[:, : self._address_size] = self._table[:, 4 : 4 + self._address_size]
        return padded.view("<u8").ravel()


class DescriptorsUnavailable(Exception):
    """The descriptors cannot be read from the bytes (the message says why)."""


def element_size(address_size: int) -> int:
    """Bytes of one stored descriptor."""
    return 8 + address_size


def table(data: bytes | np.ndarray, count: int, address_size: int) -> np.ndarray:
    """The first ``count`` descriptors of ``data`` as (count x element size) bytes."""
    size = element_size(address_size)
    if len(data) < count * size:
        raise DescriptorsUnavailable(
            f"{len(data)} bytes of data cannot hold {count} variable-length descriptors"
        )
    return np.frombuffer(data, np.uint8, count * size).reshape(count, size)


def _padded(length: int, version: int) -> int:
    return -(-length // 8) * 8 if version == 1 else length


@dataclass(frozen=True)
class StoredAttribute:
    """An attribute message's datatype (None: a shared one, stored elsewhere) and data."""

    datatype: bytes | None
    data: bytes

    def base_size(self) -> int | None:
        """The stored size of the base type of a variable-length datatype (class 9),
        from the datatype's bytes; None when they do not tell."""
        datatype = self.datatype
        if datatype is None or len(datatype) < 16 or datatype[0] & 0x0F != 9:
            return None
        return uint(datatype, 12, 4)


def attribute_message_parts(message: bytes) -> tuple[bytes, StoredAttribute] | None:
    """(name, stored datatype and data) of an attribute message (versions 1-3), or
    None when it is not one this reads."""
    if len(message) < 8 or message[0] not in (1, 2, 3):
        return None
    version, flags = message[0], message[1]
    name_size, type_size, space_size = uint(message, 2, 2), uint(message, 4, 2), uint(message, 6, 2)
    at = 8 + (1 if version == 3 else 0)
    name = message[at : at + name_size].rstrip(b"\0")
    at += _padded(name_size, version)
    datatype = None if version > 1 and flags & 0x01 else message[at : at + type_size]
    at += _padded(type_size, version) + _padded(space_size, version)
    if at > len(message):
        return None
    return name, StoredAttribute(datatype, message[at:])


def attribute_data(storage: ObjectStorage, read: Reader, name: bytes) -> StoredAttribute | None:
    """The stored datatype and data of attribute ``name`` of the object ``storage``
    describes (None: not found where this module looks, e.g. a filtered attribute
    heap). Every attribute message of the object is read once, on the first call."""
    if storage.attribute_data is None:
        found: dict[bytes, StoredAttribute] = {}
        messages = list(storage.attribute_messages)
        dense = storage.dense_attributes
        if dense is not None:
            for record in dense.names.records:
                stored = dense.heap.object_bytes(bytes(record[:8]), read)
                if stored is not None:
                    messages.append(stored)
        for message in messages:
            parts = attribute_message_parts(message)
            if parts is not None:
                found.setdefault(*parts)
        storage.attribute_data = found
    stored_attribute: StoredAttribute | None = storage.attribute_data.get(name)
    return stored_attribute


def compact_data(messages: Iterable[tuple[int, bytes]]) -> bytes | None:
    """A compact dataset's raw data, from its layout message."""
    for kind, data in messages:
        if kind != _LAYOUT or len(data) < 2:
            continue
        version = data[0]
        if version >= 3 and data[1] == 0 and len(data) >= 4:
            size = uint(data, 2, 2)
            return data[4 : 4 + size] if 4 + size <= len(data) else None
        if version in (1, 2) and data[2] == 0:
            at = 8 + 4 * data[1]
            size = uint(data, at, 4)
            return data[at + 4 : at + 4 + size] if at + 4 + size <= len(data) else None
    return None


def unfiltered(
    data: bytes, filters: list[tuple[int, tuple[int, ...]]], mask: int, size: int
) -> bytes:
    """A chunk's bytes with its filters undone (deflate, shuffle, Fletcher-32; filter i
    skipped when bit i of ``mask`` is set), at most ``size`` bytes kept from a stream."""
    for number in reversed(range(len(filters))):
        if mask & (1 << number):
            continue
        filter_id, values = filters[number]
        if filter_id == _FLETCHER32:
            data = data[:-4]
        elif filter_id == _DEFLATE:
            decompressor = zlib.decompressobj()
            try:
                data = decompressor.decompress(data, size + 1)
            except zlib.error as exc:
                raise DescriptorsUnavailable(f"a chunk does not inflate ({exc})") from None
        elif filter_id == _SHUFFLE:
            width = values[0] if values else 1
            whole = len(data) // width * width
            if width > 1 and whole:
                planes = np.frombuffer(data, np.uint8, whole).reshape(width, -1)
                data = planes.T.tobytes() + data[whole:]
        else:
            raise DescriptorsUnavailable(f"filter {filter_id} is not undone here")
    return data


def from_bytes(data: bytes, count: int, facts: FileFacts, base_size: int) -> VlenDescriptors:
    """:class:`VlenDescriptors` of ``count`` elements stored in ``data``."""
    return VlenDescriptors(table(data, count, facts.address_size), facts.address_size, base_size)


__all__ = [
    "DescriptorsUnavailable",
    "StoredAttribute",
    "VlenDescriptors",
    "attribute_data",
    "attribute_message_parts",
    "compact_data",
    "element_size",
    "from_bytes",
    "table",
    "unfiltered",
]
