"""Deadlines for parses, and object-store requests bounded by them.

A stalled object store (a server that accepts the connection and never answers) must
not hold a parse for the minutes obstore's defaults allow (a 30 s timeout per attempt,
retried for up to three minutes). Every parse has a :class:`Deadline`; each request of a
:class:`~virtualizarr_fill.io.files.StoreFile` gets the time left, whatever the store's own
settings, because the store registry belongs to the user:

* requests to remote stores run as obstore's ``*_async`` calls on one event loop in a
  background thread (started on first use, again after a fork), and are cancelled when
  the deadline passes (:func:`call_within`);
* local stores (``LocalStore``, ``MemoryStore``) are called directly: they cannot
  stall on a network, and the hop to another thread would cost more than their reads.

The stores the package builds itself (the command-line tool) get bounded retries,
:data:`RETRY_CONFIG`; :data:`CLIENT_OPTIONS` are timeouts to give stores one builds
oneself (obstore's defaults: 5 s to connect, 30 s a request).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

#: Seconds a parse may take by default, requests and retries included.
DEFAULT_PARSE_DEADLINE = 60.0

#: obstore client options for stores built for parsing: give up on a connection after
#: 5 s and on one attempt after 20 s. (Explicit client options replace those obstore
#: reads from the environment, so the command-line tool leaves them to the environment.)
CLIENT_OPTIONS: ClientConfig = {"connect_timeout": "5s", "timeout": "20s"}
#: obstore retry settings of the stores the package builds: three retries within 30 s
#: (obstore's defaults: ten within three minutes).
RETRY_CONFIG: RetryConfig = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=30),
    "backoff": {
        "init_backoff": timedelta(milliseconds=100),
        "max_backoff": timedelta(seconds=5),
        "base": 2,
    },
}


class Deadline:
    """The moment a parse must end by: ``seconds`` from creation (``None``: never)."""

    def __init__(self, seconds: float | None) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError(f"a deadline must be a positive number of seconds, got {seconds}")
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        """Seconds left (``None`` without a deadline; 0 once passed)."""
        if self._end is None:
            return None
        return max(self._end - time.monotonic(), 0.0)

    def __repr__(self) -> str:
        return f"Deadline({self.seconds})"


def as_deadline(deadline: Deadline | float | None) -> Deadline:
    """``deadline`` itself, or a new one of that many seconds."""
    return deadline if isinstance(deadline, Deadline) else Deadline(deadline)


def is_local(store: object) -> bool:
    """Whether ``store`` (or the store a wrapper such as ``CountingStore`` holds in its
    ``store`` attribute) reads local files or memory."""
    from obstore.store import LocalStore, MemoryStore

    for _ in range(8):  # wrappers of wrappers, bounded
        if isinstance(store, LocalStore | MemoryStore):
            return True
        store = getattr(store, "store", None)
        if store is None:
            return False
    return False


class _LoopThread:
    """One asyncio event loop running in a daemon thread of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # none yet, or forked
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="virtualizarr-fill-requests", daemon=True
                )
                thread.start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop


_LOOP = _LoopThread()


class DeadlineExceeded(TimeoutError):
    """A request did not complete before the deadline (it was cancelled)."""


def call_within[T](call: Callable[[], Awaitable[T]], deadline: Deadline) -> T:
    """The result of the coroutine ``call()`` makes, run on the background loop and
    cancelled when ``deadline`` passes (:class:`DeadlineExceeded`)."""
    remaining = deadline.remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded

    async def bounded() -> T:
        task = asyncio.ensure_future(call())
        done, _ = await asyncio.wait({task}, timeout=remaining)
        if not done:
            task.cancel()  # drops obstore's request
            raise DeadlineExceeded
        return task.result()

    future = asyncio.run_coroutine_threadsafe(bounded(), _LOOP.loop())
    try:
        # The loop enforces the deadline; the margin only guards a loop that never runs.
        return future.result(None if remaining is None else remaining + 5.0)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise DeadlineExceeded from None


__all__ = [
    "CLIENT_OPTIONS",
    "DEFAULT_PARSE_DEADLINE",
    "RETRY_CONFIG",
    "Deadline",
    "DeadlineExceeded",
    "as_deadline",
    "call_within",
    "is_local",
]
