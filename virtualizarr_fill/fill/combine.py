"""Fill values of arrays that are concatenated into one virtual array.

A virtual store cannot rewrite data, so a concatenation keeps one Zarr ``fill_value``
and one set of CF sentinels for chunks that came from different files. When the files
agree (compared by decoded value, NaN equal to NaN) the combination keeps their values.
When they differ, any single choice leaves some file's missing data unmasked, or masks
valid data: :func:`combine_fill_values` refuses by default and combines only when the
caller explicitly chooses how (``on_conflict``):

- ``"error"`` (default): raise :class:`~virtualizarr_fill.errors.IncompatibleArraysError`
  naming the files and their values;
- ``"use_first"``: keep the first array's value of each field that differs;
- ``"drop"``: the merge rule Iris uses, a differing Zarr ``fill_value`` becomes the data
  type's default and differing ``_FillValue`` / ``missing_value`` attributes are removed
  (nothing is masked by them).

The three fields (Zarr ``fill_value``, ``_FillValue``, ``missing_value``) are compared and
resolved independently. The sentinels the combination no longer masks are listed in
:attr:`CombinedFill.unmasked_sentinels`; pass them to
:func:`virtualizarr_fill.fill.collisions.check_fill_collisions` to find out whether the
data contain them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from virtualizarr_fill.errors import FillConflictError as FillConflictError
from virtualizarr_fill.errors import FillValueError, IncompatibleArraysError
from virtualizarr_fill.fill.cast import (
    SUPPORTED_KINDS,
    FillScalar,
    NotRepresentableError,
    cast_to_dtype,
    default_fill_value,
    describe,
    fill_values_equal,
    normalize_dtype,
)
from virtualizarr_fill.fill.coder import encode_fill_value, sentinel_from_attribute
from virtualizarr_fill.fill.decision import (
    FILL_VALUE_ATTR,
    MISSING_VALUE_ATTR,
    FillDecision,
    FillValueWarning,
)

__all__ = [
    "CombinedFill",
    "FillConflictError",
    "OnConflict",
    "combine_fill_decisions",
    "combine_fill_values",
]

#: How to combine arrays whose fill information differs (see the module docstring).
OnConflict = Literal["error", "use_first", "drop"]
_ON_CONFLICT = ("error", "use_first", "drop")
# At most this many file names per value in an error message.
_MAX_NAMED = 3


@dataclass(frozen=True)
class CombinedFill:
    """Fill information of a concatenation.

    Attributes
    ----------
    fill_value
        The Zarr ``fill_value`` of the combined array.
    attributes
        The first array's attributes with ``_FillValue`` (encoded) and ``missing_value``
        (plain numbers) set to the combined values, or removed when there are none.
    unmasked_sentinels
        Values that some input treated as missing and the combination does not mask
        (empty when all inputs agree).
    notes
        Human-readable decisions.
    """

    fill_value: FillScalar
    attributes: dict[str, Any]
    unmasked_sentinels: tuple[FillScalar, ...] = ()
    notes: tuple[str, ...] = ()


def _zarr_fill(value: Any, dtype: np.dtype[Any], src: str) -> FillScalar:
    if dtype.kind not in SUPPORTED_KINDS:
        # compound, datetime...: no CF sentinel, the Zarr fill_value is compared as stored
        stored: Any = np.asarray(value).astype(dtype).reshape(-1)[0]
        return stored  # type: ignore[no-any-return]
    try:
        return cast_to_dtype(value, dtype)
    except NotRepresentableError as exc:
        raise FillValueError(f"{src}: fill_value {value!r} is not a {dtype}: {exc}") from exc


def _read_sentinel(attrs: Mapping[str, Any], dtype: np.dtype[Any], src: str) -> FillScalar | None:
    if attrs.get(FILL_VALUE_ATTR) is None:
        return None
    try:
        return sentinel_from_attribute(attrs[FILL_VALUE_ATTR], dtype)
    except ValueError as exc:
        raise FillValueError(f"{src}: unreadable _FillValue attribute: {exc}") from exc


def _read_missing(
    attrs: Mapping[str, Any], dtype: np.dtype[Any], src: str
) -> tuple[FillScalar, ...]:
    raw = attrs.get(MISSING_VALUE_ATTR)
    if raw is None:
        return ()
    elements = list(np.ravel(raw)) if isinstance(raw, list | tuple | np.ndarray) else [raw]
    try:
        return tuple(cast_to_dtype(element, dtype) for element in elements)
    except NotRepresentableError as exc:
        raise FillValueError(f"{src}: unreadable missing_value attribute: {exc}") from exc


def _same_set(a: tuple[FillScalar, ...], b: tuple[FillScalar, ...]) -> bool:
    """Order- and duplicate-insensitive equality of value tuples (NaN equals NaN)."""
    return all(any(fill_values_equal(x, y) for y in b) for x in a) and all(
        any(fill_values_equal(x, y) for x in a) for y in b
    )


def _distinct(values: Sequence[Any], same: Any) -> list[tuple[Any, list[int]]]:
    """Group input indices by value, in first-seen order."""
    groups: list[tuple[Any, list[int]]] = []
    for index, value in enumerate(values):
        for group_value, members in groups:
            if same(group_value, value):
                members.append(index)
                break
        else:
            groups.append((value, [index]))
    return groups


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "none" if not value else "[" + ", ".join(describe(v) for v in value) + "]"
    return describe(value)


def _listing(groups: list[tuple[Any, list[int]]], sources: Sequence[str]) -> str:
    parts = []
    for value, members in groups:
        named = ", ".join(sources[i] for i in members[:_MAX_NAMED])
        more = f" and {len(members) - _MAX_NAMED} more" if len(members) > _MAX_NAMED else ""
        parts.append(f"{_show(value)} in {named}{more}")
    return "; ".join(parts)


def combine_fill_values(
    fill_values: Sequence[Any],
    attributes: Sequence[Mapping[str, Any]],
    sources: Sequence[str],
    dtype: Any,
    *,
    on_conflict: OnConflict = "error",
    name: str | None = None,
) -> CombinedFill:
    """Combine the fill information of arrays that are concatenated into one.

    Parameters
    ----------
    fill_values
        The Zarr ``fill_value`` of each input array.
    attributes
        The attributes of each input array; ``_FillValue`` may be encoded (as stored) or
        decoded (as xarray presents it), ``missing_value`` a number or a list.
    sources
        The file each input came from, named in messages.
    dtype
        The data type the arrays share.
    on_conflict
        ``"error"`` (default), ``"use_first"`` or ``"drop"``: see the module docstring.
        Any choice other than ``"error"`` must come from the user, since it changes which
        values read as missing.
    name
        The variable's name, used in messages.

    Raises
    ------
    FillConflictError
        The inputs differ and ``on_conflict="error"`` (an ``IncompatibleArraysError``).
    """
    if not (len(fill_values) == len(attributes) == len(sources)):
        raise ValueError("fill_values, attributes and sources must have the same length")
    if not fill_values:
        raise ValueError("nothing to combine")
    if on_conflict not in _ON_CONFLICT:
        raise ValueError(f"on_conflict must be one of {_ON_CONFLICT}, got {on_conflict!r}")
    dt = normalize_dtype(dtype)
    what = f"variable {name!r}" if name else "arrays"

    fills = [_zarr_fill(value, dt, src) for value, src in zip(fill_values, sources, strict=True)]
    sentinels = [_read_sentinel(a, dt, s) for a, s in zip(attributes, sources, strict=True)]
    missing = [_read_missing(a, dt, s) for a, s in zip(attributes, sources, strict=True)]

    fill_groups = _distinct(fills, fill_values_equal)
    sentinel_groups = _distinct(sentinels, fill_values_equal)
    missing_groups = _distinct(missing, _same_set)
    conflicts = [
        (label, groups)
        for label, groups in (
            ("Zarr fill_value", fill_groups),
            ("_FillValue", sentinel_groups),
            ("missing_value", missing_groups),
        )
        if len(groups) > 1
    ]
    if conflicts and on_conflict == "error":
        details = ". ".join(f"{label} differs: {_listing(g, sources)}" for label, g in conflicts)
        raise FillConflictError(
            f"cannot concatenate {what}: {details}. A virtual store cannot rewrite data, so a "
            "single value would leave other files' missing data unmasked (or mask valid "
            "data)",
            "Pass on_conflict='use_first' or on_conflict='drop' to combine anyway.",
        )

    notes: list[str] = []
    fill_value = fills[0]
    sentinel = sentinels[0]
    missing_out = missing[0]
    if len(fill_groups) > 1 and on_conflict == "drop":
        fill_value = default_fill_value(dt)
    if len(sentinel_groups) > 1 and on_conflict == "drop":
        sentinel = None
    if len(missing_groups) > 1 and on_conflict == "drop":
        missing_out = ()
    for label, groups in conflicts:
        kept = {
            "Zarr fill_value": fill_value,
            "_FillValue": sentinel,
            "missing_value": missing_out,
        }[label]
        notes.append(
            f"{label} differs ({_listing(groups, sources)}); on_conflict={on_conflict!r} "
            f"keeps {_show(kept)}"
        )

    masked = ([sentinel] if sentinel is not None else []) + list(missing_out)
    candidates = [s for s in sentinels if s is not None] + [v for m in missing for v in m]
    unmasked: list[FillScalar] = []
    for value in candidates:
        seen = masked + unmasked
        if not any(fill_values_equal(value, other) for other in seen):
            unmasked.append(value)
    if conflicts:
        warnings.warn(
            f"concatenating {what} with differing fill information "
            f"(on_conflict={on_conflict!r}): "
            + "; ".join(notes[-len(conflicts) :])
            + (f". Values no longer masked: {_show(tuple(unmasked))}" if unmasked else ""),
            FillValueWarning,
            stacklevel=2,
        )
    else:
        notes.append(f"all {len(fills)} inputs agree on the fill information")

    out = dict(attributes[0])
    out.pop(FILL_VALUE_ATTR, None)
    out.pop(MISSING_VALUE_ATTR, None)
    if sentinel is not None:
        out[FILL_VALUE_ATTR] = encode_fill_value(sentinel, dt)
    if missing_out:
        numbers = [v.item() if isinstance(v, np.generic) else v for v in missing_out]
        original = attributes[0].get(MISSING_VALUE_ATTR)
        scalar = len(numbers) == 1 and not isinstance(original, list | tuple | np.ndarray)
        out[MISSING_VALUE_ATTR] = numbers[0] if scalar else numbers
    return CombinedFill(
        fill_value=fill_value,
        attributes=out,
        unmasked_sentinels=tuple(unmasked),
        notes=tuple(notes),
    )


def combine_fill_decisions(
    decisions: Sequence[FillDecision],
    sources: Sequence[str],
    *,
    on_conflict: OnConflict = "error",
    name: str | None = None,
) -> CombinedFill:
    """:func:`combine_fill_values` for the :class:`FillDecision` of each input."""
    if not decisions:
        raise ValueError("nothing to combine")
    # Byte order does not matter here: fill values are compared as values.
    if len({normalize_dtype(d.dtype).name for d in decisions}) > 1:
        listing = ", ".join(f"{s}: {d.dtype}" for s, d in zip(sources, decisions, strict=True))
        what = f"variable {name!r}" if name else "arrays"
        raise IncompatibleArraysError(
            f"cannot concatenate {what} of different data types: {listing}"
        )
    return combine_fill_values(
        [d.fill_value for d in decisions],
        [d.attributes for d in decisions],
        sources,
        decisions[0].dtype,
        on_conflict=on_conflict,
        name=name,
    )
