"""Re-export of :mod:`virtualizarr_fill_codecs.hdf5_lzf`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.hdf5_lzf import (
    HDF5_LZF_CODEC_NAME,
    HDF5LZFCodec,
)

__all__ = [
    "HDF5LZFCodec",
    "HDF5_LZF_CODEC_NAME",
]
