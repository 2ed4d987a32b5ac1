"""Files combined along one dimension, ordered by their coordinates.

:func:`combine_parts` gives the dataset xarray's nested combine gives for the files in
coordinate order (``xr.combine_nested(datasets, concat_dim=dim, data_vars="minimal",
coords="minimal", compat="override", join="exact", combine_attrs="drop_conflicts")``,
``data_vars="all"`` when stacking along a new dimension), from :class:`~.parts.FilePart`
objects instead of one Dataset per file: every variable along ``dim`` is one
``np.concatenate`` (or ``np.stack``) of the files' arrays, every other variable the
first file's.

Before anything is combined, the files are checked the way a user expects from a
series (names of the files in every message):

* the order comes from the files' coordinate along ``dim``, in the direction of the first
  file's (a GeoTIFF's ``y`` decreases), not from the order given;
* the combined coordinate must be strictly monotonic (no overlap, no duplicate);
  files holding one ``time`` each (scenes) are ordered, and two of one time refused, by
  :func:`.time_stack.time_order`, the rule of :func:`.time_stack.stack_by_time`;
* where every file's coordinate is regularly spaced with one spacing, the files must
  abut: a gap between two files is refused unless ``allow_gaps``;
* every other 1-D dimension coordinate must be equal in every file (xarray's
  ``join="exact"``), and the files must hold the same variables on the same dimensions.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray

from virtualizarr_fill.assemble.attributes import common_attributes, recording_dropped
from virtualizarr_fill.assemble.blocks import concatenated
from virtualizarr_fill.assemble.parts import FilePart
from virtualizarr_fill.assemble.time_stack import same_time_error, time_order
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.fill.conflicts import FILL_ATTRIBUTES, combining_variable
from virtualizarr_fill.manifests.fill_attributes import with_array_fill_attributes
from virtualizarr_fill.tiff.scene_time import TIME


def _names(parts: Sequence[FilePart], indices: Sequence[int], limit: int = 3) -> str:
    shown = [parts[i].url for i in indices[:limit]]
    more = len(indices) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _step(values: np.ndarray) -> Any:
    """The spacing of a regularly spaced coordinate, or None."""
    if values.size < 2:
        return None
    steps = np.diff(values)
    first = steps[0]
    if values.dtype.kind in "fc":
        scale = max(float(np.max(np.abs(values))), 1.0)
        if np.allclose(steps, first, rtol=1e-9, atol=1e-9 * scale):
            return first
        return None
    return first if np.all(steps == first) else None


def _zero(step: Any) -> Any:
    """The zero of ``step``'s type: a ``timedelta64`` keeps its unit, and the difference
    of two cftime dates (decoded in an object array) is a ``datetime.timedelta``, which
    compares with another timedelta, not with the integer 0."""
    return step * 0


def _same_step(a: Any, b: Any, kind: str, scale: float) -> bool:
    if kind in "fc":
        return bool(np.isclose(a, b, rtol=1e-9, atol=1e-9 * scale))
    return bool(a == b)


def _whole_multiple(difference: Any, step: Any, kind: str) -> bool:
    """Whether ``difference`` is two or more ``step`` in the same direction."""
    ratio = float(difference / step)
    if kind in "fc":
        return ratio > 1.5 and bool(np.isclose(ratio, np.round(ratio), rtol=0, atol=1e-6))
    return ratio > 1.5 and bool(difference % step == _zero(step))


def _single_value_spacing(starts: list[Any], kind: str) -> Any:
    """The spacing of files that hold one value each, or None where it is not clearly
    regular: the most common difference between consecutive files (the smallest of the
    most common), if at least half of the differences are it and every other difference
    is a whole multiple of it (files missing). Monthly files, whose differences are 28
    to 31 days, are irregular by design, not gapped."""
    if len(starts) < 3:
        return None
    differences = [after - before for before, after in pairwise(starts)]
    scale = max(max(abs(float(v)) for v in starts), 1.0) if kind in "fc" else 1.0
    if kind in "fc":  # nearly equal floats counted together
        keys = [round(float(d) / (1e-9 * scale)) for d in differences]
    else:
        keys = list(differences)
    counts = Counter(keys)
    most = max(counts.values())
    key = min((k for k, n in counts.items() if n == most), key=abs)
    spacing = differences[keys.index(key)]
    if spacing == _zero(spacing):
        return None
    matching = sum(_same_step(d, spacing, kind, scale) for d in differences)
    if 2 * matching < len(differences):
        return None
    others = [d for d in differences if not _same_step(d, spacing, kind, scale)]
    if all(_whole_multiple(d, spacing, kind) for d in others):
        return spacing
    return None


def _spacing(values: list[np.ndarray], kind: str) -> Any:
    """The spacing the ordered files' coordinates (``values``) must keep between files,
    or None: the step of the files holding several values, where they all have one step
    (files holding one value then continue it, as files appended to a regular series
    do), else, where every file holds one value, :func:`_single_value_spacing`."""
    several = [v for v in values if v.size > 1]
    if several:
        steps = [_step(v) for v in several]
        if any(s is None for s in steps) or len({repr(s) for s in steps}) != 1:
            return None
        return steps[0]
    return _single_value_spacing([v[0] for v in values], kind)


def readable(value: Any) -> str:
    """``value`` (a coordinate value or step) as a message shows it: a timedelta in
    days, hours, minutes or seconds rather than numpy's nanoseconds."""
    import pandas as pd

    if isinstance(value, np.timedelta64 | datetime.timedelta):
        delta = pd.Timedelta(value)
        for unit, name in (("D", "days"), ("h", "hours"), ("min", "minutes"), ("s", "seconds")):
            count, rest = divmod(delta, pd.Timedelta(1, unit))
            if rest == pd.Timedelta(0):
                return f"{count} {name[:-1] if abs(count) == 1 else name}"
        return str(delta)
    return str(value)


