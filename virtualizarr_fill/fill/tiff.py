"""TIFF/GeoTIFF fill policy: GDAL's string fill information -> Zarr ``fill_value`` + CF attributes.

GeoTIFF carries fill information only as text, often in several places at once (files
converted from netCDF by GDAL repeat it):

- the ``GDAL_NODATA`` tag (42113), one value for every band, e.g. ``"-9999"``;
- ``GDAL_METADATA`` (42112) dataset items ``_FillValue`` and ``missing_value``, and
  per-variable copies ``<var>#_FillValue`` / ``<var>#missing_value``;
- ``GDAL_METADATA`` band items (``sample="N"``) named ``_FillValue``, ``missing_value``
  or ``NODATA``.

:func:`consolidate_tiff_fill` parses them (MSVC spellings such as ``-1.#INF`` and
``1.#QNAN`` included), casts them to the array's data type the way GDAL does (text ->
float64 -> data type, so ``"-3.4e+38"`` becomes the float32 GDAL masks with), warns when
they disagree, and picks one by priority: ``GDAL_NODATA`` > band ``NODATA`` >
``_FillValue`` > ``missing_value`` (within a name: dataset item, then the band's variable's
``<var>#`` item, then band items). The winner is both the Zarr ``fill_value`` and the
encoded ``_FillValue`` attribute. See docs/fill-values.md.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

import numpy as np

from virtualizarr_fill.errors import FillValueError
from virtualizarr_fill.fill.cast import (
    FillScalar,
    NotRepresentableError,
    cast_to_dtype,
    default_fill_value,
    describe,
    fill_values_equal,
    normalize_dtype,
)
from virtualizarr_fill.fill.coder import encode_fill_value
from virtualizarr_fill.fill.decision import (
    FILL_VALUE_ATTR,
    MISSING_VALUE_ATTR,
    FillDecision,
    FillValueWarning,
)

__all__ = [
    "BAND_NODATA_ITEM",
    "GDAL_NODATA_ATTR",
    "NETCDF_VARNAME_ITEM",
    "consolidate_tiff_fill",
    "parse_gdal_number",
]

#: Attribute key under which the TIFF parser passes the raw GDAL_NODATA (42113) string;
#: the string is kept under this key in the output attributes.
GDAL_NODATA_ATTR = "gdal_no_data"
#: Band-level GDAL_METADATA item name (compared case-insensitively) treated as nodata.
BAND_NODATA_ITEM = "NODATA"
#: GDAL's netCDF driver names the band's source variable with this item.
NETCDF_VARNAME_ITEM = "NETCDF_VARNAME"

_NODATA_LABEL = "GDAL_NODATA (tag 42113)"
_METADATA_LABEL = "GDAL_METADATA (tag 42112)"

# Old MSVC runtimes print infinities and NaNs as 1.#INF, -1.#IND, 1.#QNAN (sometimes with
# trailing zeros, e.g. "1.#INF00"); GDAL files written on Windows carry these spellings.
_MSVC_SPECIAL = re.compile(r"^([+-]?)1\.#(INF|QNAN|SNAN|IND)0*$", re.IGNORECASE)
_PREFIXED_FILL = re.compile(r"^(?P<var>.+)#(?P<name>_FillValue|missing_value)$")


def _prefixed_fill(key: str) -> re.Match[str] | None:
    """``<var>#_FillValue`` / ``<var>#missing_value`` item names."""
    # Every match holds a "#": most names (files carry hundreds) skip the regex.
    return _PREFIXED_FILL.match(key) if "#" in key else None


class _Role(IntEnum):
    """Source kinds in priority order (lower wins)."""

    NODATA_TAG = 0
    BAND_NODATA = 1
    FILL_VALUE = 2
    MISSING_VALUE = 3


@dataclass(frozen=True)
class _Source:
    label: str
    role: _Role
    raw: Any


@dataclass(frozen=True)
class _Parsed:
    source: _Source
    value: FillScalar


def parse_gdal_number(text: str, dtype: Any) -> FillScalar:
    """Parse GDAL fill text (``"-9999"``, ``"nan"``, ``"-1.#INF"``...) as ``dtype``.

    Conversion follows GDAL: integer types parse the integer text exactly (so 64-bit
    extremes survive), otherwise text -> float64 -> ``dtype`` with round-to-nearest.
    Raises :class:`~virtualizarr_fill.fill.cast.NotRepresentableError` for text that is
    not a number or a number the type cannot hold.
    """
    dt = normalize_dtype(dtype)
    cleaned = text.strip().strip("\x00").strip()
    match = _MSVC_SPECIAL.match(cleaned)
    if match:
        sign, word = match.groups()
        cleaned = f"{sign}inf" if word.upper() == "INF" else f"{sign}nan"
    if not cleaned or "_" in cleaned:
        # Python's int()/float() accept digit separators; C's strtod does not.
        raise NotRepresentableError(f"{text!r} is not a number")
    number: int | float
    try:
        number = int(cleaned) if dt.kind in "iu" else float(cleaned)
    except ValueError:
        try:
            number = float(cleaned)
        except ValueError as exc:
            raise NotRepresentableError(f"{text!r} is not a number") from exc
    return cast_to_dtype(number, dt)


