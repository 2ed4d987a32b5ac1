"""Benchmarks of virtual concatenation (issue targets in parentheses).

1. ``np.concatenate`` along an existing axis and ``np.stack`` along a new axis of N
   single-file ManifestArrays, each 13 strips whose last strip is stored padded (the
   result is rectilinear with a truncate codec): median time and peak traced memory for
   N = 1,000 and 10,000 (10,000 under 2 s and 300 MB, growing linearly).
2. ``xr.combine_nested`` of 1,000 virtual datasets from the TIFF parser (150-row strip
   TIFFs, last strip padded) against VirtualiZarr's own combine of 1,000 regular-grid
   virtual datasets of the same size (156-row TIFFs) in the same run (at most 1.2x).
3. Reading a concatenated rectilinear array through ManifestStore against reading the
   same number of bytes through a regular-grid array of the same chunking (at most 1.2x).

Run: ``python benchmarks/bench_concat.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup
from zarr.codecs import BytesCodec
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.dtype import parse_data_type

from virtualizarr_fill.manifests import FileManifestStore, FillManifestArray
from virtualizarr_fill.zarr_model.chunk_grids import grid_metadata
from virtualizarr_fill.zarr_model.edge_codecs import edge_handling_of

STRIPS, ROWS_PER_STRIP, WIDTH = 13, 12, 256
PADDED_HEIGHT = STRIPS * ROWS_PER_STRIP - 6  # 150 rows: the last strip holds 6 of 12 rows
STRING = np.dtypes.StringDType()


def _metadata(height: int, chunk_rows: int, width: int) -> ArrayV3Metadata:
    from zarr.core.chunk_grids import FixedDimension

    dims = [
        FixedDimension(size=chunk_rows, extent=height),
        FixedDimension(size=width, extent=width),
    ]
    return ArrayV3Metadata(
        shape=(height, width),
        data_type=parse_data_type(np.dtype("u2"), zarr_format=3),
        chunk_grid=grid_metadata(dims),
        chunk_key_encoding={"name": "default", "configuration": {"separator": "."}},
        fill_value=0,
        codecs=[BytesCodec(endian="little")],
        attributes={},
        dimension_names=None,
    )


def synthetic_array(index: int, height: int = PADDED_HEIGHT) -> ManifestArray:
    """One file's strips: 13 references of 12 rows each (the last one padded)."""
    strip_bytes = ROWS_PER_STRIP * 21 * 2
    paths = np.full((STRIPS, 1), f"file:///archive/scene_{index:05d}.tif", dtype=STRING)
    offsets = (np.arange(STRIPS, dtype=np.uint64) * strip_bytes + 8).reshape(STRIPS, 1)
    lengths = np.full((STRIPS, 1), strip_bytes, dtype=np.uint64)
    manifest = ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
    )
    return FillManifestArray(metadata=_metadata(height, ROWS_PER_STRIP, 21), chunkmanifest=manifest)


