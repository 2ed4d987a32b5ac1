"""Fixed array chunk indexes, read from their bytes.

A chunked dataset of fixed maximum shape written with the version 4 layout (HDF5 1.10+
with ``libver="latest"``, or any file opened for SWMR) indexes its chunks with a fixed
array: one element per chunk of the maximum-shape chunk grid, in row-major order. An
element holds the chunk's address (all bits set: never written), and for filtered
datasets also its stored size and filter mask. The elements live in a data block,
split into pages of ``2**page_bits`` elements when there are more than that (pages
never written are marked in a bitmap).

Layout, per the HDF5 file format specification ("Fixed Array Header" FAHD, "Fixed Array
Data Block" FADB, data block pages) and libhdf5's H5FAcache.c and H5Dfarray.c;
hand-written, as no library exposes the structure. Every checksum is verified; any
field this module does not expect raises
:class:`~virtualizarr_fill.hdf5.format.layout_message.Unavailable`, so that libhdf5 reads
the index instead (and refuses it if it is corrupt).
"""

from __future__ import annotations

import math

import numpy as np

from virtualizarr_fill.hdf5 import checksum
from virtualizarr_fill.hdf5.format.layout_message import (
    Reader,
    Unavailable,
    read_exactly,
    undefined,
)

_VERSION = 0
_CLIENT_UNFILTERED = 0
_CLIENT_FILTERED = 1


class CorruptIndex(Exception):
    """A structure of the index fails its checksum or contradicts itself."""


