"""The project's error hierarchy.

Every error the parsers raise for bad input is a :class:`VirtualizarrFillError`, and
also a builtin exception of the matching kind, so callers that already catch
``ValueError`` or ``NotImplementedError`` keep working.
"""

from __future__ import annotations

# The codecs raise errors of this hierarchy without importing virtualizarr-fill, so the
# base class and the decoding error live in the codec distribution.
from virtualizarr_fill_codecs.errors import ChunkSizeMismatchError as ChunkSizeMismatchError
from virtualizarr_fill_codecs.errors import VirtualizarrFillError as VirtualizarrFillError


class NotATiffError(VirtualizarrFillError, ValueError):
    """The object is not a TIFF file."""


class NotHDF5Error(VirtualizarrFillError, ValueError):
    """The object is not an HDF5 file (netCDF-3 files land here too)."""


class UnknownFormatError(NotATiffError, NotHDF5Error):
    """The object is neither a TIFF nor an HDF5/netCDF-4 file (or it is empty)."""


class UnsupportedFeatureError(VirtualizarrFillError, NotImplementedError):
    """The file is valid but uses a feature that cannot be expressed as a virtual Zarr array."""


class CorruptFileError(VirtualizarrFillError, ValueError):
    """The file's header contradicts itself or its size (offsets past the end, bad counts...)."""


class ChunkDecodeError(VirtualizarrFillError, ValueError):
    """A chunk's stored bytes cannot be decoded with its array's codecs (a corrupt or
    changed file), named by its array, grid index, file and byte range."""


class IncompatibleArraysError(VirtualizarrFillError, ValueError):
    """Arrays cannot be concatenated or stacked (different codecs, edges, dtypes, fills...)."""


class StoreReadError(VirtualizarrFillError, OSError):
    """Reading from the object store failed (after the store's own retries), or timed out."""


class FillValueError(VirtualizarrFillError, ValueError):
    """A fill value cannot be represented in the array's data type, or fills conflict."""


class UnregisteredURLError(VirtualizarrFillError, ValueError):
    """No store in the object store registry resolves the URL."""


class UpstreamFeatureError(VirtualizarrFillError, ImportError):
    """The installed zarr, VirtualiZarr, xarray, Icechunk or h5py lacks an internal
    virtualizarr-fill relies on (named with the package's version in the message)."""
