"""Files whose CF encoding differs are refused, never combined with one file's encoding.

A virtual variable has one ``scale_factor``, ``add_offset``, ``units``... for all its
files. Files packed differently were combined with the differing attributes dropped
(xarray's ``combine_attrs="drop_conflicts"``) or the first file's kept (``"override"``),
and read back raw or with the wrong packing. Every path that combines virtual arrays now
refuses them in one line naming the variable, the attribute, two files and their
values: ``open_virtual_series`` (in this process and on an executor),
``virtualizarr.open_virtual_mfdataset``, ``xr.concat`` of virtual datasets, and
:func:`virtualizarr_fill.check_encoding`. Files packed alike combine and read back what
``xr.open_mfdataset`` reads, bit for bit; descriptive attributes that differ are dropped
and listed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import h5netcdf
import netCDF4
import numpy as np
import pytest
import virtualizarr
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write
from virtualizarr_fill import HDF5Parser, IncompatibleArraysError

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})

#: Stored numbers of ``v`` in each file (int16 after packing).
STORED = np.arange(-6, 6, dtype="i2").reshape(4, 3) * 1000


def packed(
    directory: Path,
    encodings: list[dict[str, Any]],
    *,
    writer: str = "netcdf4",
    dataset_attrs: list[dict[str, Any]] | None = None,
) -> list[Path]:
    """netCDF-4 files of ``v(time, x)``, int16 stored numbers with each file's
    attributes (``encodings``), written with netCDF4-python (auto-scaling off: the
    stored numbers are :data:`STORED`) or h5netcdf."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, attrs in enumerate(encodings):
        path = directory / f"part{k}.nc"
        extra = (dataset_attrs or [{}] * len(encodings))[k]
        if writer == "netcdf4":
            with netCDF4.Dataset(path, "w") as ds:
                ds.setncatts(extra)
                ds.createDimension("time", 4)
                ds.createDimension("x", 3)
                time = ds.createVariable("time", "f8", ("time",))
                time.units = "days since 2000-01-01"
                time[:] = 4 * k + np.arange(4)
                v = ds.createVariable("v", "i2", ("time", "x"))
                v.set_auto_maskandscale(False)
                v.setncatts(attrs)
                v[:] = STORED + k
        else:
            with h5netcdf.File(path, "w") as ds:
                ds.attrs.update(extra)
                ds.dimensions = {"time": 4, "x": 3}
                time = ds.create_variable("time", ("time",), "f8")
                time.attrs["units"] = "days since 2000-01-01"
                time[:] = 4 * k + np.arange(4)
                v = ds.create_variable("v", ("time", "x"), "i2")
                v.attrs.update(attrs)
                v[:] = STORED + k
        paths.append(path)
    return paths


def urls_of(paths: list[Path]) -> list[str]:
    return [f"file://{p}" for p in paths]


def native(paths: list[Path]) -> xr.Dataset:
    """What xarray reads from the files, each decoded with its own attributes."""
    return xr.open_mfdataset(
        paths, engine="netcdf4", combine="nested", concat_dim="time", data_vars="minimal"
    ).load()


#: (case, the two files' attributes of ``v``, the attribute named, the values named)
CONFLICTS = [
    (
        "scale",
        [{"scale_factor": 0.01, "add_offset": 0.0}, {"scale_factor": 0.02, "add_offset": 100.0}],
        "scale_factor",
        ("0.01", "0.02"),
    ),
    (
        "offset-only",
        [{"scale_factor": 0.01, "add_offset": 0.0}, {"scale_factor": 0.01, "add_offset": 100.0}],
        "add_offset",
        ("0.0", "100.0"),
    ),
    ("units", [{"units": "K"}, {"units": "degC"}], "units", ("'K'", "'degC'")),
    (
        "unsigned",
        [{"_Unsigned": "true"}, {"_Unsigned": "false"}],
        "_Unsigned",
        ("'true'", "'false'"),
    ),
    (
        "valid-range",
        [
            {"valid_range": np.array([-6000, 6000], "i2")},
            {"valid_range": np.array([0, 6000], "i2")},
        ],
        "valid_range",
        ("-6000", "0"),
    ),
    (
        "scale-missing",
        [{"scale_factor": 0.5}, {}],
        "scale_factor",
        ("0.5", "(none)"),
    ),
]


def assert_one_line(message: str, paths: list[Path], attribute: str, values: tuple[str, str]):
    assert "\n" not in message
    assert "'v'" in message and f"{attribute} is" in message
    assert str(paths[0]) in message and str(paths[1]) in message
    assert values[0] in message and values[1] in message
    assert "separate stores" in message  # what to do


