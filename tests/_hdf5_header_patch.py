"""Patch one header field of a small HDF5 file and compare the parser with h5py.

Shared by the header tests of ``tests/hdf5/``: a file is written with netCDF4 or h5py,
one field found by parsing it (``conformance.fuzz.mutations.hdf5_structure``) is edited (the
lookup3 checksum of an edited block restored), and every array the parser keeps must
equal h5py's read of the same bytes, each other dataset being skipped with one line
naming the file, the dataset and the problem.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from conformance.fuzz.mutations import H5Structure, _put, apply_ops, hdf5_structure
from virtualizarr_fill.hdf5 import HDF5Parser, SkippedDatasetWarning

EVERYTHING = ObjectStoreRegistry({"file:///": LocalStore("/")})
DATASPACE, FILL_VALUE, FILTERS = 0x01, 0x05, 0x0B


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
