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

import importlib
import warnings
from typing import Any

from virtualizarr_fill.errors import VirtualizarrFillDeprecationWarning

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
