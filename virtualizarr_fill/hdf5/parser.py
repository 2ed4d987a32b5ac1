"""``HDF5Parser``: HDF5 and netCDF-4 files as VirtualiZarr manifest stores.

The parser reads only metadata, with h5py, through a file object over the registry's
object store (:class:`virtualizarr_fill.io.StoreFile`), so local and cloud files work
alike and every request is counted. The result matches what
``xr.open_dataset(path, engine="h5netcdf", phony_dims="sort")`` shows (groups as a
DataTree): same variable and dimension names, attributes and values.

One unsupported dataset never costs the whole file: by default it is skipped with a
:class:`SkippedDatasetWarning` naming the dataset and the reason
(``on_unsupported="raise"`` raises instead). Dangling and cyclic links are skipped with
a :class:`SkippedLinkWarning`; odd attributes are converted or skipped with an
:class:`~virtualizarr_fill.hdf5.attrs.AttributeWarning`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import h5py
from h5py._objects import phil
from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
from virtualizarr.manifests.manifest import validate_and_normalize_path_to_uri

from virtualizarr_fill.errors import (
    CorruptFileError,
    FillValueError,
    NotHDF5Error,
    UnsupportedFeatureError,
)
from virtualizarr_fill.hdf5._libhdf5 import object_address
from virtualizarr_fill.hdf5.arrays import ArrayContext, DatasetRefused, Target, build_array
from virtualizarr_fill.hdf5.attrs import convert_attributes
from virtualizarr_fill.hdf5.dims import DatasetNode, DimensionNamer, GroupNode
from virtualizarr_fill.hdf5.reader import HDF5File, open_h5py
from virtualizarr_fill.hdf5.urls import join_url
from virtualizarr_fill.io import StoreFile, resolve
from virtualizarr_fill.manifests import FileManifestStore

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
DEFAULT_MAX_INLINE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CHUNKS = 1 << 22  # about 170 MB of dense manifest at the limit
#: Reads of whole aligned MiB blocks: HDF5 metadata is scattered (object headers, B-tree
#: nodes, heaps), and one MiB per round trip never costs more requests or bytes than
#: VirtualiZarr's default reader while usually needing fewer requests.
DEFAULT_READER_OPTIONS: dict[str, Any] = {"first_request": 1 << 20, "block_size": 1 << 20}


class SkippedDatasetWarning(UserWarning):
    """A dataset was left out of the virtual store; ``kind`` and ``reason`` say why."""

    def __init__(
        self, message: str, *, url: str = "", dataset: str = "", kind: str = "", reason: str = ""
    ) -> None:
        super().__init__(message)
        self.url = url
        self.dataset = dataset
        self.kind = kind
        self.reason = reason


class SkippedLinkWarning(UserWarning):
    """A link (dangling, cyclic, or unreadable) was not followed."""


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


@dataclass
class _FileSession:
    """Open files of one parse (the main file and externally linked ones)."""

    registry: ObjectStoreRegistry
    reader_options: dict[str, Any]
    readers: list[HDF5File] = field(default_factory=list)
    files: dict[str, tuple[h5py.File, HDF5File]] = field(default_factory=dict)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def reader(self, url: str) -> HDF5File:
        store, path = resolve(self.registry, url)
        reader = HDF5File(store, path, **self.reader_options)
        self.readers.append(reader)
        return reader

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
        reader = self.reader(url)
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
        return file, reader

    def open_with_size(self, url: str) -> tuple[h5py.File, int]:
        file, reader = self.open(url)
        return file, reader.size

    def opened_reader(self, url: str) -> HDF5File | None:
        """The reader of a file this session has opened, else None."""
        opened = self.files.get(url)
        return None if opened is None else opened[1]

    def close(self) -> None:
        self.stack.close()


class HDF5Parser:
    """Create a VirtualiZarr ``ManifestStore`` from an HDF5 or netCDF-4 file.

    Called as ``parser(url, registry)``, it reads the file's metadata and chunk indexes
    and returns a :class:`~virtualizarr_fill.manifests.FileManifestStore`: one array per
    dataset, with its filters as Zarr codecs, its header fill value as the Zarr
    ``fill_value``, its attributes (``_FillValue`` encoded as xarray expects), and
    dimension names from netCDF dimension scales (``phony_dim_N`` where a dataset has
    none). Groups become groups, for :func:`virtualizarr.open_virtual_datatree`. Edge
    chunks, which HDF5 stores padded, keep a regular grid in a single file.

    Parameters
    ----------
    group
        Path of the group to virtualise (default: the root group, with all subgroups).
    drop_variables
        Variable names to leave out, at every level of the hierarchy.
    on_unsupported
        What to do with a dataset that cannot be virtualised (an unsupported filter or
        datatype, a virtual dataset, a corrupt chunk index, ...): ``"warn"`` (default)
        skips it with a :class:`SkippedDatasetWarning`; ``"raise"`` raises
        :class:`~virtualizarr_fill.errors.UnsupportedFeatureError` (or
        :class:`~virtualizarr_fill.errors.CorruptFileError`).
    on_fill_out_of_range
        A ``_FillValue``/``missing_value`` the dataset's type cannot hold: ``"warn"``
        drops it, ``"raise"`` raises :class:`~virtualizarr_fill.errors.FillValueError`.
    max_inline_bytes
        Largest dataset read at parse time and stored inline (variable-length strings,
        compact storage, types h5py converts on read); larger ones are refused.
    max_chunks
        Largest chunk grid of one dataset (manifests are dense: about 40 bytes a chunk);
        larger ones are refused rather than exhausting memory.
    reader_options
        Keyword arguments for :class:`virtualizarr_fill.io.StoreFile` (``block_size``,
        ``first_request``; both 1 MiB by default).

    Raises
    ------
    virtualizarr_fill.NotHDF5Error
        The object is not an HDF5 file (netCDF-3 files included).
    virtualizarr_fill.CorruptFileError
        The file's metadata or chunk index is damaged or truncated.
    ValueError
        ``group`` names no group of the file.

    Examples
    --------
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})
    >>> vds = open_virtual_dataset("file:///data/t2m.nc", registry=registry,
    ...                            parser=HDF5Parser(drop_variables=["lat_bnds"]))
    >>> tree = open_virtual_datatree("file:///data/granule.h5", registry=registry,
    ...                              parser=HDF5Parser(on_unsupported="raise"))
    """

    def __init__(
        self,
        group: str | None = None,
        drop_variables: Iterable[str] | None = None,
        *,
        on_unsupported: Literal["warn", "raise"] = "warn",
        on_fill_out_of_range: Literal["warn", "raise"] = "warn",
        max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
        reader_options: dict[str, Any] | None = None,
    ) -> None:
        if on_unsupported not in ("warn", "raise"):
            raise ValueError(f"on_unsupported must be 'warn' or 'raise', got {on_unsupported!r}")
        if on_fill_out_of_range not in ("warn", "raise"):
            raise ValueError(
                f"on_fill_out_of_range must be 'warn' or 'raise', got {on_fill_out_of_range!r}"
            )
        self.group = group
        self.drop_variables = frozenset(drop_variables or ())
        self.on_unsupported = on_unsupported
        self.on_fill_out_of_range = on_fill_out_of_range
        self.max_inline_bytes = int(max_inline_bytes)
        self.max_chunks = int(max_chunks)
        self.reader_options = {**DEFAULT_READER_OPTIONS, **(reader_options or {})}

    def __repr__(self) -> str:
        return (
            f"HDF5Parser(group={self.group!r}, drop_variables={sorted(self.drop_variables)!r}, "
            f"on_unsupported={self.on_unsupported!r})"
        )

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """Parse the file at ``url`` (resolved through ``registry``) into a ManifestStore."""
        url = validate_and_normalize_path_to_uri(url)
        session = _FileSession(registry, self.reader_options)
        root: GroupNode | None = None
        try:
            file, reader = session.open(url)
            walker = _Walker(url, session, file, self._refuse)
            root = walker.walk()
            namer = DimensionNamer(root)
            node = self._select(root, url)
            context = ArrayContext(
                url=url,
                file_size=reader.size,
                on_fill_out_of_range=self.on_fill_out_of_range,
                max_inline_bytes=self.max_inline_bytes,
                exists=session.exists,
                open_file=session.open_with_size,
                max_chunks=self.max_chunks,
                reader=session.opened_reader,
            )
            group = self._manifest_group(node, namer, context, walker)
        finally:
            if root is not None:
                root.release()
            session.close()
        return FileManifestStore(group, registry=registry, url=url)

    # -- hierarchy ---------------------------------------------------------------

    def _select(self, root: GroupNode, url: str) -> GroupNode:
        if self.group in (None, "", "/"):
            return root
        wanted = "/" + str(self.group).strip("/")
        for node in root.walk():
            if node.path == wanted:
                return node
        available = sorted(node.path for node in root.walk())
        raise ValueError(f"{url}: no group {self.group!r} (groups: {available})")

    def _manifest_group(
        self, node: GroupNode, namer: DimensionNamer, context: ArrayContext, walker: _Walker
    ) -> ManifestGroup:
        arrays: dict[str, ManifestArray] = {}
        for member in node.datasets:
            variable = namer.variable_dims(node, member)
            if not variable.is_variable or variable.name in self.drop_variables:
                continue
            if variable.name in arrays:
                self._refuse(
                    context.url,
                    member.path,
                    DatasetRefused("layout", f"a second variable named {variable.name!r}"),
                )
                continue
            array = self._array(member, variable.shape, variable.dims, context, walker)
            if array is not None:
                arrays[variable.name] = array
        groups = {
            name: self._manifest_group(child, namer, context, walker)
            for name, child in node.children
        }
        attributes, _ = convert_attributes(
            node.group, source=context.url, path=node.path, creation_plist=node.creation_plist
        )
        return ManifestGroup(arrays=arrays, groups=groups, attributes=attributes)

    def _array(
        self,
        member: DatasetNode,
        shape: tuple[int, ...],
        dims: tuple[str, ...],
        context: ArrayContext,
        walker: _Walker,
    ) -> ManifestArray | None:
        dataset = member.dataset
        url = walker.url_of(member)
        member_context = context
        if url != context.url:
            member_context = dataclasses.replace(context, url=url, file_size=walker.size_of(url))
        where = member.path or member.key
        try:
            target = Target(shape, dims, member.path or None)
            return build_array(dataset, target, member_context, member.raw_attributes)
        except DatasetRefused as refusal:
            self._refuse(context.url, where, refusal)
        except FillValueError:
            raise  # on_fill_out_of_range="raise" asked for it
        except Exception as exc:
            # One dataset never costs the whole file; the reason names the failure.
            unexpected = DatasetRefused("unreadable", f"unexpected {type(exc).__name__}: {exc}")
            self._refuse(context.url, where, unexpected)
        return None

    def _refuse(self, url: str, dataset: str, refusal: DatasetRefused) -> None:
        message = f"{url}: dataset {dataset!r} skipped: {refusal.reason}"
        if self.on_unsupported == "raise":
            error = CorruptFileError if refusal.kind == "corrupt" else UnsupportedFeatureError
            raise error(f"{url}: dataset {dataset!r}: {refusal.reason}")
        warnings.warn(
            SkippedDatasetWarning(
                message, url=url, dataset=dataset, kind=refusal.kind, reason=refusal.reason
            ),
            stacklevel=4,
        )


class _Walker:
    """Walk the group hierarchy in h5py's order, following links like h5netcdf does."""

    def __init__(
        self,
        url: str,
        session: _FileSession,
        file: h5py.File,
        refuse: Callable[[str, str, DatasetRefused], None],
    ) -> None:
        self.url = url
        self.session = session
        self.file = file
        self._refuse = refuse
        self._external: dict[int, str] = {}
        self._sizes: dict[str, int] = {url: session.files[url][1].size}

    def url_of(self, member: DatasetNode) -> str:
        return self._external.get(id(member), self.url)

    def size_of(self, url: str) -> int:
        return self._sizes[url]

    def walk(self) -> GroupNode:
        # The root group as a Group (not the File): its identifier and creation
        # property list then serve the member listing and the attribute names alike.
        # A root header libhdf5 cannot open is left to h5py's listing, which reports it.
        root: h5py.Group = self.file
        with contextlib.suppress(Exception), phil:
            root = h5py.Group(h5py.h5o.open(self.file.id, b"/"))
        return self._walk_group(root, "/", None, (), self.url)

    def _warn(self, where: str, message: str) -> None:
        warnings.warn(SkippedLinkWarning(f"{self.url}: {where}: {message}"), stacklevel=5)

    def _warn_unreadable(self, where: str, message: str) -> None:
        # libhdf5 refuses to open an object only when its header contradicts itself
        self._refuse(self.url, where, DatasetRefused("corrupt", message))

    def _members(self, group: h5py.Group, path: str) -> tuple[list[str], Any]:
        """The member names as ``list(group)`` gives them, and the group's creation
        property list (None where unreadable)."""
        # A File's creation property list is the file's, not its root group's.
        if not isinstance(group, h5py.File):
            try:
                return member_names(group)
            except Exception:  # h5py's own listing decides, and reports
                pass
        try:
            return list(group.keys()), None
        except Exception as exc:  # corrupt link table
            self._warn(path, f"group members could not be listed ({exc}); group skipped")
            return [], None

    def _walk_group(
        self,
        group: h5py.Group,
        path: str,
        parent: GroupNode | None,
        ancestors: tuple[tuple[str, Callable[[], int]], ...],
        url: str,
        address: int | None = None,
    ) -> GroupNode:
        node = GroupNode(path=path, group=group, parent=parent)
        known = [address]

        def own_address() -> int:
            # Only a subgroup's link can cycle back here: looked up on the first one.
            value = known[0]
            if value is None:
                value = known[0] = _address(group) or -1
            return value

        ancestors = (*ancestors, (url, own_address))
        members, node.creation_plist = self._members(group, path)
        for key in members:
            child_path = f"{path.rstrip('/')}/{key}"
            resolved = self._resolve(group, key, child_path, url)
            if resolved is None:
                continue
            obj, member_url = resolved
            if isinstance(obj, h5py.Group):
                address = _address(obj)
                if address is None:
                    self._warn(child_path, "group header unreadable; group skipped")
                    continue
                if any(u == member_url and seen() == address for u, seen in ancestors):
                    self._warn(child_path, "link cycle back to an enclosing group; not followed")
                    continue
                child = self._walk_group(
                    obj, child_path, node, ancestors, member_url, address or -1
                )
                node.children.append((key, child))
            elif isinstance(obj, h5py.Dataset):
                member = DatasetNode(key, obj, child_path, self.session.files[member_url][0])
                if member_url != self.url:
                    self._external[id(member)] = member_url
                node.datasets.append(member)
            # committed datatypes (h5py.Datatype) are type definitions, not data
        return node

    def _resolve(self, group: h5py.Group, key: str, path: str, url: str) -> tuple[Any, str] | None:
        hard = _open_hard_link(group, key)
        if hard is not None:
            return hard, url
        try:
            link = group.get(key, getlink=True)
        except Exception as exc:
            self._warn(path, f"link unreadable ({exc}); skipped")
            return None
        if isinstance(link, h5py.ExternalLink):
            return self._resolve_external(link, path, url)
        try:
            return group[key], url
        except Exception as exc:  # dangling, or an object HDF5 cannot open
            if isinstance(link, h5py.SoftLink) and not _exists(group, link.path):
                self._warn(path, f"dangling soft link to {link.path!r}; skipped")
            else:
                self._warn_unreadable(path, f"the HDF5 library cannot open it ({exc})")
            return None

    def _resolve_external(
        self, link: h5py.ExternalLink, path: str, url: str
    ) -> tuple[Any, str] | None:
        target_url = join_url(url, link.filename)
        where = f"external link to {link.filename}:{link.path}"
        try:
            file, reader = self.session.open(target_url)
        except Exception as exc:  # missing or unreadable target file
            self._warn(path, f"{where} unresolved ({exc}); skipped")
            return None
        self._sizes[target_url] = reader.size
        try:
            return file[link.path], target_url
        except Exception:
            self._warn(path, f"{where}: no such object; skipped")
            return None


