"""The TIFF/GeoTIFF parser: ``TIFFParser()(url, registry) -> ManifestStore``.

Only the header is read (IFDs and tag arrays, through :class:`virtualizarr_fill.io.StoreFile`,
usually in one request); the data stays where it is and the manifest points at it.

The dataset of one image looks like rioxarray's (``xr.open_dataset(path,
engine="rasterio")``): ``band_data`` with dimensions ``(band, y, x)``, coordinates
``band`` (1..N), ``x``/``y`` (pixel centres, when the image has an axis-aligned
georeference) and ``spatial_ref`` (GeoKeys, CRS WKT and GeoTransform). Coordinates are
small arrays held in the manifest itself (inlined chunks), so they load without touching
the file.

Which images:

* by default the store holds the first full-resolution image (or the IFD ``ifd=N``);
* ``tree=True`` builds a hierarchy for :func:`virtualizarr.open_virtual_datatree`: an empty
  root and one sibling group per image (``image``, ``overview_1``..., ``mask``,
  ``mask_overview_1``..., ``page_1``..., ``subifd_0_1``...). Siblings, because xarray's
  DataTree requires a child's dimensions to align with its parent's, which images of
  different sizes cannot;
* ``stack_pages=True`` stacks the file's full-resolution pages (same shape, data type and
  codecs) along a new leading ``page`` dimension;
* ``time_from=...`` gives the image a leading ``time`` dimension of length one and a
  ``time`` coordinate from the DateTime tag, a GDAL metadata item or the file name, for
  stacking scenes (see :mod:`virtualizarr_fill.time_stack`);
* ``overviews="multiscales"`` builds a multiscale group for
  :func:`virtualizarr.open_virtual_datatree`: levels ``"0"`` (full resolution) to ``"n"``
  with their masks, described after the multiscales convention (see
  :mod:`virtualizarr_fill.tiff.pyramid`).

Every image array built is recorded with :func:`virtualizarr_fill.report.record_array`
(edge handling, how the strips or tiles were judged, fill decisions), named
``band_data``, ``<group>/band_data`` (``tree=True``) or ``band_data[page=N]``
(``stack_pages=True``); the CLI's ``inspect`` shows these records.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import tifffile
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore

from virtualizarr_fill.errors import (
    CorruptFileError,
    NotATiffError,
    UnsupportedFeatureError,
    VirtualizarrFillError,
)
from virtualizarr_fill.grid import edge_handling_of
from virtualizarr_fill.io import (
    DEFAULT_FIRST_REQUEST,
    DEFAULT_PARSE_DEADLINE,
    StoreFile,
    normalize_url,
    resolve,
)
from virtualizarr_fill.manifests import FileManifestStore
from virtualizarr_fill.report import ArrayReport, collecting, record_array
from virtualizarr_fill.tiff import caches, chain, geo, images, pyramid, segments, tags
from virtualizarr_fill.tiff.arrays import (
    array_metadata,
    inlined_array,
    kept_arrays,
    manifest_array,
    manifest_group,
)
from virtualizarr_fill.tiff.images import ImageDescription, as_page
from virtualizarr_fill.time_stack import TIME, TIME_ATTRIBUTES, TimeSource, scene_time, time_value
from virtualizarr_fill.zarr_metadata import json_copy

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry
    from tifffile import TiffFile, TiffPage

DATA_VARIABLE = "band_data"
SPATIAL_REF = "spatial_ref"
#: Longest x or y axis whose pixel-centre coordinates are built (512 MiB of float64 each);
#: longer axes only come from damaged image dimensions.
MAX_COORDINATE_LENGTH = 2**26


@dataclass(frozen=True)
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
        Index of the IFD (in the main IFD chain) to expose; default: the first image that
        is neither an overview nor a mask.
    tree
        Build one group per image for :func:`virtualizarr.open_virtual_datatree`: an
        empty root and sibling groups ``image``, ``overview_1``..., ``mask``,
        ``mask_overview_1``..., ``page_1``..., ``subifd_0_1``... (siblings, since images
        of different sizes cannot align as parent and child in a DataTree).
    stack_pages
        Stack all full-resolution pages (same shape, data type and codecs) along a new
        leading ``page`` dimension.
    overviews
        ``"multiscales"``: the full-resolution image and its overviews as a multiscale
        group of levels ``"0"``..``"n"`` (see :mod:`virtualizarr_fill.tiff.pyramid`);
        None (default): as ``ifd``, ``tree`` and ``stack_pages`` say.
    time_from
        Where each scene's time comes from: ``"datetime"`` (the DateTime tag),
        ``"metadata:NAME"`` (a GDAL metadata item) or a regular expression searched in
        the file name (see :mod:`virtualizarr_fill.time_stack`); the image then has a
        leading ``time`` dimension of length one. None (default): no time.
    on_out_of_range
        A nodata value the data type cannot hold (e.g. -10000 on uint8): ``"raise"``
        (default) a :class:`~virtualizarr_fill.errors.FillValueError`, or ``"warn"`` and
        drop it so the file stays readable.
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

    Raises
    ------
    virtualizarr_fill.NotATiffError
        The object is not a TIFF file.
    virtualizarr_fill.CorruptFileError
        The header contradicts itself or the file's size (a truncated file).
    virtualizarr_fill.UnsupportedFeatureError
        A feature no virtual Zarr array can express (named in the message).
    virtualizarr_fill.FillValueError
        A nodata value the data type cannot hold, unless ``on_out_of_range="warn"``.

    Examples
    --------
    >>> registry = ObjectStoreRegistry({"file://": LocalStore()})
    >>> vds = open_virtual_dataset("file:///data/scene.tif", registry=registry,
    ...                            parser=TIFFParser())
    >>> pyramid = open_virtual_datatree("file:///data/cog.tif", registry=registry,
    ...                                 parser=TIFFParser(overviews="multiscales"))
    >>> store = TIFFParser()("file:///data/scene.tif", registry)  # a ManifestStore
    """

    ifd: int | None = None
    tree: bool = False
    stack_pages: bool = False
    overviews: Literal["multiscales"] | None = None
    time_from: str | None = None
    on_out_of_range: Literal["raise", "warn"] = "raise"
    probe_last_strip: bool = True
    first_request: int = DEFAULT_FIRST_REQUEST
    deadline: float | None = DEFAULT_PARSE_DEADLINE

    def __post_init__(self) -> None:
        if self.overviews not in (None, "multiscales"):
            raise ValueError(f"overviews must be None or 'multiscales', got {self.overviews!r}")
        if self.overviews is not None and (self.tree or self.stack_pages or self.ifd is not None):
            raise ValueError("overviews='multiscales' excludes tree, stack_pages and ifd")
        if self.time_from is not None:
            TimeSource.parse(self.time_from)  # a bad pattern fails here, not per file
            if self.tree or self.stack_pages or self.overviews is not None:
                raise ValueError("time_from excludes tree, stack_pages and overviews")

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
            context = _Context(url=url, reader=reader, file_size=file_size, options=self)
            if self.overviews is not None:
                return _multiscale_group(tif, context)
            if self.tree:
                return _tree_group(tif, context)
            if self.stack_pages:
                return _stacked_group(tif, context)
            page = _select_page(tif, self.ifd, context)
            image = _description(_chain_page(page, context), context)
            group = _image_group(image, page, page.index, context, source=_source(url, page.index))
            if self.time_from is not None:
                return _with_time(group, page, image, context, TimeSource.parse(self.time_from))
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


