"""The argument parser of the ``virtualizarr-fill`` command, dispatch to its commands, and
the mapping of errors to one line on stderr and an exit code."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from virtualizarr_fill.cli._errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    FileError,
    classify_error,
)
from virtualizarr_fill.cli._settings import POOL_THRESHOLD
from virtualizarr_fill.io.isolation import DEFAULT_MEMORY_LIMIT

__all__ = ["build_parser", "main"]


def _add_parser_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tiff-option",
        action="append",
        metavar="NAME=VALUE",
        help="TIFFParser option, e.g. on_out_of_range=warn or probe_last_strip=true (repeatable)",
    )
    parser.add_argument(
        "--hdf5-option",
        action="append",
        metavar="NAME=VALUE",
        help="HDF5Parser option, e.g. drop_variables='[\"lat_bnds\"]' (repeatable)",
    )


def _add_debug(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show the full traceback of an error",
    )


def _add_stac_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stac",
        metavar="ITEMS",
        help="build from STAC items instead of files: an ItemCollection or Item JSON file, "
        "a folder of Item JSON files, or an http(s)/s3 URL of one; a mosaic per time step, "
        "stacked along 'time' in datetime order",
    )
    parser.add_argument("--asset", metavar="KEY", help="with --stac: the asset to virtualize")
    parser.add_argument(
        "--group-by",
        choices=("time", "solar_day"),
        help="with --stac: one time step per datetime (time, the default) or per local "
        "solar date (solar_day, as odc-stac)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``virtualizarr-fill`` command."""
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Virtualize TIFF/GeoTIFF and HDF5/netCDF-4 files into Icechunk or kerchunk.",
        epilog="Exit codes: 0 ok, 1 verify mismatch, 2 usage, 3 bad input, 4 I/O, "
        "5 internal error, 130 interrupted.",
    )
    _add_debug(top, False)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inspect = commands.add_parser(
        "inspect", help="show how files become virtual arrays (grids, codecs, padding, fills)"
    )
    inspect.add_argument("inputs", nargs="+", metavar="FILE_OR_URL")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument(
        "--all-images",
        action="store_true",
        help="TIFF: every image (overviews, masks, pages, SubIFDs) as its own group",
    )
    _add_parser_options(inspect)
    _add_debug(inspect, argparse.SUPPRESS)

    build = commands.add_parser("build", help="virtualize files into one Icechunk/kerchunk store")
    build.add_argument("inputs", nargs="*", metavar="FILES_OR_GLOB_OR_URL")
    build.add_argument(
        "--concat-dim",
        metavar="DIM",
        help="dimension to combine the files along, in the order of their DIM coordinate "
        "(default: one file as it is; several GeoTIFFs as a mosaic)",
    )
    build.add_argument(
        "--new-dim", action="store_true", help="stack the files along a new dimension DIM"
    )
    build.add_argument(
        "--mosaic",
        action="store_true",
        help="place GeoTIFF tiles on one grid by their georeferencing (the default for "
        "several georeferenced files without --concat-dim)",
    )
    build.add_argument(
        "--allow-gaps",
        action="store_true",
        help="accept files (or tiles) that do not abut; missing parts read as the fill value",
    )
    build.add_argument(
        "--overlap",
        choices=("first", "last"),
        help="mosaic tiles that overlap: take the overlap from the tile given first or last "
        "(rasterio.merge's methods); by default overlaps are refused",
    )
    build.add_argument(
        "--out",
        required=True,
        metavar="DEST",
        help="Icechunk repository (a directory NAME.icechunk or without suffix, or "
        "s3://bucket/prefix), or kerchunk references NAME.json / NAME.parquet",
    )
    build.add_argument(
        "--append",
        action="store_true",
        help="add the files to the Icechunk repository DEST along the dimension it was "
        "built with, as one commit",
    )
    build.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=f"parser processes, a file that crashes one costing only that file (default: "
        f"0 for TIFF inputs; else one per CPU from {POOL_THRESHOLD} files on, else 1; "
        "0: parse in this process)",
    )
    build.add_argument(
        "--worker-memory",
        type=float,
        default=DEFAULT_MEMORY_LIMIT / 2**30,
        metavar="GIB",
        help="address space a parser process may take beyond its start "
        f"(default: {DEFAULT_MEMORY_LIMIT / 2**30:g} GiB)",
    )
    build.add_argument(
        "--dask-scheduler", metavar="ADDRESS", help="parse and merge on this dask cluster"
    )
    build.add_argument(
        "--time-from",
        metavar="SPEC",
        help="stack the scenes along 'time', in time order, from: 'datetime' (TIFF DateTime "
        "tag), 'metadata:NAME' (GDAL metadata item) or a regular expression on the file "
        r"name, e.g. 'S2_(\d{8})'",
    )
    _add_stac_options(build)
    build.add_argument(
        "--overviews",
        action="store_true",
        help="TIFF: the images and their overviews as a multiscale group of levels 0..n "
        "(each level combined across the files)",
    )
    build.add_argument(
        "--skip-bad", action="store_true", help="leave out files that cannot be virtualized"
    )
    build.add_argument("--overwrite", action="store_true", help="replace a local DEST")
    build.add_argument(
        "--on-fill-conflict",
        choices=("error", "use_first", "drop"),
        default="error",
        help="files whose fill values differ: refuse (default), keep the first file's, "
        "or drop the fill information",
    )
    build.add_argument(
        "--kerchunk-format",
        choices=("auto", "2", "3"),
        default="auto",
        help="Zarr format of kerchunk references (auto: 2 unless a grid is rectilinear)",
    )
    _add_parser_options(build)
    _add_debug(build, argparse.SUPPRESS)

    check = commands.add_parser(
        "verify", help="compare a store's decoded values with the native readers'"
    )
    check.add_argument("dest", metavar="DEST")
    check.add_argument("--against", nargs="+", required=True, metavar="FILES_OR_GLOB_OR_URL")
    _add_debug(check, argparse.SUPPRESS)
    return top


# Each command's module is imported when it runs: ``--help`` and usage errors need none
# of the libraries the commands use.
_COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("virtualizarr_fill.cli.inspection", "command_inspect"),
    "build": ("virtualizarr_fill.cli.build", "command_build"),
    "verify": ("virtualizarr_fill.cli.verify", "command_verify"),
}


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    module, function = _COMMANDS[name]
    return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]


def _fail(message: str, code: int) -> int:
    one_line = " ".join(message.split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see the package docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return int(exit_.code or 0)
    if args.command == "build" and args.workers is not None and args.workers < 0:
        return _fail("--workers must be 0 or more", EXIT_USAGE)
    if args.command == "build" and not args.worker_memory > 0:
        return _fail("--worker-memory must be positive", EXIT_USAGE)
    try:
        return _command(args.command)(args)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except FileError as error:
        if args.debug and error.worker_traceback:
            print(error.worker_traceback, file=sys.stderr)
        return _fail(str(error), error.exit_code)
    except CliError as error:
        if args.debug:
            traceback.print_exc()
        return _fail(str(error), error.exit_code)
    except Exception as error:
        if args.debug:
            traceback.print_exc()
        code = classify_error(error)
        message = str(error) or type(error).__name__
        if code == EXIT_INTERNAL:
            message = (
                f"internal error {type(error).__name__}: {message} (rerun with --debug and "
                "report the traceback)"
            )
        return _fail(message, code)
