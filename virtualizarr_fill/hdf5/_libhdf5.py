"""The few HDF5 C-library calls h5py does not wrap.

h5py exposes nearly the whole HDF5 API, but not

* ``H5Pget_chunk_opts`` (the "don't filter partial edge chunks" layout flag): without
  it an unfiltered edge chunk of a filtered dataset is indistinguishable from a
  filtered one, since HDF5 records no filter mask for it;
* ``H5Dget_chunk_index_type``: a "single chunk" index holds one chunk whatever the
  chunk dimensions say, and libhdf5 then serves that chunk for every chunk position;
* the stored size of a variable-length type's base element (``H5Tget_super``), which
  multiplies what each stored descriptor claims (see
  :mod:`~virtualizarr_fill.hdf5.format.vlen_descriptors`).

Nothing here registers anything in libhdf5: the calls only query or read.

The calls go through ctypes into the very ``libhdf5`` that h5py has loaded, using the
identifiers h5py hands out (under h5py's lock), so both sides agree on every handle.
"""

from __future__ import annotations

import ctypes
import functools
import math
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from h5py._objects import phil

#: ``H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`` from H5Dpublic.h.
DONT_FILTER_PARTIAL_CHUNKS = 0x0002
#: ``H5D_chunk_index_t`` values (H5Dpublic.h): version 1 B-tree, single chunk, version 2
#: B-tree.
CHUNK_INDEX_BTREE = 0
CHUNK_INDEX_SINGLE = 1
CHUNK_INDEX_BT2 = 5

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
    # h5py serialises every libhdf5 call behind its lock (libhdf5 is not thread-safe):
    # a direct call must hold it too.
    with phil:
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
    with phil:
        status = func(dcpl.id, options)
    if status < 0:
        raise RuntimeError("H5Pset_chunk_opts failed")


def set_istore_k(fcpl: h5py.h5p.PropFCID, ik: int) -> None:
    """Set the chunk B-tree rank of a file creation property list (superblock v1 fixtures)."""
    lib = _libhdf5()
    if lib is None:
        raise RuntimeError("libhdf5 loaded by h5py could not be located")
    func = lib.H5Pset_istore_k
    func.argtypes = [_HID_T, ctypes.c_uint]
    func.restype = ctypes.c_int
    with phil:
        status = func(fcpl.id, ik)
    if status < 0:
        raise RuntimeError("H5Pset_istore_k failed")


def get_chunk_index_type(dsid: h5py.h5d.DatasetID) -> int | None:
    """The chunk index type (``H5D_chunk_index_t``) of a chunked dataset, or None when
    the call is unavailable or fails."""
    lib = _libhdf5()
    if lib is None or not hasattr(lib, "H5Dget_chunk_index_type"):
        return None
    func = lib.H5Dget_chunk_index_type
    func.argtypes = [_HID_T, ctypes.POINTER(ctypes.c_int)]
    func.restype = ctypes.c_int
    index_type = ctypes.c_int(-1)
    with phil:
        if func(dsid.id, ctypes.byref(index_type)) < 0:
            return None
    return int(index_type.value)


# -- variable-length base sizes ---------------------------------------------------------


@functools.cache
def _type_calls() -> ctypes.CDLL | None:
    """libhdf5 with the type queries :func:`vlen_base_size` makes declared."""
    lib = _libhdf5()
    if lib is None:
        return None
    try:
        for name, argtypes, restype in (
            ("H5Tget_size", [_HID_T], ctypes.c_size_t),
            ("H5Dget_type", [_HID_T], _HID_T),
            ("H5Aget_type", [_HID_T], _HID_T),
            ("H5Tget_super", [_HID_T], _HID_T),
            ("H5Tclose", [_HID_T], ctypes.c_int),
        ):
            func = getattr(lib, name)
            func.argtypes = argtypes
            func.restype = restype
    except AttributeError:
        return None
    return lib


def vlen_base_size(obj: h5py.h5d.DatasetID | h5py.h5a.AttrID) -> int:
    """The stored size of the base element (a character, for strings) of the
    variable-length type of a dataset or attribute: libhdf5 allocates each claimed
    length times this (a corrupt datatype message can make a character hundreds of
    megabytes). h5py does not expose a vlen string's base type. 1 when unknown."""
    lib = _type_calls()
    if lib is None:
        return 1
    with phil:
        attribute = isinstance(obj, h5py.h5a.AttrID)
        tid = lib.H5Aget_type(obj.id) if attribute else lib.H5Dget_type(obj.id)
        return _base_size(lib, tid)