@dataclass(frozen=True)
class _Context:
    url: str
    reader: StoreFile
    file_size: int
    options: TIFFParser
    #: IFDs and IFD-table bytes the parse may still walk (see :mod:`.chain`).
    budget: chain.IFDBudget = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", chain.IFDBudget(self.file_size))


def _source(url: str, index: int) -> str:
    """The file, and the IFD's index after the first, as error messages name them."""
    return f"{url} (IFD {index})" if index else url


def _describe(page: TiffPage, context: _Context, source: str) -> ImageDescription:
    return images.describe_image(
        page,
        source,
        on_out_of_range=context.options.on_out_of_range,
        cached_range=context.reader.cached_range,
        head=context.reader.first_block(),
    )


def _description(chained: images.ChainImage, context: _Context) -> ImageDescription:
    """The description of an IFD of the main chain: the one known for its stored tags,
    else derived from its page (and kept for the IFDs that store the same tags)."""
    if chained.known is not None:
        return chained.known
    assert chained.page is not None
    image = _describe(chained.page, context, _source(context.url, chained.index))
    images.remember(chained.key, image)
    return image


def _chain_page(page: TiffPage, context: _Context) -> images.ChainImage:
    return images.chain_page(page, context.reader.cached_range, context.reader.first_block())


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


