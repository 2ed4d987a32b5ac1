"""Exact casts of fill values to an array's data type, and value equality for fills.

A fill value is only useful if it is a value of the array's data type: a sentinel that
cannot occur in the data masks nothing, and a silently wrapped or saturated integer masks
the wrong values. :func:`cast_to_dtype` therefore refuses integers out of range,
non-integral numbers for integer types, and finite numbers that overflow a float type.
Floats are rounded to the nearest value of the type (IEEE round-to-nearest), which is
what numpy, GDAL and the HDF5 library do when they convert a fill value.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from zarr.core.dtype import get_data_type_from_native_dtype

__all__ = [
    "FillScalar",
    "NotRepresentableError",
    "SUPPORTED_KINDS",
    "cast_to_dtype",
    "default_fill_value",
    "describe",
    "fill_values_equal",
    "is_string_kind",
    "normalize_dtype",
    "unwrap_scalar",
]

#: A fill value as returned by this package: a numpy scalar of the array's data type,
#: or ``str`` for numpy's variable-length ``StringDType`` (which has no numpy scalar type).
FillScalar = np.generic | str

#: numpy dtype kinds the ``_FillValue`` convention covers (bool, ints, floats, complex,
#: fixed-length unicode and bytes, and variable-length UTF-8 strings).
SUPPORTED_KINDS = frozenset("biufcUST")

# Zarr has float16/32/64 and complex64/128 only (no extended precision).
_MAX_ITEMSIZE = {"f": 8, "c": 16}


class NotRepresentableError(ValueError):
    """A value cannot be represented in the target data type (the message says why)."""


def normalize_dtype(dtype: Any) -> np.dtype[Any]:
    """``np.dtype(dtype)``, mapping h5py's variable-length string dtype to ``StringDType``.

    h5py describes variable-length strings as object dtype with a ``vlen`` marker; the
    Zarr array for them is a variable-length UTF-8 string array, i.e. numpy's
    ``StringDType``. Any other object dtype is ambiguous and refused.
    """
    dt = np.dtype(dtype)
    if dt.kind == "O":
        vlen = (dt.metadata or {}).get("vlen")
        if vlen in (str, bytes):
            return np.dtype(np.dtypes.StringDType())
        raise ValueError(
            f"object dtype {dt} is ambiguous for a fill value; pass the Zarr-facing data "
            "type (e.g. numpy.dtypes.StringDType() for variable-length strings)"
        )
    return dt


def is_string_kind(dtype: np.dtype[Any]) -> bool:
    """True for text and byte-string data types (``U``, ``S``, ``T`` kinds)."""
    return dtype.kind in "UST"


def default_fill_value(dtype: Any) -> FillScalar:
    """The Zarr default ``fill_value`` of ``dtype`` (0, 0.0, False, ``""``, ``b""``...).

    Taken from zarr's own data-type model so that it matches what zarr writes when no
    fill value is given.
    """
    return _default_fill_value(normalize_dtype(dtype))


@functools.lru_cache(maxsize=256)
def _default_fill_value(dtype: np.dtype[Any]) -> FillScalar:
    # zarr's data-type lookup walks its whole registry: once per dtype is enough;
    # numpy scalars are immutable, so sharing the result is safe.
    scalar: Any = get_data_type_from_native_dtype(dtype).default_scalar()
    return scalar


def unwrap_scalar(value: Any) -> Any:
    """Return the single element of a size-1 array (or list), else the value unchanged.

    HDF5 and netCDF attributes are one-element arrays more often than scalars.
    Raises :class:`NotRepresentableError` for arrays or lists with another size.
    """
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise NotRepresentableError(f"expected a single value, got {value.size} values")
        return value.reshape(-1)[0]
    if isinstance(value, list | tuple):
        if len(value) != 1:
            raise NotRepresentableError(f"expected a single value, got {len(value)} values")
        return value[0]
    return value


def _is_real_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, np.bool_
    )


def _to_int(value: Any) -> int:
    """The exact Python integer a real number stands for, or refuse it."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        if not math.isfinite(float(value)):
            raise NotRepresentableError(f"{value!r} is not a finite number")
        if not float(value).is_integer():
            raise NotRepresentableError(f"{value!r} is not an integer")
        return int(float(value))
    raise NotRepresentableError(f"expected a number, got {type(value).__name__}")


@functools.lru_cache(maxsize=16)
def _largest(dtype: np.dtype[Any]) -> float:
    return float(np.finfo(dtype).max)


