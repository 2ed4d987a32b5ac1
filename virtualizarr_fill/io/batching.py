"""Files in batches, for the tasks of worker processes and dask clusters."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BATCH_FILES", "batches"]

#: Files per task: enough that sending a task and its result costs little next to
#: parsing its files, few enough that progress moves and the work spreads.
BATCH_FILES = 64


def batches(urls: Sequence[str], workers: int) -> list[list[str]]:
    """``urls`` in batches of at most :data:`BATCH_FILES`, at least four per worker
    where there are enough files."""
    size = max(1, min(BATCH_FILES, -(-len(urls) // (workers * 4))))
    return [list(urls[i : i + size]) for i in range(0, len(urls), size)]