def _open_tiff(reader: StoreFile, url: str) -> TiffFile:
    try:
        return tifffile.TiffFile(reader, name=url.rsplit("/", 1)[-1])  # type: ignore[arg-type]
    except tifffile.TiffFileError as error:
        head = reader.read_range(0, 4)
        if head[:2] not in (b"II", b"MM"):
            raise NotATiffError(f"{url}: not a TIFF file ({error})") from None
        raise CorruptFileError(f"{url}: unreadable TIFF header ({error})") from None


def _is_main_image(page: TiffPage) -> bool:
    return not (page.is_reduced or page.is_mask)


def _chain_pages(tif: TiffFile, context: _Context) -> Iterator[TiffPage]:
    """Every IFD of the main chain, walked with a cycle check and a budget."""
    walk = chain.walk_main_chain(tif, context.reader, context.budget)
    chain.warn_stopped(walk, context.url)
    return chain.main_pages(tif, walk)


def _main_pages(tif: TiffFile, context: _Context) -> list[TiffPage]:
    return [page for page in _chain_pages(tif, context) if _is_main_image(page)]


def _select_page(tif: TiffFile, ifd: int | None, context: _Context) -> TiffPage:
    url = context.url
    if ifd is not None:
        walk = chain.walk_main_chain(tif, context.reader, context.budget)
        if not 0 <= ifd < len(walk):
            if ifd > 0 and walk.stopped is not None:
                raise CorruptFileError(
                    f"{url}: IFD {ifd} cannot be reached: {walk.stopped} (the chain "
                    f"holds {len(walk)} IFDs before that point)"
                )
            raise UnsupportedFeatureError(
                f"{url}: IFD {ifd} does not exist (the file has {len(walk)} IFDs)"
            )
        return as_page(tif.pages[ifd])
    try:
        # Not len(tif.pages): counting walks the whole IFD chain.
        first = as_page(tif.pages.first)
    except IndexError:
        raise CorruptFileError(f"{url}: the IFD chain holds no image") from None
    if _is_main_image(first):
        return first
    for page in _chain_pages(tif, context):
        if _is_main_image(page):
            return page
    return first


# -- one image -----------------------------------------------------------------------------


def _image_array(
    image: ImageDescription,
    table: segments.SegmentTable,
    index: int,
    context: _Context,
    source: str,
    extra_attributes: dict[str, Any],
    name: str = DATA_VARIABLE,
) -> ManifestArray:
    """``band_data`` of IFD ``index``, whose segments ``table`` lists; ``name`` labels it
    in the parse report."""
    band = image.band
    layout, chain, attrs = band.layout, band.chain, band.attributes
    dtype = band.sample.dtype
    # Segments past the end of the file are refused before their lengths are judged.
    manifest = segments.chunk_manifest(table, layout, context.url, context.file_size, source)
    decision = segments.decide_grid(
        table,
        layout,
        chain,
        band.sample.stored_dtype.itemsize,
        context.reader.read_range,
        source,
        probe_last_strip=context.options.probe_last_strip,
    )
    band_metadata = array_metadata(
        shape=layout.shape,
        dtype=dtype,
        chunk_grid=decision.chunk_grid,
        fill_value=attrs.fill.fill_value,
        codecs=decision.codecs,
        attributes=json_copy(attrs.attributes) | extra_attributes,
        dimension_names=("band", "y", "x"),
    )
    if collecting():
        record_array(
            ArrayReport(
                url=context.url,
                name=name,
                edge_handling=edge_handling_of(decision.codecs).name.lower(),
                padding_notes=(_padding_note(index, layout, decision),),
                fill_notes=attrs.fill.notes,
            )
        )
    return manifest_array(band_metadata, manifest)


