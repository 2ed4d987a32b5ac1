"""Where an IFD's strips or tiles lie, and what their byte counts say.

StripOffsets/TileOffsets and their byte counts become the chunk manifest
(:func:`chunk_manifest`): sparse segments are left out and read as the array's fill
value, and a segment extending past the end of the file refuses the file.

Which segments are sparse follows GDAL (:func:`as_gdal_reads`): GDAL's
``GTiffDataset::IsBlockAvailable`` (``frmts/gtiff/gtiffdataset_read.cpp``) takes a block
as absent when its byte count is 0, whatever its offset, and fills it with the nodata
value (0 without one). Before that, libtiff's ``TIFFReadDirectory``
(``libtiff/tif_dirread.c``, ``ByteCountLooksBad`` and ``EstimateStripByteCounts``)
replaces the byte count 0 of an image's only strip at a non-zero offset by an estimate:
the image's rows for uncompressed data (tifffile reads those same bytes), a guess for
compressed data (tifffile reads fill). A segment at offset 0 holding bytes is read by GDAL
from the file's header, by tifffile as fill. Where the two readers disagree the file is
refused, except for a lone uncompressed strip with offset and byte count both 0: GDAL
fills it, tifffile reads bytes from elsewhere in the file, and the parser follows GDAL.

Uncompressed segments must hold exactly the bytes of their rows
(:func:`check_uncompressed_lengths`); the byte counts of the last strips are what
:mod:`.segment_grids` decides the chunk grid from.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
from virtualizarr.manifests import ChunkManifest

from virtualizarr_fill.codecs.tiff_packints import row_bytes
from virtualizarr_fill.errors import CorruptFileError
from virtualizarr_fill.tiff.arrays import segment_manifest

if TYPE_CHECKING:
    from virtualizarr_fill.tiff.codecs_map import CodecChain
    from virtualizarr_fill.tiff.tags import SegmentLayout


class SegmentTable(Protocol):
    """Where an IFD's strips or tiles lie, as tifffile lists them: a ``TiffPage``, or a
    ``TiffFrame`` when the rest of the IFD is known from an IFD parsed before."""

    @property
    def dataoffsets(self) -> Sequence[int] | np.ndarray: ...

    @property
    def databytecounts(self) -> Sequence[int] | np.ndarray: ...


ReadRange = Callable[[int, int], bytes]


@dataclass(frozen=True)
class _Segments:
    """A segment table with byte counts as libtiff reads them."""

    dataoffsets: Sequence[int]
    databytecounts: Sequence[int]


def as_gdal_reads(
    table: SegmentTable, layout: SegmentLayout, chain: CodecChain, itemsize: int, source: str
) -> SegmentTable:
    """``table`` with the byte counts GDAL reads (see the module docstring): the estimate
    libtiff makes for a lone uncompressed strip of byte count 0; raises for a segment at
    offset 0 holding bytes, and for a lone compressed strip of byte count 0."""
    offsets, lengths = table.dataoffsets, table.databytecounts
    if type(offsets) is tuple and 0 not in offsets and (len(lengths) != 1 or lengths[0] != 0):
        return table
    offsets_array = np.asarray(offsets, dtype=np.uint64).reshape(layout.grid_shape)
    lengths_array = np.asarray(lengths, dtype=np.uint64).reshape(layout.grid_shape)
    header = (offsets_array == 0) & (lengths_array != 0)
    kind = "tile" if layout.tiled else "strip"
    if header.any():
        index = tuple(int(i) for i in np.argwhere(header)[0])
        raise CorruptFileError(
            f"{source}: {kind} {index} lies at offset 0 with {int(lengths_array[index])} "
            "bytes: GDAL reads the file's header there as pixels, tifffile reads fill "
            "(damaged offsets)"
        )
    if layout.tiled or offsets_array.size != 1 or int(lengths_array.flat[0]) != 0:
        return table
    offset = int(offsets_array.flat[0])
    if offset == 0:
        return table  # both 0: sparse for GDAL
    if chain.is_compressed:
        raise CorruptFileError(
            f"{source}: the image's only strip (offset {offset}) has byte count 0: GDAL "
            "decodes it from an estimated length, tifffile reads fill (damaged byte counts)"
        )
    rows = layout.shape[1]
    return _Segments((offset,), (rows * stored_row_bytes(layout, itemsize, chain),))


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
    """The sparse segments (byte count 0; an offset 0 holding bytes was refused by
    :func:`as_gdal_reads`; None when there are none) and the
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


def stored_row_bytes(layout: SegmentLayout, itemsize: int, chain: CodecChain | None = None) -> int:
    """Stored bytes of one row of a segment."""
    packed = chain.packed if chain is not None else None
    if packed is not None:
        return row_bytes(packed.bitspersample, packed.runlen)
    bands, _, cols = layout.chunk_shape
    return bands * cols * itemsize


# Byte counts above this are past any file; clipping keeps them comparable in int64.
_LENGTH_CLIP = np.uint64(2**62)


def segment_lengths(table: SegmentTable, layout: SegmentLayout) -> np.ndarray:
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


def last_strip_lengths(table: SegmentTable, layout: SegmentLayout) -> list[int]:
    listed = _listed_segments(table)
    if listed is not None:
        offsets, lengths = listed
        per_plane = layout.grid_shape[1] * layout.grid_shape[2]
        last = [p * per_plane + per_plane - 1 for p in range(layout.grid_shape[0])]
        clip = int(_LENGTH_CLIP)
        return [min(int(lengths[k]), clip) for k in last if offsets[k] and lengths[k]]
    lengths_array = segment_lengths(table, layout)
    return [int(n) for n in lengths_array[:, -1, 0] if n > 0]


def last_strips(table: SegmentTable, layout: SegmentLayout) -> list[tuple[int, int]]:
    """(offset, byte count) of the stored last strip of each plane."""
    offsets = np.asarray(table.dataoffsets, dtype=np.uint64).reshape(layout.grid_shape)
    lengths = segment_lengths(table, layout)
    strips = []
    for plane in range(layout.grid_shape[0]):
        offset, length = int(offsets[plane, -1, 0]), int(lengths[plane, -1, 0])
        if offset and length:
            strips.append((offset, length))
    return strips


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


def check_uncompressed_lengths(
    table: SegmentTable, layout: SegmentLayout, itemsize: int, chain: CodecChain, source: str
) -> None:
    """Stored uncompressed segments must hold exactly their bytes (else the file is damaged).

    Tiles and interior strips are full size; the last strip holds at least the rows left
    in the image and at most RowsPerStrip rows (longer ones are trimmed by truncation).
    """
    row = stored_row_bytes(layout, itemsize, chain)
    full = layout.chunk_shape[1] * row
    short = layout.last_strip_rows * row
    longest = layout.last_strip_capacity * row
    if _uncompressed_lengths_fit(table, layout, full, short, longest):
        return
    lengths = segment_lengths(table, layout)
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


__all__ = [
    "ReadRange",
    "as_gdal_reads",
    "SegmentTable",
    "check_uncompressed_lengths",
    "chunk_manifest",
    "last_strip_lengths",
    "last_strips",
    "segment_lengths",
    "stored_row_bytes",
]
