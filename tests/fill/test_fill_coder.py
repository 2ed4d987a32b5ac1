"""The _FillValue coder against the seeds' examples and xarray's own FillValueCoder."""

from __future__ import annotations

import base64
import json
import math
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from xarray.backends.zarr import FillValueCoder as _XarrayFillValueCoder

from virtualizarr_fill.fill import FillDecision, consolidate_tiff_fill
from virtualizarr_fill.fill.coder import (
    decode_fill_value,
    encode_fill_value,
    sentinel_from_attribute,
)

# xarray's own coder, the reference (its hints do not admit the numpy scalars it accepts)
FillValueCoder: Any = _XarrayFillValueCoder


def bits(value: Any, dtype: Any) -> bytes:
    """The stored bytes of ``value`` in ``dtype``: bit-exact comparison, NaN payload included."""
    return np.array(value, dtype=np.dtype(dtype)).tobytes()


# --- seed examples, literally -----------------------------------------------------------


def test_seed_000_float32_minus_9999() -> None:
    # seed 000, "The conversion chain": _FillValue "AAAAAICHw8A=" for float32 -9999.0
    assert encode_fill_value(-9999, np.dtype("float32")) == "AAAAAICHw8A="
    assert encode_fill_value(np.float32(-9999.0), np.dtype("float32")) == "AAAAAICHw8A="
    assert FillValueCoder.encode(np.float32(-9999.0), np.dtype("float32")) == "AAAAAICHw8A="
    decoded = decode_fill_value("AAAAAICHw8A=", np.dtype("float32"))
    assert isinstance(decoded, np.float32)
    assert bits(decoded, "float32") == bits(np.float32(-9999.0), "float32")


def test_seed_001_float32_max_per_erratum() -> None:
    # seed 001 ATL06 example, corrected by the erratum in seeds/README.md
    f32max = np.finfo(np.float32).max
    assert encode_fill_value(f32max, np.dtype("float32")) == "AAAA4P//70c="
    assert FillValueCoder.encode(f32max, np.dtype("float32")) == "AAAA4P//70c="
    assert decode_fill_value("AAAA4P//70c=", np.dtype("float32")) == f32max
    # The seed's original string is not float32 max: the erratum is real.
    assert struct.unpack("<d", base64.b64decode("AAAAAn9/f0A="))[0] != float(f32max)


def test_seed_002_float_example_1_5() -> None:
    # seed 002: float32 array, "_FillValue": "AAAAAAAA+D8=" is 1.5
    assert encode_fill_value(1.5, np.dtype("float32")) == "AAAAAAAA+D8="
    assert decode_fill_value("AAAAAAAA+D8=", np.dtype("float32")) == np.float32(1.5)


def test_seed_002_bool_example() -> None:
    assert encode_fill_value(True, np.dtype("bool")) is True
    assert decode_fill_value(True, np.dtype("bool")) == np.True_


def test_seed_002_integer_example() -> None:
    assert encode_fill_value(255, np.dtype("uint8")) == 255
    assert type(encode_fill_value(np.uint8(255), np.dtype("uint8"))) is int
    assert decode_fill_value(255, np.dtype("uint8")) == np.uint8(255)


def test_seed_002_bytes_example() -> None:
    assert encode_fill_value(bytes([4, 5, 6, 7]), np.dtype("S4")) == "BAUGBw=="
    assert decode_fill_value("BAUGBw==", np.dtype("S4")) == np.bytes_(bytes([4, 5, 6, 7]))
    assert FillValueCoder.decode("BAUGBw==", "bytes") == bytes([4, 5, 6, 7])


def test_seed_002_string_example() -> None:
    assert encode_fill_value("missing value", np.dtype("U13")) == "missing value"
    assert encode_fill_value("missing value", np.dtypes.StringDType()) == "missing value"
    assert decode_fill_value("missing value", np.dtype("U13")) == "missing value"


# --- the coder table of seeds 000/001, one row each, round-tripped through xarray -------

FLOAT_VALUES = [
    0.0,
    -0.0,
    1.5,
    -9999.0,
    math.nan,
    math.inf,
    -math.inf,
    "max",
    "min",
    "tiny",
    "smallest_subnormal",
]


