"""The IFD chains of a TIFF file, walked with a cycle check and a budget.

tifffile follows next-IFD pointers lazily, as pages are asked for. Its check for a chain
that points back into itself runs only when it lists a hundred IFDs in one go, never
while a caller steps through ``tif.pages`` one page at a time: an IFD whose next
pointer points at itself is then read again and again, without end and with growing
memory. Every walk of the parser goes through here instead:

* :func:`walk_main_chain` follows the main chain's next pointers over the bytes the
  reader fetched (usually no request), keeping the offsets seen, and stops at the first
  one seen before (a loop), after :data:`MAX_IFDS` IFDs, or once the IFD tables walked
  add up to more bytes than the file holds (tables that overlap: pointers into another
  IFD); it ends where tifffile ends a chain (offset 0, an offset past the end, an
  unreadable or implausible entry count). :func:`main_pages` then asks tifffile for
  exactly the IFDs walked.
* :func:`subifd_pages` lists an IFD's SubIFDs, leaving out offsets seen before.

A loop or an exhausted budget stops the walk with a :class:`IFDChainWarning` naming the
file; the IFDs before it are kept. Where the IFD a parse needs lies past that point,
the parser refuses the file (:class:`~virtualizarr_fill.errors.CorruptFileError`).
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tifffile

if TYPE_CHECKING:
    from tifffile import TiffFile, TiffFrame, TiffPage

    from virtualizarr_fill.io.files import StoreFile

#: The most IFDs one parse walks (main chain and SubIFDs together). Far above the
#: pages of real files; the parse deadline bounds time as well.
MAX_IFDS = 2**17
#: tifffile ends a chain at an IFD listing more entries than this.
MAX_ENTRIES = 4096


class IFDChainWarning(UserWarning):
    """An IFD chain loops back, overlaps itself or exceeds the IFD budget: the IFDs
    before that point are read, the rest left out. ``url`` names the file."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


@dataclass(frozen=True)
class ChainWalk:
    """The IFDs of a main chain: their offsets in chain order, and why the walk stopped
    before the chain's end (``None``: the chain ends as the file says)."""

    offsets: tuple[int, ...]
    stopped: str | None = None

    def __len__(self) -> int:
        return len(self.offsets)


class IFDBudget:
    """IFDs and IFD-table bytes one parse may still walk, and the IFD offsets it saw."""

    def __init__(self, file_size: int, max_ifds: int | None = None) -> None:
        self.max_ifds = MAX_IFDS if max_ifds is None else max_ifds
        self.ifds = self.max_ifds
        self.bytes = file_size
        self.seen: set[int] = set()


def walk_main_chain(tif: TiffFile, reader: StoreFile, budget: IFDBudget) -> ChainWalk:
    """The main IFD chain of ``tif`` (see the module docstring); IFD tables are read
    through ``reader``, from bytes already fetched where they lie there."""
    tiff = tif.tiff
    size = reader.size
    count_format, count_size = tiff.tagnoformat, tiff.tagnosize
    entry_size = tiff.tagsize
    offset_format, offset_size = tiff.offsetformat, tiff.offsetsize
    try:
        offset = int(tif.pages.first.offset)
    except IndexError:  # no first IFD: the parser refuses the file
        return ChainWalk(())
    offsets: list[int] = []
    seen = budget.seen
    while offset:
        if offset in seen:
            index = offsets.index(offset) if offset in offsets else None
            where = f"IFD {index}" if index is not None else "an IFD listed before"
            return ChainWalk(
                tuple(offsets),
                f"the next-IFD pointer of IFD {len(offsets) - 1} points back to {where} "
                f"(offset {offset})",
            )
        if offset >= size:  # tifffile ends the chain here
            break
        head = reader.read_range(offset, count_size)
        if len(head) < count_size:
            break
        (count,) = struct.unpack(count_format, head)
        if count > MAX_ENTRIES:  # tifffile drops this IFD and ends the chain
            break
        table = count_size + count * entry_size + offset_size
        if budget.ifds <= 0 or budget.bytes < table:
            what = (
                f"more than {budget.max_ifds} IFDs"
                if budget.ifds <= 0
                else "IFD tables larger than the file together (IFDs overlapping each other)"
            )
            return ChainWalk(tuple(offsets), f"the IFD chain holds {what}")
        budget.ifds -= 1
        budget.bytes -= table
        seen.add(offset)
        offsets.append(offset)
        pointer = reader.read_range(offset + table - offset_size, offset_size)
        if len(pointer) < offset_size:  # tifffile keeps this IFD and ends the chain
            break
        (offset,) = struct.unpack(offset_format, pointer)
    return ChainWalk(tuple(offsets))


def warn_stopped(walk: ChainWalk, url: str) -> None:
    """Warn that the chain was cut short, if it was."""
    if walk.stopped is not None:
        warnings.warn(
            IFDChainWarning(
                f"{url}: {walk.stopped}; only the {len(walk)} IFDs before that point are read",
                url=url,
            ),
            stacklevel=3,
        )


def main_pages(tif: TiffFile, walk: ChainWalk) -> Iterator[TiffPage]:
    """tifffile's full parse of every IFD of ``walk``, in chain order."""
    pages = tif.pages
    for index in range(len(walk)):
        try:
            page = pages[index]
        except IndexError:  # tifffile ended the chain before (an unreadable IFD)
            return
        yield _as_page(page)


def subifd_pages(page: TiffPage, budget: IFDBudget, url: str) -> list[TiffPage]:
    """The SubIFDs of ``page`` that were not walked before, within the budget (a warning
    names the file for the others)."""
    offsets = [int(o) for o in (page.subifds or ())]
    if not offsets or page.pages is None:
        return []
    kept = 0
    problem = None
    for offset in offsets:
        if offset in budget.seen:
            problem = f"a SubIFD of IFD {page.index} points to an IFD listed before ({offset})"
            break
        if budget.ifds <= 0:
            problem = f"the file holds more than {budget.max_ifds} IFDs"
            break
        budget.seen.add(offset)
        budget.ifds -= 1
        kept += 1
    if problem is not None:
        warnings.warn(
            IFDChainWarning(
                f"{url}: {problem}; only the {kept} SubIFDs before it are read",
                url=url,
            ),
            stacklevel=3,
        )
    subs = page.pages
    pages = []
    for number in range(kept):
        try:
            pages.append(_as_page(subs[number]))
        except IndexError:  # tifffile could not read the first SubIFD
            break
    return pages


def _as_page(page: TiffPage | TiffFrame) -> TiffPage:
    if isinstance(page, tifffile.TiffFrame):
        return page.aspage()  # type: ignore[no-any-return]
    return page


__all__ = [
    "MAX_IFDS",
    "ChainWalk",
    "IFDBudget",
    "IFDChainWarning",
    "main_pages",
    "subifd_pages",
    "walk_main_chain",
    "warn_stopped",
]
