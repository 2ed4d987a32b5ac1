"""Writing virtual datasets as kerchunk references, for arrays Zarr format 2 cannot hold.

Arrays on rectilinear chunk grids, and arrays whose padded chunks need the truncate or
crop codec, can only be described by Zarr format 3 metadata. VirtualiZarr writes
format 3 references as ``dict`` and ``json`` but not as ``parquet``; :func:`to_kerchunk`
writes all three, choosing format 3 by default where an array needs it. Format 2
references are VirtualiZarr's, corrected to read as the file does
(:mod:`virtualizarr_fill.writers.kerchunk_v2`).

Parquet references are laid out by :mod:`virtualizarr_fill.writers.kerchunk_parquet`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import xarray as xr
from virtualizarr.manifests import ManifestArray

from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.manifests.fill_attributes import with_array_fill_attributes
from virtualizarr_fill.writers.kerchunk_parquet import (
    kerchunk_refs_v3_for_parquet,
    parquet_categorical_threshold,
    write_kerchunk_parquet_v3,
    write_kerchunk_parquet_v3_groups,
)
from virtualizarr_fill.writers.kerchunk_v2 import format_2_problem, kerchunk_refs_v2
from virtualizarr_fill.zarr_model.chunk_grids import is_rectilinear
from virtualizarr_fill.zarr_model.edge_codecs import edge_handling_of


def needs_zarr_v3(array: ManifestArray) -> str | None:
    """Why an array cannot be written as Zarr format 2 references (None if it can)."""
    if is_rectilinear(array.metadata):
        return "a rectilinear chunk grid"
    if edge_handling_of(array.metadata.codecs).value:
        return "padded edge chunks (a truncate/crop codec)"
    return _codec_without_format_2(array)


def _codec_without_format_2(array: ManifestArray) -> str | None:
    """The codec VirtualiZarr cannot name in Zarr format 2 metadata, if any: it converts
    a codec's ``configuration``, which codecs without options (imagecodecs' LZW and
    PackBits) do not have, failing with a ``KeyError``."""
    from virtualizarr.codecs import get_codec_config, zarr_codec_config_to_v2
    from zarr.abc.codec import ArrayBytesCodec

    for codec in array.metadata.codecs:
        if isinstance(codec, ArrayBytesCodec):
            continue  # format 2 has none
        try:
            zarr_codec_config_to_v2(get_codec_config(codec))
        except (KeyError, TypeError, ValueError):
            return f"the codec {type(codec).__name__} (no Zarr format 2 name)"
    return None


def _needing_v3(ds: xr.Dataset) -> dict[str, str]:
    found = {}
    for name, var in ds.variables.items():
        if isinstance(var.data, ManifestArray):
            reason = needs_zarr_v3(var.data) or format_2_problem(var)
            if reason is not None:
                found[str(name)] = reason
    return found


class ZarrFormat2Error(UnsupportedFeatureError):
    """Zarr format 2 references cannot describe an array of the dataset.

    ``problem`` says which and why, without advice (callers word what to do instead).
    """

    def __init__(self, problem: str, advice: str) -> None:
        super().__init__(f"{problem}; {advice}")
        self.problem = problem


def to_kerchunk(
    ds: xr.Dataset,
    filepath: str | Path | None = None,
    format: Literal["dict", "json", "parquet"] = "dict",
    *,
    zarr_format: Literal[2, 3] | None = None,
    record_size: int = 100_000,
    categorical_threshold: int = 10,
) -> dict[str, Any] | None:
    """Write a virtual dataset as kerchunk references.

    Takes the arguments of VirtualiZarr's ``vds.vz.to_kerchunk``; in addition it writes
    Zarr format 3 references as parquet, writes Zarr format 2 references that read as
    the netCDF readers read the file (scalars, masks: see
    ``virtualizarr_fill.writers.kerchunk_v2``), and refuses Zarr format 2 for arrays it
    cannot describe (rectilinear grids, padded edge chunks, unwritten chunks whose header
    fill differs from the fill value format 2 would give them) instead of writing
    references that would read wrong.

    Parameters
    ----------
    ds
        The virtual dataset.
    filepath
        Where to write (``json``: a file; ``parquet``: a directory). Not used for ``dict``.
    format
        ``"dict"`` (returned), ``"json"`` or ``"parquet"``.
    zarr_format
        The Zarr format of the metadata. By default 3 when any array needs it, else 2
        (VirtualiZarr's default).
    record_size, categorical_threshold
        Parquet only: references per file, and when paths are stored as categoricals.

    Returns
    -------
    dict or None
        The references for ``format="dict"``; None otherwise.

    Raises
    ------
    virtualizarr_fill.UnsupportedFeatureError
        ``zarr_format=2`` was asked for a dataset with an array that needs format 3 (a
        ``ZarrFormat2Error``, whose ``problem`` says which array and why).
    """
    ds = with_array_fill_attributes(ds)
    needing = _needing_v3(ds)
    if zarr_format is None:
        zarr_format = 3 if needing else 2
    if zarr_format == 2 and needing:
        name, reason = next(iter(needing.items()))
        raise ZarrFormat2Error(
            f"variable {name!r} has {reason}, which Zarr format 2 references cannot describe",
            "write Zarr format 3 references instead (zarr_format=3, format 'dict', 'json' "
            "or 'parquet'), or write to Icechunk with virtualizarr_fill.to_icechunk",
        )
    if format not in ("dict", "json", "parquet"):
        raise ValueError(f"Unrecognized output format: {format}")
    if format != "dict" and filepath is None:
        raise ValueError(f"Filepath must be provided when format is {format!r}")
    if zarr_format == 3:
        if format == "parquet":
            write_kerchunk_parquet_v3(
                ds,
                str(filepath),
                record_size=record_size,
                categorical_threshold=categorical_threshold,
            )
            return None
        return ds.vz.to_kerchunk(filepath, format, zarr_format=3)  # type: ignore[no-any-return]
    try:
        refs = kerchunk_refs_v2(ds)
    except ValueError as error:
        # numcodecs names no format 2 codec for a Zarr v3 one (transpose, this
        # package's TIFF codecs): say what to do instead of numcodecs' registry advice.
        if "codec" not in str(error).lower():
            raise
        raise ZarrFormat2Error(
            f"a codec of this dataset has no Zarr format 2 equivalent ({str(error)[:120]})",
            "write Zarr format 3 references instead (zarr_format=3)",
        ) from error
    if format == "dict":
        return refs
    if format == "json":
        import ujson

        with open(str(filepath), "w") as file:
            ujson.dump(refs, file)
        return None
    from kerchunk.df import refs_to_dataframe

    refs_to_dataframe(
        refs,
        url=str(filepath),
        record_size=record_size,
        categorical_threshold=parquet_categorical_threshold([ds], categorical_threshold),
    )
    return None


def _parquet_remote_protocol(references: Path) -> str | None:
    """The protocol of the first chunk reference in parquet references (fsspec would
    otherwise list every key to find it, which format 3 references' index entries
    confuse); None for JSON references."""
    if not references.is_dir():
        return None
    import pandas as pd

    for records in sorted(references.glob("**/refs.*.parq")):
        paths = pd.read_parquet(records, columns=["path"])["path"].dropna()
        if len(paths):
            url = str(paths.iloc[0])
            return url.split("://", 1)[0] if "://" in url else "file"
    return "file"


def _json_remote_protocol(document: dict[str, Any]) -> str:
    """The protocol of the first chunk reference of JSON references (``"file"`` for
    references without a chunk or a protocol)."""
    refs = document.get("refs", document)
    for value in refs.values():
        if isinstance(value, list) and value and isinstance(value[0], str) and value[0]:
            return value[0].split("://", 1)[0] if "://" in value[0] else "file"
    return "file"


def remote_filesystem_options(
    protocol: str, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The options of the file system kerchunk references point into, as fsspec's
    reference file system needs them when zarr reads it asynchronously.

    The reference file system refuses an asynchronous target file system (``s3``,
    ``http``, ``gcs``...) that was not itself created asynchronous, so such targets get
    ``asynchronous=True``. ``s3`` targets also get the endpoint of the standard
    ``AWS_*`` environment variables (as the rest of this package reads them) unless
    ``options`` name one.
    """
    import fsspec

    chosen = dict(options or {})
    if fsspec.get_filesystem_class(protocol).async_impl:
        chosen.setdefault("asynchronous", True)
    if protocol in ("s3", "s3a"):
        from virtualizarr_fill.writers.repository import s3_options

        settings = s3_options()
        client = dict(chosen.get("client_kwargs") or {})
        if settings["endpoint_url"] and "endpoint_url" not in chosen:
            client.setdefault("endpoint_url", settings["endpoint_url"])
        if settings["region"]:
            client.setdefault("region_name", settings["region"])
        if client:
            chosen["client_kwargs"] = client
    return chosen


def reference_filesystem(
    references: str | Path | dict[str, Any],
    remote_protocol: str,
    remote_options: dict[str, Any] | None = None,
) -> Any:
    """fsspec's reference file system over kerchunk references (a JSON file or parquet
    directory, or references already read), asynchronous as zarr's ``FsspecStore``
    needs it, its target file system (``remote_protocol``: ``"file"``, ``"s3"``...)
    configured by :func:`remote_filesystem_options`."""
    import fsspec

    return fsspec.filesystem(
        "reference",
        fo=references if isinstance(references, dict) else str(references),
        remote_protocol=remote_protocol,
        remote_options=remote_filesystem_options(remote_protocol, remote_options),
        asynchronous=True,
    )


def _refuse_multiscale_group(store: Any, references: str | Path, group: str | None) -> None:
    """Refuse, saying how to open a level, a multiscale group asked for as one Dataset
    (its arrays are in its level groups: xarray would return an empty Dataset)."""
    import warnings

    from virtualizarr_fill.multiscales.stores import multiscale_levels
    from virtualizarr_fill.writers.repository import MultiscaleGroupError

    with warnings.catch_warnings():
        # fsspec's parquet references list their own index object next to the arrays.
        warnings.filterwarnings("ignore", message="Object at .zmetadata is not recognized")
        levels = multiscale_levels(store, group)
    if levels is None:
        return
    where = str(references)
    first = f"{group.rstrip('/')}/{levels[0]}" if group else levels[0]
    raise MultiscaleGroupError(
        f"{where}: {'group ' + repr(group) if group else 'the root group'} is a multiscale "
        f"group of levels {', '.join(levels)}; open the full resolution with "
        f"virtualizarr_fill.open_kerchunk({where!r}, group={first!r}) (and each other "
        "level by its name)"
    )


def open_kerchunk(
    references: str | Path,
    *,
    remote_protocol: str | None = None,
    remote_options: dict[str, Any] | None = None,
    **open_zarr_options: Any,
) -> xr.Dataset:
    """Open kerchunk references (JSON or parquet, Zarr format 2 or 3) as an xarray
    Dataset, through fsspec's reference file system.

    Zarr's rectilinear chunk grids are enabled for this process (see
    :func:`virtualizarr_fill.enable_rectilinear_chunks`), since format 3 references
    written by :func:`to_kerchunk` may hold them.

    Parameters
    ----------
    references
        The JSON file or parquet directory (local).
    remote_protocol
        The protocol of the files the references point into (``"file"``, ``"s3"``);
        by default found from the references.
    remote_options
        Options of the file system the references point into (``{"anon": True}`` for
        public S3 buckets, ...). Asynchronous file systems (``s3``, ``http``...) get
        ``asynchronous=True``, which fsspec's reference file system requires, and
        ``s3`` the endpoint and region of the ``AWS_*`` environment variables (see
        :func:`remote_filesystem_options`); references into ``s3://`` need s3fs
        (the ``kerchunk`` extra).
    **open_zarr_options
        Passed to :func:`xarray.open_zarr` (``chunks``, ``decode_times``, ``group``...).

    Raises
    ------
    virtualizarr_fill.writers.repository.MultiscaleGroupError
        The group is a multiscale group (``build --overviews``): open one level with
        ``group="0"`` (the full resolution), ``"1"``...
    """
    from zarr.storage import FsspecStore

    from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

    enable_rectilinear_chunks()
    source: str | dict[str, Any] = str(references)
    if remote_protocol is None:
        remote_protocol = _parquet_remote_protocol(Path(references))
    if remote_protocol is None:
        # JSON references: read once, here, to find the protocol their options depend on.
        with open(references, "rb") as file:
            document = json.load(file)
        source, remote_protocol = document, _json_remote_protocol(document)
    fs = reference_filesystem(source, remote_protocol, remote_options)
    store = FsspecStore(fs, read_only=True, path="")
    _refuse_multiscale_group(store, references, open_zarr_options.get("group"))
    open_zarr_options.setdefault("consolidated", False)
    if "zarr_format" in open_zarr_options:
        return xr.open_zarr(store, **open_zarr_options)
    # Named, not probed: zarr's probing trips over the chunk index entries of format 3
    # parquet references (see the module docstring).
    try:
        return xr.open_zarr(store, zarr_format=3, **open_zarr_options)
    except (FileNotFoundError, KeyError, ValueError):
        return xr.open_zarr(store, zarr_format=2, **open_zarr_options)


__all__ = [
    "ZarrFormat2Error",
    "kerchunk_refs_v3_for_parquet",
    "needs_zarr_v3",
    "open_kerchunk",
    "reference_filesystem",
    "remote_filesystem_options",
    "to_kerchunk",
    "write_kerchunk_parquet_v3",
    "write_kerchunk_parquet_v3_groups",
]
