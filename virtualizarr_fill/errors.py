"""The project's errors and warnings: every public one is defined or re-exported here.

Every error raised for bad or unsupported input is a :class:`VirtualizarrFillError`, and
also a builtin exception of the matching kind, so callers that already catch
``ValueError``, ``NotImplementedError`` or ``OSError`` keep working.

Every warning the package issues is a :class:`VirtualizarrFillWarning` (a
``UserWarning``), so one filter selects them all, e.g.
``warnings.simplefilter("error", VirtualizarrFillWarning)`` to refuse any file that
needs one. Deprecations are :class:`VirtualizarrFillDeprecationWarning`, which is also a
``DeprecationWarning`` (Python's default filters treat it as one).

This module imports nothing of the package: every other module may import it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

# The codecs raise errors of this hierarchy without importing virtualizarr-fill, so the
# base class and the decoding error live in the codec distribution.
from virtualizarr_fill_codecs.errors import ChunkSizeMismatchError as ChunkSizeMismatchError
from virtualizarr_fill_codecs.errors import VirtualizarrFillError as VirtualizarrFillError

# ----------------------------------------------------------------------------- errors


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


class FillConflictError(IncompatibleArraysError):
    """Arrays to concatenate whose fill information differs, refused by default.

    ``problem`` names the variable, the files and their values, without advice: the
    way to choose a rule differs between
    :func:`~virtualizarr_fill.fill.combine.combine_fill_values` (``on_conflict``), the
    functions opening many files (``on_fill_conflict``), ``xr.concat``
    (:func:`virtualizarr_fill.fill_conflicts`) and the command line
    (``--on-fill-conflict``), and each caller words its own.
    """

    def __init__(self, problem: str, advice: str) -> None:
        super().__init__(f"{problem}. {advice}")
        self.problem = problem


class EncodingConflictError(IncompatibleArraysError):
    """Files combined into one variable store its numbers with different CF encodings
    (``scale_factor``, ``add_offset``, ``units``, data type, ...)."""


class StoreReadError(VirtualizarrFillError, OSError):
    """Reading from the object store failed (after the store's own retries), or timed out."""


def _user_path(url: str) -> str:
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme == "file" else url


class SourceFileChangedError(StoreReadError):
    """A file an Icechunk repository references was modified after the repository
    recorded it, so Icechunk refuses to read its chunks.

    ``url`` is the file's URL as the references name it; ``repository`` where the
    repository is, when known.
    """

    def __init__(self, url: str, repository: str | None = None) -> None:
        self.url = url
        self.repository = repository
        where = f"the Icechunk repository {repository}" if repository else "the Icechunk repository"
        super().__init__(
            f"{_user_path(url)}: modified after {where} referencing it was written (a "
            "copy over the file or a touch counts too), so Icechunk refuses to read its "
            "chunks; rebuild the repository from the files as they are now "
            "(virtualizarr-fill build, or virtualizarr_fill.to_icechunk)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # dask workers send errors back pickled: keep the arguments, not the message.
        return (type(self), (self.url, self.repository))


class FillValueError(VirtualizarrFillError, ValueError):
    """A fill value cannot be represented in the array's data type, or fills conflict."""


class UnregisteredURLError(VirtualizarrFillError, ValueError):
    """No store in the object store registry resolves the URL."""


class TimeCoordinateError(IncompatibleArraysError):
    """A scene's time is missing or unreadable, or two scenes have the same time (an
    :class:`IncompatibleArraysError`, which the same-time refusal of a series raised in
    earlier releases)."""


class StacItemError(VirtualizarrFillError, ValueError):
    """A STAC item that cannot be used: no such asset, no datetime, a missing or
    unreadable file, a footprint or projection that disagrees with the file."""


class RepositoryNotFoundError(VirtualizarrFillError, FileNotFoundError):
    """No Icechunk repository at the location given."""


class MultiscaleGroupError(VirtualizarrFillError, ValueError):
    """The group asked for as a Dataset is a multiscale group (its levels are groups)."""


class ZarrFormat2Error(UnsupportedFeatureError):
    """Zarr format 2 references cannot describe an array of the dataset.

    ``problem`` says which and why, without advice (callers word what to do instead).
    """

    def __init__(self, problem: str, advice: str) -> None:
        super().__init__(f"{problem}; {advice}")
        self.problem = problem


class UpstreamFeatureError(VirtualizarrFillError, ImportError):
    """The installed zarr, VirtualiZarr, xarray, Icechunk or h5py lacks an internal
    virtualizarr-fill relies on (named with the package's version in the message)."""


# ----------------------------------------------------------------------------- warnings


class VirtualizarrFillWarning(UserWarning):
    """Base class of every warning virtualizarr-fill issues."""


class VirtualizarrFillDeprecationWarning(VirtualizarrFillWarning, DeprecationWarning):
    """A name or option of virtualizarr-fill is deprecated; the message names its
    replacement."""


class FillValueWarning(VirtualizarrFillWarning):
    """Fill information is inconsistent or partly unusable; the message names the file."""


class SkippedDatasetWarning(VirtualizarrFillWarning):
    """A dataset was left out of the virtual store; ``kind`` and ``reason`` say why."""

    def __init__(
        self, message: str, *, url: str = "", dataset: str = "", kind: str = "", reason: str = ""
    ) -> None:
        super().__init__(message)
        self.url = url
        self.dataset = dataset
        self.kind = kind
        self.reason = reason


class SkippedLinkWarning(VirtualizarrFillWarning):
    """A link (dangling, cyclic, unreadable, or refused by the path policy) was not
    followed, or a group was left out."""


class AttributeWarning(VirtualizarrFillWarning):
    """An HDF5 attribute was converted to a different form, or skipped."""


class IFDChainWarning(VirtualizarrFillWarning):
    """An IFD chain loops back, overlaps itself or exceeds the IFD budget: the IFDs
    before that point are read, the rest left out. ``url`` names the file."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class NonFiniteAttributeWarning(VirtualizarrFillWarning):
    """An attribute holding NaN or ±infinity was left out of an Icechunk store."""


class OversizedChunkWarning(VirtualizarrFillWarning):
    """A variable's chunks are longer than the variable along an axis (usually an
    unlimited dimension): it cannot be concatenated along that axis virtually."""


class MultiscaleLevelsWarning(VirtualizarrFillWarning):
    """Combining multiscale groups left levels or masks out (the message says which)."""


class UntestedVersionWarning(VirtualizarrFillWarning, RuntimeWarning):
    """An installed zarr or VirtualiZarr is newer than the releases virtualizarr-fill was
    tested with."""


__all__ = [
    "AttributeWarning",
    "ChunkDecodeError",
    "ChunkSizeMismatchError",
    "CorruptFileError",
    "EncodingConflictError",
    "FillConflictError",
    "FillValueError",
    "FillValueWarning",
    "IFDChainWarning",
    "IncompatibleArraysError",
    "MultiscaleGroupError",
    "MultiscaleLevelsWarning",
    "NonFiniteAttributeWarning",
    "NotATiffError",
    "NotHDF5Error",
    "OversizedChunkWarning",
    "RepositoryNotFoundError",
    "SkippedDatasetWarning",
    "SkippedLinkWarning",
    "SourceFileChangedError",
    "StacItemError",
    "StoreReadError",
    "TimeCoordinateError",
    "UnknownFormatError",
    "UnregisteredURLError",
    "UnsupportedFeatureError",
    "UntestedVersionWarning",
    "UpstreamFeatureError",
    "VirtualizarrFillDeprecationWarning",
    "VirtualizarrFillError",
    "VirtualizarrFillWarning",
    "ZarrFormat2Error",
]
