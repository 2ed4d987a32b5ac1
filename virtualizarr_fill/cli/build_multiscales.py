"""``build --overviews``: COGs (one, or a mosaic) as one multiscale group.

Each file is parsed with ``TIFFParser(overviews="multiscales")`` (levels ``"0"``..``"n"``,
see :mod:`virtualizarr_fill.tiff.pyramid`); the files' levels are combined level by
level along ``--concat-dim`` as ``build`` combines images, keeping the levels every file
has with the same decimation factors (:func:`virtualizarr_fill.multiscales.stores.
combine_multiscales`), and the tree is written to an Icechunk repository or kerchunk
references.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._combine import combining
from virtualizarr_fill.cli._destinations import (
    Destination,
    create_icechunk_repository,
    import_optional,
)
from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, PROG, CliError
from virtualizarr_fill.cli._inputs import expand_inputs
from virtualizarr_fill.cli._ownership import check_replaceable
from virtualizarr_fill.cli._parse import (
    describe_failure,
    parser_from_options,
    parser_options,
    recording,
)
from virtualizarr_fill.cli._record import INPUTS_KEY, RECORD_KEY, BuildRecord, package_version
from virtualizarr_fill.cli._write import staged
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.io.registries import registry_for
from virtualizarr_fill.writers import to_icechunk

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["combine", "command_build_multiscales", "parse_tree"]


def combine(
    datasets: Sequence[xr.Dataset],
    urls: Sequence[str],
    dim: str | None,
    new_dim: bool,
    on_fill_conflict: str = "error",
) -> xr.Dataset:
    """One level's datasets concatenated along ``dim`` (an existing or a new dimension)
    in the order given (:func:`virtualizarr_fill.multiscales.stores.combine_level`)."""
    from virtualizarr_fill.assemble import fill_rule
    from virtualizarr_fill.multiscales.stores import combine_level

    if len(datasets) == 1 and not new_dim:
        return datasets[0]
    if dim is None:
        raise CliError("several files need --concat-dim DIM", EXIT_USAGE)
    # Refusals reach combine_multiscales, which leaves out a level's masks where they
    # alone cannot be combined; the command maps what is left to one line.
    with fill_rule(on_fill_conflict):  # type: ignore[arg-type]
        return combine_level(datasets, urls, dim, new_dim=new_dim)


def parse_tree(url: str, parser: Any) -> tuple[xr.DataTree | None, str | None, int]:
    """The multiscale tree of one file, or the error's message and exit code."""
    with recording():
        try:
            from virtualizarr import open_virtual_datatree

            tree = open_virtual_datatree(url, registry=registry_for([url]), parser=parser)
        except Exception as error:
            message, code = describe_failure(url, error)
            return None, message, code
    return tree, None, EXIT_OK


def _parse_all(
    urls: Sequence[str], parser: Any, skip_bad: bool
) -> tuple[list[str], list[xr.DataTree], list[str]]:
    used: list[str] = []
    trees: list[xr.DataTree] = []
    skipped: list[str] = []
    with Progress("parse", len(urls), "files") as progress:
        for url in urls:
            tree, error, code = parse_tree(url, parser)
            progress.advance()
            if tree is None:
                if not skip_bad:
                    raise CliError(f"{error} (use --skip-bad to leave it out)", code)
                skipped.append(str(error))
                continue
            used.append(url)
            trees.append(tree)
    return used, trees, skipped


def _write(
    tree: xr.DataTree,
    urls: Sequence[str],
    destination: Destination,
    message: str,
    overwrite: bool,
    record: BuildRecord,
) -> str:
    from virtualizarr_fill.writers.kerchunk_multiscales import multiscales_to_kerchunk

    tree = tree.copy()
    tree.attrs[RECORD_KEY] = record.to_attribute()
    with staged(destination, overwrite) as target:
        if destination.kind == "icechunk":
            staged_to = Destination(destination.text, "icechunk", target)
            repo = create_icechunk_repository(staged_to, urls)
            session = repo.writable_session("main")
            to_icechunk(tree, session.store)
            snapshot = session.commit(message, metadata={INPUTS_KEY: list(urls)})
            return f"Icechunk repository {destination.text} (snapshot {snapshot})"
        assert target is not None
        import_optional("kerchunk", "kerchunk")
        multiscales_to_kerchunk(tree, target, format=destination.kind)  # type: ignore[arg-type]
        return f"kerchunk {destination.kind} references {destination.text} (Zarr format 3)"


