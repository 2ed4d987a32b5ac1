"""open_virtual_mfdataset over many files: serial, thread pool, dask distributed.

The benchmark writes ``--files`` small GeoTIFFs and as many small netCDF-4 files (see
``_scale_inputs.py``: partial last strips and time chunks, so the combined arrays have
rectilinear chunk grids), then combines each set with
``virtualizarr.open_virtual_mfdataset`` (``combine="nested"``, GeoTIFFs along ``y``,
netCDF files along ``time``) in three ways, each in a fresh process so that the peak
memory of the client is its own:

* ``serial``: ``parallel=False``;
* ``threads``: ``parallel=ThreadPoolExecutor(max_workers=--threads)``;
* ``dask``: ``parallel="dask"`` with a ``distributed.Client`` on a ``LocalCluster`` of
  2 worker processes with 1 thread each, started on 127.0.0.1 by the benchmark (its start
  is timed separately and not counted in the wall time).

Every parallel result must equal the serial one: the same metadata and attributes, the
same chunk references (paths, offsets, lengths), the same loaded coordinates and the same
values read back through a ``ManifestStore``; the serial values must equal, bit for bit,
what tifffile and h5py read from every file. Any difference makes the script exit 1.

Then the ``virtualizarr-fill build`` command runs over the same files with its progress
bar live (stderr on a pseudo-terminal) and with it not drawn (stderr a pipe: the command
has no switch to turn progress off, and off a terminal it prints one line per phase at
the end), interleaved, ``--cli-repeat`` times each; the table gives the medians and their
ratio. The CLI runs over the GeoTIFFs by default (``--cli-formats tiff netcdf`` adds the
netCDF files; the bar does the same work per file whatever the format); below 200 files
(a smoke run, e.g. ``--files 40``) once per variant. A microbenchmark gives the cost of
one progress step and of one redraw.

Usage::

    python benchmarks/bench_scale.py [--files 1000] [--threads 4] [--workdir DIR]
        [--modes serial threads dask] [--no-cli | --cli-repeat 3 --cli-formats tiff netcdf]

``--workdir`` keeps the generated files (and reuses them on the next run); by default
they go to a temporary directory removed at the end. The figures go to stdout as a
Markdown section for docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pty
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _scale_inputs as inputs

FORMATS = ("tiff", "netcdf")
MODES = ("serial", "threads", "dask")
CONCAT_DIM = {"tiff": "y", "netcdf": "time"}
LABEL = {"tiff": "GeoTIFF", "netcdf": "netCDF-4"}
DASK_WORKERS = 2
#: Below this many files a run is a smoke test: one CLI build per variant.
SMOKE_FILES = 200
#: Files whose parse time alone is measured (serial mode, after the timed run).
PARSER_SAMPLE = 100


# --------------------------------------------------------------------------- one mode


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB.

    ``VmHWM`` rather than ``ru_maxrss``: Linux carries ``ru_maxrss`` across exec, so a
    mode's process would report its parent's peak if that were larger.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _paths(directory: Path, fmt: str, count: int) -> list[Path]:
    if fmt == "tiff":
        return inputs.tiff_paths(directory, count)
    return inputs.netcdf_paths(directory, count)


def _parser(fmt: str) -> Any:
    from virtualizarr_fill import HDF5Parser, TIFFParser

    return TIFFParser() if fmt == "tiff" else HDF5Parser()


def _registry() -> Any:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file://": LocalStore()})


def _open(urls: list[str], fmt: str, parallel: Any) -> Any:
    """The combination the ``build`` command makes, through open_virtual_mfdataset."""
    from virtualizarr import open_virtual_mfdataset

    return open_virtual_mfdataset(
        urls,
        registry=_registry(),
        parser=_parser(fmt),
        combine="nested",
        concat_dim=CONCAT_DIM[fmt],
        data_vars="minimal",
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",
        parallel=parallel,
    )


def _start_cluster() -> tuple[Any, Any]:
    import logging

    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=DASK_WORKERS,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = Client(cluster)
    # Workers that have imported the parsers, as on a cluster that is already running.
    client.run(_import_parsers)
    return cluster, client


def _import_parsers() -> None:
    import virtualizarr_fill  # noqa: F401


def _workers_peak_rss_mb(client: Any) -> float:
    peaks = client.run(_peak_rss_mb)
    return max(peaks.values())


def _canonical(value: Any) -> str:
    """``repr`` of attributes or encodings with equal data types spelled alike (a
    pickled ``dtype('<i8')`` comes back as ``dtype('int64')``)."""
    if isinstance(value, dict):
        items = sorted((str(k), _canonical(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_canonical(v) for v in value) + "]"
    if isinstance(value, np.dtype):
        return f"dtype({value.str})"
    return repr(value)


def _describe(dataset: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Everything that defines the virtual dataset: metadata as JSON-able text, chunk
    references and loaded values as arrays."""
    from virtualizarr.manifests import ManifestArray

    text: dict[str, Any] = {"attrs": _canonical(dataset.attrs), "variables": {}}
    arrays: dict[str, np.ndarray] = {}
    text["coords"] = sorted(str(n) for n in dataset.coords)
    for name, variable in sorted(dataset.variables.items()):
        entry: dict[str, Any] = {
            "dims": list(variable.dims),
            "attrs": _canonical(variable.attrs),
            "encoding": _canonical(variable.encoding),
        }
        if isinstance(variable.data, ManifestArray):
            marr = variable.data
            entry["metadata"] = json.dumps(marr.metadata.to_dict(), sort_keys=True, default=repr)
            manifest = marr.manifest  # (ChunkManifest has no public array accessors)
            # npz holds fixed-width strings, not numpy's variable-width StringDType.
            arrays[f"{name}/paths"] = np.array(manifest._paths.tolist(), dtype=str)
            arrays[f"{name}/offsets"] = np.asarray(manifest._offsets)
            arrays[f"{name}/lengths"] = np.asarray(manifest._lengths)
            entry["inlined"] = repr(sorted(manifest._inlined.items()))
        else:
            entry["dtype"] = str(variable.dtype)
            arrays[f"{name}/loaded"] = np.asarray(variable.values)
        text["variables"][str(name)] = entry
    return text, arrays


