"""N files to one Icechunk repository: virtualizarr-fill next to its peers, end to end.

What users time is "these files -> one store": parse every file, combine, write the
references, commit. Each run below does exactly that in a fresh process (its peak RSS is
its own), the tools taking turns round by round so that machine load hits them alike;
the table gives medians, ratios to the peer and peak memory.

GeoTIFFs (``tiff``): N files of 256 x 256 uint16, Deflate strips of 32 rows, UTM,
file k directly south of file k - 1 (one column of a mosaic, concatenated along ``y``).

* ``fill-series``: ``virtualizarr_fill.open_virtual_series(..., "y")`` + ``to_icechunk``;
* ``fill-mfdataset``: ``open_virtual_mfdataset(parser=TIFFParser(), combine="nested",
  concat_dim="y")`` + ``virtualizarr_fill.to_icechunk``: the call virtual-tiff is timed
  with, xarray's default combining arguments;
* ``virtual-tiff``: ``open_virtual_mfdataset(parser=VirtualTIFF(ifd=0), combine="nested",
  concat_dim="y")`` + ``vds.vz.to_icechunk``;
* ``fill-cli``: ``virtualizarr-fill build 'DIR/tile_*.tif' --concat-dim y --out REPO``,
  timed whole (start-up and imports included), its memory the proportional set size
  (PSS) summed over the command and its worker processes, sampled;
  ``BENCH_CLI_WORKERS=N`` passes ``--workers N``;
* ``fill-cli-baseline``: the same command from another checkout of the package (a
  release to compare with), when ``BENCH_BASELINE`` names its directory.
* ``fill-series-dask``, ``virtual-tiff-dask`` (and for netCDF ``hdfparser-dask``): the
  same calls parsing on a dask ``LocalCluster`` of two single-threaded worker processes
  (``executor=client``; the peers ``parallel=client.get_executor()``), started and
  warmed (the parsers imported on the workers) before the clock starts; the memory is
  this process's, the client's.

netCDF-4 (``netcdf``): N files of 8 x 64 x 64 (time, lat, lon), two float32 variables,
chunks of 4 x 64 x 64, file k continuing file k - 1's time axis.

* ``fill-series``: ``open_virtual_series(..., HDF5Parser(), "time")`` + ``to_icechunk``;
* ``fill-mfdataset``: ``open_virtual_mfdataset(parser=HDF5Parser(), ..., coords="minimal",
  compat="override", combine_attrs="drop_conflicts")`` + ``to_icechunk``;
* ``hdfparser``: ``open_virtual_mfdataset(parser=HDFParser(), ...)`` + ``vds.vz.to_icechunk``;
* ``fill-cli`` (and ``fill-cli-baseline``): ``virtualizarr-fill build`` along ``time``.

Every tool's repository is read back and compared with the first tool's values. Then
each repository is read whole, as users read it (``xr.open_zarr(store).load()`` with
zarr's default codec pipeline, in a fresh process), next to reading the same files with
the native reader one by one (tifffile, or h5py), interleaved: the ``read s`` column.

Scale (``--synthetic N ...``): one GeoTIFF is parsed, and N stores are made from it
(the same chunks under N file names, each file placed below the one before), then
combined with ``open_virtual_series``' machinery and written to Icechunk, each N in a
fresh process: time and peak memory should grow linearly with N.

Run (virtual-tiff and VirtualiZarr's HDFParser from ``pip install -e ".[bench]"``)::

    python benchmarks/bench_build.py --kinds tiff netcdf --files 1000 --rounds 3
    BENCH_BASELINE=../baseline python benchmarks/bench_build.py --kinds tiff --files 4000
    python benchmarks/bench_build.py --synthetic 1000 10000 100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

TOOLS = {
    "tiff": ["fill-series", "fill-mfdataset", "fill-cli", "virtual-tiff"],
    "netcdf": ["fill-series", "fill-mfdataset", "fill-cli", "hdfparser"],
}
#: Run only when named with ``--tools``.
DASK_TOOLS = {
    "tiff": ["fill-series-dask", "virtual-tiff-dask"],
    "netcdf": ["fill-series-dask", "hdfparser-dask"],
}
PEER = {"tiff": "virtual-tiff", "netcdf": "hdfparser"}
CONCAT_DIM = {"tiff": "y", "netcdf": "time"}


# --------------------------------------------------------------------------- inputs


def write_tiffs(directory: Path, count: int) -> list[Path]:
    import tifffile

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for k in range(count):
        path = directory / f"tile_{k:05d}.tif"
        paths.append(path)
        if path.exists():
            continue
        tifffile.imwrite(
            path,
            rng.integers(0, 60000, (256, 256), dtype=np.uint16),
            rowsperstrip=32,
            compression="zlib",
            extratags=[
                (33550, 12, 3, (10.0, 10.0, 0.0), True),
                (33922, 12, 6, (0.0, 0.0, 0.0, 500000.0, 4000000.0 - k * 2560.0, 0.0), True),
                (34735, 3, 16, (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633)),
            ],
            metadata=None,
        )
    return paths


def write_netcdfs(directory: Path, count: int) -> list[Path]:
    import netCDF4

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    paths = []
    for k in range(count):
        path = directory / f"series_{k:05d}.nc"
        paths.append(path)
        if path.exists():
            continue
        with netCDF4.Dataset(path, "w") as f:
            f.createDimension("time", None)
            f.createDimension("lat", 64)
            f.createDimension("lon", 64)
            time = f.createVariable("time", "f8", ("time",))
            time.units = "days since 2000-01-01"
            time[:] = np.arange(8) + 8 * k
            f.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-30, 30, 64)
            f.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 60, 64)
            for name in ("a", "b"):
                var = f.createVariable(
                    name, "f4", ("time", "lat", "lon"), chunksizes=(4, 64, 64), zlib=True
                )
                var[:] = rng.normal(size=(8, 64, 64)).astype("f4")
    return paths


# --------------------------------------------------------------------------- one run


def _repository(path: Path, data_dir: Path) -> Any:
    import icechunk

    icechunk.set_logs_filter("error")
    prefix = f"file://{data_dir}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data_dir)))
    )
    return icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config,
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )


def run_cli(kind: str, tool: str, data_dir: Path, repo: Path) -> dict[str, Any]:
    """Build the repository with the command line (``fill-cli``; ``fill-cli-baseline``:
    the checkout named by ``BENCH_BASELINE``), timing the whole command and sampling
    the memory of its process tree (the command and its worker processes)."""
    import psutil

    pattern = "tile_*.tif" if kind == "tiff" else "series_*.nc"
    env = dict(os.environ)
    if tool == "fill-cli-baseline":
        env["PYTHONPATH"] = os.environ["BENCH_BASELINE"]
    command = [
        sys.executable, "-m", "virtualizarr_fill.cli", "build", str(data_dir / pattern),
        "--concat-dim", CONCAT_DIM[kind], "--out", str(repo),
    ]  # fmt: skip
    workers = os.environ.get("BENCH_CLI_WORKERS")
    if workers:
        command += ["--workers", workers]
    start = time.perf_counter()
    process = psutil.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    peak = 0
    while process.poll() is None:
        # PSS: pages the worker processes share with the fork server they come from
        # count once, as the machine pays for them (a sum of RSS would count them in
        # every process).
        total = 0
        for member in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error, AttributeError):
                total += member.memory_full_info().pss
        peak = max(peak, total)
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    if process.returncode:
        raise SystemExit(process.stderr.read() if process.stderr else "failed")
    return {
        "seconds": seconds,
        "imports": 0.0,
        "combine": 0.0,
        "write": 0.0,
        "peak_mb": peak / 2**20,
    }


def _peak_rss_mb() -> float:
    """This process's peak resident set size. ``VmHWM``, not ``getrusage``'s
    ``ru_maxrss``: Linux carries ``ru_maxrss`` over ``exec``, so a child started from a
    large parent would report the parent's size."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _warm_worker() -> None:
    import virtualizarr  # noqa: F401

    import virtualizarr_fill.assemble
    import virtualizarr_fill.hdf5
    import virtualizarr_fill.tiff  # noqa: F401

    with contextlib.suppress(ImportError):
        import virtual_tiff  # noqa: F401


