"""The CF attributes that change what a variable's stored numbers decode to, and the
rule that files combined into one virtual variable must agree on them.

A virtual variable has one set of attributes for all its files, so a combination can
keep one file's ``scale_factor`` (xarray's ``combine_attrs="override"``) or none
(``"drop_conflicts"``): either way the other files' numbers would be decoded wrong.
Files whose :data:`DECODING_ATTRIBUTES` or data type differ are refused with
:class:`EncodingConflictError`, one line naming the variable, the attribute, two files
and their values. ``_FillValue`` and ``missing_value`` have their own rule
(:mod:`.conflicts`), which can be relaxed; these cannot.

When two values are the same: an attribute missing from one file differs from any
value in the other; any attribute is the same when its values are equal as numbers
(``[0, 100]`` and ``[0.0, 100.0]``, ``0.5`` as a float32 and as a float64) or as text;
``scale_factor``, ``add_offset`` and ``_Unsigned`` that differ are still the same when
xarray decodes every stored value (a sample of them for types wider than 16 bits) to
the same numbers of the same data type with either file's (an ``add_offset`` of 0
written out or left out). ``0.01`` written as a float32 by one tool and as a float64
by another differ: they are different numbers, and xarray decodes them to different
values.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from virtualizarr_fill.errors import EncodingConflictError as EncodingConflictError

__all__ = [
    "DECODING_ATTRIBUTES",
    "EncodingConflictError",
    "PACKING_ATTRIBUTES",
    "encoding_conflict_message",
    "encoding_difference",
]

#: Attributes that pack stored numbers; compared by what xarray decodes with them.
PACKING_ATTRIBUTES = ("scale_factor", "add_offset", "_Unsigned")

#: Attributes whose values change what a variable's stored numbers mean (besides the
#: fill attributes): files combined into one variable must agree on each.
DECODING_ATTRIBUTES = (
    *PACKING_ATTRIBUTES,
    "valid_min",
    "valid_max",
    "valid_range",
    "units",
    "calendar",
    "flag_values",
    "flag_masks",
)

#: The text a message shows for an attribute a file does not have.
_ABSENT = "(none)"


def _probe(dtype: np.dtype[Any]) -> np.ndarray:
    """Stored values to decode: every value of a type of 16 bits or fewer, else a
    sample (the extremes, small numbers, and numbers spread over the range)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if dtype.itemsize <= 2:
            return np.arange(info.min, info.max + 1, dtype=np.int64).astype(dtype)
        spread = np.linspace(float(info.min), float(info.max), 1001)
        values = np.concatenate([[info.min, info.max, 0, 1, 2, 100, 12345], spread])
        return np.clip(values, info.min, info.max).astype(dtype)
    if dtype.kind == "f":
        largest = float(np.finfo(dtype).max)
        spread = np.linspace(-1e6, 1e6, 1001)
        values = np.concatenate([[0.0, 1.0, -1.0, 0.5, 3.25, largest / 1e4], spread])
        return values.astype(dtype)
    return np.zeros(1, dtype=dtype)


def _decoded(dtype: np.dtype[Any], attrs: Mapping[str, Any]) -> np.ndarray:
    import xarray as xr

    packing = {k: attrs[k] for k in PACKING_ATTRIBUTES if k in attrs}
    variable = xr.Variable(("probe",), _probe(dtype), packing)
    with warnings.catch_warnings():  # _Unsigned on a float type, say: xarray warns
        warnings.simplefilter("ignore")
        decoded = xr.conventions.decode_cf_variable(
            "probe", variable, mask_and_scale=True, decode_times=False
        )
    return np.asarray(decoded.values)


def _same_decoding(dtype: np.dtype[Any], a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    x, y = _decoded(dtype, a), _decoded(dtype, b)
    return x.dtype == y.dtype and bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype.kind in "biufc" and y.dtype.kind in "biufc":
            return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def encoding_difference(
    dtype: np.dtype[Any],
    first: Mapping[str, Any],
    other: Mapping[str, Any],
    *,
    time_units: bool = True,
) -> tuple[str, Any, Any] | None:
    """The first of :data:`DECODING_ATTRIBUTES` whose values in attributes ``first`` and
    ``other`` of a variable stored as ``dtype`` differ (see the module docstring), as
    ``(attribute, first's value, other's value)`` (a missing attribute as ``"(none)"``),
    or None where they agree. ``time_units=False`` leaves out ``units`` and ``calendar``
    of a variable in time units, for callers that decode such variables file by file."""
    compared: list[str] = list(DECODING_ATTRIBUTES)
    if not time_units and _is_time(first) and _is_time(other):
        compared = [k for k in compared if k not in ("units", "calendar")]
    differing = [
        key
        for key in compared
        if (key in first) != (key in other)
        or (key in first and not _same_value(first[key], other[key]))
    ]
    if not differing:
        return None
    packing = [k for k in differing if k in PACKING_ATTRIBUTES]
    if packing and len(packing) == len(differing) and _same_decoding(dtype, first, other):
        return None
    key = differing[0]
    return key, first.get(key, _ABSENT), other.get(key, _ABSENT)


def _is_time(attrs: Mapping[str, Any]) -> bool:
    units = attrs.get("units")
    return isinstance(units, str) and "since" in units


def encoding_conflict_message(
    variable: str | None,
    attribute: str,
    first: str,
    first_value: Any,
    other: str,
    other_value: Any,
) -> str:
    """The one-line refusal of files whose ``attribute`` of ``variable`` differs."""
    where = f"variable {variable!r}: " if variable else ""
    return (
        f"{where}{attribute} is {first_value!r} in {first} but {other_value!r} in "
        f"{other}: one virtual variable decodes all its files with one {attribute}, so "
        "some values would be read wrong; build the files with equal encoding into "
        "separate stores (or rewrite them with one encoding)"
    )