def _read_through_manifest_store(dataset: Any) -> dict[str, np.ndarray]:
    """The raw values of every virtual variable, read through a ManifestStore by zarr."""
    import zarr
    from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore

    virtual = {
        str(n): v.data for n, v in dataset.variables.items() if isinstance(v.data, ManifestArray)
    }
    store = ManifestStore(ManifestGroup(arrays=virtual, attributes={}), registry=_registry())
    return {
        f"{name}/values": np.asarray(zarr.open_array(store, path=name, mode="r")[...])
        for name in virtual
    }


def _parser_ms(urls: list[str], fmt: str) -> float:
    """Median milliseconds of the parser alone (``parser(url, registry)``) per file."""
    parser, registry = _parser(fmt), _registry()
    times = []
    for url in urls:
        started = time.perf_counter()
        parser(url, registry)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def run_mode(fmt: str, mode: str, directory: Path, count: int, threads: int, out: Path) -> None:
    """Measure one mode in this (fresh) process; write ``out``.json and ``out``.npz."""
    from concurrent.futures import ThreadPoolExecutor

    import virtualizarr_fill  # noqa: F401  (codecs, rectilinear grids)

    urls = [p.as_uri() for p in _paths(directory, fmt, count)]
    # Warm the client's imports and caches on one file, as any long job would be.
    _open(urls[:1], fmt, False)
    result: dict[str, Any] = {"format": fmt, "mode": mode, "files": count}
    result["baseline_rss_mb"] = _peak_rss_mb()
    cluster = client = executor = None
    if mode == "serial":
        parallel: Any = False
    elif mode == "threads":
        executor = ThreadPoolExecutor(max_workers=threads)
        parallel = executor
        result["threads"] = threads
    else:
        started = time.perf_counter()
        cluster, client = _start_cluster()
        result["cluster_start_s"] = time.perf_counter() - started
        parallel = "dask"
    started = time.perf_counter()
    combined = _open(urls, fmt, parallel)
    result["wall_s"] = time.perf_counter() - started
    result["peak_rss_mb"] = _peak_rss_mb()
    if client is not None:
        result["worker_peak_rss_mb"] = _workers_peak_rss_mb(client)
        client.close()
        cluster.close()  # type: ignore[union-attr]
    if executor is not None:
        executor.shutdown()
    if mode == "serial":
        result["parser_ms"] = _parser_ms(urls[:PARSER_SAMPLE], fmt)
    result["sizes"] = {str(k): int(v) for k, v in combined.sizes.items()}
    text, arrays = _describe(combined)
    arrays.update(_read_through_manifest_store(combined))
    result["description"] = text
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    np.savez(out.with_suffix(".npz"), **cast(dict[str, Any], arrays))


