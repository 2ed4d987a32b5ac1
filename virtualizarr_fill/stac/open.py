"""STAC items as one virtual dataset: a mosaic per time step, stacked along ``time``.

Each group of items (:mod:`.items`) is opened with
:func:`virtualizarr_fill.open_virtual_mosaic` (one item: its file as it is) and given a
leading ``time`` dimension of length one; the steps are then stacked in time order by
:func:`virtualizarr_fill.assemble.time_stack.stack_by_time`, as ``build --time-from`` stacks
scenes. Along ``time`` the dataset carries

* ``time``: the group's datetime, CF-encoded (``seconds since 1970-01-01`` when every
  datetime is a whole second, else ``microseconds since 1970-01-01``), which xarray
  decodes to the items' ``datetime64`` values;
* ``item_id``: the ids of the group's items, comma-separated (one id per time step
  unless items were mosaicked), so that every slice traces back to its items.

The items' ``proj:`` fields, where present, are checked against the files'
georeferencing: ``proj:code``/``proj:epsg`` against the CRS, ``proj:transform`` and
``proj:shape`` against the pixel grid (for a group of several items, each item's
footprint must lie on the mosaic's grid).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill.assemble.time_stack import stack_by_time
from virtualizarr_fill.stac.items import (
    GroupBy,
    Scene,
    SceneGroup,
    StacItemError,
    group_scenes,
    read_items,
    scenes_of,
)
from virtualizarr_fill.tiff.scene_time import TIME, TIME_ATTRIBUTES

if TYPE_CHECKING:
    import pystac
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry

    from virtualizarr_fill.assemble import OnFillConflict

__all__ = ["ITEM_ID", "StacStack", "open_virtual_stac", "stac_stack", "time_units_for"]

#: The coordinate along ``time`` naming each step's items.
ITEM_ID = "item_id"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_STRINGS = np.dtypes.StringDType()
_UNITS = {"seconds": dt.timedelta(seconds=1), "microseconds": dt.timedelta(microseconds=1)}


def time_units_for(times: Sequence[dt.datetime]) -> str:
    """``seconds`` when every time is a whole second, else ``microseconds``."""
    return "seconds" if all(t.microsecond == 0 for t in times) else "microseconds"


def _encoded(when: dt.datetime, unit: str) -> int:
    step = _UNITS[unit]
    value, rest = divmod(when - _EPOCH, step)
    if rest:
        raise StacItemError(
            f"{when.isoformat()} is not a whole number of {unit}, the store's time unit; "
            "rebuild the store from every item (it then counts microseconds)"
        )
    return int(value)


def _local_file_problem(url: str) -> str | None:
    if not url.startswith("file://"):
        return None
    path = Path(url.removeprefix("file://"))
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a file"
    return None


def _default_registry(urls: Sequence[str]) -> ObjectStoreRegistry:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore, from_url

    stores: dict[str, Any] = {}
    for url in urls:
        parts = url.split("/", 3)
        prefix = "file://" if url.startswith("file://") else "/".join(parts[:3])
        if prefix not in stores:
            stores[prefix] = LocalStore() if prefix == "file://" else from_url(prefix)
    return ObjectStoreRegistry(stores)


# --------------------------------------------------------------------------- proj checks


def _crs_epsg(dataset: xr.Dataset) -> int | None:
    from pyproj import CRS

    ref = dataset.variables.get("spatial_ref")
    wkt = None if ref is None else ref.attrs.get("crs_wkt", ref.attrs.get("spatial_ref"))
    if wkt is None:
        return None
    return CRS.from_wkt(str(wkt)).to_epsg()


def _expected_epsg(projection: dict[str, Any]) -> int | None:
    code = projection.get("proj:code")
    if isinstance(code, str) and code.upper().startswith("EPSG:"):
        return int(code.split(":", 1)[1])
    epsg = projection.get("proj:epsg")
    return int(epsg) if epsg is not None else None


def _edges(values: np.ndarray) -> tuple[float, float]:
    """The first pixel's outer edge and the pixel size of a pixel-centre coordinate."""
    step = float(values[1] - values[0]) if values.size > 1 else float("nan")
    return float(values[0]) - step / 2, step


