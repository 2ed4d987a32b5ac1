"""Old import paths of moved modules, kept for one release as deprecated shims.

``virtualizarr_fill.time_stack`` (now ``virtualizarr_fill.assemble.time_stack``) and
``virtualizarr_fill.isolation`` (now ``virtualizarr_fill.formats`` for
``open_virtual_datasets``, ``virtualizarr_fill.io.isolation`` for the worker processes)
give the same objects as the new paths, each use with a
``VirtualizarrFillDeprecationWarning`` naming the new import, whose suggested import is
made here; the package root exports ``stack_by_time`` and ``open_virtual_datasets``
without a warning; and the package never imports the shims itself.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import virtualizarr_fill
from virtualizarr_fill.errors import VirtualizarrFillDeprecationWarning

ROOT = Path(__file__).resolve().parents[2]

#: old module -> {name: its new module}
MOVED = {
    "virtualizarr_fill.time_stack": {
        "stack_by_time": "virtualizarr_fill.assemble.time_stack",
        "order_by_time": "virtualizarr_fill.assemble.time_stack",
        "TimeCoordinateError": "virtualizarr_fill.errors",
    },
    "virtualizarr_fill.isolation": {
        "open_virtual_datasets": "virtualizarr_fill.formats",
        "isolated_map": "virtualizarr_fill.io.isolation",
        "Outcome": "virtualizarr_fill.io.isolation",
        "DEFAULT_MEMORY_LIMIT": "virtualizarr_fill.io.isolation",
        "cap_address_space": "virtualizarr_fill.io.isolation",
        "default_context": "virtualizarr_fill.io.isolation",
    },
}
CASES = [(old, name, new) for old, names in MOVED.items() for name, new in names.items()]


@pytest.mark.parametrize(("old", "name", "new"), CASES)
def test_an_old_path_warns_and_gives_the_same_object(old: str, name: str, new: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(VirtualizarrFillDeprecationWarning) as caught:
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith(f"{old}.{name} is deprecated and will be removed")
    assert warning.filename == __file__  # the warning points at the caller's line
    # the import the message suggests works, without a warning, and gives the object
    (suggested,) = re.findall(r"'(from \S+ import \w+)'", message)
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(suggested, namespace)
    assert namespace[name] is value


def test_from_imports_of_the_old_paths_warn_each_time() -> None:
    for _ in range(2):  # not only the first import of the module
        with pytest.warns(VirtualizarrFillDeprecationWarning, match="assemble.time_stack import"):
            from virtualizarr_fill.time_stack import stack_by_time
        with pytest.warns(VirtualizarrFillDeprecationWarning, match="formats import open_virt"):
            from virtualizarr_fill.isolation import open_virtual_datasets
    assert stack_by_time is virtualizarr_fill.stack_by_time
    assert open_virtual_datasets is virtualizarr_fill.open_virtual_datasets


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("stack_by_time", "virtualizarr_fill.assemble.time_stack"),
        ("open_virtual_datasets", "virtualizarr_fill.formats"),
    ],
)
def test_the_root_exports_the_moved_functions(name: str, module: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = getattr(virtualizarr_fill, name)
    assert value is getattr(importlib.import_module(module), name)
    assert name in virtualizarr_fill.__all__ and name in dir(virtualizarr_fill)
    # the suggestion of the old path's warning names it
    old = (
        "virtualizarr_fill.time_stack" if name == "stack_by_time" else "virtualizarr_fill.isolation"
    )
    with pytest.warns(
        VirtualizarrFillDeprecationWarning, match=rf"\(or virtualizarr_fill\.{name}\)"
    ):
        getattr(importlib.import_module(old), name)


def test_a_name_the_old_module_never_had_is_an_attribute_error() -> None:
    module = importlib.import_module("virtualizarr_fill.time_stack")
    with pytest.raises(AttributeError, match="has no attribute 'open_virtual_series'"):
        module.open_virtual_series  # noqa: B018
    assert dir(module) == sorted(MOVED["virtualizarr_fill.time_stack"])


def test_the_package_never_imports_the_shims() -> None:
    """Every public name and the command line loaded, with deprecation warnings as
    errors: no shim is imported, and nothing warns."""
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "import virtualizarr_fill\n"
        "for name in virtualizarr_fill.__all__:\n"
        "    getattr(virtualizarr_fill, name)\n"
        "import virtualizarr_fill.cli, virtualizarr_fill.cli.build, virtualizarr_fill.stac\n"
        "shims = {'virtualizarr_fill.time_stack', 'virtualizarr_fill.isolation'}\n"
        "print(sorted(shims & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
