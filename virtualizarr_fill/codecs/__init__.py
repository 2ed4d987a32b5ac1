"""Zarr v3 codecs for chunks stored larger than their logical shape, and the other codecs
stores of virtualizarr-fill may name.

The implementations live in the ``virtualizarr-fill-codecs`` distribution
(:mod:`virtualizarr_fill_codecs`), which registers them with zarr so that a reader needs
that small package and not virtualizarr-fill; the modules here re-export them.
"""

from virtualizarr_fill_codecs.crop import CropCodec
from virtualizarr_fill_codecs.truncate import TruncateCodec

__all__ = ["CropCodec", "TruncateCodec"]
