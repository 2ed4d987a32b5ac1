"""What an IFD's tags decide about its ``band_data`` array before its segments are
looked at: data type, segment layout, codecs, attributes and fill value.

Deriving these costs about as much as tifffile's own parse of the IFD. The files of one
archive, and the overviews of one pyramid level across files, repeat them, so they are
kept by the IFD's stored tags (:func:`.stored_tags.ifd_key`) but the geo tags, so that
differently placed scenes of one product share them; where the segments lie, and the
grid decision that depends on their byte counts, stay with each parse.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.tiff import caches, codec_samples, codecs_map, tags
from virtualizarr_fill.tiff.geo import GEO_TAG_CODES
from virtualizarr_fill.tiff.metadata import ArrayAttributes, array_attributes
from virtualizarr_fill.tiff.stored_tags import CachedRange, ifd_key

if TYPE_CHECKING:
    from tifffile import TiffPage


@dataclass(frozen=True)
class BandDescription:
    """The tag-derived parts of one IFD's ``band_data``, shared between the IFDs that
    store the same tags: read-only (copy ``attributes.attributes`` before changing it)."""

    sample: tags.SampleType
    layout: tags.SegmentLayout
    chain: codecs_map.CodecChain
    attributes: ArrayAttributes


#: Descriptions kept by their IFD's stored tags.
DESCRIPTION_CACHE_SIZE = 256
_descriptions: caches.ResultCache[BandDescription] = caches.ResultCache(DESCRIPTION_CACHE_SIZE)


def describe_band(
    page: TiffPage,
    source: str,
    *,
    on_out_of_range: Literal["raise", "warn"],
    cached_range: CachedRange | None,
    head: bytes | memoryview = b"",
) -> BandDescription:
    """Data type, layout, codecs and attributes of ``page``'s band array; raises for an
    IFD the parser refuses (naming ``source``).

    With ``cached_range`` (and ``head``, see :func:`.stored_tags.ifd_key`) a description
    reached without a warning is kept by the IFD's stored tags and handed out again to
    IFDs that store the same.
    """
    # The one check whose outcome the stored tags do not show: an entry tifffile dropped.
    tags.check_unreadable_tags(page, source)
    key: Hashable | None = None
    if cached_range is not None and caches.ENABLED:
        stored = ifd_key(page, cached_range, head, ignore=GEO_TAG_CODES)
        key = None if stored is None else (stored, on_out_of_range)
        known = _descriptions.get(key)
        if known is not None:
            return known
    description = _derive(page, source, on_out_of_range, cached_range)
    if description.attributes.reusable:
        _descriptions.put(key, description)
    return description


def _derive(
    page: TiffPage,
    source: str,
    on_out_of_range: Literal["raise", "warn"],
    cached_range: CachedRange | None,
) -> BandDescription:
    endian = "little" if page.parent.byteorder == "<" else "big"
    sample = tags.sample_type(page, source, image_codec=codecs_map.is_image_compression(page))
    codec_samples.check_codec_samples(page, sample, source)
    layout = tags.segment_layout(page, source)
    if page.is_subsampled and int(page.compression) not in codecs_map.JPEG_FAMILY:
        raise UnsupportedFeatureError(f"{source}: chroma-subsampled YCbCr without JPEG compression")
    chain = codecs_map.codec_chain(
        page,
        layout,
        sample.stored_dtype,
        endian,  # type: ignore[arg-type]
        source,
        packed_bits=sample.bits if sample.packed else None,
        decoded_dtype=sample.dtype,
    )
    attributes = array_attributes(
        page,
        sample.dtype,
        layout.samples,
        source,
        on_out_of_range=on_out_of_range,
        cached_range=cached_range,
    )
    return BandDescription(sample, layout, chain, attributes)


def clear_cache() -> None:
    """Forget the descriptions kept by :func:`describe_band`."""
    _descriptions.clear()


__all__ = ["DESCRIPTION_CACHE_SIZE", "BandDescription", "clear_cache", "describe_band"]