# --------------------------------------------------------------------------- comparisons


def _load(out: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    result = json.loads(out.with_suffix(".json").read_text())
    with np.load(out.with_suffix(".npz")) as data:
        arrays = {k: data[k] for k in data.files}
    return result, arrays


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def compare_with_serial(
    serial: tuple[dict[str, Any], dict[str, np.ndarray]],
    other: tuple[dict[str, Any], dict[str, np.ndarray]],
) -> list[str]:
    """What differs between a parallel result and the serial one (empty: identical)."""
    problems = []
    text_s, text_o = serial[0]["description"], other[0]["description"]
    for key in ("attrs", "coords"):
        if text_s[key] != text_o[key]:
            problems.append(f"dataset {key} differ")
    names = set(text_s["variables"]) | set(text_o["variables"])
    for name in sorted(names):
        a, b = text_s["variables"].get(name), text_o["variables"].get(name)
        if a != b:
            fields = sorted(
                k for k in set(a or {}) | set(b or {}) if (a or {}).get(k) != (b or {}).get(k)
            )
            problems.append(f"{name}: {', '.join(fields) or 'presence'} differ")
    for key in sorted(set(serial[1]) | set(other[1])):
        if key not in serial[1] or key not in other[1]:
            problems.append(f"{key}: only in one result")
        elif not _same_bits(serial[1][key], other[1][key]):
            problems.append(f"{key}: arrays differ")
    return problems


def not_rectilinear(fmt: str, result: dict[str, Any]) -> list[str]:
    """The data variables whose combined grid is not rectilinear (the inputs are made so
    that it must be: this benchmark is meant to exercise that path)."""
    names = ("band_data",) if fmt == "tiff" else ("tas", "pr")
    variables = result["description"]["variables"]
    return [
        f"{name}: the combined chunk grid is not rectilinear"
        for name in names
        if json.loads(variables[name]["metadata"])["chunk_grid"]["name"] != "rectilinear"
    ]


def check_against_native(fmt: str, paths: list[Path], arrays: dict[str, np.ndarray]) -> list[str]:
    """Compare the serial result's values, file by file, with tifffile's or h5py's."""
    problems: list[str] = []
    if fmt == "tiff":
        import tifffile

        values = arrays["band_data/values"]
        rows = inputs.TIFF_ROWS
        for index, path in enumerate(paths):
            native = tifffile.imread(path)
            mine = values[0, index * rows : (index + 1) * rows]
            if not _same_bits(mine, native):
                problems.append(f"{path.name}: band_data differs from tifffile")
        return problems
    import h5py

    steps = inputs.NC_STEPS
    for index, path in enumerate(paths):
        with h5py.File(path, "r") as f:
            for name in ("tas", "pr"):
                mine = arrays[f"{name}/values"][index * steps : (index + 1) * steps]
                if not _same_bits(mine, f[name][...]):
                    problems.append(f"{path.name}: {name} differs from h5py")
    return problems


# --------------------------------------------------------------------------- the CLI


@dataclass
class CliRun:
    wall_s: float
    cpu_s: float  # user + system time of the command's main process (where the bar draws)
    parse_s: float
    redraws: int


def _drain(fd: int, sink: bytearray) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            return
        if not data:
            return
        sink.extend(data)


def _parse_seconds(summary: str) -> float:
    for line in summary.splitlines():
        if line.strip().startswith("time:"):
            return float(line.split("parse", 1)[1].split("s", 1)[0])
    return float("nan")


def run_cli(pattern: str, dim: str, out: Path, live: bool) -> CliRun:
    """One ``virtualizarr-fill build``; stderr on a pseudo-terminal when ``live``, else a
    pipe."""
    command = [sys.executable, "-m", "virtualizarr_fill.cli", "build", pattern]
    command += ["--concat-dim", dim, "--out", str(out)]
    shutil.rmtree(out, ignore_errors=True)
    stdout, stderr = bytearray(), bytearray()
    out_read, out_write = os.pipe()
    err_read, err_write = pty.openpty() if live else os.pipe()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=out_write, stderr=err_write
    )
    os.close(out_write)
    os.close(err_write)
    drains = [
        threading.Thread(target=_drain, args=(out_read, stdout)),
        threading.Thread(target=_drain, args=(err_read, stderr)),
    ]
    for drain in drains:
        drain.start()
    # wait4, not Popen.wait: it also gives the process's CPU time.
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    for drain in drains:
        drain.join()
    os.close(out_read)
    os.close(err_read)
    shutil.rmtree(out, ignore_errors=True)
    if process.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {process.returncode}: {stderr.decode(errors='replace')}"
        )
    return CliRun(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        parse_s=_parse_seconds(stdout.decode()),
        redraws=stderr.count(b"\rparse"),
    )


