"""Memory a build has freed, given back to the system before the write, and a value
handed to the one function that frees it.

The parsed files' parts are freed once combined, but the C allocator keeps the pages
it got for them and Python keeps arenas that a few live objects still hold: the resident
memory stays where parsing left it, and the Icechunk write adds on top. glibc's
``malloc_trim`` returns what is free; dask's workers call it for the same reason.
Elsewhere (macOS, musl) nothing is done. The writer frees the combined dataset once
Icechunk holds its references (:class:`Handoff`) and gives that memory back too, before
the commit, the write's peak, builds the manifests.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

__all__ = ["Handoff", "give_back_freed_memory"]


class Handoff[T]:
    """A value given to one consumer, which takes it: whoever made the handoff keeps
    no reference, so the value is freed as soon as the consumer drops it (a build's
    combined dataset, dropped by the writer before Icechunk's commit needs the memory)."""

    def __init__(self, value: T) -> None:
        self._value: T | None = value

    def take(self) -> T:
        """The value, once; a second take is a programming error."""
        value, self._value = self._value, None
        if value is None:
            raise RuntimeError("the value was already taken")
        return value


def give_back_freed_memory() -> None:
    """Collect garbage and return the allocator's free pages to the system (glibc)."""
    gc.collect()
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
