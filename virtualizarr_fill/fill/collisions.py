"""Opt-in check for fill-value collisions in a dataset's raw values.

A collision is a stored value that readers will misinterpret:

- **fill_value**: valid data equal to the Zarr ``fill_value`` (when it is not also a CF
  sentinel). Readers that treat the Zarr ``fill_value`` as missing (xarray with
  ``use_zarr_fill_value_as_mask=True``, Zarr v2-era tools) mask these valid values, and
  they are indistinguishable from chunks that do not exist.
- **sentinel**: data equal to the ``_FillValue`` sentinel when the Zarr ``fill_value``
  differs from it (and no ``missing_value`` covers it). Readers that use the Zarr
  ``fill_value`` as the mask instead of ``_FillValue`` read these missing values as valid.
- **extra**: data equal to a sentinel the variable's attributes do not mask, given by the
  caller, typically :attr:`CombinedFill.unmasked_sentinels
  <virtualizarr_fill.fill.combine.CombinedFill.unmasked_sentinels>` after a concatenation
  whose inputs had different sentinels. Every reader reads these missing values as valid.

The check reads every value, so it is opt-in. It runs lazily on dask-backed data: all
counts of a dataset are built as dask reductions and computed together in one pass, so
no variable is loaded into memory whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from virtualizarr_fill.fill.cast import (
    FillScalar,
    NotRepresentableError,
    cast_to_dtype,
    describe,
    fill_values_equal,
)
from virtualizarr_fill.fill.coder import sentinel_from_attribute
from virtualizarr_fill.fill.decision import FILL_VALUE_ATTR, MISSING_VALUE_ATTR

__all__ = ["CollisionReport", "VariableCollisions", "check_fill_collisions"]


@dataclass(frozen=True)
class VariableCollisions:
    """Collision counts of one variable (raw, undecoded values).

    Attributes
    ----------
    name
        The variable.
    fill_value
        The Zarr ``fill_value`` checked (``None`` when unknown).
    sentinels
        The values the variable's ``_FillValue`` and ``missing_value`` attributes mask.
    fill_value_count
        Valid elements equal to the Zarr ``fill_value`` (0 when it is a sentinel, NaN or
        unknown).
    sentinel_count
        Elements equal to ``_FillValue`` that a reader masking with the Zarr
        ``fill_value`` reads as valid (0 when the two agree).
    extra_counts
        ``(value, count)`` for each extra sentinel checked.
    """

    name: str
    fill_value: FillScalar | None
    sentinels: tuple[FillScalar, ...]
    fill_value_count: int = 0
    sentinel_count: int = 0
    extra_counts: tuple[tuple[FillScalar, int], ...] = ()

    @property
    def collides(self) -> bool:
        """True when any stored value would be misread."""
        return bool(
            self.fill_value_count
            or self.sentinel_count
            or any(count for _, count in self.extra_counts)
        )

    @property
    def messages(self) -> tuple[str, ...]:
        """One sentence per collision, for reports."""
        out = []
        if self.fill_value_count:
            out.append(
                f"{self.name}: {self.fill_value_count} valid values equal the Zarr fill_value "
                f"{describe(self.fill_value)} (masked by readers that use fill_value as a mask)"
            )
        if self.sentinel_count:
            out.append(
                f"{self.name}: {self.sentinel_count} values equal _FillValue "
                f"{describe(self.sentinels[0])} but not the Zarr fill_value "
                f"{describe(self.fill_value)} (read as valid by readers that use fill_value "
                "as a mask)"
            )
        out.extend(
            f"{self.name}: {count} values equal {describe(value)}, a sentinel this "
            "variable's attributes do not mask (read as valid)"
            for value, count in self.extra_counts
            if count
        )
        return tuple(out)


@dataclass(frozen=True)
class CollisionReport:
    """Result of :func:`check_fill_collisions`."""

    variables: tuple[VariableCollisions, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def collisions(self) -> tuple[VariableCollisions, ...]:
        """The variables with at least one collision."""
        return tuple(v for v in self.variables if v.collides)

    def __getitem__(self, name: str) -> VariableCollisions:
        for variable in self.variables:
            if variable.name == name:
                return variable
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [m for v in self.variables for m in v.messages]
        lines += [f"{name}: not checked ({reason})" for name, reason in self.skipped.items()]
        return "\n".join(lines) if lines else "no fill-value collisions"


def _as_values(raw: Any) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, list | tuple | np.ndarray):
        return list(np.ravel(raw))
    return [raw]


def _count_equal(data: xr.DataArray, value: FillScalar) -> Any:
    """Lazy count of elements equal to ``value`` (NaN counts NaNs)."""
    if isinstance(value, np.floating | float) and np.isnan(value):
        return data.isnull().sum()
    if isinstance(value, np.complexfloating | complex) and np.isnan(value):
        return data.isnull().sum()
    return (data == value).sum()


def _is_nan(value: Any) -> bool:
    return isinstance(value, float | np.inexact) and bool(np.isnan(value))


def check_fill_collisions(
    ds: xr.Dataset,
    *,
    variables: Iterable[str] | None = None,
    extra_sentinels: Mapping[str, Sequence[Any]] | Sequence[Any] = (),
    fill_values: Mapping[str, Any] | None = None,
) -> CollisionReport:
    """Count stored values that readers would misread as missing or as valid.

    Parameters
    ----------
    ds
        A dataset of *raw* values: opened with ``mask_and_scale=False`` (e.g.
        ``xr.open_zarr(store, zarr_format=3, mask_and_scale=False, chunks={})``). Decoded
        variables are refused with ``ValueError``, their sentinels are already NaN.
    variables
        Names to check (default: every data variable and coordinate with a numeric type).
    extra_sentinels
        Values to look for that the variables' attributes do not mask: one sequence for
        every variable, or a mapping from variable name to values.
    fill_values
        The Zarr ``fill_value`` per variable, when the dataset does not carry it in
        ``encoding["fill_value"]`` (xarray records it there for Zarr v3 stores opened
        with the default ``use_zarr_fill_value_as_mask``).

    Returns
    -------
    CollisionReport
        Per-variable counts; ``report.collisions`` lists the variables that collide.
    """
    names = [str(n) for n in (variables if variables is not None else ds.variables)]
    skipped: dict[str, str] = {}
    plans: list[tuple[str, FillScalar | None, tuple[FillScalar, ...], list[Any], list[Any]]] = []
    for name in names:
        da = ds[name]
        if "_FillValue" in da.encoding or "missing_value" in da.encoding:
            raise ValueError(
                f"variable {name!r} was decoded (its sentinels are already masked); open the "
                "dataset with mask_and_scale=False"
            )
        if da.dtype.kind not in "biufc":
            if variables is not None:
                skipped[name] = f"data type {da.dtype} is not numeric"
            continue
        dtype = da.dtype
        sentinel = _sentinel_of(da, dtype)
        missing = _missing_values_of(da, dtype)
        own = ((sentinel,) if sentinel is not None else ()) + missing
        fill_value = _fill_value_of(da, name, fill_values)
        extras = (
            _as_values(extra_sentinels.get(name))
            if isinstance(extra_sentinels, Mapping)
            else list(extra_sentinels)
        )
        checks: list[Any] = []
        labels: list[Any] = []
        if (
            fill_value is not None
            and not _is_nan(fill_value)
            and not any(fill_values_equal(fill_value, s) for s in own)
        ):
            checks.append(_count_equal(da, fill_value))
            labels.append("fill_value")
        if (
            sentinel is not None
            and fill_value is not None
            and not fill_values_equal(sentinel, fill_value)
            and not any(fill_values_equal(sentinel, m) for m in missing)
        ):
            checks.append(_count_equal(da, sentinel))
            labels.append("sentinel")
        for raw in extras:
            try:
                value = cast_to_dtype(raw, dtype)
            except NotRepresentableError:
                continue  # the data type cannot hold it, so the data cannot contain it
            if any(fill_values_equal(value, s) for s in own):
                continue
            checks.append(_count_equal(da, value))
            labels.append(("extra", value))
        plans.append((name, fill_value, own, checks, labels))

    # One compute for everything: dask shares the chunk reads between the reductions.
    all_checks = [c for *_, checks, _ in plans for c in checks]
    computed = _compute(all_checks)
    results: list[VariableCollisions] = []
    position = 0
    for name, fill_value, own, checks, labels in plans:
        counts = computed[position : position + len(checks)]
        position += len(checks)
        fill_count = sentinel_count = 0
        extra_counts: list[tuple[FillScalar, int]] = []
        for label, count in zip(labels, counts, strict=True):
            if label == "fill_value":
                fill_count = count
            elif label == "sentinel":
                sentinel_count = count
            else:
                extra_counts.append((label[1], count))
        results.append(
            VariableCollisions(
                name=name,
                fill_value=fill_value,
                sentinels=own,
                fill_value_count=fill_count,
                sentinel_count=sentinel_count,
                extra_counts=tuple(extra_counts),
            )
        )
    return CollisionReport(variables=tuple(results), skipped=skipped)


def _compute(checks: list[Any]) -> list[int]:
    if not checks:
        return []
    data = [c.data for c in checks]
    if any(hasattr(d, "dask") for d in data):
        import dask

        data = list(dask.compute(*data))
    return [int(np.asarray(d)) for d in data]


def _sentinel_of(da: xr.DataArray, dtype: np.dtype[Any]) -> FillScalar | None:
    raw = da.attrs.get(FILL_VALUE_ATTR)
    if raw is None:
        return None
    try:
        return sentinel_from_attribute(raw, dtype)
    except ValueError as exc:
        raise ValueError(f"variable {da.name!r}: unreadable _FillValue {raw!r}: {exc}") from exc


def _missing_values_of(da: xr.DataArray, dtype: np.dtype[Any]) -> tuple[FillScalar, ...]:
    """The ``missing_value`` values the data type can hold."""
    values: list[FillScalar] = []
    for raw in _as_values(da.attrs.get(MISSING_VALUE_ATTR)):
        try:
            values.append(cast_to_dtype(raw, dtype))
        except NotRepresentableError:
            continue  # cannot occur in the data
    return tuple(values)


def _fill_value_of(
    da: xr.DataArray, name: str, fill_values: Mapping[str, Any] | None
) -> FillScalar | None:
    raw = fill_values.get(name) if fill_values is not None else da.encoding.get("fill_value")
    if raw is None:
        return None
    try:
        return cast_to_dtype(raw, da.dtype)
    except NotRepresentableError as exc:
        raise ValueError(f"variable {name!r}: fill_value {raw!r}: {exc}") from exc
