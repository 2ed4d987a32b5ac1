"""The result of consolidating a file's fill information, and the warning category."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from virtualizarr_fill.errors import FillValueWarning as FillValueWarning
from virtualizarr_fill.fill.cast import FillScalar, normalize_dtype
from virtualizarr_fill.fill.coder import decode_fill_value

__all__ = ["FILL_VALUE_ATTR", "MISSING_VALUE_ATTR", "FillDecision", "FillValueWarning"]

#: The CF missing-data sentinel attribute (encoded, see :mod:`~virtualizarr_fill.fill.coder`).
FILL_VALUE_ATTR = "_FillValue"
#: The older CF missing-data attribute (plain JSON numbers; xarray does not decode it).
MISSING_VALUE_ATTR = "missing_value"


@dataclass(frozen=True)
class FillDecision:
    """How one array's fill information maps onto Zarr v3.

    Attributes
    ----------
    fill_value
        The Zarr ``fill_value``: a scalar of the array's data type, returned for chunks
        that are not in the manifest.
    attributes
        The complete attribute dictionary for the Zarr array: the input attributes with
        ``_FillValue`` encoded for xarray when there is a sentinel (absent otherwise),
        ``missing_value`` as plain JSON numbers, and redundant duplicates removed.
    dtype
        The array's data type.
    notes
        Human-readable decisions with their sources, e.g.
        ``"fill_value -9999.0 from GDAL_NODATA (tag 42113); GDAL_METADATA _FillValue
        agrees"``.
    """

    fill_value: FillScalar
    attributes: dict[str, Any]
    dtype: np.dtype[Any]
    notes: tuple[str, ...] = ()

    @property
    def sentinel(self) -> FillScalar | None:
        """The decoded ``_FillValue`` sentinel, or ``None`` when the array has none."""
        if FILL_VALUE_ATTR not in self.attributes:
            return None
        return decode_fill_value(self.attributes[FILL_VALUE_ATTR], normalize_dtype(self.dtype))

    @property
    def missing_values(self) -> tuple[Any, ...]:
        """The ``missing_value`` attribute as a tuple (empty when absent)."""
        value = self.attributes.get(MISSING_VALUE_ATTR)
        if value is None:
            return ()
        return tuple(value) if isinstance(value, list | tuple) else (value,)
