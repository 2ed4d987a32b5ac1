"""The store ``verify`` checks, opened the way its users open it: xarray's Zarr backend
with CF decoding (masks, scale and offset, times), on zarr's rectilinear chunk grids,
with the build record and, for an Icechunk repository, the files its commits added.

Each dataset is opened twice, lazily: decoded (what users read) and raw (``decode_cf=
False``, for files whose only native reader returns raw values, such as HDF5 files that
are not netCDF). A multiscale group gives one pair per level.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from virtualizarr_fill.cli._destinations import (
    _destination_kind,
    open_icechunk_repository,
)
from virtualizarr_fill.cli._errors import EXIT_IO, EXIT_USAGE, CliError
from virtualizarr_fill.cli._inputs import user_path
from virtualizarr_fill.cli._record import BuildRecord, recorded_inputs

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["StoreLevel", "VerifiedStore", "open_verified_store"]


@dataclass
class StoreLevel:
    """One dataset of the store: the root group, or one level of a multiscale group."""

    #: The level's name ("0", "1", ...); ``None`` for the root group.
    name: str | None
    decoded: xr.Dataset
    raw: xr.Dataset
    _coordinates: dict[str, Any] = field(default_factory=dict)

    def coordinate(self, dim: str) -> Any:
        """The decoded values of the 1-D coordinate along ``dim``, or ``None``."""
        if dim not in self._coordinates:
            variable = self.decoded.variables.get(dim)
            values = None
            if variable is not None and variable.dims == (dim,):
                values = variable.values
            self._coordinates[dim] = values
        return self._coordinates[dim]

    def label(self, name: str) -> str:
        """How messages name a variable of this level."""
        return name if self.name is None else f"{self.name}/{name}"


@dataclass
class VerifiedStore:
    """The store, its build record and (Icechunk) the files its commits added."""

    where: str
    kind: str
    record: BuildRecord | None
    #: Every file the repository's commits added, oldest first (Icechunk only).
    inputs: list[str] | None
    levels: list[StoreLevel]


@dataclass
class _Opened:
    zarr_store: Any
    zarr_format: int
    inputs: list[str] | None


def _kerchunk(path: str, protocol: str) -> _Opened:
    import zarr
    from zarr.storage import FsspecStore

    from virtualizarr_fill.writers.kerchunk import reference_filesystem

    # The protocol is given: fsspec would otherwise look for it by iterating over every
    # reference, which its lazy parquet mapper cannot do for Zarr format 3 references.
    fs = reference_filesystem(path, protocol)
    store = FsspecStore(fs, read_only=True, path="")
    group = zarr.open_group(store, mode="r")
    return _Opened(store, int(group.metadata.zarr_format), None)


def _icechunk(dest: str) -> _Opened:
    from virtualizarr_fill.writers.icechunk_reads import ChangedFilesNamingStore

    repo = open_icechunk_repository(dest)
    store = ChangedFilesNamingStore(repo.readonly_session("main").store, dest)
    return _Opened(store, 3, recorded_inputs(repo))


def _open_level(opened: _Opened, group: str | None) -> tuple[xr.Dataset, xr.Dataset]:
    import xarray as xr

    options: dict[str, Any] = {
        "group": group,
        "consolidated": False,
        "zarr_format": opened.zarr_format,
        "chunks": None,  # lazily indexed arrays: each comparison reads only its block
    }
    from virtualizarr_fill.reads import use_manifest_pipeline

    # The values zarr's own pipeline reads (the pipeline hands these stores to it), but
    # a chunk that cannot be read or decoded is named by its key.
    with use_manifest_pipeline():
        decoded = xr.open_zarr(opened.zarr_store, **options)
        raw = xr.open_zarr(opened.zarr_store, decode_cf=False, **options)
    return decoded, raw


def _level_names(attributes: dict[str, Any], record: BuildRecord | None) -> list[str] | None:
    """The levels of a multiscale group, or ``None`` for a plain dataset."""
    from virtualizarr_fill.multiscales.conventions import levels_of

    if "multiscales" not in attributes and (record is None or record.mode != "multiscales"):
        return None
    try:
        return levels_of(attributes)
    except (KeyError, TypeError) as error:
        raise CliError(
            f"a multiscale group whose 'multiscales' attribute lists no levels ({error})",
            EXIT_IO,
        ) from None


def _open(dest: str, urls: Sequence[str]) -> _Opened:
    kind = _destination_kind(dest)
    if kind == "icechunk":
        return _icechunk(dest)
    local = user_path(dest)
    if local is None or not local.exists():
        raise CliError(f"{dest}: no such kerchunk references", EXIT_IO)
    return _kerchunk(str(local), urlsplit(urls[0]).scheme if urls else "file")


def open_verified_store(dest: str, urls: Sequence[str]) -> VerifiedStore:
    """Open ``dest`` (an Icechunk repository or kerchunk references to files such as
    ``urls``) for ``verify``."""
    import zarr

    from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

    # Before any metadata is read: a series of files each on a regular grid can be
    # rectilinear once combined, and zarr refuses such metadata without the flag.
    enable_rectilinear_chunks()
    with warnings.catch_warnings():
        # fsspec's parquet references list their own index object next to the arrays;
        # xarray announces changes of its defaults. Neither concerns the comparison.
        warnings.simplefilter("ignore")
        try:
            opened = _open(dest, urls)
            attributes = dict(zarr.open_group(opened.zarr_store, mode="r").attrs)
            if "virtualizarr_fill_stac" in attributes:
                # Its files have no time of their own to be placed by: refused rather
                # than reported as mismatches.
                raise CliError(
                    f"{dest}: built from STAC items (build --stac), whose files verify "
                    "cannot place along time yet; compare a time step read with xarray "
                    "with its date's files instead",
                    EXIT_USAGE,
                )
            record = BuildRecord.from_attributes(attributes, dest)
            found = _level_names(attributes, record)
            names: list[str | None] = [None] if found is None else list(found)
            levels = [StoreLevel(name, *_open_level(opened, name)) for name in names]
        except CliError:
            raise
        except Exception as error:
            raise CliError(
                f"{dest}: cannot open the store ({type(error).__name__}: {error})", EXIT_IO
            ) from None
    return VerifiedStore(dest, _destination_kind(dest), record, opened.inputs, levels)
