"""The open files of one parse, and the rules for following names between them.

A parse opens its file and, through external links, virtual datasets and external raw
storage, possibly others. :class:`FileSession` opens each once (refusing what is not
HDF5), keeps its structure checks (:class:`~virtualizarr_fill.hdf5.file_checks.FileChecks`),
decides which other files may be referenced at all (:meth:`FileSession.refusal`, the
path policy), and opens objects by path one checked group at a time
(:meth:`FileSession.open_path`): libhdf5's own path lookup walks every group on the way
without looking at it first.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any, Literal

import h5py
from h5py._objects import phil
from obspec_utils.registry import ObjectStoreRegistry

from virtualizarr_fill.errors import CorruptFileError, NotHDF5Error
from virtualizarr_fill.hdf5._libhdf5 import file_number, object_address, vlen_base_size
from virtualizarr_fill.hdf5.attrs import VlenReader
from virtualizarr_fill.hdf5.file_checks import FileChecks
from virtualizarr_fill.hdf5.format.vlen_descriptors import (
    DescriptorsUnavailable,
    VlenDescriptors,
    attribute_data,
    from_bytes,
)
from virtualizarr_fill.hdf5.reader import HDF5File, open_h5py
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.io.registries import resolve

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: libhdf5's default limit on soft and external links followed in one lookup.
MAX_LINK_HOPS = 16

ExternalFiles = Literal["same-directory", "allow"]


class PathRefused(Exception):
    """A path cannot be followed safely, or (``missing``) names no object; the message
    says why."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def _netcdf3_version(head: bytes) -> int | None:
    if head[:3] == b"CDF" and len(head) > 3 and head[3] in (1, 2, 5):
        return head[3]
    return None


