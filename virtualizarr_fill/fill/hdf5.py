"""HDF5/netCDF-4 fill policy: header fill value -> Zarr ``fill_value``; attributes -> CF sentinels.

An HDF5 dataset has a typed fill value in its object header (the fill-value message):
the HDF5 library returns it for every element of an unallocated chunk. CF attributes
``_FillValue`` and ``missing_value`` are separate, and may differ from it (and from the
dataset's type). The Zarr ``fill_value`` plays the header's role (what missing chunks read
as), so it comes from the header and never from the attribute; the attributes become the
CF sentinels xarray masks with. See docs/fill-values.md.

Obtaining ``header_fill`` with h5py (what :func:`consolidate_hdf5_fill` expects; this is
:func:`header_fill_from_h5py`)::

    from h5py import h5d

    plist = dset.id.get_create_plist()
    if plist.fill_value_defined() == h5d.FILL_VALUE_UNDEFINED:
        header_fill = None  # no fill value: unallocated space is undefined
    else:
        header_fill = dset.fillvalue  # FILL_VALUE_DEFAULT (zeros) or FILL_VALUE_USER_DEFINED

``fill_value_defined()`` tells a user-defined fill (``h5d.FILL_VALUE_USER_DEFINED``, what
netCDF-C and ``create_dataset(..., fillvalue=...)`` write) from the library default
(``h5d.FILL_VALUE_DEFAULT``, zeros) and from none at all (``h5d.FILL_VALUE_UNDEFINED``,
files written with ``H5Pset_fill_value(NULL)``). ``dset.fillvalue`` returns the value in
the dataset's type in the first two cases (for variable-length strings it returns
``bytes``; this function decodes them as UTF-8).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal

import h5py
import numpy as np
from h5py import h5d

from virtualizarr_fill.errors import FillValueError
from virtualizarr_fill.fill.cast import (
    SUPPORTED_KINDS,
    FillScalar,
    NotRepresentableError,
    cast_to_dtype,
    default_fill_value,
    describe,
    fill_values_equal,
    is_string_kind,
    normalize_dtype,
)
from virtualizarr_fill.fill.coder import encode_fill_value
from virtualizarr_fill.fill.decision import (
    FILL_VALUE_ATTR,
    MISSING_VALUE_ATTR,
    FillDecision,
    FillValueWarning,
)

__all__ = ["consolidate_hdf5_fill", "header_fill_from_h5py"]

_UNSIGNED_ATTR = "_Unsigned"


def header_fill_from_h5py(dset: h5py.Dataset) -> Any | None:
    """The header fill value of an h5py dataset, or ``None`` when the header defines none.

    Reads only the dataset creation property list (already in memory once the dataset
    is open): no data is read.
    """
    plist = dset.id.get_create_plist()
    if plist.fill_value_defined() == h5d.FILL_VALUE_UNDEFINED:
        return None
    return dset.fillvalue


def _unsigned_reinterpretation(value: Any, dtype: np.dtype[Any], flag: Any) -> FillScalar | None:
    """Reinterpret a sentinel written for the other signedness (netCDF ``_Unsigned``).

    With ``_Unsigned = "true"`` on a signed integer variable, a sentinel such as 255 on an
    int8 variable stands for the bit pattern -1; the attribute must be stored in the
    variable's own type for xarray's unsigned decoding to apply.
    """
    if dtype.kind not in "iu" or not isinstance(flag, str | bytes | np.bytes_ | np.str_):
        return None
    if isinstance(flag, bytes):
        flag = flag.decode("ascii", errors="replace")
    if str(flag).lower() not in ("true", "false"):
        return None
    other = np.dtype(f"{'u' if dtype.kind == 'i' else 'i'}{dtype.itemsize}")
    try:
        as_other = cast_to_dtype(value, other)
    except NotRepresentableError:
        return None
    wrapped: Any = np.array(as_other, dtype=other).view(dtype)[()]
    return wrapped


def _header_fill_value(
    header_fill: Any, dtype: np.dtype[Any], *, where: str, notes: list[str]
) -> FillScalar:
    if header_fill is None:
        value = default_fill_value(dtype)
        notes.append(
            f"fill_value {describe(value)}: no fill value defined in the HDF5 header "
            f"(the {dtype} default)"
        )
        return value
    try:
        value = cast_to_dtype(header_fill, dtype)
    except NotRepresentableError as exc:
        raise FillValueError(
            f"{where}: HDF5 header fill value {header_fill!r} cannot be represented as "
            f"{dtype}: {exc}"
        ) from exc
    notes.append(f"fill_value {describe(value)} from the HDF5 header fill value")
    return value


def _uncovered_dtype(
    header_fill: Any, dtype: np.dtype[Any], out: dict[str, Any], notes: list[str]
) -> FillDecision:
    """Compound, datetime and other types: the header fill only, no CF sentinels.

    The ``_FillValue`` convention has no encoding for them, so any ``_FillValue`` or
    ``missing_value`` attribute is dropped (xarray would fail to decode it).
    """
    if header_fill is None:
        fill_value: FillScalar = default_fill_value(dtype)
        notes.append(f"fill_value: no fill value defined in the HDF5 header ({dtype} default)")
    else:
        fill_value = np.asarray(header_fill).astype(dtype).reshape(-1)[0]
        notes.append("fill_value from the HDF5 header fill value")
    for name in (FILL_VALUE_ATTR, MISSING_VALUE_ATTR):
        if name in out:
            del out[name]
            notes.append(f"{name} dropped: the _FillValue convention does not cover {dtype}")
    return FillDecision(fill_value=fill_value, attributes=out, dtype=dtype, notes=tuple(notes))


def _missing_values(raw: Any) -> tuple[list[Any], bool]:
    """Elements of a ``missing_value`` attribute, and whether it is a scalar."""
    if isinstance(raw, np.ndarray):
        flat = list(raw.reshape(-1))
        return flat, raw.size == 1
    if isinstance(raw, list | tuple):
        return list(raw), len(raw) == 1
    return [raw], True


def consolidate_hdf5_fill(
    header_fill: Any | None,
    attributes: Mapping[str, Any],
    dtype: Any,
    *,
    source: str,
    on_out_of_range: Literal["warn", "raise"] = "warn",
    has_unallocated_chunks: bool = False,
    dataset: str | None = None,
) -> FillDecision:
    """Consolidate an HDF5 dataset's fill information into a Zarr ``fill_value`` and CF attributes.

    Parameters
    ----------
    header_fill
        The fill value from the dataset's object header, in the dataset's type, or
        ``None`` when the header defines none (see the module docstring for how to get it
        with h5py). It becomes the Zarr ``fill_value`` unchanged; ``None`` gives the data
        type's default.
    attributes
        The dataset's attributes as read (numpy scalars and arrays are fine). Only
        ``_FillValue`` and ``missing_value`` are rewritten; other keys pass through.
    dtype
        The dataset's data type (h5py's variable-length string dtype is accepted and
        treated as ``numpy.dtypes.StringDType``).
    source
        The file (path or URL) named in warnings and errors.
    on_out_of_range
        A ``_FillValue`` or ``missing_value`` the data type cannot hold (e.g. -9999 on
        uint8): ``"warn"`` (default) warns and drops it, the data stays readable but is
        not masked with it; ``"raise"`` raises
        :class:`~virtualizarr_fill.errors.FillValueError`.
    has_unallocated_chunks
        Whether the dataset has chunks that are not allocated in the file (the chunk
        index lists fewer chunks than the grid has). When the header fill and
        ``_FillValue`` differ, such chunks read as the header fill, which the sentinel
        does not mask: a warning says so.
    dataset
        The dataset's path in the file (e.g. ``"/gt1l/land_ice_segments/h_li"``), named in
        messages.

    Returns
    -------
    FillDecision
        ``fill_value`` from the header; ``attributes`` with ``_FillValue`` cast to the
        dataset's type and encoded for xarray (dropped when it cannot be represented or
        when the data type is a string type, whose ``_FillValue`` xarray's Zarr backend
        cannot decode), and ``missing_value`` as plain numbers (a scalar, or a list when
        the file has several values).
    """
    dt = normalize_dtype(dtype)
    where = f"{source}: {dataset}" if dataset else source
    notes: list[str] = []
    out = dict(attributes)
    if dt.kind not in SUPPORTED_KINDS:
        return _uncovered_dtype(header_fill, dt, out, notes)
    fill_value = _header_fill_value(header_fill, dt, where=where, notes=notes)
    unsigned = attributes.get(_UNSIGNED_ATTR)

    def refuse(name: str, raw: Any, reason: str) -> None:
        message = (
            f"{where}: {name} attribute {describe(raw)} cannot be represented as {dt}: {reason}"
        )
        if on_out_of_range == "raise":
            raise FillValueError(message)
        warnings.warn(
            f"{message}; the attribute is dropped and masks nothing",
            FillValueWarning,
            stacklevel=4,
        )
        notes.append(f"{name} {describe(raw)} dropped: not representable as {dt}")

    def cast(name: str, raw: Any) -> FillScalar | None:
        try:
            return cast_to_dtype(raw, dt)
        except NotRepresentableError as exc:
            wrapped = _unsigned_reinterpretation(raw, dt, unsigned)
            if wrapped is not None:
                notes.append(f"{name} {describe(raw)} stored as {describe(wrapped)} (_Unsigned)")
                return wrapped
            refuse(name, raw, str(exc))
            return None

    sentinel: FillScalar | None = None
    if FILL_VALUE_ATTR in attributes:
        raw = attributes[FILL_VALUE_ATTR]
        out.pop(FILL_VALUE_ATTR)
        if is_string_kind(dt):
            # xarray's Zarr backend raises on any string-typed _FillValue attribute.
            notes.append(
                f"_FillValue {describe(raw)} not written: xarray cannot decode a {dt} _FillValue"
            )
        else:
            sentinel = cast(FILL_VALUE_ATTR, raw)
            if sentinel is not None:
                out[FILL_VALUE_ATTR] = encode_fill_value(sentinel, dt)
                notes.append(f"_FillValue {describe(sentinel)} from the _FillValue attribute")

    if MISSING_VALUE_ATTR in attributes:
        out.pop(MISSING_VALUE_ATTR)
        _consolidate_missing(attributes[MISSING_VALUE_ATTR], dt, sentinel, out, notes, cast, where)

    if sentinel is not None and not fill_values_equal(sentinel, fill_value):
        if has_unallocated_chunks:
            warnings.warn(
                f"{where}: header fill value {describe(fill_value)} differs from _FillValue "
                f"{describe(sentinel)} and the dataset has unallocated chunks: they read as "
                f"{describe(fill_value)}, which is not masked as missing",
                FillValueWarning,
                stacklevel=2,
            )
        notes.append(
            f"header fill {describe(fill_value)} differs from _FillValue {describe(sentinel)}"
            + (" (dataset has unallocated chunks)" if has_unallocated_chunks else "")
        )
    return FillDecision(fill_value=fill_value, attributes=out, dtype=dt, notes=tuple(notes))


def _consolidate_missing(
    raw: Any,
    dtype: np.dtype[Any],
    sentinel: FillScalar | None,
    out: dict[str, Any],
    notes: list[str],
    cast: Any,
    where: str,
) -> None:
    """Write ``missing_value`` as plain JSON numbers cast to the data type."""
    if is_string_kind(dtype):
        notes.append(f"missing_value {describe(raw)} not written for a {dtype} dataset")
        return
    elements, scalar = _missing_values(raw)
    kept: list[int | float | bool] = []
    for element in elements:
        value = cast(MISSING_VALUE_ATTR, element)
        if value is None:
            continue
        if isinstance(value, np.complexfloating) or (
            isinstance(value, np.floating) and not np.isfinite(value)
        ):
            # Strict JSON (Icechunk) has no NaN/Infinity/complex; NaN masks nothing anyway.
            covered = sentinel is not None and fill_values_equal(value, sentinel)
            if not covered and not np.isnan(value):
                warnings.warn(
                    f"{where}: missing_value {describe(value)} cannot be stored as a JSON "
                    "attribute; values equal to it will not be masked",
                    FillValueWarning,
                    stacklevel=3,
                )
            notes.append(f"missing_value {describe(value)} omitted (not a finite real)")
            continue
        kept.append(value.item())  # type: ignore[union-attr]
    if not kept:
        return
    out[MISSING_VALUE_ATTR] = kept[0] if scalar and len(kept) == 1 else kept
    notes.append(f"missing_value {out[MISSING_VALUE_ATTR]!r} from the missing_value attribute")
