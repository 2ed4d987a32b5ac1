"""How a store was built, recorded in the store so that ``build --append`` and ``verify``
need no options.

The record is one root attribute, ``virtualizarr_fill_build``, holding a JSON text (a
string, so that a dataset opened from the store can still be written to netCDF): the
package version, how files were combined (``mode``: ``single``, ``series``, ``stack``,
``mosaic`` or ``multiscales``; ``dim``; for a mosaic, ``overlap``, the tile an overlap
takes), the parser options, and the number of input files with a digest of their sorted
URLs and one of their URLs in the order they were combined (which tile an overlap takes
depends on it). An Icechunk commit also lists the files it
added in its commit metadata (``virtualizarr_fill_inputs``), so that ``--append`` can
refuse a file the repository already holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, CliError

__all__ = [
    "INPUTS_KEY",
    "RECORD_KEY",
    "BuildRecord",
    "inputs_digest",
    "order_digest",
    "package_version",
    "recorded_inputs",
]

#: The root attribute holding the record.
RECORD_KEY = "virtualizarr_fill_build"
#: The commit metadata key listing the files a commit added.
INPUTS_KEY = "virtualizarr_fill_inputs"

MODES = ("single", "series", "stack", "mosaic", "multiscales")


def inputs_digest(urls: Iterable[str]) -> str:
    """The SHA-256 of the sorted, newline-joined input URLs."""
    return hashlib.sha256("\n".join(sorted(urls)).encode()).hexdigest()


def order_digest(urls: Iterable[str]) -> str:
    """The SHA-256 of the newline-joined input URLs, in the order they were combined."""
    return hashlib.sha256("\n".join(urls).encode()).hexdigest()


@dataclass(frozen=True)
class BuildRecord:
    """How a store was built (see the module docstring)."""

    mode: str
    dim: str | None = None
    allow_gaps: bool = False
    on_fill_conflict: str = "error"
    #: Which tile a mosaic's overlap takes (``--overlap``): "first", "last" or None.
    overlap: str | None = None
    tiff_options: dict[str, Any] = field(default_factory=dict)
    hdf5_options: dict[str, Any] = field(default_factory=dict)
    inputs: int = 0
    inputs_digest: str = ""
    order_digest: str = ""
    version: str = ""

    def to_attribute(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, Any], where: str) -> BuildRecord | None:
        """The record in a store's root attributes; ``None`` when it has none."""
        text = attributes.get(RECORD_KEY)
        if text is None:
            return None
        try:
            values = json.loads(text) if isinstance(text, str) else dict(text)
            known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__}
            record = cls(**known)
        except (TypeError, ValueError) as error:
            raise CliError(
                f"{where}: its {RECORD_KEY} attribute is not a build record ({error})",
                EXIT_BAD_INPUT,
            ) from None
        if record.mode not in MODES:
            raise CliError(f"{where}: unknown build mode {record.mode!r}", EXIT_BAD_INPUT)
        # Records written by earlier releases may hold deprecated TIFF option names: they
        # are ours, so they are upgraded without a warning.
        from virtualizarr_fill.parser_options import upgrade_options

        tiff_options, _ = upgrade_options(record.tiff_options)
        return replace(record, tiff_options=tiff_options)

    def with_inputs(self, urls: Iterable[str]) -> BuildRecord:
        listed = list(urls)
        return replace(
            self,
            inputs=len(listed),
            inputs_digest=inputs_digest(listed),
            order_digest=order_digest(listed),
        )


def package_version() -> str:
    """This package's installed version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("virtualizarr-fill")
    except PackageNotFoundError:
        return "unknown"


def recorded_inputs(repository: Any, branch: str = "main") -> list[str]:
    """Every file the commits of ``branch`` added, oldest first."""
    added: list[list[str]] = []
    for snapshot in repository.ancestry(branch=branch):
        listed = (snapshot.metadata or {}).get(INPUTS_KEY)
        if listed:
            added.append(list(listed))
    return [url for commit in reversed(added) for url in commit]
