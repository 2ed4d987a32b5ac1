"""Re-export of :mod:`virtualizarr_fill_codecs.tiff_packints`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.tiff_packints import (
    TIFF_PACKINTS_CODEC_NAME,
    TiffPackintsCodec,
    pack_rows,
    row_bytes,
    unpack_rows,
)

__all__ = [
    "TIFF_PACKINTS_CODEC_NAME",
    "TiffPackintsCodec",
    "pack_rows",
    "row_bytes",
    "unpack_rows",
]
