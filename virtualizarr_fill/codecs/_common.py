"""Helpers shared by the edge codecs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from zarr.core.dtype.common import HasItemSize

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec


def fixed_item_size(chunk_spec: ArraySpec) -> int | None:
    """Bytes per element of the chunk's data type, or None for variable-length types."""
    dtype = chunk_spec.dtype
    if not isinstance(dtype, HasItemSize):
        return None
    native = dtype.to_native_dtype()
    if native.kind in "OT":  # object / numpy StringDType: no fixed width in bytes
        return None
    return dtype.item_size


def expected_nbytes(chunk_spec: ArraySpec) -> int | None:
    """Byte count of a chunk of ``chunk_spec.shape`` before the array->bytes codec reshapes it."""
    item_size = fixed_item_size(chunk_spec)
    if item_size is None:
        return None
    return math.prod(chunk_spec.shape) * item_size
