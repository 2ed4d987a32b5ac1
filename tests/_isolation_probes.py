"""What the isolation tests' workers do with one input: a module importing nothing
heavy, so that each new worker process starts quickly."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np


def probe(item: tuple[str, Any]) -> Any:
    """Double, raise, crash, allocate, hang, or tell the worker's PID or environment."""
    kind, value = item
    if kind == "double":
        return value * 2
    if kind == "raise":
        raise ValueError(f"bad input {value}")
    if kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "allocate":
        return int(np.ones(value, dtype=np.uint8).sum())
    if kind == "sleep":  # tell the test who we are, then hang
        Path(value).write_text(str(os.getpid()))
        time.sleep(120)
    if kind == "pid":
        return os.getpid()
    if kind == "environment":
        return os.environ.get(value)
    raise AssertionError(kind)