def _padding_note(index: int, layout: tags.SegmentLayout, decision: segments.GridDecision) -> str:
    """How the IFD's segments tile the image, and the grid decision with its reason."""
    _, rows, cols = layout.chunk_shape
    height, width = layout.shape[1:]
    ifd = f"IFD {index}: "
    if layout.tiled:
        overhang = height % rows or width % cols
        how = "edge tiles overhang the image" if overhang else "tiles divide the image"
        return (
            f"{ifd}{rows}x{cols} tiles over {height}x{width} pixels, stored full size "
            f"({how}): regular grid"
        )
    last = layout.last_strip_rows
    return (
        f"{ifd}strips of {rows} rows over {height} rows, the last holding {last}: {decision.reason}"
    )


def _image_group(
    image: ImageDescription,
    table: segments.SegmentTable,
    index: int,
    context: _Context,
    *,
    source: str,
    ifd: int | list[int] | None = None,
    parent: ImageDescription | None = None,
    report_name: str = DATA_VARIABLE,
) -> ManifestGroup:
    """The group of IFD ``index``; ``parent`` georeferences overviews and masks."""
    georef = _georeference(image, parent)
    band_data = _image_array(
        image, table, index, context, source, _grid_mapping_attributes(georef), name=report_name
    )
    arrays = {DATA_VARIABLE: band_data, **_coordinate_arrays(georef, band_data.shape, context.url)}
    attributes = _group_attributes(georef, index if ifd is None else ifd)
    return manifest_group(arrays=arrays, attributes=attributes)


def _group_attributes(georef: geo.Georeference, ifd: Any) -> dict[str, Any]:
    # SubIFDs are addressed by a path of indices (IFD, SubIFD).
    attrs: dict[str, Any] = {
        "tiff_ifd": int(ifd) if isinstance(ifd, int) else [int(i) for i in ifd]
    }
    raster_type = georef.geokeys.get("GTRasterTypeGeoKey")
    if raster_type in (1, 2):
        attrs["AREA_OR_POINT"] = "Point" if raster_type == geo.PIXEL_IS_POINT else "Area"
    return attrs


def _georeference(image: ImageDescription, parent: ImageDescription | None) -> geo.Georeference:
    """The image's own georeference, or for an overview/mask without one, the parent's
    scaled to the image's size (as GDAL georeferences overviews)."""
    own = image.georeference
    if parent is None or own.is_georeferenced:
        return own
    return geo.inherited_georeference(
        parent.georeference, (parent.height, parent.width), (image.height, image.width)
    )


def _grid_mapping_attributes(georef: geo.Georeference) -> dict[str, Any]:
    """``band_data`` attributes naming ``spatial_ref`` (CF grid mapping and coordinate)."""
    if not georef.is_georeferenced:
        return {}
    return {"grid_mapping": SPATIAL_REF, "coordinates": SPATIAL_REF}


def _coordinate_arrays(
    georef: geo.Georeference, shape: tuple[int, ...], url: str
) -> dict[str, ManifestArray]:
    """Inlined ``band``, ``x``, ``y`` and ``spatial_ref`` arrays for an image of ``shape``.

    Files of one archive share their grid: the arrays are built once per georeference
    and shape (see :func:`~virtualizarr_fill.tiff.arrays.kept_arrays`).
    """
    bands, height, width = shape[-3:]
    if georef.transform is not None and georef.axis_aligned:
        _check_coordinate_length(height, width, url)
    content = georef.content_key if caches.ENABLED else None
    key = None if content is None else ("coordinates", content, bands, height, width)
    return kept_arrays(key, lambda: _build_coordinate_arrays(georef, bands, height, width))


