"""Re-export of :mod:`virtualizarr_fill_codecs.crop`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.crop import (
    CROP_CODEC_NAME,
    CropCodec,
)

__all__ = [
    "CROP_CODEC_NAME",
    "CropCodec",
]
