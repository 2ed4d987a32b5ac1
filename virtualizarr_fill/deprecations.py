"""Names of earlier releases answered for one release, each use with a
:class:`~virtualizarr_fill.errors.VirtualizarrFillDeprecationWarning` naming the new one.

The shim modules at the old paths of moved modules (``virtualizarr_fill.time_stack``,
``virtualizarr_fill.isolation``) and the package root's renamed names answer through
:func:`moved_attribute`, so that every deprecation says the same thing the same way.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any

from virtualizarr_fill.errors import VirtualizarrFillDeprecationWarning


def moved_attribute(
    module: str, moved: Mapping[str, str], root_names: Collection[str] = ()
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``, whose names ``moved`` maps to the
    modules that hold them now; ``root_names`` are also exported by the package root."""

    def __getattr__(name: str) -> Any:
        new_module = moved.get(name)
        if new_module is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        root = f" (or virtualizarr_fill.{name})" if name in root_names else ""
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed in the next release; use "
            f"'from {new_module} import {name}'{root}",
            VirtualizarrFillDeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), name)

    return __getattr__
