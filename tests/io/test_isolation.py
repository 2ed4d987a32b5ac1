"""Isolated worker processes: a crash, a kill, a hang or a runaway allocation costs one
input, reported as such, never the caller's process or the other inputs.

The crashes are real: a worker kills itself with SIGSEGV, the test sends SIGKILL to a
worker it finds by the PID the worker wrote, an allocation runs into the address-space
cap. ``virtualizarr-fill build`` is run with a parser that kills its process on one file.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

from tests._isolation_probes import probe
from tests._manifest_builders import concat_fixtures, kerchunk_read
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, main
from virtualizarr_fill.formats import AutoParser, open_virtual_datasets
from virtualizarr_fill.io.isolation import Outcome, isolated_map

__all__ = ["concat_fixtures"]



def _by_input(outcomes: list[Outcome[Any, Any]]) -> dict[Any, Outcome[Any, Any]]:
    return {outcome.index: outcome for outcome in outcomes}


def test_values_errors_and_a_segfault() -> None:
    inputs = [("double", 1), ("raise", 2), ("segfault", 0), ("double", 4), ("double", 5)]
    outcomes = _by_input(list(isolated_map(probe, inputs, workers=2)))
    assert sorted(outcomes) == list(range(len(inputs)))
    assert [outcomes[i].value for i in (0, 3, 4)] == [2, 8, 10]
    assert isinstance(outcomes[1].error, ValueError) and "bad input 2" in str(outcomes[1].error)
    crashed = outcomes[2]
    assert not crashed.ok and crashed.died == "killed by SIGSEGV"
    assert "worker process died (killed by SIGSEGV)" in crashed.problem


def test_worker_killed_from_outside(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    killed: list[int] = []

    def kill_when_started() -> None:
        deadline = time.monotonic() + 60
        while not marker.exists() or not marker.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        pid = int(marker.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    inputs = [("sleep", str(marker)), ("double", 3), ("pid", 0)]
    outcomes = _by_input(list(isolated_map(probe, inputs, workers=1)))
    killer.join()
    assert killed and outcomes[0].died == "killed by SIGKILL"
    assert outcomes[1].value == 6
    # The one worker was replaced: the next input ran in another process.
    assert outcomes[2].value not in (killed[0], os.getpid())


def test_time_limit(tmp_path: Path) -> None:
    inputs = [("sleep", str(tmp_path / "pid")), ("double", 7)]
    started = time.monotonic()
    outcomes = _by_input(list(isolated_map(probe, inputs, workers=1, timeout=2)))
    assert time.monotonic() - started < 60
    assert outcomes[0].died == "ran longer than the time limit of 2 s"
    assert outcomes[1].value == 14


def test_address_space_cap() -> None:
    """An allocation past the cap fails in the worker (which is then replaced), and the
    same allocation within the cap succeeds."""
    inputs = [("allocate", 3 * 2**30), ("pid", 0), ("allocate", 2**20), ("pid", 0)]
    outcomes = _by_input(list(isolated_map(probe, inputs, workers=1, memory_limit=2**30)))
    assert isinstance(outcomes[0].error, MemoryError), outcomes[0]
    assert outcomes[2].value == 2**20
    assert outcomes[1].value != outcomes[3].value or outcomes[1].value is not None


def test_tasks_per_worker() -> None:
    inputs = [("pid", 0)] * 4
    pids = [o.value for o in isolated_map(probe, inputs, workers=1, tasks_per_worker=2)]
    assert len(set(pids)) == 2


def test_workers_see_the_callers_environment_of_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forkserver started before holds the environment of then (credentials set
    since must still reach the workers)."""
    list(isolated_map(probe, [("pid", 0)], workers=1))  # the forkserver is running
    monkeypatch.setenv("VIRTUALIZARR_FILL_TEST_SETTING", "set later")
    [outcome] = isolated_map(probe, [("environment", "VIRTUALIZARR_FILL_TEST_SETTING")])
    assert outcome.value == "set later"


def test_stopping_early_stops_the_workers(tmp_path: Path) -> None:
    inputs = [("double", 1), ("sleep", str(tmp_path / "a")), ("sleep", str(tmp_path / "b"))]
    outcomes = isolated_map(probe, inputs, workers=3)
    first = next(outcomes)
    assert first.ok
    outcomes.close()
    for name in ("a", "b"):
        marker = tmp_path / name
        if marker.exists() and marker.read_text():
            pid = int(marker.read_text())
            deadline = time.monotonic() + 10
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


