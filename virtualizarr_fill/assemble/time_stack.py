"""Scenes stacked along a ``time`` dimension whose coordinate each file gives.

Each scene is parsed with ``TIFFParser(time_from=...)``, which gives its dataset a
leading ``time`` dimension of length one and a CF-encoded ``time`` coordinate
(:mod:`virtualizarr_fill.tiff.scene_time` lists the sources and date forms).
:func:`stack_by_time` orders such datasets by their time, refuses two scenes of the
same time naming both files, and concatenates them along ``time`` (the CLI's
``build --time-from``, and STAC item groups).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill.tiff.scene_time import EPOCH, TIME, TimeCoordinateError

if TYPE_CHECKING:
    import xarray as xr


def _scene_key(dataset: xr.Dataset, url: str) -> np.datetime64 | int:
    if TIME not in dataset.coords or dataset.sizes.get(TIME) != 1:
        raise TimeCoordinateError(
            f"{url}: no time coordinate of one scene (parse with TIFFParser(time_from=...))"
        )
    value = np.asarray(dataset[TIME].values)[0]
    return value.item() if isinstance(value, np.integer) else value


def order_by_time(datasets: Sequence[xr.Dataset], urls: Sequence[str]) -> list[int]:
    """The positions of ``datasets`` in time order; raises :class:`TimeCoordinateError`
    naming the files when two scenes have the same time."""
    keys = [_scene_key(ds, url) for ds, url in zip(datasets, urls, strict=True)]
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    for earlier, later in itertools.pairwise(order):
        if keys[earlier] == keys[later]:
            raise TimeCoordinateError(
                f"{urls[earlier]} and {urls[later]} have the same time "
                f"({_readable(keys[earlier])}); a time stack takes one scene per time"
            )
    return order


def _readable(key: Any) -> str:
    if isinstance(key, int):
        return (EPOCH + dt.timedelta(seconds=key)).isoformat()
    return str(key)


def stack_by_time(datasets: Sequence[xr.Dataset], urls: Sequence[str]) -> xr.Dataset:
    """The scenes (parsed with ``TIFFParser(time_from=...)``) concatenated along
    ``time`` in time order; two scenes of the same time are refused, naming the files.

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


__all__ = ["order_by_time", "stack_by_time"]
