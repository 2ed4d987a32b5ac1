"""netCDF-4 dimensions of HDF5 datasets, named the way h5netcdf names them.

The virtual dataset must look like ``xr.open_dataset(path, engine="h5netcdf",
phony_dims="sort")``, so this module follows h5netcdf's reading rules:

* every dataset whose ``CLASS`` attribute is ``DIMENSION_SCALE`` defines a dimension
  named after its link; a scale whose ``NAME`` says "This is a netCDF dimension but not
  a netCDF variable" is a dimension only, not a variable;
* a variable's dimensions come from ``_Netcdf4Coordinates`` (netCDF dimension ids) for
  coordinate variables, else from its attached scales (``DIMENSION_LIST``, the last
  scale of each axis), else its own name when that is a dimension;
* axes without any scale get *phony* dimensions: per group, enough ``phony_dim_N`` of
  each length to serve the unlabelled dataset that needs most of them (dimensions of
  the same length already defined in the group count), numbered across the whole file
  in group order after all real dimensions seen so far (h5netcdf's "sort" mode);
* a dimension whose scale is unlimited has the length of its longest variable, and
  h5netcdf pads shorter variables with the fill value; the virtual array does too.

The whole file is walked from the root (as h5netcdf does) even when one group is
selected, because phony numbering depends on every group before it.

Dimension bookkeeping that cannot be read (an attribute table that cannot be listed, an
unreadable ``CLASS``, ``NAME``, ``DIMENSION_LIST``, ``_Netcdf4Coordinates`` or
``_Netcdf4Dimid``, a scale reference that does not resolve) never silently turns a
variable's axes into phony dimensions or a scale into a plain variable: the dataset is
marked (:attr:`DatasetNode.problem`), takes no part in defining dimensions, and the
parser skips it with a warning. A ``DIMENSION_LIST`` or ``REFERENCE_LIST`` entry that
does not resolve (the dataset's own attributes read fine) is reported with an
:class:`~virtualizarr_fill.hdf5.attrs.AttributeWarning` naming what it changes.
"""

from __future__ import annotations

import warnings
from collections import ChainMap, Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from virtualizarr_fill.hdf5._libhdf5 import file_number, object_address
from virtualizarr_fill.hdf5.attrs import (
    AttributeWarning,
    PathOf,
    UnreadableAttribute,
    VlenReader,
    attribute_names,
    read_attribute,
    read_raw_attributes,
)

NOT_A_VARIABLE = b"This is a netCDF dimension but not a netCDF variable."
NON_COORD_PREFIX = "_nc4_non_coord_"

#: Attributes of a dataset never needed in full: hidden from the virtual dataset, and
#: (REFERENCE_LIST) only read for the rare unlimited dimension whose length it decides.
_UNREAD_ATTRIBUTES = frozenset({"_nc3_strict", "_NCProperties", "REFERENCE_LIST"})
#: The attributes the dimension rules read.
_DIMENSION_ATTRIBUTES = ("CLASS", "NAME", "DIMENSION_LIST", "_Netcdf4Coordinates", "_Netcdf4Dimid")


class DimensionMetadataError(Exception):
    """Dimension bookkeeping of a dataset cannot be read; the message says what."""


@dataclass
class Dimension:
    """A netCDF dimension of one group."""

    name: str
    size: int
    dimid: Any  # int for real dimensions; False for phony ones, as h5netcdf has it
    phony: bool
    unlimited: bool = False
    #: The dimension scale defining it (file number and object address; links to one
    #: scale define one dimension per link name).
    scale: Any = None

    @property
    def maxsize(self) -> int | None:
        return None if self.unlimited else self.size


