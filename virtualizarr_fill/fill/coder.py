"""The JSON encoding of the CF ``_FillValue`` attribute on Zarr v3 arrays.

xarray's Zarr backend reads the ``_FillValue`` attribute of a Zarr format 3 array
through its own coder (``xarray.backends.zarr.FillValueCoder``), and the zarr-extensions
``_FillValue`` attribute convention documents that encoding:

==========================  =================================================
data type kind              JSON form
==========================  =================================================
``b`` bool                  JSON ``true`` / ``false``
``i``/``u`` integers        JSON integer
``f`` float16/32/64         base64 of the little-endian IEEE-754 *float64*
``c`` complex64/128         ``[real, imag]``, each encoded like a float
``U``/``T`` strings         JSON string
``S`` bytes                 base64 of the bytes
==========================  =================================================

Structured, datetime, object and other data types are not covered and raise
``ValueError``. Examples: ``-9999`` as float32 is ``"AAAAAICHw8A="``, ``1.5`` is
``"AAAAAAAA+D8="``, NaN is ``"AAAAAAAA+H8="``.

The value is cast to the array's data type before encoding (see
:func:`virtualizarr_fill.fill.cast.cast_to_dtype`), so the encoded sentinel is exactly a
value the data can hold: ``-3.4e38`` for a float32 array encodes the float32 nearest to it.
This module is written for this package rather than imported from xarray because
xarray's coder is private API and does not cast.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

import numpy as np

from virtualizarr_fill.fill.cast import (
    FillScalar,
    NotRepresentableError,
    cast_to_dtype,
    normalize_dtype,
)

__all__ = ["JSON", "decode_fill_value", "encode_fill_value", "sentinel_from_attribute"]

#: A JSON value as Python sees it.
JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]

_FLOAT64_LE = struct.Struct("<d")


def _encode_float(value: float) -> str:
    return base64.standard_b64encode(_FLOAT64_LE.pack(float(value))).decode("ascii")


def _decode_float(text: Any, dtype: np.dtype[Any]) -> float:
    if isinstance(text, bool):
        raise ValueError(f"cannot decode {text!r} as a {dtype} fill value")
    if isinstance(text, int | float):
        # Not what xarray writes, but plain numbers are unambiguous.
        return float(text)
    if not isinstance(text, str | bytes):
        raise ValueError(
            f"cannot decode {text!r} as a {dtype} fill value: expected a base64 string"
        )
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"cannot decode {text!r} as a {dtype} fill value: not base64") from exc
    if len(raw) != _FLOAT64_LE.size:
        raise ValueError(
            f"cannot decode {text!r} as a {dtype} fill value: expected 8 bytes (a float64), "
            f"got {len(raw)}"
        )
    return float(_FLOAT64_LE.unpack(raw)[0])


def _check_kind(dtype: np.dtype[Any]) -> None:
    if dtype.kind not in "biufcUST":
        raise ValueError(
            f"the _FillValue attribute convention does not cover data type {dtype} "
            f"(kind {dtype.kind!r}): only bool, integer, float, complex, string and bytes types"
        )


def encode_fill_value(value: Any, dtype: Any) -> JSON:
    """Encode ``value`` as the JSON ``_FillValue`` attribute of an array of ``dtype``.

    ``value`` is first cast to ``dtype`` (out-of-range or mistyped values raise
    ``ValueError``), then encoded as in the module table. The result decodes with
    xarray's ``FillValueCoder`` to the same value.
    """
    dt = normalize_dtype(dtype)
    _check_kind(dt)
    try:
        scalar = cast_to_dtype(value, dt)
    except NotRepresentableError as exc:
        raise ValueError(f"cannot encode {value!r} as a {dt} fill value: {exc}") from exc
    if dt.kind == "b":
        return bool(scalar)
    if dt.kind in "iu":
        return int(scalar)  # type: ignore[call-overload]
    if dt.kind == "f":
        return _encode_float(float(scalar))  # type: ignore[arg-type]
    if dt.kind == "c":
        number = complex(scalar)  # type: ignore[arg-type]
        return [_encode_float(number.real), _encode_float(number.imag)]
    if dt.kind in "UT":
        return str(scalar)
    # kind "S"
    return base64.standard_b64encode(bytes(scalar)).decode("ascii")  # type: ignore[arg-type]


def decode_fill_value(value: JSON, dtype: Any) -> FillScalar:
    """Decode a JSON ``_FillValue`` attribute into a numpy scalar of ``dtype``.

    Accepts everything :func:`encode_fill_value` and xarray's ``FillValueCoder`` write
    (for floats also a plain JSON number). A value that is malformed or that the data
    type cannot represent raises ``ValueError``.
    """
    dt = normalize_dtype(dtype)
    _check_kind(dt)
    decoded: Any
    if dt.kind == "f":
        decoded = _decode_float(value, dt)
    elif dt.kind == "c":
        if not (isinstance(value, list | tuple) and len(value) == 2):
            raise ValueError(f"cannot decode {value!r} as a {dt} fill value: expected [real, imag]")
        decoded = complex(_decode_float(value[0], dt), _decode_float(value[1], dt))
    elif dt.kind == "S":
        if not isinstance(value, str):
            raise ValueError(
                f"cannot decode {value!r} as a {dt} fill value: expected a base64 string"
            )
        try:
            decoded = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"cannot decode {value!r} as a {dt} fill value: not base64") from exc
    elif dt.kind in "UT":
        if not isinstance(value, str):
            raise ValueError(f"cannot decode {value!r} as a {dt} fill value: expected a string")
        decoded = value
    else:
        # bool and integers: JSON bool / integer (an integral float is tolerated).
        if isinstance(value, str | list | dict) or value is None:
            raise ValueError(f"cannot decode {value!r} as a {dt} fill value")
        decoded = value
    try:
        return cast_to_dtype(decoded, dt)
    except NotRepresentableError as exc:
        raise ValueError(f"cannot decode {value!r} as a {dt} fill value: {exc}") from exc


def sentinel_from_attribute(value: Any, dtype: Any) -> FillScalar:
    """Read a ``_FillValue`` attribute whether it is still encoded or already decoded.

    Virtual variables carry the encoded JSON form; variables xarray opened carry the
    decoded Python value (xarray decodes ``_FillValue`` on open). Encoded text and lists
    go through :func:`decode_fill_value`; numbers, bytes and numpy values are cast to
    ``dtype``. Raises ``ValueError`` when neither works.
    """
    dt = normalize_dtype(dtype)
    if isinstance(value, np.ndarray | np.generic | bytes) or (
        isinstance(value, int | float | complex) and dt.kind not in "S"
    ):
        try:
            return cast_to_dtype(value, dt)
        except NotRepresentableError as exc:
            raise ValueError(f"cannot read {value!r} as a {dt} fill value: {exc}") from exc
    return decode_fill_value(value, dt)
