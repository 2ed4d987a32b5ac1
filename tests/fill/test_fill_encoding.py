"""When two files' CF attributes count as the same encoding
(:func:`virtualizarr_fill.fill.encoding.encoding_difference`), checked against what
xarray decodes the same stored numbers to with each file's attributes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from virtualizarr_fill.fill.encoding import encoding_difference

I2 = np.dtype("i2")


def decoded(attrs: dict[str, Any], dtype: np.dtype[Any] = I2) -> np.ndarray:
    stored = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, dtype=dtype)
    variable = xr.Variable(("n",), stored, attrs)
    return np.asarray(xr.conventions.decode_cf_variable("v", variable).values)


@pytest.mark.parametrize(
    ("first", "other", "attribute"),
    [
        ({"flag_values": [0, 1, 2]}, {"flag_values": [0, 1, 3]}, "flag_values"),
        ({"flag_masks": [1, 2]}, {"flag_masks": [1, 4]}, "flag_masks"),
        ({"valid_min": 0}, {"valid_min": 10}, "valid_min"),
        ({"valid_max": 100}, {}, "valid_max"),
        ({"units": "K"}, {"units": "kelvin"}, "units"),
        (
            {"units": "days since 2000-01-01", "calendar": "noleap"},
            {"units": "days since 2000-01-01", "calendar": "standard"},
            "calendar",
        ),
    ],
)
def test_attributes_that_differ_are_named(
    first: dict[str, Any], other: dict[str, Any], attribute: str
) -> None:
    difference = encoding_difference(I2, first, other)
    assert difference is not None and difference[0] == attribute
    assert difference[1] == first.get(attribute, "(none)")
    assert difference[2] == other.get(attribute, "(none)")


def test_equal_numbers_of_other_types_are_the_same() -> None:
    assert encoding_difference(I2, {"valid_range": [0, 100]}, {"valid_range": [0.0, 100.0]}) is None
    assert encoding_difference(I2, {"long_name": "a"}, {"long_name": "b"}) is None  # descriptive


def test_packing_is_compared_by_what_xarray_decodes() -> None:
    half32, half64 = {"scale_factor": np.float32(0.5)}, {"scale_factor": 0.5}
    # equal numbers (a store keeps either as the JSON number 0.5), which decode to the
    # same values
    assert np.array_equal(decoded(half32), decoded(half64))
    assert encoding_difference(I2, half32, half64) is None
    hundredth32 = {"scale_factor": float(np.float32(0.01))}
    assert not np.array_equal(decoded(hundredth32), decoded({"scale_factor": 0.01}))
    difference = encoding_difference(I2, hundredth32, {"scale_factor": 0.01})
    assert difference is not None and difference[0] == "scale_factor"
    # an add_offset of 0 written out, or left out: the same packing exactly when
    # xarray decodes the same numbers of the same data type with both
    with_offset = {"scale_factor": np.float32(0.5), "add_offset": np.float32(0.0)}
    without = {"scale_factor": np.float32(0.5)}
    same = decoded(with_offset).dtype == decoded(without).dtype
    assert (encoding_difference(I2, with_offset, without) is None) == same


def test_time_units_are_left_to_the_time_check_on_request() -> None:
    days, hours = {"units": "days since 2000-01-01"}, {"units": "hours since 1990-01-01"}
    assert encoding_difference(I2, days, hours, time_units=False) is None
    assert encoding_difference(I2, days, hours) == ("units", days["units"], hours["units"])
    assert encoding_difference(I2, days, {"units": "K"}, time_units=False) is not None
