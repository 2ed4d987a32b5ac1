"""The file object h5py reads an HDF5 file through.

A :class:`~virtualizarr_fill.io.StoreFile` (object-store reads, counted) that also
checks every global heap collection libhdf5 loads before libhdf5 parses it (see
:mod:`virtualizarr_fill.hdf5.global_heap`): a collection libhdf5 would loop on makes
the read fail with :class:`~virtualizarr_fill.hdf5.global_heap.CorruptGlobalHeapError`,
which h5py raises from the attribute or dataset read that needed it.

libhdf5 reads a collection at its address, first 4 KiB and then the rest when the
header records more; global heap reads bypass its metadata accumulator, so every
collection load is a read starting with the collection's signature. Raw data that
happens to start with that signature and version is checked too, and only refused if
it would also loop libhdf5 as a collection.
"""

from __future__ import annotations

from collections.abc import Buffer

from virtualizarr_fill.hdf5.global_heap import (
    COLLECTION_SIGNATURE,
    COLLECTION_VERSION,
    CorruptGlobalHeapError,
    collection_problem,
    collection_size,
)
from virtualizarr_fill.io import StoreFile

_HEAD = COLLECTION_SIGNATURE + bytes([COLLECTION_VERSION])


class HDF5File(StoreFile):
    """A :class:`StoreFile` that refuses global heap collections libhdf5 cannot walk.

    The superblock facts are set once known: ``base`` (the superblock's position, which
    HDF5 addresses are relative to), ``address_size`` and ``length_size`` (8 unless the
    superblock says otherwise).
    """

    base: int = 0
    address_size: int = 8
    length_size: int = 8

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._collections_checked: set[int] = set()

    def readinto(self, buffer: Buffer) -> int:
        start = self.tell()
        view = memoryview(buffer).cast("B")
        count = super().readinto(view)
        checked = start in self._collections_checked
        if count >= 16 and not checked and view[:5].tobytes() == _HEAD:
            self._check_collection(start, view[:count].tobytes())
        return count

    def _check_collection(self, start: int, head: bytes) -> None:
        size = collection_size(head, self.length_size)
        if start + size > self.size:
            raise CorruptGlobalHeapError(
                f"{self.path}: global heap collection at byte {start} claims {size} bytes, "
                f"past the end of the file ({self.size} bytes)"
            )
        data = head if size <= len(head) else self.read_range(start, size)
        problem = collection_problem(data, self.length_size)
        if problem is not None:
            raise CorruptGlobalHeapError(
                f"{self.path}: global heap collection at byte {start} is corrupt: {problem}"
            )
        self._collections_checked.add(start)


__all__ = ["HDF5File"]
