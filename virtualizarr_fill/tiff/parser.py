"""The TIFF/GeoTIFF parser: ``TIFFParser()(url, registry) -> ManifestStore``.

Only the header is read (IFDs and tag arrays, through :class:`virtualizarr_fill.io.files.StoreFile`,
usually in one request); the data stays where it is and the manifest points at it.

The dataset of one image looks like rioxarray's (``xr.open_dataset(path,
engine="rasterio")``): ``band_data`` with dimensions ``(band, y, x)``, coordinates
``band`` (1..N), ``x``/``y`` (pixel centres, when the image has an axis-aligned
georeference) and ``spatial_ref`` (GeoKeys, CRS WKT and GeoTransform). Coordinates are
small arrays held in the manifest itself (inlined chunks), so they load without touching
the file.

Which images:

* by default (``layout="image"``) the store holds the first full-resolution image (or
  the IFD ``ifd=N``);
* ``layout="tree"`` builds a hierarchy for :func:`virtualizarr.open_virtual_datatree`: an empty
  root and one sibling group per image (``image``, ``overview_1``..., ``mask``,
  ``mask_overview_1``..., ``page_1``..., ``subifd_0_1``...). Siblings, because xarray's
  DataTree requires a child's dimensions to align with its parent's, which images of
  different sizes cannot;
* ``layout="pages"`` stacks the file's full-resolution pages (same shape, data type and
  codecs) along a new leading ``page`` dimension;
* ``time_from=...`` gives the image a leading ``time`` dimension of length one and a
  ``time`` coordinate from the DateTime tag, a GDAL metadata item or the file name, for
  stacking scenes (see :mod:`virtualizarr_fill.assemble.time_stack`);
* ``layout="multiscales"`` builds a multiscale group for
  :func:`virtualizarr.open_virtual_datatree`: levels ``"0"`` (full resolution) to ``"n"``
  with their masks, described after the multiscales convention (see
  :mod:`virtualizarr_fill.tiff.pyramid`).

Every image array built is recorded with :func:`virtualizarr_fill.report.record_array`
(edge handling, how the strips or tiles were judged, fill decisions), named
``band_data``, ``<group>/band_data`` (``layout="tree"``) or ``band_data[page=N]``
(``layout="pages"``); the CLI's ``inspect`` shows these records.
"""

from __future__ import annotations

import logging
import struct
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import tifffile
from virtualizarr.manifests import ManifestGroup, ManifestStore

from virtualizarr_fill.errors import (
    CorruptFileError,
    NotATiffError,
    VirtualizarrFillDeprecationWarning,
    VirtualizarrFillError,
)
from virtualizarr_fill.io.files import DEFAULT_FIRST_REQUEST, DEFAULT_PARSE_DEADLINE, StoreFile
from virtualizarr_fill.io.registries import resolve
from virtualizarr_fill.io.urls import normalize_url
from virtualizarr_fill.manifests import FileManifestStore
from virtualizarr_fill.parser_options import (
    FILL_OUT_OF_RANGE_POLICIES,
    LAYOUTS,
    OnFillOutOfRange,
    TIFFLayout,
    deprecation_message,
    upgrade_options,
)
from virtualizarr_fill.tiff.file_groups import (
    multiscale_group,
    select_page,
    stacked_group,
    tree_group,
)
from virtualizarr_fill.tiff.image_groups import (
    ParseContext,
    chain_page,
    describe_chained,
    image_group,
    source_name,
    with_time,
)
from virtualizarr_fill.tiff.scene_time import TimeSource

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry
    from tifffile import TiffFile


