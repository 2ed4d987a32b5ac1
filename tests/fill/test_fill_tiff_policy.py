"""TIFF fill policy (seed 000 and issue 4): sources, parsing, priority, cleanup, errors."""

from __future__ import annotations

import json
import math
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import tifffile
from xarray.backends.zarr import FillValueCoder as _XarrayFillValueCoder

from virtualizarr_fill.errors import FillValueError
from virtualizarr_fill.fill import FillValueWarning, consolidate_tiff_fill
from virtualizarr_fill.fill.tiff import parse_gdal_number

F4 = np.dtype("float32")


# xarray's own coder, the reference (its hints do not admit the numpy scalars it accepts)
FillValueCoder: Any = _XarrayFillValueCoder


def bits(value: Any, dtype: Any) -> bytes:
    return np.array(value, dtype=np.dtype(dtype)).tobytes()


def consolidate(attrs: dict[str, Any], dtype: Any = F4, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning unless a test expects one
        return consolidate_tiff_fill(attrs, np.dtype(dtype), source="in.tif", **kwargs)


# --- seed 000, "The problem" table: each source alone -----------------------------------


@pytest.mark.parametrize(
    ("attrs", "label"),
    [
        ({"gdal_no_data": "-9999"}, "GDAL_NODATA"),
        ({"_FillValue": "-9999"}, "_FillValue"),
        ({"missing_value": "-9999"}, "missing_value"),
        ({"swe#_FillValue": "-9999"}, "swe#_FillValue"),
        ({"swe#missing_value": "-9999"}, "swe#missing_value"),
    ],
    ids=["gdal_no_data", "_FillValue", "missing_value", "swe#_FillValue", "swe#missing_value"],
)
def test_each_source_alone_gives_the_fill(attrs: dict[str, str], label: str) -> None:
    decision = consolidate(attrs)
    assert bits(decision.fill_value, F4) == bits(-9999.0, F4)
    assert decision.attributes["_FillValue"] == "AAAAAICHw8A="
    assert label in decision.notes[0]


def test_seed_conversion_chain_example() -> None:
    # seed 000 "The conversion chain": GeoTIFF strings -> virtual Zarr store
    attrs = {
        "gdal_no_data": "-9999",
        "_FillValue": "-9999",
        "missing_value": "-9999",
        "swe#_FillValue": "-9999",
        "swe#missing_value": "-9999",
        "units": "mm",
    }
    decision = consolidate(attrs)
    assert isinstance(decision.fill_value, np.float32)
    assert decision.fill_value == np.float32(-9999.0)
    assert decision.attributes == {
        "gdal_no_data": "-9999",
        "_FillValue": "AAAAAICHw8A=",
        "missing_value": -9999.0,
        "units": "mm",
    }
    assert type(decision.attributes["missing_value"]) is float
    assert decision.notes[0].startswith("fill_value -9999.0 from GDAL_NODATA (tag 42113)")
    assert "_FillValue agrees" in decision.notes[0]


def test_input_mapping_is_not_modified() -> None:
    attrs = {"gdal_no_data": "-9999", "_FillValue": "-9999"}
    consolidate(attrs)
    assert attrs == {"gdal_no_data": "-9999", "_FillValue": "-9999"}


# --- step 2: parse (MSVC spellings, casting like GDAL) ----------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.#INF", math.inf),
        ("-1.#INF", -math.inf),
        ("1.#QNAN", math.nan),
        ("-1.#QNAN", math.nan),
        ("1.#IND", math.nan),
        ("-1.#IND", math.nan),
        ("1.#INF00", math.inf),
        ("-1.#IND00", math.nan),
        ("inf", math.inf),
        ("-inf", -math.inf),
        ("nan", math.nan),
        ("NaN", math.nan),
    ],
)
def test_msvc_and_c99_special_spellings(text: str, expected: float) -> None:
    decision = consolidate({"gdal_no_data": text})
    value = float(decision.fill_value)  # type: ignore[arg-type]
    assert (math.isnan(value) and math.isnan(expected)) or value == expected
    # xarray decodes the encoded sentinel to the same value
    decoded = FillValueCoder.decode(decision.attributes["_FillValue"], F4)
    assert (math.isnan(decoded) and math.isnan(expected)) or decoded == expected


