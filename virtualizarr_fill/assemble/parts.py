"""What combining needs of one parsed file, without building its xarray Dataset.

Combining N files through xarray (``open_virtual_mfdataset``, ``xr.combine_nested``)
builds N Datasets, each with its coordinates decoded and indexed, and aligns them: most
of the time of building a store from many small files. :class:`FilePart` keeps only what
:mod:`.series` and :mod:`.mosaic` use: each array as the file's virtual variable would
wrap it, with its dimensions and attributes; the decoded 1-D dimension coordinates; its
small time variables decoded (each file's stored times may be in units of its own, which
a virtual variable cannot follow); the dataset's attributes. Once checked against the
first file, :func:`compact` keeps of a file only what the combination takes from it (the
manifests of the variables being combined, their coordinates), sharing everything equal
to the first file's, so that memory grows with the chunk references, not with the files'
metadata. The first file's part is also built into its full Dataset
(:func:`part_dataset`), whose structure the result takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray, ManifestGroup
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill import upstream
from virtualizarr_fill.manifests.array import FillManifestArray
from virtualizarr_fill.manifests.dataset import loaded_variables
from virtualizarr_fill.manifests.store import FileManifestStore


@dataclass(slots=True)
class FilePart:
    """One parsed file, for combining (slots: a large combination holds one per file)."""

    url: str
    #: Each array as its virtual variable wraps it (no dimension names, fill attributes).
    arrays: dict[str, ManifestArray]
    #: Each array's dimensions.
    dims: dict[str, tuple[str, ...]]
    #: Each array's attributes (its variable's).
    var_attrs: dict[str, dict[str, Any]]
    #: The dataset's attributes (the group's, less those xarray consumes).
    attributes: dict[str, Any]
    #: The 1-D dimension coordinates, decoded, with values in memory.
    coords: dict[str, xr.Variable] = field(default_factory=dict)
    #: Names of the arrays that are coordinates of the file's dataset.
    coord_names: frozenset[str] = frozenset()
    #: Variables stored as CF times in units of their file (1-D ones with their own
    #: ``units``, and the bounds of a time coordinate, with its), decoded, with values in
    #: memory: a combination along their first dimension takes these instead of the
    #: virtual arrays (:func:`loading_times`), since the files' stored numbers in
    #: different units cannot share one ``units`` attribute.
    times: dict[str, xr.Variable] = field(default_factory=dict)

    def combined(self, dims: Sequence[str], new_dim: bool) -> list[str]:
        """The virtual variables a combination along ``dims`` concatenates (stacking
        along a new dimension: every data variable)."""
        return [
            name
            for name in self.arrays
            if name not in self.coords
            and (
                name not in self.coord_names if new_dim else any(d in self.dims[name] for d in dims)
            )
        ]

    def sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for name, array in self.arrays.items():
            for dim, n in zip(self.dims[name], array.shape, strict=True):
                sizes[dim] = n
        return sizes


#: Attributes xarray's CF decoding reads; a variable with none of them, of plain numbers
#: in native byte order, decodes to itself.
_CF_ATTRIBUTES = frozenset(
    {
        "units",
        "calendar",
        "scale_factor",
        "add_offset",
        "_FillValue",
        "missing_value",
        "_Unsigned",
        "dtype",
        "_Encoding",
        "flag_values",
    }
)


def _decode(name: str, variable: xr.Variable, decode_times: bool | None) -> xr.Variable:
    dtype = variable.dtype
    if (
        dtype.kind in "iuf"
        and dtype.isnative
        and not _CF_ATTRIBUTES.intersection(variable.attrs)
        and isinstance(variable.data, np.ndarray)
    ):
        # What xarray's decoding makes of it: the same values, the dtype recorded.
        return xr.Variable(
            variable.dims, variable.data, variable.attrs, {**variable.encoding, "dtype": dtype}
        )
    options: dict[str, Any] = {}
    if decode_times is not None:
        options["decode_times"] = decode_times
    return xr.conventions.decode_cf_variable(name, variable, **options)


def is_time_units(units: Any) -> bool:
    """Whether xarray decodes ``units`` as CF times ("<unit> since <date>")."""
    return isinstance(units, str) and "since" in units


def bounds_of(var_attrs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The bounds variables of time coordinates, each with its coordinate: xarray
    decodes a ``bounds`` variable with its coordinate's ``units`` and ``calendar``
    where it has none of its own (``conventions._update_bounds_attributes``; it does
    not do so for ``climatology``)."""
    found: dict[str, str] = {}
    for name, attrs in var_attrs.items():
        bounds = attrs.get("bounds")
        if isinstance(bounds, str) and bounds in var_attrs and is_time_units(attrs.get("units")):
            found[bounds] = name
    return found


