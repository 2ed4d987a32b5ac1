"""Keys for the TIFF parser's result caches: tags as the file stores them.

tifffile derives every tag value from the entry's field type, count and value bytes and
the file's byte order, so two IFDs that store the same bytes for a set of tags hold the
same values for them, whatever their offsets in their files. The keys are built from
bytes the first request already fetched (``StoreFile.cached_range``), never with a
request, and are None (nothing kept) where a value lies elsewhere or an IFD repeats a
tag code.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tifffile import TiffFile, TiffPage

#: ``StoreFile.cached_range``: bytes already fetched, or None (never a request).
CachedRange = Callable[[int, int], "bytes | None"]

#: StripOffsets, StripByteCounts, TileOffsets, TileByteCounts: where each file keeps its
#: own segments. :func:`ifd_key` keys them by field type and count (the segment grid)
#: and leaves their values to the caller.
SEGMENT_TAGS = frozenset({273, 279, 324, 325})


@functools.cache
def _field_sizes() -> dict[int, int]:
    """Bytes per value of each TIFF field type, as tifffile sizes them."""
    from tifffile import TIFF

    return {int(code): struct.calcsize(fmt) for code, fmt in TIFF.DATA_FORMATS.items()}


@functools.cache
def _pointer_tags() -> frozenset[int]:
    """Tags whose value field tifffile always reads as an offset, whatever their size."""
    from tifffile import TIFF

    return frozenset(TIFF.TAG_READERS)


#: SubIFDs: the IFDs they point at are images of their own, which a key does not cover.
SUBIFDS_TAG = 330


def _file_layout(page: TiffPage) -> list[Any]:
    return _layout_of(page.parent.tiff)


def _layout_of(tiff: Any) -> list[Any]:
    return [tiff.byteorder, tiff.tagsize, tiff.is_ndpi]


def _later_page_flags(tif: TiffFile) -> tuple[bool, ...]:
    """The file-wide flags tifffile reads pages after the first by (see :func:`ifd_key`)."""
    return (tif.is_lsm, tif.is_vista, tif.is_philips, tif.is_indica)


def raw_tags_key(
    page: TiffPage, codes: tuple[int, ...], cached_range: CachedRange
) -> Hashable | None:
    """The tags ``codes`` of ``page`` as the file stores them (field type, count and value
    bytes, None for an absent tag), with the file's byte order and entry layout; None
    when a value is not in the bytes already read or the IFD repeats a tag code.

    Two IFDs with the same key hold the same values for these tags.
    """
    tags = page.tags
    if len(tags) != len(tags.keys()):  # repeated codes: leave them to tifffile
        return None
    key = _file_layout(page)
    for code in codes:
        tag = tags.get(code)
        if tag is None:
            key.append(None)
            continue
        raw = _stored_value(tag, cached_range)
        if raw is None:
            return None
        key.append((int(tag.dtype), tag.count, bytes(raw)))
    return tuple(key)


def _stored_value(
    tag: Any, cached_range: CachedRange, head: bytes | memoryview = b""
) -> bytes | memoryview | None:
    """The value bytes of ``tag`` as the file stores them: sliced from ``head`` (the
    start of the file as fetched) where they lie in it, else from ``cached_range``; None
    for an unknown field type, an impossible offset or bytes not yet fetched."""
    size = _field_sizes().get(tag.dtype)
    offset = tag.valueoffset
    if size is None or offset < 8:
        return None
    return _fetched(offset, tag.count * size, cached_range, head)


def _fetched(
    start: int, length: int, cached_range: CachedRange, head: bytes | memoryview
) -> bytes | memoryview | None:
    """``length`` bytes from ``start``: sliced from ``head`` where they lie in it, else
    from ``cached_range`` (None when not fetched)."""
    end = start + length
    if end <= len(head):
        return head[start:end]
    return cached_range(start, length)


@functools.cache
def _struct(fmt: str) -> struct.Struct:
    return struct.Struct(fmt)


def ifd_key(
    page: TiffPage,
    cached_range: CachedRange,
    head: bytes | memoryview = b"",
    ignore: frozenset[int] = frozenset(),
    refuse: frozenset[int] = frozenset(),
) -> Hashable | None:
    """Every tag of ``page`` as the file stores it but those in ``ignore``, segment
    offsets and byte counts by field type and count only; None when a value is not in
    the bytes already read, the IFD repeats a tag code, holds an entry of an unknown
    field type or a tag in ``refuse``, or the file is an NDPI file. ``head`` is the
    start of the file as fetched (``StoreFile.first_block``), where values are sliced
    from directly; ``cached_range`` serves the others.

    Two IFDs with the same key are the same image but for where their segments lie
    (and the ``ignore`` tags): everything tifffile derives for the page from the other
    tags follows from these bytes, the file layout and, for pages after the first, the
    file-wide flags of the formats
    whose later pages tifffile reads differently (LSM, Vista, Philips and Indica files;
    the parser never asks for EER super-resolution, the one other file-wide input).
    The key of a first page and that of a later one differ in length, so never collide.
    """
    tif = page.parent
    if tif.tiff.is_ndpi:
        return None
    prefix = _key_prefix(tif, first=page.index == 0)
    stored = _stored_ifd(tif.tiff, prefix, int(page.offset), cached_range, head, ignore, refuse)
    return None if stored is None else stored.key


#: IFDs with SubIFDs are not keyed in the main chain: their SubIFDs are images of their
#: own, which the key does not cover.
MAIN_CHAIN_REFUSED = frozenset({SUBIFDS_TAG})


def main_chain_key(
    page: TiffPage, cached_range: CachedRange, head: bytes | memoryview = b""
) -> Hashable | None:
    """The key :func:`stored_main_chain` gives ``page`` of the main chain."""
    return ifd_key(page, cached_range, head, refuse=MAIN_CHAIN_REFUSED)


@dataclass(frozen=True)
class StoredIFD:
    """One IFD of the main chain read from the bytes already fetched, without tifffile."""

    offset: int
    #: The IFD's tags as stored (:func:`main_chain_key`), or None.
    key: Hashable | None
    #: Where the next IFD starts (0: the last IFD).
    next_offset: int


#: Longest main chain walked by :func:`stored_main_chain`.
MAX_STORED_CHAIN = 4096


def stored_main_chain(
    tif: TiffFile, cached_range: CachedRange, head: bytes | memoryview = b""
) -> list[StoredIFD] | None:
    """The main IFD chain as :class:`StoredIFD` s, or None when any of it lies outside the
    bytes already fetched or it is anything but a plain chain (a repeated IFD, more than
    :data:`MAX_STORED_CHAIN` IFDs, an NDPI file, an IFD past the end of the file):
    tifffile walks those itself. ``head`` is the start of the file as fetched, as for
    :func:`ifd_key`.
    """
    tiff = tif.tiff
    if tiff.is_ndpi:
        return None
    size = tif.filehandle.size
    chain: list[StoredIFD] = []
    seen: set[int] = set()
    later_prefix: tuple[Any, ...] | None = None
    prefix: tuple[Any, ...] = ()
    offset = int(tif.pages.first.offset)
    while offset:
        if offset in seen or offset >= size or len(chain) >= MAX_STORED_CHAIN:
            return None
        if not chain:
            prefix = _key_prefix(tif, first=True)
        elif later_prefix is None:
            prefix = later_prefix = _key_prefix(tif, first=False)
        stored = _stored_ifd(
            tiff, prefix, offset, cached_range, head, frozenset(), MAIN_CHAIN_REFUSED
        )
        if stored is None:
            return None
        seen.add(offset)
        chain.append(stored)
        offset = stored.next_offset
    return chain


def _key_prefix(tif: TiffFile, *, first: bool) -> tuple[Any, ...]:
    """File layout, and for pages after the first the file-wide flags."""
    layout = _layout_of(tif.tiff)
    return tuple(layout) if first else (*layout, _later_page_flags(tif))


def _stored_ifd(
    tiff: Any,
    key_prefix: tuple[Any, ...],
    offset: int,
    cached_range: CachedRange,
    head: bytes | memoryview,
    ignore: frozenset[int],
    refuse: frozenset[int],
) -> StoredIFD | None:
    """The IFD at ``offset``, its key after ``key_prefix`` (see :func:`ifd_key`);
    None when its entry table is not in the bytes already read, or tifffile would end
    the chain at it.

    Hand-written because tifffile reads an IFD's entries only into a full ``TiffPage``
    (or, for its segments, a ``TiffFrame``); the key needs the entries as stored."""
    number = _fetched(offset, tiff.tagnosize, cached_range, head)
    if number is None:
        return None
    (count,) = _struct(tiff.tagnoformat).unpack(number)
    if count > 4096:  # tifffile ends the chain here
        return None
    entries_size = count * tiff.tagsize
    table = _fetched(offset + tiff.tagnosize, entries_size + tiff.offsetsize, cached_range, head)
    if table is None:
        return None
    (next_offset,) = _struct(tiff.offsetformat).unpack_from(table, entries_size)
    key = _entries_key(tiff, key_prefix, table[:entries_size], cached_range, head, ignore, refuse)
    return StoredIFD(offset, key, next_offset)


def _entries_key(
    tiff: Any,
    key_prefix: tuple[Any, ...],
    table: bytes | memoryview,
    cached_range: CachedRange,
    head: bytes | memoryview,
    ignore: frozenset[int],
    refuse: frozenset[int],
) -> Hashable | None:
    """:func:`ifd_key` of a page, from its entry table."""
    sizes = _field_sizes()
    pointer_tags = _pointer_tags()
    pointer = _struct(tiff.offsetformat)
    threshold = tiff.offsetsize
    codes: list[int] = []
    entries: list[int] = []
    stored: list[bytes | memoryview] = []
    for code, dtype, number, value in _struct(tiff.tagheaderformat).iter_unpack(table):
        size = sizes.get(dtype)
        if size is None or code in refuse:
            return None
        codes.append(code)
        if code in ignore:
            continue
        entries += (code, dtype, number)
        if code in SEGMENT_TAGS:
            continue
        nbytes = number * size
        if nbytes <= threshold and code not in pointer_tags:
            stored.append(value[:nbytes])
            continue
        (start,) = pointer.unpack(value)
        pointed = _fetched(start, nbytes, cached_range, head) if start >= 8 else None
        if pointed is None:
            return None
        stored.append(pointed)
    if len(set(codes)) != len(codes):  # repeated codes: leave them to tifffile
        return None
    # The entries give each value's length, so the joined values split one way only.
    return (*key_prefix, tuple(entries), b"".join(stored))


__all__ = [
    "MAX_STORED_CHAIN",
    "SEGMENT_TAGS",
    "MAIN_CHAIN_REFUSED",
    "CachedRange",
    "StoredIFD",
    "ifd_key",
    "main_chain_key",
    "raw_tags_key",
    "stored_main_chain",
]
