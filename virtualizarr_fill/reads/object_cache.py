"""Values worked out once per live object and dropped with it.

The read path keeps a few results per object it is handed again and again (a manifest,
a node's metadata) whose hashing costs more than what is kept saves, or which do not
hash at all. They are keyed by the object's ``id``; the entry is dropped when the object
is (``weakref.finalize``), so that an id is never reused while its entry lives.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable


class ObjectCache[T]:
    """``make()``'s value kept per object, while the object lives (see the module)."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[int, T] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, owner: object, make: Callable[[], T]) -> T:
        """The value kept for ``owner``, made by ``make()`` if there is none. An object
        that cannot be referenced weakly gets a new value each time (nothing would drop
        its entry)."""
        key = id(owner)
        values = self._values
        if key in values:
            return values[key]
        value = make()
        try:
            weakref.finalize(owner, values.pop, key, None)
        except TypeError:
            return value
        values[key] = value
        return value


__all__ = ["ObjectCache"]
