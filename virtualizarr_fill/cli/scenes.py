"""``build --time-from``: scenes stacked along ``time`` in time order.

Each file is parsed with ``TIFFParser(time_from=SPEC)``, which gives its dataset a
``time`` dimension of length one and the scene's CF-encoded time (see
:mod:`virtualizarr_fill.tiff.scene_time`); the files are then combined along ``time`` in
time order and two scenes of the same time refused, naming both files and the time, by
the rule :func:`virtualizarr_fill.assemble.time_stack.stack_by_time` follows
(:func:`~virtualizarr_fill.assemble.time_stack.time_order`, through
:func:`virtualizarr_fill.assemble.series.order_parts`).
"""

from __future__ import annotations

import argparse
from typing import Any

from virtualizarr_fill.cli._errors import EXIT_USAGE, CliError

__all__ = ["check_scene_arguments", "scene_parser_options"]


def check_scene_arguments(args: argparse.Namespace) -> None:
    """``--concat-dim`` defaults to ``time`` with ``--time-from``, which stacks along an
    existing dimension (``--new-dim`` is not needed) and excludes ``--overviews``."""
    time_from = getattr(args, "time_from", None)
    if time_from is None:
        return
    from virtualizarr_fill.tiff.scene_time import TIME, TimeSource

    try:
        TimeSource.parse(time_from)
    except ValueError as error:
        raise CliError(f"--time-from: {error}", EXIT_USAGE) from None
    if args.concat_dim not in (None, TIME):
        raise CliError(f"--time-from stacks along {TIME!r}, not {args.concat_dim!r}", EXIT_USAGE)
    if args.new_dim:
        raise CliError("--time-from gives every file a time dimension; drop --new-dim", EXIT_USAGE)
    if getattr(args, "overviews", False):
        raise CliError("--time-from and --overviews exclude each other", EXIT_USAGE)
    args.concat_dim = TIME


def scene_parser_options(args: argparse.Namespace) -> dict[str, Any]:
    """The TIFF parser options ``--time-from`` asks for (none without it)."""
    time_from = getattr(args, "time_from", None)
    return {} if time_from is None else {"time_from": time_from}
