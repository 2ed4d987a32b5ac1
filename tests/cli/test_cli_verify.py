"""``virtualizarr-fill verify``: stores of every build mode pass without options; stores
whose values or coordinates differ from the files fail naming the file.

Files are written for each test with rasterio (GDAL), netCDF4 (netCDF-C) and h5py;
stores are real (Icechunk repositories on disk, kerchunk JSON and parquet, an S3 server
on loopback). Where a test says where a difference lies, the position comes from the
files' own georeferencing or coordinates as rasterio and h5py read them.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from tests._cli import run_cli as _run
from tests._damaged_files import damage_strip
from virtualizarr_fill.cli import EXIT_IO, EXIT_MISMATCH, EXIT_OK, EXIT_USAGE

rasterio = pytest.importorskip("rasterio")
netCDF4 = pytest.importorskip("netCDF4")

from rasterio.transform import from_origin  # noqa: E402

WIDTHS, HEIGHTS = [40, 40, 24], [32, 20]
ORIGIN, RES = (500_000.0, 4_000_000.0), 10.0


# --------------------------------------------------------------------------- helpers


def _build(capsys: pytest.CaptureFixture[str], *argv: str) -> None:
    code, _, err = _run(capsys, "build", *argv, "--workers", "0")
    assert code == EXIT_OK, err


def _verify(capsys: pytest.CaptureFixture[str], dest: Path | str, *files: Any) -> tuple[int, str]:
    code, out, err = _run(capsys, "verify", str(dest), "--against", *map(str, files))
    return code, out + err


def _passes(
    capsys: pytest.CaptureFixture[str], dest: Path | str, files: list[Any], count: int = 0
) -> str:
    """Verify, expecting every array of ``count`` files (default: one per argument) equal."""
    code, out = _verify(capsys, dest, *files)
    assert code == EXIT_OK, out
    count = count or len(files)
    verified = [line for line in out.splitlines() if line.startswith("verified ")]
    assert len(verified) == 1 and verified[0].endswith(f"of {count} files: all equal"), out
    assert int(verified[0].split()[1]) > 0
    # the progress bar counts the files the summary reports
    assert re.search(rf"verify +\[#+\] {count}/{count} files", out), out
    assert "MISMATCH" not in out and "UNVERIFIED" not in out
    return out


def _mismatches(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("MISMATCH")]


def _geotiff(
    path: Path,
    data: np.ndarray,
    left: float,
    top: float,
    *,
    nodata: float | None = 0,
    **options: Any,
) -> Path:
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=data.shape[2],
        height=data.shape[1],
        count=data.shape[0],
        dtype=data.dtype,
        crs="EPSG:32633",
        transform=from_origin(left, top, RES, RES),
        nodata=nodata,
        **options,
    ) as dst:
        dst.write(data)
    return path


def _tiles(directory: Path, *, compress: str | None = "deflate") -> list[Path]:
    """A 2x3 tile set cut from one image, the last column narrower and the last row
    shorter, in shuffled order (rasterio, nodata 0, 16-row strips)."""
    rng = np.random.default_rng(9)
    full = rng.integers(1, 250, (2, sum(HEIGHTS), sum(WIDTHS)), dtype=np.uint8)
    paths = []
    top = 0
    for r, height in enumerate(HEIGHTS):
        left = 0
        for c, width in enumerate(WIDTHS):
            options = {"compress": compress} if compress else {}
            paths.append(
                _geotiff(
                    directory / f"tile_{r}_{c}.tif",
                    full[:, top : top + height, left : left + width],
                    ORIGIN[0] + left * RES,
                    ORIGIN[1] - top * RES,
                    blockysize=16,
                    **options,
                )
            )
            left += width
        top += height
    random.Random(4).shuffle(paths)
    return paths


def _netcdf_series(directory: Path, count: int = 3, steps: int = 4) -> list[Path]:
    """netCDF-4 files of ``steps`` days each, every file with its own time units (days
    since its first day), a packed variable with a fill value, chunks of 3 steps."""
    paths = []
    for k in range(count):
        path = directory / f"day_{k}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", steps)
            nc.createDimension("lat", 3)
            time = nc.createVariable("time", "f8", ("time",))
            time.units = f"days since 2000-01-{1 + steps * k:02d}"
            time[:] = np.arange(steps)
            lat = nc.createVariable("lat", "f4", ("lat",))
            lat[:] = [10.0, 20.0, 30.0]
            temp = nc.createVariable(
                "temp", "i2", ("time", "lat"), fill_value=-1, chunksizes=(3, 3)
            )
            temp.scale_factor = 0.5
            values = np.arange(steps * 3, dtype="i2").reshape(steps, 3) + 100 * k
            values[0, 0] = -1
            nc.variables["temp"].set_auto_maskandscale(False)
            temp[:] = values
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- every build mode


def test_single_geotiff_with_nodata_scale_and_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = np.arange(2 * 30 * 20, dtype="int16").reshape(2, 30, 20)
    data[:, :3, :4] = -9999
    path = _geotiff(tmp_path / "scene.tif", data, *ORIGIN, nodata=-9999, compress="deflate")
    with rasterio.open(path, "r+") as dst:
        dst.scales, dst.offsets = (0.01, 0.01), (5.0, 5.0)
    _build(capsys, str(path), "--out", str(tmp_path / "scene.icechunk"))
    out = _passes(capsys, tmp_path / "scene.icechunk", [path])
    assert "verified 4 arrays of 1 files" in out  # band_data, band, x, y
    assert "not compared (no native reader): spatial_ref" in out


def test_single_netcdf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _netcdf_series(tmp_path, count=1)[0]
    _build(capsys, str(path), "--out", str(tmp_path / "one.icechunk"))
    out = _passes(capsys, tmp_path / "one.icechunk", [path])
    assert "verified 3 arrays of 1 files" in out  # temp, time, lat


def test_series_whose_files_have_their_own_time_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The raw time values of the store (the first file's units) differ from the later
    files' raw values, but decode to the same dates: not a mismatch."""
    import icechunk
    import zarr

    paths = _netcdf_series(tmp_path)
    repo = tmp_path / "series.icechunk"
    _build(capsys, *map(str, reversed(paths)), "--concat-dim", "time", "--out", str(repo))
    storage = icechunk.local_filesystem_storage(str(repo))
    session = icechunk.Repository.open(storage).readonly_session("main")
    stored_raw = zarr.open_group(session.store, mode="r")["time"][:]
    with h5py.File(paths[1]) as f:
        file_raw = f["time"][:]
    assert not np.array_equal(stored_raw[4:8], file_raw)  # 4..7 against 0..3
    _passes(capsys, repo, paths)
    _passes(capsys, repo, paths[1:2])  # one file of the series, placed by its dates


