"""Headers whose messages disagree with each other: refused, never misread.

Each test writes a small file with netCDF4 (netCDF-C) or h5py, patches one header field
found by parsing the file (``tests._hdf5_header_patch``: ``hdf5_structure`` maps object
headers and their messages; the lookup3 checksum of an edited block is restored), and
compares the parser with h5py reading the same bytes: every array the parser keeps
equals h5py's, shape and values; a dataset whose answer h5py does not define (a
dimension disagreeing with the dataspace, a fill value read from uninitialised memory)
is skipped with one line naming the file, the dataset and the problem. The classes:

* a variable's dataspace that disagrees with its dimension scale (the dataset's own
  dataspace length edited, or the scale's), fixed-size and chunked;
* fill-value messages with a value size other than the datatype's, undefined write
  times, flags or bytes of another version, on datasets without storage; and datasets
  without storage whose fill time is "never" (values undefined).

Filter pipelines and storage layouts are in ``test_hdf5_pipeline_headers.py``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from conformance.fuzz.mutations import hdf5_structure
from tests._hdf5_header_patch import (
    EVERYTHING,
    FILL_VALUE,
    _dataspace_dim,
    _equal_or_refused,
    _header,
    _message_pos,
    _parse,
    _patched,
    _url,
)
from virtualizarr_fill.cli import EXIT_OK, main
from virtualizarr_fill.hdf5 import HDF5Parser

netCDF4 = pytest.importorskip("netCDF4")


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
    that variable, and ``verify`` reports it as left out rather than calling the store
    equal."""
    s = hdf5_structure(str(netcdf_dims))
    pos = _dataspace_dim(s, _header(netcdf_dims, "t"), 0)
    path = _patched(netcdf_dims, tmp_path / "t39.nc", [(pos, 39, 8)])
    repo = tmp_path / "store.icechunk"
    assert main(["build", str(path), "--out", str(repo), "--workers", "0"]) == EXIT_OK
    built = capsys.readouterr()
    assert "dataset '/t' skipped: its length 39" in built.out + built.err
    code = main(["verify", str(repo), "--against", str(path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"SKIPPED {path}: /t: its length 39 along axis 0" in out, out
    assert "verified 2 arrays of 1 files: 1 dataset not in the store" in out, out
    assert "all equal" not in out


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
    assert code == 1, out
    assert f"SKIPPED {path}: /scalar: corrupt fill-value message" in out, out
    assert "verified 2 arrays of 1 files: 1 dataset not in the store" in out, out
