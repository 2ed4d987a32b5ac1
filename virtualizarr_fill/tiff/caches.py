"""The TIFF parser's result caches, their switch and their reset.

The files of one archive repeat their georeferences, coordinate arrays, attribute
texts and band layouts; the modules that derive these keep each distinct result in a
:class:`ResultCache` by a key that determines it (see :mod:`.geo`, :mod:`.metadata`,
:mod:`.band` and :func:`.arrays.kept_arrays`), which :func:`clear_all` empties. Tests
turn :data:`ENABLED` off to compare with parses that derive everything afresh.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

#: Whether the result caches are consulted and filled.
ENABLED = True

_clearers: list[Callable[[], None]] = []


def register(clear: Callable[[], None]) -> Callable[[], None]:
    """Have :func:`clear_all` call ``clear`` (usable as a decorator)."""
    _clearers.append(clear)
    return clear


def clear_all() -> None:
    """Forget every cached result."""
    for clear in _clearers:
        clear()


class ResultCache[Result]:
    """Results by a key that determines them: at most ``size``, the least recently used
    dropped first, safe to share between threads, emptied by :func:`clear_all`.

    Lookups with a None key, and every lookup while :data:`ENABLED` is off, miss; such
    results are not kept either.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, Result] = OrderedDict()
        self._lock = threading.Lock()
        register(self.clear)

    def get(self, key: Hashable | None) -> Result | None:
        if key is None or not ENABLED:
            return None
        with self._lock:
            known = self._entries.get(key)
            if known is not None:
                self._entries.move_to_end(key)
        return known

    def put(self, key: Hashable | None, result: Result) -> None:
        if key is None or not ENABLED:
            return
        with self._lock:
            self._entries[key] = result
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["ENABLED", "ResultCache", "clear_all", "register"]