def measure_cli(directory: Path, fmt: str, repeat: int) -> dict[str, list[CliRun]]:
    """``repeat`` builds with the bar live and as many without, interleaved."""
    pattern = str(directory / ("tiff/*.tif" if fmt == "tiff" else "netcdf/*.nc"))
    out = directory / f"cli-{fmt}.icechunk"
    runs: dict[str, list[CliRun]] = {"on": [], "off": []}
    for index in range(repeat):
        order = ("on", "off") if index % 2 == 0 else ("off", "on")
        for variant in order:
            run = run_cli(pattern, CONCAT_DIM[fmt], out, variant == "on")
            runs[variant].append(run)
            print(
                f"{fmt} CLI bar {variant}: wall {run.wall_s:.2f} s, CPU {run.cpu_s:.2f} s, "
                f"parse {run.parse_s:.1f} s, {run.redraws} redraws",
                file=sys.stderr,
            )
    return runs


def progress_step_costs(steps: int = 100_000) -> tuple[float, float]:
    """Seconds per ``Progress.advance`` on a terminal (redrawing at most every 0.1 s), and
    per redraw (``interval=0``: every step redraws)."""
    from virtualizarr_fill.cli.progress import Progress

    costs = []
    for interval in (0.1, 0.0):
        master, slave = pty.openpty()
        sink = bytearray()
        drain = threading.Thread(target=_drain, args=(master, sink))
        drain.start()
        with os.fdopen(slave, "w") as stream:
            progress = Progress("parse", steps, "files", stream=stream, interval=interval)
            count = steps if interval else steps // 20
            started = time.perf_counter()
            for _ in range(count):
                progress.advance()
            costs.append((time.perf_counter() - started) / count)
        drain.join()
        os.close(master)
    return costs[0], costs[1]


# --------------------------------------------------------------------------- the report


def _versions() -> str:
    from importlib.metadata import version

    names = ("virtualizarr", "zarr", "dask", "distributed", "tifffile", "h5py")
    return ", ".join(f"{n} {version(n)}" for n in names)


def _command_line(args: argparse.Namespace) -> str:
    words = ["python benchmarks/bench_scale.py", f"--files {args.files}"]
    words.append(f"--threads {args.threads}")
    if list(args.modes) != list(MODES):
        words.append("--modes " + " ".join(args.modes))
    if args.no_cli:
        words.append("--no-cli")
    else:
        words.append(f"--cli-repeat {args.cli_repeat}")
        words.append("--cli-formats " + " ".join(args.cli_formats))
    return " ".join(words)


def _mode_name(mode: str, threads: int, result: dict[str, Any] | None) -> str:
    if mode == "threads":
        return f"thread pool ({threads} threads)"
    if mode == "dask":
        started = ""
        if result is not None:
            started = f"; started in {result['cluster_start_s']:.1f} s, not counted"
        return f"dask LocalCluster ({DASK_WORKERS} processes x 1 thread{started})"
    return mode


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} MB"


