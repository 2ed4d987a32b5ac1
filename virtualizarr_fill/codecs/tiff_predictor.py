"""Re-export of :mod:`virtualizarr_fill_codecs.tiff_predictor`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.tiff_predictor import (
    TIFF_PREDICTOR_CODEC_NAME,
    TiffPredictorCodec,
    apply_predictor,
    undo_predictor,
)

__all__ = [
    "TIFF_PREDICTOR_CODEC_NAME",
    "TiffPredictorCodec",
    "apply_predictor",
    "undo_predictor",
]