def _to_float(value: Any, dtype: np.dtype[Any]) -> np.floating[Any]:
    """Round a real number to ``dtype``; a finite number that overflows is refused."""
    if not _is_real_number(value) and not isinstance(value, bool | np.bool_):
        raise NotRepresentableError(f"expected a number, got {type(value).__name__}")
    # Python ints and float64 go through float64, the way GDAL (CPLAtof) and the
    # HDF5 library convert; a float32 scalar converts exactly.
    source = float(value)
    if not math.isfinite(source) or abs(source) <= _largest(dtype):
        # Cannot overflow: skip np.errstate, which costs more than the cast.
        return dtype.type(source)  # type: ignore[no-any-return]
    with np.errstate(over="ignore"):
        result = dtype.type(source)  # may still round down to the largest value
    if not np.isfinite(result):
        raise NotRepresentableError(f"{value!r} is outside the range of {dtype}")
    return result  # type: ignore[no-any-return]


def cast_to_dtype(value: Any, dtype: Any) -> FillScalar:
    """Cast one fill value to a numpy scalar of ``dtype``, or refuse it.

    - bool: ``True``/``False`` (or the integers 0 and 1);
    - signed/unsigned integers: an integral number within the type's range;
    - floats: any real number, rounded to the type; finite numbers that overflow
      (e.g. 1e39 for float32) are refused;
    - complex: a complex or real number, each part handled like a float;
    - ``U``/``T`` strings: ``str`` (``bytes`` are decoded as UTF-8), no longer than a
      fixed-length type allows;
    - ``S`` bytes: ``bytes`` (``str`` is encoded as UTF-8), no longer than the type.

    Size-1 arrays are unwrapped. Raises :class:`NotRepresentableError` (a ``ValueError``)
    with the reason otherwise, and for data types the ``_FillValue`` convention does not
    cover.
    """
    dt = normalize_dtype(dtype)
    value = unwrap_scalar(value)
    kind = dt.kind
    if kind not in SUPPORTED_KINDS or (kind in "fc" and dt.itemsize > _MAX_ITEMSIZE[kind]):
        raise NotRepresentableError(f"fill values of data type {dt} are not supported")
    if kind == "b":
        if isinstance(value, bool | np.bool_):
            return np.bool_(bool(value))
        number = _to_int(value) if _is_real_number(value) else None
        if number in (0, 1):
            return np.bool_(bool(number))
        raise NotRepresentableError(f"{value!r} is not a boolean")
    if kind in "iu":
        if isinstance(value, str | bytes):
            raise NotRepresentableError(f"expected a number, got {type(value).__name__}")
        number = _to_int(value)
        info = np.iinfo(dt)
        if not info.min <= number <= info.max:
            raise NotRepresentableError(
                f"{number} is outside the range of {dt} [{info.min}, {info.max}]"
            )
        return dt.type(number)  # type: ignore[no-any-return]
    if kind == "f":
        return _to_float(value, dt)
    if kind == "c":
        if isinstance(value, complex | np.complexfloating):
            part_dtype = np.dtype(f"f{dt.itemsize // 2}")
            real = _to_float(float(value.real), part_dtype)
            imag = _to_float(float(value.imag), part_dtype)
            return dt.type(complex(float(real), float(imag)))  # type: ignore[no-any-return]
        part_dtype = np.dtype(f"f{dt.itemsize // 2}")
        return dt.type(float(_to_float(value, part_dtype)))  # type: ignore[no-any-return]
    if kind in "UT":
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise NotRepresentableError(f"{value!r} is not valid UTF-8") from exc
        if not isinstance(value, str):
            raise NotRepresentableError(f"expected a string, got {type(value).__name__}")
        if kind == "U" and dt.itemsize and len(value) > dt.itemsize // 4:
            raise NotRepresentableError(f"{value!r} is longer than {dt} allows")
        return str(value) if kind == "T" else np.str_(value)
    # kind == "S"
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, bytes):
        raise NotRepresentableError(f"expected bytes, got {type(value).__name__}")
    if dt.itemsize and len(value) > dt.itemsize:
        raise NotRepresentableError(f"{value!r} is longer than {dt} allows")
    return np.bytes_(value)


def fill_values_equal(a: Any, b: Any) -> bool:
    """Value equality for fill values: NaN equals NaN (per part for complex numbers).

    Numbers compare by exact value (``-9999`` equals ``-9999.0``; int64 extremes stay
    exact); strings and bytes by content, and a string never equals bytes. ``None``
    equals only ``None``.
    """
    if a is None or b is None:
        return a is None and b is None
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    if isinstance(a, str | bytes) or isinstance(b, str | bytes):
        return type(a) is type(b) and a == b
    if isinstance(a, complex) or isinstance(b, complex):
        ca, cb = complex(a), complex(b)
        return _parts_equal(ca.real, cb.real) and _parts_equal(ca.imag, cb.imag)
    if isinstance(a, float) and isinstance(b, float):
        return _parts_equal(a, b)
    # Python compares ints and floats exactly (no rounding of large integers).
    return bool(a == b)


def _parts_equal(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


def describe(value: Any) -> str:
    """A short human-readable form of a fill value for messages (``-9999.0``, ``nan``)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return repr(value)
    return repr(value) if isinstance(value, str | bytes) else str(value)
