"""The benchmark suite: named benchmarks, each tool measured cold and warm alike.

``parse``
    Every tool that reads the format (our parsers; virtual-tiff, VirtualiZarr's
    ``HDFParser``, async-hdf5, kerchunk) parses each file, local, every image or dataset.

    *cold*: the first parse in a fresh process that has imported the tool and nothing
    more (no file parsed, every cache of ours empty: ``tiff.caches.clear_all()``; the
    operating system's page cache is not dropped, for any tool). Each measurement is its
    own process, forked from a per-tool process that has done the imports only, so that
    module imports (measured by ``import``) are not counted in parse times.

    *warm*: the same file parsed again in that process (the median of ``--warm``
    repeats): what a tool costs once its lazy imports, first-use set-ups and caches are
    paid for. For our TIFF parser, whose result caches serve a repeated georeference,
    also *warm, caches off* (``tiff.caches.ENABLED = False``): the steady cost of a file
    unlike the ones before it, which is what an archive of distinct files sees at worst.

    Only files a tool reads correctly count for it: the verdicts of
    ``conformance/conformance.py`` (``--conformance-json``, else checked here). Rounds
    run the tools in turn, so that load from elsewhere falls on each alike; the tables give
    medians over rounds, and ratios (ours / theirs: below 1, ours is faster).

``import``
    Start-up: each import (or ``virtualizarr-fill --help``) in a fresh interpreter.

The end-to-end benchmarks stay scripts of their own, listed in ``benchmarks/README.md``;
``run.py NAME -- ARGS`` runs one of them (``build``, ``build-scale``, ``read-back``,
``mosaic-placement``, ``scale``, ``concat``, ``anchors``).

Usage::

    python benchmarks/run.py parse --rounds 3 --files 16 --json parse.json
    python benchmarks/run.py parse --kinds hdf5 --tools virtualizarr-fill virtualizarr-hdf
    python benchmarks/run.py import --rounds 7
    python benchmarks/run.py build -- --kinds tiff --files 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _path in (str(REPO), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import _anchors as anchors  # noqa: E402
from _anchors import OURS, TOOLS, BenchFile  # noqa: E402

#: Modules a tool's process imports before parsing a format: what a user's script imports
#: to call the parser ``_anchors.TOOLS`` calls.
PREIMPORTS: dict[tuple[str, str], list[str]] = {
    (OURS, "tiff"): ["virtualizarr_fill.tiff"],
    (OURS, "hdf5"): ["virtualizarr_fill.hdf5"],
    ("virtual-tiff", "tiff"): ["virtual_tiff"],
    ("virtualizarr-hdf", "hdf5"): ["virtualizarr.parsers"],
    ("async-hdf5", "hdf5"): ["async_hdf5.virtualizarr"],
    ("kerchunk", "tiff"): ["kerchunk.tiff"],
    ("kerchunk", "hdf5"): ["kerchunk.hdf"],
}
COMMON_IMPORTS = ["numpy", "zarr", "virtualizarr", "obstore.store", "obspec_utils.registry"]

#: The end-to-end benchmarks, scripts of their own.
SCRIPTS = {
    "build": "bench_build.py",
    "build-scale": "bench_build_scale.py",
    "read-back": "bench_read_back.py",
    "mosaic-placement": "bench_mosaic_placement.py",
    "scale": "bench_scale.py",
    "concat": "bench_concat.py",
    "anchors": "bench_anchors.py",
}

MODES = ("cold", "warm", "warm_uncached")


def child_environment() -> dict[str, str]:
    """The environment measured processes run in: compiled bytecode is written (under a
    prefix of its own) and read, as installed packages have it, so that no tool's import
    time includes compiling its sources."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "virtualizarr-fill-bench-pycache")
    )
    return env


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ one tool's process


def _zygote(tool_name: str, kind: str) -> int:
    """Per-tool process: import, then for each job line on stdin fork a child that
    measures one file (cold, then warm) and answer one JSON line on stdout."""
    import importlib

    out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    for module in (*COMMON_IMPORTS, *PREIMPORTS[(tool_name, kind)]):
        importlib.import_module(module)
    out.write(json.dumps({"imports": time.perf_counter() - start}) + "\n")
    out.flush()
    for line in sys.stdin:
        job = json.loads(line)
        out.write(json.dumps(_forked(tool_name, job)) + "\n")
        out.flush()
    return 0


