"""The structure checks of one open HDF5 file, each object checked once.

A parse opens each file once (the main file and externally linked ones) and asks, for
every group before listing it and every dataset before reading its attributes, whether
what the object header points at is sound (see
:mod:`~virtualizarr_fill.hdf5.format.object_storage`). :class:`FileChecks` answers from the
bytes the file's reader has fetched (or fetches them), remembers each answer by
header address, and records whether any group of the file had to be left out: libhdf5
then must not look up object names by address, which walks every group of the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from virtualizarr_fill.hdf5.format.layout_message import Unavailable, messages
from virtualizarr_fill.hdf5.format.object_storage import ObjectStorage, inspect_object
from virtualizarr_fill.hdf5.format.structures import FileFacts, Reader, uint
from virtualizarr_fill.hdf5.format.symbol_table import GroupKs, group_ks

if TYPE_CHECKING:
    from virtualizarr_fill.hdf5.reader import HDF5File


def file_reader(reader: HDF5File) -> Reader:
    """``read(position, length)`` over the file's reader: its bytes, None past its end."""
    size = reader.size

    def read(position: int, length: int) -> bytes | None:
        if position < 0 or length < 0 or position + length > size:
            return None
        return reader.read_range(position, length)

    return read


class FileChecks:
    """Structure checks of one file (see the module's documentation)."""

    def __init__(self, reader: HDF5File) -> None:
        self.read = file_reader(reader)
        self.facts = FileFacts(reader.base, reader.address_size, reader.length_size, reader.size)
        self._ks: GroupKs | None = None
        self._objects: dict[int, ObjectStorage] = {}
        #: Whether some group of the file could not be checked and was left out.
        self.groups_left_out = False

    @property
    def ks(self) -> GroupKs:
        if self._ks is None:
            self._ks = group_ks(self.read, self.facts, self._extension_messages())
        return self._ks

    def _extension_messages(self) -> list[tuple[int, bytes]]:
        """The superblock extension's messages (versions 2 and 3), if any."""
        o = self.facts.address_size
        head = self.read(self.facts.base, 12 + 2 * o)
        if head is None or len(head) < 12 + 2 * o or head[8] not in (2, 3):
            return []
        extension = uint(head, 12 + o, o)
        if not self.facts.defined(extension):
            return []
        sizes = (self.facts.address_size, self.facts.length_size)
        try:
            return list(messages(self.read, self.facts.base, extension, sizes))
        except (Unavailable, IndexError, ValueError):
            return []

    def object(self, header: int, what: str) -> ObjectStorage:
        """What the object header at (relative) ``header`` points at, checked once."""
        known = self._objects.get(header)
        if known is None:
            known = inspect_object(self.read, self.facts, header, self.ks, what)
            self._objects[header] = known
        return known


__all__ = ["FileChecks", "file_reader"]
