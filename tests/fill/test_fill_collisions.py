"""Lazy fill-value collision check (seed 003) on raw values read back from Zarr v3 stores."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

import dask.array
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualizarr_fill.fill import (
    FillDecision,
    FillValueWarning,
    check_fill_collisions,
    combine_fill_decisions,
    consolidate_hdf5_fill,
    consolidate_tiff_fill,
)

F4 = np.dtype("float32")


def write_store(path: Path, arrays: dict[str, tuple[np.ndarray, FillDecision]]) -> None:
    group = zarr.create_group(zarr.storage.LocalStore(path), zarr_format=3)
    for name, (data, decision) in arrays.items():
        array = group.create_array(
            name,
            shape=data.shape,
            chunks=(4,),
            dtype=data.dtype,
            fill_value=decision.fill_value,
            attributes=decision.attributes,
            dimension_names=[f"x_{name}"],
        )
        array[...] = data


def open_raw(path: Path) -> xr.Dataset:
    return xr.open_zarr(path, zarr_format=3, consolidated=False, mask_and_scale=False, chunks={})


def test_fill_value_and_sentinel_collisions_are_counted(tmp_path: Path) -> None:
    # HDF5 style: header fill 0, sentinel -9999 (seed 001's common disagreement)
    decision = consolidate_hdf5_fill(
        np.float32(0), {"_FillValue": np.float32(-9999)}, F4, source="a.h5"
    )
    data = np.array([0, 1, -9999, 0, 5, 6, 0, -9999, 9, 10, 11, 12], dtype=F4)
    write_store(tmp_path / "s.zarr", {"v": (data, decision)})
    ds = open_raw(tmp_path / "s.zarr")
    assert isinstance(ds["v"].data, dask.array.Array)

    report = check_fill_collisions(ds)
    v = report["v"]
    assert v.fill_value == np.float32(0)
    assert v.fill_value_count == int(np.sum(data == 0))  # valid zeros, masked by fill-as-mask
    assert v.sentinel_count == int(np.sum(data == -9999))  # unmasked by fill-as-mask readers
    assert v.collides and report.collisions == (v,)
    assert "3 valid values equal the Zarr fill_value 0.0" in str(report)


def test_no_collision_when_fill_value_is_the_sentinel(tmp_path: Path) -> None:
    decision = consolidate_tiff_fill({"gdal_no_data": "-9999"}, F4, source="a.tif")
    data = np.array([1, 2, -9999, 4, 5, 6, 7, 8], dtype=F4)
    write_store(tmp_path / "s.zarr", {"v": (data, decision)})
    report = check_fill_collisions(open_raw(tmp_path / "s.zarr"))
    assert not report["v"].collides
    assert report.collisions == ()
    assert str(report) == "no fill-value collisions"


def test_concatenation_with_use_first_reports_the_other_files_sentinel(tmp_path: Path) -> None:
    a = consolidate_tiff_fill({"gdal_no_data": "-9999"}, F4, source="a.tif")
    b = consolidate_tiff_fill({"gdal_no_data": "-3.4e+38"}, F4, source="b.tif")
    with pytest.warns(FillValueWarning):
        combined = combine_fill_decisions([a, b], ["a.tif", "b.tif"], on_conflict="use_first")
    data_a = np.array([1, -9999, 3, 4], dtype=F4)
    data_b = np.array([np.float32(-3.4e38), 6, np.float32(-3.4e38), 8], dtype=F4)
    concatenated = np.concatenate([data_a, data_b])
    merged = FillDecision(combined.fill_value, combined.attributes, F4)
    write_store(tmp_path / "s.zarr", {"v": (concatenated, merged)})

    ds = open_raw(tmp_path / "s.zarr")
    report = check_fill_collisions(ds, extra_sentinels=combined.unmasked_sentinels)
    assert report["v"].extra_counts == ((np.float32(-3.4e38), 2),)
    assert "2 values equal -3.3999999521443642e+38" in str(report)
    # and indeed xarray reads them as valid data
    decoded = xr.open_zarr(tmp_path / "s.zarr", zarr_format=3, consolidated=False)["v"].values
    assert int(np.sum(decoded == np.float32(-3.4e38))) == 2


def test_extra_sentinels_per_variable_and_unrepresentable_ones(tmp_path: Path) -> None:
    d8 = consolidate_tiff_fill({"gdal_no_data": "0"}, np.dtype("uint8"), source="a.tif")
    df = consolidate_tiff_fill({}, F4, source="a.tif")
    write_store(
        tmp_path / "s.zarr",
        {
            "u": (np.array([0, 1, 255, 255], dtype="u1"), d8),
            "f": (np.array([np.nan, 1, 2, np.nan], dtype=F4), df),
        },
    )
    report = check_fill_collisions(
        open_raw(tmp_path / "s.zarr"), extra_sentinels={"u": [255, -9999], "f": [np.nan]}
    )
    assert report["u"].extra_counts == ((np.uint8(255), 2),)  # -9999 cannot occur in uint8
    assert report["f"].extra_counts[0][1] == 2  # NaN matched with isnan
    # f has no sentinel: its zeros would be masked by fill-as-mask readers (none here)
    assert report["f"].fill_value_count == 0


def test_decoded_dataset_is_refused(tmp_path: Path) -> None:
    decision = consolidate_tiff_fill({"gdal_no_data": "-9999"}, F4, source="a.tif")
    write_store(tmp_path / "s.zarr", {"v": (np.arange(4, dtype=F4), decision)})
    decoded = xr.open_zarr(tmp_path / "s.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(ValueError, match="mask_and_scale=False"):
        check_fill_collisions(decoded)


def test_string_variables_are_skipped_when_named() -> None:
    ds = xr.Dataset({"s": ("x", np.array(["a", "b"]))})
    report = check_fill_collisions(ds, variables=["s"])
    assert "not numeric" in report.skipped["s"]
    assert "s: not checked" in str(report)


class CountingSource:
    """An array that records every read, to show how the check touches the data."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.shape = data.shape
        self.dtype = data.dtype
        self.ndim = data.ndim
        self.reads: list[int] = []
        self.lock = threading.Lock()

    def __getitem__(self, key: Any) -> np.ndarray:
        block = self.data[key]
        with self.lock:
            self.reads.append(block.size)
        return block


def test_check_is_lazy_and_reads_each_chunk_once() -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(-5, 5, size=(40, 50)).astype(F4)
    source = CountingSource(data)
    lazy = dask.array.from_array(source, chunks=(10, 10), lock=False, asarray=True)
    decision = consolidate_hdf5_fill(np.float32(0), {"_FillValue": np.float32(-5)}, F4, source="x")
    ds = xr.Dataset({"v": (("y", "x"), lazy, decision.attributes)})
    ds["v"].encoding["fill_value"] = decision.fill_value

    before = len(source.reads)  # building the dask array may probe an empty slice
    assert sum(source.reads) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_fill_collisions(ds, extra_sentinels=[4])
    reads = source.reads[before:]
    assert max(reads) == 100  # one chunk at a time, never the whole array
    assert sum(reads) == data.size  # three reductions, each chunk read once
    v = report["v"]
    assert v.fill_value_count == int(np.sum(data == 0))
    assert v.sentinel_count == int(np.sum(data == -5))
    assert v.extra_counts == ((np.float32(4), int(np.sum(data == 4))),)
