"""Structure-aware mutations of real TIFF and HDF5 files, for the fuzz suite.

A mutation is a list of byte-level operations (JSON-serialisable, so every finding can be
replayed exactly) plus a label saying what it means structurally. The generators read the
*clean* file once to map its structures -- TIFF IFDs, tag entries, tag arrays and
segments; the HDF5 superblock, object headers and their messages, signature-bearing
metadata blocks (B-tree nodes, heaps, ...) and raw data -- and then mutate exactly those:
bit flips, truncation at every structural boundary, swapped tag types, huge counts,
offsets past the end, dimensions of 10**12.

Choices go through a :class:`Chooser`, so the same generators serve hypothesis (which
shrinks failing cases) and the long randomised run (``conformance/fuzz_long.py``).

Replay a mutation: ``python -m conformance.fuzz.mutations '<mutation json>' OUT`` writes the
mutated file; ``python -m conformance.fuzz.worker OUT`` gives the verdict.

HDF5 metadata from superblock version 2 on is protected by Jenkins' lookup3 checksum; a
mutation inside a checksummed block is followed by a ``checksum`` operation so that it
reaches the parser instead of stopping at the checksum test (the mutations that skip the
fix exercise that test). No Python package exposes lookup3, hence :func:`lookup3`.
"""

from __future__ import annotations

import functools
import json
import random
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

TIFF_SUFFIXES = (".tif", ".tiff")
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


# -- operations ---------------------------------------------------------------------------


def apply_ops(data: bytes, ops: Sequence[dict[str, Any]]) -> bytes:
    """Apply byte-level operations in order (writes past the current end are dropped)."""
    out = bytearray(data)
    for op in ops:
        kind = op["op"]
        if kind == "flip":
            if op["pos"] < len(out):
                out[op["pos"]] ^= 1 << op["bit"]
        elif kind == "put":
            payload = bytes.fromhex(op["hex"])
            pos = op["pos"]
            if pos < len(out):
                out[pos : pos + len(payload)] = payload[: max(len(out) - pos, 0)]
        elif kind == "truncate":
            del out[op["size"] :]
        elif kind == "checksum":
            start, end = op["start"], op["end"]
            if end + 4 <= len(out):
                out[end : end + 4] = struct.pack("<I", lookup3(bytes(out[start:end])))
        else:
            raise ValueError(f"unknown operation {kind!r}")
    return bytes(out)


@dataclass
class Mutation:
    """One mutation of one corpus file: ``ops`` to replay, ``label`` to explain, and the
    parser ``options`` to judge it with (e.g. ``{"layout": "tree"}``; none by default)."""

    file: str
    label: str
    ops: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def apply(self, data: bytes) -> bytes:
        return apply_ops(data, self.ops)

    def to_json(self) -> str:
        raw: dict[str, Any] = {"file": self.file, "label": self.label, "ops": self.ops}
        if self.options:
            raw["options"] = self.options
        return json.dumps(raw)

    @classmethod
    def from_json(cls, text: str) -> Mutation:
        raw = json.loads(text)
        return cls(raw["file"], raw["label"], list(raw["ops"]), dict(raw.get("options", {})))


def _put(pos: int, value: int, width: int, order: str) -> dict[str, Any]:
    value &= (1 << (8 * width)) - 1
    return {"op": "put", "pos": pos, "hex": value.to_bytes(width, order).hex()}  # type: ignore[arg-type]


# -- Jenkins lookup3 (HDF5's metadata checksum) --------------------------------------------

_M32 = 0xFFFFFFFF


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def lookup3(data: bytes, initval: int = 0) -> int:
    """Bob Jenkins' ``hashlittle`` as HDF5's ``H5_checksum_lookup3`` computes it."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length + initval) & _M32
    i = 0
    while length > 12:
        a = (a + int.from_bytes(data[i : i + 4], "little")) & _M32
        b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & _M32
        c = (c + int.from_bytes(data[i + 8 : i + 12], "little")) & _M32
        a = (a - c) & _M32
        a ^= _rot(c, 4)
        c = (c + b) & _M32
        b = (b - a) & _M32
        b ^= _rot(a, 6)
        a = (a + c) & _M32
        c = (c - b) & _M32
        c ^= _rot(b, 8)
        b = (b + a) & _M32
        a = (a - c) & _M32
        a ^= _rot(c, 16)
        c = (c + b) & _M32
        b = (b - a) & _M32
        b ^= _rot(a, 19)
        a = (a + c) & _M32
        c = (c - b) & _M32
        c ^= _rot(b, 4)
        b = (b + a) & _M32
        length -= 12
        i += 12
    if length == 0:
        return c
    tail = data[i : i + length] + bytes(12 - length)
    a = (a + int.from_bytes(tail[0:4], "little")) & _M32
    b = (b + int.from_bytes(tail[4:8], "little")) & _M32
    c = (c + int.from_bytes(tail[8:12], "little")) & _M32
    c ^= b
    c = (c - _rot(b, 14)) & _M32
    a ^= c
    a = (a - _rot(c, 11)) & _M32
    b ^= a
    b = (b - _rot(a, 25)) & _M32
    c ^= b
    c = (c - _rot(b, 16)) & _M32
    a ^= c
    a = (a - _rot(c, 4)) & _M32
    b ^= a
    b = (b - _rot(a, 14)) & _M32
    c ^= b
    c = (c - _rot(b, 24)) & _M32
    return c


# -- choosers -----------------------------------------------------------------------------


class Chooser(Protocol):
    """Where a generator's choices come from (hypothesis or a seeded RNG)."""

    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...


class RandomChooser:
    """Choices from a seeded :class:`random.Random` (the long run)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


def _special_values(width: int, current: int, size: int) -> list[int]:
    """Values that break parsers: boundaries of the field's width and of the file."""
    top = (1 << (8 * width)) - 1
    values = [0, 1, current + 1, max(current - 1, 0), current * 2, top, top >> 1]
    values += [size, size - 1, size + 1, size + 4096]
    if width >= 8:
        values += [10**12, 2**63, 2**40]
    elif width >= 4:
        values += [2**31, 10**9, 2**16]
    elif width == 2:
        values += [0x7FFF, 0x8000]
    return sorted({v & top for v in values})


