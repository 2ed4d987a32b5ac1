"""Mutation classes for headers whose every field is valid but whose fields disagree.

Where :mod:`conformance.fuzz.mutations` breaks structures (bit flips, truncation, offsets past
the end), these classes write plausible values that contradict another part of the file,
the kind of header the native readers answer differently or a parser may misread:

TIFF

* ``predictor-uncompressed``: Predictor 2 or 3 on an uncompressed or PackBits IFD
  (libtiff ignores it there, tifffile undoes it); an IFD without the tag gets it by
  renumbering its last entry before 317, which keeps the IFD sorted;
* ``codec-bit-depth``: BitsPerSample or SampleFormat an image codec cannot produce (WebP
  with 1-bit samples, JPEG with 16); IFDs without an image codec first get one;
* ``zero-segment``: segment offsets, byte counts or both set to 0, one segment or all,
  in BigTIFF and classic files alike (the label says which).

HDF5 (the checksum of an edited block is always restored so that the edit reaches the
parser)

* ``dimension-scale-length``: a dimension scale's dataspace made longer or shorter than
  the dimension of the datasets it is attached to (its maximum follows when it is fixed);
* ``fill-value-message``: the size field and the flags of fill-value messages (new and
  old form);
* ``filter-pipeline-count``: the number of filters a pipeline message claims.

Every mutation is a :class:`conformance.fuzz.mutations.Mutation` (byte operations replayable with
``python -m conformance.fuzz.mutations``); :func:`header_mutation` makes one of a chosen class.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.fuzz.mutations import (
    DATASPACE,
    FILL_VALUE,
    FILTERS,
    TIFF_TYPE_SIZES,
    Chooser,
    H5Structure,
    Mutation,
    TiffEntry,
    TiffStructure,
    file_kind,
    hdf5_structure,
    tiff_structure,
)

Ops = list[dict[str, Any]]
FILL_VALUE_OLD = 0x04

# TIFF tag codes and values.
_COMPRESSION, _PREDICTOR, _BITS, _SAMPLEFORMAT = 259, 317, 258, 339
_NO_PREDICTOR_CODEC = (1, 32773)  # none, PackBits
_IMAGE_CODECS = (7, 34892, 50001, 34927, 34933, 33003, 34712, 50002, 34887)
_SHORT, _LONG = 3, 4
#: PlanarConfig, SampleFormat and SamplesPerPixel defaults.
_DEFAULTS = {284: 1, 339: 1, 277: 1}
#: Tags that shape the image or locate its data: never renumbered.
_LAYOUT_TAGS = frozenset(
    {256, 257, 258, 259, 262, 273, 277, 278, 279, 284, 322, 323, 324, 325, 339}
)


def _put(pos: int, value: int, width: int, order: str) -> dict[str, Any]:
    value &= (1 << (8 * width)) - 1
    return {"op": "put", "pos": pos, "hex": value.to_bytes(width, order).hex()}  # type: ignore[arg-type]


# -- TIFF ---------------------------------------------------------------------------------


def _value_field(s: TiffStructure, entry: TiffEntry) -> int:
    return entry.entry_pos + 4 + s.offset_size


def _elements(s: TiffStructure, entry: TiffEntry) -> list[tuple[int, int]]:
    """(position, width) of each value of an integer entry."""
    width = TIFF_TYPE_SIZES.get(entry.dtype, 4)
    return [(entry.value_pos + k * width, width) for k in range(entry.count)]


def _scalar(s: TiffStructure, entry: TiffEntry) -> int:
    pos, width = _elements(s, entry)[0]
    return int.from_bytes(s.data[pos : pos + width], s.byteorder)  # type: ignore[arg-type]


def _ifd_entries(s: TiffStructure, ifd: int) -> dict[int, TiffEntry]:
    return {e.code: e for e in s.entries if e.ifd == ifd}


def _set_short(s: TiffStructure, entry: TiffEntry, value: int, code: int | None = None) -> Ops:
    """Make ``entry`` one SHORT holding ``value`` (renumbered to ``code`` if given)."""
    ops = []
    if code is not None:
        ops.append(_put(entry.entry_pos, code, 2, s.byteorder))
    payload = value.to_bytes(2, s.byteorder).ljust(s.offset_size, b"\0")  # type: ignore[arg-type]
    ops += [
        _put(entry.entry_pos + 2, _SHORT, 2, s.byteorder),
        _put(entry.entry_pos + 4, 1, s.offset_size, s.byteorder),
        {"op": "put", "pos": _value_field(s, entry), "hex": payload.hex()},
    ]
    return ops


def _set_all(s: TiffStructure, entry: TiffEntry, value: int) -> Ops:
    return [_put(pos, value, width, s.byteorder) for pos, width in _elements(s, entry)]


def _compression(entries: dict[int, TiffEntry], s: TiffStructure) -> int:
    entry = entries.get(_COMPRESSION)
    return _scalar(s, entry) if entry is not None else 1


def _tiff_predictor_uncompressed(s: TiffStructure, c: Chooser) -> tuple[Ops, str]:
    ifds = sorted({e.ifd for e in s.entries})
    plain = [i for i in ifds if _compression(_ifd_entries(s, i), s) in _NO_PREDICTOR_CODEC]
    ifd = c.choice(plain or ifds)
    entries = _ifd_entries(s, ifd)
    predictor = c.choice((2, 3))
    compression = _compression(entries, s)
    if _PREDICTOR in entries:
        ops = _set_short(s, entries[_PREDICTOR], predictor)
        how = "set"
    else:
        spare = [code for code in entries if code not in _LAYOUT_TAGS]
        # Layout tags holding their default value can go too.
        spare += [
            code
            for code, default in _DEFAULTS.items()
            if code in entries and _scalar(s, entries[code]) == default
        ]
        if not spare:
            return [], f"IFD {ifd}: no entry to turn into a Predictor"
        # The last spare entry before 317 keeps the IFD sorted; else the first after it.
        before = [code for code in spare if code < _PREDICTOR]
        code = max(before) if before else min(spare)
        ops = _set_short(s, entries[code], predictor, code=_PREDICTOR)
        how = f"tag {code} renumbered"
    return ops, f"IFD {ifd} (Compression={compression}) Predictor -> {predictor} ({how})"


def _tiff_codec_bit_depth(s: TiffStructure, c: Chooser) -> tuple[Ops, str]:
    ifds = sorted({e.ifd for e in s.entries})
    coded = [i for i in ifds if _compression(_ifd_entries(s, i), s) in _IMAGE_CODECS]
    ifd = c.choice(coded or ifds)
    entries = _ifd_entries(s, ifd)
    ops: Ops = []
    labels = []
    compression = _compression(entries, s)
    if compression not in _IMAGE_CODECS and _COMPRESSION in entries:
        new = c.choice((7, 50001, 34933, 34887, 50002))
        ops += _set_short(s, entries[_COMPRESSION], new)
        labels.append(f"Compression -> {new}")
    if _SAMPLEFORMAT in entries and c.choice((True, False)):
        value = c.choice((2, 3, 4, 6))
        ops += _set_all(s, entries[_SAMPLEFORMAT], value)
        labels.append(f"SampleFormat -> {value}")
    elif _BITS in entries:
        value = c.choice((1, 2, 4, 12, 16, 32, 64))
        ops += _set_all(s, entries[_BITS], value)
        labels.append(f"BitsPerSample -> {value}")
    return ops, f"IFD {ifd} (Compression={compression}) " + ", ".join(labels)


def _tiff_zero_segment(s: TiffStructure, c: Chooser) -> tuple[Ops, str]:
    flavour = "BigTIFF" if s.bigtiff else "classic"
    offsets = [e for e in s.entries if e.code in (273, 324)]
    counts = {(e.ifd, e.code): e for e in s.entries if e.code in (279, 325)}
    entry = c.choice(offsets)
    partner = counts.get((entry.ifd, entry.code + 6 if entry.code == 273 else entry.code + 1))
    what = c.choice(("offset", "byte count", "both"))
    many = entry.count > 1 and c.choice((False, False, True))
    indices = list(range(entry.count)) if many else [c.integer(0, max(entry.count - 1, 0))]
    ops: Ops = []
    targets = ([entry] if what != "byte count" else []) + (
        [partner] if what != "offset" and partner is not None else []
    )
    for target in targets:
        elements = _elements(s, target)
        for index in indices:
            if index < len(elements):
                pos, width = elements[index]
                ops.append(_put(pos, 0, width, s.byteorder))
    where = "all segments" if many else f"segment {indices[0]}"
    return ops, f"{flavour} IFD {entry.ifd} {where} of {entry.count}: {what} -> 0"


# -- HDF5 ---------------------------------------------------------------------------------


def _with_checksums(s: H5Structure, ops: Ops) -> Ops:
    fixes: Ops = []
    for op in ops:
        for fix in s.checksum_fix(op["pos"]):
            if fix not in fixes:
                fixes.append(fix)
    return ops + fixes


def _dimension_scales(path: str, base: int) -> list[tuple[str, int]]:
    """(name, object header address) of every dimension scale of the file."""
    import h5py

    scales: list[tuple[str, int]] = []

    def visit(name: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset):
            return
        try:
            kind = obj.attrs.get("CLASS")
            if kind in (b"DIMENSION_SCALE", "DIMENSION_SCALE"):
                scales.append((name, int(h5py.h5o.get_info(obj.id).addr) + base))
        except Exception:
            return

    with open(path, "rb") as handle, h5py.File(handle, "r") as f:
        f.visititems(visit)
    return scales


def _in_message(s: H5Structure, header: int, mtype: int) -> list[tuple[int, int]]:
    """(start, end) of the data of the messages of type ``mtype`` in one object header."""
    return [
        (m.data_pos, m.data_pos + m.size)
        for m in s.messages
        if m.header == header and m.type == mtype
    ]


def _h5_dimension_scale_length(path: str, s: H5Structure, c: Chooser) -> tuple[Ops, str] | None:
    scales = _dimension_scales(path, s.base)
    candidates = []
    for name, header in scales:
        for start, end in _in_message(s, header, DATASPACE):
            dims = [f for f in s.fields if start <= f.pos < end and f.label.startswith("dataspace")]
            if any(f.label == "dataspace dim 0" for f in dims):
                candidates.append((name, dims))
    if not candidates:
        return None
    name, dims = c.choice(candidates)
    dim = next(f for f in dims if f.label == "dataspace dim 0")
    current = s.u(dim.pos, dim.width)
    new = c.choice(sorted({current + 1, max(current - 1, 1), current * 2, max(current // 2, 1)}))
    if new == current:
        new = current + 1
    ops = [_put(dim.pos, new, dim.width, "little")]
    maximum = next((f for f in dims if f.label == "dataspace max dim 0"), None)
    # A fixed maximum follows (libhdf5 refuses dimensions above it); unlimited stays.
    if maximum is not None and s.u(maximum.pos, maximum.width) != (1 << (8 * maximum.width)) - 1:
        ops.append(_put(maximum.pos, new, maximum.width, "little"))
    return _with_checksums(s, ops), f"dimension scale /{name} length {current} -> {new}"


def _h5_fill_value_message(path: str, s: H5Structure, c: Chooser) -> tuple[Ops, str] | None:
    messages = [m for m in s.messages if m.type in (FILL_VALUE, FILL_VALUE_OLD) and m.size >= 4]
    if not messages:
        return None
    m = c.choice(messages)
    p = m.data_pos
    if m.type == FILL_VALUE_OLD:
        current = s.u(p, 4)
        new = c.choice(sorted({0, 1, 2, 3, current + 1, current * 2, 2**31, 2**32 - 1}))
        return _with_checksums(s, [_put(p, new, 4, "little")]), (
            f"old fill value message at {p}: size {current} -> {new}"
        )
    version = s.data[p]
    if version >= 3:
        flags = s.data[p + 1]
        fields: list[tuple[str, int, int, tuple[int, ...]]] = [
            ("flags", p + 1, 1, (flags ^ 0x20, flags ^ 0x10, flags | 0xC0, flags ^ 0x03))
        ]
        if flags & 0x20 and m.size >= 6:
            size = s.u(p + 2, 4)
            fields.append(("size", p + 2, 4, (0, 1, 3, size + 1, size * 2, 2**31)))
    else:
        fields = [
            ("space allocation time", p + 1, 1, (0, 3, 255)),
            ("fill write time", p + 2, 1, (1, 2, 255)),
            ("fill defined", p + 3, 1, (0, 1, 2, 255)),
        ]
        if m.size >= 8:
            size = s.u(p + 4, 4)
            fields.append(("size", p + 4, 4, (0, 1, 3, size + 1, size * 2, 2**31)))
    label, pos, width, values = c.choice(fields)
    current = s.u(pos, width)
    new = c.choice(sorted({v & ((1 << (8 * width)) - 1) for v in values} - {current}) or [0])
    return _with_checksums(s, [_put(pos, new, width, "little")]), (
        f"fill value message v{version} at {p}: {label} {current} -> {new}"
    )


def _h5_filter_pipeline_count(path: str, s: H5Structure, c: Chooser) -> tuple[Ops, str] | None:
    messages = [m for m in s.messages if m.type == FILTERS and m.size >= 2]
    if not messages:
        return None
    m = c.choice(messages)
    current = s.data[m.data_pos + 1]
    new = c.choice(sorted({0, current + 1, max(current - 1, 0), 32, 33, 255} - {current}))
    return _with_checksums(s, [_put(m.data_pos + 1, new, 1, "little")]), (
        f"filter pipeline v{s.data[m.data_pos]} at {m.data_pos}: count {current} -> {new}"
    )


TIFF_HEADER_GENERATORS: dict[str, Callable[[TiffStructure, Chooser], tuple[Ops, str]]] = {
    "predictor-uncompressed": _tiff_predictor_uncompressed,
    "codec-bit-depth": _tiff_codec_bit_depth,
    "zero-segment": _tiff_zero_segment,
}
HDF5_HEADER_GENERATORS: dict[str, Callable[[str, H5Structure, Chooser], tuple[Ops, str] | None]] = {
    "dimension-scale-length": _h5_dimension_scale_length,
    "fill-value-message": _h5_fill_value_message,
    "filter-pipeline-count": _h5_filter_pipeline_count,
}
HEADER_KINDS = {"tiff": tuple(TIFF_HEADER_GENERATORS), "hdf5": tuple(HDF5_HEADER_GENERATORS)}


def header_mutation(path: str, name: str, chooser: Chooser, kind: str) -> Mutation | None:
    """A mutation of class ``kind`` of the file at ``path`` (``name`` in reports), or None
    when the file has nothing the class edits (an HDF5 file without dimension scales)."""
    if file_kind(path) == "tiff":
        tiff = tiff_structure(path)
        if kind not in TIFF_HEADER_GENERATORS or not tiff.entries:
            return None
        if kind == "zero-segment" and not any(e.code in (273, 324) for e in tiff.entries):
            return None
        ops, label = TIFF_HEADER_GENERATORS[kind](tiff, chooser)
    else:
        if kind not in HDF5_HEADER_GENERATORS:
            return None
        made = HDF5_HEADER_GENERATORS[kind](path, hdf5_structure(path), chooser)
        if made is None:
            return None
        ops, label = made
    return Mutation(name, f"{kind}: {label}", ops) if ops else None


__all__ = ["HEADER_KINDS", "HDF5_HEADER_GENERATORS", "TIFF_HEADER_GENERATORS", "header_mutation"]


if __name__ == "__main__":  # pragma: no cover - a look at what a class makes of a file
    import random
    import sys

    from conformance.fuzz.mutations import RandomChooser

    target = sys.argv[1]
    for kind_name in HEADER_KINDS["tiff" if file_kind(target) == "tiff" else "hdf5"]:
        made_mutation = header_mutation(
            target, Path(target).name, RandomChooser(random.Random(0)), kind_name
        )
        print(made_mutation.to_json() if made_mutation else f"{kind_name}: nothing to edit")
