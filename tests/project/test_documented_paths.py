"""Every ``virtualizarr_fill.<module>...`` path the documentation names resolves.

Modules move (the layered package layout moved many); a page or example still naming an
old path sends users to an ``ImportError``. Every dotted path in ``docs/`` (all pages),
``README.md`` and ``examples/``, and every name a ``from virtualizarr_fill... import``
line there imports, must import or resolve as an attribute, and not through a deprecated
shim (the documentation names the new homes). Dotted names that are Zarr codec ids
(``virtualizarr_fill.truncate``, registered under the ``zarr.codecs`` entry points) are
not Python paths.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from virtualizarr_fill.errors import VirtualizarrFillDeprecationWarning

ROOT = Path(__file__).resolve().parents[2]

_DOTTED = re.compile(r"(?<![\w./-])(virtualizarr_fill(?:_codecs)?(?:\.[A-Za-z_]\w*)+)")
_FROM_IMPORT = re.compile(
    r"^\s*from\s+(virtualizarr_fill(?:_codecs)?(?:\.\w+)*)\s+import\s+\(?([\w\s,]+?)\)?\s*$",
    re.MULTILINE,
)


def documents() -> list[Path]:
    pages = sorted((ROOT / "docs").rglob("*.md"))
    examples = sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".md"))
    return [ROOT / "README.md", *pages, *examples]


def documented_paths(text: str) -> set[str]:
    """The dotted paths ``text`` names, and ``module.name`` for each name imported."""
    found = set(_DOTTED.findall(text))
    for module, names in _FROM_IMPORT.findall(text):
        for name in names.split(","):
            name = name.split(" as ")[0].strip()
            if name:
                found.add(f"{module}.{name}")
    return found


def codec_ids() -> set[str]:
    return {entry.name for entry in entry_points(group="zarr.codecs")}


def problem(path: str) -> str | None:
    """Why ``path`` does not resolve (None where it does, without a deprecation)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value: object = importlib.import_module(module_name)
                for attribute in parts[split:]:
                    value = getattr(value, attribute)
        except ModuleNotFoundError as error:
            if error.name is not None and module_name.startswith(error.name):
                continue  # a shorter prefix may be the module
            return f"importing {module_name} fails: {error}"
        except AttributeError:
            return f"{module_name} has no {'.'.join(parts[split:])}"
        source = Path(getattr(sys.modules[module_name], "__file__", None) or "")
        if not source.is_relative_to(ROOT):
            # an installed copy of another checkout answering for a module that moved
            return f"{module_name} is not in this tree (imported from {source})"
        deprecated = [
            w for w in caught if issubclass(w.category, VirtualizarrFillDeprecationWarning)
        ]
        if deprecated:
            return f"only through a deprecated path: {deprecated[0].message}"
        return None
    return "no module"


def test_every_documented_path_resolves() -> None:
    ids = codec_ids()
    assert "virtualizarr_fill.truncate" in ids  # the codec distribution is installed
    broken = {}
    for document in documents():
        for path in sorted(documented_paths(document.read_text())):
            if path in ids:
                continue
            if (why := problem(path)) is not None:
                broken[f"{document.relative_to(ROOT)}: {path}"] = why
    assert broken == {}


def test_the_collector_sees_paths_and_imported_names() -> None:
    text = (
        "Use `virtualizarr_fill.assemble.time_stack.stack_by_time` (see\n"
        "virtualizarr_fill/tiff/parser.py).\n"
        "```python\n"
        "from virtualizarr_fill.formats import open_virtual_datasets, AutoParser as Auto\n"
        "from virtualizarr_fill import (TIFFParser, HDF5Parser)\n"
        "```\n"
    )
    assert documented_paths(text) == {
        "virtualizarr_fill.assemble.time_stack.stack_by_time",
        "virtualizarr_fill.formats",
        "virtualizarr_fill.formats.open_virtual_datasets",
        "virtualizarr_fill.formats.AutoParser",
        "virtualizarr_fill.TIFFParser",
        "virtualizarr_fill.HDF5Parser",
    }
    assert {p for d in documents() for p in documented_paths(d.read_text())} >= {
        "virtualizarr_fill.assemble.time_stack.stack_by_time",  # docs/guide/tiff.md
        "virtualizarr_fill.formats.open_virtual_datasets",  # docs/reliability.md
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("virtualizarr_fill.formats.open_virtual_datasets", None),
        ("virtualizarr_fill.stack_by_time", None),
        ("virtualizarr_fill.tiff.scene_time.TIME", None),
        ("virtualizarr_fill_codecs.truncate.TruncateCodec", None),
        ("virtualizarr_fill.concat.merges", "virtualizarr_fill"),
        ("virtualizarr_fill.tiff.no_such_name", "virtualizarr_fill.tiff has no no_such_name"),
        ("virtualizarr_fill.isolation.open_virtual_datasets", "only through a deprecated path"),
        ("virtualizarr_fill.time_stack.stack_by_time", "only through a deprecated path"),
    ],
)
def test_the_check_refuses_what_does_not_resolve(path: str, expected: str | None) -> None:
    """Moved modules (``concat/`` became ``zarr_model/``), missing names and the old
    paths kept as deprecated shims are all refused."""
    found = problem(path)
    assert (found is None) if expected is None else (found or "").startswith(expected)