def _forked(tool_name: str, job: dict[str, Any]) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fresh process: nothing parsed yet
        os.close(read_end)
        try:
            result = _measure_in_child(tool_name, job)
        except BaseException as error:  # reported; the child exits
            result = {"error": f"{type(error).__name__}: {error}"[:300]}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + job["timeout"]
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([read_end], [], [], max(left, 0))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            return {"error": f"timeout: no result after {job['timeout']:g} s"}
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {"error": f"crash: the process ended with status {status}"}
    return dict(json.loads(b"".join(chunks)))


def _measure_in_child(tool_name: str, job: dict[str, Any]) -> dict[str, Any]:
    from virtualizarr_fill.tiff import caches

    caches.clear_all()  # empty after the imports already; said here, not assumed
    tool = TOOLS[tool_name]
    leg = anchors.LocalLeg(count=False)
    file = BenchFile(job["label"], Path(job["path"]), job["kind"])

    def once() -> float:
        target = leg.target(file)
        start = time.perf_counter()
        tool.parse(target)
        return time.perf_counter() - start

    result: dict[str, Any] = {"cold": once()}
    result["warm"] = statistics.median(once() for _ in range(job["warm"]))
    if tool_name == OURS and file.kind == "tiff":
        caches.ENABLED = False
        caches.clear_all()
        result["warm_uncached"] = statistics.median(once() for _ in range(job["warm"]))
    return result


class ToolProcess:
    """The parent's handle on one tool's process, restarted if it dies."""

    def __init__(self, tool: str, kind: str) -> None:
        self.tool = tool
        self.kind = kind
        self.process: subprocess.Popen[str] | None = None
        self.imports: list[float] = []

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "_zygote", self.tool, self.kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_environment(),
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if not ready:
            raise RuntimeError(f"{self.tool}: the tool's process did not start")
        self.imports.append(json.loads(ready)["imports"])

    def measure(self, file: BenchFile, warm: int, timeout: float) -> dict[str, Any]:
        if self.process is None or self.process.poll() is not None:
            self.start()
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {
            "label": file.label,
            "path": str(file.path),
            "kind": file.kind,
            "warm": warm,
            "timeout": timeout,
        }
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.process = None
            return {"error": "crash: the tool's process ended"}
        return dict(json.loads(line))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(30)
        self.process = None


# ------------------------------------------------------------------------ parse


def correct_files(
    files: list[BenchFile], tools: list[str], saved: Path | None, timeout: float
) -> dict[str, set[str]]:
    """The files each tool reads correctly (conformance.py's ``exact``)."""
    from conformance import conformance
    from conformance.worker import EXACT, correct_outcome

    verdicts: dict[tuple[str, str], dict[str, Any]] = {}
    if saved is not None:
        for r in json.loads(saved.read_text())["results"]:
            verdicts[(r["tool"], r["file"])] = r
    jobs = [
        conformance.Job(tool, str(f.path), f.label, f.kind)
        for f in files
        for tool in tools
        if f.kind in TOOLS[tool].kinds and (tool, f.label) not in verdicts
    ]
    if jobs:
        log(f"correctness: {len(jobs)} (tool, file) checks (conformance/conformance.py)")
        for r in conformance.run_jobs(jobs, 2, timeout, None, 6 * 2**30, progress=False):
            verdicts[(r["tool"], r["file"])] = r
    correct: dict[str, set[str]] = {tool: set() for tool in tools}
    for (tool, label), result in verdicts.items():
        if tool in correct and correct_outcome(result) == EXACT:
            correct[tool].add(label)
    return correct