def float_cases() -> list[tuple[str, Any]]:
    cases = []
    for name in ("float16", "float32", "float64"):
        info = np.finfo(np.dtype(name))
        for value in FLOAT_VALUES:
            v: Any = getattr(info, value) if isinstance(value, str) else value
            cases.append((name, np.dtype(name).type(v)))
    return cases


@pytest.mark.parametrize(("dtype", "value"), float_cases())
def test_float_row_matches_xarray(dtype: str, value: Any) -> None:
    dt = np.dtype(dtype)
    ours = encode_fill_value(value, dt)
    assert ours == FillValueCoder.encode(value, dt)
    assert isinstance(ours, str)
    assert len(base64.b64decode(ours)) == 8  # little-endian float64, whatever the width
    # xarray decodes ours to the same number; we decode xarray's to the same bits.
    theirs = FillValueCoder.decode(ours, dt)
    assert bits(theirs, dt) == bits(value, dt)
    assert bits(decode_fill_value(FillValueCoder.encode(value, dt), dt), dt) == bits(value, dt)


def test_float_big_endian_dtype_encodes_little_endian() -> None:
    assert encode_fill_value(-9999, np.dtype(">f4")) == "AAAAAICHw8A="
    assert decode_fill_value("AAAAAICHw8A=", np.dtype(">f4")) == np.float32(-9999)


def int_cases() -> list[tuple[str, int]]:
    cases = []
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(np.dtype(name))
        for value in sorted({int(info.min), int(info.max), 0, 1}):
            cases.append((name, value))
    return cases


@pytest.mark.parametrize(("dtype", "value"), int_cases())
def test_integer_row_matches_xarray(dtype: str, value: int) -> None:
    dt = np.dtype(dtype)
    ours = encode_fill_value(dt.type(value), dt)
    assert ours == FillValueCoder.encode(dt.type(value), dt)
    assert type(ours) is int and ours == value
    assert FillValueCoder.decode(ours, dt) == value
    decoded = decode_fill_value(FillValueCoder.encode(dt.type(value), dt), dt)
    assert type(decoded) is dt.type and int(decoded) == value  # exact, int64 extremes too


@pytest.mark.parametrize("value", [True, False])
def test_bool_row_matches_xarray(value: bool) -> None:
    dt = np.dtype(bool)
    assert encode_fill_value(value, dt) is FillValueCoder.encode(value, dt)
    assert decode_fill_value(FillValueCoder.encode(value, dt), dt) == value


COMPLEX_VALUES = [
    complex(1, 2),
    complex(-9999, 0),
    complex(math.nan, math.inf),
    complex(-math.inf, math.nan),
]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("value", COMPLEX_VALUES)
def test_complex_row_matches_xarray(dtype: str, value: complex) -> None:
    dt = np.dtype(dtype)
    typed = dt.type(value)
    ours = encode_fill_value(typed, dt)
    assert ours == FillValueCoder.encode(typed, dt)
    assert isinstance(ours, list) and len(ours) == 2
    assert bits(FillValueCoder.decode(ours, dt), dt) == bits(typed, dt)
    assert bits(decode_fill_value(FillValueCoder.encode(typed, dt), dt), dt) == bits(typed, dt)


def test_complex_float32_max_parts() -> None:
    dt = np.dtype("complex64")
    f32max = np.finfo(np.float32).max
    value = dt.type(complex(f32max, -f32max))
    assert encode_fill_value(value, dt) == FillValueCoder.encode(value, dt)
    assert encode_fill_value(value, dt)[0] == "AAAA4P//70c="  # type: ignore[index]


@pytest.mark.parametrize("value", ["", "missing value", "n/a é ∂"])
def test_unicode_row_matches_xarray(value: str) -> None:
    dt = np.dtype("U20")
    assert encode_fill_value(value, dt) == FillValueCoder.encode(value, dt)
    # xarray decodes the Zarr v3 "string" type
    assert FillValueCoder.decode(encode_fill_value(value, dt), "string") == value
    assert decode_fill_value(FillValueCoder.encode(value, dt), dt) == value


