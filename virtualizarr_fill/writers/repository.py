"""Icechunk repositories for virtual references: creating one whose virtual chunk
containers cover the referenced files, and opening one with those containers authorized.

An Icechunk repository reads a virtual chunk only from a location its configuration
lists as a *virtual chunk container*, and only once whoever opens the repository has
authorized that container. :func:`create_repository` configures the containers the
files need (their common directory for local files, the bucket for ``s3://`` URLs);
:func:`open_icechunk` authorizes the containers a repository lists and opens it as an
xarray Dataset.

S3 locations are configured from the standard ``AWS_*`` environment variables (region,
endpoint, credentials), as obstore and the AWS tools read them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import MultiscaleGroupError as MultiscaleGroupError
from virtualizarr_fill.errors import RepositoryNotFoundError as RepositoryNotFoundError
from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.writers.read_chunks import (
    DEFAULT_CHUNK_BYTES,
    STORED_MULTIPLES,
    with_whole_chunk_dask_chunks,
)

if TYPE_CHECKING:
    import icechunk
    import xarray as xr

    from virtualizarr_fill.writers.icechunk_reads import ChangedFilesNamingStore

__all__ = [
    "MultiscaleGroupError",
    "RepositoryNotFoundError",
    "container_prefixes",
    "covering",
    "create_repository",
    "open_icechunk",
    "open_icechunk_datatree",
    "open_repository",
    "storage_for",
]


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def s3_options() -> dict[str, Any]:
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


def _local(location: str | os.PathLike[str]) -> Path | None:
    text = os.fspath(location)
    if "://" not in text:
        return Path(text).expanduser().resolve()
    parts = urlsplit(text)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def storage_for(location: str | os.PathLike[str]) -> icechunk.Storage:
    """The Icechunk storage of a repository location: a local path (or ``file://`` URL)
    or an ``s3://bucket/prefix`` URL."""
    import icechunk

    local = _local(location)
    if local is not None:
        return icechunk.local_filesystem_storage(str(local))
    parts = urlsplit(os.fspath(location))
    if parts.scheme not in ("s3", "s3a"):
        raise UnsupportedFeatureError(
            f"{location}: Icechunk repositories are local paths or s3:// URLs here; pass "
            "an icechunk.Storage for other locations"
        )
    options = s3_options()
    return icechunk.s3_storage(
        bucket=parts.netloc,
        prefix=parts.path.strip("/") or None,
        region=options["region"],
        endpoint_url=options["endpoint_url"],
        allow_http=options["allow_http"],
        force_path_style=options["force_path_style"],
        from_env=True,
    )


def container_prefixes(urls: Iterable[str]) -> list[str]:
    """The virtual chunk container prefixes that cover every URL: the common directory
    of the local files, and each S3 bucket."""
    # Each bucket and directory once, not once a file: an archive's files sit in a few,
    # and commonpath splits every path it is given into its components.
    prefixes: dict[str, None] = {}
    local: set[str] = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme == "file":
            local.add(os.path.dirname(unquote(parts.path)))
        elif parts.scheme in ("s3", "s3a"):
            prefixes[f"{parts.scheme}://{parts.netloc}/"] = None
        else:
            raise UnsupportedFeatureError(
                f"{url}: Icechunk virtual chunk containers for {parts.scheme}:// locations "
                "are not configured by this package; create the repository yourself or "
                "write kerchunk references"
            )
    if local:
        common = Path(os.path.commonpath(sorted(local)))
        # The prefix is matched against the references' URLs, which name files by their
        # raw path (file:///data/a+b/x.tif), not by a percent-encoded URI.
        prefixes["file://" + str(common).rstrip("/") + "/"] = None
    return list(prefixes)


def _container(prefix: str) -> icechunk.VirtualChunkContainer:
    import icechunk

    if prefix.startswith("file://"):
        return icechunk.VirtualChunkContainer(
            prefix, icechunk.local_filesystem_store(prefix.removeprefix("file://"))
        )
    options = s3_options()
    store = icechunk.s3_store(
        region=options["region"],
        endpoint_url=options["endpoint_url"],
        allow_http=options["allow_http"],
        s3_compatible=options["endpoint_url"] is not None,
        force_path_style=options["force_path_style"],
    )
    return icechunk.VirtualChunkContainer(prefix, store)


def _authorization(prefixes: Iterable[str]) -> Any:
    import icechunk

    chosen: dict[str, Any] = {}
    for prefix in prefixes:
        if prefix.startswith("file://"):
            chosen[prefix] = icechunk.credentials.LocalFileSystemAccess
        else:
            chosen[prefix] = icechunk.s3_credentials(from_env=True)
    return icechunk.containers_credentials(chosen)


#: Chunk references per manifest file along each dimension of an array (Icechunk's
#: manifest splitting): a commit builds a large array's manifest split by split instead
#: of all at once, which bounds the commit's peak memory (for 10^5 tiles of four
#: references, about a third less), and a reader fetches only the splits it reads.
MANIFEST_SPLIT_SIZE = 2**16


def _manifest_splitting() -> icechunk.ManifestSplittingConfig:
    import icechunk

    return icechunk.ManifestSplittingConfig.from_dict(
        {
            icechunk.ManifestSplitCondition.AnyArray(): {
                icechunk.ManifestSplitDimCondition.Any(): MANIFEST_SPLIT_SIZE
            }
        }
    )


def create_repository(
    location: str | os.PathLike[str] | icechunk.Storage, urls: Iterable[str]
) -> icechunk.Repository:
    """A new Icechunk repository whose virtual chunk containers cover every URL in
    ``urls`` (the files its references will point to), those containers authorized,
    its manifests split every :data:`MANIFEST_SPLIT_SIZE` chunk references.

    Parameters
    ----------
    location
        A local path, an ``s3://bucket/prefix`` URL, or an ``icechunk.Storage``.
    urls
        The files' URLs (``file://`` or ``s3://``).
    """
    import icechunk

    prefixes = container_prefixes(urls)
    config = icechunk.RepositoryConfig.default()
    for prefix in prefixes:
        config.set_virtual_chunk_container(_container(prefix))
    config.manifest = icechunk.ManifestConfig(splitting=_manifest_splitting())
    storage = location if isinstance(location, icechunk.Storage) else storage_for(location)
    return icechunk.Repository.create(
        storage, config, authorize_virtual_chunk_access=_authorization(prefixes)
    )


def _not_found(location: object) -> str:
    if isinstance(location, (str, os.PathLike)):
        local = _local(location)
        if local is not None and not local.exists():
            return f"{os.fspath(location)}: no such Icechunk repository (no such directory)"
        return f"{os.fspath(location)}: not an Icechunk repository (none was created there)"
    return f"{_where(location)}: not an Icechunk repository (none was created there)"


def open_repository(location: str | os.PathLike[str] | icechunk.Storage) -> icechunk.Repository:
    """An existing Icechunk repository, every virtual chunk container it lists
    authorized (local directories, and S3 with credentials from the environment).

    Parameters
    ----------
    location
        A local path, an ``s3://bucket/prefix`` URL, or an ``icechunk.Storage``.

    Raises
    ------
    RepositoryNotFoundError
        No repository is there (a ``FileNotFoundError``).
    """
    import icechunk

    storage = location if isinstance(location, icechunk.Storage) else storage_for(location)
    if not icechunk.Repository.exists(storage):
        raise RepositoryNotFoundError(_not_found(location))
    config = icechunk.Repository.fetch_config(storage)
    containers = (config.virtual_chunk_containers or {}) if config is not None else {}
    return icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=_authorization(containers)
    )


