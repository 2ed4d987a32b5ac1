"""Codec chains of Zarr v3 arrays, edited without touching the stored bytes.

* :mod:`.edge_handling`: whether a padded chunk needs the truncate or the crop codec,
  and that codec's one correct place in a chain (insert, remove, check, read back);
* :mod:`.axes`: a chain renumbered for an array that gains or loses an axis of length
  one (stacking, integer indexing).

The package imports nothing of this project but its codecs and errors: parsers, merges,
array operations and writers all build on it.
"""

from __future__ import annotations

from virtualizarr_fill.codec_chains.axes import codecs_with_new_axis, codecs_without_axis
from virtualizarr_fill.codec_chains.edge_handling import (
    CodecLike,
    EdgeHandling,
    check_edge_codec_placement,
    crop_stored_shape,
    decide_edge_handling,
    decide_grid_edge_handling,
    edge_handling_of,
    insert_edge_codec,
    storage_order_shape,
    without_edge_codecs,
)

__all__ = [
    "CodecLike",
    "EdgeHandling",
    "check_edge_codec_placement",
    "codecs_with_new_axis",
    "codecs_without_axis",
    "crop_stored_shape",
    "decide_edge_handling",
    "decide_grid_edge_handling",
    "edge_handling_of",
    "insert_edge_codec",
    "storage_order_shape",
    "without_edge_codecs",
]