def time_encoding(
    var_attrs: Mapping[str, Mapping[str, Any]], name: str, bounds: Mapping[str, str]
) -> tuple[Any, Any] | None:
    """The ``(units, calendar)`` xarray decodes the stored numbers of ``name`` with
    (``bounds`` from :func:`bounds_of`), or None for a variable it does not decode as
    times."""
    attrs = dict(var_attrs[name])
    if name in bounds:
        coordinate = var_attrs[bounds[name]]
        attrs.setdefault("units", coordinate["units"])
        if "calendar" in coordinate:
            attrs.setdefault("calendar", coordinate["calendar"])
    units = attrs.get("units")
    return (units, attrs.get("calendar")) if is_time_units(units) else None


def dataset_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of a file's virtual dataset: its group's, less those xarray
    consumes (``coordinates``, and netCDF-C's own ``_nc*``)."""
    return {
        k: v
        for k, v in attributes.items()
        if k != "coordinates" and not k.lower().startswith("_nc")
    }


def file_part(store: FileManifestStore, *, decode_times: bool | None = None) -> FilePart:
    """The :class:`FilePart` of a parsed file (its root group)."""
    group: ManifestGroup = upstream.group_of(store)
    attributes = group.metadata.attributes
    listed = attributes.get("coordinates", "")
    coord_names = set(listed.split() if isinstance(listed, str) else listed)
    part = FilePart(
        url=store.url,
        arrays={},
        dims={},
        var_attrs={},
        attributes=dataset_attributes(attributes),
    )
    for name, array in group.arrays.items():
        if isinstance(array, FillManifestArray) and array.metadata.dimension_names:
            # what to_virtual_variable wraps, without building the xarray Variable
            part.arrays[name] = array.variable_data()
            part.dims[name] = tuple(str(d) for d in array.metadata.dimension_names)
            attrs = array.metadata.attributes
        else:
            variable = array.to_virtual_variable()
            part.arrays[name] = variable.data
            part.dims[name] = tuple(str(d) for d in variable.dims)
            attrs = variable.attrs
        part.var_attrs[name] = dict(attrs)
        if isinstance(attrs.get("coordinates"), str):
            coord_names.update(attrs["coordinates"].split())
    candidates = {
        name: array
        for name, array in group.arrays.items()
        if _may_be_dimension_coordinate(name, part.dims[name], array.dtype)
    }
    bounds = bounds_of(part.var_attrs)
    times = _time_variables(part, bounds, candidates) if decode_times is not False else []
    # one pass over the file for the coordinates and the times
    loaded = loaded_variables(store, {**candidates, **{n: group.arrays[n] for n in times}})
    for name in times:
        part.times[name] = _decoded_time(name, loaded.pop(name), part, bounds)
    for name, variable in loaded.items():
        decoded = _decode(name, variable, decode_times)
        # a netCDF character array is a dimension coordinate once its characters are
        # joined (as VirtualiZarr decides, on the decoded variables)
        if decoded.dims == (name,):
            coord_names.add(name)
            part.coords[name] = decoded.load()
    part.coord_names = frozenset(coord_names)
    return part


def _time_variables(
    part: FilePart, bounds: Mapping[str, str], coordinates: Mapping[str, Any]
) -> list[str]:
    """The file's variables in time units of their own or of the coordinate they bound
    that :attr:`FilePart.times` holds: 1-D ones, and bounds along their dimension
    coordinate (two values per coordinate value), as small as the coordinates."""
    chosen = []
    for name, dims in part.dims.items():
        if name in coordinates or time_encoding(part.var_attrs, name, bounds) is None:
            continue
        if name in bounds:
            if len(dims) == 2 and dims[0] == bounds[name] and bounds[name] in coordinates:
                chosen.append(name)
        elif len(dims) == 1:
            chosen.append(name)
    return chosen


def _decoded_time(
    name: str, variable: xr.Variable, part: FilePart, bounds: Mapping[str, str]
) -> xr.Variable:
    if name in bounds:  # decoded as xarray decodes bounds: with the coordinate's units
        coordinate = part.var_attrs[bounds[name]]
        variable.attrs.setdefault("units", coordinate["units"])
        if "calendar" in coordinate:
            variable.attrs.setdefault("calendar", coordinate["calendar"])
    decoded = _decode(name, variable, None).load()
    # the combined values are written anew: the file's chunking is no longer theirs
    decoded.encoding.pop("chunks", None)
    decoded.encoding.pop("preferred_chunks", None)
    return decoded


def loading_times(part: FilePart, dims: Sequence[str], new_dim: bool) -> FilePart:
    """``part`` as a combination along ``dims`` takes it: its :attr:`FilePart.times`
    that are concatenated along their first dimension become loaded variables (like its
    coordinates; read back, each file's values are those of its own units), the others
    stay virtual (stacking along a new dimension keeps each file's numbers apart)."""
    if not part.times:
        return part
    along = {} if new_dim else {n: v for n, v in part.times.items() if v.dims[0] in dims}
    return dataclasses.replace(part, coords={**part.coords, **along}, times={})


def _may_be_dimension_coordinate(name: str, dims: tuple[str, ...], dtype: np.dtype) -> bool:
    if dims == (name,):
        return True
    return len(dims) == 2 and dims[0] == name and dtype.kind == "S" and dtype.itemsize == 1


def part_dataset(part: FilePart) -> xr.Dataset:
    """The file's virtual dataset, as ``open_virtual_dataset`` returns it (its dimension
    coordinates loaded), built from the part alone."""
    from virtualizarr.xarray import (
        construct_fully_virtual_dataset,
        replace_virtual_with_loadable_vars,
    )

    virtual = {
        name: xr.Variable(part.dims[name], array, part.var_attrs[name])
        for name, array in part.arrays.items()
    }
    fully_virtual = construct_fully_virtual_dataset(
        virtual_vars=virtual,
        coord_names=[n for n in part.coord_names if n in part.arrays],
        attrs=dict(part.attributes),
    )
    roles = part.coord_names
    loadable = xr.Dataset(
        {n: v for n, v in part.coords.items() if n not in roles},
        coords={n: v for n, v in part.coords.items() if n in roles},
        attrs=dict(part.attributes),
    )
    return replace_virtual_with_loadable_vars(fully_virtual, loadable, list(part.coords))


#: Array metadata fields compared first (cheap, and where files differ); zarr's own
#: ``ArrayV3Metadata.__eq__`` compares the JSON of both, which costs more than the rest
#: of a file's compaction together.
_CHEAP_FIRST = ("shape", "data_type", "chunk_grid", "codecs", "dimension_names")


_FIELDS = [f.name for f in dataclasses.fields(ArrayV3Metadata)]
_METADATA_FIELDS = (
    *[n for n in _CHEAP_FIRST if n in _FIELDS],
    *[n for n in _FIELDS if n not in _CHEAP_FIRST],
)


def _same_metadata(a: ArrayV3Metadata, b: ArrayV3Metadata) -> bool:
    """Whether two array metadata are equal, field by field (a NaN fill value compares
    unequal: the metadata is then not shared, which costs memory only)."""
    return type(a) is type(b) and all(
        bool(getattr(a, name) == getattr(b, name)) for name in _METADATA_FIELDS
    )


#: What :func:`_shared` decided for objects already seen, by ``id``: compacting files
#: that were compacted against another reference (a merge of two collectors) compares
#: each object the other reference's files share once, not once per file.
Known = dict[int, Any]


def _shared(reference: Any, value: Any, known: Known | None = None) -> Any:
    """``reference`` where it equals ``value`` (one object for every file), else ``value``."""
    if value is reference:
        return reference
    if known is not None and id(value) in known:
        return known[id(value)]
    try:
        if isinstance(reference, ArrayV3Metadata):
            shared = reference if _same_metadata(reference, value) else value
        else:
            shared = reference if bool(reference == value) else value
    except (TypeError, ValueError):  # values that do not compare to one truth value
        shared = value
    if known is not None:
        known[id(value)] = shared
    return shared


def _sharing_metadata(
    reference: ManifestArray, array: ManifestArray, known: Known | None = None
) -> ManifestArray:
    metadata = _shared(reference.metadata, array.metadata, known)
    if metadata is array.metadata:
        return array
    return upstream.manifest_array(type(array), metadata, array.manifest, like=array)


def _shared_array(
    reference: ManifestArray, array: ManifestArray, known: Known | None = None
) -> ManifestArray:
    """``reference`` where ``array`` holds the same metadata and chunk references."""
    if known is not None and id(array) in known:
        return known[id(array)]
    shared = _sharing_metadata(reference, array, known)
    if shared.metadata is reference.metadata and _shared(
        reference.manifest, array.manifest, known
    ) is (reference.manifest):
        shared = reference
    if known is not None:
        known[id(array)] = shared
    return shared


def compact(
    part: FilePart,
    reference: FilePart,
    combined: Iterable[str],
    dims: Iterable[str],
    known: Known | None = None,
) -> FilePart:
    """``part`` reduced to what a combination along ``dims`` takes from it, everything
    equal to ``reference``'s shared with it: the virtual variables (the ``combined``
    ones with their own chunk references), every variable's attributes, and the
    coordinates (those along other dimensions, equal to ``reference``'s as checked by
    :func:`~.series.check_same_structure`, shared). A compacted part can be compacted
    again against another reference (checked against the first's), passing the same
    ``known`` for every part that shares the first reference."""
    along_dims = set(dims)
    along = set(combined)
    arrays = {}
    for name, array in part.arrays.items():
        if name in part.coords:
            continue  # loaded: its values are in ``coords``
        if name in along:
            arrays[name] = _sharing_metadata(reference.arrays[name], array, known)
        else:
            arrays[name] = _shared_array(reference.arrays[name], array, known)
    return FilePart(
        url=part.url,
        arrays=arrays,
        dims=reference.dims,
        var_attrs={
            n: _shared_attributes(reference.var_attrs[n], a, known)
            for n, a in part.var_attrs.items()
        },
        attributes=_shared(reference.attributes, part.attributes, known),
        coords={
            n: _shared_coordinate(reference.coords.get(n), c, known)
            if along_dims.intersection(c.dims)
            else reference.coords[n]
            for n, c in part.coords.items()
        },
        coord_names=reference.coord_names,
    )


def _shared_attributes(
    reference: dict[str, Any], attributes: dict[str, Any], known: Known | None = None
) -> dict[str, Any]:
    """``reference`` where it equals ``attributes``, else ``attributes`` with each value
    equal to ``reference``'s replaced by that one object (the tie points of a GeoTIFF
    differ from tile to tile; its pixel scale and CRS do not)."""
    shared = _shared(reference, attributes, known)
    if shared is reference:
        return reference
    return {
        k: reference[k] if k in reference and _same_value(reference[k], v) else v
        for k, v in attributes.items()
    }


def _same_value(a: Any, b: Any) -> bool:
    """Whether two attribute values are equal and of the same types all through (``1``
    and ``1.0`` are equal, and written differently)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return isinstance(a, (str, int, float, bytes)) and bool(a == b)


def _shared_coordinate(
    reference: xr.Variable | None, coordinate: xr.Variable, known: Known | None = None
) -> xr.Variable:
    """``coordinate``, a file's own coordinate along a combined dimension, keeping
    only its values of its own: ``reference`` itself where it equals it (the ``x`` of
    tiles in one column), else its attributes and encoding shared with ``reference``'s
    where equal. Each decoded coordinate holds an encoding of its own (chunks, codecs,
    fill value), which, kept for every file, outweighs the values of a small tile."""
    if reference is None or coordinate is reference:
        return coordinate
    if known is not None and id(coordinate) in known:
        return known[id(coordinate)]
    attrs = _shared(reference.attrs, coordinate.attrs, known)
    encoding = _shared(reference.encoding, coordinate.encoding, known)
    if (
        attrs is reference.attrs
        and encoding is reference.encoding
        and coordinate.dims == reference.dims
        and coordinate.dtype == reference.dtype
        and np.array_equal(coordinate.values, reference.values)
    ):
        shared = reference
    else:
        # The combination only reads a part's coordinates (their values, attributes
        # and encoding), so the dictionaries may be shared; xarray's constructor would
        # copy them.
        shared = upstream.variable_sharing(coordinate.dims, coordinate.data, attrs, encoding)
    if known is not None:
        known[id(coordinate)] = shared
    return shared


__all__ = [
    "FilePart",
    "bounds_of",
    "compact",
    "dataset_attributes",
    "file_part",
    "is_time_units",
    "loading_times",
    "part_dataset",
    "time_encoding",
]
