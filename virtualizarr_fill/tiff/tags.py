"""TIFF header fields mapped to array properties: data type, byte order, segment layout.

Each function maps one group of tags and refuses, with
:class:`~virtualizarr_fill.errors.UnsupportedFeatureError`, what a virtual Zarr array
cannot express, so that unsupported files fail while parsing and never while reading.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from virtualizarr_fill.errors import CorruptFileError, UnsupportedFeatureError

if TYPE_CHECKING:
    from tifffile import TiffFile, TiffPage

Endian = Literal["little", "big"]

# SampleFormat (tag 339) values.
SAMPLEFORMAT_UINT = 1
SAMPLEFORMAT_INT = 2
SAMPLEFORMAT_IEEEFP = 3
SAMPLEFORMAT_VOID = 4
SAMPLEFORMAT_COMPLEXINT = 5
SAMPLEFORMAT_COMPLEXIEEEFP = 6

_KIND_OF_SAMPLEFORMAT = {
    SAMPLEFORMAT_UINT: "u",
    SAMPLEFORMAT_VOID: "u",  # "undefined" samples read as unsigned integers, as GDAL does
    SAMPLEFORMAT_INT: "i",
    SAMPLEFORMAT_IEEEFP: "f",
    SAMPLEFORMAT_COMPLEXIEEEFP: "c",
}
_SUPPORTED_BITS = {
    "u": {8, 16, 32, 64},
    "i": {8, 16, 32, 64},
    "f": {16, 32, 64},
    "c": {64, 128},
}


#: The complex type holding each width of complex-integer samples (both parts) exactly.
_COMPLEX_INT_TYPES: dict[int, np.dtype] = {32: np.dtype(np.complex64), 64: np.dtype(np.complex128)}


@dataclass(frozen=True)
class SegmentLayout:
    """How one IFD's strips or tiles tile its ``(band, y, x)`` array.

    ``chunk_shape`` is the full (stored) segment in array order; ``grid_shape`` is the
    number of segments per axis, in the order of the IFD's offset arrays.
    """

    shape: tuple[int, int, int]
    chunk_shape: tuple[int, int, int]
    grid_shape: tuple[int, int, int]
    tiled: bool
    pixel_interleaved: bool
    #: RowsPerStrip as the file states it, where an image of one strip states more rows
    #: than it has (the strip may be stored padded to them); else 0.
    stated_strip_rows: int = 0

    @property
    def samples(self) -> int:
        return self.shape[0]

    @property
    def last_strip_capacity(self) -> int:
        """The most rows the last strip may be stored with, padding included."""
        return max(self.chunk_shape[1], self.stated_strip_rows)

    @property
    def last_strip_rows(self) -> int:
        """Rows of the image in the last strip (or last tile row)."""
        return self.shape[1] - (self.grid_shape[1] - 1) * self.chunk_shape[1]

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """A full segment in storage order (what the ``bytes`` codec reshapes)."""
        bands, rows, cols = self.chunk_shape
        return (rows, cols, bands) if self.pixel_interleaved else (bands, rows, cols)


def byte_order(tif: TiffFile) -> Endian:
    """Byte order of the file header (``II`` little, ``MM`` big)."""
    return "little" if tif.byteorder == "<" else "big"


def _uniform(values: object, name: str, source: str) -> int:
    seq = values if isinstance(values, tuple | list) else (values,)
    unique = {int(v) for v in seq}
    if len(unique) != 1:
        raise UnsupportedFeatureError(
            f"{source}: samples differ in {name} {tuple(seq)}; a Zarr array has one data type"
        )
    return unique.pop()


@dataclass(frozen=True)
class SampleType:
    """The array's data type and how samples are stored (``packed``: below byte size;
    ``stored``: the type the ``bytes`` codec reads, where it is not ``dtype``)."""

    dtype: np.dtype
    bits: int
    packed: bool
    stored: np.dtype | None = None

    @property
    def stored_dtype(self) -> np.dtype:
        """The type of the stored samples: complex integers are read as unsigned words
        holding both parts, which :mod:`virtualizarr_fill.codecs.complex_int` splits."""
        return self.dtype if self.stored is None else self.stored


def _packed_dtype(bits: int) -> np.dtype:
    return np.dtype("u1" if bits <= 8 else "u2" if bits <= 16 else "u4")


# TIFF field type sizes in bytes, for values stored outside the IFD entry.
_FIELD_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}
_FIELD_TYPE_SIZES.update({13: 4, 16: 8, 17: 8, 18: 8})


def _check_per_sample_tag(page: TiffPage, code: int, name: str, source: str) -> None:
    """A per-sample tag holds one value or one per sample, all within the file.

    tifffile keeps the first SamplesPerPixel values of a longer array (a workaround for
    one vendor's files) and reads whatever bytes a too-large count points at; such a tag
    describes samples the image does not have.
    """
    tag = page.tags.get(code)
    if tag is None:
        return
    samples = int(page.samplesperpixel)
    count = int(tag.count)
    if (
        count != 1
        and count != samples
        # asked last: tifffile works the flag out from the first page every time
        and not (count > samples and bool(getattr(page.parent, "is_lsm", False)))
    ):
        raise CorruptFileError(
            f"{source}: {name} (tag {code}) has {count} values for {samples} samples per "
            "pixel; expected 1 or one per sample"
        )
    size = count * _FIELD_TYPE_SIZES.get(int(tag.dtype), 1)
    file_size = getattr(page.parent.filehandle, "size", None)
    if file_size is not None and int(tag.valueoffset) + size > int(file_size):
        raise CorruptFileError(
            f"{source}: {name} (tag {code}) values end at byte "
            f"{int(tag.valueoffset) + size}, past the end of the {int(file_size)}-byte file"
        )


# Tags that decide how the data is laid out or decoded: when tifffile cannot read one it
# logs and drops it, and the page silently gets the tag's default instead.
_ESSENTIAL_TAGS = {
    256: "ImageWidth",
    257: "ImageLength",
    258: "BitsPerSample",
    259: "Compression",
    262: "PhotometricInterpretation",
    273: "StripOffsets",
    277: "SamplesPerPixel",
    278: "RowsPerStrip",
    279: "StripByteCounts",
    284: "PlanarConfiguration",
    317: "Predictor",
    322: "TileWidth",
    323: "TileLength",
    324: "TileOffsets",
    325: "TileByteCounts",
    339: "SampleFormat",
    347: "JPEGTables",
    530: "YCbCrSubSampling",
}


def _read_at(page: TiffPage, offset: int, size: int) -> bytes:
    """``size`` bytes of the page's file at ``offset``, leaving tifffile's position."""
    handle = page.parent.filehandle
    position = handle.tell()
    try:
        handle.seek(offset)
        return handle.read(size)  # type: ignore[no-any-return]
    finally:
        handle.seek(position)


def _ifd_tag_codes(page: TiffPage) -> list[int]:
    """Tag codes listed in the page's IFD, read from its entries (tifffile keeps only the
    tags it could decode, with no record of the others)."""
    tiff = page.parent.tiff
    (count,) = struct.unpack(tiff.tagnoformat, _read_at(page, page.offset, tiff.tagnosize))
    entries = _read_at(page, page.offset + tiff.tagnosize, tiff.tagsize * min(int(count), 4096))
    # The code is the first two bytes of each entry (entries are 12 or 20 bytes long).
    codes = np.frombuffer(entries, dtype=f"{page.parent.byteorder}u2", count=len(entries) // 2)
    return codes[:: tiff.tagsize // 2].tolist()  # type: ignore[no-any-return]


def _ifd_tag_count(page: TiffPage) -> int | None:
    """The number of entries the page's IFD lists (None when it cannot be read)."""
    tiff = page.parent.tiff
    head = _read_at(page, page.offset, tiff.tagnosize)
    if len(head) != tiff.tagnosize:
        return None
    return int(struct.unpack(tiff.tagnoformat, head)[0])


