"""Attributes holding NaN or ±infinity, which an Icechunk store cannot hold.

JSON has no NaN or infinity. zarr-python (and so xarray) writes such attribute values as
the bare tokens ``NaN``, ``Infinity`` and ``-Infinity``, which Python's ``json`` reads
back but strict parsers refuse; Icechunk is one, and fails the whole write with "bad
metadata". The strings ``"NaN"``/``"Infinity"`` are Zarr v3's encoding of a
``fill_value`` only: neither zarr nor xarray decodes them in attributes, so writing them
would turn a number into a string without saying so. No encoding reads back as the
number, so :func:`finite_attributes` leaves such attributes out and warns, naming the
attribute and the file it came from (a netCDF attribute such as
``valid_max = inf`` is common in netCDF-C's own test files).

Kerchunk references keep them: fsspec and zarr read the references with Python's
``json``, which understands the bare tokens.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray
from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import NonFiniteAttributeWarning as NonFiniteAttributeWarning

__all__ = ["NonFiniteAttributeWarning", "finite_attributes", "without_non_finite_attributes"]


def _non_finite(value: Any) -> bool:
    if isinstance(value, float | np.floating):
        return not math.isfinite(value)
    if isinstance(value, complex | np.complexfloating):
        return not (math.isfinite(value.real) and math.isfinite(value.imag))
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            return not bool(np.isfinite(value).all())
        if value.dtype.kind == "O":
            return any(_non_finite(v) for v in value.ravel())
        return False
    if isinstance(value, list | tuple):
        return any(_non_finite(v) for v in value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    return False


def finite_attributes(
    attrs: Mapping[Any, Any], owner: str, source: str | Callable[[], str]
) -> dict[Any, Any]:
    """``attrs`` without the attributes whose values hold NaN or ±infinity, each left
    out with a :class:`NonFiniteAttributeWarning` naming it, ``owner`` (the variable or
    group) and ``source`` (the file it came from; a function is called only to warn)."""
    kept = {}
    for name, value in attrs.items():
        # A _FillValue is written in xarray's encoding (base64 for floats), never as JSON
        # numbers.
        if name != "_FillValue" and _non_finite(value):
            where = source if isinstance(source, str) else source()
            warnings.warn(
                NonFiniteAttributeWarning(
                    f"{where}: attribute {name!r} of {owner} ({value!r}) left out: "
                    "Icechunk stores hold no NaN or infinity in attributes"
                ),
                stacklevel=3,
            )
            continue
        kept[name] = value
    return kept


def _source_of(variables: Iterable[xr.Variable]) -> str:
    """The file the first referenced chunk of these variables is in."""
    for var in variables:
        if isinstance(var.data, ManifestArray):
            entries = upstream.manifest_entries(var.data.manifest)
            if entries is not None:
                paths = entries.paths[(entries.paths != "") & (entries.paths != INLINED_CHUNK_PATH)]
                if paths.size:
                    return str(paths.flat[0])
    return "the dataset"


def without_non_finite_attributes(ds: xr.Dataset, group: str = "") -> xr.Dataset:
    """``ds`` with :func:`finite_attributes` applied to its own and every variable's
    attributes (a shallow copy; the data is not touched)."""
    out = ds.copy(deep=False)
    for name, var in out.variables.items():
        var.attrs = finite_attributes(
            var.attrs, f"variable {name!r}", functools.partial(_source_of, [var])
        )
    where = f"group {group!r}" if group else "the root group"
    out.attrs = finite_attributes(ds.attrs, where, lambda: _source_of(ds.variables.values()))
    return out
