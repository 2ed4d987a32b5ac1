"""The ``virtualizarr-fill`` command: inspect files, build virtual stores, verify them.

Commands::

    virtualizarr-fill inspect FILE_OR_URL... [--json] [--all-images]
    virtualizarr-fill build FILES_OR_GLOB_OR_URL... --concat-dim DIM [--new-dim] --out DEST
                      [--workers N] [--worker-memory GIB] [--dask-scheduler ADDRESS]
                      [--skip-bad] [--overwrite]
                      [--kerchunk-format {auto,2,3}]
    virtualizarr-fill verify DEST --against FILES_OR_GLOB_OR_URL... [--concat-dim DIM [--new-dim]]

``--debug`` (before or after the command) prints the traceback of an error instead of one
line. Inputs are local paths, glob patterns (``data/*.tif``, ``'s3://bucket/x/*.nc'``) or
URLs (``file://``, ``s3://``; S3 settings come from the usual ``AWS_*`` environment
variables). ``DEST`` is an Icechunk repository (a local directory, or ``s3://bucket/prefix``)
or kerchunk references (a path ending in ``.json`` or ``.parquet``). See docs/cli.md.

Exit codes:

* 0: success (``verify``: every compared value matched);
* 1: ``verify`` found mismatches or values it could not compare;
* 2: usage error (bad arguments, no file matches a pattern, destination exists);
* 3: bad or unsupported input: a file cannot be virtualized, or files cannot be combined;
* 4: input/output error: a file or store cannot be read or written, or a needed optional
  package is missing;
* 5: internal error (a bug: rerun with ``--debug`` and report the traceback);
* 130: interrupted (Ctrl-C).

Modules: :mod:`._main` (arguments, dispatch, errors to exit codes), :mod:`.inspection`,
:mod:`.build`, :mod:`.verify` (the commands), :mod:`.progress` (the progress bar), and the
shared :mod:`._inputs` (input files and their object stores), :mod:`._parse` (parsing
files), :mod:`._destinations` (Icechunk and kerchunk stores), :mod:`._native` (native
readers for ``verify``) and :mod:`._errors` (exit codes).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_IO,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
)
from virtualizarr_fill.cli._main import main

if TYPE_CHECKING:
    from virtualizarr_fill.cli._inputs import expand_inputs
    from virtualizarr_fill.cli._parse import ParsedFile, parse_file
    from virtualizarr_fill.cli.inspection import abbreviate_edges
    from virtualizarr_fill.cli.progress import Progress
    from virtualizarr_fill.io.registries import registry_for

# Imported on first use: the command's entry point must start without them.
_LAZY = {
    "ParsedFile": "virtualizarr_fill.cli._parse",
    "Progress": "virtualizarr_fill.cli.progress",
    "abbreviate_edges": "virtualizarr_fill.cli.inspection",
    "expand_inputs": "virtualizarr_fill.cli._inputs",
    "parse_file": "virtualizarr_fill.cli._parse",
    "registry_for": "virtualizarr_fill.cli._inputs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_IO",
    "EXIT_MISMATCH",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "ParsedFile",
    "Progress",
    "abbreviate_edges",
    "expand_inputs",
    "main",
    "parse_file",
    "registry_for",
]