@pytest.mark.parametrize("value", [b"", b"\x00\x01", b"N/A", bytes(range(7))])
def test_bytes_row_matches_xarray(value: bytes) -> None:
    dt = np.dtype("S8")
    assert encode_fill_value(value, dt) == FillValueCoder.encode(value, dt)
    assert FillValueCoder.decode(encode_fill_value(value, dt), "bytes") == value
    assert decode_fill_value(FillValueCoder.encode(value, dt), dt) == np.bytes_(value)


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("a", "<i4"), ("b", "<f8")]),
        np.dtype("datetime64[s]"),
        np.dtype("timedelta64[ns]"),
        np.dtype("V4"),
        np.dtype(object),
    ],
    ids=["structured", "datetime", "timedelta", "void", "object"],
)
def test_unsupported_kinds_raise_value_error(dtype: np.dtype[Any]) -> None:
    with pytest.raises(ValueError, match=r"_FillValue|object dtype"):
        encode_fill_value(0, dtype)
    with pytest.raises(ValueError, match=r"_FillValue|object dtype"):
        decode_fill_value(0, dtype)


@pytest.mark.parametrize(
    ("value", "dtype", "match"),
    [
        (300, "uint8", "outside the range"),
        (-1, "uint16", "outside the range"),
        (2**63, "int64", "outside the range"),
        (1.5, "int32", "not an integer"),
        (math.nan, "int16", "not a finite number"),
        (1e39, "float32", "outside the range"),
        (70000.0, "float16", "outside the range"),
        ("x", "float32", "expected a number"),
        (b"toolong", "S3", "longer than"),
        ("toolong", "U3", "longer than"),
    ],
)
def test_encode_refuses_unrepresentable(value: Any, dtype: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        encode_fill_value(value, np.dtype(dtype))


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        ("not base64!", "float32"),
        ("AAAA", "float64"),  # 3 bytes, not a float64
        (["AAAAAAAA+D8="], "complex64"),
        ("1", "int8"),
        (256, "uint8"),
        (3, "bool"),
        (b"x", "U3"),
    ],
)
def test_decode_refuses_malformed(value: Any, dtype: str) -> None:
    with pytest.raises(ValueError):
        decode_fill_value(value, np.dtype(dtype))


def test_float_is_cast_to_dtype_before_encoding() -> None:
    # -3.4e38 is not a float32; the sentinel must be the float32 the data holds.
    f32 = np.float32(-3.4e38)
    assert encode_fill_value(-3.4e38, np.dtype("float32")) == FillValueCoder.encode(
        f32, np.dtype("float32")
    )
    assert encode_fill_value(-3.4e38, np.dtype("float64")) == FillValueCoder.encode(
        -3.4e38, np.dtype("float64")
    )


def test_sentinel_from_attribute_reads_encoded_and_decoded_forms() -> None:
    dt = np.dtype("float32")
    assert sentinel_from_attribute("AAAAAICHw8A=", dt) == np.float32(-9999)
    assert sentinel_from_attribute(-9999.0, dt) == np.float32(-9999)
    assert sentinel_from_attribute(np.array([-9999], dtype="f4"), dt) == np.float32(-9999)
    assert sentinel_from_attribute(["AAAAAAAA8D8=", "AAAAAAAAAEA="], np.dtype("c8")) == 1 + 2j


# --- reading back through zarr v3 + xarray ---------------------------------------------


def _write_store(path: Path, decision: FillDecision, data: np.ndarray, chunk: int) -> None:
    """One 1-D array whose last chunk is never written (it reads as fill_value)."""
    store = zarr.storage.LocalStore(path)
    group = zarr.create_group(store, zarr_format=3)
    array = group.create_array(
        "v",
        shape=data.shape,
        chunks=(chunk,),
        dtype=data.dtype,
        fill_value=decision.fill_value,
        attributes=decision.attributes,
        dimension_names=["x"],
    )
    array[: data.size - chunk] = data[: data.size - chunk]


def _open_both_ways(path: Path, use_fill_as_mask: bool) -> list[xr.Dataset]:
    """xr.open_zarr, and the ZarrStore route that honours use_zarr_fill_value_as_mask.

    xarray's open_zarr drops use_zarr_fill_value_as_mask for Zarr v3 stores
    (pydata/xarray#10269), so the True case is also exercised through ZarrStore.
    """
    via_open_zarr = xr.open_zarr(
        path,
        zarr_format=3,
        consolidated=False,
        use_zarr_fill_value_as_mask=use_fill_as_mask,
    )
    store = xr.backends.ZarrStore.open_group(
        str(path),
        mode="r",
        zarr_format=3,
        consolidated=False,
        use_zarr_fill_value_as_mask=use_fill_as_mask,
    )
    return [via_open_zarr, xr.open_dataset(store, engine="store").chunk()]


