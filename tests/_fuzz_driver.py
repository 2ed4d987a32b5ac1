"""What the TIFF and HDF5 fuzz tests share: hypothesis settings, the chooser that lets
hypothesis draw (and shrink) mutation choices, and the verdict on one mutated file.

Verdicts matching a bug listed in ``tests/_known_bugs.py`` are counted, not
failed; any other unacceptable verdict fails the test with the mutation as JSON, so the
case can be replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from conformance.fuzz.mutations import Mutation
from conformance.fuzz.worker import FuzzWorker, acceptable, reclassify_corrupt_data
from tests._known_bugs import known_bug

#: Per-case bound in the worker process; a case past it is a hang.
CASE_TIMEOUT = 10.0

#: Derandomised, so CI runs the same cases every time.
FUZZ_SETTINGS = settings(
    max_examples=600,
    deadline=timedelta(seconds=60),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class HypothesisChooser:
    """The mutation generators' choices, drawn by hypothesis (so failures shrink)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def choice(self, options: Any) -> Any:
        return self.data.draw(st.sampled_from(list(options)))

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))


def record(event_text: str, *notes: str) -> None:
    """Count an outcome and note the case, when running under hypothesis."""
    if not currently_in_test_context():
        return
    for text in notes:
        note(text)
    event(event_text)


def worker_session() -> Iterator[FuzzWorker]:
    """Body of a module-scoped ``worker`` fixture: one worker process per test module."""
    with FuzzWorker() as fuzz_worker:
        yield fuzz_worker


def judge(
    worker: FuzzWorker, corpus: Path, scratch: Path, mutation: Mutation, kind: str
) -> dict[str, Any]:
    """The verdict on ``mutation`` parsed as ``kind`` ("tiff" or "hdf5"); fails the
    test unless it is acceptable or a known bug."""
    path = scratch / f"case{Path(mutation.file).suffix}"
    path.write_bytes(mutation.apply((corpus / mutation.file).read_bytes()))
    result = worker.check(str(path), kind, options=mutation.options, timeout=CASE_TIMEOUT)
    result = reclassify_corrupt_data(result, str(corpus / mutation.file), mutation.ops, kind)
    outcome = str(result["outcome"])
    if "error_class" in result:
        outcome += f" ({result['error_class']})"
    record(outcome, f"mutation: {mutation.to_json()}", f"verdict: {result}")
    if not acceptable(result):
        bug = known_bug(result, mutation.label)
        if bug is not None:
            record(f"known bug {bug}")
            return result
        pytest.fail(
            f"{result['outcome']} for {mutation.file} after {mutation.label}: "
            f"{result.get('error') or result.get('detail')}\nmutation: {mutation.to_json()}"
            f"\nverdict: {result}"
        )
    return result


def judge_truncations(
    worker: FuzzWorker, corpus: Path, scratch: Path, name: str, points: Iterable[int], kind: str
) -> None:
    """Cut ``name`` at every point; a truncated file can never read back whole, so some
    cut must have been refused."""
    outcomes = set()
    for point in points:
        mutation = Mutation(name, f"truncate to {point}", [{"op": "truncate", "size": point}])
        outcomes.add(judge(worker, corpus, scratch, mutation, kind)["outcome"])
    assert "refused" in outcomes
