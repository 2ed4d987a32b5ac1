"""Variable-length data checked before libhdf5 touches it.

Variable-length strings and sequences live in *global heap collections*; each element
of a dataset or attribute stores only a descriptor (sequence length, collection
address, object index). libhdf5 trusts both sides:

* it allocates (and clears) whatever length a descriptor claims before reading the
  heap, so one corrupt descriptor can cost gigabytes;
* it walks a collection's objects by their recorded sizes, and a free-space object of
  size zero makes that walk loop forever (``H5HG__cache_heap_deserialize``); an object
  larger than its collection makes later reads run past the collection's buffer.

Hence two checks, neither of which h5py or libhdf5 offers: :func:`vlen_payload_bytes`
bounds what the descriptors claim before the values are read (the descriptors
themselves are read from the file's bytes by
:mod:`virtualizarr_fill.hdf5.format.vlen_descriptors`),
and :func:`collection_problem` walks a collection the way libhdf5 does, run by
:class:`~virtualizarr_fill.hdf5.reader.HDF5File` on every collection libhdf5 reads.
"""

from __future__ import annotations

import numpy as np

from virtualizarr_fill.hdf5.format.vlen_descriptors import VlenDescriptors

COLLECTION_SIGNATURE = b"GCOL"
#: Collection format version 1, the only one (libhdf5 rejects others before walking).
COLLECTION_VERSION = 1


class CorruptGlobalHeapError(OSError):
    """A global heap collection libhdf5 would loop on or read past (raised from the
    file object's read, so that libhdf5's read fails instead)."""


class ImplausibleVlenError(ValueError):
    """Variable-length descriptors claim more data than the file or a bound allows."""


def collection_size(head: bytes, length_size: int) -> int:
    """The size a collection's header records (``head`` holds at least the header)."""
    return int.from_bytes(head[8 : 8 + length_size], "little")


def collection_problem(data: bytes, length_size: int) -> str | None:
    """Why libhdf5 would loop on, or read past, the collection ``data`` (the whole
    collection, header included), or None.

    Mirrors libhdf5's walk: objects follow the header back to back, each with a 16-byte
    header (for 8-byte lengths) and its data padded to 8 bytes; object 0 is free space
    whose size already includes its header; a tail too short for an object header is
    free space.
    """
    size = collection_size(data, length_size)
    object_header = 8 + length_size
    position = 8 + length_size
    while position < size:
        if position + object_header > size:
            break
        index = int.from_bytes(data[position : position + 2], "little")
        stored = int.from_bytes(data[position + 8 : position + 8 + length_size], "little")
        need = object_header + -(-stored // 8) * 8 if index else stored
        if need == 0:
            return f"a free-space object of size 0 at offset {position} (libhdf5 loops on it)"
        if position + need > size:
            return (
                f"object {index} at offset {position} claims {stored} bytes, past the end "
                f"of the {size}-byte collection"
            )
        position += need
    return None


def vlen_payload_bytes(
    descriptors: VlenDescriptors,
    file_size: int | None = None,
    *,
    what: str = "variable-length data",
) -> int:
    """Bytes libhdf5 allocates to read the elements ``descriptors`` describe (claimed
    lengths times the stored base element size).

    With ``file_size``, raises :class:`ImplausibleVlenError` when one element claims
    more than the whole file holds (a heap object cannot be larger) or a heap address
    lies past the end; ``what`` names the dataset or attribute in the message.
    """
    if file_size is None:
        return descriptors.total_length() * descriptors.base_size
    claimed = descriptors.lengths * np.uint64(descriptors.base_size)
    stored = descriptors.addresses != 0
    if claimed.size and int(claimed.max()) > file_size:
        element = int(np.argmax(claimed))
        raise ImplausibleVlenError(
            f"{what}: element {element} claims {int(claimed[element])} bytes of "
            f"variable-length data, more than the whole file ({file_size} bytes)"
        )
    beyond = stored & (descriptors.addresses >= np.uint64(file_size))
    if beyond.any():
        element = int(np.argmax(beyond))
        raise ImplausibleVlenError(
            f"{what}: element {element} points at global heap address "
            f"{int(descriptors.addresses[element])}, past the end of the file "
            f"({file_size} bytes)"
        )
    return int(claimed.sum(dtype=np.uint64))


__all__ = [
    "COLLECTION_SIGNATURE",
    "CorruptGlobalHeapError",
    "ImplausibleVlenError",
    "collection_problem",
    "collection_size",
    "vlen_payload_bytes",
]
