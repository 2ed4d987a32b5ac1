"""Deprecated: the module moved to :mod:`virtualizarr_fill.assemble.time_stack`.

``from virtualizarr_fill.time_stack import stack_by_time`` still works for one release,
with a :class:`~virtualizarr_fill.errors.VirtualizarrFillDeprecationWarning` naming the
new import; use ``from virtualizarr_fill.assemble.time_stack import stack_by_time`` (or
``virtualizarr_fill.stack_by_time``). Nothing in the package imports this module.
"""

from __future__ import annotations

from virtualizarr_fill.deprecations import moved_attribute

#: The names this module held, and where each lives now.
_MOVED = {
    "TimeCoordinateError": "virtualizarr_fill.errors",
    "order_by_time": "virtualizarr_fill.assemble.time_stack",
    "stack_by_time": "virtualizarr_fill.assemble.time_stack",
}
#: Those the package root exports too.
_ROOT_NAMES = {"TimeCoordinateError", "stack_by_time"}


__getattr__ = moved_attribute(__name__, _MOVED, _ROOT_NAMES)


def __dir__() -> list[str]:
    return sorted(_MOVED)


__all__ = sorted(_MOVED)
