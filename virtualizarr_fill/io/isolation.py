"""Isolation as the last line: a function called on many inputs, each call in a worker
process with a capped address space, so that a crash, a hang or a runaway allocation in
native code costs the one input, never the caller's process.

The parsers check every structure they can before a C library follows it (see
docs/reliability.md), but libhdf5 and the C codecs remain native code reading untrusted
bytes: a check that misses one case can still end in a segmentation fault. Batch jobs
over files from elsewhere run each parse here. The command-line tool does
(``virtualizarr-fill build``); from Python,
:func:`~virtualizarr_fill.formats.open_virtual_datasets` opens many files this way, and
:func:`isolated_map` runs any picklable function::

    from virtualizarr_fill.formats import open_virtual_datasets

    for outcome in open_virtual_datasets(urls, workers=4):
        if outcome.ok:
            datasets.append(outcome.value)
        else:
            print(f"{outcome.input}: {outcome.problem}")

A worker that dies (a signal, the operating system's out-of-memory killer) or outlives
``timeout`` is replaced; its input gets an :class:`Outcome` saying so. An exception the
function raises is returned in the outcome too, and the worker carries on (but for a
``MemoryError``: that worker is replaced, as native libraries may not recover from one).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import signal
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

#: Address space a worker may map beyond what it maps once started (imports included).
DEFAULT_MEMORY_LIMIT = 4 * 2**30


@dataclass
class Outcome[I, R]:
    """What became of one input: ``value`` (the function returned), ``error`` (it
    raised), or ``died`` (why its worker process ended before answering)."""

    index: int
    input: I
    value: R | None = None
    error: BaseException | None = None
    died: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the function returned."""
        return self.error is None and self.died is None

    @property
    def problem(self) -> str:
        """What went wrong, in one line ("" when nothing did)."""
        if self.died is not None:
            return f"worker process died ({self.died})"
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        return ""