# -- TIFF structure -----------------------------------------------------------------------

TIFF_TYPE_SIZES = {
    1: 1,
    2: 1,
    3: 2,
    4: 4,
    5: 8,
    6: 1,
    7: 1,
    8: 2,
    9: 4,
    10: 8,
    11: 4,
    12: 8,
    13: 4,
    16: 8,
    17: 8,
    18: 8,
}
#: Tags whose value shapes the image: ImageWidth/Length, BitsPerSample, Compression,
#: Photometric, SamplesPerPixel, RowsPerStrip, PlanarConfig, Predictor, TileWidth/Length,
#: ExtraSamples, SampleFormat, FillOrder, NewSubfileType.
TIFF_SHAPE_TAGS = (256, 257, 258, 259, 262, 277, 278, 284, 317, 322, 323, 338, 339, 266, 254)
TIFF_OFFSET_TAGS = (273, 324)
TIFF_BYTECOUNT_TAGS = (279, 325)


@dataclass(frozen=True)
class TiffEntry:
    """One IFD entry: where its fields and its value lie in the file."""

    ifd: int
    code: int
    dtype: int
    count: int
    entry_pos: int
    value_pos: int
    value_size: int
    inline: bool


@dataclass
class TiffStructure:
    byteorder: str  # "little" / "big"
    bigtiff: bool
    size: int
    ifds: list[tuple[int, int, int]]  # (IFD position, entry count, next-pointer position)
    entries: list[TiffEntry]
    segments: list[tuple[int, int]]  # (offset, byte count) of the first IFD's segments
    data: bytes = b""
    #: Indices into ``ifds`` of the main chain's IFDs (the others are SubIFDs).
    main_ifds: tuple[int, ...] = ()

    @property
    def offset_size(self) -> int:
        return 8 if self.bigtiff else 4

    @property
    def count_size(self) -> int:
        return 8 if self.bigtiff else 2

    @property
    def entry_size(self) -> int:
        return 20 if self.bigtiff else 12

    def entries_of(self, codes: Sequence[int]) -> list[TiffEntry]:
        return [e for e in self.entries if e.code in codes]

    def metadata_ranges(self) -> list[tuple[int, int]]:
        """Header, IFD tables and out-of-line tag values (not pixel data)."""
        ranges = [(0, 16 if self.bigtiff else 8)]
        for position, count, next_pos in self.ifds:
            ranges.append((position, next_pos + self.offset_size))
            del count
        for entry in self.entries:
            if not entry.inline and entry.value_size:
                ranges.append((entry.value_pos, entry.value_pos + entry.value_size))
        return [(a, min(b, self.size)) for a, b in ranges if a < self.size]

    def boundaries(self) -> list[int]:
        """Every offset where a structure starts or ends."""
        points = {16 if self.bigtiff else 8, self.size - 1}
        for position, count, next_pos in self.ifds:
            points.update(
                {position, position + self.count_size, next_pos, next_pos + self.offset_size}
            )
            points.update(position + self.count_size + i * self.entry_size for i in range(count))
        for entry in self.entries:
            points.update({entry.value_pos, entry.value_pos + entry.value_size})
        for offset, length in self.segments:
            points.update({offset, offset + length})
        return sorted(p for p in points if 0 < p < self.size)


@functools.lru_cache(maxsize=256)
def tiff_structure(path: str) -> TiffStructure:
    """Map the clean TIFF at ``path`` with tifffile."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        fmt = tif.tiff
        byteorder = "little" if tif.byteorder == "<" else "big"
        bigtiff = fmt.version == 43
        count_size = 8 if bigtiff else 2
        entry_size = 20 if bigtiff else 12
        ifds: list[tuple[int, int, int]] = []
        entries: list[TiffEntry] = []
        pages: list[Any] = []
        main_ifds = []
        for page in tif.pages:
            main_ifds.append(len(pages))
            pages.append(page)
            pages.extend(getattr(page, "pages", None) or ())
        for number, page in enumerate(pages):
            tags = list(page.tags) if hasattr(page, "tags") else []
            ifds.append(
                (
                    int(page.offset),
                    len(tags),
                    int(page.offset) + count_size + len(tags) * entry_size,
                )
            )
            for tag in tags:
                size = TIFF_TYPE_SIZES.get(int(tag.dtype), 1) * int(tag.count)
                entries.append(
                    TiffEntry(
                        ifd=number,
                        code=int(tag.code),
                        dtype=int(tag.dtype),
                        count=int(tag.count),
                        entry_pos=int(tag.offset),
                        value_pos=int(tag.valueoffset),
                        value_size=size,
                        inline=size <= fmt.tagoffsetthreshold,
                    )
                )
        first = tif.pages.first
        segments = list(
            zip(
                (int(o) for o in first.dataoffsets),
                (int(n) for n in first.databytecounts),
                strict=True,
            )
        )
        size = tif.filehandle.size
    data = Path(path).read_bytes()
    return TiffStructure(byteorder, bigtiff, size, ifds, entries, segments, data, tuple(main_ifds))


def _tiff_entry_field(s: TiffStructure, entry: TiffEntry, part: str) -> tuple[int, int]:
    """(position, width) of an entry's ``type``, ``count`` or ``value`` field."""
    if part == "type":
        return entry.entry_pos + 2, 2
    if part == "count":
        return entry.entry_pos + 4, s.offset_size
    return entry.entry_pos + 4 + s.offset_size, s.offset_size


