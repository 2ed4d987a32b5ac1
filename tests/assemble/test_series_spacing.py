"""Series of netCDF files in non-standard calendars (decoded to cftime dates) and of
files holding one step each: ordered, combined and checked for overlaps and gaps as
xarray users expect, values equal to ``xr.open_mfdataset``'s."""

from __future__ import annotations

from pathlib import Path

import cftime
import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from tests._manifest_builders import read_manifest_array
from virtualizarr_fill import HDF5Parser, IncompatibleArraysError

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def _urls(paths: list[Path]) -> list[str]:
    return [p.resolve().as_uri() for p in paths]


def calendar_files(
    directory: Path, calendar: str, starts: list[int], steps: int = 6, *, bounds: bool = False
) -> list[Path]:
    """netCDF-4 files (netCDF4-python) of ``steps`` daily values each, in ``calendar``,
    every file counting time from its own first day (``days since`` a date ``start`` days
    after 1850-01-01), so the series only lines up once decoded; with ``time_bnds`` (in
    the same units) where ``bounds``."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(starts) + steps)
    paths = []
    for start in starts:
        origin = cftime.num2date(start, "days since 1850-01-01", calendar=calendar)
        path = directory / f"tas_{start:04d}.nc"
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("lat", 2)
            time = ds.createVariable("time", "f8", ("time",))
            time.units = f"days since {origin.strftime('%Y-%m-%d')}"
            time.calendar = calendar
            time[:] = np.arange(steps) + 0.5
            if bounds:
                ds.createDimension("nv", 2)
                time.bounds = "time_bnds"
                time_bnds = ds.createVariable("time_bnds", "f8", ("time", "nv"))
                time_bnds[:] = np.stack([np.arange(steps), np.arange(steps) + 1], 1)
            lat = ds.createVariable("lat", "f8", ("lat",))
            lat[:] = [-45.0, 45.0]
            tas = ds.createVariable("tas", "f4", ("time", "lat"), chunksizes=(4, 2))
            tas[:] = rng.random((steps, 2)).astype("f4")
        paths.append(path)
    return paths


def native_series(paths: list[Path]) -> xr.Dataset:
    return xr.open_mfdataset(
        paths, engine="h5netcdf", combine="by_coords", data_vars="minimal", coords="minimal"
    ).load()


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_cftime_series_equals_xarrays(tmp_path: Path, calendar: str) -> None:
    paths = calendar_files(tmp_path, calendar, [0, 6, 12])
    shuffled = [paths[2], paths[0], paths[1]]
    series = virtualizarr_fill.open_virtual_series(_urls(shuffled), REGISTRY, HDF5Parser(), "time")
    expected = native_series(paths)
    times = series.time.values
    assert all(isinstance(t, cftime.datetime) and t.calendar == calendar for t in times)
    np.testing.assert_array_equal(times, expected.time.values)
    np.testing.assert_array_equal(read_manifest_array(series.tas.data), expected.tas.values)


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_cftime_gap_and_overlap_are_refused(tmp_path: Path, calendar: str) -> None:
    paths = calendar_files(tmp_path, calendar, [0, 6, 18])  # days 12 to 17 missing
    with pytest.raises(
        IncompatibleArraysError,
        match=r"gap along 'time' between \S*tas_0006\.nc and \S*tas_0018\.nc.*spacing is 1 day;",
    ):
        virtualizarr_fill.open_virtual_series(_urls(paths), REGISTRY, HDF5Parser(), "time")
    gapped = virtualizarr_fill.open_virtual_series(
        _urls(paths), REGISTRY, HDF5Parser(), "time", allow_gaps=True
    )
    np.testing.assert_array_equal(gapped.time.values, native_series(paths).time.values)

    overlapping = calendar_files(tmp_path / "o", calendar, [0, 4])
    with pytest.raises(IncompatibleArraysError, match=r"tas_0000\.nc and \S*tas_0004\.nc overlap"):
        virtualizarr_fill.open_virtual_series(_urls(overlapping), REGISTRY, HDF5Parser(), "time")


def single_step_files(directory: Path, days: list[pd.Timestamp]) -> list[Path]:
    """One file per day (or month), one time step each, each with its own units."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    paths = []
    for day in days:
        path = directory / f"day_{day:%Y%m%d}.nc"
        ds = xr.Dataset(
            {"v": (("time", "x"), rng.random((1, 3)).astype("f4"))},
            coords={"time": [day], "x": [0.0, 1.0, 2.0]},
        )
        ds.to_netcdf(
            path,
            engine="h5netcdf",
            encoding={"time": {"units": f"hours since {day:%Y-%m-%d %H:%M:%S}"}},
        )
        paths.append(path)
    return paths