def order_parts(parts: Sequence[FilePart], dim: str, *, allow_gaps: bool = False) -> list[FilePart]:
    """The files in the order of their coordinate along ``dim`` (as given where they have
    none), checked for overlaps and gaps (see the module docstring)."""
    if not all(dim in part.coords for part in parts):
        return list(parts)
    values = [np.asarray(part.coords[dim].values) for part in parts]
    first = values[0]
    descending = first.size > 1 and bool(first[1] < first[0])
    keys = [v[0] if v.size else None for v in values]
    if any(k is None for k in keys):
        empty = [i for i, k in enumerate(keys) if k is None]
        raise IncompatibleArraysError(f"{_names(parts, empty)}: no values along {dim!r}")
    if dim == TIME and all(v.size == 1 for v in values):
        # scenes, one time each: ordered and refused as stack_by_time orders them
        urls = [part.url for part in parts]
        order = time_order(keys, urls, parts[0].coords[dim].attrs)
    else:
        order = sorted(range(len(parts)), key=lambda i: keys[i], reverse=descending)  # type: ignore[arg-type, return-value]
    ordered = [parts[i] for i in order]
    ordered_values = [values[i] for i in order]
    for values_i, part in zip(ordered_values, ordered, strict=True):
        inner = np.diff(values_i) if values_i.size > 1 else np.array([])
        if not inner.size:
            continue
        zero = _zero(inner[0])
        if not (np.all(inner < zero) if descending else np.all(inner > zero)):
            raise IncompatibleArraysError(
                f"{part.url}: its {dim!r} coordinate is not monotonic in the direction of "
                f"{ordered[0].url}'s"
            )
    kind = ordered_values[0].dtype.kind
    spacing = None if allow_gaps else _spacing(ordered_values, kind)
    for i in range(1, len(ordered)):
        before, after = ordered_values[i - 1][-1], ordered_values[i][0]
        step = (after - before) if not descending else (before - after)
        single = ordered_values[i - 1].size == 1 or ordered_values[i].size == 1
        if dim == TIME and single and step == _zero(step):  # a scene at a time taken
            attrs = ordered[i - 1].coords[dim].attrs
            raise same_time_error(ordered[i - 1].url, ordered[i].url, before, attrs)
        if ordered_values[i - 1].size == 1 and ordered_values[i].size == 1 and step == _zero(step):
            raise IncompatibleArraysError(
                f"{ordered[i - 1].url} and {ordered[i].url} have the same {dim} "
                f"({readable(before)}): a virtual dataset takes one file per {dim}"
            )
        if not step > _zero(step):  # overlap or duplicate
            raise IncompatibleArraysError(
                f"{ordered[i - 1].url} and {ordered[i].url} overlap along {dim!r} "
                f"({readable(before)} and {readable(after)}): a virtual dataset cannot hold both"
            )
        if spacing is not None:
            expected = before + spacing
            gap = (
                not np.isclose(after, expected, rtol=1e-9, atol=1e-9 * max(abs(float(after)), 1.0))
                if kind in "fc"
                else after != expected
            )
            if gap:
                pixels = (after - before) / spacing
                if kind in "fc" and not np.isclose(pixels, np.round(pixels), atol=1e-6):
                    raise IncompatibleArraysError(
                        f"{ordered[i].url} is not on the grid of {ordered[i - 1].url} along "
                        f"{dim!r}: it starts {float(pixels) - 1:g} steps of {spacing} after "
                        "it ends (not a whole number); resample the files to one grid"
                    )
                raise IncompatibleArraysError(
                    f"gap along {dim!r} between {ordered[i - 1].url} and {ordered[i].url}: "
                    f"{readable(before)} is followed by {readable(after)}, but the files' "
                    f"spacing is {readable(spacing)}; add the missing files (or allow gaps)"
                )
    return ordered


