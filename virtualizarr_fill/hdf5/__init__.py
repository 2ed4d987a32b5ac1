"""HDF5 / netCDF-4 files as virtual Zarr v3 arrays (see :class:`HDF5Parser`)."""

from virtualizarr_fill.hdf5.attrs import AttributeWarning
from virtualizarr_fill.hdf5.parser import HDF5Parser, SkippedDatasetWarning, SkippedLinkWarning

__all__ = ["AttributeWarning", "HDF5Parser", "SkippedDatasetWarning", "SkippedLinkWarning"]