@dataclass
class DatasetNode:
    """A dataset member of a group, as the walk found it."""

    key: str
    dataset: h5py.Dataset
    #: the path the walk reached it by (link names, not the object's own name)
    path: str = ""
    #: the open file the dataset lives in (an externally linked one for external links)
    file: h5py.File | None = None
    #: The object header's address in its file (None: unknown).
    address: int | None = None
    #: Why the dataset's attributes or dimension bookkeeping cannot be read (the parser
    #: then skips it), else None.
    problem: str | None = None
    #: Reads the stored descriptors of variable-length attributes (see
    #: :data:`~virtualizarr_fill.hdf5.attrs.VlenReader`).
    vlen: VlenReader | None = None
    _facts: DatasetFacts | None = None
    _raw_attributes: dict[str, Any] | None = None
    _attribute_names: list[str] = field(default_factory=list)

    @property
    def raw_attributes(self) -> dict[str, Any]:
        """The attributes as h5py reads them, read once, but for hidden ones nothing
        looks at (see :meth:`reference_list`); empty, with :attr:`problem` set, when the
        attribute table cannot be listed (or was found corrupt before)."""
        if self._raw_attributes is None:
            self._raw_attributes = {}
            if self.problem is not None:
                return self._raw_attributes
            try:
                self._attribute_names = attribute_names(self.dataset)
                self._raw_attributes = read_raw_attributes(
                    self.dataset, self._attribute_names, skip=_UNREAD_ATTRIBUTES, vlen=self.vlen
                )
            except Exception as exc:  # a corrupt attribute table
                self._attribute_names = []
                self.problem = f"its attributes cannot be listed ({exc})"
        return self._raw_attributes

    def reference_list(self) -> Any:
        """The dimension scale's REFERENCE_LIST attribute, or None (absent, unreadable)."""
        self.raw_attributes  # noqa: B018  (lists the attributes)
        if "REFERENCE_LIST" not in self._attribute_names:
            return None
        value = read_attribute(self.dataset, "REFERENCE_LIST", self.vlen)
        return None if isinstance(value, UnreadableAttribute) else value

    @property
    def facts(self) -> DatasetFacts:
        """The dimension bookkeeping of the dataset, read once (none, with
        :attr:`problem` set, when it cannot be read)."""
        if self._facts is None:
            raw = self.raw_attributes
            try:
                if self.problem is not None:
                    raise DimensionMetadataError(self.problem)
                self._facts = DatasetFacts.read(self.dataset, raw)
            except DimensionMetadataError as exc:
                self.problem = str(exc)
                self._facts = DatasetFacts(
                    False, False, _unlabelled(self.dataset), None, None, None
                )
        return self._facts

    def open_file(self) -> h5py.File:
        return self.file if self.file is not None else self.dataset.file


@dataclass(frozen=True)
class DatasetFacts:
    """What the netCDF dimension rules need from one dataset's attributes."""

    is_scale: bool
    dimension_only: bool
    labelling: str
    coordinates: Any
    dimension_list: Any
    dimid: Any

    @classmethod
    def read(cls, dataset: h5py.Dataset, raw: dict[str, Any]) -> DatasetFacts:
        """Raises :class:`DimensionMetadataError` when an attribute the rules read is
        unreadable."""
        names = set(raw)
        for name in _DIMENSION_ATTRIBUTES:
            value = raw.get(name)
            if isinstance(value, UnreadableAttribute):
                raise DimensionMetadataError(f"its {name} attribute cannot be read ({value.error})")

        def get(name: str) -> Any:
            return raw.get(name)

        name_attr = get("NAME")
        if isinstance(name_attr, str):
            name_attr = name_attr.encode("ascii", "replace")
        has_list = "DIMENSION_LIST" in names
        return cls(
            is_scale=get("CLASS") == b"DIMENSION_SCALE",
            dimension_only=isinstance(name_attr, bytes) and NOT_A_VARIABLE in name_attr,
            labelling=_labelling(dataset, raw["DIMENSION_LIST"])
            if has_list
            else _unlabelled(dataset),
            coordinates=get("_Netcdf4Coordinates"),
            dimension_list=get("DIMENSION_LIST") if has_list else None,
            dimid=get("_Netcdf4Dimid"),
        )


@dataclass
class GroupNode:
    """One group of the walked hierarchy."""

    path: str
    group: h5py.Group
    datasets: list[DatasetNode] = field(default_factory=list)
    #: The group's creation property list, once the walker has listed its members.
    creation_plist: Any = None
    children: list[tuple[str, GroupNode]] = field(default_factory=list)
    dimensions: dict[str, Dimension] = field(default_factory=dict)
    parent: GroupNode | None = None
    #: The object header's address in its file (None: unknown), and the file's URL
    #: (None: the file parsed).
    address: int | None = None
    url: str | None = None
    #: Why the group's attributes cannot be read safely, else None.
    attributes_problem: str | None = None

    def all_dimensions(self) -> dict[str, Dimension]:
        """Dimensions visible here: this group's, then its ancestors', as h5netcdf's
        ChainMap iterates them (outermost names first, innermost definitions winning)."""
        maps: list[dict[str, Dimension]] = []
        node: GroupNode | None = self
        while node is not None:
            maps.append(node.dimensions)
            node = node.parent
        return dict(ChainMap(*maps))

    def dimension_ids(self) -> dict[Any, str]:
        """netCDF dimension id -> name over the visible dimensions (h5netcdf's rule)."""
        return {dim.dimid: name for name, dim in self.all_dimensions().items()}

    def shared_dimension_ids(self) -> set[Any]:
        """Ids two visible real dimensions claim (netCDF-4 gives each its own: a corrupt
        ``_Netcdf4Dimid``)."""
        counts = Counter(
            dimid
            for dimid, _ in {
                (dim.dimid, dim.scale if dim.scale[1] is not None else name)
                for name, dim in self.all_dimensions().items()
                if not dim.phony and not isinstance(dim.dimid, bool)
            }
        )
        return {dimid for dimid, count in counts.items() if count > 1}

    def walk(self) -> Iterator[GroupNode]:
        """This group and its descendants, in h5netcdf's (pre-order) order."""
        yield self
        for _, child in self.children:
            yield from child.walk()

    def release(self) -> None:
        """Unlink this tree (parents and children refer to each other), so that it and
        the h5py objects it holds are freed as soon as the parse drops it, not whenever
        Python's cyclic collector runs: h5py visits every live object wrapper each time
        a file is closed, so trees left to the collector slow every later parse."""
        for node in list(self.walk()):
            node.parent = None
            node.children = []
            node.datasets = []


