"""Which parser reads a file: format detection from the first bytes, and :class:`AutoParser`.

Detection looks only at signatures, never at file names:

* **TIFF**: ``II*\\0`` / ``MM\\0*`` (classic) and ``II+\\0`` / ``MM\\0+`` (BigTIFF);
* **HDF5** (and netCDF-4, which is HDF5): the 8-byte HDF5 signature at offset 0, or after
  a user block at 512, 1024, 2048, ... bytes;
* **netCDF-3** (``CDF\\1``, ``CDF\\2``, ``CDF\\5``) is recognised only to be refused with a
  :class:`~virtualizarr_fill.errors.NotHDF5Error` that says so;
* anything else raises :class:`UnknownFormatError` naming the file.

The signature probe reads the head of the object through the same
:class:`~virtualizarr_fill.io.files.StoreFile` the TIFF parser then uses, so a TIFF costs no
extra request; HDF5 files are read again by :class:`~virtualizarr_fill.hdf5.HDF5Parser`
through its own reader (one more request for the head).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from virtualizarr_fill.errors import NotHDF5Error, UnknownFormatError
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.io.isolation import DEFAULT_MEMORY_LIMIT, Outcome, isolated_map
from virtualizarr_fill.io.registries import resolve
from virtualizarr_fill.io.urls import normalize_url
from virtualizarr_fill.manifests import FileManifestStore
from virtualizarr_fill.tiff import TIFFParser

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry


__all__ = [
    "AutoParser",
    "FileFormat",
    "UnknownFormatError",
    "detect_format",
    "format_of_head",
    "open_virtual_datasets",
    "sniff_format",
]

TIFF_SIGNATURES = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: The smallest HDF5 user block; larger ones double (512 * 2**n bytes).
FIRST_USER_BLOCK = 512
_NETCDF3_VARIANTS = {
    1: "CDF-1, classic format",
    2: "CDF-2, 64-bit offset format",
    5: "CDF-5, 64-bit data format",
}


class FileFormat(enum.Enum):
    """A file format virtualizarr-fill parses."""

    TIFF = "tiff"
    HDF5 = "hdf5"


def format_of_head(head: bytes) -> FileFormat | None:
    """The format whose signature starts ``head`` (HDF5 only at offset 0), else ``None``."""
    if head[:4] in TIFF_SIGNATURES:
        return FileFormat.TIFF
    if head[: len(HDF5_SIGNATURE)] == HDF5_SIGNATURE:
        return FileFormat.HDF5
    return None


def _netcdf3_variant(head: bytes) -> str | None:
    if len(head) >= 4 and head[:3] == b"CDF":
        return _NETCDF3_VARIANTS.get(head[3])
    return None


def _has_hdf5_user_block(reader: StoreFile) -> bool:
    """Whether the HDF5 signature follows a user block (offsets 512, 1024, 2048, ...)."""
    offset = FIRST_USER_BLOCK
    while offset + len(HDF5_SIGNATURE) <= reader.size:
        if reader.read_range(offset, len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
            return True
        offset *= 2
    return False


def sniff_format(reader: StoreFile, url: str) -> FileFormat:
    """The format of the object behind ``reader``; ``url`` names it in errors.

    Raises
    ------
    NotHDF5Error
        For netCDF-3 files (not supported: they are not HDF5).
    UnknownFormatError
        For empty objects and objects with no known signature.
    """
    head = reader.read_range(0, 8)
    detected = format_of_head(head)
    if detected is not None:
        return detected
    variant = _netcdf3_variant(head)
    if variant is not None:
        raise NotHDF5Error(
            f"{url}: netCDF-3 file ({variant}) is not supported: virtualizarr-fill reads "
            "netCDF-4/HDF5 and TIFF; use VirtualiZarr's NetCDF3Parser for netCDF-3"
        )
    if _has_hdf5_user_block(reader):
        return FileFormat.HDF5
    if reader.size == 0:
        raise UnknownFormatError(f"{url}: the file is empty (0 bytes)")
    raise UnknownFormatError(
        f"{url}: unrecognised file format (first bytes {bytes(head)!r}): expected a TIFF, "
        "BigTIFF, HDF5 or netCDF-4 file"
    )


def detect_format(url: str, registry: ObjectStoreRegistry) -> FileFormat:
    """The format of the object at ``url`` (resolved through ``registry``); one request."""
    store, path = resolve(registry, url)
    return sniff_format(StoreFile(store, path, url=url), url)


def _default_hdf5_parser() -> Any:
    # Imported on first use: the HDF5 parser pulls in h5py's file machinery, which
    # TIFF-only jobs never need.
    from virtualizarr_fill.hdf5 import HDF5Parser

    return HDF5Parser()


@dataclass(frozen=True)
class AutoParser:
    """VirtualiZarr parser that picks the TIFF or HDF5 parser for each file (picklable).

    Use it where the files of one job may be of either format, e.g. with
    :func:`virtualizarr.open_virtual_dataset` or ``open_virtual_mfdataset``::

        parser = AutoParser(tiff=TIFFParser(on_fill_out_of_range="warn"))
        vds = open_virtual_dataset(url, registry=registry, parser=parser)

    Parameters
    ----------
    tiff
        The TIFF parser to use, with its options (default: ``TIFFParser()``).
    hdf5
        The HDF5 parser to use, with its options (default:
        :class:`virtualizarr_fill.hdf5.HDF5Parser` with default options).
    """

    tiff: TIFFParser | None = None
    hdf5: Any = None

    def parser_for(self, file_format: FileFormat) -> Any:
        """The configured parser for ``file_format``."""
        if file_format is FileFormat.TIFF:
            return self.tiff if self.tiff is not None else TIFFParser()
        return self.hdf5 if self.hdf5 is not None else _default_hdf5_parser()

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> FileManifestStore:
        """The ManifestStore of the file at ``url``, by the parser its signature calls for.

        Raises :class:`UnknownFormatError` for a file that is neither TIFF nor HDF5, and
        :class:`~virtualizarr_fill.errors.NotHDF5Error` for a netCDF-3 file.
        """
        tiff = self.tiff if self.tiff is not None else TIFFParser()
        url = normalize_url(url)
        store, path = resolve(registry, url)
        reader = StoreFile(
            store, path, first_request=tiff.first_request, deadline=tiff.deadline, url=url
        )
        file_format = sniff_format(reader, url)
        if file_format is FileFormat.TIFF:
            # The header bytes are already in ``reader``: parse from them.
            return FileManifestStore(tiff.parse(url, reader), registry=registry, url=url)
        parser = self.parser_for(file_format)
        return cast(FileManifestStore, parser(url, registry))


# -- many files, each parsed in an isolated worker process ------------------------------


@dataclass(frozen=True)
class _OpenDataset:
    """``open_virtual_dataset`` of one URL with a fixed parser and registry (picklable)."""

    parser: Any
    registry: Any
    options: dict[str, Any]

    def __call__(self, url: str) -> Any:
        from virtualizarr import open_virtual_dataset

        registry = self.registry
        if registry is None:
            from virtualizarr_fill.io.registries import registry_for

            registry = registry_for([url])
        return open_virtual_dataset(url, registry=registry, parser=self.parser, **self.options)


def open_virtual_datasets(
    urls: Iterable[str],
    *,
    parser: Any = None,
    registry: Any = None,
    workers: int = 2,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    timeout: float | None = None,
    tasks_per_worker: int | None = None,
    **options: Any,
) -> list[Outcome[str, Any]]:
    """:func:`virtualizarr.open_virtual_dataset` of every URL, each in a worker process
    (:func:`~virtualizarr_fill.io.isolation.isolated_map`), in the order of ``urls``: a
    file that crashes or exhausts its worker costs its own outcome, not the others'.

    Parameters
    ----------
    urls
        The files.
    parser
        The parser (default :class:`AutoParser`, which picks TIFF or HDF5 by signature).
    registry
        Resolves the URLs to object stores; picklable, as obstore's stores are (default:
        stores built from each URL as the command-line tool builds them).
    workers
        Worker processes running at once.
    memory_limit
        Bytes of address space a worker may map beyond what it maps once started
        (``None``: no cap).
    timeout
        Seconds one file may take; a worker past it is killed (``None``: no limit).
    tasks_per_worker
        Replace each worker after this many files.
    **options
        Passed to ``open_virtual_dataset``.

    Returns
    -------
    list of Outcome
        One per URL, in the order of ``urls``: ``outcome.ok`` and ``outcome.value`` (the
        virtual dataset), or ``outcome.problem`` saying what became of the file.
    """
    if parser is None:
        parser = AutoParser()
    urls = list(urls)
    outcomes = isolated_map(
        _OpenDataset(parser, registry, options),
        urls,
        workers=min(workers, max(len(urls), 1)),
        memory_limit=memory_limit,
        timeout=timeout,
        tasks_per_worker=tasks_per_worker,
    )
    return sorted(outcomes, key=lambda outcome: outcome.index)
