"""Parsing input files: the parser the options configure, the decisions, warnings and
errors of each file, and parsing many files in worker processes, in batches
(:mod:`virtualizarr_fill.io.isolation`: a worker that crashes costs its one file).

What a file's parse sends back is its :class:`~virtualizarr_fill.assemble.FilePart`
(its manifests and decoded coordinates), not an xarray Dataset: the command combines
files at the manifest level (:mod:`virtualizarr_fill.assemble`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing
import re
import time
import traceback
import warnings
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_IO,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    FileError,
    classify_error,
)
from virtualizarr_fill.cli._inputs import display
from virtualizarr_fill.io.batching import BATCH_FILES, batches
from virtualizarr_fill.io.registries import registry_for
from virtualizarr_fill.report import ParseReport, collect

if TYPE_CHECKING:
    from virtualizarr_fill.assemble import FilePart
    from virtualizarr_fill.formats import AutoParser

__all__ = [
    "WORKER_TIME_LIMIT",
    "ParsedFile",
    "describe_failure",
    "file_error_message",
    "file_error",
    "iter_parsed",
    "make_parser",
    "parse_batch",
    "parse_file",
    "parser_from_options",
    "parser_options",
    "recording",
    "start_workers_early",
    "warning_texts",
]


# --------------------------------------------------------------------------- parser options


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a bare word, e.g. warn


def _options(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise CliError(f"{flag} {item!r}: expected NAME=VALUE", EXIT_USAGE)
        options[name] = _option_value(value)
    return options


def parser_options(
    args: argparse.Namespace, **tiff_defaults: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The TIFF and HDF5 parser options of ``--tiff-option`` / ``--hdf5-option``
    arguments (over ``tiff_defaults``)."""
    tiff_options = {**tiff_defaults, **_options(args.tiff_option, "--tiff-option")}
    return tiff_options, _options(args.hdf5_option, "--hdf5-option")


def parser_from_options(tiff_options: dict[str, Any], hdf5_options: dict[str, Any]) -> AutoParser:
    """The AutoParser of these TIFF and HDF5 parser options."""
    from virtualizarr_fill import TIFFParser
    from virtualizarr_fill.formats import AutoParser

    try:
        tiff = TIFFParser(**tiff_options)
        hdf5 = None
        if hdf5_options:
            from virtualizarr_fill.hdf5 import HDF5Parser

            hdf5 = HDF5Parser(**hdf5_options)
    except (TypeError, ValueError) as error:
        raise CliError(f"invalid parser option: {error}", EXIT_USAGE) from None
    return AutoParser(tiff=tiff, hdf5=hdf5)


def make_parser(args: argparse.Namespace, **tiff_defaults: Any) -> AutoParser:
    """The AutoParser configured by ``--tiff-option`` / ``--hdf5-option`` arguments."""
    return parser_from_options(*parser_options(args, **tiff_defaults))


# --------------------------------------------------------------------------- one file


@dataclass
class ParsedFile:
    """The outcome of parsing one file (what a worker sends back)."""

    url: str
    part: FilePart | None = None
    report: ParseReport = field(default_factory=ParseReport)
    warnings: tuple[str, ...] = ()
    error: str | None = None
    exit_code: int = EXIT_OK
    traceback: str | None = None
    seconds: float = 0.0


def file_error_message(url: str, error: BaseException) -> str:
    """The error's text, naming the file unless it already does."""
    text = str(error) or type(error).__name__
    if url in text or display(url) in text:
        return text
    return f"{display(url)}: {text}"


def _needs_cftime(error: BaseException) -> str | None:
    """The calendar (quoted) of xarray's refusal to decode times without cftime, when
    that is what ``error`` is and cftime is indeed missing."""
    text = str(error)
    if not isinstance(error, ValueError) or "installing cftime" not in text:
        return None
    try:
        import cftime  # noqa: F401
    except ImportError:
        pass
    else:
        return None
    found = re.search(r"calendar ('[^']+')", text)
    return found.group(1) if found else "'(unknown)'"


def describe_failure(url: str, error: BaseException) -> tuple[str, int]:
    """The one-line message and the exit code of an error raised while parsing ``url``;
    an internal error (a bug) names its exception type."""
    code = classify_error(error)
    calendar = _needs_cftime(error)
    if calendar is not None:
        return (
            f"{display(url)}: its times are in calendar {calendar}, which xarray decodes "
            "only with the cftime package: pip install cftime",
            EXIT_IO,
        )
    if code == EXIT_INTERNAL:
        return f"{display(url)}: internal error {type(error).__name__}: {error}", code
    return file_error_message(url, error), code


@contextlib.contextmanager
def recording() -> Iterator[tuple[ParseReport, list[warnings.WarningMessage]]]:
    """Record the parser's decisions and every warning raised inside the block."""
    with collect() as report, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield report, caught


def warning_texts(
    caught: Sequence[warnings.WarningMessage], report: ParseReport
) -> tuple[str, ...]:
    """The distinct texts of the warnings, leaving out those the report lists as refusals."""
    refused = {(r.url, r.name) for r in report.refusals}
    texts: list[str] = []
    for item in caught:
        message = item.message
        key = (getattr(message, "url", None), getattr(message, "dataset", None))
        if key in refused:  # already listed as a refusal by the parser
            continue
        texts.append(str(message))
    return tuple(dict.fromkeys(texts))


