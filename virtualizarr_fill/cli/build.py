"""``virtualizarr-fill build``: parse files (in worker processes when there are many),
combine them (one file, a series along a dimension, a stack, a GeoTIFF mosaic: see
:mod:`._combine`) and write one Icechunk repository or kerchunk references, recording
how (:mod:`._record`); ``--append`` adds files to a repository built this way."""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._combine import Combination, Plan, check_append
from virtualizarr_fill.cli._destinations import (
    Destination,
    is_icechunk_repository,
    open_icechunk_repository,
)
from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, PROG, CliError
from virtualizarr_fill.cli._inputs import display, expand_inputs
from virtualizarr_fill.cli._memory import Handoff, give_back_freed_memory
from virtualizarr_fill.cli._ownership import check_replaceable
from virtualizarr_fill.cli._parse import (
    ParsedFile,
    file_error,
    iter_parsed,
    parser_from_options,
    parser_options,
    start_workers_early,
)
from virtualizarr_fill.cli._record import BuildRecord, package_version, recorded_inputs
from virtualizarr_fill.cli._settings import POOL_THRESHOLD
from virtualizarr_fill.cli._summary import dataset_facts, print_build_summary
from virtualizarr_fill.cli._write import append_icechunk, write_new_store
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.cli.scenes import check_scene_arguments, scene_parser_options
from virtualizarr_fill.report import ParseReport

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["command_build"]


@dataclass
class _Parsed:
    """What the parse phase leaves: the files combined, skipped, and their refusals
    (``report`` holds no array reports)."""

    used: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    report: ParseReport = field(default_factory=ParseReport)
    warnings: list[str] = field(default_factory=list)


#: Names of inputs parsed in the build's own process by default.
_TIFF_SUFFIXES = (".tif", ".tiff", ".tf8", ".btf", ".gtiff")


def _tiff_only(inputs: Sequence[str]) -> bool:
    """Whether every input (a path, pattern or URL) names TIFF files."""
    return all(item.lower().endswith(_TIFF_SUFFIXES) for item in inputs)


def _default_workers(inputs: Sequence[str], files: int) -> int:
    """Worker processes when ``--workers`` is not given.

    TIFF headers are parsed by tifffile, in Python, and fuzzing finds no input that
    crashes it: such builds parse in this process, which on two cores is both faster and
    half the memory of worker processes (docs/performance.md). HDF5 files are parsed by
    libhdf5, native code that malformed files can crash: those builds always isolate
    the parse in worker processes, one per CPU from ``POOL_THRESHOLD`` files on.
    """
    if _tiff_only(inputs):
        return 0
    return (os.cpu_count() or 1) if files >= POOL_THRESHOLD else 1


def _parse_into(
    combination: Combination, urls: Sequence[str], parser: Any, args: argparse.Namespace
) -> _Parsed:
    """Parse every file and add it to the combination as it arrives."""
    if args.dask_scheduler:
        return _parse_on_dask(combination, urls, parser, args)
    outcome = _Parsed()
    workers = args.workers if args.workers is not None else _default_workers(args.inputs, len(urls))
    results = iter_parsed(
        urls,
        parser,
        workers=workers,
        memory_limit=int(args.worker_memory * 2**30),
    )
    with Progress("parse", len(urls), "files") as progress:
        try:
            for result in results:
                progress.advance()
                _keep_refusals(outcome, result)
                outcome.warnings.extend(result.warnings)
                if result.part is None:
                    if not args.skip_bad:
                        raise file_error(result)
                    outcome.skipped.append(str(result.error))
                    continue
                combination.add(result.part)
                outcome.used.append(result.url)
        finally:
            results.close()
    return _finished(outcome, urls)


def _keep_refusals(outcome: _Parsed, result: ParsedFile) -> None:
    """Keep what the summary lists of a file's report: its refusals. Its array reports
    (the parser's decisions, in sentences, for ``inspect``) are left out: kept for every
    file of a large build they would outweigh its chunk references."""
    outcome.report.refusals.extend(result.report.refusals)


def _finished(outcome: _Parsed, urls: Sequence[str]) -> _Parsed:
    if not outcome.used:
        raise CliError(f"none of the {len(urls)} files could be virtualized", EXIT_BAD_INPUT)
    # Workers finish in any order; the files are combined, and recorded, in input order.
    position = {url: i for i, url in enumerate(urls)}
    outcome.used.sort(key=position.__getitem__)
    return outcome


