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
from virtualizarr_fill.cli._inputs import is_url, local_path, store_prefix, user_path

__all__ = [
    "Destination",
    "create_icechunk_repository",
    "icechunk_module",
    "import_optional",
    "open_store_group",
]


def _destination_kind(text: str) -> str:
    """``"json"`` or ``"parquet"`` for kerchunk references (named by suffix), else
    ``"icechunk"``."""
    lowered = text.lower().rstrip("/")
    if lowered.endswith(".json"):
        return "json"
    if lowered.endswith((".parquet", ".parq")):
        return "parquet"
    return "icechunk"


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

        return bool(icechunk.Repository.exists(_s3_storage(self.text)))


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


# --------------------------------------------------------------------------- S3


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _s3_options() -> dict[str, Any]:
    """S3 endpoint settings from the standard AWS environment variables."""
    endpoint = _env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
    allow_http = (_env("AWS_ALLOW_HTTP") or "").lower() in ("1", "true", "yes") or bool(
        endpoint and endpoint.startswith("http://")
    )
    return {
        "region": _env("AWS_REGION", "AWS_DEFAULT_REGION"),
        "endpoint_url": endpoint,
        "allow_http": allow_http,
        "force_path_style": endpoint is not None,
    }


def _s3_storage(url: str) -> Any:
    import icechunk

    parts = urlsplit(url)
    options = _s3_options()
    return icechunk.s3_storage(
        bucket=parts.netloc,
        prefix=parts.path.strip("/") or None,
        region=options["region"],
        endpoint_url=options["endpoint_url"],
        allow_http=options["allow_http"],
        force_path_style=options["force_path_style"],
        from_env=True,
    )


# --------------------------------------------------------------------------- Icechunk


def _container_prefixes(urls: Sequence[str]) -> dict[str, str]:
    """Virtual chunk container URL prefix -> scheme, covering every input."""
    prefixes: dict[str, str] = {}
    local = [p for p in (local_path(u) for u in urls) if p is not None]
    if local:
        common = Path(os.path.commonpath([str(p.parent) for p in local]))
        prefixes[common.as_uri().rstrip("/") + "/"] = "file"
    for url in urls:
        scheme = urlsplit(url).scheme
        if scheme == "file":
            continue
        if scheme not in ("s3", "s3a"):
            raise CliError(
                f"{url}: Icechunk virtual chunk containers for {scheme}:// inputs are not "
                "supported by this command; write kerchunk references (--out refs.json)",
                EXIT_USAGE,
            )
        prefixes[store_prefix(url) + "/"] = "s3"
    return prefixes


def _container(prefix: str, scheme: str) -> Any:
    import icechunk

    if scheme == "file":
        directory = local_path(prefix)
        assert directory is not None
        return icechunk.VirtualChunkContainer(
            prefix, icechunk.local_filesystem_store(str(directory))
        )
    options = _s3_options()
    store = icechunk.s3_store(
        region=options["region"],
        endpoint_url=options["endpoint_url"],
        allow_http=options["allow_http"],
        s3_compatible=options["endpoint_url"] is not None,
        force_path_style=options["force_path_style"],
    )
    return icechunk.VirtualChunkContainer(prefix, store)


def _credentials(prefixes: dict[str, str]) -> dict[str, Any]:
    import icechunk

    chosen: dict[str, Any] = {}
    for prefix, scheme in prefixes.items():
        if scheme == "file":
            chosen[prefix] = icechunk.credentials.LocalFileSystemAccess
        else:
            chosen[prefix] = icechunk.s3_credentials()
    return icechunk.containers_credentials(chosen)


def create_icechunk_repository(destination: Destination, urls: Sequence[str]) -> Any:
    """A new Icechunk repository at ``destination`` whose virtual chunk containers (and
    their credentials) cover every input URL."""
    icechunk = icechunk_module()
    prefixes = _container_prefixes(urls)
    config = icechunk.RepositoryConfig.default()
    for prefix, scheme in prefixes.items():
        config.set_virtual_chunk_container(_container(prefix, scheme))
    if destination.local is not None:
        storage = icechunk.local_filesystem_storage(str(destination.local))
    else:
        storage = _s3_storage(destination.text)
    return icechunk.Repository.create(
        storage, config, authorize_virtual_chunk_access=_credentials(prefixes)
    )


# --------------------------------------------------------------------------- reading back


def _open_icechunk_group(path_or_url: str) -> Any:
    import zarr

    icechunk = icechunk_module()

    if is_url(path_or_url) and urlsplit(path_or_url).scheme == "s3":
        storage = _s3_storage(path_or_url)
    else:
        local = user_path(path_or_url)
        assert local is not None
        storage = icechunk.local_filesystem_storage(str(local.resolve()))
    config = icechunk.Repository.fetch_config(storage)
    containers = (config.virtual_chunk_containers or {}) if config is not None else {}
    prefixes = {prefix: ("file" if prefix.startswith("file://") else "s3") for prefix in containers}
    repo = icechunk.Repository.open(storage, authorize_virtual_chunk_access=_credentials(prefixes))
    return zarr.open_group(repo.readonly_session("main").store, mode="r")


def _open_kerchunk_group(path: str, urls: Sequence[str]) -> Any:
    import fsspec
    import zarr
    from zarr.storage import FsspecStore

    scheme = urlsplit(urls[0]).scheme if urls else "file"
    fs = fsspec.filesystem("reference", fo=path, remote_protocol=scheme, asynchronous=True)
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
    if not is_url(dest) and not Path(dest).expanduser().exists():
        raise CliError(f"{dest}: no such Icechunk repository", EXIT_IO)
    return _open_icechunk_group(dest)
