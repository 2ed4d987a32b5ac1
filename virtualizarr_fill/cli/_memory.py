"""Memory a build has freed, given back to the system before the write.

The parsed files' parts are freed once combined, but the C allocator keeps the pages
it got for them and Python keeps arenas that a few live objects still hold: the resident
memory stays where parsing left it, and the Icechunk write (memory of its own, from its
own allocator) adds on top. glibc's ``malloc_trim`` returns what is free; dask's workers
call it for the same reason. Elsewhere (macOS, musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

__all__ = ["give_back_freed_memory"]


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