def test_times_packed_with_a_float32_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hours packed as int16 with a float32 scale_factor: Zarr attributes hold the scale
    as a float64, so the store decodes the times microseconds apart from the file; the
    packed numbers and their scale are the same, which verify checks instead."""
    import xarray as xr

    path = tmp_path / "sst.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 5)
        dtime = nc.createVariable("sst_dtime", "i2", ("y",))
        dtime.units = "hours since 2020-01-02T00:00:00Z"
        dtime.scale_factor = np.float32(0.1)
        dtime.add_offset = np.float32(0.0)
        dtime.set_auto_maskandscale(False)
        dtime[:] = np.array([251, 3, 77, 120, 239], dtype="i2")
    repo = tmp_path / "sst.icechunk"
    _build(capsys, str(path), "--out", str(repo))
    from virtualizarr_fill.writers.repository import open_icechunk

    stored = open_icechunk(repo)["sst_dtime"].values
    native = xr.open_dataset(path, engine="h5netcdf")["sst_dtime"].values
    assert not np.array_equal(stored, native)
    assert np.abs(stored - native).max() < np.timedelta64(10, "ms")  # float32 precision
    _passes(capsys, repo, [path])

    copy = tmp_path / "copy" / "sst.nc"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    with netCDF4.Dataset(copy, "a") as nc:
        nc["sst_dtime"].set_auto_maskandscale(False)
        nc["sst_dtime"][2] = 78
    code, out = _verify(capsys, repo, copy)
    assert code == EXIT_MISMATCH
    assert _mismatches(out) == [
        f"MISMATCH {copy}: sst_dtime: 1 of 5 values differ; first at (2,): store 77, native 78"
    ]


def test_stack_along_a_new_dimension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    paths = [
        _geotiff(
            tmp_path / f"scene_{k}.tif",
            rng.integers(0, 999, (1, 25, 30), "uint16"),
            *ORIGIN,
            nodata=None,
            compress="lzw",
        )
        for k in range(3)
    ]
    repo = tmp_path / "stack.icechunk"
    _build(capsys, *map(str, paths), "--concat-dim", "scene", "--new-dim", "--out", str(repo))
    _passes(capsys, repo, paths)
    _passes(capsys, repo, paths[2:])  # the repository records the order


def test_stack_built_by_several_workers_records_the_stacking_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(2)
    paths = [
        _geotiff(
            tmp_path / f"scene_{k}.tif",
            rng.integers(0, 999, (1, 9, 7), "uint16"),
            *ORIGIN,
            nodata=None,
        )
        for k in range(8)
    ]
    repo = tmp_path / "stack.icechunk"
    code, _, err = _run(
        capsys,
        "build",
        *map(str, paths),
        "--concat-dim",
        "scene",
        "--new-dim",
        "--out",
        str(repo),
        "--workers",
        "2",
    )
    assert code == EXIT_OK, err
    _passes(capsys, repo, paths)


def test_mosaic_of_shuffled_tiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _tiles(tmp_path)
    repo = tmp_path / "mosaic.icechunk"
    _build(capsys, *map(str, paths), "--out", str(repo))
    _passes(capsys, repo, paths)
    _passes(capsys, repo, paths[:2])  # any tiles, placed by their georeferencing


def test_time_stack_from_file_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(3)
    paths = [
        _geotiff(
            tmp_path / f"S2_202401{day:02d}.tif",
            rng.integers(1, 200, (1, 12, 10), "uint8"),
            *ORIGIN,
            compress="deflate",
        )
        for day in (17, 3, 9)
    ]
    repo = tmp_path / "scenes.icechunk"
    _build(capsys, *map(str, paths), "--time-from", r"S2_(\d{8})", "--out", str(repo))
    out = _passes(capsys, repo, paths)
    assert "time" in out.split("not compared (no native reader): ")[1].splitlines()[0]


def test_multiscales_every_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fixtures import make_gdal_features

    cog = tmp_path / "cog.tif"
    make_gdal_features.write_cog(cog, height=128, width=96, block=32, overview_factors=(2, 4))
    repo = tmp_path / "pyramid.icechunk"
    _build(capsys, str(cog), "--overviews", "--out", str(repo))
    out = _passes(capsys, repo, [cog])
    # three levels of band_data, band, x, y and mask
    assert "verified 15 arrays of 1 files" in out

    # two COGs one above the other, each level combined along y
    paths = []
    for k in range(2):
        paths.append(tmp_path / f"column_{k}.tif")
        origin = (
            make_gdal_features.ORIGIN[0],
            make_gdal_features.ORIGIN[1] - k * 256 * make_gdal_features.PIXEL,
        )
        make_gdal_features.write_cog(
            paths[-1], height=256, width=192, origin=origin, seed=k, mask=False
        )
    column = tmp_path / "column.icechunk"
    _build(capsys, *map(str, paths), "--overviews", "--concat-dim", "y", "--out", str(column))
    out = _passes(capsys, column, paths[::-1])
    # each file: 4 levels of band_data, band, x and y
    assert "verified 32 arrays of 2 files" in out
    code, out = _verify(capsys, repo, paths[0])  # not in the other pyramid
    assert code == EXIT_MISMATCH
    assert [line.split(": ")[1] for line in _mismatches(out)] == [
        f"level {level}" for level in range(3)
    ]


def test_appended_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _netcdf_series(tmp_path, count=4)
    repo = tmp_path / "growing.icechunk"
    _build(capsys, *map(str, paths[:2]), "--concat-dim", "time", "--out", str(repo))
    code, _, err = _run(capsys, "build", *map(str, paths[2:]), "--append", "--out", str(repo))
    assert code == EXIT_OK, err
    _passes(capsys, repo, paths)


@pytest.mark.parametrize("suffix", ["json", "parquet"])
def test_kerchunk_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    tiles = _tiles(tmp_path)
    mosaic = tmp_path / f"mosaic.{suffix}"
    _build(capsys, *map(str, tiles), "--out", str(mosaic))
    _passes(capsys, mosaic, tiles)
    series = _netcdf_series(tmp_path)
    refs = tmp_path / f"series.{suffix}"
    _build(capsys, *map(str, series), "--concat-dim", "time", "--out", str(refs))
    _passes(capsys, refs, series)


def test_kerchunk_stack_needs_every_file_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(5)
    paths = [
        _geotiff(
            tmp_path / f"scene_{k}.tif",
            rng.integers(0, 999, (1, 8, 6), "uint16"),
            *ORIGIN,
            nodata=None,
        )
        for k in range(3)
    ]
    refs = tmp_path / "stack.json"
    _build(capsys, *map(str, paths), "--concat-dim", "scene", "--new-dim", "--out", str(refs))
    _passes(capsys, refs, paths)
    code, out = _verify(capsys, refs, *paths[1:])
    assert code == EXIT_USAGE
    assert "stacks 3 file(s) along 'scene' and records no order" in out
    code, out = _verify(capsys, refs, paths[1], paths[0], paths[2])
    assert code == EXIT_MISMATCH
    assert {line.split(": ")[0] for line in _mismatches(out)} == {
        f"MISMATCH {paths[1]}",
        f"MISMATCH {paths[0]}",
    }


def test_verify_reads_a_series_that_is_rectilinear_only_when_combined(tmp_path: Path) -> None:
    """netCDF-free HDF5 files whose length is not a multiple of the chunk length: each
    on a regular grid, the series on a rectilinear one. Run in a fresh interpreter
    without zarr's rectilinear flag in its environment."""
    for k in range(2):
        with h5py.File(tmp_path / f"part_{k}.h5", "w") as f:
            f.create_dataset("data", data=np.arange(10, dtype="f4") + 10 * k, chunks=(4,))
    environment = {k: v for k, v in os.environ.items() if k != "ZARR_ARRAY__RECTILINEAR_CHUNKS"}
    environment["PYTHONFAULTHANDLER"] = "1"  # a crash shows where, in the assertion's message

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "virtualizarr_fill.cli", *args],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )

    built = cli("build", "part_0.h5", "part_1.h5", "--concat-dim", "phony_dim_0", "--out", "s")
    assert built.returncode == 0, built.stderr
    verified = cli("verify", "s", "--against", "part_0.h5", "part_1.h5")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "verified 2 arrays of 2 files: all equal" in verified.stdout