def member_names(group: h5py.Group) -> tuple[list[str], Any]:
    """``list(group)`` (creation order where the group tracks it, else by name) and the
    group's creation property list; raises where libhdf5 cannot list them.

    One link iteration instead of h5py's name lookup per member index, and the property
    list kept for :func:`~virtualizarr_fill.hdf5.attrs.attribute_names`, which orders
    the group's attributes by it.
    """
    names: list[bytes] = []
    with phil:
        plist = group.id.get_create_plist()
        tracked = plist.get_link_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
        index = h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME
        group.id.links.iterate(names.append, idx_type=index)
    return [group._d(name) for name in names], plist


def _open_hard_link(group: h5py.Group, key: str) -> Any:
    """``group[key]`` when ``key`` (a listed member name) is a hard link to an object
    h5py opens, else None (soft and external links, and any failure, take the general
    path, which reports them).

    The same low-level calls as ``group.get(key, getlink=True)`` and ``group[key]``,
    without the high-level ``File`` object h5py builds for every dataset it opens (to
    learn that the file is read-only, as every file of a parse is).
    """
    if not isinstance(key, str):
        return None
    try:
        name = key.encode("utf-8")
        if group.id.links.get_info(name).type != h5py.h5l.TYPE_HARD:
            return None
        oid = h5py.h5o.open(group.id, name)
        kind = h5py.h5i.get_type(oid)
    except Exception:  # the general path reports it
        return None
    if kind == h5py.h5i.DATASET:
        return h5py.Dataset(oid, readonly=True)
    if kind == h5py.h5i.GROUP:
        return h5py.Group(oid)
    if kind == h5py.h5i.DATATYPE:
        return h5py.Datatype(oid)
    return None


def _exists(group: h5py.Group, path: str) -> bool:
    try:
        return path in group
    except Exception:
        return False


def _address(obj: h5py.HLObject) -> int | None:
    """The object's address in its file (the same for all its names); None if unreadable."""
    try:
        return object_address(obj.id)
    except Exception:  # a corrupt object header or heap
        return None


__all__ = ["HDF5Parser", "SkippedDatasetWarning", "SkippedLinkWarning"]
