"""TIFF/GeoTIFF support: :class:`TIFFParser` turns TIFF headers into virtual Zarr arrays."""

from __future__ import annotations

from virtualizarr_fill.tiff.parser import TIFFParser

__all__ = ["TIFFParser"]
