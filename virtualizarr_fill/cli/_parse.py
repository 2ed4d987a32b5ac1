"""Parsing input files into virtual datasets: the parser the options configure, the
decisions, warnings and errors of each file, and parsing many files in worker processes
(:mod:`virtualizarr_fill.isolation`: a worker that crashes costs its one file)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
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
from virtualizarr_fill.cli._inputs import display, registry_for
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.formats import AutoParser
from virtualizarr_fill.report import ParseReport, collect

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "WORKER_TIME_LIMIT",
    "ParsedFile",
    "describe_failure",
    "file_error_message",
    "make_parser",
    "parse_file",
    "parse_files",
    "recording",
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


def make_parser(args: argparse.Namespace, **tiff_defaults: Any) -> AutoParser:
    """The AutoParser configured by ``--tiff-option`` / ``--hdf5-option`` arguments."""
    from virtualizarr_fill import TIFFParser

    tiff_options = {**tiff_defaults, **_options(args.tiff_option, "--tiff-option")}
    hdf5_options = _options(args.hdf5_option, "--hdf5-option")
    try:
        tiff = TIFFParser(**tiff_options)
        hdf5 = None
        if hdf5_options:
            from virtualizarr_fill.hdf5 import HDF5Parser

            hdf5 = HDF5Parser(**hdf5_options)
    except (TypeError, ValueError) as error:
        raise CliError(f"invalid parser option: {error}", EXIT_USAGE) from None
    return AutoParser(tiff=tiff, hdf5=hdf5)


# --------------------------------------------------------------------------- one file


@dataclass
class ParsedFile:
    """The outcome of parsing one file (what a worker sends back)."""

    url: str
    dataset: xr.Dataset | None = None
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


def describe_failure(url: str, error: BaseException) -> tuple[str, int]:
    """The one-line message and the exit code of an error raised while parsing ``url``;
    an internal error (a bug) names its exception type."""
    code = classify_error(error)
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
    """Parse one file into a virtual dataset, recording decisions, warnings and errors.

    Never raises for a bad file: the error is returned, so that a worker pool can carry
    on (``--skip-bad``) and the caller decides what to do.
    """
    started = time.perf_counter()
    result = ParsedFile(url=url)
    with recording() as (report, caught):
        try:
            from virtualizarr import open_virtual_dataset

            result.dataset = open_virtual_dataset(
                url, registry=registry_for([url]), parser=parser or AutoParser()
            )
        except Exception as error:
            result.error, result.exit_code = describe_failure(url, error)
            result.traceback = traceback.format_exc()
    result.report = report
    result.warnings = warning_texts(caught, report)
    result.seconds = time.perf_counter() - started
    return result


# --------------------------------------------------------------------------- many files


def _forkserver_context() -> Any:
    # Workers fork from a server that imported this module once: cheap to start, and
    # unlike plain fork it never copies the parent's object-store or event-loop threads.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


#: Seconds one file may take in a worker before the worker is killed and the file
#: reported (a hang in native code; store waits end sooner, at the parse deadline).
WORKER_TIME_LIMIT = 600.0


def _run_pool(
    urls: Sequence[str],
    parser: Any,
    workers: int,
    on_result: Callable[[ParsedFile], bool],
    memory_limit: int | None,
) -> None:
    """Parse in isolated worker processes; ``on_result`` returns False to stop early."""
    from virtualizarr_fill.isolation import isolated_map

    outcomes = isolated_map(
        functools.partial(parse_file, parser=parser),
        urls,
        workers=workers,
        memory_limit=memory_limit,
        timeout=WORKER_TIME_LIMIT,
        context=_forkserver_context(),
    )
    try:
        for outcome in outcomes:
            if outcome.value is not None:
                result = outcome.value
            else:
                result = ParsedFile(url=outcome.input)
                if outcome.died is not None:
                    result.error = (
                        f"{display(outcome.input)}: the worker process parsing it died "
                        f"({outcome.died})"
                    )
                    result.exit_code = EXIT_BAD_INPUT
                else:
                    assert outcome.error is not None
                    result.error, result.exit_code = describe_failure(outcome.input, outcome.error)
            if not on_result(result):
                return
    finally:  # stopped early or failed: the workers stop, files not started are dropped
        outcomes.close()


def _run_dask(
    urls: Sequence[str], parser: Any, address: str, on_result: Callable[[ParsedFile], bool]
) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise CliError(
            "--dask-scheduler needs the 'distributed' package (pip install "
            "'virtualizarr-fill[dask]')",
            EXIT_IO,
        ) from None
    try:
        client = Client(address, timeout=30)
    except OSError as error:
        raise CliError(
            f"cannot connect to the dask scheduler {address}: {error}", EXIT_IO
        ) from None
    with client:
        futures = client.map(parse_file, list(urls), parser=parser, pure=False)
        for future in as_completed(futures):
            if not on_result(future.result()):
                client.cancel(futures)
                return


def parse_files(
    urls: Sequence[str],
    parser: Any,
    *,
    workers: int,
    dask_scheduler: str | None,
    skip_bad: bool,
    progress: Progress,
    memory_limit: int | None = None,
) -> list[ParsedFile]:
    """Parse every file; results in input order.

    ``workers`` isolated worker processes parse them, each with ``memory_limit`` bytes
    of address space beyond its start (:mod:`virtualizarr_fill.isolation`); 0 parses in
    this process. Without ``skip_bad`` the first bad file stops the job with a
    :class:`CliError`; a file whose worker died counts as a bad file.
    """
    results: dict[str, ParsedFile] = {}
    failure: list[ParsedFile] = []

    def on_result(result: ParsedFile) -> bool:
        results[result.url] = result
        progress.advance()
        if result.error is not None and not skip_bad:
            failure.append(result)
            return False
        return True

    if dask_scheduler:
        _run_dask(urls, parser, dask_scheduler, on_result)
    elif workers >= 1:
        _run_pool(urls, parser, min(workers, len(urls)), on_result, memory_limit)
    else:
        for url in urls:
            if not on_result(parse_file(url, parser)):
                break
    if failure:
        raise _file_error(failure[0])
    return [results[url] for url in urls]


def _file_error(result: ParsedFile) -> FileError:
    hint = "" if result.exit_code == EXIT_INTERNAL else " (use --skip-bad to leave it out)"
    return FileError(f"{result.error}{hint}", result.exit_code, result.traceback)