def check_unreadable_tags(page: TiffPage, source: str) -> None:
    """Refuse an IFD whose layout or codec tags tifffile could not read."""
    tags = page.tags
    # tifffile keeps every entry it can decode and adds none: as many tags as entries
    # means none was dropped, without decoding the entry codes.
    if _ifd_tag_count(page) == len(tags):
        return
    missing = [c for c in _ifd_tag_codes(page) if c in _ESSENTIAL_TAGS and c not in tags]
    if missing:
        code = missing[0]
        raise CorruptFileError(
            f"{source}: {_ESSENTIAL_TAGS[code]} (tag {code}) is unreadable (invalid field "
            "type, count or value offset)"
        )


def check_sample_tags(page: TiffPage, source: str) -> None:
    """Refuse BitsPerSample (258) and SampleFormat (339) arrays that do not fit the image."""
    _check_per_sample_tag(page, 258, "BitsPerSample", source)
    _check_per_sample_tag(page, 339, "SampleFormat", source)


def sample_type(page: TiffPage, source: str, *, image_codec: bool = False) -> SampleType:
    """Data type from SampleFormat (339) and BitsPerSample (258).

    Unsigned samples of other widths than 8/16/32/64 bits (1-bit masks, 4-bit palettes,
    12-bit data) are unpacked into the next larger unsigned type, as GDAL reads them;
    image codecs (``image_codec``) deliver such samples unpacked themselves. Call
    :func:`check_unreadable_tags` first: a dropped SampleFormat reads as unsigned.
    """
    check_sample_tags(page, source)
    bits, sampleformat = _bits_and_format(page, source)
    kind = _KIND_OF_SAMPLEFORMAT.get(sampleformat)
    if kind == "u" and bits < 32 and bits not in _SUPPORTED_BITS["u"]:
        return SampleType(_packed_dtype(bits), bits, packed=not image_codec)
    dtype = _dtype_of(bits, sampleformat, source)
    if sampleformat == SAMPLEFORMAT_COMPLEXINT:
        if image_codec:
            raise UnsupportedFeatureError(
                f"{source}: complex-integer samples (SampleFormat=5) with an image codec"
            )
        return SampleType(dtype, bits, packed=False, stored=np.dtype(f"u{bits // 8}"))
    return SampleType(dtype, bits, packed=False)


