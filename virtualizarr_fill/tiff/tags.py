"""TIFF header fields mapped to array properties: data type, byte order, segment layout.

Each function maps one group of tags and refuses, with
:class:`~virtualizarr_fill.errors.UnsupportedFeatureError`, what a virtual Zarr array
cannot express, so that unsupported files fail while parsing and never while reading.
"""

from __future__ import annotations

import math
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

    @property
    def samples(self) -> int:
        return self.shape[0]

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
    """The array's data type and how samples are stored (``packed``: below byte size)."""

    dtype: np.dtype
    bits: int
    packed: bool


def _packed_dtype(bits: int) -> np.dtype:
    return np.dtype("u1" if bits <= 8 else "u2" if bits <= 16 else "u4")


def sample_type(page: TiffPage, source: str, *, image_codec: bool = False) -> SampleType:
    """Data type from SampleFormat (339) and BitsPerSample (258).

    Unsigned samples of other widths than 8/16/32/64 bits (1-bit masks, 4-bit palettes,
    12-bit data) are unpacked into the next larger unsigned type, as GDAL reads them;
    image codecs (``image_codec``) deliver such samples unpacked themselves.
    """
    bits = _uniform(page.bitspersample, "BitsPerSample", source)
    tag = page.tags.get(339)
    sampleformat = (
        _uniform(tag.value, "SampleFormat", source) if tag is not None else SAMPLEFORMAT_UINT
    )
    kind = _KIND_OF_SAMPLEFORMAT.get(sampleformat)
    if kind == "u" and bits < 32 and bits not in _SUPPORTED_BITS["u"]:
        return SampleType(_packed_dtype(bits), bits, packed=not image_codec)
    return SampleType(sample_dtype(page, source), bits, packed=False)


def sample_dtype(page: TiffPage, source: str) -> np.dtype:
    """Native NumPy data type from SampleFormat (339) and BitsPerSample (258)."""
    bits = _uniform(page.bitspersample, "BitsPerSample", source)
    tag = page.tags.get(339)
    sampleformat = (
        _uniform(tag.value, "SampleFormat", source) if tag is not None else SAMPLEFORMAT_UINT
    )
    if sampleformat == SAMPLEFORMAT_COMPLEXINT:
        raise UnsupportedFeatureError(
            f"{source}: complex-integer samples (SampleFormat=5, {bits}-bit) have no Zarr data type"
        )
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


def segment_layout(page: TiffPage, source: str) -> SegmentLayout:
    """Array shape, segment shape and segment grid from the image and tile/strip tags."""
    if int(page.imagedepth) > 1 or int(getattr(page, "tiledepth", 1)) > 1:
        raise UnsupportedFeatureError(
            f"{source}: volumetric images (ImageDepth>1) are not supported"
        )
    height, width = int(page.imagelength), int(page.imagewidth)
    if height == 0 or width == 0:
        raise UnsupportedFeatureError(f"{source}: empty image ({height}x{width})")
    samples = int(page.samplesperpixel)
    interleaved = samples > 1 and int(page.planarconfig) == 1
    if page.is_tiled:
        rows, cols = int(page.tilelength), int(page.tilewidth)
    else:
        rows, cols = _rows_per_strip(page), width
    band_chunk = samples if interleaved else 1
    grid = (samples // band_chunk, math.ceil(height / rows), math.ceil(width / cols))
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
    )


__all__ = [
    "Endian",
    "SampleType",
    "SegmentLayout",
    "byte_order",
    "sample_dtype",
    "sample_type",
    "segment_layout",
]