def _same_values(a: xr.Variable, b: xr.Variable) -> bool:
    """Whether two coordinates hold the same values on the same dimensions."""
    if a.dims != b.dims or a.shape != b.shape:
        return False
    # NaN (a coordinate's decoded fill value) equals NaN, as in xarray's join="exact"
    return bool(a.equals(b))


def check_same_structure(reference: FilePart, part: FilePart, dims: Sequence[str]) -> None:
    """Refuse a file whose variables, their dimensions, or 1-D coordinates along any
    dimension but ``dims`` differ from ``reference``'s (xarray's ``join="exact"``)."""
    names = set(reference.arrays)
    if set(part.arrays) != names:
        missing = sorted(names - set(part.arrays))
        extra = sorted(set(part.arrays) - names)
        raise IncompatibleArraysError(
            f"{part.url} and {reference.url} hold different variables "
            f"(missing {missing}, extra {extra})"
        )
    for name in names:
        if part.dims[name] != reference.dims[name]:
            raise IncompatibleArraysError(
                f"{part.url}: {name!r} has dimensions {part.dims[name]}, "
                f"{reference.url} has {reference.dims[name]}"
            )
    for name, coordinate in reference.coords.items():
        if set(dims).intersection(coordinate.dims):
            continue
        other = part.coords.get(name)
        if other is None or not _same_values(coordinate, other):
            raise IncompatibleArraysError(
                f"{part.url} and {reference.url} have different {name!r} coordinates, so "
                f"they cannot be combined along {', '.join(map(repr, dims))} (files to "
                "combine share every other coordinate)"
            )


