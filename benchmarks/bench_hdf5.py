"""Parse time, requests and bytes: HDF5Parser vs VirtualiZarr's HDFParser vs async-hdf5.

Files: a netCDF-4 file with 10 variables of shape (100, 180, 360) chunked
(10, 180, 360) with zlib; a 1-variable file with 10,000 chunks indexed by a B-tree v1;
the same with a paged fixed array; and every HDF5 file of the corpus
(``../shared/corpus``). Each parser reads through a request-counting wrapper of the
same obstore ``LocalStore``; times are the median of ``--repeat`` warm runs.

async-hdf5 is measured twice: ``async-vz`` is its VirtualiZarr integration
(``open_virtual_hdf5``), ``async-index`` only opens the file and reads every dataset's
chunk index (its parsing core, which cannot fail on the manifest stage).

Usage::

    python benchmarks/bench_hdf5.py [--repeat 5] [--workdir DIR] [--no-corpus]
                                    [--only TEXT ...] [--profile N]

``--only`` keeps the files whose label contains one of the texts; ``--profile N``
profiles (cProfile) N parses of each selected file by this project's parser instead of
timing the parsers side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from _counting_store import CountingStore
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from virtualizarr_fill.hdf5 import HDF5Parser

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


# --------------------------------------------------------------------------- inputs


def make_inputs(directory: Path) -> dict[str, Path]:
    """The three synthetic files (written once, then reused)."""
    import netCDF4

    directory.mkdir(parents=True, exist_ok=True)
    ten = directory / "ten_vars_zlib.nc"
    if not ten.exists():
        rng = np.random.default_rng(0)
        with netCDF4.Dataset(ten, "w") as nc:
            nc.createDimension("time", 100)
            nc.createDimension("lat", 180)
            nc.createDimension("lon", 360)
            for i in range(10):
                var = nc.createVariable(
                    f"var{i}", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(10, 180, 360)
                )
                var[:] = rng.random((100, 180, 360), dtype="f4")
    btree = directory / "btree_v1_10k_chunks.h5"
    if not btree.exists():
        with h5py.File(btree, "w", libver="earliest") as f:
            f.create_dataset(
                "x", data=np.arange(10_000, dtype="<f4").reshape(100, 100), chunks=(1, 1)
            )
    paged = directory / "paged_fixed_array_10k_chunks.h5"
    if not paged.exists():
        with h5py.File(paged, "w", libver="latest") as f:
            f.create_dataset(
                "x", data=np.arange(10_000, dtype="<f4").reshape(100, 100), chunks=(1, 1)
            )
    return {"ten_vars_zlib.nc": ten, "btree_v1_10k": btree, "paged_fixed_10k": paged}


def corpus_files() -> dict[str, Path]:
    files = {}
    for root, _, names in os.walk(CORPUS):
        for name in sorted(names):
            path = Path(root) / name
            with open(path, "rb") as handle:
                if handle.read(8) == HDF5_SIGNATURE:
                    files[str(path.relative_to(CORPUS))] = path
    return dict(sorted(files.items()))


# -------------------------------------------------------------------------- parsers


def _ours(url: str, path: str, registry: ObjectStoreRegistry, store: Any) -> None:
    HDF5Parser()(url, registry)


def _virtualizarr(url: str, path: str, registry: ObjectStoreRegistry, store: Any) -> None:
    from virtualizarr.parsers import HDFParser

    HDFParser()(url, registry)


def _async_vz(url: str, path: str, registry: ObjectStoreRegistry, store: Any) -> None:
    from async_hdf5.virtualizarr import open_virtual_hdf5

    asyncio.run(open_virtual_hdf5(path, store=store, url=url, registry=registry))


def _async_index(url: str, path: str, registry: ObjectStoreRegistry, store: Any) -> None:
    from async_hdf5 import HDF5File

    async def walk() -> None:
        file = await HDF5File.open(path, store=store)

        async def visit(group: Any) -> None:
            for name in await group.dataset_names():
                dataset = await group.dataset(name)
                await dataset.chunk_index()
            for name in await group.group_names():
                await visit(await group.group(name))

        await visit(await file.root_group())

    asyncio.run(walk())


PARSERS: dict[str, Callable[[str, str, ObjectStoreRegistry, Any], None]] = {
    "ours": _ours,
    "virtualizarr": _virtualizarr,
    "async-vz": _async_vz,
    "async-index": _async_index,
}


@dataclass
class Result:
    seconds: float | None
    requests: int
    nbytes: int
    error: str = ""


def _run_once(parser: str, path: Path) -> tuple[float | None, int, int, str]:
    url = "file://" + str(path)
    key = str(path).lstrip("/")
    store = CountingStore(LocalStore())
    registry = ObjectStoreRegistry({"file://": store})
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            PARSERS[parser](url, key, registry, store)
    except Exception as exc:
        return None, store.stats.requests, store.stats.bytes_read, type(exc).__name__
    return time.perf_counter() - start, store.stats.requests, store.stats.bytes_read, ""


def measure(path: Path, repeat: int) -> dict[str, Result]:
    """Every parser on one file; runs interleaved so machine load hits all alike."""
    first = {name: _run_once(name, path) for name in PARSERS}  # warm-up, and the counts
    times: dict[str, list[float]] = {name: [] for name in PARSERS}
    for _ in range(repeat):
        for name in PARSERS:
            if first[name][0] is None:
                continue
            elapsed, *_ = _run_once(name, path)
            if elapsed is not None:
                times[name].append(elapsed)
    results = {}
    for name, (elapsed, requests, nbytes, error) in first.items():
        if elapsed is None:
            results[name] = Result(None, requests, nbytes, error)
        else:
            results[name] = Result(statistics.median(times[name]), requests, nbytes)
    return results


# --------------------------------------------------------------------------- report


def _cell(result: Result) -> str:
    if result.seconds is None:
        return f"{'error: ' + result.error:>28}"
    return f"{result.seconds * 1000:8.1f} ms {result.requests:4d} req {result.nbytes / 1e6:7.2f} MB"


def run(files: dict[str, Path], repeat: int) -> dict[str, dict[str, Result]]:
    results: dict[str, dict[str, Result]] = {}
    header = f"{'file':48s} " + " | ".join(f"{name:^28s}" for name in PARSERS)
    print(header)
    print("-" * len(header))
    for label, path in files.items():
        row = measure(path, repeat)
        results[label] = row
        print(f"{label[-48:]:48s} " + " | ".join(_cell(row[name]) for name in PARSERS), flush=True)
    return results


def summarise(results: dict[str, dict[str, Result]]) -> None:
    def ratios(other: str, field: str) -> list[float]:
        values = []
        for row in results.values():
            ours, theirs = row["ours"], row[other]
            if ours.seconds is None or theirs.seconds is None:
                continue
            a, b = getattr(ours, field), getattr(theirs, field)
            if b:
                values.append(a / b)
        return values

    print()
    for other in ("virtualizarr", "async-vz", "async-index"):
        for field in ("seconds", "requests", "nbytes"):
            values = ratios(other, field)
            if values:
                print(
                    f"ours / {other:12s} {field:8s}: median {statistics.median(values):6.2f}  "
                    f"max {max(values):6.2f}  (n={len(values)}, both parsed)"
                )
    slower = [
        label
        for label, row in results.items()
        if row["ours"].seconds is not None
        and row["virtualizarr"].seconds is not None
        and row["ours"].seconds > row["virtualizarr"].seconds
    ]
    more = [
        label
        for label, row in results.items()
        if row["virtualizarr"].seconds is not None
        and (
            row["ours"].requests > row["virtualizarr"].requests
            or row["ours"].nbytes > row["virtualizarr"].nbytes
        )
    ]
    failed = {
        name: sum(1 for row in results.values() if row[name].seconds is None) for name in PARSERS
    }
    print(f"\nfiles slower than VirtualiZarr's HDFParser: {len(slower)} {slower}")
    print(f"files with more requests or bytes than VirtualiZarr's HDFParser: {len(more)} {more}")
    print(f"files that raised: {failed} (of {len(results)})")


def profile(files: dict[str, Path], parses: int) -> None:
    """cProfile of ``parses`` parses of each file by :class:`HDF5Parser`."""
    import cProfile
    import pstats

    for label, path in files.items():
        _run_once("ours", path)  # warm-up: imports and caches
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(parses):
            _run_once("ours", path)
        profiler.disable()
        print(f"\n=== {label}: {parses} parses")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("benchmarks") / ".hdf5_inputs")
    parser.add_argument("--no-corpus", action="store_true")
    parser.add_argument("--only", nargs="+", metavar="TEXT", help="files whose label has TEXT")
    parser.add_argument("--profile", type=int, metavar="N", help="profile N parses per file")
    args = parser.parse_args(argv)
    files = make_inputs(args.workdir.resolve())
    if not args.no_corpus and CORPUS.is_dir():
        files.update(corpus_files())
    if args.only:
        files = {k: v for k, v in files.items() if any(text in k for text in args.only)}
    if args.profile:
        profile(files, args.profile)
        return 0
    summarise(run(files, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
