"""Filter pipelines and storage layouts whose header fields disagree: read as h5py
reads them, or refused, never misread.

Each test writes a small file with h5py, patches one field found by parsing the file
(``tests._hdf5_header_patch``; the lookup3 checksum of an edited block is restored) and
compares the parser with h5py reading the same bytes. The classes:

* an N-bit datatype whose N-bit filter is removed from the pipeline (the pipeline
  message turned into a null message), and the N-bit filter removed from a
  full-precision type (stored as is);
* a filter count edited so that it no longer matches the filters of the pipeline
  message (2 -> 1, 2 -> 0, 1 -> 0, 1 -> 2, 33), version 1 and 2 messages;
* a contiguous layout whose size is 0 while its address is defined (libhdf5 reads at
  the address; variable-length strings read as empty before);
* a shuffle element size other than the datatype's (libhdf5 unshuffles with it).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from conformance.fuzz.mutations import H5Structure, hdf5_structure
from tests._hdf5_header_patch import (
    FILTERS,
    _equal_or_refused,
    _header,
    _message_pos,
    _parse,
    _patched,
    _url,
)

# ---------------------------------------------------------------------- N-bit pipelines


def _nbit_file(path: Path, libver: str) -> Path:
    values = (np.arange(25) * 370_001 - 3_000_000).astype("<i4")
    with h5py.File(path, "w", libver=libver) as f:
        for name, precision, offset in (("full", 32, 0), ("n26", 26, 0), ("n26_at3", 26, 3)):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((10,))
            dcpl.set_filter(5, 1, ())  # N-bit
            tid = h5py.h5t.STD_I32LE.copy()
            tid.set_precision(precision)
            tid.set_offset(offset)
            space = h5py.h5s.create_simple((25,))
            h5py.h5d.create(f.id, name.encode(), tid, space, dcpl=dcpl)
            f[name][...] = values
    return path


def _filter_count(s: H5Structure, header: int, count: int = 1) -> int:
    """The position of the filter count of the pipeline message in ``header``."""
    start, size = _message_pos(s, header, FILTERS)
    fields = [
        f.pos for f in s.fields if f.label == "filter count" and start <= f.pos < start + size
    ]
    assert len(fields) == 1 and s.data[fields[0]] == count
    return fields[0]


def _without_pipeline(source: Path, out: Path, name: str) -> Path:
    """``source`` with dataset ``name``'s filter pipeline message turned into a null
    message (type 0): a header as written without the filter."""
    s = hdf5_structure(str(source))
    header = _header(source, name)
    start, _ = _message_pos(s, header, FILTERS)
    if s.data[header : header + 4] == b"OHDR":
        assert not s.data[header + 5] & 0x04  # no creation order: a 4-byte message header
        return _patched(source, out, [(start - 4, 0, 1)])
    return _patched(source, out, [(start - 8, 0, 2)])


@pytest.mark.parametrize("libver", ["earliest", "latest"])
@pytest.mark.parametrize("name", ["n26", "n26_at3"])
def test_nbit_datatype_without_its_filter_is_refused(
    tmp_path: Path, libver: str, name: str
) -> None:
    source = _nbit_file(tmp_path / f"nbit_{libver}.h5", libver)
    clean = _equal_or_refused(source, {"full": "unsupported HDF5 filter 'nbit'"})
    path = _without_pipeline(source, tmp_path / f"{name}_no_filter.h5", name)
    native = _equal_or_refused(path, {"full": "unsupported HDF5 filter 'nbit'", name: ""})
    _, skipped = _parse(path)
    if libver == "earliest":
        # h5py reads each 33-byte packed chunk and the bytes after it as 40 bytes.
        assert not np.array_equal(native[name], clean[name])
        assert any(
            f"'/{name}' skipped: its filter pipeline does not match its datatype (26-bit integer"
            in m
            and "chunks are stored in 33 bytes without a filter, not the 40" in m
            for m in skipped
        ), skipped


def test_nbit_filter_removed_from_a_full_precision_type(tmp_path: Path) -> None:
    """The N-bit filter stores a type without padding bits as it is: without the filter
    the chunks read the same, in h5py and in the virtual array."""
    source = _nbit_file(tmp_path / "nbit.h5", "earliest")
    path = _without_pipeline(source, tmp_path / "full_no_filter.h5", "full")
    native = _equal_or_refused(path, {})
    arrays, _ = _parse(path)
    assert np.array_equal(arrays["full"], native["full"])
    assert native["full"][1] == 370_001 - 3_000_000


# ------------------------------------------------------------------ filter pipeline counts


def _shuffled_file(path: Path, libver: str) -> Path:
    """Shuffle + deflate, deflate alone, and no filter (a 4-byte integer type whose
    values deflate: a chunk read without one of its filters is not its values)."""
    values = (np.arange(60, dtype="<i4") * 1_000_003).reshape(6, 10)
    with h5py.File(path, "w", libver=libver) as f:
        f.create_dataset("shuffled", data=values, chunks=(3, 5), shuffle=True, compression=4)
        f.create_dataset("deflated", data=values, chunks=(3, 5), compression=4)
        f.create_dataset("plain", data=values, chunks=(3, 5))
    return path


#: (dataset, filter count as written, as edited, reason)
COUNT_EDITS = [
    ("shuffled", 2, 1, "a filter count of 1 covers"),
    ("shuffled", 2, 0, "a filter count of 0 covers"),
    ("deflated", 1, 0, "a filter count of 0 covers"),
    # libhdf5 refuses to open these two itself
    ("deflated", 1, 2, "ran off end of input buffer while decoding"),
    ("shuffled", 2, 33, "filter pipeline message has too many filters"),
]


@pytest.mark.parametrize("libver", ["earliest", "latest"])
@pytest.mark.parametrize(
    ("name", "count", "edited", "reason"),
    COUNT_EDITS,
    ids=[f"{e[0]}-{e[1]}-to-{e[2]}" for e in COUNT_EDITS],
)
def test_filter_count_that_does_not_match_the_filters_is_refused(
    tmp_path: Path, libver: str, name: str, count: int, edited: int, reason: str
) -> None:
    """A pipeline message whose filter count is edited: libhdf5 decodes that many
    filters and ignores the rest, and h5py reads the chunks through another pipeline
    than they were written with (garbage, an error or a crash of libhdf5). The
    dataset is refused; the others read as h5py reads them."""
    source = _shuffled_file(tmp_path / f"shuffled_{libver}.h5", libver)
    clean = _equal_or_refused(source, {})
    s = hdf5_structure(str(source))
    pos = _filter_count(s, _header(source, name), count)
    path = _patched(source, tmp_path / "edited.h5", [(pos, edited, 1)])
    _equal_or_refused(path, {name: reason})
    arrays, _ = _parse(path)
    assert set(arrays) == {"shuffled", "deflated", "plain"} - {name}
    assert np.array_equal(arrays["plain"], clean["plain"])


# ------------------------------------------------------------------ contiguous layouts


@pytest.mark.parametrize("libver", ["earliest", "latest"])
@pytest.mark.parametrize("name", ["vlen", "fixed"])
def test_contiguous_storage_of_size_zero_at_an_address_is_refused(
    tmp_path: Path, libver: str, name: str
) -> None:
    """A contiguous layout whose size is edited to 0 while its address stays: libhdf5
    reads the values at the address anyway. Variable-length strings were read as
    if nothing was stored (empty strings where h5py reads the strings); the dataset
    is refused, as a fixed-size one is."""
    source = tmp_path / f"strings_{libver}.h5"
    with h5py.File(source, "w", libver=libver) as f:
        f.create_dataset("vlen", data=[f"string {i}" for i in range(5)], dtype=h5py.string_dtype())
        f.create_dataset("fixed", data=np.arange(5, dtype="<i4"))
        f.create_dataset("other", data=np.arange(3, dtype="<f8"))
    strings = [f"string {i}" for i in range(5)]
    s = hdf5_structure(str(source))
    start, size = _message_pos(s, _header(source, name), 0x08)
    fields = [
        f for f in s.fields if f.label == "contiguous data size" and start <= f.pos < start + size
    ]
    assert len(fields) == 1 and s.u(fields[0].pos, fields[0].width) > 0
    path = _patched(source, tmp_path / "edited.h5", [(fields[0].pos, 0, fields[0].width)])
    with h5py.File(path, "r") as f:  # libhdf5 reads the values at the address anyway
        assert [v.decode() for v in f["vlen"][()]] == strings
        native = {key: f[key][()] for key in ("fixed", "other")}
    arrays, skipped = _parse(path)
    assert set(arrays) == {"vlen", "fixed", "other"} - {name}, skipped
    (line,) = [m for m in skipped if f"dataset '/{name}' skipped" in m]
    assert line.startswith(f"{_url(path)}: ") and "\n" not in line, line
    assert "of 0 bytes: the layout message contradicts itself" in line, line
    if "vlen" in arrays:
        assert arrays["vlen"].tolist() == strings
    for key in set(arrays) - {"vlen"}:
        assert arrays[key].dtype == native[key].dtype
        assert arrays[key].tobytes() == native[key].tobytes()


@pytest.mark.parametrize("libver", ["earliest", "latest"])
@pytest.mark.parametrize("element_size", [1, 66, 1 + (1 << 24)])
def test_shuffle_element_size_other_than_the_datatype_reads_as_h5py(
    tmp_path: Path, libver: str, element_size: int
) -> None:
    """libhdf5 unshuffles with the element size stored in the pipeline, whatever the
    datatype's (no transposition when it exceeds the chunk's bytes, the remainder
    left in place): the virtual array's read failed; it now equals h5py's."""
    source = _shuffled_file(tmp_path / f"shuffled_{libver}.h5", libver)
    s = hdf5_structure(str(source))
    start, _ = _message_pos(s, _header(source, "shuffled"), FILTERS)
    at = start + (8 if s.data[start] == 1 else 2)
    assert s.u(at, 2) == 2  # shuffle first
    if s.data[start] == 1:  # id, name length, flags, value count, name, values
        count_at, values_at = at + 6, at + 8 + s.u(at + 2, 2)
    else:  # id, flags, value count, values
        count_at, values_at = at + 4, at + 6
    assert s.u(count_at, 2) == 1 and s.u(values_at, 4) == 4  # one value: the item size
    path = _patched(source, tmp_path / "edited.h5", [(values_at, element_size, 4)])
    native = _equal_or_refused(path, {})
    arrays, _ = _parse(path)
    assert arrays["shuffled"].tobytes() == native["shuffled"].tobytes()