@pytest.mark.parametrize("writer", ["netcdf4", "h5netcdf"])
@pytest.mark.parametrize(
    ("encodings", "attribute", "values"),
    [c[1:] for c in CONFLICTS],
    ids=[c[0] for c in CONFLICTS],
)
def test_open_virtual_series_refuses_files_encoded_differently(
    tmp_path: Path,
    writer: str,
    encodings: list[dict[str, Any]],
    attribute: str,
    values: tuple[str, str],
) -> None:
    paths = packed(tmp_path, encodings, writer=writer)
    with pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr_fill.open_virtual_series(urls_of(paths), REGISTRY, HDF5Parser(), "time")
    assert_one_line(str(refused.value), paths, attribute, values)


def test_refused_on_an_executor_where_batches_are_merged(tmp_path: Path) -> None:
    same = {"scale_factor": 0.01, "add_offset": 0.0}
    paths = packed(tmp_path, [same] * 5 + [{"scale_factor": 0.02, "add_offset": 100.0}])
    with ThreadPoolExecutor(3) as executor, pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr_fill.open_virtual_series(
            urls_of(paths), REGISTRY, HDF5Parser(), "time", executor=executor
        )
    message = str(refused.value)
    assert "'v': scale_factor is 0.01" in message and "0.02" in message
    assert str(paths[5]) in message


