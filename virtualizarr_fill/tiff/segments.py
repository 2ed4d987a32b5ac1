"""TIFF strips and tiles mapped to a chunk manifest and a chunk grid.

Tiles are always stored full-size, so tiled images get a regular grid whose edge chunks
overhang the image, exactly as Zarr stores edge chunks. Strips are the hard case: when
ImageLength is not a multiple of RowsPerStrip the last strip holds fewer rows, and
writers either store just those rows or pad the strip to RowsPerStrip rows. Both are
valid TIFF. The grid and codecs are chosen as follows (cost in extra object-store
requests after the header):

* **uncompressed** strips: the last strip's byte count tells. Padded -> a regular grid
  (readable by every Zarr reader); exactly the remaining rows -> a rectilinear grid whose
  last edge is short; anything in between -> rectilinear + truncate. No extra request.
* **compressed** strips (Deflate, LZW, PackBits, ZSTD, LZMA): whether the last strip is
  padded is only known after decompressing it, so the parser reads and decompresses the
  last strip of each plane (no request when it lies in the bytes already read for the
  header, else one): padded -> a regular grid; exactly the remaining rows -> a
  rectilinear grid whose last edge is short. Neither needs a codec of this package, so
  any Zarr reader reads the array. A strip of a size in between, or planes that
  disagree, get the rectilinear grid and a
  :class:`~virtualizarr_fill.codecs.TruncateCodec` after the ``bytes`` codec, which
  passes an unpadded strip through and trims a padded one. A last strip that does not
  decompress, or to fewer bytes than the rows left or more than RowsPerStrip rows,
  refuses the file: its header disagrees with its data. ``probe_last_strip=False``
  skips the read and always uses the truncate codec.
* **image codecs** (JPEG, WebP, PNG, JPEG 2000, JPEG XL, LERC) decode whole images,
  leaving no raw bytes to trim, so the decoded height of the last strip must be known:
  the parser reads the last strip (for JPEG only its header) and decodes it. One request
  unless the strip lies in the bytes already read for the header.

An image of **one strip whose RowsPerStrip exceeds ImageLength** may store that strip
padded to RowsPerStrip rows. Its chunk is the image (a regular grid), and the same rules
apply to the one strip: an uncompressed one longer than the image's rows, and any
compressed one (unless RowsPerStrip is 2**32-1, TIFF's "whole image"), get the truncate
codec; an image codec's padded strip a chunk of RowsPerStrip rows overhanging the image.

Sparse segments (offset or byte count 0) are left out of the manifest and read as the
array's fill value. Segments extending past the end of the file are refused.

Not detected: image-codec *tiles* encoded at the clipped edge size instead of the full
tile size (no known GDAL or libtiff writer does this); they fail when read.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import imagecodecs
import numpy as np
from virtualizarr.manifests import ChunkManifest
from zarr.core.metadata.v3 import RectilinearChunkGridMetadata, RegularChunkGridMetadata

from virtualizarr_fill.codecs.tiff_packints import row_bytes
from virtualizarr_fill.errors import CorruptFileError, UnsupportedFeatureError
from virtualizarr_fill.grid import EdgeHandling, decide_edge_handling, insert_edge_codec
from virtualizarr_fill.tiff import codecs_map
from virtualizarr_fill.tiff.arrays import segment_manifest

if TYPE_CHECKING:
    from zarr.abc.codec import BaseCodec

    from virtualizarr_fill.tiff.codecs_map import CodecChain
    from virtualizarr_fill.tiff.tags import SegmentLayout

ChunkGridMetadata = RegularChunkGridMetadata | RectilinearChunkGridMetadata


class SegmentTable(Protocol):
    """Where an IFD's strips or tiles lie, as tifffile lists them: a ``TiffPage``, or a
    ``TiffFrame`` when the rest of the IFD is known from an IFD parsed before."""

    @property
    def dataoffsets(self) -> Sequence[int] | np.ndarray: ...

    @property
    def databytecounts(self) -> Sequence[int] | np.ndarray: ...


ReadRange = Callable[[int, int], bytes]


@dataclass(frozen=True)
class GridDecision:
    """The chunk grid and final codec list of one IFD, with the reason for the choice."""

    chunk_grid: ChunkGridMetadata
    codecs: list[BaseCodec[Any, Any]]
    reason: str


def chunk_manifest(
    table: SegmentTable, layout: SegmentLayout, url: str, file_size: int, source: str
) -> ChunkManifest:
    """Chunk references from StripOffsets/TileOffsets and their byte counts."""
    offsets = np.asarray(table.dataoffsets, dtype=np.uint64).reshape(layout.grid_shape)
    lengths = np.asarray(table.databytecounts, dtype=np.uint64).reshape(layout.grid_shape)
    sparse, beyond = _sparse_and_beyond(table, offsets, lengths, file_size)
    if beyond is not None:
        index = tuple(int(i) for i in np.unravel_index(beyond, layout.grid_shape))
        end = int(offsets[index]) + int(lengths[index])
        raise CorruptFileError(
            f"{source}: segment {index} ends at byte {end} (offset {int(offsets[index])}, "
            f"{int(lengths[index])} bytes), past the end of the {file_size}-byte file "
            "(truncated file?)"
        )
    paths = np.empty(layout.grid_shape, dtype=_STRING_DTYPE)
    paths[...] = url
    if sparse is None:
        # Sparse segments are those with a zero offset or length: none here.
        return segment_manifest(paths, offsets, lengths, no_empty=True)
    paths[sparse] = ""
    offsets[sparse] = 0
    lengths[sparse] = 0
    return segment_manifest(paths, offsets, lengths)


_STRING_DTYPE = np.dtypes.StringDType()
# Up to this many segments, checking them one by one in Python beats a dozen NumPy calls.
_FEW_SEGMENTS = 1024


def _sparse_and_beyond(
    table: SegmentTable, offsets: np.ndarray, lengths: np.ndarray, file_size: int
) -> tuple[np.ndarray | None, int | None]:
    """The sparse segments (offset or byte count 0; None when there are none) and the
    flat index of the first stored segment ending past the end of the file (or None)."""
    listed_offsets, listed_lengths = table.dataoffsets, table.databytecounts
    if (
        type(listed_offsets) is tuple
        and type(listed_lengths) is tuple
        and len(listed_offsets) <= _FEW_SEGMENTS
    ):
        # The common case, decided in C: nothing sparse, every segment within the file.
        if (
            listed_offsets
            and len(listed_offsets) == len(listed_lengths)
            and 0 not in listed_offsets
            and 0 not in listed_lengths
            and max(map(operator.add, listed_offsets, listed_lengths)) <= file_size
        ):
            return None, None
        any_sparse = False
        for flat, (offset, length) in enumerate(zip(listed_offsets, listed_lengths, strict=True)):
            if not offset or not length:
                any_sparse = True
            elif int(offset) + int(length) > file_size:
                return None, flat
        if not any_sparse:
            return None, None
    sparse = (offsets == 0) | (lengths == 0)
    size = np.uint64(file_size)
    # Compared without forming offset + length, which wraps around in uint64.
    with np.errstate(over="ignore"):
        beyond = ~sparse & ((lengths > size) | (offsets > size - lengths))
    if beyond.any():
        return None, int(np.argmax(beyond))
    return (sparse if sparse.any() else None), None


def _regular(layout: SegmentLayout) -> RegularChunkGridMetadata:
    return _regular_grid(layout.chunk_shape)


@functools.lru_cache(maxsize=256)
def _regular_grid(chunk_shape: tuple[int, ...]) -> RegularChunkGridMetadata:
    # Validating the chunk shape is slow; the grid is a frozen dataclass, safe to share.
    return RegularChunkGridMetadata(chunk_shape=chunk_shape)


def _short_last_strip(layout: SegmentLayout) -> RectilinearChunkGridMetadata:
    bands, rows, cols = layout.chunk_shape
    edges = (rows,) * (layout.grid_shape[1] - 1) + (layout.last_strip_rows,)
    return RectilinearChunkGridMetadata(chunk_shapes=(bands, edges, cols))


def _row_bytes(layout: SegmentLayout, itemsize: int, chain: CodecChain | None = None) -> int:
    """Stored bytes of one row of a segment."""
    packed = chain.packed if chain is not None else None
    if packed is not None:
        return row_bytes(packed.bitspersample, packed.runlen)
    bands, _, cols = layout.chunk_shape
    return bands * cols * itemsize


# Byte counts above this are past any file; clipping keeps them comparable in int64.
_LENGTH_CLIP = np.uint64(2**62)


def _segment_lengths(table: SegmentTable, layout: SegmentLayout) -> np.ndarray:
    """Byte counts as int64 in the grid's shape, 0 for sparse segments."""
    offsets = np.asarray(table.dataoffsets, dtype=np.uint64).reshape(layout.grid_shape)
    lengths = np.asarray(table.databytecounts, dtype=np.uint64).reshape(layout.grid_shape)
    lengths = np.minimum(lengths, _LENGTH_CLIP)
    lengths[offsets == 0] = 0
    return lengths.astype(np.int64)


