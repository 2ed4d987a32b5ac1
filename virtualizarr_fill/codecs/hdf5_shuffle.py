"""Re-export of :mod:`virtualizarr_fill_codecs.hdf5_shuffle`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.hdf5_shuffle import (
    HDF5_SHUFFLE_CODEC_NAME,
    HDF5ShuffleCodec,
    shuffle,
    unshuffle,
)

__all__ = [
    "HDF5ShuffleCodec",
    "HDF5_SHUFFLE_CODEC_NAME",
    "shuffle",
    "unshuffle",
]
