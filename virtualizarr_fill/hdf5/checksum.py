"""HDF5 checksums: metadata (Bob Jenkins' lookup3 ``hashlittle``, initial value 0) and
the Fletcher-32 filter's on data chunks.

Version 2+ structures (fixed and extensible arrays, version 2 B-trees, v2 object
headers) end in this checksum. libhdf5 exports its own implementation,
``H5_checksum_lookup3``; it is called through ctypes on the copy h5py has loaded, so
that the checksum is exactly libhdf5's and costs microseconds. Where that symbol is
not available, :func:`lookup3` returns None and callers fall back to libhdf5 reading
the structure itself.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

from virtualizarr_fill.hdf5 import _libhdf5


@functools.cache
def _checksum_function(name: str, *argtypes: Any) -> Callable[..., int] | None:
    """libhdf5's exported checksum function ``name`` (returning ``uint32_t``), or None."""
    lib = _libhdf5._libhdf5()
    if lib is None or not hasattr(lib, name):
        return None
    function = getattr(lib, name)
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_uint32
    return function  # type: ignore[no-any-return]


def _function() -> Callable[[int | None, int, int], int] | None:
    return _checksum_function(
        "H5_checksum_lookup3", ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32
    )


def available() -> bool:
    """Whether :func:`lookup3` can compute checksums."""
    return _function() is not None


def lookup3(data: bytes, start: int = 0, end: int | None = None) -> int | None:
    """The HDF5 metadata checksum of ``data[start:end]`` (without copying it), or None
    when unavailable."""
    function = _function()
    if function is None:
        return None
    end = len(data) if end is None else end
    if not 0 <= start <= end <= len(data):
        raise ValueError(f"range {start}:{end} outside {len(data)} bytes")
    address = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    assert address is not None
    return int(function(address + start, end - start, 0))


def verified(data: bytes, start: int = 0, end: int | None = None) -> bool | None:
    """Whether the last 4 bytes of ``data[start:end]`` are the checksum of the rest
    (None: cannot tell)."""
    end = len(data) if end is None else end
    if end - start < 4:
        return False
    computed = lookup3(data, start, end - 4)
    if computed is None:
        return None
    return computed == int.from_bytes(data[end - 4 : end], "little")


def fletcher32_verified(data: bytes) -> bool | None:
    """Whether ``data`` (a chunk as HDF5's Fletcher-32 filter stores it) ends in the
    checksum of the rest, in the byte order the filter writes (little-endian); None when
    libhdf5's function is unavailable. A False leaves the verdict to the caller's codec
    (libhdf5's reader also accepts the byte-swapped checksum of old files)."""
    function = _checksum_function("H5_checksum_fletcher32", ctypes.c_char_p, ctypes.c_size_t)
    if function is None:
        return None
    size = len(data) - 4
    if size < 0:
        return False
    return int(function(data, size)) == int.from_bytes(data[size:], "little")


__all__ = ["available", "fletcher32_verified", "lookup3", "verified"]
