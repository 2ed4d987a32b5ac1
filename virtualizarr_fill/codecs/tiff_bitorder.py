"""Re-export of :mod:`virtualizarr_fill_codecs.tiff_bitorder`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.tiff_bitorder import (
    TIFF_BITORDER_CODEC_NAME,
    TiffBitorderCodec,
    reverse_bits,
)

__all__ = [
    "TIFF_BITORDER_CODEC_NAME",
    "TiffBitorderCodec",
    "reverse_bits",
]
