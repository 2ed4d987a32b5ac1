"""What the parser takes from one IFD's tags (:class:`ImageDescription`), and the IFDs of a
file's main chain, each with its description when an IFD that stores the same tags was
described before.

A COG's overviews and masks each cost tifffile a full parse of their IFD (``TiffPage``),
about as much as everything the parser then derives from it. In an archive, each pyramid
level's IFD stores the same tags file after file, but for where its segments lie. Such an
IFD, recognised by its entry table as stored (:func:`.stored_tags.stored_main_chain`),
is read as a ``TiffFrame``: tifffile reads only its segment offsets and byte counts, and
the description comes from the earlier parse. The first IFD, which tifffile parses on
opening the file, takes a known description the same way rather than deriving it again.
IFDs seen for the first time, IFDs with SubIFDs and chains that leave the bytes already
fetched are parsed by tifffile in full and described afresh.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import tifffile

from virtualizarr_fill.tiff import caches, geo
from virtualizarr_fill.tiff.band_descriptions import BandDescription, describe_band
from virtualizarr_fill.tiff.stored_tags import CachedRange, main_chain_key, stored_main_chain

if TYPE_CHECKING:
    from tifffile import TiffFile, TiffFrame, TiffPage

    from virtualizarr_fill.tiff.segments import SegmentTable


@dataclass(frozen=True)
class ImageDescription:
    """One IFD's role, size, band array description and own georeference: everything
    the parser derives from its tags but where its segments lie. Read-only, shared
    between the IFDs that store the same tags."""

    is_reduced: bool
    is_mask: bool
    height: int
    width: int
    band: BandDescription
    georeference: geo.Georeference

    @property
    def is_main(self) -> bool:
        """Neither an overview nor a mask."""
        return not (self.is_reduced or self.is_mask)


def describe_image(
    page: TiffPage,
    source: str,
    *,
    on_out_of_range: Literal["raise", "warn"],
    cached_range: CachedRange | None,
    head: bytes | memoryview = b"",
) -> ImageDescription:
    """The description of ``page`` (raises for an IFD the parser refuses, naming ``source``)."""
    band = describe_band(
        page, source, on_out_of_range=on_out_of_range, cached_range=cached_range, head=head
    )
    return ImageDescription(
        is_reduced=bool(page.is_reduced),
        is_mask=bool(page.is_mask),
        height=int(page.imagelength),
        width=int(page.imagewidth),
        band=band,
        georeference=geo.georeference(page, cached_range),
    )


@dataclass(frozen=True)
class ChainImage:
    """One IFD of the main chain: its index, where its segments lie, its full tifffile
    parse (``page``) and/or the description of an IFD that stores the same tags
    (``known``; the first IFD has both)."""

    index: int
    segments: SegmentTable
    page: TiffPage | None
    known: ImageDescription | None
    #: The IFD's stored tags, under which a description of ``page`` may be kept.
    key: Hashable | None = None


#: Descriptions kept by their IFD's stored tags.
KNOWN_IMAGES_SIZE = 256
_known: caches.ResultCache[ImageDescription] = caches.ResultCache(KNOWN_IMAGES_SIZE)


def main_chain(
    tif: TiffFile,
    cached_range: CachedRange,
    head: bytes | memoryview,
    pages: Callable[[], Iterable[TiffPage]],
) -> Iterator[ChainImage]:
    """Every IFD of the main chain, in file order (see the module docstring). Lazily: a
    description :func:`remember` ed for one IFD serves the later IFDs of the same file
    that store the same tags (the pages of a stack). ``head`` is the start of the file
    as fetched (``StoreFile.first_block``); ``pages`` lists tifffile's full parse of
    each IFD where the stored chain cannot be read (a chain walked with a cycle check,
    :func:`.chain.main_pages`)."""
    stored = stored_main_chain(tif, cached_range, head) if caches.ENABLED else None
    if stored is None:
        for index, full in enumerate(pages()):
            yield ChainImage(index, full, full, None)
        return
    for index, ifd in enumerate(stored):
        known = _known.get(ifd.key)
        if index == 0:  # parsed by tifffile on opening the file
            first = tif.pages.first
            yield ChainImage(0, first, first, known, ifd.key)
        elif known is not None and _lists_every_segment(
            frame := tifffile.TiffFrame(tif, index, offset=ifd.offset), known
        ):
            yield ChainImage(index, frame, None, known)
        else:
            # Seen for the first time, or a segment table tifffile could not read: the
            # full parse describes it, or refuses it naming the tag.
            page = as_page(tif.pages[index])
            yield ChainImage(index, page, page, None, ifd.key)


def _lists_every_segment(frame: TiffFrame, known: ImageDescription) -> bool:
    """Whether tifffile read an offset and a byte count for every segment of the image
    (it leaves out a table it cannot read, such as one past the end of the file)."""
    count = math.prod(known.band.layout.grid_shape)
    return len(frame.dataoffsets) == count and len(frame.databytecounts) == count


def chain_page(
    page: TiffPage, cached_range: CachedRange, head: bytes | memoryview = b""
) -> ChainImage:
    """``page`` of the main chain, as tifffile parsed it, with the description of an
    IFD described before that stores the same tags, if any (as :func:`main_chain`)."""
    key = main_chain_key(page, cached_range, head) if caches.ENABLED else None
    return ChainImage(page.index, page, page, _known.get(key), key)


def remember(key: Hashable | None, description: ImageDescription) -> None:
    """Keep ``description`` for later IFDs whose stored tags give ``key`` (only
    descriptions reached without a warning, whose band arrays are complete)."""
    if description.band.attributes.reusable:
        _known.put(key, description)


def clear_cache() -> None:
    """Forget the descriptions kept by :func:`remember`."""
    _known.clear()


def as_page(page: TiffPage | TiffFrame) -> TiffPage:
    """``page`` as a full tifffile parse of its IFD."""
    if isinstance(page, tifffile.TiffFrame):
        return page.aspage()  # type: ignore[no-any-return]
    return page


__all__ = [
    "KNOWN_IMAGES_SIZE",
    "ChainImage",
    "ImageDescription",
    "as_page",
    "clear_cache",
    "describe_image",
    "chain_page",
    "main_chain",
    "remember",
]
