"""Fill values: TIFF and HDF5 fill information mapped onto Zarr v3 for xarray.

Zarr v3 separates the array ``fill_value`` (what chunks that do not exist read as) from
the CF ``_FillValue`` attribute (the missing-data sentinel xarray masks). This package
decides both for each array (:func:`consolidate_tiff_fill`, :func:`consolidate_hdf5_fill`),
encodes the attribute the way xarray decodes it (:func:`encode_fill_value`), combines
arrays that are concatenated (:func:`combine_fill_values`) and checks stored data for
values readers would misread (:func:`check_fill_collisions`). docs/fill-values.md
describes the policies.
"""

from __future__ import annotations

from virtualizarr_fill.fill.cast import (
    FillScalar,
    NotRepresentableError,
    cast_to_dtype,
    default_fill_value,
    fill_values_equal,
)
from virtualizarr_fill.fill.coder import (
    JSON,
    decode_fill_value,
    encode_fill_value,
    sentinel_from_attribute,
)
from virtualizarr_fill.fill.collisions import (
    CollisionReport,
    VariableCollisions,
    check_fill_collisions,
)
from virtualizarr_fill.fill.combine import (
    CombinedFill,
    OnConflict,
    combine_fill_decisions,
    combine_fill_values,
)
from virtualizarr_fill.fill.decision import (
    FILL_VALUE_ATTR,
    MISSING_VALUE_ATTR,
    FillDecision,
    FillValueWarning,
)
from virtualizarr_fill.fill.hdf5 import consolidate_hdf5_fill, header_fill_from_h5py
from virtualizarr_fill.fill.tiff import (
    BAND_NODATA_ITEM,
    GDAL_NODATA_ATTR,
    NETCDF_VARNAME_ITEM,
    consolidate_tiff_fill,
    parse_gdal_number,
)

__all__ = [
    "BAND_NODATA_ITEM",
    "FILL_VALUE_ATTR",
    "GDAL_NODATA_ATTR",
    "JSON",
    "MISSING_VALUE_ATTR",
    "NETCDF_VARNAME_ITEM",
    "CollisionReport",
    "CombinedFill",
    "FillDecision",
    "FillScalar",
    "FillValueWarning",
    "NotRepresentableError",
    "OnConflict",
    "VariableCollisions",
    "cast_to_dtype",
    "check_fill_collisions",
    "combine_fill_decisions",
    "combine_fill_values",
    "consolidate_hdf5_fill",
    "consolidate_tiff_fill",
    "decode_fill_value",
    "default_fill_value",
    "encode_fill_value",
    "fill_values_equal",
    "header_fill_from_h5py",
    "parse_gdal_number",
    "sentinel_from_attribute",
]
