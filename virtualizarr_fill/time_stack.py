"""Deprecated: the module moved to :mod:`virtualizarr_fill.assemble.time_stack`.

``from virtualizarr_fill.time_stack import stack_by_time`` still works for one release,
with a :class:`~virtualizarr_fill.errors.VirtualizarrFillDeprecationWarning` naming the
new import; use ``from virtualizarr_fill.assemble.time_stack import stack_by_time`` (or
``virtualizarr_fill.stack_by_time``). Nothing in the package imports this module.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from virtualizarr_fill.errors import VirtualizarrFillDeprecationWarning

#: The names this module held, and where each lives now.
_MOVED = {
    "TimeCoordinateError": "virtualizarr_fill.errors",
    "order_by_time": "virtualizarr_fill.assemble.time_stack",
    "stack_by_time": "virtualizarr_fill.assemble.time_stack",
}
#: Those the package root exports too.
_ROOT_NAMES = {"TimeCoordinateError", "stack_by_time"}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    root = f" (or virtualizarr_fill.{name})" if name in _ROOT_NAMES else ""
    warnings.warn(
        f"{__name__}.{name} is deprecated and will be removed in the next release; use "
        f"'from {module} import {name}'{root}",
        VirtualizarrFillDeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(_MOVED)


__all__ = sorted(_MOVED)