@pytest.mark.parametrize(
    ("text", "dtype"),
    [
        ("-3.39999995214436425e+38", "float32"),
        ("-3.39999999999999996e+38", "float32"),
        ("-88.8888000000000034", "float32"),
        ("-1.26765060000000006e+30", "float64"),
        ("-9999", "float16"),
        ("0.1", "float32"),
    ],
)
def test_float_text_is_cast_like_gdal(text: str, dtype: str) -> None:
    # GDAL: CPLAtof (text -> double), then the band's type.
    expected = np.array(np.float64(text), dtype=np.dtype(dtype))
    assert bits(parse_gdal_number(text, np.dtype(dtype)), dtype) == expected.tobytes()


@pytest.mark.parametrize(
    ("text", "dtype", "expected"),
    [
        ("-9223372036854775808", "int64", -(2**63)),
        ("18446744073709551615", "uint64", 2**64 - 1),
        ("-2147483647", "int32", -2147483647),
        ("255.0", "uint8", 255),
        ("1e3", "int16", 1000),
        (" 0 ", "uint8", 0),
        ("-9999\x00", "int16", -9999),
    ],
)
def test_integer_text_is_exact(text: str, dtype: str, expected: int) -> None:
    value = parse_gdal_number(text, np.dtype(dtype))
    assert type(value) is np.dtype(dtype).type and int(value) == expected  # type: ignore[call-overload]


def test_complex_band_takes_the_real_nodata() -> None:
    decision = consolidate({"gdal_no_data": "0"}, "complex64")
    assert decision.fill_value == np.complex64(0)
    assert decision.attributes["_FillValue"] == FillValueCoder.encode(
        np.complex64(0), np.dtype("complex64")
    )


# --- step 2 errors: not representable ---------------------------------------------------


@pytest.mark.parametrize(
    ("attrs", "dtype", "tag", "value"),
    [
        ({"gdal_no_data": "-10000"}, "uint8", "42113", "-10000"),
        ({"gdal_no_data": "-32768"}, "uint8", "42113", "-32768"),  # seed 000's example
        ({"gdal_no_data": "0.5"}, "uint16", "42113", "0.5"),
        ({"gdal_no_data": "nan"}, "int16", "42113", "nan"),
        ({"gdal_no_data": "1e39"}, "float32", "42113", "1e39"),
        ({"_FillValue": "300"}, "uint8", "42112", "300"),
        ({"missing_value": "-1"}, "uint32", "42112", "-1"),
        ({"gdal_no_data": "none"}, "float32", "42113", "none"),
    ],
)
def test_unrepresentable_value_raises_naming_file_tag_value_dtype(
    attrs: dict[str, str], dtype: str, tag: str, value: str
) -> None:
    with pytest.raises(FillValueError) as info:
        consolidate_tiff_fill(attrs, np.dtype(dtype), source="s3://bucket/scene.tif")
    message = str(info.value)
    assert "s3://bucket/scene.tif" in message
    assert tag in message and value in message and dtype in message
    assert isinstance(info.value, ValueError)


def test_unrepresentable_value_with_warn_drops_the_sentinel() -> None:
    with pytest.warns(FillValueWarning, match=r"in\.tif.*42113.*-10000.*uint8"):
        decision = consolidate_tiff_fill(
            {"gdal_no_data": "-10000"}, np.dtype("uint8"), source="in.tif", on_out_of_range="warn"
        )
    assert decision.fill_value == np.uint8(0)
    assert "_FillValue" not in decision.attributes
    assert decision.attributes["gdal_no_data"] == "-10000"  # raw text kept
    assert any("ignored" in note for note in decision.notes)


def test_warn_mode_falls_back_to_the_next_source() -> None:
    with pytest.warns(FillValueWarning):
        decision = consolidate_tiff_fill(
            {"gdal_no_data": "-10000", "_FillValue": "255"},
            np.dtype("uint8"),
            source="in.tif",
            on_out_of_range="warn",
        )
    assert decision.fill_value == np.uint8(255)
    assert decision.attributes["_FillValue"] == 255


# --- step 3: validate (disagreement warns, naming sources and values) -------------------


def test_disagreement_warns_naming_each_source_and_value() -> None:
    with pytest.warns(FillValueWarning) as record:
        decision = consolidate_tiff_fill(
            {"gdal_no_data": "-9999", "_FillValue": "-999", "missing_value": "-99"},
            F4,
            source="in.tif",
        )
    message = str(record[0].message)
    for part in ("in.tif", "GDAL_NODATA", "'-9999'", "_FillValue", "'-999'", "missing_value"):
        assert part in message
    assert decision.fill_value == np.float32(-9999)
    assert decision.attributes["_FillValue"] == "AAAAAICHw8A="
    # missing_value keeps its own value, as a plain number
    assert decision.attributes["missing_value"] == -99.0