def combine_parts(
    template: xr.Dataset,
    parts: Sequence[FilePart],
    dim: str,
    *,
    new_dim: bool = False,
) -> xr.Dataset:
    """The files (``parts``, compacted, in order; ``template`` the virtual dataset of
    any of them, whose structure the result takes) combined along ``dim``: see the
    module docstring."""
    combined = set(parts[0].combined([dim], new_dim))
    variables: dict[Hashable, xr.Variable] = {}
    dropped: dict[str, set[Hashable]] = {}
    for name, variable in template.variables.items():
        along = name in combined or (not new_dim and dim in variable.dims)
        if not along:
            variables[name] = leading(parts[0], str(name), variable)
            continue
        key = str(name)
        if isinstance(variable.data, ManifestArray):
            attrs = common_attributes(
                (part.var_attrs[key] for part in parts), dropped.setdefault(key, set())
            )
            with combining_variable(key):
                if new_dim:
                    arrays = [part.arrays[key] for part in parts]
                    data: Any = np.stack(arrays, axis=0)  # type: ignore[call-overload]
                    dims: tuple[Hashable, ...] = (dim, *variable.dims)
                else:
                    # each file's array built as it is concatenated (see .blocks)
                    axis = variable.dims.index(dim)
                    data = concatenated((part.arrays[key] for part in parts), axis)
                    dims = variable.dims
        elif all(key in part.coords for part in parts) and not new_dim:
            data = np.concatenate([part.coords[key].values for part in parts])
            attrs = common_attributes(
                (part.coords[key].attrs for part in parts), dropped.setdefault(key, set())
            )
            dims = variable.dims
            # the first file's encoding (its time units, say), as xarray keeps it
            encoding = whole_chunk(parts[0].coords[key], len(data))
            if dims == (name,):
                data = index_values(data)
            variables[name] = xr.Variable(dims, data, attrs, encoding)
            continue
        else:
            raise IncompatibleArraysError(
                f"{name!r} is loaded in memory and is not a dimension coordinate; combine "
                "these files with xarray (xr.combine_nested) instead"
            )
        variables[name] = xr.Variable(dims, data, attrs, dict(variable.encoding))
    return assembled(template, variables, parts, dropped)


def leading(part: FilePart, name: str, variable: xr.Variable) -> xr.Variable:
    """``variable`` as the leading file ``part`` holds it (xarray's ``compat="override"``
    takes variables that are not combined from the first file)."""
    if name in part.coords:  # decoded: its CF attributes moved into its encoding
        coordinate = part.coords[name]
        return xr.Variable(
            variable.dims, coordinate.data, coordinate.attrs, dict(coordinate.encoding)
        )
    attrs = part.var_attrs.get(name, variable.attrs)
    return xr.Variable(variable.dims, part.arrays[name], attrs, dict(variable.encoding))


def index_values(values: np.ndarray) -> Any:
    """A combined dimension coordinate's numbers as the pandas index xarray builds on
    them, sharing their memory: given a NumPy array, xarray copies it into its index, two
    copies of a coordinate of millions of values (times and other kinds are left to
    xarray, which picks their index)."""
    import pandas as pd

    if values.ndim == 1 and values.dtype.kind in "iuf":
        return pd.Index(values, copy=False)
    return values


def whole_chunk(variable: xr.Variable, length: int) -> dict[Hashable, Any]:
    """``variable``'s encoding for a combined 1-D coordinate of ``length`` values: one
    chunk (xarray would keep the first file's chunk length, and a coordinate of a
    thousand files would be written as a thousand chunks, each read at every open),
    compressed with zarr's default where the file stored its own uncompressed (a
    GeoTIFF's pixel centres: the 6 million ``y`` values of a column of 100,000 tiles
    take 48 MB raw, 9 MB compressed, read at every open)."""
    encoding = dict(variable.encoding)
    if "chunks" in encoding:
        encoding["chunks"] = (length,)
        encoding["preferred_chunks"] = {variable.dims[0]: length}
    if "compressors" in encoding and not encoding["compressors"] and not encoding.get("filters"):
        del encoding["compressors"]
    return encoding


def assembled(
    template: xr.Dataset,
    variables: dict[Hashable, xr.Variable],
    parts: Sequence[FilePart],
    dropped: dict[str, set[Hashable]],
) -> xr.Dataset:
    """A dataset of ``variables`` in ``template``'s order and roles (coordinates stay
    coordinates), with the attributes the files agree on; those they do not (the
    dataset's, and each variable's in ``dropped``) recorded for
    :func:`~.attributes.dropped_attributes`."""
    coord_names = set(template.coords)
    attrs = common_attributes((part.attributes for part in parts), dropped.setdefault("", set()))
    ds = with_array_fill_attributes(
        xr.Dataset(
            {n: v for n, v in variables.items() if n not in coord_names},
            coords={n: v for n, v in variables.items() if n in coord_names},
            attrs=attrs,
        )
    )
    return recording_dropped(ds, dropped, fill=FILL_ATTRIBUTES)


__all__ = [
    "assembled",
    "check_same_structure",
    "combine_parts",
    "index_values",
    "leading",
    "order_parts",
    "readable",
    "whole_chunk",
]
