"""The group hierarchy of a file, walked in h5py's order, following links like h5netcdf.

Every group's link storage is checked (see
:mod:`~virtualizarr_fill.hdf5.format.object_storage`) before libhdf5 lists it or looks a
member up in it, and every dataset's attribute storage before its attributes are read.
A group whose links are corrupt is left out with a :class:`SkippedLinkWarning` (the root
group: a :class:`~virtualizarr_fill.errors.CorruptFileError`); a dataset whose
attributes are, is marked so that the parser skips it with a warning. Soft links are
followed one checked group at a time, external links only into files the path policy
admits (see :meth:`~virtualizarr_fill.hdf5.session.FileSession.refusal`), and groups
nested deeper than :data:`MAX_GROUP_DEPTH` are left out with a warning: zarr and
xarray walk group trees recursively and could not open them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import h5py
from h5py._objects import phil

from virtualizarr_fill.errors import CorruptFileError
from virtualizarr_fill.hdf5._libhdf5 import file_number, object_address
from virtualizarr_fill.hdf5.array_context import DatasetRefused
from virtualizarr_fill.hdf5.nodes import DatasetNode, GroupNode, libhdf5_path
from virtualizarr_fill.hdf5.session import FileSession, PathRefused
from virtualizarr_fill.io.urls import join_url

#: Deepest group kept (the root is depth 0). zarr lists a hierarchy and xarray builds a
#: DataTree recursively, several Python frames per level: far deeper trees would exceed
#: Python's recursion limit there.
MAX_GROUP_DEPTH = 100


class SkippedLinkWarning(UserWarning):
    """A link (dangling, cyclic, unreadable, or refused by the path policy) was not
    followed, or a group was left out."""


class Walker:
    """Walk the group hierarchy of the session's main file (see the module's
    documentation)."""

    def __init__(
        self,
        url: str,
        session: FileSession,
        refuse: Callable[[str, str, DatasetRefused], None],
    ) -> None:
        self.url = url
        self.session = session
        self._refuse = refuse
        self._external: dict[int, str] = {}
        self._sizes: dict[str, int] = {url: session.files[url][1].size}

    def url_of(self, member: DatasetNode) -> str:
        return self._external.get(id(member), self.url)

    def url_of_group(self, node: GroupNode) -> str:
        return node.url if node.url is not None else self.url

    def size_of(self, url: str) -> int:
        return self._sizes[url]

    @property
    def groups_left_out(self) -> bool:
        """Whether some group of a file of the session could not be checked and was
        left out (libhdf5 must not then look up names by address, which walks them)."""
        return any(checks.groups_left_out for checks in self.session.checks.values())

    def walk(self) -> GroupNode:
        # The root group as a Group (not the File): its identifier and creation
        # property list then serve the member listing and the attribute names alike.
        file = self.session.files[self.url][0]
        try:
            with phil:
                root = h5py.Group(h5py.h5o.open(file.id, b"/"))
            address = object_address(root.id)
        except Exception as exc:
            raise CorruptFileError(f"{self.url}: the root group cannot be opened ({exc})") from None
        storage = self.session.checks[self.url].object(address, "the root group")
        if storage.links_problem is not None:
            raise CorruptFileError(f"{self.url}: {storage.links_problem}")
        node = self._walk_group(root, "/", None, (), self.url, address, 0)
        node.attributes_problem = storage.attributes_problem
        return node

    def _warn(self, where: str, message: str) -> None:
        warnings.warn(SkippedLinkWarning(f"{self.url}: {where}: {message}"), stacklevel=5)

    def _leave_out(self, url: str, where: str, message: str) -> None:
        self.session.checks[url].groups_left_out = True
        self._warn(where, message)

    def _warn_unreadable(self, where: str, message: str) -> None:
        # libhdf5 refuses to open an object only when its header contradicts itself
        self._refuse(self.url, where, DatasetRefused("corrupt", message))

    def _members(self, group: h5py.Group, path: str) -> tuple[list[str], Any]:
        """The member names as ``list(group)`` gives them, and the group's creation
        property list (None where unreadable)."""
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
        ancestors: tuple[tuple[str, int], ...],
        url: str,
        address: int,
        depth: int,
    ) -> GroupNode:
        node = GroupNode(path=path, group=group, parent=parent, address=address, url=url)
        ancestors = (*ancestors, (url, address))
        members, node.creation_plist = self._members(group, path)
        for key in members:
            child_path = f"{path.rstrip('/')}/{key}"
            resolved = self._resolve(group, key, path, child_path, url)
            if resolved is None:
                continue
            obj, member_url = resolved
            if isinstance(obj, h5py.Group):
                child = self._child_group(obj, child_path, node, ancestors, member_url, depth + 1)
                if child is not None:
                    node.children.append((key, child))
            elif isinstance(obj, h5py.Dataset):
                member = self._dataset(key, obj, child_path, member_url)
                if member_url != self.url:
                    self._external[id(member)] = member_url
                node.datasets.append(member)
            # committed datatypes (h5py.Datatype) are type definitions, not data
        return node

    def _child_group(
        self,
        obj: h5py.Group,
        path: str,
        parent: GroupNode,
        ancestors: tuple[tuple[str, int], ...],
        url: str,
        depth: int,
    ) -> GroupNode | None:
        address = _address(obj)
        if address is None:
            self._leave_out(url, path, "group header unreadable; group skipped")
            return None
        if (url, address) in ancestors:
            self._warn(path, "link cycle back to an enclosing group; not followed")
            return None
        if depth > MAX_GROUP_DEPTH:
            self._leave_out(
                url,
                path,
                f"group nested {depth} levels deep, deeper than the {MAX_GROUP_DEPTH} levels "
                "zarr and xarray can open; group skipped",
            )
            return None
        storage = self.session.checks[url].object(address, f"group {path!r}")
        if storage.links_problem is not None:
            self._leave_out(url, path, f"{storage.links_problem}; group skipped")
            return None
        child = self._walk_group(obj, path, parent, ancestors, url, address, depth)
        child.attributes_problem = storage.attributes_problem
        return child

    def _dataset(self, key: str, obj: h5py.Dataset, path: str, url: str) -> DatasetNode:
        member = DatasetNode(key, obj, path, self.session.files[url][0])
        address = _address(obj)
        if address is None:
            member.problem = "the object header cannot be read"
            return member
        member.address = address
        member.vlen = self.session.vlen_reader(url, address)
        storage = self.session.checks[url].object(address, f"dataset {path!r}")
        member.problem = storage.attributes_problem
        return member

    def _resolve(
        self, group: h5py.Group, key: str, group_path: str, path: str, url: str
    ) -> tuple[Any, str] | None:
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
        if isinstance(link, h5py.HardLink):
            try:  # the lookup goes through this group's links, which are checked
                return group[key], url
            except Exception as exc:  # an object libhdf5 cannot open
                self._warn_unreadable(path, f"the HDF5 library cannot open it ({exc})")
                return None
        if not isinstance(link, h5py.SoftLink):
            self._warn(path, "user-defined link; skipped")
            return None
        try:
            return self.session.open_path(url, link.path, group, group_path), url
        except PathRefused as exc:
            if exc.missing:
                self._warn(path, f"dangling soft link to {link.path!r}; skipped")
            else:
                self._warn(path, f"soft link to {link.path!r} not followed ({exc}); skipped")
            return None

    def _resolve_external(
        self, link: h5py.ExternalLink, path: str, url: str
    ) -> tuple[Any, str] | None:
        target_url = join_url(url, link.filename)
        where = f"external link to {link.filename}:{link.path}"
        refusal = self.session.refusal(url, target_url, where)
        if refusal is not None:
            self._warn(path, refusal)
            return None
        try:
            _, reader = self.session.open(target_url)
        except Exception as exc:  # missing or unreadable target file
            self._warn(path, f"{where} unresolved ({exc}); skipped")
            return None
        self._sizes[target_url] = reader.size
        try:
            return self.session.open_path(target_url, link.path), target_url
        except PathRefused as exc:
            detail = "no such object" if exc.missing else str(exc)
            self._warn(path, f"{where}: {detail}; skipped")
            return None


class ObjectNames:
    """The paths of objects opened through object references (dimension scales,
    reference attributes).

    libhdf5 finds such an object's name by walking every group of the file. When the
    walk left a group out (it could not be checked, see
    :mod:`~virtualizarr_fill.hdf5.walk`), that is not safe: the names come from the
    walked hierarchy instead, by object address (``by_address``).
    """

    def __init__(self, root: GroupNode | None = None, *, by_address: bool = False) -> None:
        self.root = root
        self.by_address = by_address
        self._paths: dict[tuple[int | None, int], str] | None = None

    def path(self, oid: Any) -> str | bytes | None:
        """The path of the object ``oid`` (an h5py identifier), as h5py's ``.name``
        gives it; None when unknown."""
        if not self.by_address:
            return libhdf5_path(oid)
        return self._by_address().get((file_number(oid), object_address(oid)))

    def _by_address(self) -> dict[tuple[int | None, int], str]:
        if self._paths is None:
            self._paths = {}
            for node in self.root.walk() if self.root is not None else ():
                if node.address is not None:
                    self._paths.setdefault((file_number(node.group.id), node.address), node.path)
                for member in node.datasets:
                    if member.address is not None:
                        key = (file_number(member.dataset.id), member.address)
                        self._paths.setdefault(key, member.path)
        return self._paths


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


def _address(obj: h5py.HLObject) -> int | None:
    """The object's address in its file (the same for all its names); None if unreadable."""
    try:
        return object_address(obj.id)
    except Exception:  # a corrupt object header or heap
        return None


__all__ = ["MAX_GROUP_DEPTH", "ObjectNames", "SkippedLinkWarning", "Walker", "member_names"]