def _dask_client(tool: str) -> Any:
    """A client of a new two-process ``LocalCluster`` whose workers have imported the
    parsers (left running until this process ends)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        env={"ZARR_ARRAY__RECTILINEAR_CHUNKS": "True"},
    )
    client = Client(cluster)
    client.run(_warm_worker)
    return client


def run_one(kind: str, tool: str, data_dir: Path, repo: Path) -> dict[str, Any]:
    """Build the repository with ``tool`` (in this process); returns the timings."""
    if tool.startswith("fill-cli"):
        return run_cli(kind, tool, data_dir, repo)
    warnings.simplefilter("ignore")
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    start = time.perf_counter()
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    pattern = "tile_*.tif" if kind == "tiff" else "series_*.nc"
    urls = [f"file://{p}" for p in sorted(data_dir.glob(pattern))]
    dim = CONCAT_DIM[kind]
    # The libraries every tool uses, imported before the clock for the work starts.
    import icechunk  # noqa: F401
    import virtualizarr  # noqa: F401
    import xarray  # noqa: F401

    if tool.startswith("fill-"):
        from virtualizarr_fill import HDF5Parser, TIFFParser
    client = _dask_client(tool) if tool.endswith("-dask") else None
    tool = tool.removesuffix("-dask")
    parallel: Any = False if client is None else client.get_executor()
    imported = time.perf_counter()
    if tool == "fill-series":
        import virtualizarr_fill
        from virtualizarr_fill import HDF5Parser, TIFFParser

        parser = TIFFParser() if kind == "tiff" else HDF5Parser()
        vds = virtualizarr_fill.open_virtual_series(urls, registry, parser, dim, executor=client)
    elif tool == "fill-mfdataset":
        from virtualizarr import open_virtual_mfdataset

        import virtualizarr_fill
        from virtualizarr_fill import HDF5Parser, TIFFParser

        # GeoTIFFs: the call virtual-tiff is timed with, xarray's default arguments.
        netcdf_arguments = {
            "coords": "minimal",
            "compat": "override",
            "combine_attrs": "drop_conflicts",
        }
        vds = open_virtual_mfdataset(
            urls,
            registry=registry,
            parser=TIFFParser() if kind == "tiff" else HDF5Parser(),
            combine="nested",
            concat_dim=dim,
            **({} if kind == "tiff" else netcdf_arguments),
        )
    elif tool == "virtual-tiff":
        from virtual_tiff import VirtualTIFF
        from virtualizarr import open_virtual_mfdataset

        vds = open_virtual_mfdataset(
            urls,
            registry=registry,
            parser=VirtualTIFF(ifd=0),
            combine="nested",
            concat_dim=dim,
            parallel=parallel,
        )
    elif tool == "hdfparser":
        from virtualizarr import open_virtual_mfdataset
        from virtualizarr.parsers import HDFParser

        vds = open_virtual_mfdataset(
            urls,
            registry=registry,
            parser=HDFParser(),
            combine="nested",
            concat_dim=dim,
            coords="minimal",
            compat="override",
            parallel=parallel,
        )
    else:
        raise SystemExit(f"unknown tool {tool}")
    combined = time.perf_counter()
    repository = _repository(repo, data_dir)
    session = repository.writable_session("main")
    if tool.startswith("fill-"):
        virtualizarr_fill.to_icechunk(vds, session.store)
    else:
        vds.vz.to_icechunk(session.store)
    session.commit("build")
    done = time.perf_counter()
    return {
        "seconds": done - imported,
        "imports": imported - start,
        "combine": combined - imported,
        "write": done - combined,
        "peak_mb": _peak_rss_mb(),
    }


def time_read(kind: str, tool: str, repo: Path, data_dir: Path) -> float:
    """Seconds to read the whole repository (or, for ``native``, every file)."""
    warnings.simplefilter("ignore")
    import xarray as xr

    if tool == "native":
        start = time.perf_counter()
        if kind == "tiff":
            import tifffile

            for path in sorted(data_dir.glob("tile_*.tif")):
                tifffile.imread(path)
        else:
            import h5py

            for path in sorted(data_dir.glob("series_*.nc")):
                with h5py.File(path) as f:
                    for name in ("a", "b", "time", "lat", "lon"):
                        f[name][()]
        return time.perf_counter() - start
    import icechunk

    prefix = f"file://{data_dir}/"
    start = time.perf_counter()
    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repo)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    xr.open_zarr(repository.readonly_session("main").store, consolidated=False).load()
    return time.perf_counter() - start


def read_back(kind: str, repo: Path, data_dir: Path) -> np.ndarray:
    """Every value of the repository's main variable."""
    import icechunk
    import xarray as xr

    prefix = f"file://{data_dir}/"
    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repo)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    ds = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    name = "a" if kind == "netcdf" else next(n for n in ("band_data", "0") if n in ds)
    return np.squeeze(ds[name].values)


