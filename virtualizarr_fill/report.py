"""What a parser decided, for people: padding handling, fill-value sources, refusals.

Parsers return a ManifestStore, which has no room for explanations. While a
:func:`collect` block is active in the current context, parsers also record one
:class:`ArrayReport` per array and one :class:`Refusal` per dataset or image they left
out; the CLI's ``inspect`` and ``build`` summaries print them. Outside such a block
recording costs nothing and keeps nothing.

Example::

    with collect() as report:
        store = TIFFParser()(url, registry)
    for array in report.arrays:
        print(array.name, array.edge_handling, array.fill_notes)
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = [
    "ArrayReport",
    "ParseReport",
    "Refusal",
    "collect",
    "collecting",
    "record_array",
    "record_refusal",
]


@dataclass(frozen=True)
class ArrayReport:
    """One virtual array and the decisions behind it."""

    url: str
    name: str
    #: ``"none"``, ``"truncate"`` or ``"crop"``: the codec handling oversized stored chunks.
    edge_handling: str = "none"
    #: Human-readable notes on how stored edge chunks were judged (e.g. byte counts).
    padding_notes: tuple[str, ...] = ()
    #: Fill-value decisions with their sources (see ``FillDecision.notes``).
    fill_notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """Something in a file that was not virtualized, and why."""

    url: str
    name: str
    reason: str


@dataclass
class ParseReport:
    """Everything recorded while a :func:`collect` block was active."""

    arrays: list[ArrayReport] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def extend(self, other: ParseReport) -> None:
        """Add another report's records (e.g. one returned by a worker process)."""
        self.arrays.extend(other.arrays)
        self.refusals.extend(other.refusals)


_current: contextvars.ContextVar[ParseReport | None] = contextvars.ContextVar(
    "virtualizarr_fill_report", default=None
)


@contextmanager
def collect() -> Iterator[ParseReport]:
    """Record parser decisions made in this context (thread/task) into a new report."""
    report = ParseReport()
    token = _current.set(report)
    try:
        yield report
    finally:
        _current.reset(token)


def collecting() -> bool:
    """Whether a :func:`collect` block is active here: parsers skip composing records
    (notes are formatted strings) when nothing would keep them."""
    return _current.get() is not None


def record_array(report: ArrayReport) -> None:
    """Called by parsers for every array they build."""
    current = _current.get()
    if current is not None:
        current.arrays.append(report)


def record_refusal(url: str, name: str, reason: str) -> None:
    """Called by parsers for every dataset/image they skip."""
    current = _current.get()
    if current is not None:
        current.refusals.append(Refusal(url=url, name=name, reason=reason))