TIFF_CASES = [
    # (GDAL_NODATA text, dtype, extra GDAL_METADATA items)
    ("-9999", "float32", {"_FillValue": "-9999", "missing_value": "-9999"}),
    ("-3.39999999999999996e+38", "float32", {}),
    ("-88.8888000000000034", "float32", {}),
    ("nan", "float64", {}),
    ("-1.#INF", "float32", {}),
    ("65535", "uint16", {"_FillValue": "65535"}),
    ("32767", "int16", {"missing_value": "32767"}),
    ("0", "uint8", {}),
]


@pytest.mark.parametrize("use_fill_as_mask", [False, True])
@pytest.mark.parametrize(("nodata", "dtype", "items"), TIFF_CASES)
def test_zarr_v3_store_decodes_to_the_sentinel_mask(
    tmp_path: Path, nodata: str, dtype: str, items: dict[str, str], use_fill_as_mask: bool
) -> None:
    dt = np.dtype(dtype)
    decision = consolidate_tiff_fill({"gdal_no_data": nodata, **items}, dt, source="mem.tif")
    # The GDAL value the data holds, converted as GDAL does (text -> double -> dtype),
    # independently of the code under test.
    sentinel = np.array(float(nodata.replace("1.#INF", "inf")), dtype=np.float64).astype(dt)
    valid = np.arange(1, 13).astype(dt)
    data = valid.copy()
    data[[2, 5]] = sentinel
    data[-4:] = sentinel  # the unwritten chunk reads back as fill_value
    _write_store(tmp_path / "s.zarr", decision, data, chunk=4)
    expected_mask = np.isnan(data) if np.isnan(sentinel) else data == sentinel

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ds in _open_both_ways(tmp_path / "s.zarr", use_fill_as_mask):
            values = ds["v"].load().values
            assert np.array_equal(np.isnan(values), expected_mask)
            assert np.array_equal(values[~expected_mask], data[~expected_mask].astype(values.dtype))
            # raw values: the missing chunk reads as the file's nodata, bit for bit
            raw = xr.open_zarr(
                tmp_path / "s.zarr", zarr_format=3, consolidated=False, mask_and_scale=False
            )["v"].values
            assert raw.tobytes() == data.tobytes()


SEED_002_EXAMPLES = [
    # (data_type, Zarr fill_value, sentinel, the example's "fill_value" and "_FillValue" JSON)
    ("bool", False, True, False, True),
    ("uint8", 0, 255, 0, 255),
    ("float32", np.nan, 1.5, "NaN", "AAAAAAAA+D8="),
]


@pytest.mark.parametrize(("dtype", "fill", "sentinel", "fill_json", "attr_json"), SEED_002_EXAMPLES)
def test_seed_002_examples_as_stored_and_as_xarray_reads_them(
    tmp_path: Path, dtype: str, fill: Any, sentinel: Any, fill_json: Any, attr_json: Any
) -> None:
    dt = np.dtype(dtype)
    group = zarr.create_group(zarr.storage.LocalStore(tmp_path / "e.zarr"), zarr_format=3)
    array = group.create_array(
        "v",
        shape=(3,),
        dtype=dt,
        fill_value=fill,
        attributes={"_FillValue": encode_fill_value(sentinel, dt)},
        dimension_names=["x"],
    )
    data = np.array([sentinel, 0, 0]).astype(dt)
    array[...] = data
    metadata = json.loads((tmp_path / "e.zarr" / "v" / "zarr.json").read_text())
    assert metadata["fill_value"] == fill_json
    assert metadata["attributes"]["_FillValue"] == attr_json
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decoded = xr.open_zarr(tmp_path / "e.zarr", zarr_format=3, consolidated=False)
        values = decoded["v"].values
    assert pd.isnull(values[0]) and not pd.isnull(values[1:]).any()