def _check_coordinate_length(height: int, width: int, url: str) -> None:
    if max(height, width) > MAX_COORDINATE_LENGTH:
        raise CorruptFileError(
            f"{url}: image of {height}x{width} pixels; x/y coordinates are limited to "
            f"{MAX_COORDINATE_LENGTH} values (a damaged ImageWidth or ImageLength?)"
        )


def _build_coordinate_arrays(
    georef: geo.Georeference, bands: int, height: int, width: int
) -> dict[str, ManifestArray]:
    arrays: dict[str, ManifestArray] = {}
    arrays["band"] = inlined_array(np.arange(1, bands + 1, dtype=np.int64), ("band",))
    if georef.transform is not None and georef.axis_aligned:
        x, y = geo.pixel_centres(georef.transform, height, width)
        arrays["x"] = inlined_array(x, ("x",))
        arrays["y"] = inlined_array(y, ("y",))
    if georef.is_georeferenced:
        arrays[SPATIAL_REF] = inlined_array(
            np.array(0, dtype=np.int64), (), attributes=geo.spatial_ref_attributes(georef)
        )
    return arrays


def _with_time(
    group: ManifestGroup,
    page: TiffPage,
    image: ImageDescription,
    context: _Context,
    source: TimeSource,
) -> ManifestGroup:
    """``group`` with a leading ``time`` axis of length one on ``band_data`` and the
    scene's CF-encoded ``time`` coordinate."""
    when = scene_time(source, context.url, page.tags, image.band.attributes.attributes)
    arrays = dict(group.arrays)
    band_data = arrays[DATA_VARIABLE]
    stacked: ManifestArray = np.stack([band_data], axis=0)  # type: ignore[call-overload,assignment]
    metadata = dataclasses.replace(
        stacked.metadata, dimension_names=(TIME, *(band_data.metadata.dimension_names or ()))
    )
    arrays[DATA_VARIABLE] = manifest_array(metadata, stacked.manifest)
    arrays[TIME] = inlined_array(
        np.array([time_value(when)], dtype=np.int64), (TIME,), attributes=dict(TIME_ATTRIBUTES)
    )
    return manifest_group(arrays=arrays, attributes=dict(group.metadata.attributes))


# -- several images --------------------------------------------------------------------------


@dataclass(frozen=True)
class _NamedImage:
    name: str
    image: ImageDescription
    table: segments.SegmentTable
    index: int
    ifd: int | list[int]
    parent: ImageDescription | None


def _tree_group(tif: TiffFile, context: _Context) -> ManifestGroup:
    groups: dict[str, ManifestGroup] = {}
    for named in _named_images(tif, context):
        groups[named.name] = _image_group(
            named.image,
            named.table,
            named.index,
            context,
            source=_source(context.url, named.index),
            ifd=named.ifd,
            parent=named.parent,
            report_name=f"{named.name}/{DATA_VARIABLE}",
        )
    return manifest_group(groups=groups, attributes={})


