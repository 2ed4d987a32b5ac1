"""Kerchunk references into files on S3 reopen: through ``open_kerchunk``, through the
xarray recipe of docs/guide/kerchunk.md, and through ``virtualizarr-fill verify``.

The files are written with rasterio (GDAL) and netCDF4 (netCDF-C), copied into a bucket
of a real S3 server on loopback (moto), and read back against the native readers of the
local originals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from virtualizarr_fill.cli import EXIT_OK, main

rasterio = pytest.importorskip("rasterio")
netCDF4 = pytest.importorskip("netCDF4")
pytest.importorskip("s3fs")  # the kerchunk extra's reader of s3:// references

from rasterio.transform import from_origin  # noqa: E402

BUCKET = "kerchunk-targets"


@pytest.fixture
def kerchunk_bucket(s3_environment: Any) -> Any:
    """The loopback server, AWS variables set, with this module's bucket."""
    if BUCKET not in {b["Name"] for b in s3_environment.client().list_buckets()["Buckets"]}:
        s3_environment.create_bucket(BUCKET)
    return s3_environment


def _tiles(directory: Path) -> list[Path]:
    """Two GeoTIFF tiles one above the other, 16-row strips (the last one short)."""
    rng = np.random.default_rng(3)
    paths = []
    for row in range(2):
        path = directory / f"tile_{row}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=50, height=40, count=1, dtype="float32",
            crs="EPSG:32633", nodata=-9999, compress="deflate", blockysize=16,
            transform=from_origin(500_000, 4_000_000 - row * 400, 10, 10),
        ) as dst:  # fmt: skip
            data = rng.random((40, 50), dtype="float32")
            data[3, 4] = -9999
            dst.write(data, 1)
        paths.append(path)
    return paths


def _days(directory: Path) -> list[Path]:
    """netCDF-4 files of 4 days each, a packed variable with a fill value."""
    paths = []
    for k in range(2):
        path = directory / f"day_{k}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", 4)
            nc.createDimension("lat", 3)
            time = nc.createVariable("time", "f8", ("time",))
            time.units = "days since 2000-01-01"
            time[:] = np.arange(4) + 4 * k
            temp = nc.createVariable("temp", "i2", ("time", "lat"), chunksizes=(3, 3),
                                     fill_value=-32767)  # fmt: skip
            temp.scale_factor = 0.5
            temp.add_offset = 10.0
            temp.set_auto_maskandscale(False)
            values = (np.arange(12, dtype="i2").reshape(4, 3) + 100 * k).astype("i2")
            values[1, 2] = -32767
            temp[:] = values
        paths.append(path)
    return paths


def _upload(server: Any, paths: list[Path], prefix: str) -> list[str]:
    for path in paths:
        server.upload(BUCKET, f"{prefix}/{path.name}", path)
    return [f"s3://{BUCKET}/{prefix}/{path.name}" for path in paths]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == EXIT_OK, out + err
    return out + err


def _tiles_native(paths: list[Path]) -> np.ndarray:
    with rasterio.open(paths[0]) as top, rasterio.open(paths[1]) as bottom:
        return np.concatenate([top.read(1, masked=True).filled(np.nan),
                               bottom.read(1, masked=True).filled(np.nan)])  # fmt: skip


@pytest.mark.parametrize("suffix", ["json", "parquet"])
def test_tiff_references_on_s3_reopen(
    tmp_path: Path, kerchunk_bucket: Any, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    import virtualizarr_fill

    paths = _tiles(tmp_path)
    _upload(kerchunk_bucket, paths, f"tiles-{suffix}")
    pattern = f"s3://{BUCKET}/tiles-{suffix}/tile_*.tif"
    refs = tmp_path / f"column.{suffix}"
    _cli(capsys, "build", pattern, "--concat-dim", "y", "--out", str(refs), "--workers", "0")

    ds = virtualizarr_fill.open_kerchunk(refs)
    np.testing.assert_array_equal(ds["band_data"].values[0], _tiles_native(paths))

    out = _cli(capsys, "verify", str(refs), "--against", pattern)
    assert "of 2 files: all equal" in out


def test_netcdf_references_on_s3_read_as_netcdf4(
    tmp_path: Path, kerchunk_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import virtualizarr_fill

    paths = _days(tmp_path)
    urls = _upload(kerchunk_bucket, paths, "days")
    refs = tmp_path / "days.json"
    _cli(capsys, "build", *urls, "--concat-dim", "time", "--out", str(refs), "--workers", "0")

    ds = virtualizarr_fill.open_kerchunk(refs)
    parts = []
    for path in paths:
        with netCDF4.Dataset(path) as native:
            parts.append(native["temp"][:])  # masked and scaled by netCDF-C's reader
    expected = np.ma.concatenate(parts)
    np.testing.assert_array_equal(ds["temp"].values, np.ma.filled(expected, np.nan))
    assert ds["temp"].values.dtype == expected.dtype

    out = _cli(capsys, "verify", str(refs), "--against", *urls)
    assert "of 2 files: all equal" in out


def test_the_guide_recipe_reads_s3_references(
    tmp_path: Path, kerchunk_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/guide/kerchunk.md's recipe for references into S3, as written there."""
    import fsspec
    from zarr.storage import FsspecStore

    from virtualizarr_fill import enable_rectilinear_chunks

    enable_rectilinear_chunks()
    paths = _tiles(tmp_path)
    _upload(kerchunk_bucket, paths, "recipe")
    refs = tmp_path / "column.json"
    pattern = f"s3://{BUCKET}/recipe/tile_*.tif"
    _cli(capsys, "build", pattern, "--concat-dim", "y", "--out", str(refs), "--workers", "0")

    fs = fsspec.filesystem(
        "reference", fo=str(refs), remote_protocol="s3",
        remote_options={"asynchronous": True}, asynchronous=True,
    )  # fmt: skip
    ds = xr.open_zarr(FsspecStore(fs, read_only=True, path=""), consolidated=False, zarr_format=3)
    np.testing.assert_array_equal(ds["band_data"].values[0], _tiles_native(paths))