def default_context() -> multiprocessing.context.BaseContext:
    """``forkserver`` where the platform has it (workers then never inherit the
    caller's threads), else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def isolated_map[I, R](
    function: Callable[[I], R],
    inputs: Iterable[I],
    *,
    workers: int = 2,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    timeout: float | None = None,
    tasks_per_worker: int | None = None,
    context: multiprocessing.context.BaseContext | None = None,
) -> Generator[Outcome[I, R]]:
    """``function(item)`` for every item of ``inputs``, each in a worker process, as
    outcomes in the order they complete (``Outcome.index`` is the input's position).

    Parameters
    ----------
    function, inputs
        Picklable, as for :mod:`multiprocessing`.
    workers
        Worker processes running at once.
    memory_limit
        Bytes of address space a worker may map beyond what it maps once started
        (``None``: no cap). An allocation past it raises ``MemoryError`` in the worker.
    timeout
        Seconds one call may take; a worker past it is killed (``None``: no limit).
    tasks_per_worker
        Replace each worker after this many calls (libhdf5 keeps state between files).
    context
        The :mod:`multiprocessing` context workers start from (:func:`default_context`).
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    context = context or default_context()
    pending = deque(enumerate(inputs))
    pool: list[_Worker] = []
    try:
        while pending or any(worker.task is not None for worker in pool):
            pool = [worker for worker in pool if worker.usable or worker.task is not None]
            while len(pool) < min(workers, len(pending) + _busy(pool)):
                pool.append(_Worker(context, function, memory_limit, tasks_per_worker))
            for worker in pool:
                if worker.task is None and worker.usable and pending:
                    died = worker.assign(pending.popleft())
                    if died is not None:
                        yield died
            yield from _collect(pool, timeout)
    finally:
        for worker in pool:
            worker.stop()


def _busy(pool: list[_Worker]) -> int:
    return sum(1 for worker in pool if worker.task is not None)


#: Seconds a new worker may take to start its first task (imports), beyond ``timeout``.
STARTUP_ALLOWANCE = 120.0


def _collect[I, R](pool: list[_Worker], timeout: float | None) -> Iterator[Outcome[I, R]]:
    """Wait for a message, a death or a time limit, and yield what became of the tasks."""
    busy = [worker for worker in pool if worker.task is not None]
    if not busy:
        return
    wait_for: float | None = None
    if timeout is not None:
        wait_for = max(min(w.deadline(timeout) for w in busy) - time.monotonic(), 0.0)
    ready = set(wait([handle for w in busy for handle in w.handles], wait_for))
    for worker in busy:
        if ready.intersection(worker.handles):
            outcome = worker.receive()
            if outcome is not None:
                yield outcome
        elif timeout is not None and time.monotonic() > worker.deadline(timeout):
            yield worker.kill(f"ran longer than the time limit of {timeout:g} s")


class _Worker:
    """One worker process, the task it is running and when that started."""

    def __init__(
        self,
        context: Any,
        function: Callable[[Any], Any],
        memory_limit: int | None,
        tasks_per_worker: int | None,
    ) -> None:
        self.conn, child = context.Pipe()
        # A forkserver started earlier holds the environment of then: workers get today's
        # (object-store settings and credentials come from it).
        self.process = context.Process(
            target=_serve,
            args=(child, function, memory_limit, tasks_per_worker, dict(os.environ)),
            daemon=True,
            name="virtualizarr-fill-worker",
        )
        self.process.start()
        child.close()
        self.tasks_left = tasks_per_worker
        self.task: tuple[int, Any] | None = None
        self.sent = 0.0  # when the task was sent
        self.started: float | None = None  # when the worker said it began the task

    @property
    def alive(self) -> bool:
        return self.process.exitcode is None

    @property
    def usable(self) -> bool:
        """Alive, and not about to retire (after its last task, or a MemoryError)."""
        return self.tasks_left != 0 and self.alive

    @property
    def handles(self) -> tuple[Any, ...]:
        return (self.conn, self.process.sentinel)

    def deadline(self, timeout: float) -> float:
        """When the task runs out of time (a worker still starting gets an allowance)."""
        if self.started is None:
            return self.sent + timeout + STARTUP_ALLOWANCE
        return self.started + timeout

    def assign(self, task: tuple[int, Any]) -> Outcome[Any, Any] | None:
        self.task, self.sent, self.started = task, time.monotonic(), None
        try:
            self.conn.send(task)
        except (BrokenPipeError, EOFError, OSError):
            return self._died()
        return None

    def receive(self) -> Outcome[Any, Any] | None:
        """The answer to the task, or its death; None for nothing (yet)."""
        try:
            if not self.conn.poll():
                return self._died() if not self.alive or self._exited() else None
            status, index, payload = self.conn.recv()
        except (EOFError, OSError):
            return self._died()
        assert self.task is not None and index == self.task[0]
        if status == "start":
            self.started = time.monotonic()
            return None
        index, item = self.task
        self.task = None
        if self.tasks_left is not None:
            self.tasks_left -= 1
        if status == "ok":
            return Outcome(index, item, value=payload)
        if isinstance(payload, MemoryError):  # the worker retires (see _serve)
            self.tasks_left = 0
        return Outcome(index, item, error=payload)

    def _exited(self) -> bool:
        self.process.join(0.05)
        return self.process.exitcode is not None and not self.conn.poll()

    def _died(self) -> Outcome[Any, Any]:
        self.process.join(5)
        code = self.process.exitcode
        if code is None:  # hung up without exiting: make it so
            return self.kill("closed its connection")
        return self._lost(_exit_description(code))

    def kill(self, why: str) -> Outcome[Any, Any]:
        with contextlib.suppress(ProcessLookupError, OSError):
            self.process.kill()
        self.process.join(5)
        return self._lost(why)

    def _lost(self, why: str) -> Outcome[Any, Any]:
        assert self.task is not None
        index, item = self.task
        self.task = None
        self.conn.close()
        return Outcome(index, item, died=why)

    def stop(self) -> None:
        if self.alive and self.task is None:
            with contextlib.suppress(BrokenPipeError, EOFError, OSError):
                self.conn.send(None)
            self.process.join(2)
        if self.alive:
            with contextlib.suppress(ProcessLookupError, OSError):
                self.process.kill()
            self.process.join(5)
        with contextlib.suppress(OSError):
            self.conn.close()


def _exit_description(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit status {code}"


# -- inside the worker -------------------------------------------------------------------


def _serve(
    conn: Connection,
    function: Callable[[Any], Any],
    memory_limit: int | None,
    tasks_per_worker: int | None,
    environment: dict[str, str],
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    os.environ.clear()
    os.environ.update(environment)
    if memory_limit is not None:
        cap_address_space(memory_limit)
    done = 0
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, item = task
        conn.send(("start", index, None))
        try:
            reply = ("ok", index, function(item))
        except BaseException as error:  # the caller decides; the worker carries on
            reply = ("error", index, _picklable(error))
        try:
            conn.send(reply)
        except Exception as error:  # an unpicklable result
            conn.send(("error", index, RuntimeError(f"the result cannot be sent back: {error}")))
        done += 1
        if reply[0] == "error" and isinstance(reply[2], MemoryError):
            return
        if tasks_per_worker is not None and done >= tasks_per_worker:
            return


def cap_address_space(headroom: int) -> None:
    """Cap this process's address space at what it maps now plus ``headroom`` bytes
    (Linux; elsewhere nothing is capped)."""
    try:
        with open(f"/proc/{os.getpid()}/status") as status:
            line = next(row for row in status if row.startswith("VmSize:"))
        limit = int(line.split()[1]) * 1024 + headroom
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, StopIteration):
        pass


def _picklable(error: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "Outcome",
    "cap_address_space",
    "default_context",
    "isolated_map",
]
