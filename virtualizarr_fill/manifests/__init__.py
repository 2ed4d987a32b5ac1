"""VirtualiZarr's manifest types, extended for any chunk grid and padded edges.

The parsers return :class:`FileManifestStore` (a ``ManifestStore``) whose arrays are
:class:`FillManifestArray` (a ``ManifestArray``). Everything that differs from
VirtualiZarr's own behaviour lives on these two subclasses, so arrays built by other
parsers behave exactly as VirtualiZarr alone makes them behave.
"""

from virtualizarr_fill.manifests.array import FillManifestArray
from virtualizarr_fill.manifests.store import FileManifestStore

__all__ = ["FileManifestStore", "FillManifestArray"]