def covering(repo: icechunk.Repository, urls: Iterable[str]) -> icechunk.Repository | None:
    """``repo`` reopened with virtual chunk containers (authorized) for the URLs none of
    its containers covers, or ``None`` when every URL is covered.

    The new configuration is in memory only: save it (``repo.save_config()``) once
    what references those files has been committed.
    """
    config = repo.config
    prefixes = list(config.virtual_chunk_containers or {})
    missing = [url for url in urls if not any(url.startswith(p) for p in prefixes)]
    if not missing:
        return None
    for prefix in container_prefixes(missing):
        config.set_virtual_chunk_container(_container(prefix))
        prefixes.append(prefix)
    return repo.reopen(config=config, authorize_virtual_chunk_access=_authorization(prefixes))


def _where(location: object) -> str:
    if isinstance(location, (str, os.PathLike)):
        return os.fspath(location)
    # an icechunk.Storage describes itself over several lines
    return (str(location).strip().splitlines() or [type(location).__name__])[0]


def _readable_store(
    location: str | os.PathLike[str] | icechunk.Storage, branch: str
) -> ChangedFilesNamingStore:
    from virtualizarr_fill.writers.icechunk_reads import ChangedFilesNamingStore
    from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

    enable_rectilinear_chunks()
    session = open_repository(location).readonly_session(branch)
    return ChangedFilesNamingStore(session.store, _where(location))