def test_precision_only_differences_agree_after_cast() -> None:
    # float32 -> text -> float64 round trips differ as text but not as float32
    decision = consolidate({"gdal_no_data": "-3.4e+38", "_FillValue": "-3.39999995214436425e+38"})
    assert decision.fill_value == np.float32(-3.4e38)


# --- step 4: priority --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attrs", "winner"),
    [
        ({"gdal_no_data": "1", "_FillValue": "2", "missing_value": "3"}, 1),
        ({"_FillValue": "2", "missing_value": "3"}, 2),
        ({"missing_value": "3"}, 3),
        ({"swe#_FillValue": "4", "missing_value": "3"}, 4),
        ({"_FillValue": "2", "swe#_FillValue": "4"}, 2),
    ],
)
def test_priority_gdal_nodata_then_fillvalue_then_missing_value(
    attrs: dict[str, str], winner: int
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        decision = consolidate_tiff_fill(attrs, np.dtype("int16"), source="in.tif")
    assert decision.fill_value == np.int16(winner)
    assert decision.attributes["_FillValue"] == winner


def test_band_nodata_item_ranks_after_the_tag_and_before_fillvalue() -> None:
    with pytest.warns(FillValueWarning, match="sample 0 NODATA"):
        decision = consolidate_tiff_fill(
            {"_FillValue": "2"}, np.dtype("int16"), source="in.tif", band_items=[{"NODATA": "7"}]
        )
    assert decision.fill_value == np.int16(7)
    decision = consolidate({"gdal_no_data": "7"}, "int16", band_items=[{"nodata": "7"}])
    assert "sample 0 nodata agrees" in decision.notes[0]


def test_band_level_fill_items_are_sources() -> None:
    decision = consolidate(
        {},
        band_items=[
            {"_FillValue": "-9999", "missing_value": "-9999", "NETCDF_VARNAME": "swe"},
            {"_FillValue": "-9999"},
        ],
    )
    assert decision.fill_value == np.float32(-9999)
    assert decision.attributes == {"_FillValue": "AAAAAICHw8A=", "missing_value": -9999.0}


# --- step 5: encode and clean up ---------------------------------------------------------


def test_prefixed_duplicates_equal_removed_differing_kept() -> None:
    with pytest.warns(FillValueWarning, match="swe#missing_value"):
        decision = consolidate_tiff_fill(
            {
                "gdal_no_data": "-9999",
                "missing_value": "-9999",
                "swe#_FillValue": "-9999.0",
                "swe#missing_value": "-1",
                "NETCDF_VARNAME": "swe",
            },
            F4,
            source="in.tif",
        )
    assert "swe#_FillValue" not in decision.attributes
    assert decision.attributes["swe#missing_value"] == "-1"  # differs: kept
    assert decision.attributes["missing_value"] == -9999.0


def test_prefixed_missing_value_alone_becomes_missing_value() -> None:
    with pytest.warns(FillValueWarning):
        decision = consolidate_tiff_fill(
            {"gdal_no_data": "-9999", "swe#missing_value": "-1"}, F4, source="in.tif"
        )
    assert decision.attributes == {
        "gdal_no_data": "-9999",
        "_FillValue": "AAAAAICHw8A=",
        "missing_value": -1.0,
    }


def test_other_variables_prefixed_items_are_not_sources() -> None:
    decision = consolidate(
        {"gdal_no_data": "-9999", "lat#_FillValue": "nan", "NETCDF_VARNAME": "swe"}
    )
    assert decision.attributes["lat#_FillValue"] == "nan"
    assert decision.fill_value == np.float32(-9999)


def test_raw_gdal_nodata_text_is_kept_under_its_own_attribute() -> None:
    decision = consolidate({"gdal_no_data": "-3.39999999999999996e+38"})
    assert decision.attributes["gdal_no_data"] == "-3.39999999999999996e+38"
    assert decision.attributes["_FillValue"] == FillValueCoder.encode(np.float32(-3.4e38), F4)


def test_nan_missing_value_is_not_written_as_json() -> None:
    decision = consolidate({"gdal_no_data": "nan", "missing_value": "nan"}, "float64")
    assert "missing_value" not in decision.attributes
    assert decision.attributes["_FillValue"] == "AAAAAAAA+H8="


def test_no_fill_information_gives_dtype_default_and_no_fillvalue() -> None:
    for dtype, default in (("float32", 0.0), ("int16", 0), ("uint8", 0), ("complex64", 0j)):
        decision = consolidate({"OFFSET": "0", "SCALE": "1"}, dtype)
        assert decision.fill_value == default
        assert type(decision.fill_value) is np.dtype(dtype).type
        assert "_FillValue" not in decision.attributes
        assert decision.attributes == {"OFFSET": "0", "SCALE": "1"}
        assert "no usable fill information" in decision.notes[0]


# --- real files: the value GDAL/rasterio masks with --------------------------------------


def _gdal_metadata_items(xml: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Dataset items (no ``sample``) and per-band items of a GDAL_METADATA document."""
    dataset: dict[str, str] = {}
    bands: dict[int, dict[str, str]] = {}
    for item in ET.fromstring(xml).iter("Item"):
        name, text = item.get("name"), item.text or ""
        if name is None or item.get("domain"):
            continue
        if item.get("sample") is None:
            dataset[name] = text
        else:
            bands.setdefault(int(item.get("sample", 0)), {})[name] = text
    return dataset, [bands[i] for i in sorted(bands)]


def _corpus_tiffs(corpus_dir: Path) -> list[Path]:
    return sorted(
        p for p in corpus_dir.rglob("*") if p.suffix.lower() in (".tif", ".tiff") and p.is_file()
    )


@pytest.mark.corpus
def test_corpus_nodata_equals_rasterio_bit_for_bit(corpus_dir: Path) -> None:
    checked = []
    for path in _corpus_tiffs(corpus_dir):
        with tifffile.TiffFile(path) as tif:
            page = tif.pages.first
            tags = page.tags
            if 42113 not in tags:
                continue
            attrs: dict[str, Any] = {"gdal_no_data": tags[42113].value}
            band_items: list[dict[str, str]] = []
            if 42112 in tags:
                dataset_items, band_items = _gdal_metadata_items(tags[42112].value)
                attrs.update(dataset_items)
            dtype = page.dtype
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the corpus sources all agree
            decision = consolidate_tiff_fill(attrs, dtype, source=str(path), band_items=band_items)
        with rasterio.open(path) as src:
            nodata = src.nodata
        assert nodata is not None, path
        expected = np.array(nodata, dtype=np.float64).astype(dtype)
        got = np.array(decision.fill_value, dtype=dtype)
        same = got.tobytes() == expected.tobytes() or (
            np.isnan(got).all() and np.isnan(expected).all()
        )
        assert same, f"{path.name}: ours {got!r}, rasterio {expected!r}"
        json.dumps(decision.attributes, allow_nan=False)  # strict JSON, as Icechunk requires
        assert (
            FillValueCoder.decode(decision.attributes["_FillValue"], dtype) == (expected.item())
            or np.isnan(expected).all()
        )
        checked.append(path.name)
    # 25 corpus files carry GDAL_NODATA, odd float32 spellings included
    assert len(checked) >= 25
    for name in (
        "float_raster_with_extra_nodata.tif",
        "float_raster_with_nodata.tif",
        "test_vgrid_nodata.tif",
        "MCD43A4.A2017006.h21v11.006.2017018074804_B01.TIF",
    ):
        assert name in checked


@pytest.mark.corpus
def test_corpus_modis_fillvalue_item_agrees_with_nodata(corpus_dir: Path) -> None:
    path = next(corpus_dir.rglob("MYD13A1.A2020153.h30v10.006.2020170024036_VIQ_B03.TIF"))
    with tifffile.TiffFile(path) as tif:
        tags = tif.pages.first.tags
        dataset_items, band_items = _gdal_metadata_items(tags[42112].value)
        dtype = tif.pages.first.dtype
    assert dataset_items["_FillValue"] == "65535"
    decision = consolidate(
        {"gdal_no_data": tags[42113].value, **dataset_items}, dtype, band_items=band_items
    )
    assert decision.attributes["_FillValue"] == 65535
    assert decision.attributes["gdal_no_data"] == "65535"
    assert "GDAL_METADATA (tag 42112) _FillValue agrees" in decision.notes[0]
