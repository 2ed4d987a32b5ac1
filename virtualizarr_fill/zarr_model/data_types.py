"""Zarr's data-type objects of NumPy dtypes, resolved once per dtype.

Both parsers name every array's data type through :func:`zarr_data_type`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from zarr.dtype import parse_data_type


@functools.lru_cache(maxsize=512)
def _cached_data_type(dtype: np.dtype) -> Any:
    return parse_data_type(dtype, zarr_format=3)


def zarr_data_type(dtype: np.dtype) -> Any:
    """Zarr's data-type object for a NumPy dtype. Resolving one walks zarr's whole
    dtype registry, so it is done once per dtype (afresh for the rare unhashable one,
    such as a dtype whose metadata holds unhashable values)."""
    try:
        return _cached_data_type(dtype)
    except TypeError:
        return parse_data_type(dtype, zarr_format=3)


__all__ = ["zarr_data_type"]
