"""Re-export of :mod:`virtualizarr_fill_codecs.complex_int`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs.complex_int import (
    COMPLEX_INT_CODEC_NAME,
    ComplexIntCodec,
    complex_to_words,
    component_type_of,
    words_to_complex,
)

__all__ = [
    "COMPLEX_INT_CODEC_NAME",
    "ComplexIntCodec",
    "complex_to_words",
    "component_type_of",
    "words_to_complex",
]
