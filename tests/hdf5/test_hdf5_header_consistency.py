"""Headers whose messages disagree with each other: refused, never misread.

Each test writes a small file with netCDF4 (netCDF-C) or h5py, patches one header field
found by parsing the file (``tests._fuzz_mutations.hdf5_structure`` maps object headers
and their messages; the lookup3 checksum of an edited block is restored), and compares
the parser with h5py reading the same bytes: every array the parser keeps equals
h5py's, shape and values; a dataset whose answer h5py does not define (a dimension
disagreeing with the dataspace, a chunk read together with the bytes after it, a fill
value read from uninitialised memory) is skipped with one line naming the file, the
dataset and the problem. The classes:

* a variable's dataspace that disagrees with its dimension scale (the dataset's own
  dataspace length edited, or the scale's), fixed-size and chunked;
* an N-bit datatype whose N-bit filter is removed from the pipeline (the pipeline
  message turned into a null message), and the N-bit filter removed from a
  full-precision type (stored as is);
* a filter count edited so that it no longer matches the filters of the pipeline
  message (2 -> 1, 2 -> 0, 1 -> 0, 1 -> 2, 33), version 1 and 2 messages;
* fill-value messages with a value size other than the datatype's, undefined write
  times, flags or bytes of another version, on datasets without storage; and datasets
  without storage whose fill time is "never" (values undefined);
* a contiguous layout whose size is 0 while its address is defined (libhdf5 reads at
  the address; variable-length strings read as empty before).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from tests._fuzz_mutations import H5Structure, _put, apply_ops, hdf5_structure
from virtualizarr_fill.cli import EXIT_OK, main
from virtualizarr_fill.hdf5 import HDF5Parser, SkippedDatasetWarning

netCDF4 = pytest.importorskip("netCDF4")

EVERYTHING = ObjectStoreRegistry({"file:///": LocalStore("/")})
DATASPACE, FILL_VALUE, FILTERS = 0x01, 0x05, 0x0B


# --------------------------------------------------------------------------- helpers


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _header(path: Path, name: str) -> int:
    """The absolute address of dataset ``name``'s object header."""
    with h5py.File(path, "r") as f:
        return int(h5py.h5o.get_info(f[name].id).addr)


def _message_pos(s: H5Structure, header: int, kind: int) -> tuple[int, int]:
    """(data position, size) of the message of type ``kind`` in the header at ``header``."""
    found = [(m.data_pos, m.size) for m in s.messages if m.header == header and m.type == kind]
    assert len(found) == 1, (header, kind, found)
    return found[0]


def _dataspace_dim(s: H5Structure, header: int, axis: int, maximum: bool = False) -> int:
    """The position of a dataspace dimension (or maximum dimension) field."""
    start, size = _message_pos(s, header, DATASPACE)
    label = f"dataspace {'max ' if maximum else ''}dim {axis}"
    fields = [f.pos for f in s.fields if f.label == label and start <= f.pos < start + size]
    assert len(fields) == 1, (label, fields)
    return fields[0]


def _patched(source: Path, out: Path, edits: list[tuple[int, int, int]]) -> Path:
    """``source`` with (position, value, width) edits, checksums restored."""
    s = hdf5_structure(str(source))
    ops: list[dict[str, Any]] = []
    for pos, value, width in edits:
        ops.append(_put(pos, value, width, "little"))
        ops += s.checksum_fix(pos)
    out.write_bytes(apply_ops(source.read_bytes(), ops))
    return out


def _h5py(path: Path) -> dict[str, Any]:
    """Each dataset as h5py reads it: its values, or the error's text."""
    found: dict[str, Any] = {}
    with h5py.File(path, "r") as f:
        for name in f:
            try:
                found[name] = np.asarray(f[name][()])
            except Exception as exc:
                found[name] = f"h5py error: {exc}"
    return found