def _listed_segments(table: SegmentTable) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Offsets and byte counts as tifffile lists them, when few enough to check in Python."""
    offsets, lengths = table.dataoffsets, table.databytecounts
    if type(offsets) is tuple and type(lengths) is tuple and len(offsets) <= _FEW_SEGMENTS:
        return offsets, lengths
    return None


def _last_strip_lengths(table: SegmentTable, layout: SegmentLayout) -> list[int]:
    listed = _listed_segments(table)
    if listed is not None:
        offsets, lengths = listed
        per_plane = layout.grid_shape[1] * layout.grid_shape[2]
        last = [p * per_plane + per_plane - 1 for p in range(layout.grid_shape[0])]
        clip = int(_LENGTH_CLIP)
        return [min(int(lengths[k]), clip) for k in last if offsets[k] and lengths[k]]
    lengths_array = _segment_lengths(table, layout)
    return [int(n) for n in lengths_array[:, -1, 0] if n > 0]


def _uncompressed_lengths_fit(
    table: SegmentTable, layout: SegmentLayout, full: int, short: int, longest: int
) -> bool:
    """Whether every stored segment holds an acceptable byte count: ``full`` for tiles and
    interior strips, ``short`` to ``longest`` for last strips (checked in Python for few
    segments; False also when there are too many to check this way)."""
    listed = _listed_segments(table)
    if listed is None:
        return False
    per_plane = layout.grid_shape[1] * layout.grid_shape[2]
    last_row = per_plane - layout.grid_shape[2]
    for flat, (offset, length) in enumerate(zip(*listed, strict=True)):
        if not offset or not length:
            continue
        if not layout.tiled and flat % per_plane >= last_row:
            if not short <= length <= longest:
                return False
        elif length != full:
            return False
    return True


def _refuse_length(
    source: str, layout: SegmentLayout, index: tuple[int, ...], length: int, expected: str
) -> CorruptFileError:
    kind = "tile" if layout.tiled else "strip"
    bands, height, width = layout.shape
    return CorruptFileError(
        f"{source}: uncompressed {kind} {index} holds {length} bytes, expected {expected} "
        f"(a {bands}x{height}x{width} image in {layout.chunk_shape[1]}x"
        f"{layout.chunk_shape[2]} segments)"
    )


def _check_uncompressed_lengths(
    table: SegmentTable, layout: SegmentLayout, itemsize: int, chain: CodecChain, source: str
) -> None:
    """Stored uncompressed segments must hold exactly their bytes (else the file is damaged).

    Tiles and interior strips are full size; the last strip holds at least the rows left
    in the image and at most RowsPerStrip rows (longer ones are trimmed by truncation).
    """
    row = _row_bytes(layout, itemsize, chain)
    full = layout.chunk_shape[1] * row
    short = layout.last_strip_rows * row
    longest = layout.last_strip_capacity * row
    if _uncompressed_lengths_fit(table, layout, full, short, longest):
        return
    lengths = _segment_lengths(table, layout)
    interior = lengths if layout.tiled else lengths[:, :-1, :]
    wrong = (interior > 0) & (interior != full)
    if wrong.any():
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        raise _refuse_length(source, layout, index, int(interior[index]), str(full))
    if layout.tiled:
        return
    last = lengths[:, -1, :]
    wrong = (last > 0) & ((last < short) | (last > longest))
    if wrong.any():
        plane = int(np.argwhere(wrong)[0][0])
        index = (plane, layout.grid_shape[1] - 1, 0)
        expected = str(longest) if short == longest else f"{short} to {longest}"
        raise _refuse_length(source, layout, index, int(last[plane, 0]), expected)


def _truncating(chain: CodecChain, layout: SegmentLayout) -> list[BaseCodec[Any, Any]]:
    bands, _, cols = layout.chunk_shape
    stored = (bands, layout.last_strip_capacity, cols)
    codecs = chain.codecs()
    handling = decide_edge_handling(codecs, (bands, layout.last_strip_rows, cols), stored)
    if handling is not EdgeHandling.TRUNCATE:  # strips pad only along y: never crop
        raise AssertionError(f"unexpected edge handling {handling} for a strip")
    return list(insert_edge_codec(codecs, handling, stored))  # type: ignore[arg-type]


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


def _last_strips(table: SegmentTable, layout: SegmentLayout) -> list[tuple[int, int]]:
    """(offset, byte count) of the stored last strip of each plane."""
    offsets = np.asarray(table.dataoffsets, dtype=np.uint64).reshape(layout.grid_shape)
    lengths = _segment_lengths(table, layout)
    strips = []
    for plane in range(layout.grid_shape[0]):
        offset, length = int(offsets[plane, -1, 0]), int(lengths[plane, -1, 0])
        if offset and length:
            strips.append((offset, length))
    return strips


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


def _decoded_last_strip_rows(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> set[int | None]:
    """Rows the image codec decodes from the last strip of each plane (reads them)."""

    def rows(offset: int, length: int) -> int | None:
        return decoded_strip_rows(chain, offset, length, read)

    return {_decoded(source, *strip, rows) for strip in _last_strips(table, layout)}


def _decompressed_strip_lengths(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> set[int]:
    """Decompressed byte counts of the last strip of each plane (reads them)."""

    def decompressed(offset: int, length: int) -> int:
        data = read(offset, length)
        for codec in reversed(chain.bytes_bytes):
            data = _decompress_with(codec, data)
        return len(data)

    return {_decoded(source, *strip, decompressed) for strip in _last_strips(table, layout)}


def _image_codec_grid(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> GridDecision:
    rows_seen = _decoded_last_strip_rows(table, layout, chain, read, source)
    full, short = layout.chunk_shape[1], layout.last_strip_rows
    if rows_seen <= {full}:
        return GridDecision(_regular(layout), chain.codecs(), "image codec: last strip padded")
    if rows_seen == {short}:
        return GridDecision(
            _short_last_strip(layout), chain.codecs(), "image codec: last strip short"
        )
    raise UnsupportedFeatureError(
        f"{source}: the last strip decodes to {sorted(map(str, rows_seen))} rows, neither the "
        f"{short} rows left in the image nor RowsPerStrip={full}; an image codec cannot be "
        "trimmed"
    )


def _probed_lengths(
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
    row = _row_bytes(layout, itemsize, chain)
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
    those bounds, refuses the file (:func:`_probed_lengths`)."""
    row = _row_bytes(layout, itemsize, chain)
    padded, short = layout.chunk_shape[1] * row, layout.last_strip_rows * row
    lengths = _probed_lengths(table, layout, chain, itemsize, read, source)
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


