"""Copies of validated Zarr v3 array metadata that change only what validation never
looks at (attributes, dimension names), without validating again.

``ArrayV3Metadata`` is a frozen dataclass whose construction validates the data type,
fill value, chunk grid and every codec; a copy made field by field (through
:func:`virtualizarr_fill.upstream.replaced`) is the same object at a fraction of the
cost. :data:`COPY_BY_FIELDS` tells callers that go further (setting shape or grid on a
copy, as the TIFF parser's inlined arrays do) whether such a copy is safe with the
installed zarr.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from zarr.codecs import BytesCodec
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata

from virtualizarr_fill import upstream
from virtualizarr_fill.zarr_model.data_types import zarr_data_type


def _state_is_its_fields() -> bool:
    """Is an ArrayV3Metadata's whole state its dataclass fields (no cached or derived
    attributes that a field-by-field copy would carry over stale)? True for zarr
    3.4-3.5; checked at import so that a zarr that changes it gets validated copies."""
    probe = ArrayV3Metadata(
        shape=(1,),
        data_type=zarr_data_type(np.dtype("uint8")),
        chunk_grid=RegularChunkGridMetadata(chunk_shape=(1,)),
        chunk_key_encoding={"name": "default", "configuration": {"separator": "/"}},  # type: ignore[arg-type]
        fill_value=0,
        codecs=[BytesCodec()],
        attributes={},
        dimension_names=None,
        storage_transformers=None,
    )
    probe.ndim, probe.chunks  # noqa: B018  (properties that could cache state)
    fields = {field.name for field in dataclasses.fields(ArrayV3Metadata)}
    return set(vars(probe)) <= fields


# Adapts zarr internals: retire if ArrayV3Metadata gains a cheap validated copy.
COPY_BY_FIELDS = _state_is_its_fields()


def copy_with_attributes(template: ArrayV3Metadata, attributes: dict[str, Any]) -> ArrayV3Metadata:
    """A copy of ``template`` with its own ``attributes`` (as ``copy.copy`` and
    ``object.__setattr__`` would make it, for a frozen dataclass, in a third of the time)."""
    return upstream.replaced(template, attributes=dict(attributes))


def copy_without_dimension_names(
    template: ArrayV3Metadata, attributes: dict[str, Any]
) -> ArrayV3Metadata:
    """``template`` with ``attributes`` and no dimension names: what VirtualiZarr's
    ``copy_and_replace_metadata`` makes of it through a JSON round trip, without one."""
    return upstream.replaced(template, attributes=dict(attributes), dimension_names=None)


__all__ = ["COPY_BY_FIELDS", "copy_with_attributes", "copy_without_dimension_names"]
