"""Reading a column of GeoTIFFs back whole: rasterio file by file against the Icechunk store.

N GeoTIFFs (``--files``) of 128 rows x 1024 columns of uint8, deflate, strips of 16 rows
(8 strips of 16 KB per file), stacked along y (a mosaic of one column), are indexed into
an Icechunk repository by ``virtualizarr-fill build``. Each way of reading the whole
column is timed, opening included, median of ``--repeat`` runs:

* ``rasterio``: every file opened and read with rasterio, one after the other, with
  GDAL's defaults and with ``GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR`` (no listing of
  the directory at each open);
* ``xr.open_zarr``: the repository's store opened with ``xr.open_zarr(chunks=None)``,
  read by zarr's own pipeline (what Icechunk and xarray alone do);
* ``open_icechunk(chunks={})``: one dask task per stored chunk (per strip), the
  behaviour before ``open_icechunk`` chose its chunks;
* ``open_icechunk(chunks=None)``: no dask, the arrays read by this package's pipeline
  (a batch of keys per Icechunk call);
* ``open_icechunk()``: the default, whole stored chunks merged up to 128 MiB, read by
  the same pipeline.

The ways take turns (one run of each, ``--repeat`` times), so that a machine busier
at one moment weighs on all of them alike. Each way's median time on the clock and
median processor time of the process (all its threads) are printed, with their ratios
to rasterio's (GDAL's defaults). Every read is checked equal to rasterio's.

Usage::

    python benchmarks/bench_read_back.py [--files 300] [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import xarray as xr
from rasterio.transform import from_origin

import virtualizarr_fill
from virtualizarr_fill.cli import main as cli_main
from virtualizarr_fill.writers.repository import open_repository

ROWS, COLS, STRIP = 128, 1024, 16


def _write_column(directory: Path, count: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    paths = []
    for k in range(count):
        path = directory / f"part_{k:05d}.tif"
        data = rng.integers(0, 200, (1, ROWS, COLS)).astype("uint8")
        with rasterio.open(
            path, "w", driver="GTiff", width=COLS, height=ROWS, count=1, dtype="uint8",
            crs="EPSG:32633", transform=from_origin(500000, 9000000 - k * ROWS * 10, 10, 10),
            compress="deflate", blockysize=STRIP,
        ) as dst:  # fmt: skip
            dst.write(data)
        paths.append(path)
    return paths


def _rasterio(paths: list[Path]) -> np.ndarray:
    out = np.empty((1, ROWS * len(paths), COLS), dtype="uint8")
    for k, path in enumerate(paths):
        with rasterio.open(path) as src:
            out[:, k * ROWS : (k + 1) * ROWS] = src.read()
    return out


def _rasterio_no_listing(paths: list[Path]) -> np.ndarray:
    # GDAL lists a file's directory at each open, looking for side-car files: a cost
    # that grows with the files next to it.
    with rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR"):
        return _rasterio(paths)


def _timed(run: Callable[[], Any], expected: np.ndarray) -> tuple[float, float]:
    """Seconds one run takes, on the clock and of the process's processor time (every
    thread's); its values checked equal to rasterio's."""
    start, cpu = time.perf_counter(), time.process_time()
    values = run()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    np.testing.assert_array_equal(values, expected)
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temporary directory)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        root = args.dir or Path(scratch)
        paths = _write_column(root / "tiles", args.files)
        store = root / "column.icechunk"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli_main(
                ["build", *map(str, paths), "--out", str(store), "--overwrite", "--workers", "0"]
            )
        if code:
            raise SystemExit(f"build failed ({code})")
        location = str(store)

        def read(**options: Any) -> Callable[[], np.ndarray]:
            return lambda: virtualizarr_fill.open_icechunk(location, **options)["band_data"].values

        def plain() -> np.ndarray:
            session = open_repository(location).readonly_session("main")
            ds = xr.open_zarr(session.store, consolidated=False, zarr_format=3, chunks=None)
            return ds["band_data"].values

        expected = _rasterio(paths)
        chunked = virtualizarr_fill.open_icechunk(location)["band_data"]
        per_strip = virtualizarr_fill.open_icechunk(location, chunks={})["band_data"]
        print(
            f"{args.files} files, {args.files * ROWS // STRIP} strips of "
            f"{STRIP * COLS // 1024} KB, "
            f"{expected.nbytes / 2**20:.1f} MiB; dask tasks: open_icechunk() "
            f"{chunked.data.npartitions}, chunks={{}} {per_strip.data.npartitions}"
        )
        rows = [
            ("rasterio, file by file", lambda: _rasterio(paths)),
            ("rasterio, GDAL_DISABLE_READDIR_ON_OPEN", lambda: _rasterio_no_listing(paths)),
            ("xr.open_zarr(chunks=None) (zarr's pipeline)", plain),
            ("open_icechunk(chunks={}) (one task per strip)", read(chunks={})),
            ("open_icechunk(chunks=None) (no dask)", read(chunks=None)),
            ("open_icechunk() (whole stored chunks)", read()),
        ]
        times: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in rows}
        for _ in range(args.repeat):
            for label, run in rows:
                times[label].append(_timed(run, expected))
        base = [statistics.median(t[k] for t in times[rows[0][0]]) for k in (0, 1)]
        print(f"{'':48s} {'time':>9s} {'ratio':>6s} {'cpu':>9s} {'ratio':>6s}")
        for label, _ in rows:
            seconds, cpu = (statistics.median(t[k] for t in times[label]) for k in (0, 1))
            print(
                f"{label:48s} {seconds:7.3f} s {seconds / base[0]:5.2f}x "
                f"{cpu:7.3f} s {cpu / base[1]:5.2f}x"
            )


if __name__ == "__main__":
    main()