def _refuse_multiscale_group(
    store: Any, location: str | os.PathLike[str] | icechunk.Storage, group: str | None
) -> None:
    """Refuse, saying how to open it, a multiscale group asked for as one Dataset: its
    arrays are in its level groups, so xarray would return an empty Dataset."""
    from virtualizarr_fill.multiscales.stores import multiscale_levels

    levels = multiscale_levels(store, group)
    if levels is None:
        return
    where = _where(location)
    inner = f", group={group!r}" if group else ""
    first = f"{group.rstrip('/')}/{levels[0]}" if group else levels[0]
    raise MultiscaleGroupError(
        f"{where}: {'group ' + repr(group) if group else 'the root group'} is a multiscale "
        f"group of levels {', '.join(levels)}; open every level with "
        f"virtualizarr_fill.open_icechunk_datatree({where!r}{inner}), or the full "
        f"resolution as a Dataset with virtualizarr_fill.open_icechunk({where!r}, "
        f"group={first!r})"
    )


def open_icechunk(
    location: str | os.PathLike[str] | icechunk.Storage,
    *,
    branch: str = "main",
    group: str | None = None,
    chunks: Any = STORED_MULTIPLES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    **open_zarr_options: Any,
) -> xr.Dataset:
    """Open an Icechunk repository of virtual references as an xarray Dataset.

    The repository's virtual chunk containers are authorized (see
    :func:`virtualizarr_fill.writers.repository.open_repository`) and zarr's
    rectilinear chunk grids are enabled for this process (see
    :func:`virtualizarr_fill.enable_rectilinear_chunks`), so that the stores
    ``virtualizarr-fill build`` and :func:`virtualizarr_fill.to_icechunk` write open in
    one call. A multiscale repository (``virtualizarr-fill build-multiscales``) holds
    one group per level: open it with :func:`open_icechunk_datatree`, or one level with
    ``group="0"`` (the full resolution).

    The arrays are opened inside :func:`virtualizarr_fill.use_manifest_pipeline`, so
    their reads fetch a piece of chunks per Icechunk call and decode them in worker
    threads, with the values of zarr's own pipeline (which reads again a piece that
    fails, and names the failing chunk); zarr's settings are as they were once this
    returns.

    Parameters
    ----------
    location
        A local path, an ``s3://bucket/prefix`` URL, or an ``icechunk.Storage``.
    branch
        The branch to read.
    group
        The group to open (default: the root).
    chunks
        The dask chunks. The default, ``"stored-multiples"``, chunks every variable
        along each dimension by whole stored chunks (the array's own chunk edges,
        rectilinear ones included) merged up to about ``chunk_bytes`` of decoded
        values, so a store of many small strips is read in a few large tasks. Any other
        value is passed to :func:`xarray.open_zarr` as it is: ``None`` for lazily
        indexed arrays without dask, ``{}`` for one dask chunk per stored chunk, a
        mapping of dimension to sizes...
    chunk_bytes
        The decoded size the default chunks aim at (a dask chunk holds at least one
        stored chunk, so it can be larger when a stored chunk is).
    **open_zarr_options
        Passed to :func:`xarray.open_zarr` (``decode_times``, ...).

    Returns
    -------
    xarray.Dataset
        The dataset, lazily loaded. Reading a chunk of a file modified since the
        repository recorded it raises a
        :class:`~virtualizarr_fill.errors.SourceFileChangedError`
        naming the file.

    Raises
    ------
    RepositoryNotFoundError
        No repository is at ``location`` (a ``FileNotFoundError``).
    MultiscaleGroupError
        The group is a multiscale group, whose arrays are in its levels' groups.
    """
    import xarray as xr

    from virtualizarr_fill.reads import use_manifest_pipeline

    store = _readable_store(location, branch)
    _refuse_multiscale_group(store, location, group)
    open_zarr_options.setdefault("consolidated", False)
    open_zarr_options.setdefault("zarr_format", 3)
    stored_multiples = isinstance(chunks, str) and chunks == STORED_MULTIPLES
    # The arrays opened in the block keep the pipeline for their reads (a batch of keys
    # per Icechunk call); zarr's setting is back as it was when the block closes.
    with use_manifest_pipeline():
        ds = xr.open_zarr(
            store, group=group, chunks=None if stored_multiples else chunks, **open_zarr_options
        )
    if not stored_multiples:
        return ds
    return with_whole_chunk_dask_chunks(ds, chunk_bytes, _token(store, location, branch, group))


