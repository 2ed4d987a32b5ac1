"""netCDF-4 files whose ``_FillValue`` differs, combined under a fill-conflict rule and
read back with xarray's default CF decoding.

With ``use_first`` the first file's sentinel is the combination's, in the Zarr
``fill_value`` and in the ``_FillValue`` attribute alike, whatever combines the files
(``open_virtual_series``, ``xr.concat``, ``xr.combine_nested``, the CLI): the first
file's missing values read as NaN, as netCDF4 reads them; the other file's sentinel is
documented as no longer masked and reads as its raw value. With ``drop`` no
``_FillValue`` is written, so every sentinel reads as its raw value. Expected values
come from xarray reading each file natively (netCDF4 engine).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

import virtualizarr_fill
from virtualizarr_fill import HDF5Parser, IncompatibleArraysError, open_virtual_series
from virtualizarr_fill.cli import EXIT_OK, main
from virtualizarr_fill.fill import FillValueWarning, decode_fill_value

FIRST, OTHER = -999.0, -1.0


def _write(path: Path, t0: int, fill: float) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 2001-01-01"
        time[:] = t0 + np.arange(6)
        v = ds.createVariable("v", "f4", ("time", "x"), fill_value=fill, chunksizes=(4, 3))
        values = np.arange(18, dtype="f4").reshape(6, 3) + t0
        values[0, 0] = fill  # one missing value per file, its own sentinel
        v[:] = values
    return path


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    return [
        _write(tmp_path / "a0.nc", 0, FIRST),
        _write(tmp_path / "a1.nc", 6, FIRST),
        _write(tmp_path / "b.nc", 12, OTHER),
    ]


@pytest.fixture
def registry() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": LocalStore()})


def _native(path: Path, **kwargs: Any) -> np.ndarray:
    with xr.open_dataset(path, engine="netcdf4", **kwargs) as ds:
        return ds["v"].values


def _use_first_expected(files: list[Path]) -> np.ndarray:
    """The first files as netCDF4 reads them (sentinel masked); the last file's own
    sentinel, which the combination no longer masks, as its raw value."""
    return np.concatenate(
        [_native(files[0]), _native(files[1]), _native(files[2], mask_and_scale=False)]
    )


def _drop_expected(files: list[Path]) -> np.ndarray:
    return np.concatenate([_native(f, mask_and_scale=False) for f in files])


def _urls(files: list[Path]) -> list[str]:
    return [f.resolve().as_uri() for f in files]


def _virtual(files: list[Path], registry: ObjectStoreRegistry) -> list[xr.Dataset]:
    return [open_virtual_dataset(u, registry=registry, parser=HDF5Parser()) for u in _urls(files)]


def _icechunk(ds: xr.Dataset, path: Path, files: list[Path]) -> xr.Dataset:
    repo = virtualizarr_fill.create_repository(str(path), _urls(files))
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(ds, session.store)
    session.commit("combined")
    return virtualizarr_fill.open_icechunk(str(path))


def _kerchunk(ds: xr.Dataset, path: Path) -> xr.Dataset:
    virtualizarr_fill.to_kerchunk(ds, str(path), format="json", zarr_format=3)
    return virtualizarr_fill.open_kerchunk(str(path))


def _assert_use_first(ds: xr.Dataset, files: list[Path]) -> None:
    np.testing.assert_array_equal(ds["v"].values, _use_first_expected(files))
    assert ds["v"].encoding["_FillValue"] == np.float32(FIRST)
    assert np.isnan(ds["v"].values[0, 0]) and ds["v"].values[12, 0] == OTHER


def test_series_use_first_keeps_first_files_fill_attribute(
    files: list[Path], registry: ObjectStoreRegistry, tmp_path: Path
) -> None:
    with pytest.warns(FillValueWarning, match="keeps -999.0"):
        series = open_virtual_series(
            _urls(files), registry, HDF5Parser(), "time", on_fill_conflict="use_first"
        )
    array = series["v"].data
    assert array.metadata.fill_value == np.float32(FIRST)
    assert decode_fill_value(series["v"].attrs["_FillValue"], "float32") == np.float32(FIRST)
    _assert_use_first(_icechunk(series, tmp_path / "s.icechunk", files), files)
    _assert_use_first(_kerchunk(series, tmp_path / "s.json"), files)


@pytest.mark.parametrize("combine_attrs", ["drop_conflicts", "override", "drop"])
def test_xr_concat_use_first_writes_first_files_fill(
    files: list[Path], registry: ObjectStoreRegistry, tmp_path: Path, combine_attrs: str
) -> None:
    # xarray merges the attributes itself (drop_conflicts drops the differing
    # _FillValue); the written store still has the rule's sentinel.
    with virtualizarr_fill.fill_conflicts("use_first"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        combined = xr.concat(
            _virtual(files, registry),
            dim="time",
            data_vars="minimal",
            coords="minimal",
            compat="override",
            combine_attrs=combine_attrs,
        )
    _assert_use_first(_icechunk(combined, tmp_path / "c.icechunk", files), files)
    _assert_use_first(_kerchunk(combined, tmp_path / "c.json"), files)


def test_combine_nested_use_first(
    files: list[Path], registry: ObjectStoreRegistry, tmp_path: Path
) -> None:
    with virtualizarr_fill.fill_conflicts("use_first"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        combined = xr.combine_nested(
            _virtual(files, registry),
            concat_dim="time",
            data_vars="minimal",
            coords="minimal",
            compat="override",
            combine_attrs="drop_conflicts",
        )
    _assert_use_first(_kerchunk(combined, tmp_path / "n.json"), files)


def test_drop_writes_no_fill_attribute_even_when_xarray_keeps_one(
    files: list[Path], registry: ObjectStoreRegistry, tmp_path: Path
) -> None:
    # combine_attrs="override" keeps the first file's _FillValue; the rule dropped it.
    with virtualizarr_fill.fill_conflicts("drop"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        combined = xr.concat(
            _virtual(files, registry),
            dim="time",
            data_vars="minimal",
            coords="minimal",
            compat="override",
            combine_attrs="override",
        )
    with pytest.warns(FillValueWarning, match="variable 'v'.*not written"):
        ds = _kerchunk(combined, tmp_path / "d.json")
    assert "_FillValue" not in ds["v"].encoding
    np.testing.assert_array_equal(ds["v"].values, _drop_expected(files))


def test_refusal_names_the_variable(files: list[Path], registry: ObjectStoreRegistry) -> None:
    with pytest.raises(IncompatibleArraysError, match=r"cannot concatenate variable 'v'.*b\.nc"):
        open_virtual_series(_urls(files), registry, HDF5Parser(), "time")


def test_cli_use_first_masks_the_first_files_sentinel(
    files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.icechunk"
    argv = [*map(str, files), "--concat-dim", "time", "--out", str(out)]
    assert main(["build", *argv, "--on-fill-conflict", "use_first"]) == EXIT_OK
    _assert_use_first(virtualizarr_fill.open_icechunk(str(out)), files)
    assert main(["build", *argv, "--overwrite"]) != EXIT_OK
    assert "variable 'v'" in capsys.readouterr().err