@dataclass(frozen=True, init=False)
class TIFFParser:
    """VirtualiZarr parser for TIFF, BigTIFF and GeoTIFF files (picklable).

    Called as ``parser(url, registry)``, it reads the file's header (usually in one
    request) and returns a :class:`~virtualizarr_fill.manifests.FileManifestStore`. One
    image becomes a group shaped as rioxarray opens it: ``band_data`` with dimensions
    ``(band, y, x)``, and the coordinates ``band``, ``x``/``y`` (pixel centres, for an
    axis-aligned georeference) and ``spatial_ref`` (CRS WKT, GeoTransform, GeoKeys),
    held in the references themselves. The chunk grid follows the strips or tiles; a
    short last strip makes it rectilinear.

    Parameters
    ----------
    ifd
        Index of the IFD (in the main IFD chain) to expose with ``layout="image"``;
        default: the first image that is neither an overview nor a mask.
    layout
        Which images the store holds, and how:

        * ``"image"`` (default): one image, ``ifd``;
        * ``"tree"``: one group per image for :func:`virtualizarr.open_virtual_datatree`:
          an empty root and sibling groups ``image``, ``overview_1``..., ``mask``,
          ``mask_overview_1``..., ``page_1``..., ``subifd_0_1``... (siblings, since
          images of different sizes cannot align as parent and child in a DataTree);
        * ``"pages"``: all full-resolution pages (same shape, data type and codecs)
          stacked along a new leading ``page`` dimension;
        * ``"multiscales"``: the full-resolution image and its overviews as a
          multiscale group of levels ``"0"``..``"n"`` (see
          :mod:`virtualizarr_fill.tiff.pyramid`).
    time_from
        Where each scene's time comes from: ``"datetime"`` (the DateTime tag),
        ``"metadata:NAME"`` (a GDAL metadata item) or a regular expression searched in
        the file name (see :mod:`virtualizarr_fill.tiff.scene_time`); the image then has a
        leading ``time`` dimension of length one. Only with ``layout="image"``. None
        (default): no time.
    on_fill_out_of_range
        A nodata value the data type cannot hold (e.g. -10000 on uint8): ``"raise"``
        (default) a :class:`~virtualizarr_fill.errors.FillValueError`, or ``"warn"`` and
        drop it so the file stays readable. The default differs from
        :class:`~virtualizarr_fill.hdf5.HDF5Parser`'s on purpose: in a GeoTIFF such a
        value means the metadata does not match the file (see docs/fill-values.md).
    probe_last_strip
        For compressed strips whose last strip holds fewer rows than RowsPerStrip, read
        and decompress the last strip (default; one request unless it lies in the bytes
        read for the header) to tell whether it is stored padded (a regular grid) or
        short (a rectilinear grid with a short last edge): either way the array needs no
        codec of this package, so stores built from it read with zarr alone. ``False``
        skips the read and uses a rectilinear grid with the truncate codec, correct for
        both. See :mod:`virtualizarr_fill.tiff.segments`.
    first_request
        Bytes fetched by the first request (the header usually lies within them).
    deadline
        Seconds a parse may take, its object-store requests and their retries included
        (``None``: no limit); a request still unanswered then raises
        :class:`~virtualizarr_fill.errors.StoreReadError` naming the file.
    tree, stack_pages, overviews
        Deprecated: ``layout="tree"``, ``layout="pages"`` and ``layout="multiscales"``
        (a :class:`~virtualizarr_fill.errors.VirtualizarrFillDeprecationWarning`).
    on_out_of_range
        Deprecated: ``on_fill_out_of_range``.

    Raises
    ------
    virtualizarr_fill.NotATiffError
        The object is not a TIFF file.
    virtualizarr_fill.CorruptFileError
        The header contradicts itself or the file's size (a truncated file).
    virtualizarr_fill.UnsupportedFeatureError
        A feature no virtual Zarr array can express (named in the message).
    virtualizarr_fill.FillValueError
        A nodata value the data type cannot hold, unless ``on_fill_out_of_range="warn"``.

    Examples
    --------
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})
    >>> vds = open_virtual_dataset("file:///data/scene.tif", registry=registry,
    ...                            parser=TIFFParser())
    >>> pyramid = open_virtual_datatree("file:///data/cog.tif", registry=registry,
    ...                                 parser=TIFFParser(layout="multiscales"))
    >>> store = TIFFParser()("file:///data/scene.tif", registry)  # a ManifestStore
    """

    layout: TIFFLayout = "image"
    ifd: int | None = None
    time_from: str | None = None
    on_fill_out_of_range: OnFillOutOfRange = "raise"
    probe_last_strip: bool = True
    first_request: int = DEFAULT_FIRST_REQUEST
    deadline: float | None = DEFAULT_PARSE_DEADLINE

    def __init__(
        self,
        ifd: int | None = None,
        *,
        layout: TIFFLayout = "image",
        time_from: str | None = None,
        on_fill_out_of_range: OnFillOutOfRange = "raise",
        probe_last_strip: bool = True,
        first_request: int = DEFAULT_FIRST_REQUEST,
        deadline: float | None = DEFAULT_PARSE_DEADLINE,
        tree: bool | None = None,
        stack_pages: bool | None = None,
        overviews: Literal["multiscales"] | None = None,
        on_out_of_range: OnFillOutOfRange | None = None,
    ) -> None:
        deprecated = {
            name: value
            for name, value in (
                ("tree", tree),
                ("stack_pages", stack_pages),
                ("overviews", overviews),
                ("on_out_of_range", on_out_of_range),
            )
            if value is not None
        }
        if deprecated:
            given: dict[str, Any] = {"layout": layout}
            if on_fill_out_of_range != "raise":
                given["on_fill_out_of_range"] = on_fill_out_of_range
            upgraded, renamed = upgrade_options({**given, **deprecated})
            for item in renamed:
                warnings.warn(
                    deprecation_message(item), VirtualizarrFillDeprecationWarning, stacklevel=2
                )
            layout = upgraded["layout"]
            on_fill_out_of_range = upgraded.get("on_fill_out_of_range", on_fill_out_of_range)
        if layout not in LAYOUTS:
            raise ValueError(
                f"layout must be one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}"
            )
        if on_fill_out_of_range not in FILL_OUT_OF_RANGE_POLICIES:
            raise ValueError(
                f"on_fill_out_of_range must be 'raise' or 'warn', got {on_fill_out_of_range!r}"
            )
        if ifd is not None and layout != "image":
            raise ValueError(f"ifd selects the image of layout='image', not of layout={layout!r}")
        if time_from is not None:
            TimeSource.parse(time_from)  # a bad pattern fails here, not per file
            if layout != "image":
                raise ValueError(f"time_from needs layout='image', not layout={layout!r}")
        for name, value in (
            ("layout", layout),
            ("ifd", ifd),
            ("time_from", time_from),
            ("on_fill_out_of_range", on_fill_out_of_range),
            ("probe_last_strip", probe_last_strip),
            ("first_request", first_request),
            ("deadline", deadline),
        ):
            object.__setattr__(self, name, value)  # a frozen dataclass sets fields so

    # The deprecated options, read back as the layout states them.
    @property
    def tree(self) -> bool:
        """Deprecated: ``layout == "tree"``."""
        _warn_read("tree", 'layout == "tree"')
        return self.layout == "tree"

    @property
    def stack_pages(self) -> bool:
        """Deprecated: ``layout == "pages"``."""
        _warn_read("stack_pages", 'layout == "pages"')
        return self.layout == "pages"

    @property
    def overviews(self) -> Literal["multiscales"] | None:
        """Deprecated: ``layout == "multiscales"``."""
        _warn_read("overviews", 'layout == "multiscales"')
        return "multiscales" if self.layout == "multiscales" else None

    @property
    def on_out_of_range(self) -> OnFillOutOfRange:
        """Deprecated: ``on_fill_out_of_range``."""
        _warn_read("on_out_of_range", "on_fill_out_of_range")
        return self.on_fill_out_of_range

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """The ManifestStore of the TIFF at ``url``, read through ``registry``'s store."""
        url = normalize_url(url)
        store, path = resolve(registry, url)
        reader = StoreFile(
            store, path, first_request=self.first_request, deadline=self.deadline, url=url
        )
        return FileManifestStore(self.parse(url, reader), registry=registry, url=url)

    def parse(self, url: str, reader: StoreFile) -> ManifestGroup:
        """The manifest group of the TIFF read through ``reader`` (``url`` names the chunks)."""
        with _quiet_tifffile():
            try:
                return self._parse(url, reader)
            except VirtualizarrFillError:
                raise
            except _MALFORMED_HEADER_ERRORS as error:
                # tifffile and the tag mappings index, unpack and convert tag values as
                # the file states them; a malformed IFD surfaces as one of these.
                raise CorruptFileError(
                    f"{url}: malformed TIFF header ({type(error).__name__}: {error})"
                ) from error

    def _parse(self, url: str, reader: StoreFile) -> ManifestGroup:
        tif = _open_tiff(reader, url)
        with tif:
            file_size = reader.size
            context = ParseContext(
                url=url,
                reader=reader,
                file_size=file_size,
                on_out_of_range=self.on_fill_out_of_range,
                probe_last_strip=self.probe_last_strip,
            )
            if self.layout == "multiscales":
                return multiscale_group(tif, context)
            if self.layout == "tree":
                return tree_group(tif, context)
            if self.layout == "pages":
                return stacked_group(tif, context)
            page = select_page(tif, self.ifd, context)
            image = describe_chained(chain_page(page, context), context)
            group = image_group(
                image, page, page.index, context, source=source_name(url, page.index)
            )
            if self.time_from is not None:
                return with_time(group, page, image, context, TimeSource.parse(self.time_from))
            return group