def _base_size(lib: ctypes.CDLL, tid: int) -> int:
    """The stored size of a variable-length type's base element (libhdf5 allocates
    claimed length x this; a corrupt datatype message can make a string's character
    hundreds of megabytes); 1 if unknown. Closes ``tid``."""
    if tid < 0:
        return 1
    base = lib.H5Tget_super(tid)
    size = int(lib.H5Tget_size(base)) if base >= 0 else 1
    if base >= 0:
        lib.H5Tclose(base)
    lib.H5Tclose(tid)
    return max(size, 1)


# -- plain attributes ---------------------------------------------------------------------

# H5S_class_t, H5T_class_t, H5T_order_t, H5T_sign_t and H5T_cset_t values (H5Spublic.h,
# H5Tpublic.h).
_SPACE_SCALAR, _SPACE_SIMPLE = 0, 1
_CLASS_INTEGER, _CLASS_FLOAT, _CLASS_STRING = 0, 1, 3
_MAX_RANK = 32  # H5S_MAX_RANK


@functools.cache
def _attribute_calls() -> ctypes.CDLL | None:
    """libhdf5 with the signatures :func:`read_plain_attribute` calls declared."""
    lib = _libhdf5()
    if lib is None:
        return None
    declarations = (
        ("H5Aopen", [_HID_T, ctypes.c_char_p, _HID_T], _HID_T),
        ("H5Aclose", [_HID_T], ctypes.c_int),
        ("H5Aget_type", [_HID_T], _HID_T),
        ("H5Aget_space", [_HID_T], _HID_T),
        ("H5Aread", [_HID_T, _HID_T, ctypes.c_void_p], ctypes.c_int),
        ("H5Sget_simple_extent_type", [_HID_T], ctypes.c_int),
        ("H5Sget_simple_extent_dims", [_HID_T, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int),
        ("H5Sclose", [_HID_T], ctypes.c_int),
        ("H5Tget_class", [_HID_T], ctypes.c_int),
        ("H5Tget_size", [_HID_T], ctypes.c_size_t),
        ("H5Tget_order", [_HID_T], ctypes.c_int),
        ("H5Tget_sign", [_HID_T], ctypes.c_int),
        ("H5Tget_cset", [_HID_T], ctypes.c_int),
        ("H5Tis_variable_str", [_HID_T], ctypes.c_int),
        ("H5Tequal", [_HID_T, _HID_T], ctypes.c_int),
        ("H5Tcopy", [_HID_T], _HID_T),
        ("H5Tclose", [_HID_T], ctypes.c_int),
    )
    try:
        for name, argtypes, restype in declarations:
            func = getattr(lib, name)
            func.argtypes = argtypes
            func.restype = restype
    except AttributeError:
        return None
    return lib


#: IEEE float file types h5py reads as float16/32/64 (other float formats: h5py's path).
_STANDARD_FLOAT_TYPES = (
    h5py.h5t.IEEE_F16LE,
    h5py.h5t.IEEE_F16BE,
    h5py.h5t.IEEE_F32LE,
    h5py.h5t.IEEE_F32BE,
    h5py.h5t.IEEE_F64LE,
    h5py.h5t.IEEE_F64BE,
)

#: type signature -> (NumPy dtype, memory type) exactly as h5py derives them.
_plain_types: dict[tuple[int, ...], tuple[np.dtype, h5py.h5t.TypeID]] = {}


def _plain_signature(lib: ctypes.CDLL, tid: int) -> tuple[int, ...] | None:
    """What h5py's NumPy dtype of file type ``tid`` depends on, for the plain classes
    (integers, IEEE floats, fixed-length strings); None for any other type."""
    cls = lib.H5Tget_class(tid)
    if cls == _CLASS_INTEGER:
        size = int(lib.H5Tget_size(tid))
        if size not in (1, 2, 4, 8):
            return None
        return (cls, size, lib.H5Tget_order(tid), lib.H5Tget_sign(tid))
    if cls == _CLASS_FLOAT:
        for index, standard in enumerate(_STANDARD_FLOAT_TYPES):
            if lib.H5Tequal(tid, standard.id) > 0:
                return (cls, index)
        return None
    if cls == _CLASS_STRING:
        if lib.H5Tis_variable_str(tid) != 0:
            return None
        return (cls, int(lib.H5Tget_size(tid)), lib.H5Tget_cset(tid))
    return None


def _plain_type(lib: ctypes.CDLL, tid: int, signature: tuple[int, ...]) -> tuple[np.dtype, Any]:
    known = _plain_types.get(signature)
    if known is None:
        # h5py's own translation, once per signature: the dtype its attribute reads
        # return and the memory type they read with.
        dtype = h5py.h5t.typewrap(lib.H5Tcopy(tid)).dtype
        known = (dtype, h5py.h5t.py_create(dtype))
        _plain_types[signature] = known
    return known


def read_plain_attribute(obj: Any, name: bytes, max_bytes: int) -> Any:
    """The value of attribute ``name`` of ``obj`` (an h5py object identifier) as h5py's
    ``attrs[name]`` returns it, when its type is an integer, an IEEE float or a
    fixed-length string and its dataspace scalar or simple; None otherwise (and when
    libhdf5 refuses any step), for h5py's general path to read it.

    h5py spends most of an attribute read creating identifier objects (attribute,
    dataspace, datatype, memory type); these few direct calls into the same libhdf5
    read the same bytes with the same memory type. Raises ValueError when the value
    would take more than ``max_bytes``.
    """
    lib = _attribute_calls()
    if lib is None:
        return None
    dims = (ctypes.c_uint64 * _MAX_RANK)()
    with phil:
        aid = lib.H5Aopen(obj.id, name, 0)
        if aid < 0:
            return None
        try:
            tid = lib.H5Aget_type(aid)
            if tid < 0:
                return None
            try:
                signature = _plain_signature(lib, tid)
                if signature is None:
                    return None
                dtype, memory_type = _plain_type(lib, tid, signature)
            finally:
                lib.H5Tclose(tid)
            sid = lib.H5Aget_space(aid)
            if sid < 0:
                return None
            try:
                kind = lib.H5Sget_simple_extent_type(sid)
                if kind not in (_SPACE_SCALAR, _SPACE_SIMPLE):
                    return None
                rank = lib.H5Sget_simple_extent_dims(sid, dims, None)
            finally:
                lib.H5Sclose(sid)
            if rank < 0 or rank > _MAX_RANK:
                return None
            shape = tuple(int(dims[i]) for i in range(rank))
            size = math.prod(shape) * max(dtype.itemsize, 1)
            if size > max_bytes:
                raise ValueError(f"{size} bytes exceed {max_bytes}")
            values = np.zeros(shape, dtype=dtype)
            if lib.H5Aread(aid, memory_type.id, values.ctypes.data) < 0:
                return None
        finally:
            lib.H5Aclose(aid)
    return values[()] if values.ndim == 0 else values


@functools.cache
def _file_calls() -> ctypes.CDLL | None:
    lib = _libhdf5()
    if lib is None or not hasattr(lib, "H5Fget_fileno"):
        return None
    lib.H5Iget_file_id.argtypes = [_HID_T]
    lib.H5Iget_file_id.restype = _HID_T
    lib.H5Fget_fileno.argtypes = [_HID_T, ctypes.POINTER(ctypes.c_ulong)]
    lib.H5Fget_fileno.restype = ctypes.c_int
    lib.H5Fclose.argtypes = [_HID_T]
    lib.H5Fclose.restype = ctypes.c_int
    return lib


def file_number(oid: Any) -> int | None:
    """libhdf5's number of the open file an object identifier belongs to (the same for
    every identifier of the file), or None. h5py's ``fileno`` reads the object's header
    to get it, which fails for a corrupt header; ``H5Fget_fileno`` does not."""
    lib = _file_calls()
    if lib is None:
        return None
    number = ctypes.c_ulong(0)
    with phil:
        fid = lib.H5Iget_file_id(oid.id)
        if fid < 0:
            return None
        try:
            if lib.H5Fget_fileno(fid, ctypes.byref(number)) < 0:
                return None
        finally:
            lib.H5Fclose(fid)
    return int(number.value)


def object_address(oid: Any) -> int:
    """The address of an object's header (relative to the superblock; the same for all
    of the object's names).

    ``h5py.h5o.get_info`` also sums the sizes of a dataset's chunk index, which makes
    libhdf5 read the whole index; ``H5Gget_objinfo`` reports
    the address alone (its ``objno``, split over two C longs). Builds of libhdf5 without
    deprecated symbols lack it: then ``get_info``.
    """
    get_objinfo = getattr(h5py.h5g, "get_objinfo", None)
    if get_objinfo is None:
        return int(h5py.h5o.get_info(oid).addr)
    low, high = get_objinfo(oid, b".").objno
    return int(low) | (int(high) << (8 * ctypes.sizeof(ctypes.c_long)))


# -- h5py internals: every use of a private h5py name goes through here ---------------------


def cached_creation_plist(dataset: h5py.Dataset) -> Any:
    """h5py's cached copy of ``dataset``'s creation property list (its private
    ``_dcpl``), rather than another copy from libhdf5; a fresh one where h5py keeps none."""
    plist = getattr(dataset, "_dcpl", None)
    return dataset.id.get_create_plist() if plist is None else plist


def decoded_name(obj: h5py.HLObject, name: bytes | None) -> Any:
    """``name`` (bytes from libhdf5) decoded as h5py decodes names for ``obj`` (its
    private ``_d``: UTF-8, else the bytes as they are; None stays None)."""
    decode = getattr(obj, "_d", None)
    if decode is not None:
        return decode(name)
    if name is None:
        return None
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        return name
