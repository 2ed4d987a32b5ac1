"""The chunk grid and codecs of one IFD, decided from its strips or tiles.

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

The byte counts come from :mod:`.segments`, the decoded last strips from
:mod:`.last_strips`.

Not detected: image-codec *tiles* encoded at the clipped edge size instead of the full
tile size (no known GDAL or libtiff writer does this); they fail when read.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zarr.core.metadata.v3 import RectilinearChunkGridMetadata, RegularChunkGridMetadata

from virtualizarr_fill.errors import CorruptFileError, UnsupportedFeatureError
from virtualizarr_fill.tiff.last_strips import (
    decoded_last_strip_rows,
    last_strip_storage,
    probed_lengths,
)
from virtualizarr_fill.tiff.segments import (
    ReadRange,
    SegmentTable,
    check_uncompressed_lengths,
    last_strip_lengths,
    stored_row_bytes,
)
from virtualizarr_fill.zarr_model.edge_codecs import (
    EdgeHandling,
    decide_edge_handling,
    insert_edge_codec,
)

if TYPE_CHECKING:
    from zarr.abc.codec import BaseCodec

    from virtualizarr_fill.tiff.codecs_map import CodecChain
    from virtualizarr_fill.tiff.tags import SegmentLayout


ChunkGridMetadata = RegularChunkGridMetadata | RectilinearChunkGridMetadata


@dataclass(frozen=True)
class GridDecision:
    """The chunk grid and final codec list of one IFD, with the reason for the choice."""

    chunk_grid: ChunkGridMetadata
    codecs: list[BaseCodec[Any, Any]]
    reason: str


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


def _truncating(chain: CodecChain, layout: SegmentLayout) -> list[BaseCodec[Any, Any]]:
    bands, _, cols = layout.chunk_shape
    stored = (bands, layout.last_strip_capacity, cols)
    codecs = chain.codecs()
    handling = decide_edge_handling(codecs, (bands, layout.last_strip_rows, cols), stored)
    if handling is not EdgeHandling.TRUNCATE:  # strips pad only along y: never crop
        raise AssertionError(f"unexpected edge handling {handling} for a strip")
    return list(insert_edge_codec(codecs, handling, stored))  # type: ignore[arg-type]


def _image_codec_grid(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, read: ReadRange, source: str
) -> GridDecision:
    rows_seen = decoded_last_strip_rows(table, layout, chain, read, source)
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
    short = layout.last_strip_rows * stored_row_bytes(layout, itemsize, chain)
    if not chain.is_compressed:
        if all(n == short for n in last_strip_lengths(table, layout)):
            return GridDecision(regular, chain.codecs(), "one strip of the image's rows")
        return GridDecision(
            regular, _truncating(chain, layout), "one strip, padded towards RowsPerStrip"
        )
    if stated >= WHOLE_IMAGE_ROWS:
        return GridDecision(regular, chain.codecs(), "one strip (RowsPerStrip 2**32-1)")
    probed = probe_last_strip and probed_lengths(table, layout, chain, itemsize, read, source)
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
    rows_seen = decoded_last_strip_rows(table, layout, chain, read, source)
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
        check_uncompressed_lengths(table, layout, itemsize, chain, source)
    if layout.tiled:
        return GridDecision(_regular(layout), chain.codecs(), "tiles")
    if layout.stated_strip_rows:
        return _one_strip_grid(table, layout, chain, itemsize, read, source, probe_last_strip)
    if layout.last_strip_rows == layout.chunk_shape[1]:
        return GridDecision(_regular(layout), chain.codecs(), "strips divide the image")
    if chain.is_image_codec:
        return _image_codec_grid(table, layout, chain, read, source)
    if not chain.is_compressed:
        stored_row = stored_row_bytes(layout, itemsize, chain)
        last = last_strip_lengths(table, layout)
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


__all__ = ["WHOLE_IMAGE_ROWS", "GridDecision", "decide_grid"]
