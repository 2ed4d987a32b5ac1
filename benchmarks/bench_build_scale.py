"""``virtualizarr-fill build`` over growing numbers of small GeoTIFF tiles: time per file
and peak memory, as a mosaic and as a series.

The tiles are those of ``_scale_inputs.py`` (one float32 band of 60 x 64 pixels in four
deflate strips, each tile directly south of the previous one), so that the same files
build both a mosaic (``--mosaic``) and a series along ``y`` (``--concat-dim y``). Each
build runs in a fresh process, alone, and is timed from the outside; its peak resident
memory is the process's own (``ru_maxrss`` of ``wait4``, taken by a small launcher
process, see ``_LAUNCHER``). The table gives, for each count, the wall time, the time per file
against the smallest count's, and the peak memory with its growth per file.

Usage::

    python benchmarks/bench_build_scale.py [--files 1000 10000] [--modes mosaic series]
        [--workdir DIR]

The defaults are small; the figures of docs/performance.md come from
``--files 10000 100000 --workdir DIR`` and ``--files 1000000 --modes mosaic --workdir
DIR`` (10^6 tiles take about 16 GB of disk with their links; ``--workdir`` keeps them
for the next run, ``--processes`` writes them in parallel).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _scale_inputs as inputs

MODES = {"mosaic": ["--mosaic"], "series": ["--concat-dim", "y"]}


def tile_set(tiles: list[Path], count: int, directory: Path) -> str:
    """A pattern naming the first ``count`` tiles: a folder of links to them (the build
    resolves links, so the store references the tiles themselves), since 10^5 names do
    not fit on a command line."""
    folder = directory / f"first-{count}"
    if not folder.exists():
        staging = folder.with_suffix(".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for tile in tiles[:count]:
            (staging / tile.name).symlink_to(tile)
        staging.rename(folder)
    return str(folder / "*.tif")


#: Runs a command and prints its peak resident memory in KB. The build is started by
#: this small process, not by the benchmark: Linux keeps a process's peak across
#: ``exec`` (and ``subprocess`` starts children with ``vfork``), so a build started by the
#: benchmark itself, which holds 10^6 tile paths, would report the benchmark's peak.
_LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss, flush=True)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def build(pattern: str, mode: str, out: Path) -> tuple[float, float]:
    """One build of the tiles ``pattern`` names: its wall time in seconds and peak
    memory in MB."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "virtualizarr_fill.cli", "build", pattern]
    command += [*MODES[mode], "--out", str(out)]
    started = time.perf_counter()
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command],
        stdin=subprocess.DEVNULL,
        capture_output=True,  # stderr: the progress lines
        check=False,
    )
    wall = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    if launched.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)}: {launched.stderr.decode(errors='replace')[-2000:]}"
        )
    return wall, int(launched.stdout.split()[-1]) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=sorted(MODES))
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the tiles here")
    parser.add_argument("--processes", type=int, default=1, help="processes writing tiles")
    args = parser.parse_args(argv)
    temporary = None if args.workdir else tempfile.mkdtemp(prefix="bench_build_scale-")
    workdir = (args.workdir or Path(str(temporary))).resolve()
    try:
        counts = sorted(args.files)
        tiles = inputs.make_tiffs(workdir / "tiles", counts[-1], args.processes)
        rows = ["| files | build | wall | per file | vs smallest | peak memory | per added file |"]
        rows.append("|---|---|---|---|---|---|---|")
        for mode in args.modes:
            first: tuple[int, float, float] | None = None
            for count in counts:
                pattern = tile_set(tiles, count, workdir / "sets")
                wall, peak = build(pattern, mode, workdir / f"{mode}.icechunk")
                per_file = wall / count
                print(f"{mode} {count}: {wall:.1f} s, {peak:.0f} MB", file=sys.stderr)
                if first is None:
                    first = (count, per_file, peak)
                    ratio, growth = "1.00x", ""
                else:
                    ratio = f"{per_file / first[1]:.2f}x"
                    growth = f"{(peak - first[2]) * 1024 / (count - first[0]):.1f} KB"
                rows.append(
                    f"| {count:,} | {mode} | {wall:.1f} s | {per_file * 1e3:.2f} ms | {ratio} "
                    f"| {peak:,.0f} MB | {growth} |"
                )
        print("\n".join(rows))
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
