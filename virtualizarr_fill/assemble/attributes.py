"""Attributes of many files combined as xarray's ``combine_attrs="drop_conflicts"``
combines them, and the record of what a combination dropped
(:func:`dropped_attributes`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import xarray as xr

#: Distinct attribute dictionaries :func:`common_attributes` remembers, to skip those
#: it meets again (the files' shared ones); it keeps them alive, so that an identity it
#: remembers is never that of a later dictionary built in the same place.
_REMEMBERED = 1024


def common_attributes(
    attribute_sets: Iterable[Mapping[Any, Any]], dropped: set[Hashable] | None = None
) -> dict[Hashable, Any]:
    """xarray's ``combine_attrs="drop_conflicts"``: the attributes whose values agree
    wherever they appear (an attribute missing from some inputs is kept). The names of
    those that do not are added to ``dropped``, where given. Attributes that change
    decoded values never reach here differing: the files were refused
    (:mod:`virtualizarr_fill.fill.encoding`). ``attribute_sets`` may be an iterator
    (each dictionary is read once)."""
    from xarray.core.utils import equivalent

    result: dict[Hashable, Any] = {}
    lost: set[Hashable] = set()
    seen: dict[int, Mapping[Any, Any]] = {}
    for attributes in attribute_sets:
        if id(attributes) in seen:  # a shared dict: nothing new
            continue
        if len(seen) < _REMEMBERED:
            seen[id(attributes)] = attributes
        for key, value in attributes.items():
            if key in lost:
                continue
            if key not in result:
                result[key] = value
            elif not equivalent(result[key], value):
                del result[key]
                lost.add(key)
    if dropped is not None:
        dropped.update(lost)
    return result


#: The key of a combined dataset's ``encoding`` that lists the attributes the files
#: disagreed on (:func:`dropped_attributes`).
DROPPED_ATTRIBUTES = "dropped_attributes"


def recording_dropped(
    ds: xr.Dataset, dropped: Mapping[str, Iterable[Hashable]], fill: Iterable[str] = ()
) -> xr.Dataset:
    """``ds`` with ``dropped`` (each variable's attributes the files disagreed on, the
    dataset's under ``""``) recorded in its encoding for :func:`dropped_attributes`,
    less the ``fill`` attributes, which the fill-conflict rule decides and reports."""
    leave_out = set(fill)
    recorded = {
        name: sorted(str(k) for k in keys if str(k) not in leave_out)
        for name, keys in dropped.items()
    }
    ds.encoding[DROPPED_ATTRIBUTES] = {n: keys for n, keys in recorded.items() if keys}
    return ds


def dropped_attributes(ds: xr.Dataset) -> dict[str, list[str]]:
    """The attributes a combination of files dropped because the files disagreed on
    them (xarray's ``combine_attrs="drop_conflicts"``), by variable (``""``: the
    dataset's own).

    Only descriptive attributes are ever dropped (``history``, ``date_created``,
    ``long_name``...): files that disagree on an attribute that changes decoded values
    are refused instead (see :mod:`virtualizarr_fill.fill.encoding`).

    Parameters
    ----------
    ds
        A dataset from :func:`~virtualizarr_fill.open_virtual_series` or
        :func:`~virtualizarr_fill.open_virtual_mosaic`.

    Returns
    -------
    dict of str to list of str
        Empty where nothing was dropped, or for a dataset not combined by them.
    """
    recorded = ds.encoding.get(DROPPED_ATTRIBUTES, {})
    return {str(name): list(keys) for name, keys in recorded.items()}


__all__ = ["DROPPED_ATTRIBUTES", "common_attributes", "dropped_attributes", "recording_dropped"]
