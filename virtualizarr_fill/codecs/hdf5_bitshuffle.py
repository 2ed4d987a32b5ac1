"""Re-export of :mod:`virtualizarr_fill_codecs.hdf5_bitshuffle`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.hdf5_bitshuffle import (
    HDF5_BITSHUFFLE_CODEC_NAME,
    HDF5BitshuffleCodec,
    default_block_size,
)

__all__ = [
    "HDF5BitshuffleCodec",
    "HDF5_BITSHUFFLE_CODEC_NAME",
    "default_block_size",
]