_MALFORMED_HEADER_ERRORS = (
    TypeError,
    IndexError,
    KeyError,
    ValueError,
    struct.error,
    OverflowError,
    ZeroDivisionError,
)


class _QuietTifffile:
    """Silence tifffile's log messages about tag values (e.g. a GDAL_NODATA the data type
    cannot hold): the parser reports such problems itself, naming the file.

    Parses in several threads share the silencing: the first to enter disables the
    logger and the last to leave restores its state. ``disabled`` rather than a level:
    a level change clears the cache of every logger in the process, which costs more
    than parsing a small header.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = False
        self._logger = logging.getLogger("tifffile")

    def __call__(self) -> _QuietTifffile:
        return self

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._saved = self._logger.disabled
                self._logger.disabled = True
            self._depth += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._logger.disabled = self._saved


_quiet_tifffile = _QuietTifffile()


def _warn_read(name: str, instead: str) -> None:
    warnings.warn(
        f"TIFFParser.{name} is deprecated and will be removed in the next release; "
        f"use TIFFParser.{instead}",
        VirtualizarrFillDeprecationWarning,
        stacklevel=3,
    )


def _open_tiff(reader: StoreFile, url: str) -> TiffFile:
    try:
        return tifffile.TiffFile(reader, name=url.rsplit("/", 1)[-1])  # type: ignore[arg-type]
    except tifffile.TiffFileError as error:
        head = reader.read_range(0, 4)
        if head[:2] not in (b"II", b"MM"):
            raise NotATiffError(f"{url}: not a TIFF file ({error})") from None
        raise CorruptFileError(f"{url}: unreadable TIFF header ({error})") from None


__all__ = ["TIFFParser"]
