"""What combining needs of one parsed file, without building its xarray Dataset.

Combining N files through xarray (``open_virtual_mfdataset``, ``xr.combine_nested``)
builds N Datasets, each with its coordinates decoded and indexed, and aligns them: most
of the time of building a store from many small files. :class:`FilePart` keeps only
what :mod:`.series` and :mod:`.mosaic` use: the file's arrays as the virtual variables
will wrap them, the decoded values of its 1-D dimension coordinates, and the attributes
of its variables and group. The first file of a combination is also built as a full
Dataset (:func:`template`), whose structure the result takes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray, ManifestGroup

from virtualizarr_fill.manifests.dataset import loadable_variable
from virtualizarr_fill.manifests.store import FileManifestStore


@dataclass
class FilePart:
    """One parsed file, for combining (small: its manifests and coordinate values)."""

    url: str
    #: The root group's arrays (FillManifestArrays, metadata with dimension names).
    arrays: dict[str, ManifestArray]
    #: The group's attributes.
    attributes: dict[str, Any]
    #: The 1-D dimension coordinates, decoded (name -> variable with values in memory).
    coords: dict[str, xr.Variable] = field(default_factory=dict)

    def dims(self, name: str) -> tuple[str, ...]:
        return tuple(str(d) for d in (self.arrays[name].metadata.dimension_names or ()))

    def sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for array in self.arrays.values():
            for dim, n in zip(array.metadata.dimension_names or (), array.shape, strict=True):
                sizes[str(dim)] = n
        return sizes


#: Attributes xarray's CF decoding reads; a variable with none of them, of plain numbers
#: in native byte order, decodes to itself.
_CF_ATTRIBUTES = frozenset(
    {"units", "calendar", "scale_factor", "add_offset", "_FillValue", "missing_value",
     "_Unsigned", "dtype", "_Encoding", "flag_values"}
)


def _decode(name: str, variable: xr.Variable, decode_times: bool | None) -> xr.Variable:
    dtype = variable.dtype
    if (
        dtype.kind in "iuf"
        and dtype.isnative
        and not _CF_ATTRIBUTES.intersection(variable.attrs)
        and isinstance(variable.data, np.ndarray)
    ):
        return variable
    options: dict[str, Any] = {}
    if decode_times is not None:
        options["decode_times"] = decode_times
    return xr.conventions.decode_cf_variable(name, variable, **options)


def file_part(
    store: FileManifestStore, *, decode_times: bool | None = None, coords: bool = True
) -> FilePart:
    """The :class:`FilePart` of a parsed file: its root group's arrays and, with
    ``coords``, the decoded values of its 1-D dimension coordinates."""
    group: ManifestGroup = store._group
    arrays = dict(group.arrays)
    part = FilePart(
        url=store.url, arrays=arrays, attributes=dict(group.metadata.attributes)
    )
    if coords:
        for name, array in arrays.items():
            if tuple(array.metadata.dimension_names or ()) == (name,):
                decoded = _decode(name, loadable_variable(store, name, array), decode_times)
                part.coords[name] = decoded.load()
    return part


def template(store: FileManifestStore, *, decode_times: bool | None = None) -> xr.Dataset:
    """The file's virtual dataset, as ``open_virtual_dataset`` returns it."""
    return store.to_virtual_dataset(decode_times=decode_times)


def stripped(array: ManifestArray) -> ManifestArray:
    """The array as a virtual variable wraps it (``to_virtual_variable``'s data)."""
    return array.to_virtual_variable().data  # type: ignore[no-any-return]


def common_attributes(attribute_sets: Sequence[Mapping[Any, Any]]) -> dict[Hashable, Any]:
    """xarray's ``combine_attrs="drop_conflicts"``: the attributes whose values agree
    wherever they appear (an attribute missing from some inputs is kept)."""
    from xarray.core.utils import equivalent

    result: dict[Hashable, Any] = {}
    dropped: set[Hashable] = set()
    for attributes in attribute_sets:
        for key, value in attributes.items():
            if key in dropped:
                continue
            if key not in result:
                result[key] = value
            elif not equivalent(result[key], value):
                del result[key]
                dropped.add(key)
    return result


def with_data(variable: xr.Variable, data: Any, attrs: Mapping[Hashable, Any]) -> xr.Variable:
    """``variable``'s dimensions and encoding around new data and attributes."""
    return xr.Variable(variable.dims, data, dict(attrs), dict(variable.encoding))


__all__ = [
    "FilePart",
    "common_attributes",
    "file_part",
    "stripped",
    "template",
    "with_data",
]
