"""Start-up cost: importing the package and running the command line, next to VirtualiZarr.

Each command runs in a fresh interpreter, the commands interleaved round by round so that
all see the same machine load; the table gives medians and ratios to
``python -c "import virtualizarr"``. Targets: ``import virtualizarr_fill`` at most 1.5x,
``virtualizarr-fill --help`` at most 0.5x.

Run: ``python benchmarks/bench_import.py [--rounds 15]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "import virtualizarr": [sys.executable, "-c", "import virtualizarr"],
    "import virtualizarr_fill": [sys.executable, "-c", "import virtualizarr_fill"],
    "from virtualizarr_fill import TIFFParser, HDF5Parser": [
        sys.executable,
        "-c",
        "from virtualizarr_fill import TIFFParser, HDF5Parser",
    ],
    "virtualizarr-fill --help": [
        shutil.which("virtualizarr-fill", path=str(Path(sys.executable).parent))
        or "virtualizarr-fill",
        "--help",
    ],
}
TARGETS = {"import virtualizarr_fill": 1.5, "virtualizarr-fill --help": 0.5}


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd="/")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache
        _seconds(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for round_ in range(args.rounds):
        names = list(COMMANDS)
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(_seconds(COMMANDS[name]))
    reference = statistics.median(times["import virtualizarr"])
    print(f"{'command':55s} {'median':>9s} {'ratio':>7s}  target")
    failed = False
    for name, values in times.items():
        median = statistics.median(values)
        ratio = median / reference
        target = TARGETS.get(name)
        mark = ""
        if target is not None:
            ok = ratio <= target
            failed |= not ok
            mark = f"<= {target} {'ok' if ok else 'MISSED'}"
        print(f"{name:55s} {median * 1e3:7.0f} ms {ratio:6.2f}x  {mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
