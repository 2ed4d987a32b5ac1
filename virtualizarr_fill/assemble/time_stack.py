"""Scenes stacked along a ``time`` dimension whose coordinate each file gives.

Each scene is parsed with ``TIFFParser(time_from=...)``, which gives its dataset a
leading ``time`` dimension of length one and a CF-encoded ``time`` coordinate
(:mod:`virtualizarr_fill.tiff.scene_time` lists the sources and date forms).

This module is the one place where scenes are put in time order and where two scenes
of the same time are refused (:func:`time_order`, :func:`same_time_error`): both
entry points use it, :func:`stack_by_time` (virtual datasets already opened; STAC item
groups) and :func:`virtualizarr_fill.open_virtual_series` along ``time`` (the CLI's
``build --time-from``, through :func:`.series.order_parts`), so that both order alike
and refuse alike, with one :class:`~virtualizarr_fill.errors.TimeCoordinateError` and
one message naming both files and the time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill.tiff.scene_time import TIME, TimeCoordinateError

if TYPE_CHECKING:
    import xarray as xr


def readable_time(value: Any, attrs: Mapping[str, Any] | None = None) -> str:
    """A time as messages show it: ISO 8601 without trailing zero fractions. A number
    (a time left CF-encoded) is decoded with the ``units`` and ``calendar`` in
    ``attrs``; without units it is shown as stored."""
    if isinstance(value, np.datetime64):
        import pandas as pd

        return str(value) if np.isnat(value) else pd.Timestamp(value).isoformat()
    if hasattr(value, "isoformat"):  # datetime, pandas' Timestamp, cftime's dates
        return str(value.isoformat())
    units = (attrs or {}).get("units")
    if isinstance(units, str) and " since " in units:
        import xarray as xr

        cf = {k: v for k, v in (attrs or {}).items() if k in ("units", "calendar")}
        encoded = xr.Dataset({TIME: xr.Variable((TIME,), np.asarray([value]), cf)})
        try:
            return readable_time(xr.decode_cf(encoded)[TIME].values[0])
        except (ValueError, OverflowError):  # units xarray cannot decode: as stored
            pass
    return f"{value} {units}" if units else str(value)


def same_time_error(
    earlier: str, later: str, time: Any, attrs: Mapping[str, Any] | None = None
) -> TimeCoordinateError:
    """The refusal of two scenes (``earlier`` and ``later``, as messages name them) of
    one ``time`` (``attrs``: its CF attributes where it is not decoded)."""
    return TimeCoordinateError(
        f"{earlier} and {later} have the same time ({readable_time(time, attrs)}); "
        "a time stack takes one scene per time"
    )


def time_order(
    times: Sequence[Any], names: Sequence[str], attrs: Mapping[str, Any] | None = None
) -> list[int]:
    """The positions of the scenes whose times are ``times`` in time order; two scenes
    of the same time raise :class:`TimeCoordinateError` naming both (``names``, in the
    order given).

    ``times`` are comparable values of one kind: ``datetime64``, cftime dates, or
    numbers in the units ``attrs`` give (for the message)."""
    order = sorted(range(len(times)), key=lambda i: times[i])  # stable: ties keep their order
    for earlier, later in itertools.pairwise(order):
        if times[earlier] == times[later]:
            raise same_time_error(names[earlier], names[later], times[earlier], attrs)
    return order


def _scene_time(dataset: xr.Dataset, url: str) -> Any:
    """The time of a scene's dataset, decoded where it is still CF-encoded (scenes
    encoded in other units then compare by their times, not their numbers)."""
    if TIME not in dataset.coords or dataset.sizes.get(TIME) != 1:
        raise TimeCoordinateError(
            f"{url}: no time coordinate of one scene (parse with TIFFParser(time_from=...))"
        )
    coordinate = dataset[TIME].variable
    units = coordinate.attrs.get("units")
    if coordinate.dtype.kind in "iuf" and isinstance(units, str) and " since " in units:
        import xarray as xr

        coordinate = xr.decode_cf(xr.Dataset({TIME: coordinate.load()}))[TIME].variable
    return np.asarray(coordinate.values)[0]


def order_by_time(datasets: Sequence[xr.Dataset], urls: Sequence[str]) -> list[int]:
    """The positions of ``datasets`` (one scene each) in time order; raises
    :class:`TimeCoordinateError` naming the files when two scenes have the same time."""
    times = [_scene_time(ds, url) for ds, url in zip(datasets, urls, strict=True)]
    return time_order(times, urls)


def stack_by_time(datasets: Sequence[xr.Dataset], urls: Sequence[str]) -> xr.Dataset:
    """The scenes (parsed with ``TIFFParser(time_from=...)``) concatenated along
    ``time`` in time order; two scenes of the same time are refused, naming the files.

    :func:`virtualizarr_fill.open_virtual_series` along ``"time"`` orders and refuses
    scenes by the same rule, with the same error and message, from the files' URLs.

    Parameters
    ----------
    datasets
        One virtual dataset per file.
    urls
        The files, for messages.

    Returns
    -------
    xarray.Dataset
        The stack; the other dimensions must agree exactly across the scenes.

    Raises
    ------
    virtualizarr_fill.TimeCoordinateError
        A dataset without a ``time`` coordinate of one scene, naming its file; two
        scenes of the same time, as ``<a> and <b> have the same time (<time>); a time
        stack takes one scene per time``.
    """
    import xarray as xr

    order = order_by_time(datasets, urls)
    return xr.concat(
        [datasets[i] for i in order],
        dim=TIME,
        data_vars="minimal",
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",
    )


__all__ = [
    "TimeCoordinateError",
    "order_by_time",
    "readable_time",
    "same_time_error",
    "stack_by_time",
    "time_order",
]
