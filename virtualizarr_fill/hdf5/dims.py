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
  h5netcdf pads shorter variables with the fill value; the virtual array does too
  (for datasets extensible along it: a reference to one that is not is reported and
  not counted).

A dataset's shape is its own dataspace's, never a dimension's: a dataset whose length
along a dimension differs from the dimension's (other than a shorter dataset extensible
along an unlimited dimension) is marked (:attr:`DatasetNode.problem`) and skipped.

The whole file is walked from the root (as h5netcdf does) even when one group is
selected, because phony numbering depends on every group before it.

Dimension bookkeeping that cannot be read (an attribute table that cannot be listed, an
unreadable ``CLASS``, ``NAME``, ``DIMENSION_LIST``, ``_Netcdf4Coordinates`` or
``_Netcdf4Dimid``, a scale reference that does not resolve) never silently turns a
variable's axes into phony dimensions or a scale into a plain variable: the dataset is
marked (:attr:`DatasetNode.problem`), takes no part in defining dimensions, and the
parser skips it with a warning. A ``DIMENSION_LIST`` or ``REFERENCE_LIST`` entry that
does not resolve (the dataset's own attributes read fine) is reported with an
:class:`~virtualizarr_fill.errors.AttributeWarning` naming what it changes.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import h5py
import numpy as np

from virtualizarr_fill.hdf5._libhdf5 import file_number, object_address
from virtualizarr_fill.hdf5.attrs import (
    AttributeWarning,
    PathOf,
)
from virtualizarr_fill.hdf5.nodes import (
    NON_COORD_PREFIX,
    NOT_A_VARIABLE,
    DatasetNode,
    Dimension,
    DimensionMetadataError,
    GroupNode,
    VariableDims,
    libhdf5_path,
)


def _unlimited_size(member: DatasetNode) -> int:
    """h5netcdf: an unlimited dimension is as long as its longest attached variable.
    References that cannot be followed are reported (the length then comes from the
    others), and so are references to datasets that are not extensible along the
    referenced axis: netCDF-C makes every variable of an unlimited dimension extensible
    along it, and a dataset's length never comes from another one's."""
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
            length = int(target.shape[axis])
            extensible = target.get_space().get_simple_extent_dims(True)[axis] == h5py.h5s.UNLIMITED
        except Exception as exc:  # dangling reference
            _report(member, "REFERENCE_LIST", f"entry {number} does not resolve ({exc})")
            continue
        if not extensible:
            _report(
                member,
                "REFERENCE_LIST",
                f"entry {number} names a dataset not extensible along axis {axis}",
            )
            continue
        size = max(size, length)
    return size


def _length_disagreement(dimension: Dimension, axis: int, size: int, shape: Sequence[int]) -> str:
    """Why a dataset whose own dataspace disagrees with its dimension is skipped.

    The dataset's shape is its dataspace's, never a dimension scale's: netCDF readers
    would give the variable the dimension's length and read past, or short of, what the
    dataset holds. Only a dataset extensible along an unlimited dimension may be shorter
    than the dimension (h5netcdf and netCDF-C pad it with the fill value).
    """
    kind = "unlimited dimension" if dimension.unlimited else "dimension"
    return (
        f"its length {size} along axis {axis} differs from the length {dimension.size} of "
        f"its {kind} {dimension.name!r} (a corrupt dataspace or dimension scale; h5py reads "
        f"shape {tuple(int(s) for s in shape)})"
    )


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
        maxshape = dataset.maxshape or (None,) * len(shape)
        padded = []
        for axis, (dim, size) in enumerate(zip(dims, shape, strict=True)):
            dimension = visible.get(dim)
            if dimension is None or dimension.size == size:
                padded.append(size)
            elif dimension.unlimited and maxshape[axis] is None and size < dimension.size:
                padded.append(dimension.size)  # h5netcdf pads it with the fill value
            else:
                if member.problem is None:
                    member.problem = _length_disagreement(dimension, axis, size, shape)
                padded.append(size)
        return VariableDims(name, dims, tuple(padded), is_variable)

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