def _parse(path: Path) -> tuple[dict[str, np.ndarray], list[str]]:
    """The arrays the parser keeps, read back through zarr, and its skip messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = HDF5Parser()(_url(path), EVERYTHING)
        root = zarr.open_group(store, mode="r", zarr_format=3)
        arrays = {name: np.asarray(array[...]) for name, array in root.arrays()}
    skipped = [str(w.message) for w in caught if isinstance(w.message, SkippedDatasetWarning)]
    return arrays, skipped


def _equal_or_refused(path: Path, refused: dict[str, str]) -> dict[str, Any]:
    """Every array kept equals h5py's read (shape, dtype, bits); each dataset of
    ``refused`` is skipped with one line naming the file, the dataset and the reason.
    Returns h5py's reads."""
    native = _h5py(path)
    arrays, skipped = _parse(path)
    for name, reason in refused.items():
        assert name not in arrays, (name, arrays[name])
        lines = [m for m in skipped if f"dataset '/{name}' skipped" in m]
        assert len(lines) == 1, skipped
        assert lines[0].startswith(f"{_url(path)}: ") and "\n" not in lines[0], lines[0]
        assert reason in lines[0], lines[0]
    for name, values in arrays.items():
        expected = native[name]
        assert not isinstance(expected, str), (name, expected)
        assert values.shape == expected.shape, (name, values.shape, expected.shape)
        assert values.dtype == expected.dtype, name
        assert values.tobytes() == expected.tobytes(), name
    return native


# --------------------------------------------------------------------- dimension lengths


@pytest.fixture
def netcdf_dims(tmp_path: Path) -> Path:
    path = tmp_path / "dims.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 40)
        nc.createDimension("y", 5)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(40.0)
        nc.createVariable("t", "i4", ("x", "y"))[:] = np.arange(200).reshape(40, 5)
        nc.createDimension("a", 2)
        nc.createDimension("b", 86)
        nc.createDimension("c", 85)
        cube = nc.createVariable("cube", "i2", ("a", "b", "c"), chunksizes=(1, 43, 85))
        cube[:] = (np.arange(2 * 86 * 85) % 3000).reshape(2, 86, 85)
    return path


def test_variable_shorter_than_its_dimension_is_skipped(netcdf_dims: Path, tmp_path: Path) -> None:
    s = hdf5_structure(str(netcdf_dims))
    pos = _dataspace_dim(s, _header(netcdf_dims, "t"), 0)
    assert s.u(pos, 8) == 40
    path = _patched(netcdf_dims, tmp_path / "t39.nc", [(pos, 39, 8)])
    native = _equal_or_refused(
        path, {"t": "its length 39 along axis 0 differs from the length 40 of its dimension 'x'"}
    )
    assert native["t"].shape == (39, 5)
    arrays, _ = _parse(path)
    assert set(arrays) == {"x", "cube"}


def test_dimension_scale_longer_than_its_variable(netcdf_dims: Path, tmp_path: Path) -> None:
    # The scale 'x' grows to 41 (its maximum too, else libhdf5 refuses it): 't' keeps
    # its own 40 rows in h5py, and must not take the scale's 41.
    s = hdf5_structure(str(netcdf_dims))
    header = _header(netcdf_dims, "x")
    edits = [(_dataspace_dim(s, header, 0), 41, 8), (_dataspace_dim(s, header, 0, True), 41, 8)]
    path = _patched(netcdf_dims, tmp_path / "x41.nc", edits)
    native = _equal_or_refused(
        path, {"t": "its length 40 along axis 0 differs from the length 41 of its dimension 'x'"}
    )
    assert native["t"].shape == (40, 5)


def test_chunked_variable_emptied_along_a_dimension(netcdf_dims: Path, tmp_path: Path) -> None:
    # h5py reads (2, 86, 0); the variable must not become (2, 86, 85) of fill values.
    s = hdf5_structure(str(netcdf_dims))
    pos = _dataspace_dim(s, _header(netcdf_dims, "cube"), 2)
    path = _patched(netcdf_dims, tmp_path / "cube0.nc", [(pos, 0, 8)])
    native = _equal_or_refused(
        path, {"cube": "its length 0 along axis 2 differs from the length 85 of its dimension 'c'"}
    )
    assert native["cube"].shape == (2, 86, 0)