def _parse_source(raw: Any, dtype: np.dtype[Any]) -> FillScalar:
    if isinstance(raw, str):
        return parse_gdal_number(raw, dtype)
    if isinstance(raw, bytes):
        return parse_gdal_number(raw.decode("ascii", errors="replace"), dtype)
    if isinstance(raw, int | float | np.integer | np.floating) and not isinstance(
        raw, bool | np.bool_
    ):
        return cast_to_dtype(raw, dtype)
    raise NotRepresentableError(f"expected text or a number, got {type(raw).__name__}")


def _band_variable(
    attributes: Mapping[str, Any], band_items: Sequence[Mapping[str, Any]]
) -> tuple[str | None, str]:
    """The netCDF variable the bands came from, and how it was determined."""
    declared = {
        name
        for name in [attributes.get(NETCDF_VARNAME_ITEM)]
        + [items.get(NETCDF_VARNAME_ITEM) for items in band_items]
        if isinstance(name, str) and name
    }
    if len(declared) == 1:
        return declared.pop(), NETCDF_VARNAME_ITEM
    if declared:
        return None, "bands name different variables"
    prefixes = {m.group("var") for key in attributes if (m := _prefixed_fill(key))}
    if len(prefixes) == 1:
        return prefixes.pop(), "the only variable with prefixed fill items"
    return None, ""


def _collect_sources(
    attributes: Mapping[str, Any],
    band_items: Sequence[Mapping[str, Any]],
    variable: str | None,
) -> list[_Source]:
    sources: list[_Source] = []
    if attributes.get(GDAL_NODATA_ATTR) is not None:
        sources.append(_Source(_NODATA_LABEL, _Role.NODATA_TAG, attributes[GDAL_NODATA_ATTR]))
    for index, items in enumerate(band_items):
        for name, raw in items.items():
            if name.upper() == BAND_NODATA_ITEM and raw is not None:
                label = f"{_METADATA_LABEL} sample {index} {name}"
                sources.append(_Source(label, _Role.BAND_NODATA, raw))
    for name, role in (
        (FILL_VALUE_ATTR, _Role.FILL_VALUE),
        (MISSING_VALUE_ATTR, _Role.MISSING_VALUE),
    ):
        if attributes.get(name) is not None:
            sources.append(_Source(f"{_METADATA_LABEL} {name}", role, attributes[name]))
        prefixed = f"{variable}#{name}"
        if variable is not None and attributes.get(prefixed) is not None:
            sources.append(_Source(f"{_METADATA_LABEL} {prefixed}", role, attributes[prefixed]))
        for index, items in enumerate(band_items):
            if items.get(name) is not None:
                label = f"{_METADATA_LABEL} sample {index} {name}"
                sources.append(_Source(label, role, items[name]))
    return sources


def _json_number(value: FillScalar) -> int | float | complex:
    """A fill scalar as a plain Python number for a JSON attribute."""
    item = value.item() if isinstance(value, np.generic) else value
    if isinstance(item, int | float | complex):
        return item
    raise TypeError(f"{value!r} is not a number")  # pragma: no cover - numeric dtypes only