def run_parse(args: argparse.Namespace) -> dict[str, Any]:
    files = [f for f in anchors.corpus_sample(args.files) if f.kind in args.kinds]
    if args.generated:
        workdir = Path(tempfile.gettempdir()) / "virtualizarr-fill-bench-inputs"
        files += [f for f in anchors.generated_files(workdir) if f.kind in args.kinds]
    tools = [t for t in args.tools if TOOLS[t].kinds & set(args.kinds)]
    correct = correct_files(files, tools, args.conformance_json, args.timeout)
    processes = {
        (tool, kind): ToolProcess(tool, kind) for (tool, kind) in PREIMPORTS if tool in tools
    }
    for process in processes.values():  # untimed: bytecode written, files in the page cache
        process.start()
        process.stop()
        process.imports.clear()
    times: dict[tuple[str, str], dict[str, list[float]]] = {}
    errors: dict[tuple[str, str], str] = {}
    try:
        for round_ in range(args.rounds):
            log(f"round {round_ + 1} of {args.rounds}")
            for file in files:
                for tool in tools:
                    if file.kind not in TOOLS[tool].kinds or file.label not in correct[tool]:
                        continue
                    if (tool, file.label) in errors:
                        continue
                    process = processes[(tool, file.kind)]
                    result = process.measure(file, args.warm, args.timeout)
                    if "error" in result:
                        errors[(tool, file.label)] = result["error"]
                        continue
                    cell = times.setdefault((tool, file.label), {})
                    for mode in MODES:
                        if mode in result:
                            cell.setdefault(mode, []).append(result[mode])
            for process in processes.values():  # fresh imports, timed, each round
                process.stop()
    finally:
        for process in processes.values():
            process.stop()
    medians = {
        f"{tool}\t{label}": {mode: statistics.median(v) for mode, v in cell.items()}
        for (tool, label), cell in times.items()
    }
    return {
        "benchmark": "parse",
        "rounds": args.rounds,
        "warm_repeats": args.warm,
        "files": [{"label": f.label, "kind": f.kind} for f in files],
        "correct": {tool: sorted(labels) for tool, labels in correct.items()},
        "medians": medians,
        "imports": {
            f"{tool}\t{kind}": statistics.median(p.imports)
            for (tool, kind), p in processes.items()
            if p.imports
        },
        "errors": {f"{tool}\t{label}": e for (tool, label), e in errors.items()},
    }


def _median_ratio(
    ours: list[dict[str, float]],
    theirs: list[dict[str, float]],
    mode: str,
    ours_mode: str | None = None,
) -> str:
    """The median over files of ours (in ``ours_mode``) / theirs (in ``mode``)."""
    values = [
        o[ours_mode or mode] / t[mode]
        for o, t in zip(ours, theirs, strict=True)
        if (ours_mode or mode) in o
    ]
    return f"**{statistics.median(values):.2f}**" if values else "n/a"


def ms(values: Iterable[dict[str, float]], mode: str) -> str:
    return f"{statistics.median(v[mode] for v in values) * 1e3:.1f}"