def _tiff_set_scalar(s: TiffStructure, entry: TiffEntry, value: int) -> list[dict[str, Any]]:
    """Make a one-value entry hold ``value`` as LONG (LONG8 in BigTIFF when it needs it)."""
    big = s.bigtiff and value > 0xFFFFFFFF
    dtype = 16 if big else 4
    width = 8 if big else 4
    type_pos, _ = _tiff_entry_field(s, entry, "type")
    count_pos, count_width = _tiff_entry_field(s, entry, "count")
    value_pos, value_width = _tiff_entry_field(s, entry, "value")
    # An inline value sits left-justified in the value field, in either byte order.
    value &= (1 << (8 * width)) - 1
    payload = value.to_bytes(width, s.byteorder).ljust(value_width, b"\0")  # type: ignore[arg-type]
    return [
        _put(type_pos, dtype, 2, s.byteorder),
        _put(count_pos, 1, count_width, s.byteorder),
        {"op": "put", "pos": value_pos, "hex": payload.hex()},
    ]


def _tiff_array_element(entry: TiffEntry, index: int) -> tuple[int, int]:
    width = TIFF_TYPE_SIZES.get(entry.dtype, 4)
    return entry.value_pos + index * width, width


def tiff_mutation(path: str, name: str, chooser: Chooser) -> Mutation:
    """One structural mutation of the TIFF at ``path`` (``name`` identifies it in reports)."""
    s = tiff_structure(path)
    kind = chooser.choice(TIFF_KINDS)
    ops, label = TIFF_GENERATORS[kind](s, chooser)
    options = chooser.choice(TIFF_KIND_OPTIONS[kind]) if kind in TIFF_KIND_OPTIONS else {}
    return Mutation(name, f"{kind}: {label}", ops, dict(options))


