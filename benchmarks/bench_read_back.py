"""Reading a column of GeoTIFFs back whole: rasterio file by file against the Icechunk store.

N GeoTIFFs (``--files``) of 128 rows x 1024 columns of uint8, deflate, strips of 16 rows
(8 strips of 16 KB per file), stacked along y (a mosaic of one column), are indexed into
an Icechunk repository by ``virtualizarr-fill build``. Each way of reading the whole
column is timed, opening included, median of ``--repeat`` runs:

* ``rasterio``: every file opened and read with rasterio, one after the other;
* ``open_icechunk(chunks=None)``: ``xr.open_zarr`` of the store without dask;
* ``open_icechunk(chunks={})``: one dask task per stored chunk (per strip), the
  behaviour before ``open_icechunk`` chose its chunks;
* ``open_icechunk()``: the default, whole stored chunks merged up to 128 MiB.

Every read is checked equal to rasterio's.

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
from rasterio.transform import from_origin

import virtualizarr_fill
from virtualizarr_fill.cli import main as cli_main

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


def _median(run: Callable[[], Any], repeat: int, expected: np.ndarray) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        values = run()
        times.append(time.perf_counter() - start)
        np.testing.assert_array_equal(values, expected)
    return statistics.median(times)


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
            ("open_icechunk(chunks=None) (xr.open_zarr, no dask)", read(chunks=None)),
            ("open_icechunk(chunks={}) (one task per strip)", read(chunks={})),
            ("open_icechunk() (whole stored chunks)", read()),
        ]
        base = None
        for label, run in rows:
            seconds = _median(run, args.repeat, expected)
            base = base or seconds
            print(f"{label:48s} {seconds:7.3f} s  {seconds / base:5.2f}x rasterio")


if __name__ == "__main__":
    main()
