"""The benchmark runner and the conformance suite run, and stand on their own.

``benchmarks/run.py parse`` measures each parse cold (a fresh process) and warm; the
conformance suite runs its checks in the package's worker loop (``isolated_map``), where
a check past its time limit costs that check; neither imports from ``tests/``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_benchmarks_and_conformance_import_nothing_from_tests() -> None:
    scripts = sorted((ROOT / "benchmarks").rglob("*.py")) + sorted(
        (ROOT / "conformance").rglob("*.py")
    )
    assert len(scripts) > 10
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imported_modules(path) if name.split(".")[0] == "tests"
        )
        for path in scripts
    }
    assert {path: names for path, names in offenders.items() if names} == {}


@pytest.mark.corpus
def test_parse_benchmark_measures_cold_and_warm(corpus_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "parse.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "codecs/src")])}
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "parse",
            "--kinds",
            "tiff",
            "--tools",
            "virtualizarr-fill",
            "--files",
            "3",
            "--rounds",
            "2",
            "--warm",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(out.read_text())
    correct = report["correct"]["virtualizarr-fill"]
    assert correct, "none of the sampled files is read exactly"
    assert report["errors"] == {}
    for label in correct:
        times = report["medians"][f"virtualizarr-fill\t{label}"]
        assert set(times) == {"cold", "warm", "warm_uncached"}
        assert all(seconds > 0 for seconds in times.values())
    assert report["imports"]["virtualizarr-fill\ttiff"] > 0


@pytest.mark.corpus
def test_conformance_check_past_its_time_limit_costs_that_check(corpus_dir: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from conformance import conformance

    tiff = corpus_dir / "rasterio+rasterio" / "byte.tif"
    rel = str(tiff.relative_to(corpus_dir))
    jobs = [
        conformance.Job("virtualizarr-fill", str(tiff), rel, "tiff"),
        conformance.Job("native", str(tiff), rel, "tiff"),
    ]
    [slow] = conformance.run_jobs(jobs[:1], 1, 0.001, None, 2**30, progress=False)
    assert slow["outcome"] == "timeout"
    assert "time limit" in slow["error"]
    assert any("retried in a fresh process" in note for note in slow["notes"])
    exact, native = conformance.run_jobs(jobs, 1, 120, None, 2**30, progress=False)
    assert exact["outcome"] == "exact", exact
    assert native["outcome"] == "ok", native
