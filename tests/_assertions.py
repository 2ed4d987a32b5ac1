"""Assertions shared by test modules: equality of metadata and datasets as the package's
users see them (values, attributes, encodings, manifests)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray
from zarr.core.metadata.v3 import ArrayV3Metadata

__all__ = ["assert_equals_fresh_validation", "assert_same_dataset", "json_value", "same_value"]


def json_value(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def assert_equals_fresh_validation(ours: ArrayV3Metadata, where: Any) -> None:
    """A (possibly cached and copied) metadata equals ArrayV3Metadata validated afresh
    from the same fields."""
    fresh = ArrayV3Metadata(
        shape=ours.shape,
        data_type=ours.data_type,
        chunk_grid=ours.chunk_grid,
        chunk_key_encoding=ours.chunk_key_encoding,
        fill_value=ours.fill_value,
        codecs=ours.codecs,
        attributes=ours.attributes,
        dimension_names=ours.dimension_names,
        storage_transformers=None,
    )
    assert json_value(fresh.to_dict()) == json_value(ours.to_dict()), where
    assert fresh.codecs == ours.codecs, where
    assert fresh.chunk_grid == ours.chunk_grid, where


def same_value(a: Any, b: Any) -> bool:
    """Equality of encoding and attribute values (arrays, NaN, codec objects)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=_nan_ok(a)))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    if isinstance(a, np.generic) and isinstance(b, np.generic):
        return bool(np.array_equal(a, b, equal_nan=_nan_ok(a))) and a.dtype == b.dtype
    return bool(type(a) is type(b) and a == b)


def _nan_ok(a: Any) -> bool:
    return np.asarray(a).dtype.kind in "fc"


def assert_same_dataset(ours: xr.Dataset, theirs: xr.Dataset) -> None:
    assert list(ours.variables) == list(theirs.variables)
    assert set(ours.coords) == set(theirs.coords)
    assert set(ours.xindexes) == set(theirs.xindexes)
    assert same_value(ours.attrs, theirs.attrs), (ours.attrs, theirs.attrs)
    for name, var in ours.variables.items():
        other = theirs.variables[name]
        assert var.dims == other.dims, name
        assert type(var) is type(other), name
        assert same_value(var.attrs, other.attrs), (name, var.attrs, other.attrs)
        assert same_value(var.encoding, other.encoding), (name, var.encoding, other.encoding)
        if isinstance(var.data, ManifestArray):
            assert isinstance(other.data, ManifestArray), name
            assert type(var.data) is type(other.data), name
            assert var.data.metadata.to_dict() == other.data.metadata.to_dict(), name
            assert var.data.manifest == other.data.manifest, name
        else:
            assert var.dtype == other.dtype, name
            np.testing.assert_array_equal(var.values, other.values, err_msg=name)