def test_refused_on_a_dask_cluster_where_collectors_merge(
    tmp_path: Path, local_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributed import Client

    from virtualizarr_fill.assemble import collecting

    monkeypatch.setattr(collecting, "FAN_IN", 2)  # a tree of merges on the cluster
    same = {"scale_factor": 0.01, "add_offset": 0.0}
    paths = packed(tmp_path, [same] * 4 + [{"scale_factor": 0.01, "add_offset": 5.0}] + [same])
    with Client(local_cluster) as client, pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr_fill.open_virtual_series(
            urls_of(paths), REGISTRY, HDF5Parser(), "time", executor=client
        )
    message = str(refused.value)
    assert "'v': add_offset is" in message and "5.0" in message
    assert str(paths[4]) in message


@pytest.mark.parametrize(
    ("encodings", "attribute", "values"),
    [c[1:] for c in CONFLICTS],
    ids=[c[0] for c in CONFLICTS],
)
def test_virtualizarr_open_virtual_mfdataset_refuses(
    tmp_path: Path, encodings: list[dict[str, Any]], attribute: str, values: tuple[str, str]
) -> None:
    paths = packed(tmp_path, encodings)
    with pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr.open_virtual_mfdataset(
            urls_of(paths),
            registry=REGISTRY,
            parser=HDF5Parser(),
            concat_dim="time",
            combine="nested",
        )
    assert_one_line(str(refused.value), paths, attribute, values)


def test_xr_concat_of_virtual_datasets_refuses(tmp_path: Path) -> None:
    paths = packed(tmp_path, [c for c in CONFLICTS[0][1]])
    datasets = [
        virtualizarr.open_virtual_dataset(u, registry=REGISTRY, parser=HDF5Parser())
        for u in urls_of(paths)
    ]
    for combine_attrs in ("override", "drop_conflicts"):
        with pytest.raises(IncompatibleArraysError) as refused:
            xr.concat(datasets, dim="time", combine_attrs=combine_attrs)  # type: ignore[call-overload]
        assert_one_line(str(refused.value), paths, "scale_factor", ("0.01", "0.02"))


def test_check_encoding_names_the_variable_attribute_and_datasets(tmp_path: Path) -> None:
    paths = packed(tmp_path, CONFLICTS[1][1])
    urls = urls_of(paths)
    datasets = [
        virtualizarr.open_virtual_dataset(u, registry=REGISTRY, parser=HDF5Parser()) for u in urls
    ]
    with pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr_fill.check_encoding(datasets, names=urls)
    assert_one_line(str(refused.value), paths, "add_offset", ("0.0", "100.0"))
    with pytest.raises(IncompatibleArraysError, match=r"part1\.nc"):  # named by their files
        virtualizarr_fill.check_encoding(datasets)
    virtualizarr_fill.check_encoding(datasets[:1] * 2)  # alike: no refusal


def test_check_encoding_covers_virtualizarrs_own_parser(tmp_path: Path) -> None:
    from virtualizarr.parsers import HDFParser

    paths = packed(tmp_path, CONFLICTS[0][1])
    datasets = [
        virtualizarr.open_virtual_dataset(u, registry=REGISTRY, parser=HDFParser())
        for u in urls_of(paths)
    ]
    with pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr_fill.check_encoding(datasets)
    assert_one_line(str(refused.value), paths, "scale_factor", ("0.01", "0.02"))


def test_float32_and_float64_scale_factors_that_decode_differently_are_refused(
    tmp_path: Path,
) -> None:
    encodings = [{"scale_factor": np.float32(0.01)}, {"scale_factor": np.float64(0.01)}]
    paths = packed(tmp_path, encodings)
    one, two = (xr.open_dataset(p, engine="netcdf4").v for p in paths)
    # xarray decodes the same stored numbers to different values with each
    assert one.dtype == np.float32 and two.dtype == np.float64
    with pytest.raises(IncompatibleArraysError, match=r"scale_factor is 0\.0099999"):
        virtualizarr_fill.open_virtual_series(urls_of(paths), REGISTRY, HDF5Parser(), "time")


def series_read_back(tmp_path: Path, paths: list[Path]) -> xr.Dataset:
    series = virtualizarr_fill.open_virtual_series(
        urls_of(paths[::-1]), REGISTRY, HDF5Parser(), "time"
    )
    repo = icechunk_repo(tmp_path / "repo", paths[0].parent)
    icechunk_write(repo, series)
    return icechunk_read(repo)


@pytest.mark.parametrize("writer", ["netcdf4", "h5netcdf"])
@pytest.mark.parametrize(
    "encoding",
    [
        {"scale_factor": 0.01, "add_offset": 0.0, "units": "K"},
        {"scale_factor": 0.02, "add_offset": 100.0, "valid_range": np.array([-6000, 6000], "i2")},
        {"_Unsigned": "true", "units": "1"},
    ],
    ids=["scale", "offset-valid-range", "unsigned"],
)
def test_files_packed_alike_read_back_as_xarray_reads_them(
    tmp_path: Path, writer: str, encoding: dict[str, Any]
) -> None:
    paths = packed(tmp_path / "data", [encoding] * 3, writer=writer)
    read = series_read_back(tmp_path, paths)
    expected = native(paths)
    assert read.v.dtype == expected.v.dtype
    np.testing.assert_array_equal(read.v.values, expected.v.values)
    np.testing.assert_array_equal(read.time.values, expected.time.values)
    assert virtualizarr_fill.dropped_attributes(read) == {}


def test_equal_values_of_different_attribute_types_combine(tmp_path: Path) -> None:
    # 0.5 as a float32 and as a float64, stored numbers that both decode exactly
    paths = packed(
        tmp_path / "data", [{"scale_factor": np.float32(0.5)}, {"scale_factor": np.float64(0.5)}]
    )
    read = series_read_back(tmp_path, paths)
    expected = native(paths)
    np.testing.assert_array_equal(read.v.values, expected.v.values)
    assert read.v.dtype == expected.v.dtype == np.float64


def test_virtualizarr_path_with_equal_packing_reads_back_as_xarray(tmp_path: Path) -> None:
    encoding = {"scale_factor": 0.02, "add_offset": 100.0}
    paths = packed(tmp_path / "data", [encoding] * 3)
    combined = virtualizarr.open_virtual_mfdataset(
        urls_of(paths), registry=REGISTRY, parser=HDF5Parser(), concat_dim="time", combine="nested"
    )
    repo = icechunk_repo(tmp_path / "repo", paths[0].parent)
    icechunk_write(repo, combined)
    read = icechunk_read(repo)
    expected = native(paths)
    np.testing.assert_array_equal(read.v.values, expected.v.values)
    assert read.v.dtype == expected.v.dtype


def test_descriptive_attributes_that_differ_are_dropped_and_listed(tmp_path: Path) -> None:
    encodings = [{"scale_factor": 0.01, "comment": f"run {k}"} for k in range(3)]
    history = [{"history": f"written {k}", "title": "one series"} for k in range(3)]
    paths = packed(tmp_path / "data", encodings, dataset_attrs=history)
    series = virtualizarr_fill.open_virtual_series(urls_of(paths), REGISTRY, HDF5Parser(), "time")
    assert virtualizarr_fill.dropped_attributes(series) == {"v": ["comment"], "": ["history"]}
    assert "comment" not in series.v.attrs and "history" not in series.attrs
    assert series.attrs["title"] == "one series"
    repo = icechunk_repo(tmp_path / "repo", paths[0].parent)
    icechunk_write(repo, series)
    read = icechunk_read(repo)
    np.testing.assert_array_equal(read.v.values, native(paths).v.values)
