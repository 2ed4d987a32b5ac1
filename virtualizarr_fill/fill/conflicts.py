"""The fill-conflict policy of combined arrays: what must agree, and the user's opt-in.

A virtual array has one Zarr ``fill_value`` and one ``_FillValue`` / ``missing_value``
pair, so arrays combined into one (concatenated, stacked, written as one) must agree on
them or some file's missing data would be misread. :func:`combine_fills` compares the
inputs' metadata and hands any difference to
:func:`virtualizarr_fill.fill.combine_fill_values`, which refuses unless the caller
opted in to a combination with :func:`fill_conflicts`. The opt-in is a context variable,
so it reaches ``np.concatenate`` and ``xr.concat`` calls that take no such argument.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.fill.combine import FillConflictError, OnConflict, combine_fill_values

#: CF attributes that carry a missing-data sentinel; inputs must agree on them.
FILL_ATTRIBUTES = ("_FillValue", "missing_value")


def _fill_json(metadata: ArrayV3Metadata) -> Any:
    return metadata.data_type.to_json_scalar(metadata.fill_value, zarr_format=3)


def _fill_key(metadata: ArrayV3Metadata) -> tuple[Any, ...]:
    attrs = metadata.attributes
    return (
        json.dumps(_fill_json(metadata)),
        *(json.dumps(attrs.get(name), sort_keys=True, default=str) for name in FILL_ATTRIBUTES),
    )


def _same_fill(a: ArrayV3Metadata, b: ArrayV3Metadata) -> bool:
    """Whether two arrays have the same fill information (fast path, then JSON)."""
    try:
        if (
            a.data_type == b.data_type
            and bool(a.fill_value == b.fill_value)
            and all(a.attributes.get(n) == b.attributes.get(n) for n in FILL_ATTRIBUTES)
        ):
            return True
    except (TypeError, ValueError):  # array-valued attributes
        pass
    return _fill_key(a) == _fill_key(b)


#: How to combine anyway, in a refusal met through concatenation.
FILL_CONFLICT_ADVICE = (
    "To combine anyway, pass on_fill_conflict='use_first' or on_fill_conflict='drop' to "
    "virtualizarr_fill.open_virtual_series or virtualizarr_fill.open_virtual_mosaic, or "
    "concatenate inside 'with virtualizarr_fill.fill_conflicts(\"use_first\"):'"
)

_ON_CONFLICT: contextvars.ContextVar[OnConflict] = contextvars.ContextVar(
    "virtualizarr_fill_on_conflict", default="error"
)
# The variable being combined, for messages: np.concatenate sees arrays, not names.
_VARIABLE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "virtualizarr_fill_variable", default=None
)


@contextlib.contextmanager
def combining_variable(name: str) -> Iterator[None]:
    """Name variable ``name`` in the fill-conflict messages of the combinations made
    inside this context (the combiners wrap each variable's ``np.concatenate``)."""
    token = _VARIABLE.set(name)
    try:
        yield
    finally:
        _VARIABLE.reset(token)


def fill_conflict_rule() -> OnConflict:
    """The rule :func:`fill_conflicts` set for the combinations made in this context
    (``"error"`` outside it)."""
    return _ON_CONFLICT.get()


def combined_variable() -> str | None:
    """The variable :func:`combining_variable` names, or None outside it."""
    return _VARIABLE.get()


@contextlib.contextmanager
def fill_conflicts(on_conflict: OnConflict) -> Iterator[None]:
    """Combine arrays whose fill values differ, the way ``on_conflict`` says.

    By default concatenation refuses inputs whose Zarr ``fill_value``, ``_FillValue``
    or ``missing_value`` differ (a virtual array has one of each, so one file's
    missing data would be misread). Inside this context ``np.concatenate``,
    ``xr.concat`` and friends combine them with
    :func:`virtualizarr_fill.fill.combine_fill_values` ``on_conflict`` rule, which
    warns about what is no longer masked.

    Parameters
    ----------
    on_conflict
        ``"use_first"``: the first input's value of each field that differs;
        ``"drop"``: the data type's default ``fill_value`` and no ``_FillValue`` or
        ``missing_value`` for the fields that differ; ``"error"``: refuse, as outside
        the context.

    Examples
    --------
    >>> with virtualizarr_fill.fill_conflicts("use_first"):
    ...     combined = xr.concat([vds_2020, vds_2021], dim="time")
    """
    token = _ON_CONFLICT.set(on_conflict)
    try:
        yield
    finally:
        _ON_CONFLICT.reset(token)


def combine_fills(
    metadatas: Sequence[ArrayV3Metadata], describe: Callable[[int], str]
) -> tuple[Any, dict[str, Any]]:
    """The fill value and attributes of the combination (the fill-value merge rule).

    Inputs that agree keep their values; otherwise
    :func:`virtualizarr_fill.fill.combine_fill_values` decides, refusing by default
    (:func:`fill_conflicts` opts in to a combination).
    """
    first = metadatas[0]
    if all(m is first or _same_fill(first, m) for m in metadatas):
        return first.fill_value, dict(first.attributes)
    try:
        combined = combine_fill_values(
            [m.fill_value for m in metadatas],
            [m.attributes for m in metadatas],
            [describe(i) for i in range(len(metadatas))],
            first.data_type.to_native_dtype(),
            on_conflict=_ON_CONFLICT.get(),
            name=_VARIABLE.get(),
        )
    except FillConflictError as error:
        # Reached through xr.concat or the functions opening many files, not through a
        # call naming on_conflict: say how those choose a rule.
        raise FillConflictError(error.problem, FILL_CONFLICT_ADVICE) from None
    return combined.fill_value, combined.attributes


__all__ = [
    "FILL_ATTRIBUTES",
    "FILL_CONFLICT_ADVICE",
    "combine_fills",
    "combined_variable",
    "combining_variable",
    "fill_conflict_rule",
    "fill_conflicts",
]
