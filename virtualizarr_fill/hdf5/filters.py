"""HDF5 filter pipelines as Zarr v3 codec chains.

An HDF5 filter pipeline is an ordered list of bytes->bytes transforms applied on write
(filter 0 first). In Zarr v3 the chunk is first serialised by the ``bytes`` codec and
then passed through bytes->bytes codecs in list order, so the filters map one to one,
in the same order, after the ``bytes`` codec.

Every codec written here resolves through the ``zarr.codecs`` entry points of a plain
install (zarr's own ``numcodecs.*`` codecs, ``imagecodecs-zarr``, and this package's
``virtualizarr_fill.hdf5_*`` codecs), so a fresh process can decode the arrays.
Filters without a faithful decoder (scale-offset, n-bit, ZFP, SZ, unregistered ids)
raise :class:`UnsupportedFilterError` naming the filter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from virtualizarr_fill.codecs.hdf5_bitshuffle import HDF5_BITSHUFFLE_CODEC_NAME
from virtualizarr_fill.codecs.hdf5_lzf import HDF5_LZF_CODEC_NAME
from virtualizarr_fill.codecs.hdf5_shuffle import HDF5_SHUFFLE_CODEC_NAME

# Filter identifiers (H5Zpublic.h and the HDF Group's registered filter list).
DEFLATE = 1
SHUFFLE = 2
FLETCHER32 = 3
SZIP = 4
NBIT = 5
SCALEOFFSET = 6
BZIP2 = 307
LZF = 32000
BLOSC = 32001
LZ4 = 32004
BITSHUFFLE = 32008
ZFP = 32013
ZSTD = 32015

#: Names of filters we know but cannot decode faithfully, for error messages.
KNOWN_FILTER_NAMES = {
    NBIT: "nbit",
    SCALEOFFSET: "scaleoffset",
    ZFP: "zfp",
    305: "lzo",
    32002: "mafisc",
    32003: "snappy",
    32005: "apax",
    32006: "cbf",
    32007: "jpeg-xr",
    32009: "spdp",
    32010: "lpc-rice",
    32011: "ccsds-123",
    32012: "jpeg-ls",
    32014: "fpzip",
    32016: "b3d",
    32017: "sz",
    32018: "fcidecomp",
    32019: "jpeg",
    32020: "vbz",
    32022: "fapec",
    32023: "bitgroom",
    32024: "sz3",
    32025: "granularbr",
    32026: "blosc2",
    32028: "sperr",
    32033: "htj2k",
}

# Blosc compressor codes of the HDF5 blosc filter (blosc.h BLOSC_*_FORMAT).
_BLOSC_CNAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}

# H5Z_FLAG_OPTIONAL: the filter may be skipped for a chunk (recorded in its filter mask).
FLAG_OPTIONAL = 0x0001


class UnsupportedFilterError(Exception):
    """A filter that has no faithful Zarr v3 codec."""

    def __init__(self, filter_id: int, name: str, detail: str = "") -> None:
        self.filter_id = filter_id
        self.name = name
        message = f"unsupported HDF5 filter {name!r} (id {filter_id})"
        super().__init__(f"{message}: {detail}" if detail else message)


@dataclass(frozen=True)
class FilterInfo:
    """One stage of a dataset's filter pipeline, as HDF5 records it."""

    filter_id: int
    flags: int
    cd_values: tuple[int, ...]
    name: str

    @property
    def optional(self) -> bool:
        return bool(self.flags & FLAG_OPTIONAL)


def read_pipeline(dcpl: h5py.h5p.PropDCID) -> list[FilterInfo]:
    """The filter pipeline of a dataset creation property list, in write order."""
    filters = []
    for index in range(dcpl.get_nfilters()):
        filter_id, flags, cd_values, name = dcpl.get_filter(index)
        text = name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)
        filters.append(
            FilterInfo(int(filter_id), int(flags), tuple(int(v) for v in cd_values), text)
        )
    return filters


def filter_display_name(info: FilterInfo) -> str:
    """A human name for a filter: the known name, else the one stored in the file."""
    builtin = {
        DEFLATE: "deflate",
        SHUFFLE: "shuffle",
        FLETCHER32: "fletcher32",
        SZIP: "szip",
        BZIP2: "bzip2",
        LZF: "lzf",
        BLOSC: "blosc",
        LZ4: "lz4",
        BITSHUFFLE: "bitshuffle",
        ZSTD: "zstd",
    }
    if info.filter_id in builtin:
        return builtin[info.filter_id]
    if info.filter_id in KNOWN_FILTER_NAMES:
        return KNOWN_FILTER_NAMES[info.filter_id]
    return info.name or f"filter {info.filter_id}"


def _deflate(info: FilterInfo, **_: Any) -> dict[str, Any]:
    level = info.cd_values[0] if info.cd_values else 6
    return {"name": "numcodecs.zlib", "configuration": {"level": int(min(max(level, 0), 9))}}


def _shuffle(info: FilterInfo, *, itemsize: int, whole_elements: bool, **_: Any) -> dict[str, Any]:
    # set_local stores the element size; files from old writers may lack it.
    size = info.cd_values[0] if info.cd_values else itemsize
    if whole_elements and size == itemsize:
        return {"name": "numcodecs.shuffle", "configuration": {"elementsize": int(size)}}
    # After a length-changing filter, or with an element size other than the
    # datatype's (libhdf5 uses the stored one), the buffer may end in a partial
    # element, which only HDF5's rule (copy the remainder) handles.
    return {"name": HDF5_SHUFFLE_CODEC_NAME, "configuration": {"elementsize": int(size)}}


