"""One HDF5Parser parse in a fresh, memory-capped process, for malformed files that
crash, hang or exhaust a process.

``python -m tests._parse_probe FILE [OPTIONS_JSON]`` parses ``FILE`` with
``HDF5Parser(**options)``, opens the result with zarr, walks every group (zarr's
``groups()``, recursively) and reads every array; it prints one JSON line: the error
(class and message) or the arrays read (path -> shape, dimension names, values as a
list), the warnings (class and message) and the peak resident memory in MB.
:func:`probe` runs it and returns that, with the exit status.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Address space the probe may add to what its imports use.
HEADROOM = 3 << 30


def _peak_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _cap_address_space() -> None:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                limit = int(line.split()[1]) * 1024 + HEADROOM
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str]) -> int:
    import warnings

    import numpy as np
    import zarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    from virtualizarr_fill.errors import VirtualizarrFillError
    from virtualizarr_fill.hdf5 import HDF5Parser

    path = Path(argv[0]).resolve()
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    _cap_address_space()
    result: dict[str, Any] = {"error": None, "arrays": {}, "warnings": []}
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            store = HDF5Parser(**options)("file://" + str(path), registry)
        except VirtualizarrFillError as error:
            result["error"] = [type(error).__name__, str(error)]
        else:
            result["peak_parse_mb"] = _peak_mb()

            def walk(group: Any, prefix: str) -> None:
                for name, array in group.arrays():
                    values = np.asarray(array[...])
                    result["arrays"][prefix + name] = {
                        "shape": list(values.shape),
                        "dims": list(array.metadata.dimension_names or ()),
                        "values": values.tolist(),
                    }
                for name, child in group.groups():
                    walk(child, f"{prefix}{name}/")

            walk(zarr.open_group(store, mode="r", zarr_format=3), "")
            result["attributes"] = dict(zarr.open_group(store, mode="r", zarr_format=3).attrs)
    result["warnings"] = [[type(w.message).__name__, str(w.message)] for w in caught]
    print(json.dumps(result, default=str))
    return 0


def probe(
    path: Path, options: dict[str, Any] | None = None, timeout: float = 120
) -> dict[str, Any]:
    """Run the probe on ``path``; its JSON output plus ``returncode`` (and ``stderr``)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests._parse_probe", str(path), json.dumps(options or {})],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    result["returncode"] = done.returncode
    result["stderr"] = done.stderr[-2000:]
    return result


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
