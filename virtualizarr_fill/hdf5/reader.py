"""The file object h5py reads an HDF5 file through.

A :class:`~virtualizarr_fill.io.files.StoreFile` (object-store reads, counted) that also
checks every global heap collection libhdf5 loads before libhdf5 parses it (see
:mod:`virtualizarr_fill.hdf5.format.global_heap`): a collection libhdf5 would loop on makes
the read fail with :class:`~virtualizarr_fill.hdf5.format.global_heap.CorruptGlobalHeapError`,
which h5py raises from the attribute or dataset read that needed it.

libhdf5 reads a collection at its address, first 4 KiB and then the rest when the
header records more; global heap reads bypass its metadata accumulator, so every
collection load is a read starting with the collection's signature. Raw data that
happens to start with that signature and version is checked too, and only refused if
it would also loop libhdf5 as a collection.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Buffer

import h5py
from h5py import h5f, h5fd, h5p

from virtualizarr_fill.hdf5.format.global_heap import (
    COLLECTION_SIGNATURE,
    COLLECTION_VERSION,
    CorruptGlobalHeapError,
    collection_problem,
    collection_size,
)
from virtualizarr_fill.io.files import StoreFile

_HEAD = COLLECTION_SIGNATURE + bytes([COLLECTION_VERSION])
#: Largest file opened from memory (see :func:`open_h5py`): below it the core driver
#: saves the Python call per metadata read; above it copying the image twice into
#: libhdf5 and scanning it for heap collections cost more than those calls.
IMAGE_MAX_BYTES = 64 * 1024


class HDF5File(StoreFile):
    """A :class:`StoreFile` that refuses global heap collections libhdf5 cannot walk.

    The superblock facts are set once known: ``base`` (the superblock's position, which
    HDF5 addresses are relative to), ``address_size`` and ``length_size`` (8 unless the
    superblock says otherwise; ``sizes_known`` once read).
    """

    base: int = 0
    address_size: int = 8
    length_size: int = 8
    #: Whether ``address_size`` and ``length_size`` were read from the file.
    sizes_known: bool = False

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

    def _image_collections_sound(self, image: bytes) -> bool:
        """Whether every global heap collection candidate in ``image`` (the whole file)
        passes the check :meth:`readinto` would make when libhdf5 loads it."""
        start = image.find(_HEAD)
        while start >= 0:
            if start + 16 <= len(image) and start not in self._collections_checked:
                size = collection_size(image[start : start + 16], self.length_size)
                try:
                    self._check_collection(start, image[start : start + max(size, 16)])
                except CorruptGlobalHeapError:
                    return False
            start = image.find(_HEAD, start + 1)
        return True

    def whole_image(self, limit: int | None = None) -> bytes | None:
        """The whole file when it holds at most ``limit`` bytes (default
        :data:`IMAGE_MAX_BYTES`), its first request already fetched all of it and every
        global heap collection in it is sound, else None (never a request)."""
        limit = IMAGE_MAX_BYTES if limit is None else limit
        size = self.size
        image = self.cached_range(0, size) if 0 < size <= limit else None
        if image is None or not self._image_collections_sound(image):
            return None
        return image


#: In-memory files need distinct names: libhdf5 treats two open core-driver files of
#: the same name (and no backing file) as one file.
_IMAGE_NAMES = itertools.count()


def open_h5py(reader: HDF5File) -> h5py.File:
    """``h5py.File(reader, "r")``, opened with the low-level calls.

    A small file (:data:`IMAGE_MAX_BYTES`) the first request fetched whole is opened
    from that memory with libhdf5's core driver (no Python call per metadata read); any
    other through h5py's
    file-object driver, which reads through ``reader``. Both see the same bytes and the
    same end of file; the core driver is used only when no global heap collection in
    the file would fail :class:`HDF5File`'s check (that check runs inside ``reader``'s
    reads, which the core driver never makes), and the file-object driver is the
    fallback whenever the core driver refuses the file. The library-version bounds are h5py's
    defaults; h5py's ``File()`` adds only Python-level bookkeeping on top of these calls.
    """
    image = reader.whole_image()
    if image is not None:
        fapl = _core_file_access(image)
        try:
            name = b"virtualizarr_fill_image_%d" % next(_IMAGE_NAMES)
            return h5py.File(h5f.open(name, h5f.ACC_RDONLY, fapl=fapl))
        except OSError:
            # The core driver refuses some files the file-object driver opens (a
            # superblock whose flags say a writer has it open): h5py's way decides.
            pass
    fapl = _file_access()
    fapl.set_fileobj_driver(h5fd.fileobj_driver, reader)
    name = repr(reader).encode("ascii", "replace")
    return h5py.File(h5f.open(name, h5f.ACC_RDONLY, fapl=fapl))


#: Each thread's core-driver file access property list: libhdf5 copies the image and
#: the properties into the file it opens, so one list serves every open of the thread
#: (creating and configuring one costs about as much as a small file's attributes).
_core_access = threading.local()


def _core_file_access(image: bytes) -> h5p.PropFAID:
    """A core-driver file access property list holding a copy of ``image``."""
    fapl = getattr(_core_access, "fapl", None)
    if fapl is None:
        fapl = _file_access()
        fapl.set_fapl_core(backing_store=False)
        _core_access.fapl = fapl
    fapl.set_file_image(image)
    return fapl


def _file_access() -> h5p.PropFAID:
    """A file access property list as h5py's ``File()`` makes it for reading."""
    fapl = h5p.create(h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5f.LIBVER_EARLIEST, h5f.LIBVER_LATEST)
    return fapl


__all__ = ["HDF5File", "open_h5py"]
