"""zarr's coroutines run to their end in the calling thread.

zarr's synchronous API hands every read and open to its event-loop thread and waits for
it, which costs more than opening or reading a small array of a ManifestStore does: its
``zarr.json`` documents are in memory and its local reads are made directly, so such a
coroutine never waits on anything and can be run here instead (:func:`run_here`).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

#: :func:`run_here`'s answer for a coroutine that would wait on an event loop.
WAITS: Any = object()


def run_here(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``coroutine``'s result, run in the calling thread, or :data:`WAITS` (and the
    coroutine closed) when it would wait on an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    except RuntimeError as error:
        # asyncio's words for "no running loop" and for "no current loop" (gather)
        if "event loop" not in str(error):
            raise
        return WAITS
    coroutine.close()
    return WAITS


__all__ = ["WAITS", "run_here"]
