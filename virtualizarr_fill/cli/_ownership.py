"""What ``build --overwrite`` may replace: only a store this tool can prove it wrote.

A store is ours when everything at the destination belongs to the store and the store
carries the build record (:data:`._record.RECORD_KEY`) in its root attributes:

- an Icechunk repository: a directory holding nothing but Icechunk's own entries
  (``repo``, ``config.yaml``, ``refs``, ``snapshots``, ``manifests``, ``transactions``,
  ``chunks``, ``overwritten``), that Icechunk opens, whose ``main`` branch has the record;
- kerchunk JSON references: a JSON file ``{"version": 1, "refs": {...}}`` whose root
  ``.zattrs`` (Zarr format 2) or ``zarr.json`` (format 3) has the record;
- kerchunk parquet references: a directory holding ``.zmetadata`` (whose root metadata
  has the record) and, below it, only ``refs.N.parq`` files.

Anything else (a folder with a user's files, a store another tool wrote, a repository
someone committed to by hand without the record) is refused, naming what is there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from virtualizarr_fill.cli._destinations import Destination
from virtualizarr_fill.cli._errors import EXIT_USAGE, CliError
from virtualizarr_fill.cli._record import RECORD_KEY

__all__ = ["check_replaceable"]

#: The entries of a local Icechunk repository (icechunk 1 and 2 layouts).
_ICECHUNK_ENTRIES = frozenset(
    {"repo", "config.yaml", "refs", "snapshots", "manifests", "transactions", "chunks",
     "overwritten"}
)  # fmt: skip
_PARQUET_REFS = re.compile(r"refs\.\d+\.parq")


def _listing(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"{shown}{more}"


def _refuse(destination: Destination, what: str) -> CliError:
    return CliError(f"--out {destination.text}: {what}; not replaced", EXIT_USAGE)


def _has_record(attributes: Any) -> bool:
    return isinstance(attributes, Mapping) and RECORD_KEY in attributes


def _root_attributes(metadata: Mapping[str, Any]) -> Any:
    """The root group attributes of kerchunk metadata (its values may be JSON texts)."""
    for key in (".zattrs", "zarr.json"):
        value = metadata.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if isinstance(value, Mapping):
            return value if key == ".zattrs" else value.get("attributes")
    return None


def _foreign_files(root: Path, allowed: Any) -> list[str]:
    """Paths under ``root`` (relative) that ``allowed(relative_path, is_dir)`` rejects."""

    def walk(directory: Path) -> Iterator[str]:
        for entry in directory.iterdir():
            relative = entry.relative_to(root).as_posix()
            is_dir = entry.is_dir() and not entry.is_symlink()
            if not allowed(relative, is_dir):
                yield relative
            elif is_dir:
                yield from walk(entry)

    return list(walk(root))


def _check_icechunk(destination: Destination, path: Path) -> None:
    if not path.is_dir():
        raise _refuse(destination, "is a file, not an Icechunk repository this tool wrote")
    foreign = [e.name for e in path.iterdir() if e.name not in _ICECHUNK_ENTRIES]
    if foreign:
        raise _refuse(
            destination, f"holds files that are not a store this tool wrote ({_listing(foreign)})"
        )
    import zarr

    from virtualizarr_fill.cli._destinations import icechunk_module
    from virtualizarr_fill.writers.repository import storage_for

    icechunk = icechunk_module()
    try:
        repo = icechunk.Repository.open(storage_for(path))
        attributes = zarr.open_group(repo.readonly_session("main").store, mode="r").attrs
        ours = _has_record(dict(attributes))
    except Exception:
        ours = False
    if not ours:
        raise _refuse(destination, "an Icechunk repository without this tool's build record")


def _check_json(destination: Destination, path: Path) -> None:
    if path.is_dir():
        raise _refuse(destination, "is a directory, not kerchunk JSON references this tool wrote")
    try:
        with path.open("rb") as file:
            content = json.load(file)
        refs = content.get("refs") if isinstance(content, Mapping) else None
        ours = isinstance(refs, Mapping) and _has_record(_root_attributes(refs))
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise _refuse(destination, "not kerchunk JSON references with this tool's build record")


def _check_parquet(destination: Destination, path: Path) -> None:
    if not path.is_dir():
        raise _refuse(destination, "is a file, not kerchunk parquet references this tool wrote")

    def allowed(relative: str, is_dir: bool) -> bool:
        if "/" not in relative:
            return is_dir or relative == ".zmetadata"
        return is_dir or bool(_PARQUET_REFS.fullmatch(relative.rsplit("/", 1)[-1]))

    foreign = _foreign_files(path, allowed)
    if foreign:
        raise _refuse(
            destination, f"holds files that are not a store this tool wrote ({_listing(foreign)})"
        )
    try:
        with (path / ".zmetadata").open("rb") as file:
            metadata = json.load(file).get("metadata")
        ours = isinstance(metadata, Mapping) and _has_record(_root_attributes(metadata))
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        raise _refuse(destination, "not kerchunk parquet references with this tool's build record")


def check_replaceable(destination: Destination) -> None:
    """Refuse, with one line naming what is there, to replace a local destination that
    is not a store this tool wrote (see the module docstring); a destination that does
    not exist, or an empty directory, may always be written."""
    path = destination.local
    if path is None or not path.exists():
        return
    if path.is_dir() and not any(path.iterdir()):
        return
    check = {"icechunk": _check_icechunk, "json": _check_json, "parquet": _check_parquet}
    check[destination.kind](destination, path)