def _tiff_flip_metadata(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    start, end = c.choice(s.metadata_ranges())
    pos = c.integer(start, max(end - 1, start))
    bit = c.integer(0, 7)
    return [{"op": "flip", "pos": pos, "bit": bit}], f"flip bit {bit} of byte {pos}"


def _tiff_flip_any(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    pos, bit = c.integer(0, s.size - 1), c.integer(0, 7)
    return [{"op": "flip", "pos": pos, "bit": bit}], f"flip bit {bit} of byte {pos}"


def _truncate(boundaries: list[int], size: int, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    point = c.choice(boundaries) + c.choice((0, -1, 1))
    point = min(max(point, 0), size - 1)
    return [{"op": "truncate", "size": point}], f"truncate to {point} of {size} bytes"


def _tiff_truncate(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    return _truncate(s.boundaries(), s.size, c)


def _tiff_tag_type(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    entry = c.choice(s.entries)
    new = c.choice((0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 0xFFFF))
    pos, width = _tiff_entry_field(s, entry, "type")
    return [_put(pos, new, width, s.byteorder)], (
        f"IFD {entry.ifd} tag {entry.code} type {entry.dtype} -> {new}"
    )


def _tiff_tag_count(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    entry = c.choice(s.entries)
    pos, width = _tiff_entry_field(s, entry, "count")
    new = c.choice(_special_values(width, entry.count, s.size))
    return [_put(pos, new, width, s.byteorder)], (
        f"IFD {entry.ifd} tag {entry.code} count {entry.count} -> {new}"
    )


def _tiff_value_offset(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    outside = [e for e in s.entries if not e.inline] or s.entries
    entry = c.choice(outside)
    pos, width = _tiff_entry_field(s, entry, "value")
    new = c.choice(_special_values(width, entry.value_pos, s.size))
    return [_put(pos, new, width, s.byteorder)], (
        f"IFD {entry.ifd} tag {entry.code} value offset {entry.value_pos} -> {new}"
    )


def _tiff_segment_field(
    s: TiffStructure, c: Chooser, codes: Sequence[int], what: str
) -> tuple[list[dict[str, Any]], str]:
    entries = s.entries_of(codes) or s.entries
    entry = c.choice(entries)
    index = c.integer(0, max(entry.count - 1, 0))
    pos, width = _tiff_array_element(entry, index)
    current = int.from_bytes(s.data[pos : pos + width], s.byteorder)  # type: ignore[arg-type]
    new = c.choice(_special_values(width, current, s.size))
    return [_put(pos, new, width, s.byteorder)], (
        f"IFD {entry.ifd} tag {entry.code} ({what}) element {index} -> {new}"
    )


def _tiff_segment_offset(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    return _tiff_segment_field(s, c, TIFF_OFFSET_TAGS, "segment offset")


def _tiff_segment_bytecount(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    return _tiff_segment_field(s, c, TIFF_BYTECOUNT_TAGS, "segment byte count")


def _tiff_dimension(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    entries = s.entries_of(TIFF_SHAPE_TAGS) or s.entries
    entry = c.choice(entries)
    values = [0, 1, 2, 3, 5, 7, 8, 9, 12, 16, 17, 24, 32, 64, 255, 0xFFFF, 2**31 - 1, 2**32 - 1]
    if s.bigtiff:
        values += [10**12, 2**62]
    new = c.choice(values)
    if entry.count == 1:
        ops = _tiff_set_scalar(s, entry, new)
    else:
        index = c.integer(0, entry.count - 1)
        pos, width = _tiff_array_element(entry, index)
        ops = [_put(pos, new, width, s.byteorder)]
    return ops, f"IFD {entry.ifd} tag {entry.code} value -> {new}"


def _tiff_next_ifd(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    number = c.integer(0, len(s.ifds) - 1)
    position, _, next_pos = s.ifds[number]
    new = c.choice(
        [0, position, s.ifds[0][0], s.size, s.size + 8, 1, 7, (1 << (8 * s.offset_size)) - 1]
    )
    return [_put(next_pos, new, s.offset_size, s.byteorder)], (
        f"IFD {number} next-IFD pointer -> {new}"
    )


def _tiff_ifd_count(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    number = c.integer(0, len(s.ifds) - 1)
    position, count, _ = s.ifds[number]
    new = c.choice(_special_values(s.count_size, count, s.size))
    return [_put(position, new, s.count_size, s.byteorder)], (
        f"IFD {number} entry count {count} -> {new}"
    )


def _tiff_ifd_cycle(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    """A main IFD's next pointer back to itself or to an earlier main IFD (judged with
    ``layout="tree"`` or ``layout="pages"``, which walk the whole chain)."""
    main = list(s.main_ifds) or [0]
    number = c.integer(0, len(main) - 1)
    target = c.choice(sorted({number, 0, c.integer(0, number)}))
    _, _, next_pos = s.ifds[main[number]]
    offset = s.ifds[main[target]][0]
    return [_put(next_pos, offset, s.offset_size, s.byteorder)], (
        f"IFD {number} next-IFD pointer -> IFD {target} (offset {offset})"
    )


def _tiff_scalar(s: TiffStructure, entry: TiffEntry) -> int:
    width = TIFF_TYPE_SIZES.get(entry.dtype, 4)
    return int.from_bytes(s.data[entry.value_pos : entry.value_pos + width], s.byteorder)  # type: ignore[arg-type]


def _tiff_one_padded_strip(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    """The first IFD as one strip whose RowsPerStrip exceeds ImageLength: a smaller
    ImageLength (the strip then holds padding rows), a larger RowsPerStrip (the strip
    holds exactly the image's rows), or, for pixel-interleaved strips, the first strip
    alone under an ImageLength of fewer rows than it holds."""
    tags = {e.code: e for e in s.entries if e.ifd == 0}
    needed = (257, 273, 279)
    if 322 in tags or any(code not in tags for code in needed):  # tiled, or odd
        return _tiff_dimension(s, c)
    height = _tiff_scalar(s, tags[257])
    rows = min(_tiff_scalar(s, tags[278]), height) if 278 in tags else height
    separate = 284 in tags and _tiff_scalar(s, tags[284]) == 2
    planes = _tiff_scalar(s, tags[277]) if separate and 277 in tags else 1
    strips = tags[273].count
    if strips == planes:  # one strip per plane already
        if 278 in tags and (height < 2 or c.choice((True, False))):
            stated = rows + c.choice((1, 3, rows, 1000))
            return _tiff_set_scalar(s, tags[278], stated), (
                f"RowsPerStrip {rows} -> {stated} over {height} rows"
            )
        if height < 2:
            return _tiff_dimension(s, c)
        new = c.integer(1, height - 1)
        return _tiff_set_scalar(s, tags[257], new), f"ImageLength {height} -> {new}, one strip"
    if separate or rows < 2:
        return _tiff_dimension(s, c)
    new = c.integer(1, rows - 1)
    first_offset, first_count = _tiff_scalar(s, tags[273]), _tiff_scalar(s, tags[279])
    ops = _tiff_set_scalar(s, tags[257], new)
    ops += _tiff_set_scalar(s, tags[273], first_offset)
    ops += _tiff_set_scalar(s, tags[279], first_count)
    return ops, f"ImageLength {height} -> {new}, the first of {strips} strips of {rows} rows alone"


def _tiff_several(s: TiffStructure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    ops: list[dict[str, Any]] = []
    labels = []
    for _ in range(c.integer(2, 3)):
        kind = c.choice(TIFF_KINDS[:-1])
        more, label = TIFF_GENERATORS[kind](s, c)
        ops += more
        labels.append(f"{kind}: {label}")
    # A truncation applies last so that the other edits land.
    ops.sort(key=lambda op: op["op"] == "truncate")
    return ops, " + ".join(labels)


TIFF_GENERATORS: dict[str, Callable[[TiffStructure, Chooser], tuple[list[dict[str, Any]], str]]]
TIFF_GENERATORS = {
    "flip-metadata": _tiff_flip_metadata,
    "flip-any": _tiff_flip_any,
    "truncate": _tiff_truncate,
    "tag-type": _tiff_tag_type,
    "tag-count": _tiff_tag_count,
    "value-offset": _tiff_value_offset,
    "segment-offset": _tiff_segment_offset,
    "segment-bytecount": _tiff_segment_bytecount,
    "dimension": _tiff_dimension,
    "next-ifd": _tiff_next_ifd,
    "ifd-count": _tiff_ifd_count,
    "ifd-cycle": _tiff_ifd_cycle,
    "one-padded-strip": _tiff_one_padded_strip,
    "several": _tiff_several,
}
TIFF_KINDS = tuple(TIFF_GENERATORS)
#: Parser options a kind is judged with, one chosen per mutation: chains are walked past
#: the first image only for a tree or a stack of pages.
TIFF_KIND_OPTIONS: dict[str, tuple[dict[str, Any], ...]] = {
    "ifd-cycle": ({"layout": "tree"}, {"layout": "pages"}),
    "one-padded-strip": ({}, {"probe_last_strip": True}),
}


# -- HDF5 structure -----------------------------------------------------------------------

#: Four-byte signatures of HDF5 metadata blocks (B-tree nodes, heaps, object headers,
#: chunk indexes, free space): where they occur, a structure starts.
HDF5_BLOCK_SIGNATURES = (
    b"TREE",
    b"HEAP",
    b"SNOD",
    b"GCOL",
    b"OHDR",
    b"OCHK",
    b"BTHD",
    b"BTIN",
    b"BTLF",
    b"FRHP",
    b"FHDB",
    b"FHIB",
    b"FSHD",
    b"FSSE",
    b"FAHD",
    b"FADB",
    b"EAHD",
    b"EAIB",
    b"EASB",
    b"EADB",
    b"SMTB",
    b"SMLI",
)
DATASPACE, DATATYPE, FILL_VALUE, LAYOUT, FILTERS, CONTINUATION = 0x01, 0x03, 0x05, 0x08, 0x0B, 0x10


@dataclass(frozen=True)
class Field:
    """A fixed-width integer field of a structure (little-endian, as all of HDF5's)."""

    pos: int
    width: int
    label: str


@dataclass(frozen=True)
class Message:
    """One object-header message: its type and where its data lies."""

    header: int
    type: int
    data_pos: int
    size: int


@dataclass
class H5Structure:
    size: int
    base: int
    version: int
    offset_size: int
    length_size: int
    data: bytes
    superblock_fields: list[Field] = field(default_factory=list)
    object_headers: list[int] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    #: Decoded fields of dataspace, layout and datatype messages.
    fields: list[Field] = field(default_factory=list)
    signatures: list[tuple[int, bytes]] = field(default_factory=list)
    #: (start, end): the lookup3 checksum of data[start:end] sits at data[end:end+4].
    checksummed: list[tuple[int, int]] = field(default_factory=list)
    raw_data: list[tuple[int, int]] = field(default_factory=list)

    def u(self, pos: int, width: int) -> int:
        return int.from_bytes(self.data[pos : pos + width], "little")

    def boundaries(self) -> list[int]:
        points = {self.base + 8, self.base + 9, self.size - 1}
        points.update(f.pos for f in self.superblock_fields)
        points.update(self.object_headers)
        for message in self.messages:
            points.update({message.data_pos - 4, message.data_pos, message.data_pos + message.size})
        points.update(pos for pos, _ in self.signatures)
        for start, length in self.raw_data:
            points.update({start, start + length})
        return sorted(p for p in points if 0 < p < self.size)

    def metadata_ranges(self) -> list[tuple[int, int]]:
        """Everything that is not raw data (superblock, headers, indexes, heaps)."""
        ranges = []
        position = 0
        for start, length in sorted(self.raw_data):
            if start > position:
                ranges.append((position, start))
            position = max(position, start + length)
        if position < self.size:
            ranges.append((position, self.size))
        return ranges or [(0, self.size)]

    def checksum_fix(self, pos: int) -> list[dict[str, Any]]:
        """The operation restoring the checksum of the block holding ``pos`` (if any)."""
        for start, end in self.checksummed:
            if start <= pos < end:
                return [{"op": "checksum", "start": start, "end": end}]
        return []


def _superblock(s: H5Structure) -> None:
    b, o, ln = s.base, s.offset_size, s.length_size
    sf = s.superblock_fields
    sf.append(Field(b + 8, 1, "superblock version"))
    if s.version in (0, 1):
        sf += [
            Field(b + 13, 1, "size of offsets"),
            Field(b + 14, 1, "size of lengths"),
            Field(b + 16, 2, "group leaf K"),
            Field(b + 18, 2, "group internal K"),
        ]
        position = b + 24
        if s.version == 1:
            sf.append(Field(b + 24, 2, "indexed storage K"))
            position = b + 28
        for label in (
            "base address",
            "free-space address",
            "end-of-file address",
            "driver info address",
            "root link name offset",
            "root object header address",
        ):
            sf.append(Field(position, o, label))
            position += o
        sf.append(Field(position, 4, "root cache type"))
        sf.append(Field(position + 8, o, "root B-tree address (scratch)"))
        sf.append(Field(position + 8 + o, o, "root heap address (scratch)"))
    else:
        sf += [
            Field(b + 9, 1, "size of offsets"),
            Field(b + 10, 1, "size of lengths"),
            Field(b + 11, 1, "consistency flags"),
        ]
        position = b + 12
        for label in (
            "base address",
            "superblock extension address",
            "end-of-file address",
            "root object header address",
        ):
            sf.append(Field(position, o, label))
            position += o
        s.checksummed.append((b, position))
    del ln


def _messages_v1(s: H5Structure, header: int, start: int, end: int, budget: list[int]) -> None:
    position = start
    while position + 8 <= end and budget[0] > 0:
        budget[0] -= 1
        mtype, size = s.u(position, 2), s.u(position + 2, 2)
        data_pos = position + 8
        if data_pos + size > end:
            return
        _message(s, Message(header, mtype, data_pos, size), budget, version=1)
        position = data_pos + size


def _messages_v2(
    s: H5Structure, header: int, start: int, end: int, flags: int, budget: list[int]
) -> None:
    position = start
    prefix = 6 if flags & 0x04 else 4
    while position + prefix <= end and budget[0] > 0:
        budget[0] -= 1
        mtype, size = s.data[position], s.u(position + 1, 2)
        data_pos = position + prefix
        if data_pos + size > end:
            return
        _message(s, Message(header, mtype, data_pos, size), budget, version=2, flags=flags)
        position = data_pos + size


def _message(
    s: H5Structure, m: Message, budget: list[int], *, version: int, flags: int = 0
) -> None:
    s.messages.append(m)
    o, ln, p = s.offset_size, s.length_size, m.data_pos
    if m.type == CONTINUATION and m.size >= o + ln:
        address, length = s.u(p, o), s.u(p + o, ln)
        s.fields += [Field(p, o, "continuation address"), Field(p + o, ln, "continuation length")]
        if 0 < address < s.size and length < s.size:
            if version == 1:
                _messages_v1(s, m.header, address, address + length, budget)
            elif s.data[address : address + 4] == b"OCHK":
                s.checksummed.append((address, address + length - 4))
                _messages_v2(s, m.header, address + 4, address + length - 4, flags, budget)
    elif m.type == DATASPACE and m.size >= 4:
        sv, ndims, dflags = s.data[p], s.data[p + 1], s.data[p + 2]
        dims_at = p + (8 if sv == 1 else 4)
        for axis in range(ndims):
            s.fields.append(Field(dims_at + axis * ln, ln, f"dataspace dim {axis}"))
            if dflags & 1:
                s.fields.append(
                    Field(dims_at + (ndims + axis) * ln, ln, f"dataspace max dim {axis}")
                )
        s.fields.append(Field(p + 1, 1, "dataspace rank"))
    elif m.type == LAYOUT and m.size >= 2:
        lv = s.data[p]
        if lv == 3:
            cls = s.data[p + 1]
            if cls == 0:
                s.fields.append(Field(p + 2, 2, "compact layout size"))
            elif cls == 1:
                s.fields += [
                    Field(p + 2, o, "contiguous data address"),
                    Field(p + 2 + o, ln, "contiguous data size"),
                ]
            elif cls == 2:
                ndims = s.data[p + 2]
                s.fields += [Field(p + 2, 1, "chunk rank"), Field(p + 3, o, "chunk index address")]
                for axis in range(ndims):
                    s.fields.append(Field(p + 3 + o + 4 * axis, 4, f"chunk dim {axis}"))
        elif lv == 4 and s.data[p + 1] == 2:
            ndims, enc = s.data[p + 3], s.data[p + 4]
            s.fields.append(Field(p + 3, 1, "chunk rank"))
            for axis in range(ndims):
                s.fields.append(Field(p + 5 + enc * axis, enc, f"chunk dim {axis}"))
            s.fields.append(Field(p + 5 + enc * ndims, 1, "chunk index type"))
        elif lv in (1, 2):
            s.fields.append(Field(p + 1, 1, "layout rank"))
        s.fields.append(Field(p, 1, "layout version"))
    elif m.type == DATATYPE and m.size >= 8:
        s.fields += [Field(p, 1, "datatype class+version"), Field(p + 4, 4, "datatype size")]
    elif m.type == FILTERS and m.size >= 2:
        s.fields += [Field(p + 1, 1, "filter count")]
        fv = s.data[p]
        first = p + (8 if fv == 1 else 2)
        if first + 2 <= m.data_pos + m.size:
            s.fields.append(Field(first, 2, "first filter id"))
    elif m.type == FILL_VALUE and m.size >= 4:
        s.fields.append(Field(p, 1, "fill value version"))
        if s.data[p] >= 3 and m.size >= 6:
            s.fields.append(Field(p + 2, 4, "fill value size"))


def _object_header(s: H5Structure, address: int, budget: list[int]) -> None:
    s.object_headers.append(address)
    if s.data[address : address + 4] == b"OHDR":
        flags = s.data[address + 5]
        position = address + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        chunk0 = s.u(position, width)
        s.fields.append(Field(position, width, "object header chunk size"))
        start = position + width
        s.checksummed.append((address, start + chunk0))
        _messages_v2(s, address, start, start + chunk0, flags, budget)
    elif s.data[address] == 1:
        s.fields.append(Field(address + 2, 2, "object header message count"))
        s.fields.append(Field(address + 8, 4, "object header size"))
        size = s.u(address + 8, 4)
        _messages_v1(s, address, address + 16, address + 16 + size, budget)


@functools.lru_cache(maxsize=256)
def hdf5_structure(path: str) -> H5Structure:
    """Map the clean HDF5 file at ``path`` (h5py for object addresses and chunk places)."""
    import h5py

    data = Path(path).read_bytes()
    base = 0
    while data[base : base + 8] != HDF5_SIGNATURE:
        base = 512 if base == 0 else base * 2
        if base >= len(data):
            raise ValueError(f"{path}: no HDF5 signature")
    version = data[base + 8]
    if version in (0, 1):
        offset_size, length_size = data[base + 13], data[base + 14]
    else:
        offset_size, length_size = data[base + 9], data[base + 10]
    s = H5Structure(len(data), base, version, offset_size, length_size, data)
    _superblock(s)
    addresses: set[int] = set()
    raw: list[tuple[int, int]] = []

    def visit(obj: Any) -> None:
        try:
            addresses.add(int(h5py.h5o.get_info(obj.id).addr) + base)
        except Exception:
            return
        if isinstance(obj, h5py.Dataset):
            raw.extend(_raw_ranges(obj))

    with open(path, "rb") as handle, h5py.File(handle, "r") as f:
        visit(f)
        f.visititems(lambda _name, obj: visit(obj))
    budget = [5000]  # messages parsed at most (a cyclic continuation cannot loop forever)
    for address in sorted(addresses):
        if 0 < address < len(data):
            _object_header(s, address, budget)
    s.raw_data = raw
    for signature in HDF5_BLOCK_SIGNATURES:
        start = data.find(signature)
        while start >= 0:
            s.signatures.append((start, signature))
            start = data.find(signature, start + 1)
    s.signatures.sort()
    return s


def _raw_ranges(dataset: Any) -> list[tuple[int, int]]:
    import h5py

    ranges: list[tuple[int, int]] = []
    dsid = dataset.id
    try:
        layout = dsid.get_create_plist().get_layout()
        if layout == h5py.h5d.CHUNKED:
            dsid.chunk_iter(lambda info: ranges.append((int(info.byte_offset), int(info.size))))
        elif layout == h5py.h5d.CONTIGUOUS:
            offset = dsid.get_offset()
            if offset is not None:
                ranges.append((int(offset), int(dsid.get_storage_size())))
    except Exception:
        return []
    # Unlike object addresses, h5py reports raw data places as absolute file offsets.
    return ranges


def hdf5_mutation(path: str, name: str, chooser: Chooser) -> Mutation:
    """One structural mutation of the HDF5 file at ``path``."""
    s = hdf5_structure(path)
    kinds = [k for k in HDF5_KINDS if k not in ("message-field",) or s.fields]
    kind = chooser.choice(kinds)
    ops, label = HDF5_GENERATORS[kind](s, chooser)
    return Mutation(name, f"{kind}: {label}", ops)


def _h5_fixed(s: H5Structure, ops: list[dict[str, Any]], c: Chooser) -> list[dict[str, Any]]:
    """Follow edits inside checksummed blocks by a checksum fix (mostly: sometimes not)."""
    if not s.checksummed or c.choice((True, True, True, False)) is False:
        return ops
    fixes: list[dict[str, Any]] = []
    for op in ops:
        if op["op"] in ("flip", "put"):
            for fix in s.checksum_fix(op["pos"]):
                if fix not in fixes:
                    fixes.append(fix)
    edits = [op for op in ops if op["op"] != "truncate"]
    return edits + fixes + [op for op in ops if op["op"] == "truncate"]


def _h5_set(
    s: H5Structure, f: Field, c: Chooser, extra: Sequence[int] = ()
) -> tuple[list[dict[str, Any]], str]:
    current = s.u(f.pos, f.width)
    new = c.choice(sorted(set(_special_values(f.width, current, s.size)) | set(extra)))
    return _h5_fixed(s, [_put(f.pos, new, f.width, "little")], c), (
        f"{f.label} at byte {f.pos}: {current} -> {new}"
    )


def _h5_flip_metadata(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    start, end = c.choice(s.metadata_ranges())
    pos, bit = c.integer(start, max(end - 1, start)), c.integer(0, 7)
    return _h5_fixed(s, [{"op": "flip", "pos": pos, "bit": bit}], c), (
        f"flip bit {bit} of byte {pos}"
    )


def _h5_flip_header(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    message = c.choice(s.messages) if s.messages else None
    if message is None or message.size == 0:
        return _h5_flip_metadata(s, c)
    pos = c.integer(message.data_pos - 4, message.data_pos + message.size - 1)
    bit = c.integer(0, 7)
    return _h5_fixed(s, [{"op": "flip", "pos": pos, "bit": bit}], c), (
        f"flip bit {bit} of byte {pos} (message type {message.type:#x} of object header "
        f"{message.header})"
    )


def _h5_flip_any(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    pos, bit = c.integer(0, s.size - 1), c.integer(0, 7)
    return [{"op": "flip", "pos": pos, "bit": bit}], f"flip bit {bit} of byte {pos}"


def _h5_truncate(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    return _truncate(s.boundaries(), s.size, c)


def _h5_superblock_field(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    return _h5_set(s, c.choice(s.superblock_fields), c)


def _h5_message_field(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    f = c.choice(s.fields)
    extra = (10**12, 2**32, 2**63 - 1) if "dim" in f.label and f.width >= 8 else ()
    return _h5_set(s, f, c, extra)


def _h5_huge_dims(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    dims = [f for f in s.fields if f.label.startswith(("dataspace dim", "chunk dim"))]
    if not dims:
        return _h5_message_field(s, c) if s.fields else _h5_flip_metadata(s, c)
    f = c.choice(dims)
    top = (1 << (8 * f.width)) - 1
    new = c.choice([v & top for v in (10**12, 10**9, 2**31, 2**32 - 1, 2**63, top)])
    current = s.u(f.pos, f.width)
    return _h5_fixed(s, [_put(f.pos, new, f.width, "little")], c), (
        f"{f.label} at byte {f.pos}: {current} -> {new}"
    )


def _h5_signature(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    if not s.signatures:
        return _h5_flip_metadata(s, c)
    pos, signature = c.choice(s.signatures)
    other = c.choice([sig for sig in HDF5_BLOCK_SIGNATURES if sig != signature] + [b"\0\0\0\0"])
    return [{"op": "put", "pos": pos, "hex": other.hex()}], (
        f"{signature.decode()} at byte {pos} -> {other!r}"
    )


def _signatures(s: H5Structure, signature: bytes) -> list[int]:
    return [pos for pos, sig in s.signatures if sig == signature]


def _chunk_btree_dims(s: H5Structure) -> dict[int, int]:
    """Root address of each version 1 chunk B-tree -> the dimensionality of its keys
    (dataset rank + 1), from the layout messages."""
    found = {}
    for rank, address in zip(s.fields, s.fields[1:], strict=False):
        if rank.label == "chunk rank" and address.label == "chunk index address":
            found[s.base + s.u(address.pos, address.width)] = s.data[rank.pos]
    return found


def _h5_btree_self_child(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    """A version 1 B-tree node (group or chunk) whose child points at the node itself,
    as a leaf (libhdf5 then reads the node as a child of another type) or raised to
    level 1 (libhdf5 recurses into it without end)."""
    o, ln = s.offset_size, s.length_size
    chunk_dims = _chunk_btree_dims(s)
    nodes = [
        (pos, ln if s.data[pos + 4] == 0 else 8 + 8 * chunk_dims[pos])
        for pos in _signatures(s, b"TREE")
        if s.data[pos + 4] == 0 or pos in chunk_dims
    ]
    nodes = [(pos, key) for pos, key in nodes if s.u(pos + 6, 2) > 0]
    if not nodes:
        return _h5_signature(s, c)
    pos, key_size = c.choice(nodes)
    child = c.integer(0, s.u(pos + 6, 2) - 1)
    at = pos + 8 + 2 * o + key_size + child * (key_size + o)
    level = c.choice((s.data[pos + 5], max(s.data[pos + 5], 1)))
    ops = [_put(at, pos - s.base, o, "little"), _put(pos + 5, level, 1, "little")]
    kind = "group" if s.data[pos + 4] == 0 else "chunk"
    return ops, f"{kind} B-tree node at byte {pos}: child {child} -> the node itself, level {level}"


#: Fields of a version 2 B-tree header: (offset, width) for 8-byte addresses and lengths
#: (record type, node size, record size, depth, root record count, total records).
_BTHD_FIELDS = {
    "record type": (5, 1),
    "node size": (6, 4),
    "record size": (10, 2),
    "depth": (12, 2),
    "root records": (-2, 2),  # after the root address
    "total records": (0, -1),  # after the root record count
}
_BTHD_KINDS = {
    1: "huge",
    2: "huge",
    3: "huge",
    4: "huge",
    5: "link name",
    6: "link order",
    8: "attribute name",
    9: "attribute order",
    10: "chunk",
    11: "filtered chunk",
}


def _h5_btree_v2_header(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    """A field of a version 2 B-tree header (chunk, attribute or link index) set to a
    value that breaks parsers, its checksum restored so the edit reaches them."""
    headers = _signatures(s, b"BTHD")
    if not headers:
        return _h5_btree_self_child(s, c)
    pos = c.choice(headers)
    o, ln = s.offset_size, s.length_size
    name = c.choice(tuple(_BTHD_FIELDS))
    at, width = _BTHD_FIELDS[name]
    if name == "root records":
        at, width = 16 + o, 2
    elif name == "total records":
        at, width = 18 + o, ln
    current = s.u(pos + at, width)
    new = c.choice(sorted(set(_special_values(width, current, s.size)) | {current + (1 << 16)}))
    new &= (1 << (8 * width)) - 1
    end = pos + 18 + o + ln
    ops = [_put(pos + at, new, width, "little"), {"op": "checksum", "start": pos, "end": end}]
    index = _BTHD_KINDS.get(s.data[pos + 5], "unknown")
    return ops, f"BTHD ({index} index) at byte {pos}: {name} {current} -> {new}"


def _h5_fractal_heap_header(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    """A doubling-table or size field of a fractal heap header (dense links and
    attributes), its checksum restored."""
    headers = [p for p in _signatures(s, b"FRHP") if s.u(p + 7, 2) == 0]  # unfiltered
    if not headers:
        return _h5_btree_v2_header(s, c)
    pos = c.choice(headers)
    o, ln = s.offset_size, s.length_size
    table = 10 + 4 + ln + o + ln + o + 8 * ln
    fields = {
        "heap ID length": (5, 2),
        "max managed size": (10, 4),
        "managed space": (10 + 4 + 2 * ln + 2 * o, ln),
        "table width": (table, 2),
        "starting block size": (table + 2, ln),
        "max direct block size": (table + 2 + ln, ln),
        "heap address bits": (table + 2 + 2 * ln, 2),
        "root block address": (table + 6 + 2 * ln, o),
        "root rows": (table + 6 + 2 * ln + o, 2),
    }
    name = c.choice(tuple(fields))
    at, width = fields[name]
    current = s.u(pos + at, width)
    new = c.choice(_special_values(width, current, s.size))
    end = pos + table + 8 + 2 * ln + o
    ops = [_put(pos + at, new, width, "little"), {"op": "checksum", "start": pos, "end": end}]
    return ops, f"FRHP at byte {pos}: {name} {current} -> {new}"


def _h5_local_heap(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    """A group's local heap: its size, data address or free list (one that loops)."""
    heaps = _signatures(s, b"HEAP")
    if not heaps:
        return _h5_btree_self_child(s, c)
    pos = c.choice(heaps)
    ln = s.length_size
    size, free = s.u(pos + 8, ln), s.u(pos + 8 + ln, ln)
    data = s.base + s.u(pos + 8 + 2 * ln, s.offset_size)
    name = c.choice(("data size", "free list head", "free list loop", "data address"))
    if name == "free list loop" and size >= 2 * ln:
        block = size - 2 * ln
        ops = [
            _put(pos + 8 + ln, block, ln, "little"),
            _put(data + block, block, ln, "little"),
            _put(data + block + ln, 2 * ln, ln, "little"),
        ]
        return ops, f"HEAP at byte {pos}: free block at {block} -> itself"
    at, width, current = {
        "data size": (8, ln, size),
        "free list head": (8 + ln, ln, free),
    }.get(name, (8 + 2 * ln, s.offset_size, data - s.base))
    new = c.choice(_special_values(width, current, s.size))
    return [_put(pos + at, new, width, "little")], f"HEAP at byte {pos}: {name} {current} -> {new}"


def _h5_several(s: H5Structure, c: Chooser) -> tuple[list[dict[str, Any]], str]:
    ops: list[dict[str, Any]] = []
    labels = []
    for _ in range(c.integer(2, 3)):
        kind = c.choice([k for k in HDF5_KINDS[:-1] if k != "message-field" or s.fields])
        more, label = HDF5_GENERATORS[kind](s, c)
        ops += [op for op in more if op["op"] != "checksum"]
        labels.append(f"{kind}: {label}")
    ops.sort(key=lambda op: op["op"] == "truncate")
    return _h5_fixed(s, ops, c), " + ".join(labels)


HDF5_GENERATORS: dict[str, Callable[[H5Structure, Chooser], tuple[list[dict[str, Any]], str]]]
HDF5_GENERATORS = {
    "flip-metadata": _h5_flip_metadata,
    "flip-header": _h5_flip_header,
    "flip-any": _h5_flip_any,
    "truncate": _h5_truncate,
    "superblock-field": _h5_superblock_field,
    "message-field": _h5_message_field,
    "huge-dims": _h5_huge_dims,
    "signature": _h5_signature,
    "btree-self-child": _h5_btree_self_child,
    "btree-v2-header": _h5_btree_v2_header,
    "fractal-heap-header": _h5_fractal_heap_header,
    "local-heap": _h5_local_heap,
    "several": _h5_several,
}
HDF5_KINDS = tuple(HDF5_GENERATORS)


# -- file kinds ---------------------------------------------------------------------------


def file_kind(path: str | Path) -> str:
    """``tiff``, ``hdf5``, ``netcdf3`` or ``other`` from the magic bytes."""
    with open(path, "rb") as f:
        head = f.read(8)
        if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
            return "tiff"
        if head[:3] == b"CDF":
            return "netcdf3"
        offset, size = 0, Path(path).stat().st_size
        while offset + 8 <= size:
            f.seek(offset)
            if f.read(8) == HDF5_SIGNATURE:
                return "hdf5"
            offset = 512 if offset == 0 else offset * 2
    return "other"


def mutate(path: str, name: str, chooser: Chooser) -> Mutation:
    """A mutation of the TIFF or HDF5 file at ``path``."""
    kind = file_kind(path)
    if kind == "tiff":
        return tiff_mutation(path, name, chooser)
    if kind == "hdf5":
        return hdf5_mutation(path, name, chooser)
    raise ValueError(f"{path}: neither TIFF nor HDF5")


def main(argv: list[str]) -> int:
    """``python -m conformance.fuzz.mutations MUTATION_JSON OUT [CORPUS_DIR]``: write the file."""
    if len(argv) < 2:
        print(main.__doc__, file=sys.stderr)
        return 2
    mutation = Mutation.from_json(argv[0])
    default_corpus = Path(__file__).resolve().parents[3] / "shared" / "corpus"
    corpus = Path(argv[2]) if len(argv) > 2 else default_corpus
    Path(argv[1]).write_bytes(mutation.apply((corpus / mutation.file).read_bytes()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