def test_unlimited_dimension_still_pads_shorter_variables(tmp_path: Path) -> None:
    """The one disagreement netCDF readers resolve: a variable extensible along an
    unlimited dimension, shorter than it, is padded with its fill value."""
    path = tmp_path / "unlimited.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createVariable("time", "f8", ("time",))[:] = np.arange(6.0)
        short = nc.createVariable("short", "i4", ("time",), fill_value=-9)
        short[:4] = np.arange(4)
    with h5py.File(path, "r") as f:
        assert f["short"].shape == (4,)
    arrays, skipped = _parse(path)
    assert not skipped
    with netCDF4.Dataset(path) as nc:
        expected = nc["short"][:].filled(-9)
    assert arrays["short"].tolist() == expected.tolist() == [0, 1, 2, 3, -9, -9]


def test_unlimited_dimension_length_ignores_a_fixed_dataset_it_references(
    tmp_path: Path,
) -> None:
    """A scale's REFERENCE_LIST naming a dataset that is not extensible (and does not
    name the scale back) does not lengthen the unlimited dimension: 'time' and 'v'
    keep h5py's 6 values rather than 9 padded ones."""
    path = tmp_path / "reflist.h5"
    with h5py.File(path, "w") as f:
        time = f.create_dataset("time", data=np.arange(6.0), maxshape=(None,), chunks=(6,))
        time.make_scale("time")
        v = f.create_dataset("v", data=np.arange(6, dtype="<i4"), maxshape=(None,), chunks=(6,))
        v.dims[0].attach_scale(time)
        other = f.create_dataset("other", data=np.arange(9, dtype="<i4"))
        other.dims[0].attach_scale(time)
        del other.attrs["DIMENSION_LIST"]
    _equal_or_refused(path, {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        HDF5Parser()(_url(path), EVERYTHING)
    assert any(
        "attribute 'REFERENCE_LIST' of dataset '/time': entry 1 names a dataset not "
        "extensible along axis 0" in str(w.message)
        for w in caught
    ), [str(w.message) for w in caught]
    arrays, _ = _parse(path)
    assert {name: a.shape for name, a in arrays.items()} == {
        "time": (6,),
        "v": (6,),
        "other": (9,),
    }


def test_verify_does_not_call_a_skipped_variable_equal(
    netcdf_dims: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store of a file whose variable disagrees with its dimension builds without
    that variable, and ``verify`` compares only what the store holds."""
    s = hdf5_structure(str(netcdf_dims))
    pos = _dataspace_dim(s, _header(netcdf_dims, "t"), 0)
    path = _patched(netcdf_dims, tmp_path / "t39.nc", [(pos, 39, 8)])
    repo = tmp_path / "store.icechunk"
    assert main(["build", str(path), "--out", str(repo), "--workers", "0"]) == EXIT_OK
    built = capsys.readouterr()
    assert "dataset '/t' skipped: its length 39" in built.out + built.err
    code = main(["verify", str(repo), "--against", str(path)])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    assert "verified 2 arrays of 1 files: all equal" in out, out


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


# ------------------------------------------------------------------- fill-value messages


def _fill_file(path: Path, libver: str) -> Path:
    with h5py.File(path, "w", libver=libver) as f:
        f.create_dataset("scalar", shape=(), dtype="<f4", fillvalue=1.5)
        f.create_dataset("vector", shape=(4,), dtype="<i2", fillvalue=-7)
        f.create_dataset("written", data=np.arange(3, dtype="<f8"), fillvalue=2.5)
    return path


#: (label, libver, version of the message libhdf5 writes, edit: (offset in the message,
#: width, new value or a function of the old), reason)
FILL_EDITS = [
    ("value size 2", "earliest", 2, (4, 4, 2), "version 2: a 2-byte value for a 4-byte datatype"),
    ("value size 2", "latest", 3, (2, 4, 2), "version 3: a 2-byte value for a 4-byte datatype"),
    # h5py fails to read it ("invalid combination of fill-value info")
    ("value size 0", "latest", 3, (2, 4, 0), "the 'has a value' flag with a 0-byte value"),
    ("write time 3", "earliest", 2, (2, 1, 3), "undefined fill-value write time 3"),
    ("write time 3", "latest", 3, (1, 1, lambda v: v | 0x0C), "undefined fill-value write time 3"),
    # libhdf5 refuses these two itself
    ("reserved flag", "latest", 3, (1, 1, lambda v: v | 0x40), "unknown flag for fill value"),
    ("defined byte 2", "earliest", 2, (3, 1, 2), "undefined 'fill value defined' byte 2"),
    ("undefined", "earliest", 2, (3, 1, 0), "16 bytes whose fields take 4"),
    ("as version 3", "earliest", 2, (0, 1, 3), "version 3: 16 bytes whose fields take 2"),
    ("as version 2", "latest", 3, (0, 1, 2), "undefined space allocation time 42"),
    ("version 4", "latest", 3, (0, 1, 4), "bad version number for fill value message"),
    ("write time never", "earliest", 2, (2, 1, 1), "the fill-value write time is 'never'"),
    ("write time never", "latest", 3, (1, 1, lambda v: v & ~0x0C | 0x04), "time is 'never'"),
]


@pytest.mark.parametrize(
    ("label", "libver", "version", "edit", "reason"),
    FILL_EDITS,
    ids=[f"{e[1]}-{e[0]}" for e in FILL_EDITS],
)
def test_corrupt_fill_value_message_is_refused(
    tmp_path: Path, label: str, libver: str, version: int, edit: tuple[int, int, Any], reason: str
) -> None:
    source = _fill_file(tmp_path / f"fill_{libver}.h5", libver)
    clean = _equal_or_refused(source, {})
    assert clean["scalar"] == np.float32(1.5) and clean["vector"].tolist() == [-7] * 4
    s = hdf5_structure(str(source))
    start, _ = _message_pos(s, _header(source, "scalar"), FILL_VALUE)
    assert s.data[start] == version
    at, width, value = edit
    new = value(s.u(start + at, width)) if callable(value) else value
    path = _patched(source, tmp_path / "edited.h5", [(start + at, new, width)])
    _equal_or_refused(path, {"scalar": reason})
    arrays, _ = _parse(path)
    assert set(arrays) == {"vector", "written"}


def test_dataset_without_storage_and_fill_time_never(tmp_path: Path) -> None:
    """Written as libhdf5 writes it (netCDF-C's no-fill variables): nothing stored and
    fill time "never" leaves h5py's values undefined; once written it reads as usual."""
    path = tmp_path / "never.h5"
    with h5py.File(path, "w") as f:
        for name in ("unwritten", "written"):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
            space = h5py.h5s.create_simple((6,))
            h5py.h5d.create(f.id, name.encode(), h5py.h5t.STD_I32LE, space, dcpl=dcpl)
        f["written"][...] = np.arange(6, dtype="<i4")
    native = _equal_or_refused(path, {"unwritten": "fill-value write time is 'never'"})
    assert native["written"].tolist() == list(range(6))


def test_verify_after_a_fill_value_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _fill_file(tmp_path / "fill.h5", "latest")
    s = hdf5_structure(str(source))
    start, _ = _message_pos(s, _header(source, "scalar"), FILL_VALUE)
    path = _patched(source, tmp_path / "edited.h5", [(start + 2, 2, 4)])
    repo = tmp_path / "store.icechunk"
    assert main(["build", str(path), "--out", str(repo), "--workers", "0"]) == EXIT_OK
    built = capsys.readouterr()
    assert "dataset '/scalar' skipped: corrupt fill-value message" in built.out + built.err
    code = main(["verify", str(repo), "--against", str(path)])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    assert "verified 2 arrays of 1 files: all equal" in out, out


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
