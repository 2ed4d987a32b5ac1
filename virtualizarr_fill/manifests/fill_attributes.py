"""The CF fill attributes a virtual variable is written with: its array's.

A virtual array's ``_FillValue`` and ``missing_value`` describe the stored chunks, so
they belong to the array, not to whatever xarray made of the variable's attributes:
the parser decides them for one file, and the fill-conflict rule
(:func:`virtualizarr_fill.fill_conflicts`) for a concatenation, in the combined
array's metadata. xarray merges the variables' attributes separately
(``combine_attrs``), knowing nothing of that rule: ``"drop_conflicts"`` drops the
first file's sentinel that ``"use_first"`` kept, ``"override"`` keeps the one
``"drop"`` removed. :func:`with_array_fill_attributes` puts the array's decision back
into the variable's attributes; the combiners and the writers apply it, so that the
Zarr ``fill_value``, the ``_FillValue`` attribute and ``missing_value`` of a written
store are the ones the rule decided and warned about.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping
from typing import Any, overload

import numpy as np
import xarray as xr

from virtualizarr_fill.fill.coder import sentinel_from_attribute
from virtualizarr_fill.fill.conflicts import FILL_ATTRIBUTES
from virtualizarr_fill.fill.decision import FILL_VALUE_ATTR, FillValueWarning
from virtualizarr_fill.manifests.array import FillManifestArray

__all__ = ["array_fill_attributes", "with_array_fill_attributes"]


def _same(name: str, a: Any, b: Any, dtype: np.dtype[Any]) -> bool:
    """Whether two values of attribute ``name`` mean the same (encoded or decoded)."""
    if name == FILL_VALUE_ATTR:
        try:
            x, y = sentinel_from_attribute(a, dtype), sentinel_from_attribute(b, dtype)
        except ValueError:
            return bool(a == b)
        return bool(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=dtype.kind in "fc"))
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def array_fill_attributes(
    name: Hashable, attrs: Mapping[Hashable, Any], array: FillManifestArray
) -> dict[Hashable, Any]:
    """``attrs`` with ``_FillValue`` and ``missing_value`` set to ``array``'s, or removed
    where the array has none.

    A value in ``attrs`` that differs from the array's (set by hand, or kept by
    xarray's attribute merge where the fill-conflict rule dropped it) is replaced
    with a :class:`~virtualizarr_fill.fill.FillValueWarning` naming variable ``name``;
    a value xarray's merge dropped is put back silently (the rule already warned).
    """
    decided = array.metadata.attributes
    dtype = array.dtype
    out = dict(attrs)
    for key in FILL_ATTRIBUTES:
        if key in decided:
            if key in attrs and not _same(key, attrs[key], decided[key], dtype):
                warnings.warn(
                    f"variable {name!r}: attribute {key}={attrs[key]!r} differs from its "
                    f"virtual array's {key}={decided[key]!r} (what its files, or the "
                    "fill-conflict rule combining them, define); the array's is written",
                    FillValueWarning,
                    stacklevel=3,
                )
            out[key] = decided[key]
        elif key in attrs:
            if attrs[key] is not None:
                warnings.warn(
                    f"variable {name!r}: attribute {key}={attrs[key]!r} is not one of its "
                    "virtual array's (its files define none, or the fill-conflict rule "
                    "dropped it); it is not written",
                    FillValueWarning,
                    stacklevel=3,
                )
            del out[key]
    return out


def _fixed_attributes(ds: xr.Dataset) -> dict[Hashable, dict[Hashable, Any]]:
    """The new attributes of the virtual variables of ``ds`` that need new ones."""
    fixed: dict[Hashable, dict[Hashable, Any]] = {}
    for name, variable in ds.variables.items():
        if isinstance(variable.data, FillManifestArray):
            attrs = array_fill_attributes(name, variable.attrs, variable.data)
            if attrs != variable.attrs:
                fixed[name] = attrs
    return fixed


def _dataset_with_array_fill(ds: xr.Dataset) -> xr.Dataset:
    fixed = _fixed_attributes(ds)
    if not fixed:
        return ds
    out = ds.copy(deep=False)
    for name, attrs in fixed.items():
        out.variables[name].attrs = attrs
    return out


@overload
def with_array_fill_attributes(data: xr.Dataset) -> xr.Dataset: ...
@overload
def with_array_fill_attributes(data: xr.DataTree) -> xr.DataTree: ...
@overload
def with_array_fill_attributes(data: xr.Dataset | xr.DataTree) -> xr.Dataset | xr.DataTree: ...
def with_array_fill_attributes(data: xr.Dataset | xr.DataTree) -> xr.Dataset | xr.DataTree:
    """``data`` with each virtual variable's CF fill attributes its array's.

    Parameters
    ----------
    data
        A virtual dataset or datatree. Only variables wrapping a
        :class:`~virtualizarr_fill.manifests.array.FillManifestArray` (what this
        package's parsers and combinations build) change.

    Returns
    -------
    xarray.Dataset or xarray.DataTree
        ``data`` itself when nothing differs, otherwise a shallow copy whose variables'
        ``_FillValue`` / ``missing_value`` are their arrays' (see
        :func:`array_fill_attributes`).
    """
    if isinstance(data, xr.DataTree):
        with warnings.catch_warnings():  # warned once, when the nodes are rebuilt
            warnings.simplefilter("ignore", FillValueWarning)
            unchanged = not any(
                _fixed_attributes(n.to_dataset(inherit=False)) for n in data.subtree
            )
        if unchanged:
            return data
        return data.map_over_datasets(_dataset_with_array_fill)  # type: ignore[no-any-return]
    return _dataset_with_array_fill(data)