def _fletcher32(info: FilterInfo, **_: Any) -> dict[str, Any]:
    # numcodecs' Fletcher32 is HDF5's algorithm: verifies, then strips, the trailing
    # little-endian checksum.
    return {"name": "numcodecs.fletcher32", "configuration": {}}


def _szip(
    info: FilterInfo, *, itemsize: int, chunk_shape: Sequence[int], **_: Any
) -> dict[str, Any]:
    if len(info.cd_values) < 4:
        raise UnsupportedFilterError(SZIP, "szip", f"incomplete parameters {info.cd_values}")
    options_mask, pixels_per_block, bits_per_pixel, pixels_per_scanline = info.cd_values[:4]
    return {
        "name": "imagecodecs_szip",
        "configuration": {
            "options_mask": int(options_mask),
            "pixels_per_block": int(pixels_per_block),
            "bits_per_pixel": int(bits_per_pixel),
            "pixels_per_scanline": int(pixels_per_scanline),
            # The HDF5 szip filter prefixes each chunk with its decoded length.
            "header": True,
        },
    }


def _bzip2(info: FilterInfo, **_: Any) -> dict[str, Any]:
    level = info.cd_values[0] if info.cd_values else 9
    return {"name": "numcodecs.bz2", "configuration": {"level": int(min(max(level, 1), 9))}}


def _lzf(
    info: FilterInfo,
    *,
    itemsize: int,
    chunk_shape: Sequence[int],
    whole_elements: bool,
    **_: Any,
) -> dict[str, Any]:
    if not whole_elements:
        # The decoded length would be that of an intermediate buffer nobody recorded.
        raise UnsupportedFilterError(LZF, "lzf", "lzf after a filter that changes the length")
    # The decoded size is the stored chunk's byte count (also cd_values[2] when set).
    nbytes = math.prod(chunk_shape) * itemsize
    return {"name": HDF5_LZF_CODEC_NAME, "configuration": {"nbytes": int(nbytes)}}


def _blosc(info: FilterInfo, **_: Any) -> dict[str, Any]:
    cd = info.cd_values
    clevel = cd[4] if len(cd) > 4 else 5
    shuffle = cd[5] if len(cd) > 5 else 1
    code = cd[6] if len(cd) > 6 else 0
    cname = _BLOSC_CNAMES.get(code)
    if cname is None:
        raise UnsupportedFilterError(BLOSC, "blosc", f"unknown blosc compressor code {code}")
    # The blosc frame header is self-describing; the configuration only documents it.
    return {
        "name": "numcodecs.blosc",
        "configuration": {
            "cname": cname,
            "clevel": int(clevel),
            "shuffle": int(shuffle),
            "blocksize": 0,
        },
    }


def _lz4(info: FilterInfo, **_: Any) -> dict[str, Any]:
    # imagecodecs' "lz4h5" is exactly the HDF5 LZ4 filter framing.
    configuration: dict[str, Any] = {}
    if info.cd_values and info.cd_values[0]:
        configuration["blocksize"] = int(info.cd_values[0])
    return {"name": "imagecodecs_lz4h5", "configuration": configuration}


def _bitshuffle(info: FilterInfo, *, itemsize: int, **_: Any) -> dict[str, Any]:
    cd = info.cd_values
    elementsize = cd[2] if len(cd) > 2 and cd[2] else itemsize
    blocksize = cd[3] if len(cd) > 3 else 0
    code = cd[4] if len(cd) > 4 else 0
    compression = {0: "none", 2: "lz4", 3: "zstd"}.get(code)
    if compression is None:
        raise UnsupportedFilterError(
            BITSHUFFLE, "bitshuffle", f"unknown bitshuffle compression code {code}"
        )
    configuration: dict[str, Any] = {
        "elementsize": int(elementsize),
        "blocksize": int(blocksize),
        "compression": compression,
    }
    if compression == "zstd" and len(cd) > 5:
        configuration["level"] = int(cd[5])
    return {"name": HDF5_BITSHUFFLE_CODEC_NAME, "configuration": configuration}


def _zstd(info: FilterInfo, **_: Any) -> dict[str, Any]:
    level = info.cd_values[0] if info.cd_values else 0
    return {"name": "zstd", "configuration": {"level": int(level), "checksum": False}}


_MAPPERS: dict[int, Callable[..., dict[str, Any]]] = {
    DEFLATE: _deflate,
    SHUFFLE: _shuffle,
    FLETCHER32: _fletcher32,
    SZIP: _szip,
    BZIP2: _bzip2,
    LZF: _lzf,
    BLOSC: _blosc,
    LZ4: _lz4,
    BITSHUFFLE: _bitshuffle,
    ZSTD: _zstd,
}


def filter_codecs(
    filters: Sequence[FilterInfo], *, dtype: np.dtype, chunk_shape: Sequence[int]
) -> list[dict[str, Any]]:
    """Zarr v3 bytes->bytes codec configurations for an HDF5 filter pipeline.

    Raises :class:`UnsupportedFilterError` for the first filter with no faithful codec.
    """
    codecs = []
    # Whether the bytes entering the next filter are still the raw chunk's length.
    whole_elements = True
    for info in filters:
        mapper = _MAPPERS.get(info.filter_id)
        if mapper is None:
            raise UnsupportedFilterError(info.filter_id, filter_display_name(info))
        codecs.append(
            mapper(
                info,
                itemsize=dtype.itemsize,
                chunk_shape=tuple(chunk_shape),
                whole_elements=whole_elements,
            )
        )
        whole_elements = whole_elements and info.filter_id == SHUFFLE
    return codecs


__all__ = [
    "FLAG_OPTIONAL",
    "FilterInfo",
    "UnsupportedFilterError",
    "filter_codecs",
    "filter_display_name",
    "read_pipeline",
]
