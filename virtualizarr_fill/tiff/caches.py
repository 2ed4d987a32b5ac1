"""The switch and reset of the TIFF parser's result caches.

The files of one archive repeat their georeferences, coordinate arrays and attribute
texts; the modules that derive these keep each distinct result by a key that determines
it (see :mod:`.geo`, :mod:`.metadata` and :func:`.arrays.kept_arrays`) and register how
to forget them here. Tests turn :data:`ENABLED` off to compare with parses that derive
everything afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


_CONTAINERS = frozenset({dict, list})


def json_copy(value: Any) -> Any:
    """A copy of the dicts and lists in a JSON-like value (scalars are immutable), for
    handing out a cached result the caller may change."""
    if type(value) is dict:
        return {k: json_copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) if type(v) in _CONTAINERS else v for v in value]
    return value


__all__ = ["ENABLED", "clear_all", "json_copy", "register"]
