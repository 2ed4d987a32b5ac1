"""Zarr v3 codecs for chunks stored larger than their logical shape."""

from virtualizarr_fill.codecs.crop import CropCodec
from virtualizarr_fill.codecs.truncate import TruncateCodec

__all__ = ["CropCodec", "TruncateCodec"]