def _mosaic_levels(args: argparse.Namespace) -> bool:
    """Whether the files' levels are placed as a mosaic (``--mosaic``, or ``--overlap``
    or ``--allow-gaps`` without ``--concat-dim``) rather than concatenated."""
    flags = [
        flag
        for flag, value in (
            ("--mosaic", args.mosaic),
            ("--overlap", args.overlap),
            ("--allow-gaps", args.allow_gaps),
        )
        if value
    ]
    if flags and args.concat_dim:
        raise CliError(
            f"--overviews with --concat-dim concatenates the files' levels along it, "
            f"without the mosaic placement rules: drop {', '.join(flags)}, or drop "
            "--concat-dim to place every level as a mosaic",
            EXIT_USAGE,
        )
    return bool(flags)


def _mosaic_tree(
    trees: Sequence[xr.DataTree], urls: Sequence[str], parser: Any, args: argparse.Namespace
) -> xr.DataTree:
    """The files' levels, each placed as a mosaic
    (:mod:`virtualizarr_fill.assemble.multiscale_mosaic`)."""
    from virtualizarr_fill.assemble import fill_rule
    from virtualizarr_fill.assemble.multiscale_mosaic import level_parts, mosaic_multiscales
    from virtualizarr_fill.multiscales.stores import common_levels

    names = common_levels(trees, urls)
    registry = registry_for(list(urls))
    parts = [level_parts(parser(url=url, registry=registry), names) for url in urls]
    resampling = trees[0].attrs["multiscales"].get("resampling_method")
    with fill_rule(args.on_fill_conflict):
        return mosaic_multiscales(
            parts,
            names,
            resampling=resampling if isinstance(resampling, str) else None,
            allow_gaps=bool(args.allow_gaps),
            overlap=args.overlap,
            registry=registry,
        )


def command_build_multiscales(args: argparse.Namespace) -> int:
    """``build --overviews`` (see the module docstring)."""
    from virtualizarr_fill.multiscales.conventions import levels_of
    from virtualizarr_fill.multiscales.stores import combine_multiscales

    started = time.perf_counter()
    if args.dask_scheduler or (args.workers or 1) > 1:
        raise CliError(
            "--overviews parses in this process; drop --workers and --dask-scheduler", EXIT_USAGE
        )
    mosaic = _mosaic_levels(args)
    destination = Destination.parse(args.out)
    if destination.exists() and not (args.overwrite and destination.local is not None):
        raise CliError(
            f"--out {args.out}: already exists (use --overwrite to replace a local one)",
            EXIT_USAGE,
        )
    if args.overwrite:
        check_replaceable(destination)
    urls = expand_inputs(args.inputs)
    tiff_options, hdf5_options = parser_options(args, overviews="multiscales")
    parser = parser_from_options(tiff_options, hdf5_options)
    used, trees, skipped = _parse_all(urls, parser, args.skip_bad)
    if not trees:
        raise CliError(f"none of the {len(urls)} files could be virtualized", EXIT_BAD_INPUT)

    def combine_level(datasets: Sequence[Any], level_urls: Sequence[str], dim: str) -> Any:
        return combine(datasets, level_urls, dim, args.new_dim, args.on_fill_conflict)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if mosaic:
            with combining("as a mosaic"):
                tree = _mosaic_tree(trees, used, parser, args)
        else:
            with combining(f"along {args.concat_dim!r}"):
                tree = combine_multiscales(trees, used, args.concat_dim, combine=combine_level)
    along = " as a mosaic" if mosaic else f" along {args.concat_dim!r}" if args.concat_dim else ""
    message = f"{PROG} build --overviews: {len(used)} files{along}"
    record = BuildRecord(
        mode="multiscales",
        dim=args.concat_dim,
        allow_gaps=bool(args.allow_gaps),
        overlap=args.overlap,
        on_fill_conflict=args.on_fill_conflict,
        tiff_options=tiff_options,
        hdf5_options=hdf5_options,
        version=package_version(),
    ).with_inputs(used)
    written = _write(tree, used, destination, message, args.overwrite, record)
    lines = [f"wrote {written}", f"  files:     {len(used)} virtualized, {len(skipped)} skipped"]
    for name in levels_of(tree.attrs):  # type: ignore[arg-type]
        level = tree[name]
        shape = "x".join(str(n) for n in level["band_data"].shape)
        extra = ", mask" if "mask" in level.data_vars else ""
        lines.append(f"  level {name}:   band_data {shape}{extra}")
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if notes:
        lines.append(f"  warnings:  {len(notes)}")
        lines.extend(f"    {note}" for note in notes)
    lines.extend(f"  skipped: {entry}" for entry in skipped)
    lines.append(f"  time:      {time.perf_counter() - started:.1f} s")
    print("\n".join(lines), flush=True)
    return EXIT_OK
