"""The group of one TIFF image, shaped as rioxarray opens it.

``band_data`` with dimensions ``(band, y, x)``: its chunk manifest and grid come from the
IFD's strips or tiles (:mod:`.segments`, :mod:`.segment_grids`), its codecs and
attributes from the image's description (:mod:`.images`). Beside it the coordinates
``band`` (1..N), ``x``/``y`` (pixel centres, when the image has an axis-aligned
georeference) and ``spatial_ref`` (GeoKeys, CRS WKT and GeoTransform), small arrays held
in the manifest itself (inlined chunks) so that they load without touching the file.
An overview or mask without a georeference of its own takes its parent's, scaled. Every
``band_data`` built is recorded with :func:`virtualizarr_fill.report.record_array`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from virtualizarr.manifests import ManifestArray, ManifestGroup

from virtualizarr_fill.errors import CorruptFileError
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.report import ArrayReport, collecting, record_array
from virtualizarr_fill.tiff import (
    caches,
    chain,
    geo,
    segment_grids,
    segments,
    tags,
)
from virtualizarr_fill.tiff import (
    image_descriptions as images,
)
from virtualizarr_fill.tiff.arrays import (
    array_metadata,
    inlined_array,
    kept_arrays,
    manifest_array,
    manifest_group,
)
from virtualizarr_fill.tiff.image_descriptions import ImageDescription
from virtualizarr_fill.tiff.scene_time import (
    TIME,
    TIME_ATTRIBUTES,
    TimeSource,
    scene_time,
    time_value,
)
from virtualizarr_fill.zarr_model.edge_codecs import edge_handling_of
from virtualizarr_fill.zarr_model.json_values import json_copy

if TYPE_CHECKING:
    from tifffile import TiffPage

DATA_VARIABLE = "band_data"
SPATIAL_REF = "spatial_ref"
#: Longest x or y axis whose pixel-centre coordinates are built (512 MiB of float64 each);
#: longer axes only come from damaged image dimensions.
MAX_COORDINATE_LENGTH = 2**26


@dataclass(frozen=True)
class ParseContext:
    """What the parse of one file shares: the file, its reader and size, the parser's
    options that reach single images, and the IFD budget."""

    url: str
    reader: StoreFile
    file_size: int
    on_out_of_range: Literal["raise", "warn"]
    probe_last_strip: bool
    #: IFDs and IFD-table bytes the parse may still walk (see :mod:`.chain`).
    budget: chain.IFDBudget = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", chain.IFDBudget(self.file_size))


def source_name(url: str, index: int) -> str:
    """The file, and the IFD's index after the first, as error messages name them."""
    return f"{url} (IFD {index})" if index else url


def describe_page(page: TiffPage, context: ParseContext, source: str) -> ImageDescription:
    """The description of the IFD ``page``; ``source`` names it in messages."""
    return images.describe_image(
        page,
        source,
        on_out_of_range=context.on_out_of_range,
        cached_range=context.reader.cached_range,
        head=context.reader.first_block(),
    )


def describe_chained(chained: images.ChainImage, context: ParseContext) -> ImageDescription:
    """The description of an IFD of the main chain: the one known for its stored tags,
    else derived from its page (and kept for the IFDs that store the same tags)."""
    if chained.known is not None:
        return chained.known
    assert chained.page is not None
    image = describe_page(chained.page, context, source_name(context.url, chained.index))
    images.remember(chained.key, image)
    return image


def chain_page(page: TiffPage, context: ParseContext) -> images.ChainImage:
    """``page`` as an IFD of the main chain, with the description already known for its
    stored tags (if any)."""
    return images.chain_page(page, context.reader.cached_range, context.reader.first_block())


def image_array(
    image: ImageDescription,
    table: segments.SegmentTable,
    index: int,
    context: ParseContext,
    source: str,
    extra_attributes: dict[str, Any],
    name: str = DATA_VARIABLE,
) -> ManifestArray:
    """``band_data`` of IFD ``index``, whose segments ``table`` lists; ``name`` labels it
    in the parse report."""
    band = image.band
    layout, chain, attrs = band.layout, band.chain, band.attributes
    dtype = band.sample.dtype
    table = segments.as_gdal_reads(table, layout, chain, band.sample.stored_dtype.itemsize, source)
    # Segments past the end of the file are refused before their lengths are judged.
    manifest = segments.chunk_manifest(table, layout, context.url, context.file_size, source)
    decision = segment_grids.decide_grid(
        table,
        layout,
        chain,
        band.sample.stored_dtype.itemsize,
        context.reader.read_range,
        source,
        probe_last_strip=context.probe_last_strip,
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


def _padding_note(
    index: int, layout: tags.SegmentLayout, decision: segment_grids.GridDecision
) -> str:
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


def image_group(
    image: ImageDescription,
    table: segments.SegmentTable,
    index: int,
    context: ParseContext,
    *,
    source: str,
    ifd: int | list[int] | None = None,
    parent: ImageDescription | None = None,
    report_name: str = DATA_VARIABLE,
) -> ManifestGroup:
    """The group of IFD ``index``; ``parent`` georeferences overviews and masks."""
    georef = _georeference(image, parent)
    band_data = image_array(
        image, table, index, context, source, grid_mapping_attributes(georef), name=report_name
    )
    arrays = {DATA_VARIABLE: band_data, **coordinate_arrays(georef, band_data.shape, context.url)}
    attributes = group_attributes(georef, index if ifd is None else ifd)
    return manifest_group(arrays=arrays, attributes=attributes)


def group_attributes(georef: geo.Georeference, ifd: Any) -> dict[str, Any]:
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


def grid_mapping_attributes(georef: geo.Georeference) -> dict[str, Any]:
    """``band_data`` attributes naming ``spatial_ref`` (CF grid mapping and coordinate)."""
    if not georef.is_georeferenced:
        return {}
    return {"grid_mapping": SPATIAL_REF, "coordinates": SPATIAL_REF}


def coordinate_arrays(
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


def with_time(
    group: ManifestGroup,
    page: TiffPage,
    image: ImageDescription,
    context: ParseContext,
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


__all__ = [
    "DATA_VARIABLE",
    "SPATIAL_REF",
    "ParseContext",
    "chain_page",
    "coordinate_arrays",
    "describe_chained",
    "describe_page",
    "grid_mapping_attributes",
    "group_attributes",
    "image_array",
    "image_group",
    "source_name",
    "with_time",
]