def sample_dtype(page: TiffPage, source: str) -> np.dtype:
    """Native NumPy data type from SampleFormat (339) and BitsPerSample (258)."""
    return _dtype_of(*_bits_and_format(page, source), source)


def _bits_and_format(page: TiffPage, source: str) -> tuple[int, int]:
    bits = _uniform(page.bitspersample, "BitsPerSample", source)
    tag = page.tags.get(339)
    sampleformat = (
        _uniform(tag.value, "SampleFormat", source) if tag is not None else SAMPLEFORMAT_UINT
    )
    return bits, sampleformat


def _dtype_of(bits: int, sampleformat: int, source: str) -> np.dtype:
    if sampleformat == SAMPLEFORMAT_COMPLEXINT:
        # Pairs of 16- or 32-bit integers (GDAL's CInt16, CInt32), held exactly by
        # complex64 and complex128; no writer stores other widths.
        if bits not in _COMPLEX_INT_TYPES:
            raise UnsupportedFeatureError(
                f"{source}: complex-integer samples (SampleFormat=5) of {bits} bits; "
                "only 32 (CInt16) and 64 (CInt32) are read"
            )
        return _COMPLEX_INT_TYPES[bits]
    kind = _KIND_OF_SAMPLEFORMAT.get(sampleformat)
    if kind is None:
        raise UnsupportedFeatureError(f"{source}: unknown SampleFormat {sampleformat}")
    if bits not in _SUPPORTED_BITS[kind]:
        what = "sub-byte or packed" if bits % 8 or bits < 8 else "unsupported"
        raise UnsupportedFeatureError(
            f"{source}: {what} samples ({bits}-bit, SampleFormat={sampleformat}) cannot be "
            "read through a virtual Zarr array"
        )
    return np.dtype(f"{kind}{bits // 8}")


def _rows_per_strip(page: TiffPage) -> int:
    rows = int(page.rowsperstrip) if page.rowsperstrip else int(page.imagelength)
    return min(max(rows, 1), int(page.imagelength))