@dataclass(frozen=True)
class VariableDims:
    """A dataset's netCDF variable name, dimension names and (padded) shape."""

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    is_variable: bool


def _scale_counts(dataset: h5py.Dataset, dimension_list: Any) -> list[int]:
    """Scales attached to each axis, as ``H5DSget_num_scales`` counts them.

    That call reads DIMENSION_LIST again for every axis and counts the references of the
    axis's entry; the value already read gives the same counts when it has the form
    the dimension-scale API writes (one entry per axis). Anything else goes through
    h5py's ``dims``, as libhdf5 would read it.
    """
    rank = len(dataset.shape or ())
    if (
        isinstance(dimension_list, np.ndarray)
        and dimension_list.dtype.kind == "O"
        and dimension_list.shape == (rank,)
        and all(isinstance(refs, np.ndarray) and refs.ndim == 1 for refs in dimension_list)
    ):
        return [len(refs) for refs in dimension_list]
    if _entries(dimension_list) != rank:
        # The dimension-scale library reads the attribute into a buffer of one entry per
        # axis: more entries overrun it (heap corruption, an abort).
        raise DimensionMetadataError(
            f"its DIMENSION_LIST has {_entries(dimension_list)} entries for {rank} axes"
        )
    try:
        return [len(axis) for axis in dataset.dims]
    except Exception as exc:  # broken DIMENSION_LIST references
        raise DimensionMetadataError(f"its DIMENSION_LIST cannot be read ({exc})") from None


def _entries(dimension_list: Any) -> int | None:
    """The number of entries (axes) of a DIMENSION_LIST value as h5py read it."""
    shape = getattr(dimension_list, "shape", None)
    if shape is None or len(shape) != 1:
        return None
    return int(shape[0])


def _unlabelled(dataset: h5py.Dataset) -> str:
    """Without a DIMENSION_LIST no axis has a scale attached."""
    return "nodim" if not dataset.shape else "unlabeled"


def _labelling(dataset: h5py.Dataset, dimension_list: Any) -> str:
    """'nodim', 'unlabeled', 'labeled' or 'mixed' (h5netcdf refuses the last)."""
    counts = _scale_counts(dataset, dimension_list)
    if not counts:
        return "nodim"
    if all(c == 0 for c in counts):
        return "unlabeled"
    if any(c == 0 for c in counts):
        return "mixed"
    return "labeled"


def _unlimited_size(member: DatasetNode) -> int:
    """h5netcdf: an unlimited dimension is as long as its longest attached variable.
    References that cannot be followed are reported (the length then comes from the
    others)."""
    dataset = member.dataset
    size = int(dataset.shape[0])
    references = member.reference_list()
    if references is None:
        if "REFERENCE_LIST" in member._attribute_names:
            _report(member, "REFERENCE_LIST", "unreadable")
        return size
    file = member.open_file()
    for number, entry in enumerate(references):
        try:
            reference, axis = entry
            # the low-level identifier is enough for a shape, and far cheaper
            target = h5py.h5r.dereference(reference, file.id)
            size = max(size, int(target.shape[axis]))
        except Exception as exc:  # dangling reference
            _report(member, "REFERENCE_LIST", f"entry {number} does not resolve ({exc})")
    return size


