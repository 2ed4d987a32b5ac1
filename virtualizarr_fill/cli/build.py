"""``virtualizarr-fill build``: parse files (in parallel when there are many), combine them
along one dimension and write one Icechunk repository or kerchunk references."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._destinations import (
    Destination,
    create_icechunk_repository,
    import_optional,
)
from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, PROG, CliError
from virtualizarr_fill.cli._inputs import display, expand_inputs
from virtualizarr_fill.cli._parse import ParsedFile, make_parser, parse_files
from virtualizarr_fill.cli._settings import POOL_THRESHOLD
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.cli.scenes import (
    check_scene_arguments,
    in_time_order,
    scene_parser_options,
)
from virtualizarr_fill.errors import UnsupportedFeatureError, VirtualizarrFillError
from virtualizarr_fill.report import ParseReport
from virtualizarr_fill.writers import to_icechunk, to_kerchunk

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["POOL_THRESHOLD", "combine", "command_build"]



def combine(
    datasets: Sequence[xr.Dataset],
    urls: Sequence[str],
    dim: str,
    new_dim: bool,
    on_fill_conflict: str = "error",
) -> xr.Dataset:
    """Concatenate the virtual datasets along ``dim`` (an existing or a new dimension).

    ``on_fill_conflict`` is the rule for files whose fill values differ (see
    :func:`virtualizarr_fill.concat.fill_conflicts`).
    """
    import xarray as xr

    from virtualizarr_fill.concat import fill_conflicts

    for dataset, url in zip(datasets, urls, strict=True):
        has = dim in dataset.dims
        if new_dim and has:
            raise CliError(
                f"{display(url)}: {dim!r} is already a dimension; drop --new-dim to "
                "concatenate along it",
                EXIT_USAGE,
            )
        if not new_dim and not has:
            available = ", ".join(str(d) for d in dataset.dims) or "none"
            raise CliError(
                f"{display(url)}: no dimension {dim!r} (dimensions: {available}); use "
                "--new-dim to stack the files along a new dimension",
                EXIT_USAGE,
            )
    if len(datasets) == 1 and not new_dim:
        return datasets[0]
    try:
        with fill_conflicts(on_fill_conflict):  # type: ignore[arg-type]
            return xr.combine_nested(
                list(datasets),
                concat_dim=dim,
                data_vars="all" if new_dim else "minimal",
                coords="minimal",
                compat="override",
                join="exact",
                combine_attrs="drop_conflicts",
            )
    except VirtualizarrFillError as error:
        if "on_conflict" not in str(error):
            raise
        raise CliError(
            f"{error} On the command line: --on-fill-conflict use_first or drop.",
            EXIT_BAD_INPUT,
        ) from None
    except ValueError as error:
        raise CliError(
            f"the files cannot be combined along {dim!r}: {error}", EXIT_BAD_INPUT
        ) from None
    except NotImplementedError as error:
        # xarray asks virtual arrays for what only loaded data can do (e.g. casting
        # when the files' data types differ).
        raise CliError(
            f"the files cannot be combined along {dim!r}: they differ in a way virtual "
            f"references cannot reconcile, such as data types ({error})",
            EXIT_BAD_INPUT,
        ) from None


def _is_virtual(variable: Any) -> bool:
    from virtualizarr.manifests import ManifestArray

    return isinstance(variable.data, ManifestArray)


def _virtual_names(dataset: xr.Dataset) -> list[str]:
    return [str(n) for n, v in dataset.variables.items() if _is_virtual(v)]


def _has_rectilinear(dataset: xr.Dataset) -> bool:
    from zarr.core.metadata.v3 import RegularChunkGridMetadata

    return any(
        not isinstance(dataset.variables[n].data.metadata.chunk_grid, RegularChunkGridMetadata)
        for n in _virtual_names(dataset)
    )


def _write_steps(dataset: xr.Dataset) -> list[tuple[str, xr.Dataset]]:
    """The dataset split for writing one piece at a time (for a meaningful progress bar).

    The first piece holds every coordinate (so the group records which variables are
    coordinates) and the first data variable; each later piece one data variable alone.
    """
    import xarray as xr

    names = [str(n) for n in dataset.data_vars]
    if not names:
        return [("coordinates", dataset)]
    steps = [(names[0], dataset.drop_vars(names[1:]))]
    for name in names[1:]:
        steps.append((name, xr.Dataset({name: dataset.variables[name]}, attrs=dataset.attrs)))
    return steps


def _write_icechunk(
    dataset: xr.Dataset, urls: Sequence[str], destination: Destination, message: str
) -> str:
    """Write into a new Icechunk repository; the only commit happens at the very end."""
    repo = create_icechunk_repository(destination, urls)
    session = repo.writable_session("main")
    steps = _write_steps(dataset)
    with Progress("write", len(steps) + 1, "steps") as progress:
        for index, (_, piece) in enumerate(steps):
            to_icechunk(piece, session.store, mode="w-" if index == 0 else "a")
            progress.advance()
        snapshot = str(session.commit(message))
        progress.advance()
    return snapshot


def _kerchunk_formats(choice: str, dataset: xr.Dataset) -> list[int]:
    """Zarr formats to try, in order, for kerchunk references."""
    if choice != "auto":
        return [int(choice)]
    # Zarr format 2 references are what most kerchunk readers expect, but only format 3
    # has rectilinear grids and this package's codecs (truncate, crop, TIFF predictors).
    return [3] if _has_rectilinear(dataset) else [2, 3]


def _write_kerchunk(dataset: xr.Dataset, target: Path, kind: str, choice: str) -> int:
    """Write kerchunk references to ``target``; returns the Zarr format used."""
    formats = _kerchunk_formats(choice, dataset)
    with Progress("write", 1, "steps") as progress:
        for attempt, zarr_format in enumerate(formats):
            try:
                to_kerchunk(dataset, str(target), kind, zarr_format=zarr_format)  # type: ignore[arg-type]
            except (UnsupportedFeatureError, ValueError):
                # ValueError: numcodecs has no format 2 codec for one of the codecs.
                if attempt == len(formats) - 1:
                    raise
                # What format 2 cannot describe: fall back to format 3 (written afresh).
                if target.is_dir():
                    shutil.rmtree(target)
                target.unlink(missing_ok=True)
                continue
            progress.advance()
            return zarr_format
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _staged(destination: Destination, overwrite: bool) -> Iterator[Path | None]:
    """A temporary sibling path to write a local destination into, moved into place only
    when everything succeeded (so a failed build never leaves something looking complete).
    """
    if destination.local is None:
        yield None
        return
    final = destination.local
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    target = staging / final.name
    try:
        yield target
        if final.exists() and overwrite:
            if final.is_dir():
                shutil.rmtree(final)
            else:
                final.unlink()
        elif final.is_dir():  # an empty directory given as the destination
            final.rmdir()
        os.replace(target, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _chunk_count(dataset: xr.Dataset) -> int:
    return sum(
        sum(1 for _ in dataset.variables[n].data.manifest.iter_nonempty_paths())
        for n in _virtual_names(dataset)
    )


def _array_summary(dataset: xr.Dataset, name: str) -> str:
    variable = dataset.variables[name]
    shape = "x".join(str(n) for n in variable.shape) or "scalar"
    if not _is_virtual(variable):
        return f"{name} {shape} {variable.dtype} (loaded)"
    from virtualizarr_fill.grid import edge_handling_of

    metadata = variable.data.metadata
    kind = "rectilinear" if _has_rectilinear(dataset[[name]]) else "regular"
    handling = edge_handling_of(metadata.codecs).name.lower()
    extra = f", {handling}" if handling != "none" else ""
    return f"{name} {shape} {variable.dtype} ({kind} grid{extra})"


def _print_summary(
    written: str,
    parsed: Sequence[ParsedFile],
    skipped: Sequence[ParsedFile],
    dataset: xr.Dataset,
    timings: dict[str, float],
    combine_warnings: Sequence[str],
) -> None:
    report = ParseReport()
    for result in parsed:
        report.extend(result.report)
    lines = [f"wrote {written}"]
    lines.append(f"  files:     {len(parsed)} virtualized, {len(skipped)} skipped")
    names = [str(n) for n in dataset.variables]
    lines.append(f"  arrays:    {len(names)}")
    lines.extend(f"    {_array_summary(dataset, n)}" for n in names)
    lines.append(f"  chunks:    {_chunk_count(dataset)} referenced")
    lines.append(f"  refusals:  {len(report.refusals)}")
    lines.extend(f"    {display(r.url)}: {r.name}: {r.reason}" for r in report.refusals)
    warned = [w for r in parsed for w in r.warnings] + list(dict.fromkeys(combine_warnings))
    if warned:
        lines.append(f"  warnings:  {len(warned)}")
        lines.extend(f"    {w}" for w in warned)
    if skipped:
        lines.append(f"  skipped files ({len(skipped)}):")
        lines.extend(f"    {r.error}" for r in skipped)
    times = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    lines.append(f"  time:      {times}")
    print("\n".join(lines), flush=True)


def _default_workers(files: int) -> int:
    return (os.cpu_count() or 1) if files >= POOL_THRESHOLD else 1


def command_build(args: argparse.Namespace) -> int:
    check_scene_arguments(args)
    if getattr(args, "overviews", False):
        from virtualizarr_fill.cli.build_multiscales import command_build_multiscales

        return command_build_multiscales(args)
    started = time.perf_counter()
    destination = Destination.parse(args.out)
    if args.dask_scheduler and args.workers is not None:
        raise CliError("--workers and --dask-scheduler exclude each other", EXIT_USAGE)
    if destination.exists() and not (args.overwrite and destination.local is not None):
        raise CliError(
            f"--out {args.out}: already exists (use --overwrite to replace a local one)",
            EXIT_USAGE,
        )
    urls = expand_inputs(args.inputs)
    parser = make_parser(args, **scene_parser_options(args))
    workers = args.workers if args.workers is not None else _default_workers(len(urls))
    with Progress("parse", len(urls), "files") as progress:
        results = parse_files(
            urls,
            parser,
            workers=workers,
            dask_scheduler=args.dask_scheduler,
            skip_bad=args.skip_bad,
            progress=progress,
            memory_limit=int(args.worker_memory * 2**30),
        )
    parsed = [r for r in results if r.dataset is not None]
    skipped = [r for r in results if r.dataset is None]
    if not parsed:
        raise CliError(f"none of the {len(urls)} files could be virtualized", EXIT_BAD_INPUT)
    if getattr(args, "time_from", None) is not None:
        parsed = in_time_order(parsed)
    parse_done = time.perf_counter()
    datasets = [r.dataset for r in parsed if r.dataset is not None]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        combined = combine(
            datasets, [r.url for r in parsed], args.concat_dim, args.new_dim, args.on_fill_conflict
        )
    combine_warnings = [str(w.message) for w in caught]
    combine_done = time.perf_counter()
    used = [r.url for r in parsed]
    message = f"{PROG} build: {len(used)} files along {args.concat_dim!r}"
    with _staged(destination, args.overwrite) as target:
        if destination.kind == "icechunk":
            staged = Destination(destination.text, "icechunk", target)
            snapshot = _write_icechunk(combined, used, staged, message)
            written = f"Icechunk repository {destination.text} (snapshot {snapshot})"
        else:
            assert target is not None
            import_optional("kerchunk", "kerchunk")
            zarr_format = _write_kerchunk(combined, target, destination.kind, args.kerchunk_format)
            written = (
                f"kerchunk {destination.kind} references {destination.text} "
                f"(Zarr format {zarr_format})"
            )
    finished = time.perf_counter()
    timings = {
        "parse": parse_done - started,
        "combine": combine_done - parse_done,
        "write": finished - combine_done,
        "total": finished - started,
    }
    _print_summary(written, parsed, skipped, combined, timings, combine_warnings)
    return EXIT_OK