def _token(store: Any, location: object, branch: str, group: str | None) -> str:
    """What names a group's data in dask keys: the snapshot (two opens of one snapshot
    share their dask keys), else the location and branch."""
    session = getattr(upstream.wrapped_store(store), "session", None)
    snapshot = getattr(session, "snapshot_id", branch)
    return f"{_where(location)}@{snapshot}/{(group or '').strip('/')}"


def open_icechunk_datatree(
    location: str | os.PathLike[str] | icechunk.Storage,
    *,
    branch: str = "main",
    group: str | None = None,
    chunks: Any = STORED_MULTIPLES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    **open_datatree_options: Any,
) -> xr.DataTree:
    """Open an Icechunk repository of virtual references as an xarray DataTree: every
    group, such as the levels of a multiscale repository (``virtualizarr-fill
    build-multiscales``) or the groups of an HDF5 file.

    The repository is opened as :func:`open_icechunk` opens it (containers authorized,
    rectilinear chunk grids enabled, a changed file named by a
    :class:`~virtualizarr_fill.errors.SourceFileChangedError`).

    Parameters
    ----------
    location
        A local path, an ``s3://bucket/prefix`` URL, or an ``icechunk.Storage``.
    branch
        The branch to read.
    group
        The group at the root of the tree (default: the repository's root).
    chunks
        The dask chunks, chosen group by group as :func:`open_icechunk` chooses them
        (the default, ``"stored-multiples"``: whole stored chunks merged up to about
        ``chunk_bytes``); any other value is passed to :func:`xarray.open_datatree`.
    chunk_bytes
        The decoded size the default chunks aim at.
    **open_datatree_options
        Passed to :func:`xarray.open_datatree` (``decode_times``, ...).

    Returns
    -------
    xarray.DataTree
        The tree, lazily loaded.

    Raises
    ------
    RepositoryNotFoundError
        No repository is at ``location`` (a ``FileNotFoundError``).
    """
    import xarray as xr

    from virtualizarr_fill.reads import use_manifest_pipeline

    store = _readable_store(location, branch)
    open_datatree_options.setdefault("consolidated", False)
    open_datatree_options.setdefault("zarr_format", 3)
    stored_multiples = isinstance(chunks, str) and chunks == STORED_MULTIPLES
    with use_manifest_pipeline():  # as open_icechunk reads
        tree = xr.open_datatree(
            store,  # type: ignore[arg-type]  # xarray's zarr backend takes any zarr store
            engine="zarr",
            group=group,
            chunks=None if stored_multiples else chunks,
            **open_datatree_options,
        )
    if not stored_multiples:
        return tree
    root = (group or "").strip("/")
    return xr.DataTree.from_dict(
        {
            node.path: with_whole_chunk_dask_chunks(
                node.to_dataset(inherit=False),
                chunk_bytes,
                _token(store, location, branch, f"{root}/{node.path.strip('/')}"),
            )
            for node in tree.subtree
        },
        name=tree.name,
    )