def _report_axes(member: DatasetNode, problem: str) -> None:
    """A DIMENSION_LIST that cannot be followed: reported; the axes it does not name
    get dimensions by h5netcdf's rules for unlabelled axes."""
    warnings.warn(
        AttributeWarning(
            f"attribute 'DIMENSION_LIST' of dataset {member.path!r}: {problem}; axes "
            "without a scale get phony dimensions"
        ),
        stacklevel=4,
    )


def _report(member: DatasetNode, attribute: str, problem: str) -> None:
    warnings.warn(
        AttributeWarning(
            f"attribute {attribute!r} of dataset {member.path!r}: {problem}; the length of "
            f"dimension {member.key!r} is that of the variables whose references resolve"
        ),
        stacklevel=3,
    )


def libhdf5_path(oid: Any) -> str | bytes | None:
    """An object's path as h5py's ``.name`` gives it (libhdf5's name; None: anonymous)."""
    name = h5py.h5i.get_name(oid)
    if name is None:
        return None
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:  # h5py keeps such names as bytes
        return name


class DimensionNamer:
    """Assign netCDF dimensions to every group of a walked hierarchy (h5netcdf rules)."""

    def __init__(self, root: GroupNode, path_of: PathOf | None = None) -> None:
        self.root = root
        #: The path of an object opened through a reference (default: libhdf5's name).
        self.path_of: PathOf = path_of if path_of is not None else libhdf5_path
        self._real_count = 0
        self._phony_count = 0
        self._visible_cache: dict[int, dict[str, Dimension]] = {}
        self._scale_names: dict[tuple[int, int], str] = {}
        self._ids_cache: dict[int, dict[Any, str]] = {}
        self._shared_cache: dict[int, set[Any]] = {}
        for node in root.walk():
            self._define_group_dimensions(node)

    def _define_group_dimensions(self, node: GroupNode) -> None:
        phony_needed: Counter[int] = Counter()
        for member in node.datasets:
            dataset = member.dataset
            shape = dataset.shape
            if shape is None:
                continue
            facts = member.facts
            if member.problem is not None:
                continue  # skipped by the parser: defines nothing
            if facts.is_scale:
                dimensionid = self._real_count
                self._real_count += 1
                if not shape:
                    continue  # a 0-d scale cannot size a dimension
                unlimited = dataset.maxshape is not None and dataset.maxshape[:1] == (None,)
                size = _unlimited_size(member) if unlimited else int(shape[0])
                dimid = facts.dimid if facts.dimid is not None else dimensionid
                scale = (file_number(member.open_file().id), member.address)
                node.dimensions[member.key] = Dimension(
                    member.key, size, dimid, phony=False, unlimited=unlimited, scale=scale
                )
            elif facts.labelling == "unlabeled":
                phony_needed |= Counter(int(s) for s in shape)
        labeled = Counter(d.maxsize for d in node.dimensions.values() if not d.phony)
        for size, count in phony_needed.items():
            for _ in range(labeled[size], count):
                name = f"phony_dim_{self._phony_count + self._real_count}"
                self._phony_count += 1
                node.dimensions[name] = Dimension(name, size, False, phony=True)

    def _scale_name(self, file: h5py.File, reference: Any) -> str:
        """The link name of the dimension scale ``reference`` points to (h5netcdf's rule).

        Resolving an object's name is slow in HDF5 and a file has few scales referenced
        many times, so names are cached by object address (cheap to get).
        """
        target = h5py.h5r.dereference(reference, file.id)
        key = (id(file), int(object_address(target)))
        name = self._scale_names.get(key)
        if name is None:
            path = self.path_of(target)
            if path is None:
                raise DimensionMetadataError("a DIMENSION_LIST reference names no known object")
            name = str(path).split("/")[-1]
            self._scale_names[key] = name
        return name

    def _visible(self, node: GroupNode) -> dict[str, Dimension]:
        key = id(node)
        if key not in self._visible_cache:
            self._visible_cache[key] = node.all_dimensions()
        return self._visible_cache[key]

    def _ids(self, node: GroupNode) -> dict[Any, str]:
        key = id(node)
        if key not in self._ids_cache:
            self._ids_cache[key] = node.dimension_ids()
        return self._ids_cache[key]

    def _defines(self, node: GroupNode, member: DatasetNode, name: str) -> bool:
        """Whether dimension ``name`` is the one ``member`` defines (under any of the
        scale's link names), or cannot be told apart."""
        own = node.dimensions.get(member.key)
        other = self._visible(node).get(name)
        if own is None or other is None or own.scale is None or own.scale[1] is None:
            return True
        return bool(other.scale == own.scale)

    def _shared_ids(self, node: GroupNode) -> set[Any]:
        key = id(node)
        if key not in self._shared_cache:
            self._shared_cache[key] = node.shared_dimension_ids()
        return self._shared_cache[key]

    def variable_dims(self, node: GroupNode, member: DatasetNode) -> VariableDims:
        """Name, dimensions and shape of one dataset of ``node``."""
        dataset = member.dataset
        shape = tuple(int(s) for s in (dataset.shape or ()))
        name = member.key.replace(NON_COORD_PREFIX, "")
        is_variable = not member.facts.dimension_only
        dims = self._lookup(node, member, shape)
        visible = self._visible(node)
        padded = tuple(
            max(s, visible[d].size) if d in visible else s for d, s in zip(dims, shape, strict=True)
        )
        return VariableDims(name, dims, padded, is_variable)

    def _lookup(
        self, node: GroupNode, member: DatasetNode, shape: Sequence[int]
    ) -> tuple[str, ...]:
        facts = member.facts
        visible = self._visible(node)
        coordinates = facts.coordinates
        if coordinates is not None and facts.is_scale:
            order = self._ids(node)
            try:
                ids = [int(c) for c in np.atleast_1d(coordinates)]
                dims = tuple(order[i] for i in ids)
            except (KeyError, TypeError, ValueError):
                ids, dims = [], ()
            shared = self._shared_ids(node).intersection(ids)
            if shared:
                member.problem = (
                    f"its _Netcdf4Coordinates name dimension id {min(shared)}, which several "
                    "dimensions claim (a corrupt _Netcdf4Dimid)"
                )
            elif dims and not self._defines(node, member, dims[0]):
                # A coordinate variable's first dimension is the one it defines.
                member.problem = (
                    f"its _Netcdf4Coordinates name dimension {dims[0]!r} first, not the "
                    f"dimension {member.key!r} it defines"
                )
            if len(dims) == len(shape):
                return dims
        if facts.labelling == "labeled" and facts.dimension_list is not None:
            try:
                file = member.open_file()
                dims = tuple(self._scale_name(file, refs[-1]) for refs in facts.dimension_list)
            except Exception as exc:  # dangling scale reference
                _report_axes(member, f"does not resolve ({exc})")
                dims = ()
            if len(dims) == len(shape):
                return dims
        if member.key in visible and len(shape) == 1:
            return (member.key,)
        return self._axis_dims(node, member, shape)

    def _axis_dims(
        self, node: GroupNode, member: DatasetNode, shape: Sequence[int]
    ) -> tuple[str, ...]:
        names: list[str] = []
        used: defaultdict[int, int] = defaultdict(int)
        axes: list[Any] = []
        # (A dataset already refused may have a DIMENSION_LIST the dimension-scale
        # library would overrun.)
        if member.facts.dimension_list is not None and member.problem is None:
            try:
                axes = list(member.dataset.dims)
            except Exception as exc:
                _report_axes(member, f"cannot be read ({exc})")
        for axis, size in enumerate(shape):
            scale_name = None
            if axis < len(axes):
                try:
                    scales = axes[axis][0] if len(axes[axis]) else None
                    scale_name = None if scales is None else self.path_of(scales.id)
                except Exception as exc:  # dangling scale reference
                    _report_axes(member, f"does not resolve for axis {axis} ({exc})")
            if scale_name:
                names.append(str(scale_name).split("/")[-1])
                continue
            candidates = [n for n, d in node.dimensions.items() if d.size == size]
            if used[size] < len(candidates):
                names.append(candidates[used[size]])
            else:
                # Only reached for datasets h5netcdf itself refuses (mixed labelled and
                # unlabelled axes): a private, collision-free name.
                names.append(self._extra_phony(node, size))
            used[size] += 1
        return tuple(names)

    def _extra_phony(self, node: GroupNode, size: int) -> str:
        self._visible_cache.clear()
        self._ids_cache.clear()
        self._shared_cache.clear()
        name = f"phony_dim_{self._phony_count + self._real_count}"
        while any(name in n.dimensions for n in self.root.walk()):
            self._phony_count += 1
            name = f"phony_dim_{self._phony_count + self._real_count}"
        self._phony_count += 1
        node.dimensions[name] = Dimension(name, size, False, phony=True)
        return name


__all__ = [
    "NON_COORD_PREFIX",
    "NOT_A_VARIABLE",
    "DatasetNode",
    "Dimension",
    "DimensionMetadataError",
    "DimensionNamer",
    "GroupNode",
    "VariableDims",
    "libhdf5_path",
]