def consolidate_tiff_fill(
    attributes: Mapping[str, Any],
    dtype: Any,
    *,
    source: str,
    on_out_of_range: Literal["raise", "warn"] = "raise",
    band_items: Sequence[Mapping[str, Any]] = (),
    warned: list[str] | None = None,
) -> FillDecision:
    """Consolidate a TIFF's fill information into a Zarr ``fill_value`` and CF attributes.

    Parameters
    ----------
    attributes
        The array's attributes as the TIFF parser extracted them: the raw GDAL_NODATA
        (42113) text under ``"gdal_no_data"`` and the GDAL_METADATA (42112) dataset items
        (those without a ``sample`` attribute) under their names (``_FillValue``,
        ``missing_value``, ``<var>#_FillValue``, ``NETCDF_VARNAME``...). Other keys pass
        through unchanged.
    dtype
        The array's data type.
    source
        The file (path or URL) named in warnings and errors.
    on_out_of_range
        What to do with a fill value the data type cannot hold (e.g. GDAL_NODATA
        ``-10000`` on uint8, or text that is not a number): ``"raise"`` (default) raises
        :class:`~virtualizarr_fill.errors.FillValueError` naming the file, the tag, the
        value and the data type; ``"warn"`` warns and ignores that value, so the file
        stays readable (GDAL masks nothing with such a value either).
    band_items
        Band-level GDAL_METADATA items, one mapping per band in ``sample`` order
        (``band_items[0]`` holds the items with ``sample="0"``). Items named
        ``_FillValue``, ``missing_value`` and ``NODATA`` (any case) are fill sources; the
        parser should not copy them onto the array's attributes itself, the decision's
        attributes already carry the consolidated values.
    warned
        When given, the message of every warning issued is appended to it (callers that
        reuse decisions reuse only those issued without warnings).

    Returns
    -------
    FillDecision
        ``fill_value`` is the winning value (the data type's default when there is none);
        ``attributes`` holds ``_FillValue`` encoded for xarray (only when there is a
        winner), ``missing_value`` as a plain number, the raw ``gdal_no_data`` text, and
        the ``<var>#`` items that differ from the consolidated values.
    """
    dt = normalize_dtype(dtype)
    notes: list[str] = []
    variable, how = _band_variable(attributes, band_items)
    own_prefixed = [
        key
        for key in attributes
        if (m := _prefixed_fill(key)) and variable is not None and m["var"] == variable
    ]
    if own_prefixed:
        notes.append(f"prefixed fill items of variable {variable!r} used ({how})")

    parsed: list[_Parsed] = []
    for src in _collect_sources(attributes, band_items, variable):
        try:
            parsed.append(_Parsed(src, _parse_source(src.raw, dt)))
        except NotRepresentableError as exc:
            message = (
                f"{source}: {src.label} value {src.raw!r} cannot be represented as {dt}: {exc}"
            )
            if on_out_of_range == "raise":
                raise FillValueError(message) from exc
            _warn(f"{message}; the value is ignored and masks nothing", warned)
            notes.append(f"{src.label} {src.raw!r} ignored: not representable as {dt}")

    winner = parsed[0] if parsed else None
    if winner is not None and any(not fill_values_equal(p.value, winner.value) for p in parsed):
        listing = ", ".join(f"{p.source.label} = {p.source.raw!r}" for p in parsed)
        _warn(
            f"{source}: fill information disagrees ({listing}); using "
            f"{describe(winner.value)} from {winner.source.label} as fill_value and _FillValue",
            warned,
        )

    out = dict(attributes)
    if winner is None:
        fill_value = default_fill_value(dt)
        out.pop(FILL_VALUE_ATTR, None)
        notes.insert(
            0,
            f"no usable fill information; fill_value is the {_dtype_name(dt)} default "
            f"{describe(fill_value)} and no _FillValue is written",
        )
    else:
        fill_value = winner.value
        out[FILL_VALUE_ATTR] = encode_fill_value(winner.value, dt)
        summary = [f"fill_value {describe(winner.value)} from {winner.source.label}"]
        for p in parsed[1:]:
            if fill_values_equal(p.value, winner.value):
                summary.append(f"{p.source.label} agrees")
            else:
                summary.append(f"{p.source.label} {p.source.raw!r} disagrees")
        notes.insert(0, "; ".join(summary))

    missing = next((p for p in parsed if p.source.role is _Role.MISSING_VALUE), None)
    missing_out: FillScalar | None = None
    if missing is None:
        out.pop(MISSING_VALUE_ATTR, None)
    elif not _json_storable(missing.value):
        # JSON has no NaN/Infinity/complex (Icechunk rejects such attributes); a NaN
        # missing_value masks nothing in xarray anyway.
        out.pop(MISSING_VALUE_ATTR, None)
        covered = winner is not None and fill_values_equal(missing.value, winner.value)
        if not covered and not np.isnan(missing.value):
            _warn(
                f"{source}: {missing.source.label} {missing.source.raw!r} cannot be stored as "
                "a JSON attribute; values equal to it will not be masked",
                warned,
            )
        notes.append(f"missing_value {describe(missing.value)} omitted (not a finite real)")
    else:
        missing_out = missing.value
        out[MISSING_VALUE_ATTR] = _json_number(missing.value)
        notes.append(f"missing_value {describe(missing.value)} from {missing.source.label}")

    _drop_redundant_prefixed(out, dt, winner.value if winner else None, missing_out, notes)
    return FillDecision(fill_value=fill_value, attributes=out, dtype=dt, notes=tuple(notes))


def _warn(message: str, warned: list[str] | None) -> None:
    # stacklevel 3: the warning names consolidate_tiff_fill's caller.
    warnings.warn(message, FillValueWarning, stacklevel=3)
    if warned is not None:
        warned.append(message)


@functools.lru_cache(maxsize=64)
def _dtype_name(dtype: np.dtype[Any]) -> str:
    # NumPy builds a dtype's name anew on every str(); every parse notes it once.
    return str(dtype)


def _drop_redundant_prefixed(
    out: dict[str, Any],
    dtype: np.dtype[Any],
    fill: FillScalar | None,
    missing: FillScalar | None,
    notes: list[str],
) -> None:
    """Remove ``<var>#_FillValue`` / ``<var>#missing_value`` items equal to the result."""
    for key in list(out):
        match = _prefixed_fill(key)
        if not match:
            continue
        target = fill if match.group("name") == FILL_VALUE_ATTR else missing
        if target is None:
            continue
        try:
            value = _parse_source(out[key], dtype)
        except NotRepresentableError:
            continue
        if fill_values_equal(value, target):
            del out[key]
            notes.append(f"{key} removed: same as {match.group('name')}")


def _json_storable(value: FillScalar) -> bool:
    """True for values a strict JSON attribute can hold as a plain number."""
    if isinstance(value, np.complexfloating):
        return False
    if isinstance(value, np.floating):
        return bool(np.isfinite(value))
    return True
