"""The last strip of each plane, read and decoded to learn how it is stored.

Whether a compressed last strip is padded to RowsPerStrip rows or holds just the rows
left in the image is only known after decompressing it (:func:`last_strip_storage`);
an image codec's strip only tells its height once decoded (:func:`decoded_strip_rows`,
for JPEG from the frame header alone). A strip that does not decode, or to a size its
header's geometry rules out, refuses the file: every read of it would fail the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import imagecodecs
import numpy as np

from virtualizarr_fill.errors import CorruptFileError
from virtualizarr_fill.tiff import codecs_map
from virtualizarr_fill.tiff.segments import ReadRange, SegmentTable, last_strips, stored_row_bytes

if TYPE_CHECKING:
    from zarr.abc.codec import BaseCodec

    from virtualizarr_fill.tiff.codecs_map import CodecChain
    from virtualizarr_fill.tiff.tags import SegmentLayout


def jpeg_frame_rows(data: bytes) -> int | None:
    """Image height from a JPEG stream's SOF marker (None when not in ``data``)."""
    position = 2 if data[:2] == b"\xff\xd8" else 0
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            position += 1
            continue
        marker = data[position + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            position += 2 if marker != 0xFF else 1
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        is_sof = 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC)
        if is_sof:
            if position + 9 > len(data):
                return None
            return int.from_bytes(data[position + 5 : position + 7], "big")
        if marker == 0xDA:  # start of scan: no frame header found before the data
            return None
        position += 2 + length
    return None


_IMAGE_DECODERS: dict[int, Callable[[bytes], Any]] = {
    codecs_map.WEBP: imagecodecs.webp_decode,
    codecs_map.WEBP_OLD: imagecodecs.webp_decode,
    codecs_map.PNG: imagecodecs.png_decode,
    codecs_map.LERC: imagecodecs.lerc_decode,
    **{c: imagecodecs.jpeg2k_decode for c in codecs_map.JPEG2000},
    **{c: imagecodecs.jpegxl_decode for c in codecs_map.JPEGXL},
}


def decoded_strip_rows(chain: CodecChain, offset: int, length: int, read: ReadRange) -> int | None:
    """Rows the image codec of ``chain`` produces for the strip at ``offset`` (reads it)."""
    compression = chain.compression
    if compression in codecs_map.JPEG_FAMILY:
        head = read(offset, min(length, 8192))
        rows = jpeg_frame_rows(head)
        if rows is None and length > len(head):
            rows = jpeg_frame_rows(read(offset, length))
        return rows
    decoder = _IMAGE_DECODERS.get(compression)
    if decoder is None:
        return None
    data: Any = read(offset, length)
    for codec in reversed(chain.bytes_bytes):  # e.g. GDAL's Deflate or Zstd around LERC
        data = _decompress_with(codec, data)
    return int(np.asarray(decoder(data)).shape[0])


def _decoded[T](source: str, offset: int, length: int, decode: Callable[[int, int], T]) -> T:
    """``decode(offset, length)`` of the strip at ``offset``; a codec's failure
    (imagecodecs raises ``RuntimeError`` subclasses, numcodecs ``ValueError`` s) refuses
    the file, since reading it would fail the same way."""
    try:
        return decode(offset, length)
    except (RuntimeError, ValueError) as error:
        raise CorruptFileError(
            f"{source}: the last strip ({length} bytes at offset {offset}) does not decode "
            f"({type(error).__name__}: {error})"
        ) from None


def decoded_last_strip_rows(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> set[int | None]:
    """Rows the image codec decodes from the last strip of each plane (reads them)."""

    def rows(offset: int, length: int) -> int | None:
        return decoded_strip_rows(chain, offset, length, read)

    return {_decoded(source, *strip, rows) for strip in last_strips(table, layout)}


def _decompressed_strip_lengths(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> set[int]:
    """Decompressed byte counts of the last strip of each plane (reads them)."""

    def decompressed(offset: int, length: int) -> int:
        data = read(offset, length)
        for codec in reversed(chain.bytes_bytes):
            data = _decompress_with(codec, data)
        return len(data)

    return {_decoded(source, *strip, decompressed) for strip in last_strips(table, layout)}


def probed_lengths(
    table: SegmentTable,
    layout: SegmentLayout,
    chain: CodecChain,
    itemsize: int,
    read: ReadRange,
    source: str,
) -> set[int]:
    """Decompressed byte counts of the last strips, each between the bytes of the rows
    left in the image and those of the rows the strip may be stored with; anything else
    contradicts the header's geometry (ImageWidth, SamplesPerPixel or BitsPerSample), and
    every strip would fail to read."""
    row = stored_row_bytes(layout, itemsize, chain)
    short, longest = layout.last_strip_rows * row, layout.last_strip_capacity * row
    lengths = _decompressed_strip_lengths(table, layout, chain, read, source)
    wrong = sorted(n for n in lengths if not short <= n <= longest)
    if wrong:
        raise CorruptFileError(
            f"{source}: the last strip decompresses to {wrong[0]} bytes, not the {short} to "
            f"{longest} bytes of its rows (the image's width, samples or bits per sample "
            "disagree with the data)"
        )
    return lengths


def last_strip_storage(
    table: SegmentTable,
    layout: SegmentLayout,
    chain: CodecChain,
    itemsize: int,
    read: ReadRange,
    source: str,
) -> str | None:
    """Decompress the last strip of each plane: ``"padded"`` when every one holds
    RowsPerStrip rows, ``"short"`` when every one holds exactly the rows left in the
    image, else None (sizes in between, or planes that disagree: only the truncate
    codec reads those right). A strip that does not decompress, or to a size outside
    those bounds, refuses the file (:func:`probed_lengths`)."""
    row = stored_row_bytes(layout, itemsize, chain)
    padded, short = layout.chunk_shape[1] * row, layout.last_strip_rows * row
    lengths = probed_lengths(table, layout, chain, itemsize, read, source)
    if lengths == {padded}:
        return "padded"
    if lengths == {short}:
        return "short"
    return None


def _decompress_with(codec: BaseCodec[Any, Any], data: bytes) -> bytes:
    name = codec.to_dict()["name"]
    decoders: dict[str, Callable[[bytes], Any]] = {
        "numcodecs.zlib": imagecodecs.zlib_decode,
        "zstd": imagecodecs.zstd_decode,
        "imagecodecs_lzw": imagecodecs.lzw_decode,
        "imagecodecs_packbits": imagecodecs.packbits_decode,
        "imagecodecs_lzma": imagecodecs.lzma_decode,
        "virtualizarr_fill.tiff_bitorder": imagecodecs.bitorder_decode,
    }
    return bytes(decoders[str(name)](data))


__all__ = [
    "decoded_last_strip_rows",
    "decoded_strip_rows",
    "jpeg_frame_rows",
    "last_strip_storage",
    "probed_lengths",
]
