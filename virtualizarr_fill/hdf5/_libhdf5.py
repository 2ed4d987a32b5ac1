"""The few HDF5 C-library calls h5py does not wrap.

h5py exposes nearly the whole HDF5 API, but not ``H5Pget_chunk_opts`` (the
"don't filter partial edge chunks" layout flag): without it an unfiltered edge chunk
of a filtered dataset is indistinguishable from a filtered one, since HDF5 records no
filter mask for it. The call goes through ctypes into the very ``libhdf5`` that h5py
has loaded, using the property list identifiers h5py hands out, so both sides agree
on every handle.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path

import h5py

#: ``H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`` from H5Dpublic.h.
DONT_FILTER_PARTIAL_CHUNKS = 0x0002

# hid_t is a 64-bit integer since HDF5 1.10.
_HID_T = ctypes.c_int64


def _h5py_bundled_libraries() -> list[str]:
    """libhdf5 copies shipped inside the h5py wheel (what its extensions link against)."""
    import h5py

    package_dir = Path(h5py.__file__).resolve().parent
    found: list[str] = []
    for directory in (package_dir.parent / "h5py.libs", package_dir / ".dylibs", package_dir):
        if directory.is_dir():
            for candidate in sorted(directory.iterdir()):
                name = candidate.name
                shared = name.endswith((".so", ".dylib", ".dll")) or ".so." in name
                if name.startswith(("libhdf5", "hdf5")) and "_hl" not in name and shared:
                    found.append(str(candidate))
    return found


def _loaded_libhdf5_path() -> str | None:
    """Path of the libhdf5 shared object h5py's extension modules are linked against.

    Other packages (netCDF4 and its filter plugins) may load their own libhdf5 into the
    process, so the first copy mapped is not necessarily h5py's: prefer the one bundled
    with h5py, then a mapped copy.
    """
    import h5py.h5  # noqa: F401  (make sure h5py's copy is loaded)

    bundled = _h5py_bundled_libraries()
    if bundled:
        return bundled[0]
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text().splitlines():
            path = line.split()[-1] if line.split() else ""
            name = Path(path).name
            if name.startswith("libhdf5") and "_hl" not in name and ".so" in name:
                return path
    return None


@functools.cache
def _libhdf5() -> ctypes.CDLL | None:
    path = _loaded_libhdf5_path()
    if path is None:
        return None
    mode = getattr(ctypes, "RTLD_GLOBAL", 0)
    if sys.platform.startswith("linux"):
        mode |= 4  # RTLD_NOLOAD: reuse the copy h5py loaded, never a second one
    try:
        return ctypes.CDLL(path, mode=mode)
    except OSError:
        return None


def get_chunk_opts(dcpl: h5py.h5p.PropDCID) -> int | None:
    """The chunk options of a dataset creation property list, or None when unavailable."""
    lib = _libhdf5()
    if lib is None or not hasattr(lib, "H5Pget_chunk_opts"):
        return None
    func = lib.H5Pget_chunk_opts
    func.argtypes = [_HID_T, ctypes.POINTER(ctypes.c_uint)]
    func.restype = ctypes.c_int
    options = ctypes.c_uint(0)
    if func(dcpl.id, ctypes.byref(options)) < 0:
        return None
    return int(options.value)


def set_chunk_opts(dcpl: h5py.h5p.PropDCID, options: int) -> None:
    """Set the chunk options of a dataset creation property list (used to write fixtures)."""
    lib = _libhdf5()
    if lib is None:
        raise RuntimeError("libhdf5 loaded by h5py could not be located")
    func = lib.H5Pset_chunk_opts
    func.argtypes = [_HID_T, ctypes.c_uint]
    func.restype = ctypes.c_int
    if func(dcpl.id, options) < 0:
        raise RuntimeError("H5Pset_chunk_opts failed")


def set_istore_k(fcpl: h5py.h5p.PropFCID, ik: int) -> None:
    """Set the chunk B-tree rank of a file creation property list (superblock v1 fixtures)."""
    lib = _libhdf5()
    if lib is None:
        raise RuntimeError("libhdf5 loaded by h5py could not be located")
    func = lib.H5Pset_istore_k
    func.argtypes = [_HID_T, ctypes.c_uint]
    func.restype = ctypes.c_int
    if func(fcpl.id, ik) < 0:
        raise RuntimeError("H5Pset_istore_k failed")