def test_icechunk_on_s3_from_s3_inputs(
    tmp_path: Path,
    s3_environment: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:

    bucket = "verify-inputs"
    s3_environment.create_bucket(bucket)
    tiles = _tiles(tmp_path)
    series = _netcdf_series(tmp_path)
    for path in [*tiles, *series]:
        s3_environment.upload(bucket, f"data/{path.name}", path)
    for pattern, extra in (("tile_*.tif", []), ("day_*.nc", ["--concat-dim", "time"])):
        urls = f"s3://{bucket}/data/{pattern}"
        repo = tmp_path / f"{pattern[:3]}.icechunk"
        _build(capsys, urls, *extra, "--out", str(repo))
        _passes(capsys, repo, [urls], count=len(tiles) if pattern.endswith("tif") else 3)


# --------------------------------------------------------------------------- stores that differ


def _tile_origin(paths: list[Path], path: Path) -> tuple[int, int]:
    """The mosaic row and column of ``path``'s first pixel, from rasterio's transforms."""
    transforms = {}
    for each in paths:
        with rasterio.open(each) as src:
            transforms[each] = src.transform
    top = max(t.f for t in transforms.values())
    left = min(t.c for t in transforms.values())
    return round((top - transforms[path].f) / RES), round((transforms[path].c - left) / RES)


def test_values_that_differ_are_mismatches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store's tiles against copies of them, one with two pixels changed: the store
    references the originals, so it no longer holds that copy's values."""
    originals = tmp_path / "originals"
    originals.mkdir()
    paths = _tiles(originals)
    repo = tmp_path / "mosaic.icechunk"
    _build(capsys, *map(str, paths), "--out", str(repo))
    copies = tmp_path / "copies"
    copies.mkdir()
    copied = [copies / p.name for p in paths]
    for path, copy in zip(paths, copied, strict=True):
        copy.write_bytes(path.read_bytes())
    changed = copies / "tile_1_1.tif"
    with rasterio.open(changed, "r+") as dst:
        data = dst.read()
        before = int(data[0, 5, 7])
        data[0, 5, 7] = before + 1
        data[1, 10, 3] = data[1, 10, 3] + 1
        dst.write(data)
    _passes(capsys, repo, paths)

    code, out = _verify(capsys, repo, *copied)
    assert code == EXIT_MISMATCH
    row, col = _tile_origin(copied, changed)
    assert _mismatches(out) == [
        f"MISMATCH {changed}: band_data: 2 of {2 * HEIGHTS[1] * WIDTHS[1]} values differ; "
        f"first at (0, {row + 5}, {col + 7}): store {float(before)!r}, "
        f"native {float(before + 1)!r}"
    ]
    assert "verified 24 arrays of 6 files: 1 mismatch" in out


def test_a_header_changed_after_the_build_is_a_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file whose nodata value changed in place: the store still masks the old one."""
    import tifffile

    data = np.arange(8 * 9, dtype="uint8").reshape(1, 8, 9) % 10
    path = _geotiff(tmp_path / "scene.tif", data, *ORIGIN, nodata=0)
    repo = tmp_path / "scene.icechunk"
    _build(capsys, str(path), "--out", str(repo))
    before = os.stat(path)
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages.first.tags["GDAL_NODATA"].overwrite("7")
    # The modification time put back, as an edit within the same second leaves it:
    # Icechunk's own check of the file (its modification time) cannot see the change,
    # so verify must find it in the values (otherwise the test would depend on a
    # second boundary falling between the build and the edit).
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with rasterio.open(path) as src:
        assert src.nodata == 7
        changed = int(np.count_nonzero(src.read() == 0) + np.count_nonzero(src.read() == 7))
    code, out = _verify(capsys, repo, path)
    assert code == EXIT_MISMATCH
    [line] = _mismatches(out)
    assert line.startswith(f"MISMATCH {path}: band_data: {changed} of {data.size} values differ")
    assert "first at (0, 0, 0): store nan, native 0.0" in line


def _shifted_copy(path: Path, target: Path, units: str) -> Path:
    target.write_bytes(path.read_bytes())
    with netCDF4.Dataset(target, "a") as nc:
        nc["time"].units = units
    return target


def test_files_whose_coordinates_are_not_in_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _netcdf_series(tmp_path)
    repo = tmp_path / "series.icechunk"
    _build(capsys, *map(str, paths), "--concat-dim", "time", "--out", str(repo))
    other = tmp_path / "other"
    other.mkdir()
    later = _shifted_copy(paths[1], other / "later.nc", "days since 2001-01-01")
    code, out = _verify(capsys, repo, paths[0], later)
    assert code == EXIT_MISMATCH
    assert _mismatches(out) == [
        f"MISMATCH {later}: its time values (2001-01-01T00:00:00.000000000 .. "
        "2001-01-04T00:00:00.000000000) are not in the store's time "
        "(2000-01-01T00:00:00.000000000 .. 2000-01-12T00:00:00.000000000)"
    ]
    assert "verified 3 arrays of 2 files: 1 mismatch" in out

    # every other day from 2000-01-05: the first date is in the store, the second is not
    sparse = other / "sparse.nc"
    sparse.write_bytes(paths[1].read_bytes())
    with netCDF4.Dataset(sparse, "a") as nc:
        nc["time"][:] = np.arange(4) * 2.0
    code, out = _verify(capsys, repo, sparse)
    assert code == EXIT_MISMATCH
    assert _mismatches(out) == [
        f"MISMATCH {sparse}: its time values (2000-01-05T00:00:00.000000000 .. "
        "2000-01-11T00:00:00.000000000) start at store index 4 but differ from the "
        "store's at index 5: store 2000-01-06T00:00:00.000000000, file "
        "2000-01-07T00:00:00.000000000"
    ]


def test_a_gap_in_the_store_is_a_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(6)
    column = [
        _geotiff(
            tmp_path / f"row_{r}.tif",
            rng.integers(1, 250, (1, 16, 12), "uint8"),
            ORIGIN[0],
            ORIGIN[1] - 16 * r * RES,
        )
        for r in range(3)
    ]
    repo = tmp_path / "gappy.icechunk"
    _build(capsys, str(column[0]), str(column[2]), "--allow-gaps", "--out", str(repo))
    _passes(capsys, repo, [column[0], column[2]])
    code, out = _verify(capsys, repo, *column)
    assert code == EXIT_MISMATCH
    [line] = _mismatches(out)
    # the mosaic spans the gap (as rasterio.merge does), where the store reads nodata
    assert line.startswith(f"MISMATCH {column[1]}: band_data: 192 of 192 values differ")
    assert "store nan, native" in line


def _write_python_store(
    repo: Path, tiles: list[Path], order: list[int], drop: tuple[str, ...] = ()
) -> None:
    """A column of two tiles written by Python code (no build record), the tiles'
    arrays concatenated in ``order`` under the y coordinate of the right order, without
    the variables ``drop``."""
    import xarray as xr
    from virtualizarr import open_virtual_dataset

    from virtualizarr_fill import TIFFParser, to_icechunk
    from virtualizarr_fill.cli._inputs import file_url
    from virtualizarr_fill.io.registries import registry_for
    from virtualizarr_fill.writers.repository import create_repository

    urls = [file_url(p) for p in tiles]
    datasets = [
        open_virtual_dataset(u, registry=registry_for([u]), parser=TIFFParser()) for u in urls
    ]
    combined = xr.concat(
        [datasets[i] for i in order],
        dim="y",
        data_vars="minimal",
        coords="minimal",
        compat="override",
        join="override",
        combine_attrs="override",
    )
    y = np.concatenate([d["y"].values for d in datasets])
    session = create_repository(repo, urls).writable_session("main")
    to_icechunk(combined.assign_coords(y=y).drop_vars(list(drop)), session.store)
    session.commit("written by Python")


def test_store_written_by_python_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(7)
    tiles = [
        _geotiff(
            tmp_path / f"part_{r}.tif",
            rng.integers(1, 250, (1, 8, 10), "uint8"),
            ORIGIN[0],
            ORIGIN[1] - 8 * r * RES,
        )
        for r in range(2)
    ]
    right, wrong = tmp_path / "right.icechunk", tmp_path / "wrong.icechunk"
    _write_python_store(right, tiles, [0, 1])
    _passes(capsys, right, tiles)
    partial = tmp_path / "partial.icechunk"
    _write_python_store(partial, tiles, [0, 1], drop=("x",))
    assert "not in the store: x" in _passes(capsys, partial, tiles)
    _write_python_store(wrong, tiles, [1, 0])
    code, out = _verify(capsys, wrong, *tiles)
    assert code == EXIT_MISMATCH
    assert [line.split(": ")[:2] for line in _mismatches(out)] == [
        [f"MISMATCH {tiles[0]}", "band_data"],
        [f"MISMATCH {tiles[1]}", "band_data"],
    ]


def test_a_chunk_that_does_not_decode_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file damaged inside its third strip: both the store and GDAL fail to read it;
    verify reads the store first and names the chunk."""
    import tifffile

    path = tmp_path / "damaged.tif"
    values = np.random.default_rng(2).integers(0, 255, (64, 40), dtype=np.uint8)
    tifffile.imwrite(path, values, compression="lzw", rowsperstrip=16)
    damage_strip(path, 2)
    with rasterio.open(path) as src, pytest.raises(rasterio.errors.RasterioIOError):
        src.read()
    repo = tmp_path / "damaged.icechunk"
    _build(capsys, str(path), "--out", str(repo))
    code, out = _verify(capsys, repo, path)
    assert code == EXIT_MISMATCH
    (line,) = [line for line in out.splitlines() if line.startswith("UNVERIFIED")]
    assert line.startswith(f"UNVERIFIED {path}: band_data: could not compare (ChunkDecodeError: ")
    assert "chunk band_data/c/0/2/0 of <icechunk.IcechunkStore>: cannot be read or decoded" in line


def test_a_series_without_coordinates_is_placed_by_the_recorded_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for k in range(3):
        paths.append(tmp_path / f"part_{k}.h5")
        with h5py.File(paths[-1], "w") as f:
            f.create_dataset("data", data=np.arange(10, dtype="f4") + 10 * k, chunks=(4,))
    repo = tmp_path / "parts.icechunk"
    _build(capsys, *map(str, paths), "--concat-dim", "phony_dim_0", "--out", str(repo))
    _passes(capsys, repo, paths[2:])  # after the lengths of the files before it

    paths[1].rename(tmp_path / "moved.h5")
    code, out = _verify(capsys, repo, paths[2])
    assert code == EXIT_USAGE
    assert f"cannot place {paths[2]} along 'phony_dim_0'" in out
    assert f"it follows {paths[1]} in the store, which is neither given nor readable" in out


def test_usage_and_io_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _netcdf_series(tmp_path, count=1)[0]
    repo = tmp_path / "one.icechunk"
    _build(capsys, str(path), "--out", str(repo))
    not_a_repo = tmp_path / "empty"
    not_a_repo.mkdir()
    (not_a_repo / "file").write_text("x")
    text = tmp_path / "notes.txt"
    text.write_text("not a file format")
    cases = [
        ((str(tmp_path / "missing"), str(path)), EXIT_IO, "no such Icechunk repository"),
        ((str(tmp_path / "missing.json"), str(path)), EXIT_IO, "no such kerchunk references"),
        ((str(not_a_repo), str(path)), EXIT_IO, "cannot open the store"),
        ((str(repo), str(tmp_path / "gone.nc")), EXIT_IO, "gone.nc: no such file"),
        ((str(repo), str(text)), 3, f"{text}: "),
    ]
    for (dest, against), exit_code, message in cases:
        code, _, err = _run(capsys, "verify", dest, "--against", against)
        assert code == exit_code, err
        lines = err.strip().splitlines()
        assert lines[-1].startswith("virtualizarr-fill: error: ") and message in lines[-1], err
        assert "internal error" not in err


def _unknown_filter(source: Path, target: Path, name: str) -> Path:
    """``source`` with the first filter of dataset ``name`` patched, in its header, to
    an id no HDF5 filter has (255, of the range libhdf5 reserves for its own filters, so
    that the message keeps its layout; the header's checksum restored): h5py cannot
    read it, and the parser refuses the dataset."""
    from conformance.fuzz.mutations import _put, apply_ops, hdf5_structure

    with h5py.File(source, "r") as f:
        header = int(h5py.h5o.get_info(f[name].id).addr)
    structure = hdf5_structure(str(source))
    [message] = [m for m in structure.messages if m.header == header and m.type == 0x0B]
    data = source.read_bytes()
    # the filter id follows the version, the filter count and (version 1) 6 reserved bytes
    position = message.data_pos + (8 if data[message.data_pos] == 1 else 2)
    ops = [_put(position, 255, 2, "little"), *structure.checksum_fix(position)]
    target.write_bytes(apply_ops(data, ops))
    with h5py.File(target, "r") as f, pytest.raises(OSError):
        f[name][()]
    return target


def test_datasets_the_parser_refused_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dataset the parser skips is not in the store: verify names it and does not
    say "all equal"."""
    source = tmp_path / "source.nc"
    with netCDF4.Dataset(source, "w") as nc:
        nc.createDimension("x", 6)
        kept = nc.createVariable("kept", "i4", ("x",), zlib=True)
        kept[:] = np.arange(6)
        lost = nc.createVariable("lost", "i4", ("x",), zlib=True)
        lost[:] = np.arange(6) * 2
    path = _unknown_filter(source, tmp_path / "patched.nc", "lost")
    repo = tmp_path / "patched.icechunk"
    code, summary, err = _run(capsys, "build", str(path), "--out", str(repo), "--workers", "0")
    assert code == EXIT_OK, err
    assert "lost" in summary + err, summary + err  # the build warned

    code, out = _verify(capsys, repo, path)
    assert code == EXIT_MISMATCH, out
    [line] = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert line.startswith(f"SKIPPED {path}: /lost: unsupported HDF5 filter"), line
    assert "(id 255)" in line
    assert [line for line in out.splitlines() if line.startswith("verified")] == [
        "verified 1 arrays of 1 files: 1 dataset not in the store (the parser refused them)"
    ], out
