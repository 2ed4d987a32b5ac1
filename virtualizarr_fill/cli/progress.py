"""The progress bar the commands draw on stderr."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on stderr.

    On a terminal it redraws at most every ``interval`` seconds, so even a job of
    millions of tiny steps spends no measurable time drawing. Elsewhere (a log file, a
    pipe) it writes a whole line at the first step, then at most every ``log_interval``
    seconds, and when done, each flushed as written: a log shows where a long phase is
    while it runs, without a line per tiny step.
    """

    WIDTH = 24

    def __init__(
        self,
        label: str,
        total: int,
        unit: str,
        *,
        stream: TextIO | None = None,
        interval: float = 0.1,
        log_interval: float = 1.0,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.log_interval = log_interval
        self.done = 0
        self.started = time.perf_counter()
        self._drawn = -math.inf
        self._live = bool(getattr(self.stream, "isatty", lambda: False)())

    def _line(self) -> str:
        elapsed = time.perf_counter() - self.started
        fraction = self.done / self.total if self.total else 1.0
        filled = round(fraction * self.WIDTH)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        return f"{self.label:<7} [{bar}] {self.done}/{self.total} {self.unit} {elapsed:6.1f} s"

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        now = time.perf_counter()
        if now - self._drawn < (self.interval if self._live else self.log_interval):
            return
        self._drawn = now
        if self.done >= self.total and not self._live:
            return  # the closing line says it
        self.stream.write(("\r" + self._line()) if self._live else (self._line() + "\n"))
        self.stream.flush()

    def close(self) -> None:
        line = self._line()
        self.stream.write(("\r" + line + "\n") if self._live else (line + "\n"))
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
