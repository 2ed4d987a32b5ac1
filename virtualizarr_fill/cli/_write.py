"""Writing what ``build`` combined: a new Icechunk repository (one commit), an append to
an existing one (one commit), or kerchunk references; local destinations are written
beside their final path and moved into place only when complete."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._destinations import (
    Destination,
    create_icechunk_repository,
    import_optional,
)
from virtualizarr_fill.cli._errors import EXIT_USAGE, CliError
from virtualizarr_fill.cli._memory import Handoff, give_back_freed_memory
from virtualizarr_fill.cli._record import INPUTS_KEY, RECORD_KEY, BuildRecord
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.errors import UnsupportedFeatureError

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "append_icechunk",
    "has_rectilinear",
    "staged",
    "virtual_names",
    "write_icechunk",
    "write_kerchunk",
    "write_new_store",
]


def virtual_names(dataset: xr.Dataset) -> list[str]:
    """The names of the dataset's virtual variables."""
    from virtualizarr.manifests import ManifestArray

    return [str(n) for n, v in dataset.variables.items() if isinstance(v.data, ManifestArray)]


def has_rectilinear(dataset: xr.Dataset) -> bool:
    """Whether a virtual variable of the dataset is on a rectilinear chunk grid."""
    from zarr.core.metadata.v3 import RegularChunkGridMetadata

    return any(
        not isinstance(dataset.variables[n].data.metadata.chunk_grid, RegularChunkGridMetadata)
        for n in virtual_names(dataset)
    )


def _write_steps(dataset: xr.Dataset) -> list[xr.Dataset]:
    """The dataset split for writing one piece at a time (for a meaningful progress bar).

    The first piece holds every coordinate (so the group records which variables are
    coordinates) and the first data variable; each later piece one data variable alone.
    """
    import xarray as xr

    names = [str(n) for n in dataset.data_vars]
    if not names:
        return [dataset]
    steps = [dataset.drop_vars(names[1:])]
    steps.extend(xr.Dataset({n: dataset.variables[n]}, attrs=dataset.attrs) for n in names[1:])
    return steps


def _commit(session: Any, message: str, urls: Sequence[str]) -> str:
    return str(session.commit(message, metadata={INPUTS_KEY: list(urls)}))


def write_icechunk(
    handoff: Handoff[xr.Dataset],
    urls: Sequence[str],
    destination: Destination,
    message: str,
    record: BuildRecord,
) -> str:
    """Write the dataset handed off into a new Icechunk repository, recording how it
    was built; the only commit happens at the very end, once the dataset is freed.
    Returns the snapshot id."""
    from virtualizarr_fill.writers import to_icechunk
    from virtualizarr_fill.writers.attributes import without_non_finite_attributes

    repo = create_icechunk_repository(destination, urls)
    session = repo.writable_session("main")
    dataset = handoff.take().assign_attrs({RECORD_KEY: record.to_attribute()})
    # Once for the whole dataset (to_icechunk would warn again for every step).
    steps: list[xr.Dataset | None] = list(_write_steps(without_non_finite_attributes(dataset)))
    del dataset
    with Progress("write", len(steps) + 1, "steps") as progress:
        for index in range(len(steps)):
            piece, steps[index] = steps[index], None
            assert piece is not None
            to_icechunk(piece, session.store, mode="w-" if index == 0 else "a")
            del piece
            progress.advance()
        # Icechunk holds the references now: the dataset's memory (its manifests,
        # coordinates, chunk grids) goes back before the commit builds the manifests.
        give_back_freed_memory()
        snapshot = _commit(session, message, urls)
        progress.advance()
    return snapshot


def append_icechunk(
    dataset: xr.Dataset,
    urls: Sequence[str],
    repo: Any,
    dim: str,
    message: str,
    record: BuildRecord,
) -> str:
    """Append along ``dim`` and update the build record, as one commit; nothing is
    committed when any part is refused. Returns the snapshot id."""
    import zarr

    from virtualizarr_fill.writers import to_icechunk
    from virtualizarr_fill.writers.repository import covering

    # New files outside the repository's virtual chunk containers (tomorrow's
    # directory) get containers of their own, saved once the commit holds them.
    widened = covering(repo, urls)
    if widened is not None:
        repo = widened
    session = repo.writable_session("main")
    with Progress("write", 2, "steps") as progress:
        to_icechunk(dataset, session.store, append_dim=dim)
        zarr.open_group(session.store, mode="r+").attrs[RECORD_KEY] = record.to_attribute()
        progress.advance()
        snapshot = _commit(session, message, urls)
        if widened is not None:
            repo.save_config()
        progress.advance()
    return snapshot


