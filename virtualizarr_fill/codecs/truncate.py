"""Re-export of :mod:`virtualizarr_fill_codecs.truncate`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.truncate import (
    TRUNCATE_CODEC_NAME,
    TruncateCodec,
    truncated_length,
    truncator,
)

__all__ = [
    "TRUNCATE_CODEC_NAME",
    "TruncateCodec",
    "truncated_length",
    "truncator",
]