def _named_images(
    tif: TiffFile, context: _Context, *, first_pyramid: bool = False
) -> list[_NamedImage]:
    """Every image of the file with a group name describing its role (``first_pyramid``:
    only the first full-resolution image, its overviews and masks).

    Overviews and masks follow the full-resolution image they belong to (COG order);
    SubIFDs are named after the image that holds them.
    """
    named: list[_NamedImage] = []
    main_count = 0
    base = "image"
    main: ImageDescription | None = None
    overview = mask_overview = 0
    reader = context.reader
    chained_images = images.main_chain(
        tif, reader.cached_range, reader.first_block(), lambda: _chain_pages(tif, context)
    )
    for chained in chained_images:
        index = chained.index
        context.budget.seen.add(int(chained.segments.offset))  # type: ignore[attr-defined]
        image = _description(chained, context)
        parent = main
        if image.is_main:
            if first_pyramid and main_count:
                break
            base = "image" if main_count == 0 else f"page_{main_count}"
            main_count += 1
            overview = mask_overview = 0
            name, main, parent = base, image, None
        elif image.is_mask and image.is_reduced:
            mask_overview += 1
            name = f"{_prefix(base)}mask_overview_{mask_overview}"
        elif image.is_mask:
            name = f"{_prefix(base)}mask"
        else:
            overview += 1
            name = f"{_prefix(base)}overview_{overview}"
        named.append(_NamedImage(name, image, chained.segments, index, index, parent))
        if first_pyramid:
            continue
        page = chained.page
        subifds = [] if page is None else chain.subifd_pages(page, context.budget, context.url)
        for number, sub_page in enumerate(subifds):
            source = _source(context.url, sub_page.index)
            named.append(
                _NamedImage(
                    f"{name}_subifd_{number}",
                    _describe(sub_page, context, source),
                    sub_page,
                    sub_page.index,
                    [index, number],
                    image,
                )
            )
    return named


def _multiscale_group(tif: TiffFile, context: _Context) -> ManifestGroup:
    """The first pyramid of the file as a multiscale group (see :mod:`.pyramid`)."""
    images = []
    transform = None
    pyramid_images = _named_images(tif, context, first_pyramid=True)
    levels = pyramid.level_names([(n.name, n.image.height, n.image.width) for n in pyramid_images])
    for named in pyramid_images:
        variable = pyramid.MASK_VARIABLE if named.name.startswith("mask") else DATA_VARIABLE
        group = _image_group(
            named.image,
            named.table,
            named.index,
            context,
            source=_source(context.url, named.index),
            ifd=named.ifd,
            parent=named.parent,
            report_name=f"{levels.get(named.name, named.name)}/{variable}",
        )
        image = named.image
        images.append(pyramid.PyramidImage(named.name, image.height, image.width, group))
        if named.name == "image" and image.georeference.transform is not None:
            transform = tuple(image.georeference.transform)
    return pyramid.multiscale_group(images, context.url, transform)


def _prefix(base: str) -> str:
    return "" if base == "image" else f"{base}_"


def _stacked_group(tif: TiffFile, context: _Context) -> ManifestGroup:
    """Full-resolution pages stacked along a new leading ``page`` dimension."""
    pages = _main_pages(tif, context)
    descriptions = [_description(_chain_page(page, context), context) for page in pages]
    georef = descriptions[0].georeference
    grid_mapping = _grid_mapping_attributes(georef)
    arrays = [
        _image_array(
            image,
            page,
            page.index,
            context,
            _source(context.url, page.index),
            grid_mapping,
            name=f"{DATA_VARIABLE}[page={number}]",
        )
        for number, (image, page) in enumerate(zip(descriptions, pages, strict=True))
    ]
    try:
        stacked: ManifestArray = np.stack(arrays, axis=0)  # type: ignore[call-overload,assignment]
    except (ValueError, NotImplementedError) as error:
        raise UnsupportedFeatureError(
            f"{context.url}: pages differ in shape, data type, codecs, chunking or fill "
            f"value and cannot be stacked ({error})"
        ) from None
    stacked_metadata = dataclasses.replace(
        stacked.metadata, dimension_names=("page", "band", "y", "x")
    )
    band_data = manifest_array(stacked_metadata, stacked.manifest)
    arrays_out = {
        DATA_VARIABLE: band_data,
        **_coordinate_arrays(georef, band_data.shape, context.url),
    }
    arrays_out["page"] = inlined_array(np.arange(len(arrays), dtype=np.int64), ("page",))
    return manifest_group(arrays=arrays_out, attributes=_group_attributes(georef, pages[0].index))


__all__ = ["DATA_VARIABLE", "SPATIAL_REF", "TIFFParser"]
