"""The package's import rules (docs/architecture.md, "Layers and import rules").

Every module of ``virtualizarr_fill`` belongs to a package (the first name below
``virtualizarr_fill``: ``io``, ``tiff``, ``errors``...). Packages stand in layers; a
module imports its own package and packages of lower layers only, never one beside or
above it. The package root ``__init__.py`` (the public names, imported lazily) and the
command line ``cli/`` (the top layer, which nothing imports) may import anything.
Imports are read from the source, at any depth (in functions too) and under
``TYPE_CHECKING`` as well: a type-only import still makes one package depend on
another's design.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = "virtualizarr_fill"
ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / PACKAGE

#: Deprecated shims at the old paths of moved modules, kept for one release: they import
#: the modules' new homes and warn; nothing of the package imports them (not even the
#: root or the command line: test_no_module_imports_a_deprecated_shim), so they stand
#: above everything as the top layer.
DEPRECATED_SHIMS = ["time_stack", "isolation"]

#: Lowest first. A package imports only itself and the packages of lower layers.
LAYERS: list[list[str]] = [
    ["errors", "parser_options"],
    ["upstream_checks"],
    ["upstream", "io", "codecs", "deprecations"],
    ["fill"],
    ["zarr_model"],  # merged metadata follows the fill-conflict rule
    ["manifests", "report", "multiscales"],
    ["tiff", "hdf5"],  # COG overviews are multiscale groups
    ["formats", "reads"],  # format detection opens TIFF or HDF5
    ["assemble", "writers"],
    ["stac"],
    ["cli"],
    DEPRECATED_SHIMS,
]

#: Modules allowed past MAX_LINES, with the reason.
MAX_LINES = 500
LONG_MODULES: dict[str, str] = {}

LAYER = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every ``virtualizarr_fill`` module or name ``path`` imports (absolute, resolved)."""
    name = module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from virtualizarr_fill import upstream`` imports the module upstream (and a
            # public name of the root, ``TIFFParser``, is in no layer).
            if module == PACKAGE:
                found |= {f"{PACKAGE}.{alias.name}" for alias in node.names}
            else:
                found.add(module)
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def package_of(module: str) -> str | None:
    """The layered package of a module name (None for the package root itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def modules() -> list[Path]:
    return sorted(SOURCE.rglob("*.py"))


def violations() -> list[str]:
    """One line per import that breaks the layering."""
    found = []
    for path in modules():
        source = module_name(path)
        package = package_of(source)
        if package is None or package == "cli":  # the root and the command line: the top
            continue
        if package not in LAYER:
            found.append(f"{source}: package {package!r} is in no layer")
            continue
        for target in sorted(imported_modules(path)):
            other = package_of(target)
            if other is None:  # ``import virtualizarr_fill``
                found.append(f"{source} imports the package root")
                continue
            if other == package:
                continue
            if other not in LAYER:
                found.append(f"{source} imports {target}, in no layer")
            elif LAYER[other] >= LAYER[package]:
                where = "beside" if LAYER[other] == LAYER[package] else "above"
                found.append(f"{source} imports {target} ({other} is {where} {package})")
    return found


def package_cycles() -> list[list[str]]:
    """Cycles of the graph of packages (and of subpackages: hdf5.format, ...)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in modules():
        source = module_name(path)
        for target in imported_modules(path):
            for depth in (2, 3):  # packages, and subpackages within one package
                a, b = ".".join(source.split(".")[:depth]), ".".join(target.split(".")[:depth])
                nested = depth == 2 or a.split(".")[:2] == b.split(".")[:2]
                packages = all((SOURCE.parent / n.replace(".", "/")).is_dir() for n in (a, b))
                if a != b and nested and packages:
                    graph[a].add(b)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_every_package_is_in_a_layer() -> None:
    packages = {p.stem if p.is_file() else p.name for p in SOURCE.iterdir()}
    packages = {p for p in packages if not p.startswith("__") and p != "py"}
    packages -= {"__init__"}
    assert packages - set(LAYER) == set(), "add the new package to LAYERS (and the docs)"
    assert set(LAYER) - packages <= {"upstream"}, "a layered package no longer exists"


def exists(module: str) -> bool:
    """Whether ``module`` (or the module defining the imported name) is in the tree."""
    for candidate in (module, module.rpartition(".")[0]):
        path = SOURCE.parent / candidate.replace(".", "/")
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return True
    return False


def test_every_import_names_a_module_of_the_tree() -> None:
    """An import of a module that moved away fails here, even where an installed copy
    of the package would still answer it."""
    missing = {
        f"{module_name(path)} imports {target}"
        for path in modules()
        for target in imported_modules(path)
        if not exists(target)
    }
    assert missing == set()


def test_no_module_imports_a_package_beside_or_above_its_own() -> None:
    assert violations() == []


def test_no_module_imports_a_deprecated_shim() -> None:
    """Not even the package root or the command line: a shim warns when used, and the
    package itself must never warn about its own layout."""
    found = {
        f"{module_name(path)} imports {target}"
        for path in modules()
        for target in imported_modules(path)
        if package_of(target) in DEPRECATED_SHIMS
        and package_of(module_name(path)) != package_of(target)
    }
    assert found == set()


def test_no_import_cycles_between_packages() -> None:
    assert package_cycles() == []


def test_no_module_is_too_long() -> None:
    long = {
        module_name(path): n
        for path in modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert {m: n for m, n in long.items() if m not in LONG_MODULES} == {}
    assert {m: n for m, n in long.items() if n > MAX_LINES * 6 // 5} == {}  # and not much past


def test_the_rules_catch_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks fail on a module that imports upward, and on a cycle."""
    tree = tmp_path / PACKAGE
    for package, text in {
        "errors": "",
        "io/__init__": "",
        "io/files": "from virtualizarr_fill.tiff.parser import TIFFParser\n",
        "tiff/__init__": "",
        "tiff/parser": "from virtualizarr_fill.io import files\n",
    }.items():
        path = tree / f"{package}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "SOURCE", tree)
    assert violations() == [
        "virtualizarr_fill.io.files imports virtualizarr_fill.tiff.parser (tiff is above io)"
    ]
    assert package_cycles() == [
        ["virtualizarr_fill.io", "virtualizarr_fill.tiff", "virtualizarr_fill.io"]
    ]