# --------------------------------------------------------------------------- scale


def run_synthetic(count: int, work: Path) -> dict[str, Any]:
    """Combine ``count`` synthetic files (see the module docstring) and write them."""
    warnings.simplefilter("ignore")
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.manifests import ManifestGroup

    import virtualizarr_fill
    from virtualizarr_fill.assemble import Collector
    from virtualizarr_fill.assemble.series import combine_parts, order_parts
    from virtualizarr_fill.manifests import FileManifestStore
    from virtualizarr_fill.tiff import TIFFParser
    from virtualizarr_fill.tiff.arrays import inlined_array

    source = write_tiffs(work / "synthetic_source", 1)[0]
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parsed = TIFFParser()(f"file://{source}", registry)
    group = parsed._group
    y = np.frombuffer(next(iter(group.arrays["y"].manifest._inlined.values())), "<f8")
    start = time.perf_counter()
    collector = Collector(["y"], new_dim=False, decode_times=None)
    for k in range(count):
        url = f"file://{work}/synthetic/tile_{k:06d}.tif"
        arrays = dict(group.arrays)
        arrays["band_data"] = arrays["band_data"].rename_paths(url)
        arrays["y"] = inlined_array(y - k * 2560.0, ("y",))
        store = FileManifestStore(
            ManifestGroup(arrays=arrays, attributes=dict(group.metadata.attributes)),
            registry=registry,
            url=url,
        )
        collector.add(store)
    collected = time.perf_counter()
    vds = combine_parts(collector.template(), order_parts(collector.parts, "y"), "y")
    combined = time.perf_counter()
    repo = _repository(work / f"synthetic_repo_{count}", work / "synthetic")
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(vds, session.store)
    session.commit("synthetic")
    done = time.perf_counter()
    return {
        "files": count,
        "collect": collected - start,
        "combine": combined - collected,
        "write": done - combined,
        "seconds": done - start,
        "peak_mb": _peak_rss_mb(),
    }


