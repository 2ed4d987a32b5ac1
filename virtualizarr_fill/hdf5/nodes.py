"""The parse's picture of a file's hierarchy: groups and datasets as the walk found
them (:class:`GroupNode`, :class:`DatasetNode`), with the attributes and facts the
netCDF dimension rules of :mod:`~virtualizarr_fill.hdf5.dims` read from them, each once.

A dataset whose dimension bookkeeping cannot be read (an attribute table that cannot be
listed, an unreadable ``CLASS``, ``NAME``, ``DIMENSION_LIST``, ``_Netcdf4Coordinates``
or ``_Netcdf4Dimid``) is marked (:attr:`DatasetNode.problem`) rather than read as
having no dimensions.
"""

from __future__ import annotations

from collections import ChainMap, Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from virtualizarr_fill.hdf5.attrs import (
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


def libhdf5_path(oid: Any) -> str | bytes | None:
    """An object's path as h5py's ``.name`` gives it (libhdf5's name; None: anonymous)."""
    name = h5py.h5i.get_name(oid)
    if name is None:
        return None
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:  # h5py keeps such names as bytes
        return name