def _check_projection(scene: Scene, dataset: xr.Dataset, alone: bool) -> None:
    projection = scene.projection
    if not projection:
        return
    expected = _expected_epsg(projection)
    if expected is not None:
        found = _crs_epsg(dataset)
        if found != expected:
            raise StacItemError(
                f"{scene.describe()}: proj says EPSG:{expected}, the file's CRS is "
                f"{'EPSG:' + str(found) if found else 'another one'}"
            )
    transform = projection.get("proj:transform")
    if not transform or "x" not in dataset.coords or "y" not in dataset.coords:
        return
    a, _, c, _, e, f = (float(v) for v in transform[:6])
    x0, dx = _edges(np.asarray(dataset["x"].values))
    y0, dy = _edges(np.asarray(dataset["y"].values))
    shape = projection.get("proj:shape")
    rows, cols = (int(shape[0]), int(shape[1])) if shape else (None, None)
    width, height = dataset.sizes["x"], dataset.sizes["y"]

    # Catalogues write transforms with fewer digits than the files hold: pixel sizes
    # agree to a millionth, positions to a hundredth of a pixel.
    def same_size(u: float, v: float) -> bool:
        return abs(u - v) <= 1e-6 * abs(v)

    def whole(pixels: float) -> bool:
        return abs(pixels - round(pixels)) <= 0.01

    placed = True
    if dx == dx and dy == dy:  # more than one pixel on both axes: the step is known
        col, row = (c - x0) / dx, (f - y0) / dy
        placed = same_size(a, dx) and same_size(e, dy) and whole(col) and whole(row)
        if alone:
            placed = placed and round(col) == 0 and round(row) == 0
            placed = placed and rows in (None, height) and cols in (None, width)
        else:
            placed = (
                placed
                and round(col) >= 0
                and round(row) >= 0
                and round(col) + (cols or 1) <= width
                and round(row) + (rows or 1) <= height
            )
    if not placed:
        raise StacItemError(
            f"{scene.describe()}: proj:transform {list(transform[:6])}"
            f"{f' and proj:shape {list(shape)}' if shape else ''} disagree with the "
            f"file's georeferencing (origin {x0:g}, {y0:g}, pixel size {dx:g}, {dy:g}, "
            f"{height}x{width} pixels{'' if alone else ' for the mosaic of its time step'})"
        )


# --------------------------------------------------------------------------- opening


class StacStack:
    """The scenes of a STAC build, grouped (what :func:`stac_stack` returns)."""

    def __init__(self, groups: list[SceneGroup], skipped: list[str]) -> None:
        self.groups = groups
        self.skipped = skipped

    @property
    def hrefs(self) -> list[str]:
        return [h for g in self.groups for h in g.hrefs]


def stac_stack(
    items: Any, asset: str, *, groupby: GroupBy = "time", skip_bad: bool = False
) -> StacStack:
    """The items of ``items`` (as :func:`open_virtual_stac` takes them) as groups of
    scenes of ``asset``; with ``skip_bad`` the bad items are listed instead of raised."""
    scenes, skipped = scenes_of(read_items(items), asset, skip_bad=skip_bad)
    kept = []
    for scene in scenes:
        problem = _local_file_problem(scene.href)
        if problem is None:
            kept.append(scene)
            continue
        message = f"{scene.describe()}: {problem}"
        if not skip_bad:
            raise StacItemError(message)
        skipped.append(message)
    if not kept:
        raise StacItemError(f"none of the items has a usable asset {asset!r}")
    return StacStack(group_scenes(kept, groupby), skipped)


def _open_group(
    group: SceneGroup,
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any] | None,
    allow_gaps: bool,
    on_fill_conflict: OnFillConflict,
    skipped: list[str] | None,
) -> tuple[xr.Dataset | None, SceneGroup]:
    """The mosaic of the group, and the group it was made of. With ``skipped`` (a list,
    ``skip_bad``), a file that cannot be parsed is left out, its reason listed, and the
    rest of the group tried again; ``None`` when no file of the group is left."""
    import dataclasses

    from virtualizarr_fill.assemble import open_virtual_mosaic
    from virtualizarr_fill.errors import IncompatibleArraysError

    while True:
        try:
            dataset = open_virtual_mosaic(
                group.hrefs,
                registry,
                parser,
                allow_gaps=allow_gaps,
                on_fill_conflict=on_fill_conflict,
            )
            break
        except (ValueError, OSError, RuntimeError) as error:
            named = [s for s in group.scenes if s.href in str(error)]
            ids = ", ".join(repr(s.item_id) for s in named or group.scenes)
            message = f"item {ids} of {group.time.isoformat()}: {error}"
            # A file that cannot be parsed is the item's fault; tiles that do not form a
            # mosaic are the group's, and no choice of tile to leave out is ours to make.
            unreadable = len(named) == 1 and not isinstance(error, IncompatibleArraysError)
            if skipped is None or not unreadable:
                raise StacItemError(message) from error
            skipped.append(message)
            rest = tuple(s for s in group.scenes if s is not named[0])
            if not rest:
                return None, group
            group = dataclasses.replace(group, time=rest[0].datetime, scenes=rest)
    for scene in group.scenes:
        _check_projection(scene, dataset, alone=len(group.scenes) == 1)
    return dataset, group


def _with_time(dataset: xr.Dataset, group: SceneGroup, unit: str) -> xr.Dataset:
    import xarray as xr

    stepped = dataset.expand_dims(TIME)
    attributes = dict(TIME_ATTRIBUTES, units=f"{unit} since 1970-01-01 00:00:00")
    return stepped.assign_coords(
        {
            TIME: xr.Variable(
                (TIME,), np.array([_encoded(group.time, unit)], dtype=np.int64), attributes
            ),
            # variable-length strings: Zarr, kerchunk and appends take them at any length
            ITEM_ID: xr.Variable((TIME,), np.array([",".join(group.item_ids)], dtype=_STRINGS)),
        }
    )