def parse_file(url: str, parser: Any = None) -> ParsedFile:
    """Parse one file into its :class:`~virtualizarr_fill.assemble.FilePart`, recording
    decisions, warnings and errors.

    Never raises for a bad file: the error is returned, so that a worker pool can carry
    on (``--skip-bad``) and the caller decides what to do.
    """
    from virtualizarr_fill.assemble.parts import file_part
    from virtualizarr_fill.formats import AutoParser

    started = time.perf_counter()
    result = ParsedFile(url=url)
    left_out: list[str] = []
    with recording() as (report, caught):
        try:
            store = (parser or AutoParser())(url=url, registry=registry_for([url]))
            result.part = file_part(store)
            left_out = _groups_left_out(store)
        except Exception as error:
            result.error, result.exit_code = describe_failure(url, error)
            result.traceback = traceback.format_exc()
    result.report = report
    result.warnings = warning_texts(caught, report)
    if result.part is not None and left_out:
        result.warnings += (
            f"{display(url)}: its groups {', '.join(left_out)} are left out: a build combines "
            "one group of each file (choose it with --hdf5-option group=NAME)",
        )
    result.seconds = time.perf_counter() - started
    return result


def _groups_left_out(store: Any) -> list[str]:
    """The subgroups of a parsed file's group, which a build does not combine."""
    from virtualizarr_fill.manifests.upstream import store_group

    group = store_group(store)
    return sorted(f"/{name}" for name in getattr(group, "groups", {}) or {})


def parse_batch(urls: Sequence[str], parser: Any = None) -> list[ParsedFile]:
    """:func:`parse_file` of each URL (one task of a worker process)."""
    return [parse_file(url, parser) for url in urls]


# --------------------------------------------------------------------------- many files


#: What a worker needs to parse a file, imported once by the fork server so that every
#: worker forked from it starts ready.
_WORKER_PRELOAD = [
    __name__,
    "virtualizarr_fill.assemble.parts",
    "virtualizarr_fill.tiff",
    "virtualizarr_fill.hdf5",
]


def _forkserver_context() -> Any:
    # Workers fork from a server that imported the parsing stack once: cheap to start,
    # and unlike plain fork it never copies the parent's object-store or event-loop
    # threads.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_WORKER_PRELOAD)
    return context


def start_workers_early() -> None:
    """Start the fork server now, so that it imports the parsing stack while this
    process does its own work (expanding inputs, importing what combining takes)."""
    import multiprocessing.forkserver

    _forkserver_context()
    multiprocessing.forkserver.ensure_running()


#: Seconds one file may take in a worker before the worker is killed and the file
#: reported (a hang in native code; store waits end sooner, at the parse deadline).
WORKER_TIME_LIMIT = 600.0


def _died(url: str, why: str) -> ParsedFile:
    return ParsedFile(
        url=url,
        error=f"{display(url)}: the worker process parsing it died ({why})",
        exit_code=EXIT_BAD_INPUT,
    )


def _failed(url: str, error: BaseException) -> ParsedFile:
    result = ParsedFile(url=url)
    result.error, result.exit_code = describe_failure(url, error)
    return result


def _run_pool(
    urls: Sequence[str], parser: Any, workers: int, memory_limit: int | None
) -> Iterator[ParsedFile]:
    """Parse in isolated worker processes, batch by batch; a batch whose worker died is
    parsed again one file per worker, so that only the file that kills it is lost."""
    from virtualizarr_fill.io.isolation import isolated_map

    context = _forkserver_context()
    work = batches(urls, workers)
    outcomes = isolated_map(
        functools.partial(parse_batch, parser=parser),
        work,
        workers=workers,
        memory_limit=memory_limit,
        timeout=WORKER_TIME_LIMIT * BATCH_FILES,
        context=context,
    )
    retry: list[str] = []
    try:
        for outcome in outcomes:
            if outcome.value is not None:
                yield from outcome.value
            elif outcome.died is not None and len(outcome.input) > 1:
                retry.extend(outcome.input)
            elif outcome.died is not None:
                yield _died(outcome.input[0], outcome.died)
            else:
                assert outcome.error is not None
                for url in outcome.input:
                    yield _failed(url, outcome.error)
    finally:  # stopped early or failed: the workers stop, files not started are dropped
        outcomes.close()
    if not retry:
        return
    singles = isolated_map(
        functools.partial(parse_file, parser=parser),
        retry,
        workers=workers,
        memory_limit=memory_limit,
        timeout=WORKER_TIME_LIMIT,
        context=context,
    )
    try:
        for single in singles:
            if single.value is not None:
                yield single.value
            elif single.died is not None:
                yield _died(single.input, single.died)
            else:
                assert single.error is not None
                yield _failed(single.input, single.error)
    finally:
        singles.close()


def iter_parsed(
    urls: Sequence[str],
    parser: Any,
    *,
    workers: int,
    memory_limit: int | None = None,
) -> Generator[ParsedFile, None, None]:
    """Every file's :class:`ParsedFile`, in the order they finish.

    ``workers`` isolated worker processes parse them in batches, each with
    ``memory_limit`` bytes of address space beyond its start
    (:mod:`virtualizarr_fill.io.isolation`); 0 parses in this process (a dask cluster
    parses and combines in :mod:`._dask`).
    """
    if workers >= 1:
        yield from _run_pool(urls, parser, min(workers, len(urls)), memory_limit)
    else:
        for url in urls:
            yield parse_file(url, parser)


def file_error(result: ParsedFile) -> FileError:
    """The error stopping the build at a bad file (without ``--skip-bad``)."""
    hint = "" if result.exit_code == EXIT_INTERNAL else " (use --skip-bad to leave it out)"
    return FileError(f"{result.error}{hint}", result.exit_code, result.traceback)
