"""virtualizarr-fill: VirtualiZarr parsers for TIFF/GeoTIFF and HDF5/NetCDF-4.

Importing the package changes nothing in zarr, VirtualiZarr, xarray or h5py: it loads
its public names on first use. The parsers return
:class:`~virtualizarr_fill.manifests.FileManifestStore` objects whose arrays are
:class:`~virtualizarr_fill.manifests.FillManifestArray` objects; concatenating them,
writing them (:func:`to_icechunk`, :func:`to_kerchunk`) and reading them are features of
those classes and functions, not of patched upstream code. See docs/ecosystem.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.errors import (
    AttributeWarning,
    ChunkDecodeError,
    ChunkSizeMismatchError,
    CorruptFileError,
    EncodingConflictError,
    FillConflictError,
    FillValueError,
    FillValueWarning,
    IFDChainWarning,
    IncompatibleArraysError,
    MultiscaleGroupError,
    MultiscaleLevelsWarning,
    NonFiniteAttributeWarning,
    NotATiffError,
    NotHDF5Error,
    OversizedChunkWarning,
    RepositoryNotFoundError,
    SkippedDatasetWarning,
    SkippedLinkWarning,
    SourceFileChangedError,
    StacItemError,
    StoreReadError,
    TimeCoordinateError,
    UnknownFormatError,
    UnregisteredURLError,
    UnsupportedFeatureError,
    UntestedVersionWarning,
    UpstreamFeatureError,
    VirtualizarrFillDeprecationWarning,
    VirtualizarrFillError,
    VirtualizarrFillWarning,
    ZarrFormat2Error,
)

if TYPE_CHECKING:
    from virtualizarr_fill.assemble import (
        dropped_attributes,
        open_virtual_mosaic,
        open_virtual_series,
    )
    from virtualizarr_fill.assemble.encodings import check_encoding
    from virtualizarr_fill.assemble.time_stack import stack_by_time
    from virtualizarr_fill.codecs.crop import CropCodec
    from virtualizarr_fill.codecs.truncate import TruncateCodec
    from virtualizarr_fill.fill.conflicts import fill_conflicts
    from virtualizarr_fill.formats import open_virtual_datasets
    from virtualizarr_fill.hdf5 import HDF5Parser
    from virtualizarr_fill.manifests import FileManifestStore, FillManifestArray
    from virtualizarr_fill.reads import PIPELINE_PATH, fast_reads, use_manifest_pipeline
    from virtualizarr_fill.stac import open_virtual_stac
    from virtualizarr_fill.tiff import TIFFParser
    from virtualizarr_fill.writers import to_icechunk, to_kerchunk
    from virtualizarr_fill.writers.kerchunk import open_kerchunk
    from virtualizarr_fill.writers.repository import (
        create_repository,
        open_icechunk,
        open_icechunk_datatree,
    )
    from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

# Public name -> the module that defines it, imported on first access (PEP 562): the
# codec entry points zarr loads import this package, and must stay light.
_LAZY = {
    "CropCodec": "virtualizarr_fill.codecs.crop",
    "FileManifestStore": "virtualizarr_fill.manifests",
    "FillManifestArray": "virtualizarr_fill.manifests",
    "HDF5Parser": "virtualizarr_fill.hdf5",
    "PIPELINE_PATH": "virtualizarr_fill.reads",
    "TIFFParser": "virtualizarr_fill.tiff",
    "TruncateCodec": "virtualizarr_fill.codecs.truncate",
    "check_encoding": "virtualizarr_fill.assemble.encodings",
    "create_repository": "virtualizarr_fill.writers.repository",
    "dropped_attributes": "virtualizarr_fill.assemble",
    "enable_rectilinear_chunks": "virtualizarr_fill.zarr_model.rectilinear_flag",
    "fast_reads": "virtualizarr_fill.reads",
    "fill_conflicts": "virtualizarr_fill.fill.conflicts",
    "open_icechunk": "virtualizarr_fill.writers.repository",
    "open_icechunk_datatree": "virtualizarr_fill.writers.repository",
    "open_kerchunk": "virtualizarr_fill.writers.kerchunk",
    "open_virtual_datasets": "virtualizarr_fill.formats",
    "open_virtual_mosaic": "virtualizarr_fill.assemble",
    "open_virtual_series": "virtualizarr_fill.assemble",
    "open_virtual_stac": "virtualizarr_fill.stac",
    "stack_by_time": "virtualizarr_fill.assemble.time_stack",
    "to_icechunk": "virtualizarr_fill.writers",
    "to_kerchunk": "virtualizarr_fill.writers",
    "use_manifest_pipeline": "virtualizarr_fill.reads",
}


#: Names of earlier releases, still answered for one release with a deprecation warning.
_RENAMED = {"MissingUpstreamFeatureError": "UpstreamFeatureError"}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        import warnings

        warnings.warn(
            f"virtualizarr_fill.{name} is deprecated; use virtualizarr_fill.{_RENAMED[name]}",
            VirtualizarrFillDeprecationWarning,
            stacklevel=2,
        )
        return globals()[_RENAMED[name]]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "PIPELINE_PATH",
    "AttributeWarning",
    "ChunkDecodeError",
    "ChunkSizeMismatchError",
    "CorruptFileError",
    "CropCodec",
    "EncodingConflictError",
    "FileManifestStore",
    "FillConflictError",
    "FillManifestArray",
    "FillValueError",
    "FillValueWarning",
    "HDF5Parser",
    "IFDChainWarning",
    "IncompatibleArraysError",
    "UpstreamFeatureError",
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
    "TIFFParser",
    "TimeCoordinateError",
    "TruncateCodec",
    "UnknownFormatError",
    "UnregisteredURLError",
    "UnsupportedFeatureError",
    "UntestedVersionWarning",
    "VirtualizarrFillDeprecationWarning",
    "VirtualizarrFillError",
    "VirtualizarrFillWarning",
    "ZarrFormat2Error",
    "check_encoding",
    "create_repository",
    "dropped_attributes",
    "enable_rectilinear_chunks",
    "fast_reads",
    "fill_conflicts",
    "open_icechunk",
    "open_icechunk_datatree",
    "open_kerchunk",
    "open_virtual_datasets",
    "open_virtual_mosaic",
    "open_virtual_series",
    "open_virtual_stac",
    "stack_by_time",
    "to_icechunk",
    "to_kerchunk",
    "use_manifest_pipeline",
]

__version__ = "0.1.0"