def summarise_parse(report: dict[str, Any]) -> str:
    """Per peer and format: files both read correctly, median per-file ratio of ours to
    the peer's time in each mode, and the medians of the times themselves (ms)."""
    medians = {tuple(key.split("\t")): value for key, value in report["medians"].items()}
    kinds = {f["label"]: f["kind"] for f in report["files"]}
    peers = sorted({tool for tool, _ in medians if tool != OURS})
    lines = [
        "| peer | format | files | cold: ours / peer's (ms) | cold ratio | cold with imports "
        "ratio | warm: ours / peer's (ms) | warm ratio | ours warm, caches off: ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("tiff", "hdf5"):
        for peer in peers:
            labels = [
                label
                for (tool, label) in medians
                if tool == peer and kinds[label] == kind and (OURS, label) in medians
            ]
            if not labels:
                continue
            ours = [medians[(OURS, label)] for label in labels]
            theirs = [medians[(peer, label)] for label in labels]

            def ratio(mode: str, ours_mode: str | None = None) -> str:
                return _median_ratio(ours, theirs, mode, ours_mode)  # noqa: B023

            uncached = ratio("warm", "warm_uncached") if kind == "tiff" else "n/a"
            ours_imports = report["imports"][f"{OURS}\t{kind}"]
            peer_imports = report["imports"][f"{peer}\t{kind}"]
            with_imports = statistics.median(
                (o["cold"] + ours_imports) / (t["cold"] + peer_imports)
                for o, t in zip(ours, theirs, strict=True)
            )
            lines.append(
                f"| {peer} | {kind.upper() if kind == 'tiff' else 'HDF5'} | {len(labels)} | "
                f"{ms(ours, 'cold')} / {ms(theirs, 'cold')} | {ratio('cold')} | "
                f"{with_imports:.2f} | "
                f"{ms(ours, 'warm')} / {ms(theirs, 'warm')} | {ratio('warm')} | {uncached} |"
            )
    for kind in ("tiff", "hdf5"):
        ours_all = [
            v for (tool, label), v in medians.items() if tool == OURS and kinds[label] == kind
        ]
        if ours_all:
            lines.append(
                f"\nours alone, {kind}: {len(ours_all)} files, cold median "
                f"{statistics.median(v['cold'] for v in ours_all) * 1e3:.1f} ms, warm median "
                f"{statistics.median(v['warm'] for v in ours_all) * 1e3:.1f} ms"
            )
    lines.append(
        "\nimports before the first parse (fresh interpreter, median of rounds): "
        + ", ".join(
            f"{key.replace(chr(9), ' ')} {s * 1e3:,.0f} ms" for key, s in report["imports"].items()
        )
    )
    if report["errors"]:
        lines.append(f"\n{len(report['errors'])} (tool, file) parses failed in a timed run:")
        lines += [f"  {key.replace(chr(9), ' ')}: {e}" for key, e in report["errors"].items()]
    return "\n".join(lines)


# ----------------------------------------------------------------------- import

IMPORTS = {
    "import virtualizarr": [sys.executable, "-c", "import virtualizarr"],
    "import virtualizarr_fill": [sys.executable, "-c", "import virtualizarr_fill"],
    "from virtualizarr_fill import TIFFParser, HDF5Parser": [
        sys.executable,
        "-c",
        "from virtualizarr_fill import TIFFParser, HDF5Parser",
    ],
    # The console script installed beside this interpreter, as users run it.
    "virtualizarr-fill --help": [
        shutil.which("virtualizarr-fill", path=str(Path(sys.executable).parent))
        or "virtualizarr-fill",
        "--help",
    ],
}


def run_import(args: argparse.Namespace) -> dict[str, Any]:
    """Each command in a fresh interpreter, ``--rounds`` times, the order rotating from
    round to round, after one untimed run of each (the page cache holds the files)."""

    def seconds(command: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, cwd="/", env=child_environment())
        return time.perf_counter() - start

    for command in IMPORTS.values():
        seconds(command)
    samples: dict[str, list[float]] = {name: [] for name in IMPORTS}
    names = list(IMPORTS)
    for round_ in range(args.rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(seconds(IMPORTS[name]))
    return {"benchmark": "import", "medians": {k: statistics.median(v) for k, v in samples.items()}}


def summarise_import(report: dict[str, Any]) -> str:
    base = report["medians"]["import virtualizarr"]
    lines = ["| command | median | vs `import virtualizarr` |", "|---|---|---|"]
    for name, seconds in report["medians"].items():
        lines.append(f"| `{name}` | {seconds * 1e3:,.0f} ms | {seconds / base:.2f}x |")
    return "\n".join(lines)


# ------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_zygote"]:
        return _zygote(argv[1], argv[2])
    if argv and argv[0] in SCRIPTS:
        rest = argv[1:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return subprocess.call([sys.executable, str(HERE / SCRIPTS[argv[0]]), *rest])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="benchmark", required=True)
    parse = sub.add_parser("parse", help="parse times, cold and warm, ours and the peers'")
    parse.add_argument("--kinds", nargs="+", choices=["tiff", "hdf5"], default=["tiff", "hdf5"])
    parse.add_argument("--tools", nargs="+", choices=list(TOOLS), default=list(TOOLS))
    parse.add_argument("--files", type=int, help="at most this many corpus files of each kind")
    parse.add_argument("--generated", action="store_true", help="add the generated inputs")
    parse.add_argument("--rounds", type=int, default=3, help="cold measurements per file")
    parse.add_argument("--warm", type=int, default=5, help="warm repeats per measurement")
    parse.add_argument("--timeout", type=float, default=120.0, help="seconds per measurement")
    parse.add_argument("--conformance-json", type=Path, help="saved conformance.py report")
    parse.add_argument("--json", type=Path, help="write the measurements here")
    imports = sub.add_parser("import", help="start-up times, each in a fresh interpreter")
    imports.add_argument("--rounds", type=int, default=7)
    imports.add_argument("--json", type=Path)
    sub.add_parser("list", help="the named benchmarks")
    args = parser.parse_args(argv)
    if args.benchmark == "list":
        print("parse\nimport\n" + "\n".join(f"{k} ({v})" for k, v in SCRIPTS.items()))
        return 0
    start = time.perf_counter()
    if args.benchmark == "parse":
        report = run_parse(args)
        text = summarise_parse(report)
    else:
        report = run_import(args)
        text = summarise_import(report)
    report["seconds"] = time.perf_counter() - start
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