def find_superblock(reader: StoreFile) -> int:
    """Offset of the HDF5 signature: 0, or after a user block of 512 * 2**n bytes."""
    offset = 0
    size = reader.size
    while offset + len(HDF5_SIGNATURE) <= size:
        if reader.read_range(offset, len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
            return offset
        offset = 512 if offset == 0 else offset * 2
    return -1


def superblock_sizes(head: bytes) -> tuple[int, int] | None:
    """(size of offsets, size of lengths) from the first bytes of a superblock, or None
    for a version this does not know.

    What ``get_create_plist().get_sizes()`` returns, read from the bytes at hand instead
    of a copy of the file creation property list: versions 0 and 1 keep the sizes at
    bytes 13 and 14, versions 2 and 3 at bytes 9 and 10.
    """
    if len(head) < 15 or head[:8] != HDF5_SIGNATURE:
        return None
    version = head[8]
    if version in (0, 1):
        return head[13], head[14]
    if version in (2, 3):
        return head[9], head[10]
    return None


def outside_directory(base_url: str, target_url: str) -> bool:
    """Whether ``target_url`` lies outside the directory (or bucket prefix) holding
    ``base_url``. Local paths are compared after resolving symbolic links, so a link
    inside the directory that points elsewhere counts as outside."""
    base_scheme, _, base_rest = base_url.partition("://")
    scheme, _, rest = target_url.partition("://")
    if scheme != base_scheme:
        return True
    if scheme == "file":
        directory = os.path.realpath(os.path.dirname("/" + base_rest.lstrip("/")))
        target = os.path.realpath("/" + rest.lstrip("/"))
        return os.path.commonpath([directory, target]) != directory
    directory = posixpath.dirname(base_rest)
    target = posixpath.normpath(rest)
    return not target.startswith(directory.rstrip("/") + "/")


@dataclass
class FileSession:
    """Open files of one parse (the main file and the files it references)."""

    registry: ObjectStoreRegistry
    reader_options: dict[str, Any]
    external_files: ExternalFiles = "same-directory"
    files: dict[str, tuple[h5py.File, HDF5File]] = field(default_factory=dict)
    checks: dict[str, FileChecks] = field(default_factory=dict)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    #: The file the parse was asked for (the path policy's reference point).
    main_url: str = ""
    #: libhdf5's file number of each opened file -> its URL.
    urls: dict[int | None, str] = field(default_factory=dict)

    def refusal(self, url: str, target_url: str, what: str) -> str | None:
        """Why ``what`` (naming ``target_url``), found in ``url``, may not be followed,
        or None."""
        if self.external_files == "allow" or target_url == url:
            return None
        reference = self.main_url or url
        if outside_directory(reference, target_url):
            return (
                f"{what} points outside the directory of {reference} ({target_url}); "
                'not followed (HDF5Parser(external_files="allow") follows it)'
            )
        return None

    def exists(self, url: str) -> bool:
        try:
            store, path = self.registry.resolve(url)
            store.head(path)
        except Exception:  # any failure means "cannot use it"
            return False
        return True

    def open(self, url: str) -> tuple[h5py.File, HDF5File]:
        if url in self.files:
            return self.files[url]
        store, path = resolve(self.registry, url)
        reader = HDF5File(store, path, **self.reader_options)
        head = reader.read_range(0, 8)
        version = _netcdf3_version(head)
        if version is not None:
            raise NotHDF5Error(
                f"{url}: this is a netCDF-3 file (CDF-{version} classic format), not HDF5 or "
                "netCDF-4; open it with VirtualiZarr's NetCDF3Parser"
            )
        superblock = find_superblock(reader)
        if superblock < 0:
            raise NotHDF5Error(f"{url}: not an HDF5 file (no HDF5 signature at 0 or 512*2^n)")
        reader.base = superblock
        reader.seek(0)
        try:
            file = open_h5py(reader)
        except OSError as exc:
            raise CorruptFileError(f"{url}: the HDF5 library cannot open it: {exc}") from None
        self.stack.enter_context(file)
        sizes = superblock_sizes(reader.read_range(superblock, 16))
        if sizes is None:
            with contextlib.suppress(Exception):  # keep the defaults (8) if unreadable
                offsets, lengths = file.id.get_create_plist().get_sizes()
                sizes = (int(offsets), int(lengths))
        if sizes is not None:
            reader.address_size, reader.length_size = sizes
            reader.sizes_known = True
        self.files[url] = (file, reader)
        self.checks[url] = FileChecks(reader)
        self.urls[file_number(file.id)] = url
        return file, reader

    def open_with_size(self, url: str) -> tuple[h5py.File, int]:
        file, reader = self.open(url)
        return file, reader.size

    def opened_reader(self, url: str) -> HDF5File | None:
        """The reader of a file this session has opened, else None."""
        opened = self.files.get(url)
        return None if opened is None else opened[1]

    def checks_of(self, obj: Any) -> FileChecks | None:
        """The checks of the opened file an h5py object belongs to."""
        url = self.urls.get(file_number(obj.id))
        return None if url is None else self.checks[url]

    def attributes_problem(self, obj: Any, what: str) -> str | None:
        """Why the attributes of ``obj`` (an h5py object) cannot be read safely, else
        None (their storage checked, once per object)."""
        checks = self.checks_of(obj)
        if checks is None:
            return "its file is not one this parse opened"
        try:
            address = object_address(obj.id)
        except Exception as exc:  # a corrupt object header
            return f"its object header cannot be read ({exc})"
        return checks.object(address, what).attributes_problem

    def vlen_attribute(
        self, obj: Any, attr: Any, name: bytes, count: int
    ) -> VlenDescriptors | None:
        """The stored descriptors of the variable-length attribute ``name`` (open as
        ``attr``) of ``obj``, read from the file's bytes; None when they cannot be."""
        checks = self.checks_of(obj)
        if checks is None:
            return None
        try:
            address = object_address(obj.id)
        except Exception:  # a corrupt object header
            return None
        return _descriptors(checks, address, attr, name, count)

    def vlen_reader(self, url: str, address: int) -> VlenReader:
        """:meth:`vlen_attribute` for the object at ``address`` of the opened file
        ``url`` (its owner known, nothing to look up per attribute)."""
        checks = self.checks[url]

        def read(obj: Any, attr: Any, name: bytes, count: int) -> VlenDescriptors | None:
            return _descriptors(checks, address, attr, name, count)

        return read

    def root(self, url: str) -> h5py.Group:
        """The root group of an opened file, its links checked (else
        :class:`PathRefused`)."""
        file, _ = self.files[url]
        with phil:
            root = h5py.Group(h5py.h5o.open(file.id, b"/"))
        self.check_group(url, root, "/")
        return root

    def check_group(self, url: str, group: h5py.Group, path: str) -> None:
        """Raise :class:`PathRefused` unless the group's links are sound."""
        try:
            address = object_address(group.id)
        except Exception as exc:  # a corrupt object header
            raise PathRefused(f"group {path!r} cannot be read ({exc})") from None
        storage = self.checks[url].object(address, f"group {path!r}")
        if storage.links_problem is not None:
            raise PathRefused(storage.links_problem)

    def open_path(
        self, url: str, path: str, start: h5py.Group | None = None, start_path: str = ""
    ) -> Any:
        """The object at ``path`` in the opened file ``url`` (relative paths from the
        group ``start``, at ``start_path``), opened one checked group at a time,
        following soft links (at most :data:`MAX_LINK_HOPS`); raises
        :class:`PathRefused`."""
        return self._open_path(url, path, start, start_path, [MAX_LINK_HOPS])

    def _open_path(
        self, url: str, path: str, start: h5py.Group | None, start_path: str, hops: list[int]
    ) -> Any:
        absolute = start is None or path.startswith("/")
        current: Any = self.root(url) if absolute else start
        where = "/" if absolute else start_path
        for name in [part for part in path.split("/") if part and part != "."]:
            if not isinstance(current, h5py.Group):
                raise PathRefused(f"{where!r} is not a group")
            where = posixpath.join(where, name)
            key = name.encode("utf-8", "surrogateescape")
            try:
                info = current.id.links.get_info(key)
            except Exception:
                raise PathRefused(f"no object {where!r}", missing=True) from None
            if info.type == h5py.h5l.TYPE_SOFT:
                hops[0] -= 1
                if hops[0] < 0:
                    raise PathRefused(f"too many soft links on the way to {path!r}")
                target = current.id.links.get_val(key).decode("utf-8", "surrogateescape")
                current = self._open_path(url, target, current, posixpath.dirname(where), hops)
            elif info.type == h5py.h5l.TYPE_HARD:
                try:
                    oid = h5py.h5o.open(current.id, key)
                except Exception as exc:
                    raise PathRefused(f"{where!r} cannot be opened ({exc})") from None
                current = _wrap(oid)
            else:
                raise PathRefused(f"{where!r} is an external or user-defined link")
            if isinstance(current, h5py.Group):
                self.check_group(url, current, where)
        return current

    def close(self, url: str) -> None:
        """Close every file; libhdf5 failing to (a corrupt file) is a
        :class:`CorruptFileError` naming ``url``."""
        try:
            self.stack.close()
        except Exception as exc:
            raise CorruptFileError(
                f"{url}: the HDF5 library failed to close the file ({type(exc).__name__}: "
                f"{exc}): its metadata is corrupt"
            ) from None


def _descriptors(
    checks: FileChecks, address: int, attr: Any, name: bytes, count: int
) -> VlenDescriptors | None:
    storage = checks.object(address, "an object")
    if storage.attributes_problem is not None:
        return None
    stored = attribute_data(storage, checks.read, name)
    if stored is None:
        return None
    base_size = stored.base_size()
    if base_size is None:
        base_size = vlen_base_size(attr)
    try:
        return from_bytes(stored.data, count, checks.facts, base_size)
    except DescriptorsUnavailable:
        return None


def _wrap(oid: Any) -> Any:
    kind = h5py.h5i.get_type(oid)
    if kind == h5py.h5i.DATASET:
        return h5py.Dataset(oid, readonly=True)
    if kind == h5py.h5i.GROUP:
        return h5py.Group(oid)
    if kind == h5py.h5i.DATATYPE:
        return h5py.Datatype(oid)
    raise PathRefused("an object of unknown kind")


__all__ = [
    "MAX_LINK_HOPS",
    "ExternalFiles",
    "FileSession",
    "PathRefused",
    "find_superblock",
    "outside_directory",
    "superblock_sizes",
]