# -- opening datasets, and the command line -----------------------------------------------


@dataclass(frozen=True)
class CrashOnName:
    """A parser that kills its own process with SIGSEGV on files named ``crash*``,
    and parses the others with :class:`AutoParser` (module level: workers import it)."""

    def __call__(self, url: str, registry: Any) -> Any:
        if url.rsplit("/", 1)[-1].startswith("crash"):
            os.kill(os.getpid(), signal.SIGSEGV)
        return AutoParser()(url, registry)


def _inputs(concat_fixtures: dict[str, Path], tmp_path: Path) -> tuple[list[Path], Path]:
    good = [concat_fixtures[name] for name in ("strip_short_0", "strip_short_1", "strip_short_2")]
    crash = tmp_path / "crash.tif"
    crash.write_bytes(good[0].read_bytes())
    return good, crash


def test_open_virtual_datasets(concat_fixtures: dict[str, Path], tmp_path: Path) -> None:
    good, crash = _inputs(concat_fixtures, tmp_path)
    urls = [p.resolve().as_uri() for p in (good[0], crash, good[1])]
    outcomes = open_virtual_datasets(urls, parser=CrashOnName(), workers=2)
    assert [o.input for o in outcomes] == urls
    assert outcomes[1].died == "killed by SIGSEGV"
    for outcome, path in zip((outcomes[0], outcomes[2]), (good[0], good[1]), strict=True):
        assert outcome.ok and outcome.value is not None
        assert outcome.value["band_data"].shape[1:] == tifffile.imread(path).shape


@pytest.mark.parametrize("skip_bad", [True, False], ids=["skip-bad", "stop"])
def test_build_survives_a_crashing_worker(
    concat_fixtures: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    skip_bad: bool,
) -> None:
    from virtualizarr_fill.cli import build

    monkeypatch.setattr(build, "parser_from_options", lambda *options: CrashOnName())
    good, crash = _inputs(concat_fixtures, tmp_path)
    refs = tmp_path / "refs.json"
    argv = ["build", str(good[0]), str(crash), str(good[1]), str(good[2])]
    argv += ["--concat-dim", "y", "--out", str(refs), "--workers", "2"]
    code = main([*argv, "--skip-bad"] if skip_bad else argv)
    out, err = capsys.readouterr()
    lost = f"{crash}: the worker process parsing it died (killed by SIGSEGV)"
    if not skip_bad:
        assert code == EXIT_BAD_INPUT, err
        assert lost in err and not refs.exists()
        return
    assert code == EXIT_OK, err
    assert "files:     3 virtualized, 1 skipped" in out and lost in out
    expected = np.concatenate([tifffile.imread(p) for p in good])[np.newaxis]
    np.testing.assert_array_equal(kerchunk_read(str(refs))["band_data"].values, expected)


def test_build_isolates_files_that_are_not_tiffs_by_default(
    concat_fixtures: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ``--workers``, inputs not named as TIFFs (HDF5: libhdf5 is native code)
    are parsed in worker processes: a crash costs the file, not this process."""
    from virtualizarr_fill.cli import build

    monkeypatch.setattr(build, "parser_from_options", lambda *options: CrashOnName())
    good, crash = _inputs(concat_fixtures, tmp_path)
    named = []
    for path in [good[0], crash, good[1]]:  # TIFF content; the parser sniffs it
        target = tmp_path / f"{path.stem}.h5"
        target.write_bytes(path.read_bytes())
        named.append(target)
    refs = tmp_path / "refs.json"
    argv = ["build", *map(str, named), "--concat-dim", "y", "--out", str(refs), "--skip-bad"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert f"{named[1]}: the worker process parsing it died (killed by SIGSEGV)" in out
    expected = np.concatenate([tifffile.imread(p) for p in (good[0], good[1])])[np.newaxis]
    np.testing.assert_array_equal(kerchunk_read(str(refs))["band_data"].values, expected)


def test_default_workers_parse_tiffs_in_process() -> None:
    from virtualizarr_fill.cli.build import POOL_THRESHOLD, _default_workers

    assert _default_workers(["tiles/*.tif", "s3://b/x.TIFF"], 1000) == 0
    assert _default_workers(["tiles/*.tif", "more/*.nc"], POOL_THRESHOLD) == (os.cpu_count() or 1)
    assert _default_workers(["a.h5"], 1) == 1