def open_virtual_stac(
    items: str | Path | pystac.ItemCollection | pystac.Item | Sequence[pystac.Item],
    asset: str,
    registry: ObjectStoreRegistry | None = None,
    *,
    parser: Callable[..., Any] | None = None,
    groupby: GroupBy = "time",
    allow_gaps: bool = False,
    on_fill_conflict: OnFillConflict = "error",
    skip_bad: bool = False,
    time_units: str | None = None,
) -> xr.Dataset:
    """Open the asset ``asset`` of STAC items as one virtual dataset along ``time``.

    Parameters
    ----------
    items
        A pystac ``ItemCollection``, ``Item`` or sequence of Items; or the path or URL
        (``file``, ``http(s)``, ``s3``) of an ItemCollection or Item JSON file, or of a
        folder of Item JSON files. Relative asset hrefs resolve against the JSON file.
    asset
        The key of the asset to virtualize (a GeoTIFF in every item).
    registry
        Resolves the files' URLs to object stores (default: one store per scheme and
        bucket or host, with obstore's default configuration).
    parser
        The TIFF parser to use (default ``TIFFParser()``).
    groupby
        ``"time"`` (items of the same datetime form one mosaic) or ``"solar_day"``
        (items of the same local solar date, odc-stac's rule).
    allow_gaps
        Accept mosaic tiles that do not abut (as for :func:`open_virtual_mosaic`).
    on_fill_conflict
        Files whose nodata values differ: ``"error"`` (default), ``"use_first"`` or
        ``"drop"``.
    skip_bad
        Leave out items without the asset, or whose file is missing or cannot be
        parsed (their reasons are in the dataset's ``virtualizarr_fill_stac_skipped``
        attribute), instead of raising.
    time_units
        ``"seconds"`` or ``"microseconds"`` for the time coordinate (default: seconds
        unless a datetime has a fraction of a second).

    Returns
    -------
    xarray.Dataset
        ``band_data(time, band, y, x)`` in time order whatever the items' order, with the
        coordinates ``time`` (CF-encoded item datetimes) and ``item_id`` (each step's item
        ids, comma-separated).

    Raises
    ------
    virtualizarr_fill.stac.StacItemError
        An item without the asset or a datetime, a missing file, ``proj:`` fields that
        disagree with the file, or a time step whose files cannot be mosaicked, naming
        the item ids (and the files).
    """
    found = stac_stack(items, asset, groupby=groupby, skip_bad=skip_bad)
    return open_stac_stack(
        found,
        registry,
        parser=parser,
        allow_gaps=allow_gaps,
        on_fill_conflict=on_fill_conflict,
        skip_bad=skip_bad,
        time_units=time_units,
    )


def open_stac_stack(
    found: StacStack,
    registry: ObjectStoreRegistry | None = None,
    *,
    parser: Callable[..., Any] | None = None,
    allow_gaps: bool = False,
    on_fill_conflict: OnFillConflict = "error",
    skip_bad: bool = False,
    time_units: str | None = None,
    on_step: Callable[[], None] | None = None,
) -> xr.Dataset:
    """The virtual dataset of the groups :func:`stac_stack` found (see
    :func:`open_virtual_stac`); with ``skip_bad``, the items whose files cannot be parsed
    are left out of ``found`` and added to its ``skipped``. ``on_step`` is called after
    each time step is opened (a progress display)."""
    groups = found.groups
    unit = time_units or time_units_for([g.time for g in groups])
    if unit not in _UNITS:
        raise ValueError(f"time_units must be one of {', '.join(_UNITS)}, not {unit!r}")
    if registry is None:
        registry = _default_registry(found.hrefs)
    skipped = list(found.skipped) if skip_bad else None
    steps = []
    opened_groups = []
    for group in groups:
        dataset, group = _open_group(group, registry, parser, allow_gaps, on_fill_conflict, skipped)
        if dataset is not None:
            steps.append(_with_time(dataset, group, unit))
            opened_groups.append(group)
        if on_step is not None:
            on_step()
    if not steps:
        raise StacItemError("none of the items' files could be virtualized")
    groups = opened_groups
    labels = [f"the items {', '.join(g.item_ids)} ({g.time.isoformat()})" for g in groups]
    try:
        stacked = stack_by_time(steps, labels)
    except ValueError as error:
        if "join='exact'" not in str(error) and "cannot align" not in str(error):
            raise
        raise StacItemError(
            "the time steps are not on one grid (their x/y coordinates differ), so they "
            f"cannot be stacked along time; select items of one footprint ({error})"
        ) from None
    if skipped:
        stacked.attrs["virtualizarr_fill_stac_skipped"] = skipped
    if skipped is not None:
        found.skipped[:] = skipped
    found.groups[:] = groups
    return stacked