#: RowsPerStrip 2**32-1 is TIFF's default, "the whole image in one strip": a strip
#: padded to that many rows cannot exist.
WHOLE_IMAGE_ROWS = 2**32 - 1


def _one_strip_grid(
    table: SegmentTable,
    layout: SegmentLayout,
    chain: CodecChain,
    itemsize: int,
    read: ReadRange,
    source: str,
    probe_last_strip: bool,
) -> GridDecision:
    """An image of one strip whose RowsPerStrip exceeds its rows: the strip holds the
    image's rows, or is padded up to RowsPerStrip rows (both valid TIFF, read alike by
    libtiff and tifffile). The chunk is the image, and a padded strip is trimmed like a
    padded last strip of several (truncation after the ``bytes`` codec)."""
    regular = _regular(layout)
    stated = layout.stated_strip_rows
    if chain.is_image_codec:
        return _one_strip_image_codec_grid(table, layout, chain, read, source)
    if chain.packed is not None:
        return GridDecision(regular, chain.codecs(), "one strip, packed samples: codec trims rows")
    short = layout.last_strip_rows * _row_bytes(layout, itemsize, chain)
    if not chain.is_compressed:
        if all(n == short for n in _last_strip_lengths(table, layout)):
            return GridDecision(regular, chain.codecs(), "one strip of the image's rows")
        return GridDecision(
            regular, _truncating(chain, layout), "one strip, padded towards RowsPerStrip"
        )
    if stated >= WHOLE_IMAGE_ROWS:
        return GridDecision(regular, chain.codecs(), "one strip (RowsPerStrip 2**32-1)")
    probed = probe_last_strip and _probed_lengths(table, layout, chain, itemsize, read, source)
    if probed == {short}:
        return GridDecision(regular, chain.codecs(), "one strip of the image's rows (decoded)")
    return GridDecision(
        regular,
        _truncating(chain, layout),
        f"one compressed strip, RowsPerStrip {stated} > ImageLength: truncate",
    )


