"""``HDF5Parser``: HDF5 and netCDF-4 files as VirtualiZarr manifest stores.

The parser reads only metadata, with h5py, through a file object over the registry's
object store (:class:`virtualizarr_fill.io.files.StoreFile`), so local and cloud files work
alike and every request is counted. The result matches what
``xr.open_dataset(path, engine="h5netcdf", phony_dims="sort")`` shows (groups as a
DataTree): same variable and dimension names, attributes and values.

One unsupported dataset never costs the whole file: by default it is skipped with a
:class:`SkippedDatasetWarning` naming the dataset and the reason
(``on_unsupported="raise"`` raises instead). Dangling and cyclic links are skipped with
a :class:`SkippedLinkWarning`; odd attributes are converted or skipped with an
:class:`~virtualizarr_fill.hdf5.attrs.AttributeWarning`.

Malformed files: every B-tree, heap and attribute index libhdf5 would follow is checked
from its bytes first (see :mod:`~virtualizarr_fill.hdf5.walk`); what fails is never
handed to libhdf5 (the dataset or group is skipped with a warning, a corrupt root group
is a :class:`~virtualizarr_fill.errors.CorruptFileError`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterable
from typing import Any, Literal

from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore

from virtualizarr_fill.errors import CorruptFileError, FillValueError, UnsupportedFeatureError
from virtualizarr_fill.hdf5.array_context import ArrayContext, DatasetRefused, Target
from virtualizarr_fill.hdf5.arrays import build_array
from virtualizarr_fill.hdf5.attrs import AttributeWarning, convert_attributes
from virtualizarr_fill.hdf5.dims import DimensionNamer
from virtualizarr_fill.hdf5.nodes import NON_COORD_PREFIX, DatasetNode, GroupNode
from virtualizarr_fill.hdf5.session import (
    ExternalFiles,
    FileSession,
    find_superblock,
    superblock_sizes,
)
from virtualizarr_fill.hdf5.walk import ObjectNames, SkippedLinkWarning, Walker, member_names
from virtualizarr_fill.io.urls import normalize_url
from virtualizarr_fill.manifests import FileManifestStore

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
        Keyword arguments for :class:`virtualizarr_fill.io.files.StoreFile` (``block_size``,
        ``first_request``; both 1 MiB by default).
    external_files
        Which other files the file may reference (external links, external raw storage,
        virtual dataset sources). ``"same-directory"`` (default): only files inside the
        directory (or bucket prefix) of the file parsed, or below it, after resolving
        symbolic links of local paths; a reference elsewhere is not followed, with a
        warning naming it (a :class:`SkippedLinkWarning` for links, a
        :class:`SkippedDatasetWarning` for datasets), whatever the registry could
        reach. ``"allow"``: any file the registry resolves.

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
        external_files: ExternalFiles = "same-directory",
    ) -> None:
        if external_files not in ("same-directory", "allow"):
            raise ValueError(
                f"external_files must be 'same-directory' or 'allow', got {external_files!r}"
            )
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
        self.external_files: ExternalFiles = external_files

    def __repr__(self) -> str:
        return (
            f"HDF5Parser(group={self.group!r}, drop_variables={sorted(self.drop_variables)!r}, "
            f"on_unsupported={self.on_unsupported!r})"
        )

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """Parse the file at ``url`` (resolved through ``registry``) into a ManifestStore."""
        url = normalize_url(url)
        session = FileSession(registry, self.reader_options, self.external_files, main_url=url)
        root: GroupNode | None = None
        try:
            _, reader = session.open(url)
            walker = Walker(url, session, self._refuse)
            root = walker.walk()
            names = ObjectNames(root, by_address=walker.groups_left_out)
            namer = DimensionNamer(root, names.path)
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
                object_path=names.path,
                refusal=session.refusal,
                open_path=session.open_path,
                vlen_attribute=session.vlen_attribute,
                attributes_problem=session.attributes_problem,
                checks=session.checks.get,
            )
            group = self._manifest_group(node, namer, context, walker)
        except BaseException:
            if root is not None:
                root.release()
            with contextlib.suppress(Exception):  # the error at hand says more
                session.close(url)
            raise
        root.release()
        session.close(url)
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
        self, node: GroupNode, namer: DimensionNamer, context: ArrayContext, walker: Walker
    ) -> ManifestGroup:
        arrays: dict[str, ManifestArray] = {}
        for member in node.datasets:
            if member.key.replace(NON_COORD_PREFIX, "") in self.drop_variables:
                continue
            variable = namer.variable_dims(node, member)
            if member.problem is not None:
                refusal = DatasetRefused("corrupt", member.problem)
                self._refuse(context.url, member.path or member.key, refusal)
                continue
            if not variable.is_variable:
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
        if node.attributes_problem is not None:
            warnings.warn(
                AttributeWarning(
                    f"{context.url}: attribute '*' of group {node.path!r}: "
                    f"{node.attributes_problem}; all skipped"
                ),
                stacklevel=2,
            )
            attributes: dict[str, Any] = {}
        else:
            attributes, _ = convert_attributes(
                node.group,
                source=context.url,
                path=node.path,
                creation_plist=node.creation_plist,
                path_of=context.object_path,
                vlen=self._group_vlen(node, walker),
            )
        return ManifestGroup(arrays=arrays, groups=groups, attributes=attributes)

    @staticmethod
    def _group_vlen(node: GroupNode, walker: Walker) -> Any:
        """The reader of a group's variable-length attribute descriptors."""
        if node.address is None:
            return walker.session.vlen_attribute
        return walker.session.vlen_reader(walker.url_of_group(node), node.address)

    def _array(
        self,
        member: DatasetNode,
        shape: tuple[int, ...],
        dims: tuple[str, ...],
        context: ArrayContext,
        walker: Walker,
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


__all__ = [
    "HDF5Parser",
    "SkippedDatasetWarning",
    "SkippedLinkWarning",
    "find_superblock",
    "member_names",
    "superblock_sizes",
]