def _account(outcome: _Parsed, result: ParsedFile, skip_bad: bool) -> bool:
    """Record one file's outcome; whether it parsed (a failure stops the build unless
    ``skip_bad``)."""
    _keep_refusals(outcome, result)
    outcome.warnings.extend(result.warnings)
    if result.error is None:
        return True
    if not skip_bad:
        raise file_error(result)
    outcome.skipped.append(str(result.error))
    return False


def _parse_on_dask(
    combination: Combination, urls: Sequence[str], parser: Any, args: argparse.Namespace
) -> _Parsed:
    """Parse on a dask cluster (:mod:`._dask`): the first file that parses here decides
    the plan, the rest are parsed and combined on the cluster."""
    from virtualizarr_fill.cli._combine import combining
    from virtualizarr_fill.cli._dask import collect_on_dask, connect, first_files

    outcome = _Parsed()
    with connect(args.dask_scheduler) as client, Progress("parse", len(urls), "files") as progress:
        rest: Sequence[str] = []
        for i, result in enumerate(first_files(client, urls, parser)):
            progress.advance()
            if _account(outcome, result, args.skip_bad):
                assert result.part is not None
                combination.add(result.part)
                outcome.used.append(result.url)
                rest = urls[i + 1 :]
                break
        plan = combination.plan
        with combining(combination.label):
            batch = collect_on_dask(
                client, rest, parser, plan.dims, plan.mode == "stack", args.skip_bad, progress
            )
        # a failed file is raised in input order, as the build would meet it
        for result in batch.files:
            if _account(outcome, result, args.skip_bad):
                outcome.used.append(result.url)
        if batch.collector is not None:
            with combining(combination.label):
                combination.merge(batch.collector)
    return _finished(outcome, urls)


# --------------------------------------------------------------------------- append


def _check_append_arguments(args: argparse.Namespace) -> None:
    given = [
        flag
        for flag, value in (
            ("--concat-dim", args.concat_dim),
            ("--new-dim", args.new_dim),
            ("--mosaic", args.mosaic),
            ("--time-from", args.time_from),
            ("--overviews", args.overviews),
            ("--tiff-option", args.tiff_option),
            ("--hdf5-option", args.hdf5_option),
            ("--overwrite", args.overwrite),
            ("--allow-gaps", args.allow_gaps),
            ("--overlap", args.overlap),
        )
        if value
    ]
    if given:
        raise CliError(
            f"--append combines and parses the new files as the repository records; drop "
            f"{', '.join(given)}",
            EXIT_USAGE,
        )


def _append_source(destination: Destination) -> tuple[Any, BuildRecord, xr.Dataset]:
    """The repository to append to, its build record and its dataset."""
    import xarray as xr

    if destination.kind != "icechunk":
        raise CliError(
            f"--out {destination.text}: kerchunk references cannot be appended to; build them "
            "again from every file, or build an Icechunk repository",
            EXIT_USAGE,
        )
    if not destination.exists() or not is_icechunk_repository(destination):
        raise CliError(f"--out {destination.text}: no Icechunk repository to append to", EXIT_USAGE)
    from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

    enable_rectilinear_chunks()  # the stored arrays may be on rectilinear grids
    repo = open_icechunk_repository(destination.text)
    stored = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3)
    record = BuildRecord.from_attributes(stored.attrs, destination.text)
    if record is None:
        raise CliError(
            f"--out {destination.text}: not built by '{PROG} build' (it has no build record), "
            "so the command does not know how to append to it; append in Python with "
            "virtualizarr_fill.to_icechunk(..., append_dim=DIM)",
            EXIT_USAGE,
        )
    if record.mode not in ("series", "stack"):
        raise CliError(
            f"--out {destination.text}: built as a {record.mode}, which has no dimension to "
            "append along (build with --concat-dim DIM to grow it later); rebuild it with "
            "every file",
            EXIT_USAGE,
        )
    return repo, record, stored


def _refuse_known(urls: Sequence[str], known: Sequence[str], where: str) -> None:
    held = set(known)
    repeated = [u for u in urls if u in held]
    if repeated:
        listed = ", ".join(display(u) for u in repeated[:3])
        more = f" and {len(repeated) - 3} more" if len(repeated) > 3 else ""
        raise CliError(f"{where} already holds {listed}{more}", EXIT_BAD_INPUT)


