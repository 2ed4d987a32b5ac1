"""open_virtual_series over files whose time variables each have their own units.

xarray decodes each file's times with that file's units; a virtual variable has one
``units`` attribute for every file's stored numbers. The result, written to a real
Icechunk repository and read back, must hold the dates ``xr.open_mfdataset`` reads from
the files with h5netcdf, or the combination is refused naming the variable, the files
and their units.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write
from virtualizarr_fill import HDF5Parser, IncompatibleArraysError

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def bounded_weeks(directory: Path, units: list[str]) -> list[Path]:
    """netCDF-4 files (written with netCDF4-python) of 7 daily steps each, ``time`` in
    each file's own ``units`` with a ``time_bnds`` variable that has none (CF: bounds
    take their coordinate's units)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for k, unit in enumerate(units):
        path = directory / f"week{k}.nc"
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("lat", 3)
            ds.createDimension("nv", 2)
            time = ds.createVariable("time", "f8", ("time",))
            time.units = unit
            time.calendar = "standard"
            time.bounds = "time_bnds"
            offset = 7 * k if unit == units[0] else 0  # one series whatever the units
            time[:] = offset + np.arange(7) + 0.5
            bounds = ds.createVariable("time_bnds", "f8", ("time", "nv"))
            bounds[:] = offset + np.stack([np.arange(7), np.arange(7) + 1], axis=1)
            lat = ds.createVariable("lat", "f4", ("lat",))
            lat[:] = [10, 20, 30]
            tas = ds.createVariable("tas", "f4", ("time", "lat"), chunksizes=(4, 3))
            tas[:] = rng.random((7, 3)).astype("f4")
        paths.append(path)
    return paths


WEEKS = ["days since 2000-01-01", "days since 2000-01-08", "days since 2000-01-15"]
SAME_WEEKS = ["days since 2000-01-01"] * 3


def observed(directory: Path, engine: str, per_file_units: bool = True) -> list[Path]:
    """Files written by xarray with a datetime data variable ``obs_time``, whose units
    xarray picks for each file from its first value (or one ``units`` for all)."""
    directory.mkdir(parents=True, exist_ok=True)
    start = pd.Timestamp("2020-01-01")
    paths = []
    for k, n in enumerate([5, 6, 7]):
        time = pd.date_range(start, periods=n, freq="6h")
        start = time[-1] + pd.Timedelta("6h")
        ds = xr.Dataset(
            {
                "obs_time": (("time",), time + pd.Timedelta("1min")),
                "temp": (("time", "y"), np.full((n, 3), float(k), "f4")),
            },
            coords={"time": time, "y": [1.0, 2.0, 3.0]},
        )
        encoding: dict[str, dict[str, object]] = {
            "time": {"units": f"hours since {time[0]}", "dtype": "int64"}
        }
        if not per_file_units:
            encoding["obs_time"] = {"units": "minutes since 2020-01-01", "dtype": "int64"}
        path = directory / f"obs{k}.nc"
        ds.to_netcdf(path, engine=engine, encoding=encoding)
        paths.append(path)
    return paths


def native(paths: list[Path]) -> xr.Dataset:
    return xr.open_mfdataset(
        sorted(paths),
        engine="h5netcdf",
        combine="nested",
        concat_dim="time",
        data_vars="minimal",
        coords="minimal",
        compat="override",
    ).load()


def series_read_back(tmp_path: Path, paths: list[Path], **kwargs: object) -> xr.Dataset:
    """open_virtual_series of the files (given out of order), written to Icechunk and
    read back with xarray."""
    series = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in paths[::-1]], REGISTRY, HDF5Parser(), "time", **kwargs
    )
    repo = icechunk_repo(tmp_path / "repo", paths[0].parent)
    icechunk_write(repo, series)
    return icechunk_read(repo)


@pytest.mark.parametrize("units", [WEEKS, SAME_WEEKS], ids=["per-file", "same"])
def test_time_bounds_read_with_each_files_units(tmp_path: Path, units: list[str]) -> None:
    paths = bounded_weeks(tmp_path / "data", units)
    expected = native(paths)
    read = series_read_back(tmp_path, paths)
    for name in ("time", "time_bnds"):
        assert read[name].dims == expected[name].dims
        np.testing.assert_array_equal(read[name].values, expected[name].values)
    assert "time_bnds" in read.data_vars  # a data variable, as xarray reads it
    np.testing.assert_array_equal(read.tas.values, expected.tas.values)
    # the week boundaries: the second file's first bound is the eighth of January
    assert str(read.time_bnds.values[7, 0]).startswith("2000-01-08")


