"""Re-export of :mod:`virtualizarr_fill_codecs._common`.

The implementation lives in the ``virtualizarr-fill-codecs`` distribution; this module
keeps imports from ``virtualizarr_fill.codecs`` working.
"""

from virtualizarr_fill_codecs._common import (
    EdgeCodec,
    expected_nbytes,
    fixed_item_size,
)

__all__ = [
    "EdgeCodec",
    "expected_nbytes",
    "fixed_item_size",
]