def _kerchunk_formats(choice: str, dataset: xr.Dataset) -> list[int]:
    """Zarr formats to try, in order, for kerchunk references."""
    if choice != "auto":
        return [int(choice)]
    # Zarr format 2 references are what most kerchunk readers expect, but only format 3
    # has rectilinear grids and this package's codecs (truncate, crop, TIFF predictors),
    # and keeps a header fill apart from the CF _FillValue where chunks are unwritten;
    # to_kerchunk refuses format 2 for those, and the next format is tried.
    return [3] if has_rectilinear(dataset) else [2, 3]


def write_kerchunk(
    dataset: xr.Dataset, target: Path, kind: str, choice: str, record: BuildRecord
) -> int:
    """Write kerchunk references to ``target``, recording how they were built; returns
    the Zarr format used."""
    from virtualizarr_fill.writers import to_kerchunk
    from virtualizarr_fill.writers.kerchunk import ZarrFormat2Error

    dataset = dataset.assign_attrs({RECORD_KEY: record.to_attribute()})
    formats = _kerchunk_formats(choice, dataset)
    with Progress("write", 1, "steps") as progress:
        for attempt, zarr_format in enumerate(formats):
            try:
                to_kerchunk(dataset, str(target), kind, zarr_format=zarr_format)  # type: ignore[arg-type]
            except (UnsupportedFeatureError, ValueError) as error:
                if isinstance(error, ZarrFormat2Error) and choice == "2":
                    # The library's advice names its Python arguments; say it in options.
                    raise UnsupportedFeatureError(
                        f"{error.problem}; write Zarr format 3 references instead "
                        "(--kerchunk-format 3, or leave it at auto) or an Icechunk "
                        "repository (--out NAME.icechunk)"
                    ) from error
                # ValueError: numcodecs has no format 2 codec for one of the codecs.
                if attempt == len(formats) - 1:
                    raise
                # What format 2 cannot describe: fall back to format 3 (written afresh).
                _remove(target)
                continue
            progress.advance()
            return zarr_format
    raise AssertionError("unreachable")


def _remove(target: Path) -> None:
    if target.is_dir():
        shutil.rmtree(target)
    target.unlink(missing_ok=True)


@contextlib.contextmanager
def staged(destination: Destination, overwrite: bool) -> Iterator[Path | None]:
    """A temporary sibling path to write a local destination into, moved into place only
    when everything succeeded (so a failed build never leaves something looking complete,
    and a store being replaced stays untouched until then).

    With ``overwrite``, what is at the destination is replaced only when it is a store
    this tool wrote (:func:`._ownership.check_replaceable`, checked again right before
    the swap). A file is replaced by one atomic rename; a directory is renamed aside and
    the new one renamed into place (both renames within one directory, so neither copies
    anything), the old one put back if the second rename fails, and deleted only once
    the new one is in place.
    """
    from virtualizarr_fill.cli._ownership import check_replaceable

    if destination.local is None:
        yield None
        return
    final = destination.local
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    target = staging / final.name
    try:
        yield target
        if final.is_dir() and not any(final.iterdir()):  # an empty directory given
            final.rmdir()
        elif final.exists():
            if not overwrite:
                raise CliError(f"--out {destination.text}: already exists", EXIT_USAGE)
            check_replaceable(destination)
            if final.is_dir():
                _swap_directory(target, final, staging / "replaced")
                return
        os.replace(target, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_directory(new: Path, final: Path, aside: Path) -> None:
    """Put the directory ``new`` at ``final``, the old one moved to ``aside`` first and
    restored should the move of ``new`` fail."""
    os.replace(final, aside)
    try:
        os.replace(new, final)
    except BaseException:
        os.replace(aside, final)
        raise


def write_new_store(
    combined: Handoff[xr.Dataset],
    inputs: Sequence[str],
    destination: Destination,
    args: argparse.Namespace,
    message: str,
    record: BuildRecord,
) -> tuple[str, str | None]:
    """Write the combined dataset handed off as a new store (replacing only one of ours,
    once the new one is complete): what was written, and the Icechunk snapshot (None for
    kerchunk references)."""
    snapshot = None
    with staged(destination, args.overwrite) as target:
        if destination.kind == "icechunk":
            staged_to = Destination(destination.text, "icechunk", target)
            snapshot = write_icechunk(combined, inputs, staged_to, message, record)
            written = f"Icechunk repository {destination.text} (snapshot {snapshot})"
        else:
            assert target is not None
            import_optional("kerchunk", "kerchunk")
            zarr_format = write_kerchunk(
                combined.take(), target, destination.kind, args.kerchunk_format, record
            )
            written = (
                f"kerchunk {destination.kind} references {destination.text} "
                f"(Zarr format {zarr_format})"
            )
    return written, snapshot
