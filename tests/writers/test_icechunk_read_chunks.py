"""The dask chunks ``open_icechunk`` chooses: whole stored chunks merged up to a target
size, never one task per strip, with the values of the native readers.

Repositories are real (``virtualizarr-fill build`` on disk); files are written with GDAL
(rasterio) and netCDF-C, and values read back are compared with rasterio,
``rasterio.merge`` and h5py.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import virtualizarr_fill
from tests._native_references import rasterio_merge
from virtualizarr_fill.cli import EXIT_OK, main

rasterio = pytest.importorskip("rasterio")
netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")

ROWS, COLS, STRIP = 100, 48, 16  # 100 = 6 strips of 16 + a short last strip of 4


def _build(capsys: pytest.CaptureFixture[str], *argv: str) -> None:
    code = main(["build", *argv, "--workers", "0"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, out + err


def _column(directory: Path, count: int = 12) -> list[Path]:
    """GeoTIFFs (deflate, nodata 0, strips of 16 rows) stacked along y, top first."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True)
    rng = np.random.default_rng(16)
    paths = []
    for k in range(count):
        path = directory / f"part_{k:02d}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="uint16",
            crs="EPSG:32633", transform=from_origin(500000, 6000000 - k * ROWS * 10, 10, 10),
            nodata=0, compress="deflate", blockysize=STRIP,
        ) as dst:  # fmt: skip
            dst.write(rng.integers(0, 3000, (2, ROWS, COLS)).astype("uint16"))
        paths.append(path)
    return paths


def _stored_boundaries(edges: Any, extent: int) -> set[int]:
    sizes = [edges] * math.ceil(extent / edges) if isinstance(edges, int) else list(edges)
    return {min(b, extent) for b in itertools.accumulate(sizes)} | {0}


def _assert_whole_stored_chunks(variable: Any) -> None:
    """Every dask chunk boundary is a stored chunk boundary, and there are fewer dask
    chunks than stored chunks along some dimension."""
    stored = variable.encoding["chunks"]
    fewer = False
    for dask_sizes, edges, extent in zip(variable.chunks, stored, variable.shape, strict=True):
        boundaries = set(itertools.accumulate(dask_sizes)) | {0}
        assert boundaries <= _stored_boundaries(edges, extent), (dask_sizes, edges)
        fewer |= len(dask_sizes) < len(_stored_boundaries(edges, extent)) - 1
    assert fewer, (variable.chunks, stored)


def test_column_of_geotiffs_reads_as_rasterio_in_whole_stored_chunks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _column(tmp_path / "tiles")
    store = tmp_path / "column.icechunk"
    _build(capsys, *map(str, paths), "--out", str(store))
    expected = []
    for path in paths:
        with rasterio.open(path) as src:
            expected.append(src.read())
    native = np.concatenate(expected, axis=1)

    by_default = virtualizarr_fill.open_icechunk(str(store), mask_and_scale=False)
    # the whole column is far below the default target: one task
    assert by_default["band_data"].chunks == ((2,), (ROWS * len(paths),), (COLS,))
    np.testing.assert_array_equal(by_default["band_data"].values, native)

    # a target of about three files' rows: several tasks, each of whole strips
    target = 3 * ROWS * COLS * 2 * native.dtype.itemsize
    small = virtualizarr_fill.open_icechunk(str(store), chunk_bytes=target, mask_and_scale=False)
    variable = small["band_data"].variable
    assert variable.encoding["chunks"][1] != STRIP  # rectilinear: the short strips stay
    _assert_whole_stored_chunks(variable)
    assert 1 < len(variable.chunks[1]) < len(paths)
    assert all(s * COLS * 2 * native.dtype.itemsize <= target for s in variable.chunks[1])
    np.testing.assert_array_equal(small["band_data"].values, native)

    # decoded as xarray decodes the files' nodata
    masked = virtualizarr_fill.open_icechunk(str(store), chunk_bytes=target)["band_data"]
    np.testing.assert_array_equal(np.isnan(masked.values), native == 0)


def test_chunks_keyword_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _column(tmp_path / "tiles", count=3)
    store = tmp_path / "column.icechunk"
    _build(capsys, *map(str, paths), "--out", str(store))
    lazy = virtualizarr_fill.open_icechunk(str(store), chunks=None)
    assert lazy["band_data"].chunks is None  # no dask, as xarray
    per_strip = virtualizarr_fill.open_icechunk(str(store), chunks={})["band_data"]
    assert len(per_strip.chunks[1]) == 3 * math.ceil(ROWS / STRIP)  # one task per strip
    # a stored chunk larger than the target is one dask chunk of its own, never split
    tiny = virtualizarr_fill.open_icechunk(str(store), chunk_bytes=1)["band_data"]
    assert tiny.chunks == per_strip.chunks
    given = virtualizarr_fill.open_icechunk(str(store), chunks={"y": 100})["band_data"]
    assert given.chunks[1] == (100, 100, 100)
    np.testing.assert_array_equal(lazy["band_data"].values, given.values)


def test_mosaic_reads_as_rasterio_merge_in_whole_stored_chunks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_tiles: Any
) -> None:
    paths = write_tiles(tmp_path / "tiles")
    store = tmp_path / "mosaic.icechunk"
    _build(capsys, *map(str, paths), "--out", str(store))
    merged, _ = rasterio_merge(paths)
    row = merged.shape[2] * merged.dtype.itemsize
    ds = virtualizarr_fill.open_icechunk(str(store), chunk_bytes=40 * row, mask_and_scale=False)
    _assert_whole_stored_chunks(ds["band_data"].variable)
    np.testing.assert_array_equal(ds["band_data"].values, merged)


def test_netcdf_series_reads_as_h5py_in_whole_stored_chunks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    rng = np.random.default_rng(3)
    for k in range(5):
        path = tmp_path / f"day_{k}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", 7)  # chunks of 3 days: a short last chunk of 1
            nc.createDimension("lat", 10)
            time_ = nc.createVariable("time", "f8", ("time",))
            time_.units = "days since 2000-01-01"
            time_[:] = np.arange(7) + 7 * k
            temp = nc.createVariable("temp", "f4", ("time", "lat"), chunksizes=(3, 10))
            temp[:] = rng.random((7, 10), dtype="f4")
        paths.append(path)
    store = tmp_path / "series.icechunk"
    _build(capsys, *map(str, paths), "--concat-dim", "time", "--out", str(store))
    native = []
    for path in paths:
        with h5py.File(path) as f:
            native.append(f["temp"][()])
    ds = virtualizarr_fill.open_icechunk(str(store), chunk_bytes=8 * 10 * 4)
    _assert_whole_stored_chunks(ds["temp"].variable)
    assert max(ds["temp"].chunks[0]) <= 8
    np.testing.assert_array_equal(ds["temp"].values, np.concatenate(native))
