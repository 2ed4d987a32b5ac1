"""TIFF/GeoTIFF support: :class:`TIFFParser` turns TIFF headers into virtual Zarr arrays."""

from __future__ import annotations

from virtualizarr_fill.tiff.codecs_map import (
    pin_imagecodecs_implementations,
    register_tiff_codecs,
)
from virtualizarr_fill.tiff.parser import TIFFParser

# Processes that import the parser also read what it writes: make this package's codecs
# and imagecodecs-zarr's classes resolvable even where entry points are missing or
# another package claims the same codec names.
register_tiff_codecs()
pin_imagecodecs_implementations()

__all__ = ["TIFFParser"]
