"""Stores the commands write and read: Icechunk repositories (local or S3, with the virtual
chunk containers their references need) and kerchunk references."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from virtualizarr_fill.cli._errors import EXIT_IO, EXIT_USAGE, CliError
from virtualizarr_fill.cli._inputs import is_url, user_path

__all__ = [
    "Destination",
    "create_icechunk_repository",
    "icechunk_module",
    "import_optional",
    "is_icechunk_repository",
    "open_icechunk_repository",
    "open_store_group",
]


#: Suffixes naming kerchunk references; a destination without a suffix, or ending in
#: ``.icechunk``, is an Icechunk repository.
_KERCHUNK_SUFFIXES = {".json": "json", ".parquet": "parquet", ".parq": "parquet"}


def _destination_kind(text: str) -> str:
    """``"json"`` or ``"parquet"`` for kerchunk references, ``"icechunk"`` for an Icechunk
    repository, named by the suffix; any other suffix (``.zarr``, ``.nc``) is refused
    rather than guessed."""
    name = text.rstrip("/").rsplit("/", 1)[-1]
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    if suffix in _KERCHUNK_SUFFIXES:
        return _KERCHUNK_SUFFIXES[suffix]
    if suffix in ("", ".icechunk"):
        return "icechunk"
    raise CliError(
        f"{text}: unknown store type {suffix!r}; name an Icechunk repository NAME.icechunk "
        "(or without a suffix) and kerchunk references NAME.json or NAME.parquet",
        EXIT_USAGE,
    )


@dataclass(frozen=True)
class Destination:
    """Where ``build`` writes: an Icechunk repository or kerchunk references."""

    text: str
    kind: str  # "icechunk" | "json" | "parquet"
    local: Path | None

    @classmethod
    def parse(cls, text: str) -> Destination:
        kind = _destination_kind(text)
        scheme = urlsplit(text).scheme if is_url(text) else "file"
        if scheme != "file":
            if kind != "icechunk":
                raise CliError(
                    f"--out {text}: kerchunk references are written to local paths only",
                    EXIT_USAGE,
                )
            if scheme != "s3":
                raise CliError(
                    f"--out {text}: Icechunk destinations are local paths or s3:// URLs",
                    EXIT_USAGE,
                )
            return cls(text, kind, None)
        local = user_path(text)
        assert local is not None
        return cls(text, kind, local.resolve())

    def exists(self) -> bool:
        if self.local is not None:
            return self.local.exists() and (not self.local.is_dir() or any(self.local.iterdir()))
        import icechunk

        from virtualizarr_fill.writers.repository import storage_for

        return bool(icechunk.Repository.exists(storage_for(self.text)))


# --------------------------------------------------------------------------- optional packages


def import_optional(module: str, extra: str) -> Any:
    """Import a package of an optional extra, or fail naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise CliError(
            f"this needs the '{module}' package: pip install 'virtualizarr-fill[{extra}]'",
            EXIT_IO,
        ) from None


def icechunk_module() -> Any:
    """The icechunk module, its own log output limited to errors (unless ICECHUNK_LOG says
    otherwise): its warnings about local storage and retries are meant for developers."""
    icechunk = import_optional("icechunk", "icechunk")
    if "ICECHUNK_LOG" not in os.environ:
        icechunk.set_logs_filter("error")
    return icechunk


# --------------------------------------------------------------------------- Icechunk


def create_icechunk_repository(destination: Destination, urls: Sequence[str]) -> Any:
    """A new Icechunk repository at ``destination`` whose virtual chunk containers (and
    their credentials) cover every input URL."""
    from virtualizarr_fill.errors import UnsupportedFeatureError
    from virtualizarr_fill.writers.repository import create_repository

    icechunk_module()
    location = destination.local if destination.local is not None else destination.text
    try:
        return create_repository(location, urls)
    except UnsupportedFeatureError as error:
        raise CliError(f"{error} (--out refs.json)", EXIT_USAGE) from None


def is_icechunk_repository(destination: Destination) -> bool:
    """Whether an Icechunk repository exists at ``destination``."""
    from virtualizarr_fill.writers.repository import storage_for

    icechunk = icechunk_module()
    location = destination.local if destination.local is not None else destination.text
    return bool(icechunk.Repository.exists(storage_for(location)))


def open_icechunk_repository(dest: str) -> Any:
    """An existing Icechunk repository, its virtual chunk containers authorized."""
    from virtualizarr_fill.writers.repository import open_repository

    icechunk_module()
    if not is_url(dest) and not Path(dest).expanduser().exists():
        raise CliError(f"{dest}: no such Icechunk repository", EXIT_IO)
    local = user_path(dest)
    return open_repository(local.resolve() if local is not None else dest)


# --------------------------------------------------------------------------- reading back


def _open_icechunk_group(dest: str) -> Any:
    import zarr

    from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

    # Reading what build wrote: its arrays may be on rectilinear grids.
    enable_rectilinear_chunks()
    repo = open_icechunk_repository(dest)
    return zarr.open_group(repo.readonly_session("main").store, mode="r")


def _open_kerchunk_group(path: str, urls: Sequence[str]) -> Any:
    import zarr
    from zarr.storage import FsspecStore

    from virtualizarr_fill.writers.kerchunk import reference_filesystem

    scheme = urlsplit(urls[0]).scheme if urls else "file"
    fs = reference_filesystem(path, scheme)
    with warnings.catch_warnings():
        # fsspec's parquet references list their own index object next to the arrays.
        warnings.filterwarnings("ignore", message="Object at .zmetadata is not recognized")
        return zarr.open_group(FsspecStore(fs, read_only=True, path=""), mode="r")


def open_store_group(dest: str, urls: Sequence[str]) -> Any:
    """The root zarr group of an Icechunk repository or of kerchunk references."""
    if _destination_kind(dest) != "icechunk":
        local = user_path(dest)
        if local is None or not local.exists():
            raise CliError(f"{dest}: no such kerchunk references", EXIT_IO)
        return _open_kerchunk_group(str(local), urls)
    return _open_icechunk_group(dest)
