"""HDF5Parser parse time of two source trees, side by side in one run.

Compares the package at another commit (``--base``: a directory holding a
``virtualizarr_fill`` package, e.g. made with ``git archive <commit> virtualizarr_fill
| tar -x -C DIR``) with this checkout's, on every HDF5 file of the corpus and the
generated HDF5 inputs of ``_inputs.py``. One long-lived worker process per tree (imports
paid once); per file, ``--rounds`` rounds alternate which tree goes first, each timing
``--parses`` parses; a tree's time for the file is the median over rounds of its
per-round medians. Times are CPU seconds of the worker process, which a loaded machine
disturbs less than wall-clock time.

    git archive <commit> virtualizarr_fill | tar -x -C /tmp/base
    python benchmarks/bench_hdf5_ab.py --base /tmp/base [--rounds 5] [--parses 3] [--only TEXT ...]
        [--dir DIR]

``--dir`` times the HDF5 files under DIR instead (e.g. the netCDF-4 series
``bench_scale.py --workdir DIR`` writes under ``DIR/netcdf``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = REPO_ROOT.parent / "shared" / "corpus"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _worker(package_dir: str) -> int:
    """Serve ``path parses`` lines: the median CPU time of that many parses."""
    sys.path.insert(0, package_dir)
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    import virtualizarr_fill
    from virtualizarr_fill.hdf5 import HDF5Parser

    print(json.dumps({"package": virtualizarr_fill.__file__}), flush=True)
    for line in sys.stdin:
        path, parses = line.rsplit(" ", 1)
        times = []
        for number in range(int(parses) + 1):  # the first parse warms caches up
            registry = ObjectStoreRegistry({"file://": LocalStore()})
            start = time.process_time()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    HDF5Parser()("file://" + path, registry)
            except Exception:  # a refusal costs its time too
                pass
            if number:
                times.append(time.process_time() - start)
        print(json.dumps({"seconds": statistics.median(times)}), flush=True)
    return 0


def _files(only: list[str] | None, directory: Path | None = None) -> list[Path]:
    found = []
    for path in sorted((directory or CORPUS).rglob("*")):
        if not path.is_file() or path.stat().st_size > 64 << 20:
            continue
        with open(path, "rb") as handle:
            head = handle.read(4096)
        if any(head[at : at + 8] == HDF5_SIGNATURE for at in (0, 512, 1024, 2048)):
            found.append(path)
    if directory is None:
        sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
        import _inputs

        found += _inputs.make_hdf5_inputs(REPO_ROOT / "benchmarks" / ".hdf5_inputs")
    if only:
        found = [path for path in found if any(text in str(path) for text in only)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="directory holding the other package")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parses", type=int, default=3)
    parser.add_argument("--only", nargs="+", metavar="TEXT")
    parser.add_argument("--dir", type=Path, help="time the HDF5 files under DIR instead")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    trees = {"base": str(Path(args.base).resolve()), "this": str(REPO_ROOT)}
    workers = {}
    for name, directory in trees.items():
        workers[name] = subprocess.Popen(
            [sys.executable, __file__, "--base", directory, "--worker", directory],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        print(f"{name}: {workers[name].stdout.readline().strip()}")  # type: ignore[union-attr]
    rows = []
    for path in _files(args.only, args.dir):
        times: dict[str, list[float]] = {name: [] for name in workers}
        for number in range(args.rounds):
            order = list(workers) if number % 2 == 0 else list(reversed(workers))
            for name in order:
                worker = workers[name]
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write(f"{path} {args.parses}\n")
                worker.stdin.flush()
                times[name].append(json.loads(worker.stdout.readline())["seconds"])
        base, this = statistics.median(times["base"]), statistics.median(times["this"])
        rows.append((base, this))
        label = str(path).split("corpus/")[-1][-60:]
        print(
            f"{label:60s} base {base * 1e3:8.2f} ms  this {this * 1e3:8.2f} ms  {this / base:5.2f}"
        )
    for worker in workers.values():
        worker.stdin.close()  # type: ignore[union-attr]
        worker.wait()
    ratios = [this / base for base, this in rows if base > 0]
    print(
        f"\nfiles: {len(rows)}; this/base per file: median {statistics.median(ratios):.3f}, "
        f"mean {statistics.mean(ratios):.3f}, max {max(ratios):.2f}; all files: base "
        f"{sum(b for b, _ in rows) * 1e3:.0f} ms, this {sum(t for _, t in rows) * 1e3:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
