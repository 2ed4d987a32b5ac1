"""virtualizarr-fill: VirtualiZarr parsers for TIFF/GeoTIFF and HDF5/NetCDF-4.

Importing this package enables zarr's ``array.rectilinear_chunks`` flag (see
:mod:`virtualizarr_fill._zarr_config`); reader-only processes can set
``ZARR_ARRAY__RECTILINEAR_CHUNKS=True`` instead.
"""

from __future__ import annotations

from virtualizarr_fill._zarr_config import enable_rectilinear_chunks

enable_rectilinear_chunks()

from virtualizarr_fill._vz_adapter import install as _install_vz_adapter  # noqa: E402
from virtualizarr_fill.codecs import CropCodec, TruncateCodec  # noqa: E402

# Rectilinear ManifestArrays, concatenation and writers (see docs/architecture.md).
_install_vz_adapter()

from virtualizarr_fill._sync_store import install as _install_sync_store  # noqa: E402

# ManifestStore reads without per-chunk coroutines under zarr's fused codec pipeline.
_install_sync_store()

from virtualizarr_fill.concat import fill_conflicts  # noqa: E402
from virtualizarr_fill.errors import (  # noqa: E402
    ChunkSizeMismatchError,
    CorruptFileError,
    FillValueError,
    IncompatibleArraysError,
    NotATiffError,
    NotHDF5Error,
    StoreReadError,
    UnknownFormatError,
    UnsupportedFeatureError,
    VirtualizarrFillError,
)
from virtualizarr_fill.hdf5 import HDF5Parser  # noqa: E402

# Importing it registers the opt-in whole-batch read pipeline with zarr.
from virtualizarr_fill.read_pipeline import PIPELINE_PATH, use_manifest_pipeline  # noqa: E402
from virtualizarr_fill.tiff import TIFFParser  # noqa: E402

__all__ = [
    "ChunkSizeMismatchError",
    "CorruptFileError",
    "CropCodec",
    "FillValueError",
    "HDF5Parser",
    "IncompatibleArraysError",
    "NotATiffError",
    "NotHDF5Error",
    "PIPELINE_PATH",
    "StoreReadError",
    "TIFFParser",
    "UnknownFormatError",
    "TruncateCodec",
    "UnsupportedFeatureError",
    "VirtualizarrFillError",
    "fill_conflicts",
    "use_manifest_pipeline",
]

__version__ = "0.1.0"
