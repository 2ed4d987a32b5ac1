"""The errors the codecs raise while decoding.

:class:`VirtualizarrFillError` is the base of every error of virtualizarr-fill; it lives
here so that the codecs raise errors of the same hierarchy without importing
virtualizarr-fill (``virtualizarr_fill.errors`` re-exports both classes).
"""

from __future__ import annotations


class VirtualizarrFillError(Exception):
    """Base class of every error raised by virtualizarr-fill for bad or unsupported input."""


class ChunkSizeMismatchError(VirtualizarrFillError, ValueError):
    """A stored chunk is neither its logical nor its physical size (raised while decoding)."""


__all__ = ["ChunkSizeMismatchError", "VirtualizarrFillError"]