def _stated_rows_per_strip(page: TiffPage) -> int:
    """RowsPerStrip as the IFD states it (tifffile's ``rowsperstrip`` is clipped to the
    image's rows); 0 when absent or not one integer."""
    tag = page.tags.get(278)
    value = tag.value if tag is not None and tag.count == 1 else None
    return value if isinstance(value, int) and value > 0 else 0


# TIFF field types an offset or byte-count array may have: SHORT, LONG, IFD, LONG8, IFD8.
_SEGMENT_TAG_TYPES = {3: "SHORT", 4: "LONG", 13: "IFD", 16: "LONG8", 18: "IFD8"}
_SEGMENT_TAGS = {
    273: "StripOffsets",
    279: "StripByteCounts",
    324: "TileOffsets",
    325: "TileByteCounts",
}


def check_segment_tag_types(page: TiffPage, source: str) -> None:
    """Refuse strip/tile offsets and byte counts stored with a non-integer field type.

    tifffile decodes such values anyway (bytes of an UNDEFINED field, floats), and the
    numbers it yields are not the segments the writer meant.
    """
    for code, name in _SEGMENT_TAGS.items():
        tag = page.tags.get(code)
        if tag is None:
            continue
        if int(tag.dtype) not in _SEGMENT_TAG_TYPES:
            raise CorruptFileError(
                f"{source}: {name} (tag {code}) has field type {int(tag.dtype)}; "
                f"expected one of {', '.join(_SEGMENT_TAG_TYPES.values())}"
            )


# SamplesPerPixel is a SHORT field in TIFF 6.0; larger values come from damaged IFDs and
# would make per-band coordinates and attributes unbounded.
_MAX_SAMPLES = 65535


def segment_layout(page: TiffPage, source: str) -> SegmentLayout:
    """Array shape, segment shape and segment grid from the image and tile/strip tags."""
    check_segment_tag_types(page, source)
    if int(page.imagedepth) > 1 or int(getattr(page, "tiledepth", 1)) > 1:
        raise UnsupportedFeatureError(
            f"{source}: volumetric images (ImageDepth>1) are not supported"
        )
    height, width = int(page.imagelength), int(page.imagewidth)
    if height == 0 or width == 0:
        raise UnsupportedFeatureError(f"{source}: empty image ({height}x{width})")
    samples = int(page.samplesperpixel)
    if not 1 <= samples <= _MAX_SAMPLES:
        raise CorruptFileError(
            f"{source}: SamplesPerPixel {samples} is outside 1..{_MAX_SAMPLES} (a SHORT field)"
        )
    planar = int(page.planarconfig)
    if samples > 1 and planar not in (1, 2):
        # tifffile keeps the number, and decodes such pages partly as either layout.
        raise CorruptFileError(
            f"{source}: PlanarConfiguration {planar} is neither 1 (chunky) nor 2 (planar)"
        )
    interleaved = samples > 1 and planar == 1
    if page.is_tiled:
        rows, cols = int(page.tilelength), int(page.tilewidth)
    else:
        rows, cols = _rows_per_strip(page), width
    band_chunk = samples if interleaved else 1
    grid = (samples // band_chunk, math.ceil(height / rows), math.ceil(width / cols))
    stated = 0 if page.is_tiled else _stated_rows_per_strip(page)
    count = math.prod(grid)
    if len(page.dataoffsets) != count or len(page.databytecounts) != count:
        raise CorruptFileError(
            f"{source}: {len(page.dataoffsets)} segment offsets and "
            f"{len(page.databytecounts)} byte counts, expected {count} for a "
            f"{height}x{width}x{samples} image in {rows}x{cols} segments"
        )
    return SegmentLayout(
        shape=(samples, height, width),
        chunk_shape=(band_chunk, rows, cols),
        grid_shape=grid,
        tiled=bool(page.is_tiled),
        pixel_interleaved=interleaved,
        stated_strip_rows=stated if stated > height else 0,
    )


__all__ = [
    "Endian",
    "SampleType",
    "SegmentLayout",
    "byte_order",
    "check_sample_tags",
    "check_unreadable_tags",
    "check_segment_tag_types",
    "sample_dtype",
    "sample_type",
    "segment_layout",
]