def chunk_size_width(chunk_bytes: int, layout_version: int, length_size: int) -> int:
    """Bytes a filtered chunk's stored size takes in the index: up to layout version 4,
    enough for the unfiltered chunk size plus one byte (a filter may enlarge a chunk),
    at most 8; from version 5 (libhdf5 2.0) the file's size of lengths."""
    if layout_version >= 5:
        return length_size
    return min(1 + (max(chunk_bytes, 1).bit_length() - 1 + 8) // 8, 8)


def _element_dtype(address_size: int, filtered: bool, size_width: int) -> np.dtype:
    fields: list[tuple[str, str]] = [("address", f"V{address_size}")]
    if filtered:
        fields += [("size", f"V{size_width}"), ("mask", "<u4")]
    return np.dtype(fields)


def _little_endian(raw: np.ndarray, width: int) -> np.ndarray:
    """Unsigned little-endian integers of ``width`` bytes (a void field) as uint64."""
    if width in (1, 2, 4, 8):
        return raw.view(f"<u{width}").astype(np.uint64)
    padded = np.zeros((len(raw), 8), dtype=np.uint8)
    padded[:, :width] = np.ascontiguousarray(raw).view(np.uint8).reshape(len(raw), width)
    return padded.view("<u8").ravel()


def _check(data: bytes, start: int, end: int, what: str, position: int) -> None:
    """``data[start:end]`` ends in its checksum (``position``: where it is in the file)."""
    ok = checksum.verified(data, start, end)
    if ok is None:
        raise Unavailable
    if not ok:
        raise CorruptIndex(f"fixed array {what} at byte {position} fails its checksum")


def _runs(pages: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive page numbers as (first, stop) pairs."""
    runs: list[tuple[int, int]] = []
    for page in pages:
        if runs and runs[-1][1] == page:
            runs[-1] = (runs[-1][0], page + 1)
        else:
            runs.append((page, page + 1))
    return runs


def read_fixed_array(
    read: Reader,
    *,
    base: int,
    address: int,
    sizes: tuple[int, int],
    page_bits: int,
    elements: int,
    filtered: bool,
    chunk_bytes: int,
    size_width: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(element indices, relative addresses, stored sizes, filter masks) of the written
    chunks of the fixed array whose header is at (relative) ``address``.

    ``page_bits`` comes from the layout message, ``elements`` is the number of chunks of
    the maximum-shape grid, ``chunk_bytes`` the unfiltered chunk size (the stored size
    of every chunk when ``filtered`` is false), ``size_width`` the bytes a filtered
    chunk's stored size takes (see :func:`chunk_size_width`). Raises :class:`CorruptIndex` for a
    checksum failure or inconsistent structure, ``Unavailable`` for anything this
    module does not read.
    """
    address_size, length_size = sizes
    if address_size not in (2, 4, 8) or length_size not in (2, 4, 8) or not checksum.available():
        raise Unavailable
    header_size = 4 + 4 + length_size + address_size + 4
    header_at = base + address
    header = read_exactly(read, header_at, header_size)
    if header[:4] != b"FAHD":
        raise CorruptIndex(f"no fixed array header at byte {header_at}")
    _check(header, 0, header_size, "header", header_at)
    version, client, element_size, stored_page_bits = header[4], header[5], header[6], header[7]
    count = int.from_bytes(header[8 : 8 + length_size], "little")
    block = int.from_bytes(header[8 + length_size : 8 + length_size + address_size], "little")
    expected_size = address_size + (size_width + 4 if filtered else 0)
    if (
        version != _VERSION
        or client != (_CLIENT_FILTERED if filtered else _CLIENT_UNFILTERED)
        or element_size != expected_size
        or stored_page_bits != page_bits
        or count != elements
        or not 0 < page_bits < 32
    ):
        raise Unavailable  # not what libhdf5 writes for this dataset: let it decide
    empty = np.zeros(0, dtype=np.int64), *(np.zeros(0, dtype=np.uint64),) * 3
    if undefined(block, address_size) or count == 0:
        return empty  # type: ignore[return-value]
    per_page = 1 << page_bits
    pages = math.ceil(count / per_page) if count > per_page else 0
    bitmap_size = (pages + 7) // 8
    prefix = 4 + 2 + address_size + bitmap_size + 4
    if pages:
        page_stride = per_page * element_size + 4
        last = count - (pages - 1) * per_page
        total = prefix + (pages - 1) * page_stride + last * element_size + 4
    else:
        total = prefix + count * element_size
    block_at = base + block
    # Paged: the prefix first, then only the pages written (as libhdf5 reads them).
    data = read_exactly(read, block_at, prefix if pages else total)
    if data[:4] != b"FADB":
        raise CorruptIndex(f"no fixed array data block at byte {block_at}")
    if data[4] != _VERSION or data[5] != client:
        raise Unavailable
    if int.from_bytes(data[6 : 6 + address_size], "little") != address:
        raise CorruptIndex(
            f"fixed array data block at byte {block_at} names another header "
            f"than the one at byte {header_at}"
        )
    dtype = _element_dtype(address_size, filtered, size_width)
    if not pages:
        _check(data, 0, total, "data block", block_at)
        raw = np.frombuffer(data, dtype=dtype, count=count, offset=prefix - 4)
        indices = np.arange(count, dtype=np.int64)
    else:
        _check(data, 0, prefix, "data block", block_at)
        bitmap = np.unpackbits(np.frombuffer(data, np.uint8, bitmap_size, 6 + address_size))
        written = np.flatnonzero(bitmap[:pages]).tolist()
        if not written:
            return empty  # type: ignore[return-value]
        raws, index_parts = [], []
        for first, stop in _runs(written):
            start = block_at + prefix + first * page_stride
            ends_last = stop == pages
            length = (
                (stop - first - 1) * page_stride
                + (last if ends_last else per_page) * (element_size)
                + 4
            )
            pages_data = read_exactly(read, start, length)
            for page in range(first, stop):
                at = (page - first) * page_stride
                n = last if page == pages - 1 else per_page
                _check(pages_data, at, at + n * element_size + 4, "data block page", start + at)
            # Pages lie at a fixed stride: their elements in one gather.
            full = stop - first - (1 if ends_last else 0)
            if full:
                body = np.frombuffer(pages_data, np.uint8, full * page_stride)
                rows = body.reshape(full, page_stride)[:, : per_page * element_size]
                raws.append(rows.reshape(-1).view(dtype))
                index_parts.append(
                    np.arange(first * per_page, (first + full) * per_page, dtype=np.int64)
                )
            if ends_last:
                at = full * page_stride
                raws.append(np.frombuffer(pages_data, dtype=dtype, count=last, offset=at))
                index_parts.append(np.arange((pages - 1) * per_page, count, dtype=np.int64))
        raw = np.concatenate(raws) if len(raws) > 1 else raws[0]
        indices = np.concatenate(index_parts) if len(index_parts) > 1 else index_parts[0]
    addresses = _little_endian(raw["address"], address_size)
    keep = addresses != np.uint64((1 << (8 * address_size)) - 1)
    addresses, indices = addresses[keep], indices[keep]
    if filtered:
        stored = _little_endian(raw["size"][keep], size_width)
        masks = raw["mask"][keep].astype(np.uint64)
    else:
        stored = np.full(len(addresses), chunk_bytes, dtype=np.uint64)
        masks = np.zeros(len(addresses), dtype=np.uint64)
    return indices, addresses, stored, masks


__all__ = ["CorruptIndex", "chunk_size_width", "read_fixed_array"]