# --------------------------------------------------------------------------- summary


def _check_arguments(args: argparse.Namespace) -> None:
    if args.dask_scheduler and args.workers is not None:
        raise CliError("--workers and --dask-scheduler exclude each other", EXIT_USAGE)
    if args.append:
        _check_append_arguments(args)
    else:
        check_scene_arguments(args)


def command_build(args: argparse.Namespace) -> int:
    from virtualizarr_fill.cli.stac_inputs import check_stac_arguments, command_build_stac

    check_stac_arguments(args)
    if args.stac is not None:
        return command_build_stac(args)
    _check_arguments(args)
    if args.overviews:
        from virtualizarr_fill.cli.build_multiscales import command_build_multiscales

        return command_build_multiscales(args)
    started = time.perf_counter()
    isolated = args.workers != 0 if args.workers is not None else not _tiff_only(args.inputs)
    if isolated and not args.dask_scheduler:
        # The fork server imports the parsing stack while this process imports what
        # choosing, combining and writing take: on two cores, at the same time.
        start_workers_early()
    destination = Destination.parse(args.out)
    repo = stored = None
    known: list[str] = []
    if args.append:
        repo, record, stored = _append_source(destination)
        known = recorded_inputs(repo)
        plan = Plan(
            record.mode,
            record.dim,
            record.allow_gaps,
            record.on_fill_conflict,
            scenes="time_from" in record.tiff_options,
            overlap=record.overlap,
        )
        tiff_options, hdf5_options = record.tiff_options, record.hdf5_options
    elif destination.exists() and not (args.overwrite and destination.local is not None):
        raise CliError(
            f"--out {args.out}: already exists (use --overwrite to replace a local one, "
            "or --append to add files to a repository)",
            EXIT_USAGE,
        )
    if args.overwrite:  # (--append refuses --overwrite above)
        check_replaceable(destination)
    urls = expand_inputs(args.inputs)
    if args.append:
        _refuse_known(urls, known, destination.text)
    else:
        plan = Plan.from_args(args, len(urls))
        tiff_options, hdf5_options = parser_options(args, **scene_parser_options(args))
    parser = parser_from_options(tiff_options, hdf5_options)

    combination = Combination(plan, urls)
    parsed = _parse_into(combination, urls, parser, args)
    parse_done = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        combined = combination.result()
    notes = [str(w.message) for w in caught]
    plan = combination.plan
    if not args.append:
        # ``combined`` holds what the files' parts gave it: freed before writing, their
        # memory serves the writer, and the peak holds one of the two
        del combination
        give_back_freed_memory()
    combine_done = time.perf_counter()

    all_inputs = [*known, *parsed.used]
    record = BuildRecord(
        mode=plan.mode,
        dim=plan.dim,
        allow_gaps=plan.allow_gaps,
        on_fill_conflict=plan.on_fill_conflict,
        overlap=plan.overlap,
        tiff_options=tiff_options,
        hdf5_options=hdf5_options,
        version=package_version(),
    ).with_inputs(all_inputs)
    along = "as a mosaic" if plan.mode == "mosaic" else f"along {plan.dim!r}" if plan.dim else ""
    message = f"{PROG} build: {len(parsed.used)} files {along}".rstrip()
    snapshot: str | None
    facts = dataset_facts(combined)
    appended: xr.Dataset | None = None
    if args.append:
        assert stored is not None and plan.dim is not None
        check_append(stored, combined, plan, destination.text, combination.parts())
        message = f"{PROG} build --append: {len(parsed.used)} files {along}"
        snapshot = append_icechunk(combined, parsed.used, repo, plan.dim, message, record)
        written = f"Icechunk repository {destination.text} (snapshot {snapshot}, appended)"
        appended = combined
    else:
        # The writer takes the only reference, and frees the dataset before it commits.
        handoff = Handoff(combined)
        del combined
        written, snapshot = write_new_store(
            handoff, parsed.used, destination, args, message, record
        )
    finished = time.perf_counter()
    timings = {
        "parse": parse_done - started,
        "combine": combine_done - parse_done,
        "write": finished - combine_done,
        "total": finished - started,
    }
    print_build_summary(written, snapshot, parsed, facts, destination, timings, notes, appended)
    return EXIT_OK