def test_single_step_daily_files_with_a_missing_day(tmp_path: Path) -> None:
    days = [pd.Timestamp(f"2024-01-{d:02d}") for d in (1, 2, 3, 4, 6, 7)]
    paths = single_step_files(tmp_path, days)
    with pytest.raises(
        IncompatibleArraysError,
        match=r"gap along 'time' between \S*day_20240104\.nc and \S*day_20240106\.nc: "
        r"2024-01-04T00:00:00\S* is followed by 2024-01-06T00:00:00\S*, but the files' "
        r"spacing is 1 day;",
    ):
        virtualizarr_fill.open_virtual_series(_urls(paths[::-1]), REGISTRY, HDF5Parser(), "time")
    gapped = virtualizarr_fill.open_virtual_series(
        _urls(paths[::-1]), REGISTRY, HDF5Parser(), "time", allow_gaps=True
    )
    expected = native_series(paths)
    np.testing.assert_array_equal(gapped.time.values, expected.time.values)
    np.testing.assert_array_equal(read_manifest_array(gapped.v.data), expected.v.values)
    # the days that are there make a series
    whole = virtualizarr_fill.open_virtual_series(_urls(paths[:4]), REGISTRY, HDF5Parser(), "time")
    np.testing.assert_array_equal(whole.time.values, np.array(days[:4], "datetime64[ns]"))


def test_single_step_files_hours_apart_name_the_step_in_hours(tmp_path: Path) -> None:
    hours = [pd.Timestamp("2024-01-01") + pd.Timedelta(hours=6 * k) for k in (0, 1, 2, 4)]
    paths = []
    for k, hour in enumerate(hours):
        (path,) = single_step_files(tmp_path / str(k), [hour])
        paths.append(path)
    with pytest.raises(IncompatibleArraysError, match=r"spacing is 6 hours;"):
        virtualizarr_fill.open_virtual_series(_urls(paths), REGISTRY, HDF5Parser(), "time")


def test_single_step_monthly_files_are_not_gaps(tmp_path: Path) -> None:
    """Monthly means, one file a month: 28 to 31 days apart by design, not a gap."""
    months = list(pd.date_range("2023-01-01", periods=14, freq="MS"))
    paths = single_step_files(tmp_path, months)
    series = virtualizarr_fill.open_virtual_series(_urls(paths), REGISTRY, HDF5Parser(), "time")
    expected = native_series(paths)
    np.testing.assert_array_equal(series.time.values, expected.time.values)
    np.testing.assert_array_equal(read_manifest_array(series.v.data), expected.v.values)


@pytest.mark.parametrize("calendar", ["standard", "noleap", "360_day"])
def test_time_bounds_in_each_files_own_units(tmp_path: Path, calendar: str) -> None:
    """Bounds count in their coordinate's units, each file its own: each file's are read
    with its own units, as xarray reads them, in any calendar."""
    paths = calendar_files(tmp_path, calendar, [12, 0, 6], bounds=True)
    series = virtualizarr_fill.open_virtual_series(_urls(paths), REGISTRY, HDF5Parser(), "time")
    expected = native_series(paths)
    np.testing.assert_array_equal(series.time.values, expected.time.values)
    np.testing.assert_array_equal(series.time_bnds.values, expected.time_bnds.values)
    np.testing.assert_array_equal(read_manifest_array(series.tas.data), expected.tas.values)
