"""Deprecated: the module moved; ``open_virtual_datasets`` to
:mod:`virtualizarr_fill.formats`, the worker processes (``isolated_map``, ``Outcome``,
...) to :mod:`virtualizarr_fill.io.isolation`.

``from virtualizarr_fill.isolation import open_virtual_datasets`` still works for one
release, with a :class:`~virtualizarr_fill.errors.VirtualizarrFillDeprecationWarning`
naming the new import; use ``from virtualizarr_fill.formats import
open_virtual_datasets`` (or ``virtualizarr_fill.open_virtual_datasets``). Nothing in the
package imports this module.
"""

from __future__ import annotations

from virtualizarr_fill.deprecations import moved_attribute

#: The names this module held, and where each lives now.
_MOVED = {
    "DEFAULT_MEMORY_LIMIT": "virtualizarr_fill.io.isolation",
    "Outcome": "virtualizarr_fill.io.isolation",
    "cap_address_space": "virtualizarr_fill.io.isolation",
    "default_context": "virtualizarr_fill.io.isolation",
    "isolated_map": "virtualizarr_fill.io.isolation",
    "open_virtual_datasets": "virtualizarr_fill.formats",
}
#: Those the package root exports too.
_ROOT_NAMES = {"open_virtual_datasets"}


__getattr__ = moved_attribute(__name__, _MOVED, _ROOT_NAMES)


def __dir__() -> list[str]:
    return sorted(_MOVED)


__all__ = sorted(_MOVED)