def report(
    args: argparse.Namespace,
    results: dict[tuple[str, str], dict[str, Any]],
    verdicts: dict[tuple[str, str], str],
    cli: dict[str, dict[str, list[CliRun]]],
    step_costs: tuple[float, float] | None,
    loads: tuple[tuple[float, ...], tuple[float, ...]],
    generate_s: float,
) -> str:
    today = datetime.date.today().isoformat()
    start, end = loads
    n = args.files
    lines = [
        f"## Scale: open_virtual_mfdataset over {n:,} GeoTIFFs and {n:,} netCDF-4 files",
        "",
        f"Command: `{_command_line(args)}` ({today}, {os.cpu_count()} cores, load average "
        f"{start[0]:.2f} / {start[1]:.2f} / {start[2]:.2f} at the start and "
        f"{end[0]:.2f} / {end[1]:.2f} / {end[2]:.2f} at the end; {_versions()}). "
        f"Inputs: GeoTIFFs {inputs.TIFF_ROWS}x{inputs.TIFF_COLS} float32, deflate strips of "
        f"{inputs.ROWS_PER_STRIP} rows, combined along y; netCDF-4 files of "
        f"{inputs.NC_STEPS} time steps chunked by {inputs.NC_TIME_CHUNK}, 2 variables, "
        f"combined along time (both give rectilinear grids); written in {generate_s:.1f} s.",
        "",
        "| files | mode | wall time | throughput | client peak RSS (growth) "
        "| worker peak RSS | equals serial |",
        "|---|---|---|---|---|---|---|",
    ]
    for fmt in FORMATS:
        for mode in args.modes:
            result = results.get((fmt, mode))
            verdict = verdicts.get((fmt, mode), "-").replace("|", "\\|")
            name = _mode_name(mode, args.threads, result)
            if result is None:
                lines.append(f"| {n:,} {LABEL[fmt]} | {name} | failed | | | | {verdict} |")
                continue
            growth = result["peak_rss_mb"] - result["baseline_rss_mb"]
            lines.append(
                f"| {n:,} {LABEL[fmt]} | {name} | {result['wall_s']:.2f} s "
                f"| {n / result['wall_s']:.0f} files/s "
                f"| {result['peak_rss_mb']:.0f} MB (+{growth:.0f} MB) "
                f"| {_mb(result.get('worker_peak_rss_mb'))} | {verdict} |"
            )
    lines += [
        "",
        "Client peak RSS is the process's high-water mark after combining (the dask client "
        "process also hosts the LocalCluster's scheduler); growth is over the same process "
        'after its imports and one warm-up file. "Equals serial": identical metadata, '
        "attributes, chunk references and loaded coordinates, and identical values read "
        "through a ManifestStore; the serial values equal tifffile's and h5py's for every file.",
    ]
    parsers = [
        f"{LABEL[fmt]} {results[(fmt, 'serial')]['parser_ms']:.1f} ms "
        f"of {results[(fmt, 'serial')]['wall_s'] / n * 1000:.1f} ms"
        for fmt in FORMATS
        if (fmt, "serial") in results
    ]
    if parsers:
        lines += [
            "",
            f"Per file, serial: the parser alone (median over the first "
            f"{min(PARSER_SAMPLE, n)} files) against the whole per-file time: "
            f"{'; '.join(parsers)}. The rest is "
            "open_virtual_dataset turning the ManifestStore into an xarray Dataset (through "
            "xarray's zarr backend, even with loadable_variables=[]) and the combine.",
        ]
    if cli:
        lines += [
            "",
            "Progress indication: `virtualizarr-fill build` over the same files into an "
            "Icechunk repository (default workers: one process per CPU), bar live (stderr "
            "on a terminal) vs not drawn (stderr a pipe; the command has no switch to turn "
            f"progress off), interleaved, medians of {args.cli_repeat}:",
            "",
            "| files | wall: bar live / not drawn | ratio "
            "| CPU of the main process: live / not drawn | ratio "
            "| parse phase: live / not drawn | redraws per live run |",
            "|---|---|---|---|---|---|---|",
        ]
        for fmt, runs in cli.items():

            def median(field: str, variant: str, runs: dict[str, list[CliRun]] = runs) -> float:
                return statistics.median(getattr(r, field) for r in runs[variant])

            wall_on, wall_off = median("wall_s", "on"), median("wall_s", "off")
            cpu_on, cpu_off = median("cpu_s", "on"), median("cpu_s", "off")
            lines.append(
                f"| {n:,} {LABEL[fmt]} | {wall_on:.2f} s / {wall_off:.2f} s "
                f"| **{wall_on / wall_off:.3f}** | {cpu_on:.2f} s / {cpu_off:.2f} s "
                f"| **{cpu_on / cpu_off:.3f}** "
                f"| {median('parse_s', 'on'):.1f} s / {median('parse_s', 'off'):.1f} s "
                f"| {median('redraws', 'on'):.0f} |"
            )
    if step_costs is not None:
        step, redraw = step_costs
        lines += [
            "",
            f"Microbenchmark on a pseudo-terminal: one progress step costs {step * 1e6:.2f} µs "
            f"and one redraw {redraw * 1e6:.1f} µs; with at most 10 redraws a second the bar "
            f"uses {10 * redraw * 100:.3f}% of a core plus {step * 1e6:.2f} µs per file.",
        ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def _spawn_mode(
    fmt: str, mode: str, directory: Path, args: argparse.Namespace, out: Path
) -> str | None:
    """Run one measurement in a fresh process; the reason it failed, or None."""
    command = [sys.executable, "-X", "faulthandler", __file__, "--worker", fmt, mode]
    command += ["--input-dir", str(directory), "--files", str(args.files)]
    command += ["--threads", str(args.threads), "--out", str(out)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    code = completed.returncode
    if code == 0:
        return None
    (out.parent / f"{out.name}.log").write_text(completed.stderr)
    lines = completed.stderr.strip().splitlines()
    if code < 0:  # killed by a signal: name it and where the crashing thread was
        where = ""
        if "Current thread" in completed.stderr:
            after = completed.stderr.split("Current thread", 1)[1].splitlines()[1:2]
            where = f" in {after[0].strip()}" if after else ""
        return f"crashed with {signal.Signals(-code).name}{where}"
    return lines[-1] if lines else f"exited {code}"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000, help="files of each format")
    parser.add_argument("--threads", type=int, default=4, help="thread pool size")
    parser.add_argument(
        "--cli-repeat",
        type=int,
        help=f"CLI builds per progress variant (default 3; 1 below {SMOKE_FILES} files)",
    )
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the inputs here")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI progress runs")
    parser.add_argument(
        "--cli-formats",
        nargs="+",
        choices=FORMATS,
        default=["tiff"],
        help="inputs of the CLI progress runs (default: the GeoTIFFs)",
    )
    # Internal: one measurement in a fresh process.
    parser.add_argument("--worker", nargs=2, metavar=("FORMAT", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--input-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if "serial" not in args.modes:
        parser.error("--modes must include serial: the other modes are compared with it")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.cli_repeat is None:
        args.cli_repeat = 3 if args.files >= SMOKE_FILES else 1
    if args.worker:
        fmt, mode = args.worker
        run_mode(fmt, mode, args.input_dir, args.files, args.threads, args.out)
        return 0
    load_start = os.getloadavg()
    temporary = None
    if args.workdir is None:
        temporary = tempfile.mkdtemp(prefix="bench_scale-")
        workdir = Path(temporary)
    else:
        workdir = args.workdir.resolve()
    try:
        return _run(args, workdir, load_start)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def _run(args: argparse.Namespace, workdir: Path, load_start: tuple[float, ...]) -> int:
    directory = workdir / f"inputs-{args.files}"
    started = time.perf_counter()
    paths = dict(zip(FORMATS, inputs.make_inputs(directory, args.files), strict=True))
    generate_s = time.perf_counter() - started
    print(f"inputs: {directory} ({generate_s:.1f} s)", file=sys.stderr)
    results_dir = workdir / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    verdicts: dict[tuple[str, str], str] = {}
    failed = False
    for fmt in FORMATS:
        loaded: dict[str, tuple[dict[str, Any], dict[str, np.ndarray]]] = {}
        for mode in args.modes:
            out = results_dir / f"{fmt}-{mode}"
            error = _spawn_mode(fmt, mode, directory, args, out)
            if error is not None:
                verdicts[(fmt, mode)] = f"FAILED: {error}"
                print(f"{fmt} {mode}: FAILED: {error}", file=sys.stderr)
                failed = True
                continue
            loaded[mode] = _load(out)
            results[(fmt, mode)] = loaded[mode][0]
            print(f"{fmt} {mode}: {loaded[mode][0]['wall_s']:.2f} s", file=sys.stderr)
        if "serial" not in loaded:
            continue
        reference = not_rectilinear(fmt, loaded["serial"][0])
        reference += check_against_native(fmt, paths[fmt], loaded["serial"][1])
        verdicts[(fmt, "serial")] = (
            "reference; equals tifffile/h5py" if not reference else f"NO: {reference[0]}"
        )
        failed |= bool(reference)
        for problem in reference[:10]:
            print(f"{fmt} serial: {problem}", file=sys.stderr)
        for mode, other in loaded.items():
            if mode == "serial":
                continue
            problems = compare_with_serial(loaded["serial"], other)
            verdicts[(fmt, mode)] = "yes" if not problems else f"NO: {problems[0]}"
            failed |= bool(problems)
            for problem in problems[:10]:
                print(f"{fmt} {mode}: {problem}", file=sys.stderr)
    cli: dict[str, dict[str, list[CliRun]]] = {}
    step_costs = None
    if not args.no_cli:
        for fmt in args.cli_formats:
            cli[fmt] = measure_cli(directory, fmt, args.cli_repeat)
            print(f"{fmt} CLI runs done", file=sys.stderr)
        step_costs = progress_step_costs()
    print(
        report(
            args,
            results,
            verdicts,
            cli,
            step_costs,
            (load_start, os.getloadavg()),
            generate_s,
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
