"""Combining the fill information of concatenated arrays (seed 003's merge rule)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.fill import (
    FillValueWarning,
    combine_fill_decisions,
    combine_fill_values,
    consolidate_hdf5_fill,
    consolidate_tiff_fill,
)

F4 = np.dtype("float32")


def tiff(nodata: str, dtype: Any = F4, **items: str) -> Any:
    return consolidate_tiff_fill({"gdal_no_data": nodata, **items}, dtype, source="x.tif")


def quiet_combine(*args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return combine_fill_decisions(*args, **kwargs)


def test_agreeing_inputs_keep_their_fill() -> None:
    decisions = [tiff("-9999", missing_value="-9999") for _ in range(3)]
    combined = quiet_combine(decisions, ["a.tif", "b.tif", "c.tif"])
    assert combined.fill_value == np.float32(-9999)
    assert combined.attributes["_FillValue"] == "AAAAAICHw8A="
    assert combined.attributes["missing_value"] == -9999.0
    assert combined.unmasked_sentinels == ()
    assert "agree" in combined.notes[0]


def test_nan_equals_nan() -> None:
    combined = quiet_combine([tiff("nan"), tiff("-1.#QNAN")], ["a.tif", "b.tif"])
    assert np.isnan(combined.fill_value)
    assert combined.attributes["_FillValue"] == "AAAAAAAA+H8="


def test_compares_decoded_values_not_encodings() -> None:
    # encoded (virtual variable) and decoded (xarray-opened) forms of the same sentinel
    combined = combine_fill_values(
        [np.float32(-9999), -9999.0],
        [{"_FillValue": "AAAAAICHw8A="}, {"_FillValue": np.float32(-9999.0)}],
        ["a.tif", "b.nc"],
        F4,
    )
    assert combined.attributes["_FillValue"] == "AAAAAICHw8A="


def test_missing_value_lists_compare_as_sets() -> None:
    combined = combine_fill_values(
        [0, 0],
        [{"missing_value": [1, 2]}, {"missing_value": [2, 1, 2]}],
        ["a.nc", "b.nc"],
        np.dtype("int16"),
    )
    assert combined.attributes["missing_value"] == [1, 2]


@pytest.mark.parametrize(
    ("fills", "attrs", "field"),
    [
        ([-9999, -9999], [{"_FillValue": -9999.0}, {"_FillValue": -3.4e38}], "_FillValue"),
        ([0, 0], [{"_FillValue": -9999.0}, {}], "_FillValue"),
        ([0, 0], [{"missing_value": 1.0}, {"missing_value": 2.0}], "missing_value"),
        ([0, 1], [{}, {}], "Zarr fill_value"),
    ],
)
def test_differing_inputs_refused_by_default(
    fills: list[Any], attrs: list[dict[str, Any]], field: str
) -> None:
    with pytest.raises(IncompatibleArraysError) as info:
        combine_fill_values(fills, attrs, ["s3://b/2020.nc", "s3://b/2021.nc"], F4, name="swe")
    message = str(info.value)
    assert field in message and "'swe'" in message
    assert "s3://b/2020.nc" in message and "s3://b/2021.nc" in message
    assert "on_conflict" in message


def test_error_message_names_values_and_abbreviates_many_files() -> None:
    decisions = [tiff("-9999")] * 5 + [tiff("-3.4e38")]
    sources = [f"f{i}.tif" for i in range(6)]
    with pytest.raises(IncompatibleArraysError) as info:
        combine_fill_decisions(decisions, sources)
    message = str(info.value)
    assert "-9999.0 in f0.tif, f1.tif, f2.tif and 2 more" in message
    assert "f5.tif" in message and "e+38" in message


def test_use_first_is_explicit_and_reports_the_unmasked_sentinel() -> None:
    decisions = [tiff("-9999"), tiff("-3.4e38")]
    with pytest.warns(FillValueWarning, match=r"use_first.*a\.tif.*b\.tif"):
        combined = combine_fill_decisions(decisions, ["a.tif", "b.tif"], on_conflict="use_first")
    assert combined.fill_value == np.float32(-9999)
    assert combined.attributes["_FillValue"] == "AAAAAICHw8A="
    assert combined.unmasked_sentinels == (np.float32(-3.4e38),)


def test_drop_follows_iris_merge_rule() -> None:
    # seed 003: "If the components have differing fill-values, a default fill-value will
    # be used instead."
    decisions = [tiff("-9999", missing_value="-9999"), tiff("-3.4e38", missing_value="-3.4e38")]
    with pytest.warns(FillValueWarning, match="drop"):
        combined = combine_fill_decisions(decisions, ["a.tif", "b.tif"], on_conflict="drop")
    assert combined.fill_value == np.float32(0)
    assert "_FillValue" not in combined.attributes
    assert "missing_value" not in combined.attributes
    assert combined.attributes["gdal_no_data"] == "-9999"  # other attributes: the first's
    assert set(map(float, combined.unmasked_sentinels)) == {-9999.0, float(np.float32(-3.4e38))}


def test_fields_are_resolved_independently() -> None:
    # HDF5 files sharing the sentinel but not the header fill
    a = consolidate_hdf5_fill(np.float32(0), {"_FillValue": np.float32(-9999)}, F4, source="a")
    b = consolidate_hdf5_fill(np.float32(-9999), {"_FillValue": np.float32(-9999)}, F4, source="b")
    with pytest.warns(FillValueWarning, match="Zarr fill_value"):
        combined = combine_fill_decisions([a, b], ["a.h5", "b.h5"], on_conflict="drop")
    assert combined.fill_value == np.float32(0)
    assert combined.attributes["_FillValue"] == "AAAAAICHw8A="  # agreed: kept
    assert combined.unmasked_sentinels == ()


def test_on_conflict_must_be_a_known_choice() -> None:
    with pytest.raises(ValueError, match="on_conflict"):
        combine_fill_values([0], [{}], ["a"], F4, on_conflict="first")  # type: ignore[arg-type]


def test_different_dtypes_are_incompatible() -> None:
    with pytest.raises(IncompatibleArraysError, match=r"a\.tif.*float32.*b\.tif.*int16"):
        combine_fill_decisions([tiff("0"), tiff("0", "int16")], ["a.tif", "b.tif"])


def test_byte_order_does_not_matter() -> None:
    a = consolidate_hdf5_fill(np.int32(4444), {}, np.dtype(">i4"), source="a")
    b = consolidate_hdf5_fill(np.int32(4444), {}, np.dtype("<i4"), source="b")
    assert quiet_combine([a, b], ["a.h5", "b.h5"]).fill_value == 4444


def test_compound_fill_values_compare_as_stored() -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    zero, one = np.zeros((), dt)[()], np.ones((), dt)[()]
    assert combine_fill_values([zero, zero], [{}, {}], ["a.h5", "b.h5"], dt).fill_value == zero
    with pytest.raises(
        IncompatibleArraysError, match=r"\(0, 0\.0\) in a\.h5; \(1, 1\.0\) in b\.h5"
    ):
        combine_fill_values([zero, one], [{}, {}], ["a.h5", "b.h5"], dt)
