"""Exact keys of JSON-like values (:mod:`virtualizarr_fill.zarr_model.json_values`): the
keys of the metadata caches, which must tell apart values that serialize differently."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from virtualizarr_fill.zarr_model import json_values


def _key_or_none(value: Any) -> Any:
    try:
        return json_values.exact_key(value)
    except json_values.Uncacheable:
        return None


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ([0.0, 1.5], [-0.0, 1.5]),
        ([float("nan")], [struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]]),
        ([1.0, 2.0], [1, 2.0]),
        ([1.0, 2.0], (1.0, 2.0)),
        ([1.0, 2.0], [[1.0, 2.0]]),
        ([1.0], [1.0, 1.0]),
    ],
)
def test_exact_keys_of_float_lists_tell_apart_what_serializes_differently(
    first: Any, second: Any
) -> None:
    """Lists of floats (GCP tiepoints run to thousands) are keyed by their IEEE bytes:
    still apart wherever JSON or the values differ (sign of zero, NaN payload, int or
    float, list or tuple, nesting, length), equal otherwise."""
    assert _key_or_none(first) != _key_or_none(second)
    assert _key_or_none(first) is not None and _key_or_none(second) is not None
    assert json_values.exact_key(list(first)) == json_values.exact_key(first)
    assert hash(json_values.exact_key(first)) == hash(json_values.exact_key(list(first)))
