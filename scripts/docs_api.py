"""The documentation site's checks and docstring conversion (used by ``mkdocs.yml``).

* As a MkDocs hook (``hooks:`` in ``mkdocs.yml``): every public name must have an entry
  (``::: identifier``) on a page under ``docs/api/`` and a numpydoc docstring that
  documents each of its parameters. A missing one is logged as a warning, which fails
  ``mkdocs build --strict``. ``tests/project/test_docs.py`` runs the same check.
* As a griffe extension (``extensions:`` of the mkdocstrings handler): the docstrings
  are written for Sphinx as well, so Sphinx roles (``:class:`~pkg.Name```) become
  cross-references the site resolves where it documents the target (and code where it
  does not), and reStructuredText literal blocks (a paragraph ending in ``::``) become
  Markdown code blocks.

The public names are everything in ``virtualizarr_fill.__all__``,
``virtualizarr_fill.formats.AutoParser``, the codec classes zarr finds through the
``zarr.codecs`` entry points of the codec distribution (``codecs/pyproject.toml``),
under their re-exports in ``virtualizarr_fill.codecs``, and the error classes of
``virtualizarr_fill.errors``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import griffe

ROOT = Path(__file__).resolve().parents[1]
API_DIR = ROOT / "docs" / "api"
PACKAGE = "virtualizarr_fill"
# The codec distribution, built from codecs/ (its package under codecs/src).
CODECS_ROOT = ROOT / "codecs"
CODECS_PACKAGE = "virtualizarr_fill_codecs"

_log = logging.getLogger("mkdocs.hooks.docs_api")

# ``::: identifier`` lines of mkdocstrings.
_ENTRY = re.compile(r"^:::\s+(\S+)\s*$", re.MULTILINE)
# Sphinx roles: :class:`~pkg.Name`, :func:`pkg.f`, :mod:`.module`, :meth:`Name.m`, ...
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`(~?)([^`]+)`")


def public_names() -> list[str]:
    """The identifiers of every public name, as the API reference must document them."""
    import virtualizarr_fill
    import virtualizarr_fill.errors

    names = [f"{PACKAGE}.{name}" for name in virtualizarr_fill.__all__]
    names.append(f"{PACKAGE}.formats.AutoParser")
    # The codec distribution registers them; the API reference documents them under the
    # re-exports in virtualizarr_fill.codecs.
    pyproject = tomllib.loads((CODECS_ROOT / "pyproject.toml").read_text())
    for target in pyproject["project"]["entry-points"]["zarr.codecs"].values():
        module, _, attribute = target.partition(":")
        module = module.replace(CODECS_PACKAGE, f"{PACKAGE}.codecs", 1)
        names.append(f"{module}.{attribute}")
    base = virtualizarr_fill.errors.VirtualizarrFillError
    for name, value in vars(virtualizarr_fill.errors).items():
        if isinstance(value, type) and issubclass(value, base):
            names.append(f"{PACKAGE}.errors.{name}")
    return sorted(set(names))


def api_entries(api_dir: Path = API_DIR) -> dict[str, str]:
    """Identifier of every ``:::`` entry under ``api_dir`` -> the page that holds it."""
    entries: dict[str, str] = {}
    for page in sorted(api_dir.rglob("*.md")):
        for identifier in _ENTRY.findall(page.read_text()):
            entries.setdefault(identifier, page.relative_to(api_dir.parent).as_posix())
    return entries


class Problem(NamedTuple):
    """A public name the API reference does not document fully."""

    name: str
    problem: str

    def __str__(self) -> str:
        return f"{self.name}: {self.problem}"


def _target(package: griffe.Module, identifier: str) -> Any:
    obj: Any = package
    for part in identifier.split(".")[1:]:
        obj = obj.members[part]
    return obj.final_target if obj.is_alias else obj


def _signature_parameters(obj: Any) -> list[str]:
    if not (obj.is_function or (obj.is_class and not _is_exception(obj))):
        return []
    parameters = obj.parameters
    return [
        p.name
        for p in parameters
        if p.name not in ("self", "cls")
        and p.kind.value not in ("variadic positional",)
        and not p.name.startswith("_")
    ]


def _is_exception(obj: Any) -> bool:
    return any(
        str(base).endswith(("Error", "Exception", "Warning")) for base in obj.bases
    ) or obj.name.endswith(("Error", "Warning"))


def _documented_parameters(obj: Any) -> set[str]:
    documented: set[str] = set()
    for section in obj.docstring.parse("numpy", warnings=False):
        if section.kind.value in ("parameters", "other parameters"):
            documented.update(p.name.lstrip("*") for p in section.value)
    return documented


def undocumented_parameters(obj: Any) -> list[str]:
    """Parameters of a griffe function or class its docstring's numpydoc sections omit."""
    documented = _documented_parameters(obj)
    return [name for name in _signature_parameters(obj) if name not in documented]


def check_api(api_dir: Path = API_DIR) -> list[Problem]:
    """Public names without an API entry, a docstring, or a documented parameter.

    A name counts as documented by an entry for the same object under any of its paths
    (``virtualizarr_fill.CropCodec`` or ``virtualizarr_fill.codecs.crop.CropCodec``).
    """
    package = griffe.load(
        PACKAGE,
        search_paths=[str(ROOT), str(CODECS_ROOT / "src")],
        resolve_aliases=True,
        resolve_external=True,
    )
    documented: set[str] = set()
    for identifier in api_entries(api_dir):
        # An entry naming nothing is mkdocstrings' to report.
        with contextlib.suppress(KeyError, griffe.AliasResolutionError):
            documented.add(_target(package, identifier).path)
    # One name per object: the shortest of its public paths.
    by_object: dict[str, str] = {}
    for name in sorted(public_names(), key=len):
        by_object.setdefault(_target(package, name).path, name)
    problems: list[Problem] = []
    for path, name in sorted(by_object.items(), key=lambda item: item[1]):
        obj = _target(package, name)
        if path not in documented:
            problems.append(Problem(name, f"no '::: {name}' entry on a page under docs/api/"))
        if obj.docstring is None or not obj.docstring.value.strip():
            problems.append(Problem(name, "no docstring"))
            continue
        if missing := undocumented_parameters(obj):
            problems.append(
                Problem(name, f"parameters not documented (numpydoc 'Parameters'): {missing}")
            )
    return problems


# -- MkDocs hook ----------------------------------------------------------------------------


def on_pre_build(config: Any) -> None:
    """Warn (an error under ``--strict``) for every public name not fully documented."""
    for problem in check_api(Path(config["docs_dir"]) / "api"):
        _log.warning("API reference: %s", problem)


# -- griffe extension -----------------------------------------------------------------------


def _reference(match: re.Match[str]) -> str:
    tilde, target = match.group(1), match.group(2).strip()
    title = target
    if target.endswith(">") and "<" in target:  # :func:`title <target>`
        title, _, target = target[:-1].partition("<")
        title, target = title.strip(), target.strip()
    identifier = target.lstrip(".").removesuffix("()")
    if title == target:
        title = identifier.rsplit(".", 1)[-1] if tilde else identifier
    return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'


def markdown_docstring(text: str) -> str:
    """``text`` with Sphinx roles as cross-references and ``::`` literal blocks as code."""
    lines = []
    for line in _ROLE.sub(_reference, text).split("\n"):
        stripped = line.rstrip()
        if stripped.strip() == "::":
            continue
        if stripped.endswith("::"):
            line = stripped[:-1]
        lines.append(line)
    return "\n".join(lines)


class SphinxToMarkdown(griffe.Extension):
    """Convert each docstring with :func:`markdown_docstring` as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