def _one_strip_image_codec_grid(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> GridDecision:
    """An image codec decodes a whole strip: a padded one to RowsPerStrip rows, read
    through a chunk of that height overhanging the image, as Zarr reads edge chunks."""
    rows_seen = _decoded_last_strip_rows(table, layout, chain, read, source)
    bands, height, cols = layout.chunk_shape
    stated = layout.stated_strip_rows
    if rows_seen <= {height}:
        return GridDecision(_regular(layout), chain.codecs(), "image codec: one strip")
    if rows_seen == {stated}:
        return GridDecision(
            _regular_grid((bands, stated, cols)),
            chain.codecs(),
            "image codec: one strip padded to RowsPerStrip",
        )
    raise UnsupportedFeatureError(
        f"{source}: the strip decodes to {sorted(map(str, rows_seen))} rows, neither the "
        f"{height} rows of the image nor RowsPerStrip={stated}; an image codec cannot be "
        "trimmed"
    )


def decide_grid(
    table: SegmentTable,
    layout: SegmentLayout,
    chain: CodecChain,
    itemsize: int,
    read: ReadRange,
    source: str,
    *,
    probe_last_strip: bool = True,
) -> GridDecision:
    """Chunk grid and codecs for one IFD (see the module docstring for the rules)."""
    if not chain.is_compressed:
        _check_uncompressed_lengths(table, layout, itemsize, chain, source)
    if layout.tiled:
        return GridDecision(_regular(layout), chain.codecs(), "tiles")
    if layout.stated_strip_rows:
        return _one_strip_grid(table, layout, chain, itemsize, read, source, probe_last_strip)
    if layout.last_strip_rows == layout.chunk_shape[1]:
        return GridDecision(_regular(layout), chain.codecs(), "strips divide the image")
    if chain.is_image_codec:
        return _image_codec_grid(table, layout, chain, read, source)
    if not chain.is_compressed:
        stored_row = _row_bytes(layout, itemsize, chain)
        last = _last_strip_lengths(table, layout)
        full = layout.chunk_shape[1] * stored_row
        short = layout.last_strip_rows * stored_row
        if all(n >= full for n in last):
            return GridDecision(_regular(layout), chain.codecs(), "last strip padded")
        if any(n < short for n in last):
            raise CorruptFileError(
                f"{source}: last strip holds {min(last)} bytes, fewer than the {short} bytes "
                f"of its {layout.last_strip_rows} rows"
            )
        if all(n == short for n in last) or chain.packed is not None:
            return GridDecision(_short_last_strip(layout), chain.codecs(), "last strip short")
        return GridDecision(
            _short_last_strip(layout), _truncating(chain, layout), "last strip over-long"
        )
    if chain.packed is not None:
        return GridDecision(
            _short_last_strip(layout), chain.codecs(), "packed samples: codec trims rows"
        )
    if probe_last_strip:
        found = last_strip_storage(table, layout, chain, itemsize, read, source)
        if found == "padded":
            return GridDecision(_regular(layout), chain.codecs(), "last strip padded (decoded)")
        if found == "short":
            return GridDecision(
                _short_last_strip(layout), chain.codecs(), "last strip short (decoded)"
            )
    return GridDecision(
        _short_last_strip(layout),
        _truncating(chain, layout),
        "compressed strips: short last edge + truncate",
    )


__all__ = [
    "GridDecision",
    "chunk_manifest",
    "decide_grid",
    "decoded_strip_rows",
    "jpeg_frame_rows",
    "last_strip_storage",
]