@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
@pytest.mark.parametrize("per_file_units", [True, False], ids=["per-file", "same"])
def test_datetime_variable_written_by_xarray_reads_its_dates(
    tmp_path: Path, engine: str, per_file_units: bool
) -> None:
    paths = observed(tmp_path / "data", engine, per_file_units)
    units = {xr.open_dataset(p, decode_times=False).obs_time.attrs["units"] for p in paths}
    assert len(units) == (3 if per_file_units else 1)
    expected = native(paths)
    read = series_read_back(tmp_path, paths)
    assert read.obs_time.dtype == np.dtype("datetime64[ns]")
    np.testing.assert_array_equal(read.obs_time.values, expected.obs_time.values)
    np.testing.assert_array_equal(read.time.values, expected.time.values)
    np.testing.assert_array_equal(read.temp.values, expected.temp.values)


def stations(directory: Path, units: list[str]) -> list[Path]:
    """Files of a 2-D time variable ``last_seen(time, station)`` in each file's own
    units: too large a variable to be read at combining, so it stays virtual."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, unit in enumerate(units):
        path = directory / f"st{k}.nc"
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", 4)
            ds.createDimension("station", 2)
            time = ds.createVariable("time", "f8", ("time",))
            time.units = "days since 2000-01-01"
            time[:] = 4 * k + np.arange(4)
            seen = ds.createVariable("last_seen", "f8", ("time", "station"))
            seen.units = unit
            seen[:] = np.zeros((4, 2))
        paths.append(path)
    return paths


@pytest.mark.parametrize("parallel", [False, True], ids=["here", "executor"])
def test_two_dimensional_times_in_different_units_are_refused(
    tmp_path: Path, parallel: bool
) -> None:
    days, hours = "days since 2000-01-01", "hours since 1990-01-01"
    paths = stations(tmp_path, [days, days, hours])
    urls = [f"file://{p}" for p in paths]
    executor = ThreadPoolExecutor(3) if parallel else None
    try:
        with pytest.raises(IncompatibleArraysError) as refused:
            virtualizarr_fill.open_virtual_series(
                urls, REGISTRY, HDF5Parser(), "time", executor=executor
            )
    finally:
        if executor is not None:
            executor.shutdown()
    message = str(refused.value)
    assert "'last_seen'" in message
    assert urls[2] in message and urls[0] in message
    assert "'hours since 1990-01-01'" in message and "'days since 2000-01-01'" in message
    # the same units everywhere combine, and read back the files' dates
    same = stations(tmp_path / "same", ["days since 2000-01-01"] * 3)
    read = series_read_back(tmp_path, same)
    np.testing.assert_array_equal(read.last_seen.values, native(same).last_seen.values)
    assert read.last_seen.dtype == np.dtype("datetime64[ns]")


def test_decode_times_false_refuses_numbers_stored_in_other_units(tmp_path: Path) -> None:
    days, hours = "days since 2000-01-01", "hours since 1990-01-01"
    paths = stations(tmp_path, [days, hours, days])
    urls = [f"file://{p}" for p in paths]
    # undecoded, the numbers of one variable in two units would be one column of
    # numbers meaning different things, its units attribute dropped
    with pytest.raises(IncompatibleArraysError, match="'last_seen': units is") as refused:
        virtualizarr_fill.open_virtual_series(
            urls, REGISTRY, HDF5Parser(), "time", decode_times=False
        )
    assert urls[0] in str(refused.value) and urls[1] in str(refused.value)
    same = stations(tmp_path / "same", [days] * 3)
    series = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in same], REGISTRY, HDF5Parser(), "time", decode_times=False
    )
    assert series.last_seen.attrs["units"] == days
    assert series.last_seen.shape == (12, 2)


def test_on_a_dask_cluster_times_are_read_and_refused_alike(
    tmp_path: Path, local_cluster: object
) -> None:
    from distributed import Client

    weeks = bounded_weeks(tmp_path / "weeks", WEEKS)
    days, hours = "days since 2000-01-01", "hours since 1990-01-01"
    refused_files = stations(tmp_path / "stations", [days, days, hours])
    with Client(local_cluster) as client:
        read = series_read_back(tmp_path, weeks, executor=client)
        with pytest.raises(IncompatibleArraysError, match="'last_seen' holds times in 'hours"):
            virtualizarr_fill.open_virtual_series(
                [f"file://{p}" for p in refused_files],
                REGISTRY,
                HDF5Parser(),
                "time",
                executor=client,
            )
    np.testing.assert_array_equal(read.time_bnds.values, native(weeks).time_bnds.values)
