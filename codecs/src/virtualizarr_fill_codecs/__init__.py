"""Zarr v3 codecs that stores written by virtualizarr-fill may name.

zarr-python finds each codec through the ``zarr.codecs`` entry point group under its
registered name (``virtualizarr_fill.truncate``, ``virtualizarr_fill.crop``, ...), so a
process reading such a store needs this distribution installed and no import. It
depends on numpy and zarr only (imagecodecs for the TIFF and HDF5 codecs that
decompress or unpack), never on virtualizarr-fill itself.

The specifications of the codecs for other implementations are in
``docs/codecs/`` of the virtualizarr-fill repository.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from virtualizarr_fill_codecs.complex_int import ComplexIntCodec
    from virtualizarr_fill_codecs.crop import CropCodec
    from virtualizarr_fill_codecs.hdf5_bitshuffle import HDF5BitshuffleCodec
    from virtualizarr_fill_codecs.hdf5_lzf import HDF5LZFCodec
    from virtualizarr_fill_codecs.hdf5_shuffle import HDF5ShuffleCodec
    from virtualizarr_fill_codecs.tiff_bitorder import TiffBitorderCodec
    from virtualizarr_fill_codecs.tiff_packints import TiffPackintsCodec
    from virtualizarr_fill_codecs.tiff_predictor import TiffPredictorCodec
    from virtualizarr_fill_codecs.truncate import TruncateCodec

# Codec class -> the module that defines it, imported on first access (PEP 562):
# ``virtualizarr_fill.errors`` imports this package's errors, and importing
# virtualizarr-fill must not load zarr or numpy.
_LAZY = {
    "ComplexIntCodec": "virtualizarr_fill_codecs.complex_int",
    "CropCodec": "virtualizarr_fill_codecs.crop",
    "HDF5BitshuffleCodec": "virtualizarr_fill_codecs.hdf5_bitshuffle",
    "HDF5LZFCodec": "virtualizarr_fill_codecs.hdf5_lzf",
    "HDF5ShuffleCodec": "virtualizarr_fill_codecs.hdf5_shuffle",
    "TiffBitorderCodec": "virtualizarr_fill_codecs.tiff_bitorder",
    "TiffPackintsCodec": "virtualizarr_fill_codecs.tiff_packints",
    "TiffPredictorCodec": "virtualizarr_fill_codecs.tiff_predictor",
    "TruncateCodec": "virtualizarr_fill_codecs.truncate",
}

#: Every codec name a store may hold: a reader without this distribution cannot read an
#: array whose codecs name one of them. The names the classes register (``to_dict``).
CODEC_NAMES = frozenset(
    {
        "virtualizarr_fill.complex_int",
        "virtualizarr_fill.crop",
        "virtualizarr_fill.hdf5_bitshuffle",
        "virtualizarr_fill.hdf5_lzf",
        "virtualizarr_fill.hdf5_shuffle",
        "virtualizarr_fill.tiff_bitorder",
        "virtualizarr_fill.tiff_packints",
        "virtualizarr_fill.tiff_predictor",
        "virtualizarr_fill.truncate",
    }
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "CODEC_NAMES",
    "ComplexIntCodec",
    "CropCodec",
    "HDF5BitshuffleCodec",
    "HDF5LZFCodec",
    "HDF5ShuffleCodec",
    "TiffBitorderCodec",
    "TiffPackintsCodec",
    "TiffPredictorCodec",
    "TruncateCodec",
]
