"""Attributes holding NaN or ±infinity: Icechunk cannot store them (strict JSON), so
``to_icechunk`` leaves them out with a warning naming each and its file, instead of
failing the whole write; every other attribute and all data are written.
"""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import virtualizarr
import xarray as xr

from tests._manifest_builders import file_url, icechunk_read, icechunk_repo, local_registry
from virtualizarr_fill import to_icechunk
from virtualizarr_fill.hdf5 import HDF5Parser
from virtualizarr_fill.writers.attributes import NonFiniteAttributeWarning


def _non_finite_attributes(path: Path) -> Path:
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 3)
        v = ds.createVariable("v", "f4", ("x",))
        v[:] = [1, 2, 3]
        ds.valid_range_f = np.array([-np.inf, np.inf], "f4")
        ds.title = "finite attributes stay"
        v.actual_max = np.float32(np.inf)
        v.unknown = np.float64(np.nan)
        v.scale_hint = np.array([0.5, 2.0])
    return path


@pytest.mark.parametrize("as_tree", [False, True])
def test_non_finite_attributes_are_left_out_with_a_warning(tmp_path: Path, as_tree: bool) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = _non_finite_attributes(data_dir / "inf_attr.nc")
    vds = virtualizarr.open_virtual_dataset(
        file_url(path), registry=local_registry(), parser=HDF5Parser()
    )
    repo = icechunk_repo(tmp_path / "repo", data_dir)
    session = repo.writable_session("main")
    data: xr.Dataset | xr.DataTree = xr.DataTree(vds) if as_tree else vds
    with pytest.warns(NonFiniteAttributeWarning) as caught:
        to_icechunk(data, session.store)
    session.commit("write")
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3, messages
    for name in ("actual_max", "unknown", "valid_range_f"):
        assert any(f"'{name}'" in m and str(path) in m for m in messages), name

    ds = icechunk_read(repo)
    native = xr.open_dataset(path, engine="h5netcdf")
    np.testing.assert_array_equal(ds.v.values, native.v.values)
    assert ds.attrs["title"] == native.attrs["title"]
    assert "valid_range_f" not in ds.attrs
    np.testing.assert_array_equal(ds.v.attrs["scale_hint"], native.v.attrs["scale_hint"])
    assert "actual_max" not in ds.v.attrs and "unknown" not in ds.v.attrs
    # the dataset handed in is not changed
    assert "valid_range_f" in vds.attrs and "actual_max" in vds.v.attrs