# --------------------------------------------------------------------------- the table


def _child(
    kind: str, tool: str, data_dir: Path, repo: Path, mode: str = "--child"
) -> dict[str, Any]:
    env = {**os.environ, "ZARR_ARRAY__RECTILINEAR_CHUNKS": "True"}
    done = subprocess.run(
        [sys.executable, __file__, mode, kind, tool, str(data_dir), str(repo)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kinds", nargs="+", default=["tiff", "netcdf"])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tools", nargs="+", help="only these tools")
    parser.add_argument("--workdir", type=Path, help="keep the inputs here")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "TOOL", "DATA", "REPO"))
    parser.add_argument("--read-child", nargs=4, metavar=("KIND", "TOOL", "DATA", "REPO"))
    parser.add_argument("--no-read", action="store_true", help="skip the read-back timings")
    parser.add_argument("--synthetic", nargs="+", type=int, metavar="N", help="scale runs")
    parser.add_argument("--synthetic-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.synthetic_child:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_build_"))
        print(json.dumps(run_synthetic(args.synthetic_child, work.resolve())))
        return 0
    if args.synthetic:
        print("| files | collect s | combine s | write s | total s | peak MB |")
        print("|---|---|---|---|---|---|")
        for count in args.synthetic:
            work = Path(tempfile.mkdtemp(prefix="bench_build_synthetic_"))
            done = subprocess.run(
                [sys.executable, __file__, "--synthetic-child", str(count), "--workdir", str(work)],
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "ZARR_ARRAY__RECTILINEAR_CHUNKS": "True"},
            )
            shutil.rmtree(work, ignore_errors=True)
            if done.returncode:
                print(f"| {count} | error: {done.stderr.strip().splitlines()[-1]} | | | | |")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"| {count} | {r['collect']:.1f} | {r['combine']:.1f} | {r['write']:.1f} "
                f"| {r['seconds']:.1f} | {r['peak_mb']:.0f} |"
            )
        return 0
    if args.child:
        kind, tool, data, repo = args.child
        print(json.dumps(run_one(kind, tool, Path(data), Path(repo))))
        return 0
    if args.read_child:
        kind, tool, data, repo = args.read_child
        print(json.dumps({"read": time_read(kind, tool, Path(repo), Path(data))}))
        return 0
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_build_"))
    failed = False
    for kind in args.kinds:
        data_dir = (work / f"{kind}_{args.files}").resolve()
        writer = write_tiffs if kind == "tiff" else write_netcdfs
        writer(data_dir, args.files)
        known = (
            [*TOOLS[kind], "fill-cli-baseline"] if os.environ.get("BENCH_BASELINE") else TOOLS[kind]
        )
        known = [*known, *DASK_TOOLS[kind]]
        tools = [t for t in known if (t in args.tools if args.tools else t not in DASK_TOOLS[kind])]
        results: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
        reference = None
        for round_ in range(args.rounds):
            shift = round_ % len(tools)
            for tool in tools[shift:] + tools[:shift]:
                repo = work / f"repo_{kind}_{tool}"
                shutil.rmtree(repo, ignore_errors=True)
                outcome = _child(kind, tool, data_dir, repo)
                results[tool].append(outcome)
                if "error" in outcome or round_:
                    continue
                values = read_back(kind, repo, data_dir)
                if reference is None:
                    reference = values
                elif not np.array_equal(values, reference):
                    outcome["error"] = "values differ from the first tool's"
        reads: dict[str, list[float]] = {t: [] for t in [*tools, "native"]}
        if not args.no_read:
            readers = [*tools, "native"]
            for round_ in range(args.rounds):
                shift = round_ % len(readers)
                for tool in readers[shift:] + readers[:shift]:
                    outcome = _child(
                        kind, tool, data_dir, work / f"repo_{kind}_{tool}", "--read-child"
                    )
                    if "read" in outcome:
                        reads[tool].append(outcome["read"])
        print(f"\n## {kind}: {args.files} files -> Icechunk (medians of {args.rounds})\n")
        print(
            "| tool | parse + combine + write s | of which combine s | write s | peak MB "
            "| vs peer | read s |"
        )
        print("|---|---|---|---|---|---|---|")
        peer = [r["seconds"] for r in results.get(PEER[kind], []) if "error" not in r]
        peer_median = statistics.median(peer) if peer else None
        for tool, runs in results.items():
            errors = [r["error"] for r in runs if "error" in r]
            if errors:
                failed = True
                print(f"| {tool} | error: {errors[0]} | | | | |")
                continue

            def med(key: str, runs: list[dict[str, Any]] = runs) -> float:
                return statistics.median(r[key] for r in runs)

            ratio = f"{med('seconds') / peer_median:.2f}x" if peer_median else ""
            read = f"{statistics.median(reads[tool]):.1f}" if reads[tool] else ""
            print(
                f"| {tool} | {med('seconds'):.1f} | {med('combine'):.1f} | {med('write'):.1f} "
                f"| {med('peak_mb'):.0f} | {ratio} | {read} |"
            )
        if reads["native"]:
            print(
                f"| native reader, file by file | | | | | | "
                f"{statistics.median(reads['native']):.1f} |"
            )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
