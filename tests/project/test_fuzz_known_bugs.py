"""Each known bug's repro (tests/_known_bugs.py) fails while the bug is open; the fixed
bugs' repros run as regression tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.fuzz.mutations import apply_ops
from conformance.fuzz.worker import FuzzWorker, acceptable
from tests._known_bugs import FIXED_BUGS, KNOWN_BUGS, KnownBug


@pytest.fixture(scope="module")
def worker() -> Iterator[FuzzWorker]:
    with FuzzWorker() as fuzz_worker:
        yield fuzz_worker


def _check_repro(bug: KnownBug, worker: FuzzWorker, corpus_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / Path(bug.file).name
    path.write_bytes(apply_ops((corpus_dir / bug.file).read_bytes(), bug.ops))
    result = worker.check(str(path), bug.kind, options=bug.options, timeout=20)
    assert acceptable(result), f"{bug.id}: {bug.summary}\nverdict: {result}"


@pytest.mark.known_bug
@pytest.mark.parametrize("bug", KNOWN_BUGS, ids=lambda bug: bug.id)
def test_known_bug_is_fixed(
    bug: KnownBug, worker: FuzzWorker, corpus_dir: Path, tmp_path: Path
) -> None:
    _check_repro(bug, worker, corpus_dir, tmp_path)


@pytest.mark.parametrize("bug", FIXED_BUGS, ids=lambda bug: bug.id)
def test_fixed_bug_stays_fixed(
    bug: KnownBug, worker: FuzzWorker, corpus_dir: Path, tmp_path: Path
) -> None:
    _check_repro(bug, worker, corpus_dir, tmp_path)
