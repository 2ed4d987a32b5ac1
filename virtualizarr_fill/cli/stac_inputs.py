"""``build --stac ITEMS --asset KEY``: the asset of STAC items, a mosaic per time step
stacked along ``time`` (:mod:`virtualizarr_fill.stac`), written with ``build``'s own
plumbing (staging, Icechunk or kerchunk, the build record).

Besides the build record, the store keeps how its items were read in the root attribute
``virtualizarr_fill_stac`` (a JSON text: the asset key, the grouping and the time unit),
so that ``build --append --stac NEWITEMS`` adds later dates the same way.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, PROG, CliError

if TYPE_CHECKING:
    import xarray as xr

    from virtualizarr_fill.stac.open import StacStack

__all__ = ["STAC_KEY", "check_stac_arguments", "command_build_stac"]

#: The root attribute recording how the store's STAC items were read.
STAC_KEY = "virtualizarr_fill_stac"


def check_stac_arguments(args: argparse.Namespace) -> None:
    """Refuse what ``--stac`` excludes, and file inputs without it."""
    stac = getattr(args, "stac", None)
    if stac is None:
        if not args.inputs:
            raise CliError("build needs files (FILES_OR_GLOB_OR_URL) or --stac ITEMS", EXIT_USAGE)
        if args.asset or args.group_by:
            raise CliError("--asset and --group-by go with --stac ITEMS", EXIT_USAGE)
        return
    given = [
        flag
        for flag, value in (
            ("files", args.inputs),
            ("--concat-dim", args.concat_dim),
            ("--new-dim", args.new_dim),
            ("--mosaic", args.mosaic),
            ("--time-from", args.time_from),
            ("--overviews", args.overviews),
            ("--dask-scheduler", args.dask_scheduler),
            ("--workers", args.workers is not None),
        )
        if value
    ]
    if given:
        raise CliError(
            f"--stac makes a mosaic per time step stacked along 'time'; drop {', '.join(given)}",
            EXIT_USAGE,
        )
    if args.append:
        recorded = [
            flag
            for flag, value in (
                ("--asset", args.asset),
                ("--group-by", args.group_by),
                ("--allow-gaps", args.allow_gaps),
                ("--tiff-option", args.tiff_option),
                ("--hdf5-option", args.hdf5_option),
                ("--overwrite", args.overwrite),
            )
            if value
        ]
        if recorded:
            raise CliError(
                "--append reads and combines the new items as the repository records "
                f"(asset, grouping, parser options); drop {', '.join(recorded)}",
                EXIT_USAGE,
            )
    elif not args.asset:
        raise CliError("--stac needs --asset KEY, the asset to virtualize", EXIT_USAGE)


def _found(args: argparse.Namespace, asset: str, groupby: str) -> StacStack:
    from virtualizarr_fill.stac import StacItemError, stac_stack

    try:
        return stac_stack(args.stac, asset, groupby=groupby, skip_bad=args.skip_bad)  # type: ignore[arg-type]
    except StacItemError as error:
        raise CliError(f"--stac {args.stac}: {error}", EXIT_BAD_INPUT) from None


def _opened(
    found: StacStack,
    args: argparse.Namespace,
    parser: Any,
    time_units: str | None,
    allow_gaps: bool,
    on_fill_conflict: Any,
) -> tuple[xr.Dataset, list[str]]:
    from virtualizarr_fill.cli.progress import Progress
    from virtualizarr_fill.io.registries import registry_for
    from virtualizarr_fill.stac import StacItemError, open_stac_stack

    progress = Progress("parse", len(found.groups), "time steps")
    with warnings.catch_warnings(record=True) as caught, progress:
        warnings.simplefilter("always")
        try:
            dataset = open_stac_stack(
                found,
                registry_for(found.hrefs),
                parser=parser,
                allow_gaps=allow_gaps,
                on_fill_conflict=on_fill_conflict,
                skip_bad=args.skip_bad,
                time_units=time_units,
                on_step=progress.advance,
            )
        except StacItemError as error:
            raise CliError(f"--stac {args.stac}: {error}", EXIT_BAD_INPUT) from None
    return dataset, list(dict.fromkeys(str(w.message) for w in caught))


def _recorded_stac(stored: xr.Dataset, where: str) -> dict[str, Any]:
    text = stored.attrs.get(STAC_KEY)
    if text is None:
        raise CliError(
            f"--out {where}: not built from STAC items (it has no {STAC_KEY} attribute); "
            "append files to it without --stac",
            EXIT_USAGE,
        )
    try:
        recorded = dict(json.loads(text))
        return {k: str(recorded[k]) for k in ("asset", "groupby", "time_units")}
    except (TypeError, ValueError, KeyError) as error:
        raise CliError(
            f"--out {where}: its {STAC_KEY} attribute is unreadable ({error})", EXIT_BAD_INPUT
        ) from None


def _stored_with_decoded_time(dataset: xr.Dataset) -> xr.Dataset:
    """``dataset`` with its time coordinate decoded, as the stored one is opened."""
    import xarray as xr

    from virtualizarr_fill.tiff.scene_time import TIME

    decoded = xr.decode_cf(xr.Dataset(coords={TIME: dataset[TIME].variable}))
    return dataset.assign_coords({TIME: decoded[TIME]})


def command_build_stac(args: argparse.Namespace) -> int:
    """``build --stac``: see the module docstring."""
    from virtualizarr_fill.cli._combine import Plan, check_append
    from virtualizarr_fill.cli._destinations import Destination
    from virtualizarr_fill.cli._memory import Handoff
    from virtualizarr_fill.cli._parse import parser_from_options, parser_options
    from virtualizarr_fill.cli._record import BuildRecord, package_version, recorded_inputs
    from virtualizarr_fill.cli._summary import dataset_facts, print_build_summary
    from virtualizarr_fill.cli._write import append_icechunk, write_new_store
    from virtualizarr_fill.cli.build import (
        _append_source,
        _Parsed,
        _refuse_known,
    )
    from virtualizarr_fill.tiff.scene_time import TIME

    started = time.perf_counter()
    destination = Destination.parse(args.out)
    known: list[str] = []
    if args.append:
        repo, record, stored = _append_source(destination)
        recorded = _recorded_stac(stored, destination.text)
        known = recorded_inputs(repo)
        tiff_options, hdf5_options = record.tiff_options, record.hdf5_options
        allow_gaps, on_fill_conflict = record.allow_gaps, record.on_fill_conflict
    else:
        if destination.exists() and not (args.overwrite and destination.local is not None):
            raise CliError(
                f"--out {args.out}: already exists (use --overwrite to replace a local one, "
                "or --append to add items to a repository)",
                EXIT_USAGE,
            )
        recorded = {"asset": args.asset, "groupby": args.group_by or "time", "time_units": ""}
        tiff_options, hdf5_options = parser_options(args)
        allow_gaps, on_fill_conflict = args.allow_gaps, args.on_fill_conflict
    found = _found(args, recorded["asset"], recorded["groupby"])
    if args.append:
        _refuse_known(found.hrefs, known, destination.text)
    parser = parser_from_options(tiff_options, hdf5_options)
    combined, notes = _opened(
        found, args, parser, recorded["time_units"] or None, allow_gaps, on_fill_conflict
    )
    parse_done = time.perf_counter()
    recorded["time_units"] = str(combined[TIME].attrs["units"]).split()[0]
    urls = found.hrefs
    parsed = _Parsed(used=urls, skipped=list(found.skipped))
    plan = Plan("series", TIME, allow_gaps, on_fill_conflict, scenes=True)
    all_inputs = [*known, *urls]
    record = BuildRecord(
        mode=plan.mode,
        dim=plan.dim,
        allow_gaps=plan.allow_gaps,
        on_fill_conflict=plan.on_fill_conflict,
        tiff_options=tiff_options,
        hdf5_options=hdf5_options,
        version=package_version(),
    ).with_inputs(all_inputs)
    steps = combined.sizes[TIME]
    message = f"{PROG} build --stac: {len(urls)} files in {steps} time steps"
    snapshot: str | None
    appended: xr.Dataset | None = None
    if args.append:
        facts = dataset_facts(combined)
        check_append(stored, _stored_with_decoded_time(combined), plan, destination.text)
        message = f"{PROG} build --append --stac: {len(urls)} files in {steps} time steps"
        snapshot = append_icechunk(combined, urls, repo, TIME, message, record)
        written = f"Icechunk repository {destination.text} (snapshot {snapshot}, appended)"
        appended = combined
    else:
        combined = combined.assign_attrs({STAC_KEY: json.dumps(recorded, sort_keys=True)})
        facts = dataset_facts(combined)
        # The writer takes the only reference, and frees the dataset before it commits.
        handoff = Handoff(combined)
        del combined
        written, snapshot = write_new_store(handoff, urls, destination, args, message, record)
    finished = time.perf_counter()
    timings = {
        "parse": parse_done - started,
        "write": finished - parse_done,
        "total": finished - started,
    }
    print_build_summary(written, snapshot, parsed, facts, destination, timings, notes, appended)
    return EXIT_OK