def _median_seconds(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _peak_megabytes(run: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def bench_combine(counts: list[int], repeats: int) -> None:
    print("== 1. np.concatenate / np.stack of single-file arrays (13 strips, last padded)")
    results: dict[tuple[str, int], tuple[float, float]] = {}
    for n in counts:
        arrays = [synthetic_array(i) for i in range(n)]
        for name, func in (
            ("concatenate", lambda arrays=arrays: np.concatenate(arrays, axis=0)),
            ("stack", lambda arrays=arrays: np.stack(arrays, axis=0)),
        ):
            seconds = _median_seconds(func, repeats)
            peak = _peak_megabytes(func)
            results[(name, n)] = (seconds, peak)
            result = cast(ManifestArray, func())
            print(
                f"  {name:11s} N={n:6d}: median {seconds:7.3f} s, peak {peak:7.1f} MB "
                f"-> shape {result.shape}, {edge_handling_of(result.metadata.codecs)}"
            )
    if len(counts) == 2:
        small, large = counts
        for name in ("concatenate", "stack"):
            ratio = results[(name, large)][0] / results[(name, small)][0]
            memory = results[(name, large)][1] / results[(name, small)][1]
            print(
                f"  {name:11s} N={large}/N={small}: time x{ratio:.1f}, memory x{memory:.1f} "
                f"(linear: x{large / small:.0f})"
            )


def bench_combine_nested(n: int, repeats: int) -> None:
    print(f"== 2. xr.combine_nested of {n} virtual datasets from the TIFF parser")
    from virtualizarr import open_virtual_dataset

    from virtualizarr_fill.tiff.parser import TIFFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = TIFFParser()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)

        def datasets(height: int) -> list[xr.Dataset]:
            return [
                open_virtual_dataset("file://" + str(p), registry=registry, parser=parser)
                for p in _write_strip_tiffs(directory, n, height, width=21)
            ]

        padded = datasets(PADDED_HEIGHT)  # 150 rows: rectilinear result, truncate codec
        regular = datasets(STRIPS * ROWS_PER_STRIP)  # 156 rows: the same strips, regular

    def combine(dss: list[xr.Dataset]) -> xr.Dataset:
        return xr.combine_nested(dss, concat_dim="y", coords="minimal", compat="override")

    # The same regular datasets holding VirtualiZarr's own ManifestArrays, which
    # VirtualiZarr's own concatenation combines.
    plain = [_as_virtualizarrs(ds) for ds in regular]

    def upstream_combine() -> None:
        combine(plain)

    runs: dict[str, list[float]] = {"ours": [], "ours_regular": [], "upstream": []}
    for _ in range(repeats):  # interleaved, so all three see the same machine load
        runs["ours"].append(_median_seconds(lambda: combine(padded), 1))
        runs["ours_regular"].append(_median_seconds(lambda: combine(regular), 1))
        runs["upstream"].append(_median_seconds(upstream_combine, 1))
    ours, ours_regular, upstream = (
        statistics.median(runs[k]) for k in ("ours", "ours_regular", "upstream")
    )
    result = combine(padded).band_data.data
    print(f"  result {result!r}, {edge_handling_of(result.metadata.codecs)} codec")
    print(f"  rectilinear (virtualizarr-fill):   median {ours:.3f} s")
    print(f"  regular     (virtualizarr-fill):   median {ours_regular:.3f} s")
    print(f"  regular     (VirtualiZarr itself): median {upstream:.3f} s")
    print(f"  ratio rectilinear / VirtualiZarr regular: {ours / upstream:.2f} (target <= 1.2)")


def _as_virtualizarrs(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each FillManifestArray replaced by a VirtualiZarr ManifestArray."""
    out = ds.copy()
    for var in out.variables.values():
        if isinstance(var.data, FillManifestArray):
            var.data = ManifestArray(metadata=var.data.metadata, chunkmanifest=var.data.manifest)
    return out


def _write_strip_tiffs(directory: Path, count: int, height: int, width: int = WIDTH) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        full = -(-height // ROWS_PER_STRIP) * ROWS_PER_STRIP
        image = rng.integers(0, 60000, size=(full, width), dtype=np.uint16)
        path = directory / f"h{height}_w{width}_{i:04d}.tif"
        tifffile.imwrite(path, image, rowsperstrip=ROWS_PER_STRIP, metadata=None)
        if height != full:  # store the last strip padded: rewrite ImageLength
            with tifffile.TiffFile(path, mode="r+") as tif:
                cast(tifffile.TiffPage, tif.pages[0]).tags["ImageLength"].overwrite(height)
        paths.append(path)
    return paths


def _tiff_array(path: Path) -> ManifestArray:
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        height = page.shape[0]
        grid = (len(page.dataoffsets), 1)
        offsets = np.asarray(page.dataoffsets, dtype=np.uint64).reshape(grid)
        lengths = np.asarray(page.databytecounts, dtype=np.uint64).reshape(grid)
    paths = np.full(grid, "file://" + str(path.resolve()), dtype=STRING)
    manifest = ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
    )
    metadata = _metadata(height, ROWS_PER_STRIP, WIDTH)
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest)


def _reader(marr: ManifestArray) -> Callable[[], np.ndarray]:
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    group = ManifestGroup(arrays={"a": marr}, attributes={})
    store = FileManifestStore(group, registry=registry, url="file:///bench")
    array = zarr.open_array(store, path="a", mode="r", zarr_format=3)
    return lambda: np.asarray(array[...])


def bench_read(files: int, repeats: int) -> None:
    print(f"== 3. read through ManifestStore: {files} files x {STRIPS} strips of {WIDTH} columns")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        padded = [_tiff_array(p) for p in _write_strip_tiffs(directory, files, PADDED_HEIGHT)]
        full = [
            _tiff_array(p) for p in _write_strip_tiffs(directory, files, STRIPS * ROWS_PER_STRIP)
        ]
        rectilinear = cast(ManifestArray, np.concatenate(padded, axis=0))  # type: ignore[arg-type]
        regular = cast(ManifestArray, np.concatenate(full, axis=0))  # type: ignore[arg-type]
        assert type(regular.metadata.chunk_grid).__name__ == "RegularChunkGridMetadata"
        read_rectilinear, read_regular = _reader(rectilinear), _reader(regular)
        read_rectilinear(), read_regular()  # warm the page cache
        times: dict[str, list[float]] = {"rectilinear": [], "regular": []}
        for _ in range(repeats):  # interleaved, so both see the same machine load
            times["rectilinear"].append(_median_seconds(read_rectilinear, 1))
            times["regular"].append(_median_seconds(read_regular, 1))
        rect, reg = (statistics.median(times[k]) for k in ("rectilinear", "regular"))
        megabytes = files * STRIPS * ROWS_PER_STRIP * WIDTH * 2 / 1e6
        print(
            f"  rectilinear + truncate: median {rect:.3f} s ({megabytes:.1f} MB read, "
            f"{rectilinear.shape[0]} rows)"
        )
        print(f"  regular grid:           median {reg:.3f} s ({megabytes:.1f} MB read)")
        print(f"  ratio rectilinear / regular: {rect / reg:.2f} (target <= 1.2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = parser.parse_args()
    repeats = 1 if args.quick else 5
    bench_combine([100, 1000] if args.quick else [1000, 10000], repeats)
    bench_combine_nested(100 if args.quick else 1000, repeats)
    bench_read(20 if args.quick else 200, repeats)


if __name__ == "__main__":
    main()
