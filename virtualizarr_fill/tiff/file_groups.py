"""Which images of a TIFF a store holds, and how their groups are arranged.

* :func:`select_page`: one image, the IFD ``ifd=N`` or the first full-resolution image;
* :func:`tree_group`: every image as a sibling group (``image``, ``overview_1``...,
  ``mask``, ``mask_overview_1``..., ``page_1``..., ``subifd_0_1``...), for
  :func:`virtualizarr.open_virtual_datatree`;
* :func:`stacked_group`: the full-resolution pages stacked along a new ``page`` axis;
* :func:`multiscale_group`: the first pyramid as multiscale levels (:mod:`.pyramid`).

The IFD chain is walked with a cycle check and a budget (:mod:`.chain`); each image's
group is built by :mod:`.image_groups`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from virtualizarr.manifests import ManifestArray, ManifestGroup

from virtualizarr_fill.errors import CorruptFileError, UnsupportedFeatureError
from virtualizarr_fill.tiff import chain, pyramid, segments
from virtualizarr_fill.tiff import image_descriptions as images
from virtualizarr_fill.tiff.arrays import inlined_array, manifest_array, manifest_group
from virtualizarr_fill.tiff.image_descriptions import ImageDescription, as_page
from virtualizarr_fill.tiff.image_groups import (
    DATA_VARIABLE,
    ParseContext,
    chain_page,
    coordinate_arrays,
    describe_chained,
    describe_page,
    grid_mapping_attributes,
    group_attributes,
    image_array,
    image_group,
    source_name,
)

if TYPE_CHECKING:
    from tifffile import TiffFile, TiffPage


def _is_main_image(page: TiffPage) -> bool:
    return not (page.is_reduced or page.is_mask)


def _chain_pages(tif: TiffFile, context: ParseContext) -> Iterator[TiffPage]:
    """Every IFD of the main chain, walked with a cycle check and a budget."""
    walk = chain.walk_main_chain(tif, context.reader, context.budget)
    chain.warn_stopped(walk, context.url)
    return chain.main_pages(tif, walk)


def _main_pages(tif: TiffFile, context: ParseContext) -> list[TiffPage]:
    return [page for page in _chain_pages(tif, context) if _is_main_image(page)]


def select_page(tif: TiffFile, ifd: int | None, context: ParseContext) -> TiffPage:
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


@dataclass(frozen=True)
class _NamedImage:
    name: str
    image: ImageDescription
    table: segments.SegmentTable
    index: int
    ifd: int | list[int]
    parent: ImageDescription | None


def _named_group(named: _NamedImage, context: ParseContext, report_name: str) -> ManifestGroup:
    """The group of one image found by :func:`_named_images`."""
    return image_group(
        named.image,
        named.table,
        named.index,
        context,
        source=source_name(context.url, named.index),
        ifd=named.ifd,
        parent=named.parent,
        report_name=report_name,
    )


def tree_group(tif: TiffFile, context: ParseContext) -> ManifestGroup:
    groups: dict[str, ManifestGroup] = {}
    for named in _named_images(tif, context):
        groups[named.name] = _named_group(named, context, f"{named.name}/{DATA_VARIABLE}")
    return manifest_group(groups=groups, attributes={})


def _named_images(
    tif: TiffFile, context: ParseContext, *, first_pyramid: bool = False
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
        image = describe_chained(chained, context)
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
            source = source_name(context.url, sub_page.index)
            named.append(
                _NamedImage(
                    f"{name}_subifd_{number}",
                    describe_page(sub_page, context, source),
                    sub_page,
                    sub_page.index,
                    [index, number],
                    image,
                )
            )
    return named


def multiscale_group(tif: TiffFile, context: ParseContext) -> ManifestGroup:
    """The first pyramid of the file as a multiscale group (see :mod:`.pyramid`)."""
    images = []
    transform = None
    pyramid_images = _named_images(tif, context, first_pyramid=True)
    levels = pyramid.level_names([(n.name, n.image.height, n.image.width) for n in pyramid_images])
    for named in pyramid_images:
        variable = pyramid.MASK_VARIABLE if named.name.startswith("mask") else DATA_VARIABLE
        group = _named_group(named, context, f"{levels.get(named.name, named.name)}/{variable}")
        image = named.image
        images.append(pyramid.PyramidImage(named.name, image.height, image.width, group))
        if named.name == "image" and image.georeference.transform is not None:
            transform = tuple(image.georeference.transform)
    return pyramid.multiscale_group(images, context.url, transform)


def _prefix(base: str) -> str:
    return "" if base == "image" else f"{base}_"


def stacked_group(tif: TiffFile, context: ParseContext) -> ManifestGroup:
    """Full-resolution pages stacked along a new leading ``page`` dimension."""
    pages = _main_pages(tif, context)
    descriptions = [describe_chained(chain_page(page, context), context) for page in pages]
    georef = descriptions[0].georeference
    grid_mapping = grid_mapping_attributes(georef)
    arrays = [
        image_array(
            image,
            page,
            page.index,
            context,
            source_name(context.url, page.index),
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
        **coordinate_arrays(georef, band_data.shape, context.url),
    }
    arrays_out["page"] = inlined_array(np.arange(len(arrays), dtype=np.int64), ("page",))
    return manifest_group(arrays=arrays_out, attributes=group_attributes(georef, pages[0].index))


__all__ = ["multiscale_group", "select_page", "stacked_group", "tree_group"]
