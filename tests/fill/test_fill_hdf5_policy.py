"""HDF5 fill policy (seed 001 and issue 4) against real files written by h5py and netCDF4."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr
from h5py import h5d
from xarray.backends.zarr import FillValueCoder as _XarrayFillValueCoder

from virtualizarr_fill.errors import FillValueError
from virtualizarr_fill.fill import (
    FillDecision,
    FillValueWarning,
    consolidate_hdf5_fill,
    header_fill_from_h5py,
)

F4 = np.dtype("float32")
F32_MAX = np.finfo(np.float32).max


# xarray's own coder, the reference (its hints do not admit the numpy scalars it accepts)
FillValueCoder: Any = _XarrayFillValueCoder


def bits(value: Any, dtype: Any) -> bytes:
    return np.array(value, dtype=np.dtype(dtype)).tobytes()


def unallocated(dset: h5py.Dataset) -> bool:
    """Whether some of the dataset's storage is not allocated (h5py's own view)."""
    if dset.size == 0:
        return False
    if dset.chunks is None:
        return bool(dset.id.get_storage_size() == 0)
    grid = math.prod(-(-n // c) for n, c in zip(dset.shape, dset.chunks, strict=True))
    return bool(dset.id.get_num_chunks() < grid)


def decide(dset: h5py.Dataset, **kwargs: Any) -> FillDecision:
    return consolidate_hdf5_fill(
        header_fill_from_h5py(dset),
        dict(dset.attrs),
        dset.dtype,
        source=dset.file.filename,
        dataset=dset.name,
        has_unallocated_chunks=unallocated(dset),
        **kwargs,
    )


@pytest.fixture
def h5(tmp_path: Path) -> Iterator[h5py.File]:
    with h5py.File(tmp_path / "t.h5", "w") as f:
        yield f


# --- seed 001 "The problem" table: each source ------------------------------------------


def test_row_header_fill_value_becomes_zarr_fill_value(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), chunks=(2,), dtype="f4", fillvalue=-9999.0)
    decision = decide(dset)
    # the value the HDF5 library returns for unallocated chunks, bit for bit
    assert bits(decision.fill_value, F4) == dset[...][0].tobytes()
    assert "_FillValue" not in decision.attributes


def test_row_fillvalue_attribute_is_cast_and_encoded(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), dtype="f4", data=np.arange(4, dtype="f4"))
    dset.attrs["_FillValue"] = np.float64(-9999.0)  # a different type than the dataset
    decision = decide(dset)
    assert decision.attributes["_FillValue"] == "AAAAAICHw8A="
    assert decision.fill_value == np.float32(0)  # header default, not the attribute


def test_row_missing_value_attribute_is_plain_numbers(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), dtype="i2", data=np.arange(4, dtype="i2"))
    dset.attrs["missing_value"] = np.array([-9999, -8888], dtype="i2")
    dset.attrs["single"] = 0
    decision = decide(dset)
    assert decision.attributes["missing_value"] == [-9999, -8888]
    assert all(type(v) is int for v in decision.attributes["missing_value"])
    dset.attrs["missing_value"] = np.int16(-9999)
    assert decide(dset).attributes["missing_value"] == -9999
    dset.attrs["missing_value"] = np.array([-9999.0], dtype="f8")  # one-element array
    assert decide(dset).attributes["missing_value"] == -9999


# --- the approach --------------------------------------------------------------------


def test_header_fill_kinds_reported_by_h5py(h5: h5py.File) -> None:
    default = h5.create_dataset("default", shape=(4,), chunks=(2,), dtype="f4")
    user = h5.create_dataset("user", shape=(4,), chunks=(2,), dtype="f4", fillvalue=7.5)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((2,))
    dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
    h5d.create(h5.id, b"never", h5py.h5t.NATIVE_FLOAT, h5py.h5s.create_simple((4,)), dcpl=dcpl)
    plist = default.id.get_create_plist()
    assert plist.fill_value_defined() == h5d.FILL_VALUE_DEFAULT
    assert user.id.get_create_plist().fill_value_defined() == h5d.FILL_VALUE_USER_DEFINED
    for dset in (default, user, h5["never"]):
        decision = decide(dset)
        assert bits(decision.fill_value, dset.dtype) == dset[...][:1].tobytes()


def test_no_header_fill_gives_the_dtype_default() -> None:
    for dtype, default in (("f4", 0.0), ("i8", 0), ("u1", 0), ("c8", 0j), ("?", False)):
        decision = consolidate_hdf5_fill(None, {}, np.dtype(dtype), source="x.h5")
        assert decision.fill_value == default
        assert type(decision.fill_value) is np.dtype(dtype).type
        assert "no fill value defined" in decision.notes[0]


def test_fillvalue_attribute_never_overrides_header_fill(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(6,), chunks=(2,), dtype="f4", fillvalue=0.0)
    dset[:2] = [1, -9999]
    dset.attrs["_FillValue"] = np.float32(-9999.0)
    with pytest.warns(FillValueWarning, match=r"t\.h5: /v.*unallocated chunks"):
        decision = decide(dset)
    assert decision.fill_value == np.float32(0.0)
    assert bits(decision.fill_value, F4) == dset[4:5].tobytes()  # unallocated chunk
    assert decision.attributes["_FillValue"] == "AAAAAICHw8A="


def test_no_unallocated_chunk_warning_when_all_allocated(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), chunks=(2,), dtype="f4", fillvalue=0.0)
    dset[...] = [1, -9999, 2, 3]
    dset.attrs["_FillValue"] = np.float32(-9999.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decision = decide(dset)
    assert any("differs from _FillValue" in note for note in decision.notes)


def test_no_warning_when_header_fill_and_attribute_agree(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(6,), chunks=(2,), dtype="f4", fillvalue=-9999.0)
    dset[:2] = [1, 2]
    dset.attrs["_FillValue"] = np.float32(-9999.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decision = decide(dset)
    assert decision.fill_value == np.float32(-9999)


def test_icesat2_atl06_float32_max(h5: h5py.File) -> None:
    # seed 001 "Example: ICESat-2 ATL06" (encoded value per the erratum)
    dset = h5.create_dataset(
        "gt1l/land_ice_segments/h_li",
        shape=(10,),
        chunks=(5,),
        dtype="f4",
        fillvalue=F32_MAX,
        compression="gzip",
        shuffle=True,
    )
    dset[:5] = np.arange(5)
    dset.attrs["_FillValue"] = np.float32(3.4028235e38)
    decision = decide(dset)
    assert bits(decision.fill_value, F4) == bits(F32_MAX, F4)
    assert bits(decision.fill_value, F4) == dset[5:6].tobytes()
    assert decision.attributes["_FillValue"] == "AAAA4P//70c="
    assert FillValueCoder.decode("AAAA4P//70c=", F4) == float(F32_MAX)


def test_nan_fill_and_attribute(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), chunks=(2,), dtype="f8", fillvalue=np.nan)
    dset.attrs["_FillValue"] = np.nan
    decision = decide(dset)
    assert np.isnan(decision.fill_value)  # type: ignore[arg-type]
    assert decision.attributes["_FillValue"] == FillValueCoder.encode(np.nan, np.dtype("f8"))


@pytest.mark.parametrize(
    ("dtype", "attr"),
    [("u1", np.int16(-9999)), ("u2", np.int32(70000)), ("i1", np.float64(0.5)), ("i2", np.nan)],
)
def test_out_of_range_fillvalue_warns_and_drops(h5: h5py.File, dtype: str, attr: Any) -> None:
    dset = h5.create_dataset("v", shape=(4,), dtype=dtype, data=np.ones(4, dtype=dtype))
    dset.attrs["_FillValue"] = attr
    name = np.dtype(dtype).name
    with pytest.warns(FillValueWarning, match=rf"t\.h5: /v: _FillValue attribute .* {name}"):
        decision = decide(dset)
    assert "_FillValue" not in decision.attributes
    with pytest.raises(FillValueError, match=r"t\.h5: /v: _FillValue"):
        decide(dset, on_out_of_range="raise")


def test_out_of_range_missing_value_element_dropped(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), dtype="u1", data=np.ones(4, dtype="u1"))
    dset.attrs["missing_value"] = np.array([255, -1], dtype="i2")
    with pytest.warns(FillValueWarning, match="missing_value"):
        decision = decide(dset)
    assert decision.attributes["missing_value"] == [255]


def test_unsigned_convention_reinterprets_the_sentinel() -> None:
    decision = consolidate_hdf5_fill(
        np.int8(-1), {"_FillValue": np.uint8(255), "_Unsigned": "true"}, "i1", source="x.nc"
    )
    assert decision.attributes["_FillValue"] == -1


def test_int64_extremes(h5: h5py.File) -> None:
    low = np.iinfo(np.int64).min
    dset = h5.create_dataset("v", shape=(4,), chunks=(2,), dtype="i8", fillvalue=low)
    dset.attrs["_FillValue"] = np.int64(low)
    decision = decide(dset)
    assert decision.fill_value == low and decision.attributes["_FillValue"] == int(low)
    assert bits(decision.fill_value, "i8") == dset[:1].tobytes()


def test_fixed_length_bytes(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), chunks=(2,), dtype="S5", fillvalue=b"xx")
    dset.attrs["_FillValue"] = np.bytes_(b"xx")
    decision = decide(dset)
    assert decision.fill_value == np.bytes_(b"xx") == dset[0]
    # xarray's Zarr backend cannot decode a bytes-typed _FillValue: not written
    assert "_FillValue" not in decision.attributes
    assert any("not written" in note for note in decision.notes)


def test_variable_length_strings(h5: h5py.File) -> None:
    dset = h5.create_dataset("v", shape=(4,), chunks=(2,), dtype=h5py.string_dtype())
    decision = decide(dset)
    assert decision.fill_value == ""  # h5py returns b"" for the header fill
    assert decision.dtype == np.dtypes.StringDType()


def test_compound_dtype_keeps_header_fill_and_drops_sentinels() -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    fill = np.array((1, 2.5), dtype=dt)[()]
    decision = consolidate_hdf5_fill(fill, {"_FillValue": 3}, dt, source="x.h5")
    assert decision.fill_value == fill
    assert "_FillValue" not in decision.attributes


# --- end to end: a Zarr v3 copy of the file reads like the file ------------------------


_NETCDF_INTERNAL = {
    "DIMENSION_LIST",
    "REFERENCE_LIST",
    "CLASS",
    "NAME",
    "_Netcdf4Coordinates",
    "_Netcdf4Dimid",
    "_nc3_strict",
    "_NCProperties",
}


def _plain(value: Any) -> Any:
    """An attribute value as JSON (what a parser stores for non-fill attributes)."""
    if isinstance(value, np.ndarray):
        return _plain(value.reshape(-1)[0]) if value.size == 1 else [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def copy_to_zarr(path: Path, store_path: Path, names: list[str]) -> None:
    """A Zarr v3 copy: same chunks, only allocated chunks written, fills per the policy."""
    group = zarr.create_group(zarr.storage.LocalStore(store_path), zarr_format=3)
    with (
        h5py.File(path, "r") as f,
        xr.open_dataset(path, engine="h5netcdf", phony_dims="access") as ref,
    ):
        for name in names:
            dset = f[name]
            decision = decide(dset)
            attrs = {
                k: _plain(v) for k, v in decision.attributes.items() if k not in _NETCDF_INTERNAL
            }
            chunks = dset.chunks or dset.shape
            array = group.create_array(
                name,
                shape=dset.shape,
                chunks=chunks,
                dtype=dset.dtype,
                fill_value=decision.fill_value,
                attributes=attrs,
                dimension_names=[str(d) for d in ref[name].dims],
                config={"write_empty_chunks": True},
            )
            if dset.chunks is None:
                if dset.id.get_storage_size():
                    array[...] = dset[...]
                continue
            for i in range(dset.id.get_num_chunks()):
                offset = dset.id.get_chunk_info(i).chunk_offset
                region = tuple(
                    slice(o, min(o + c, n))
                    for o, c, n in zip(offset, chunks, dset.shape, strict=True)
                )
                array[region] = dset[region]


def assert_reads_like_the_file(path: Path, store: Path, names: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "multiple fill values" included
        ours = xr.open_zarr(store, zarr_format=3, consolidated=False, decode_times=False)
        raw = xr.open_zarr(
            store, zarr_format=3, consolidated=False, mask_and_scale=False, decode_times=False
        )
        for name in names:
            mine = ours[name].values
            for engine in ("h5netcdf", "netcdf4"):
                kwargs: dict[str, Any] = {"phony_dims": "access"} if engine == "h5netcdf" else {}
                with xr.open_dataset(path, engine=engine, decode_times=False, **kwargs) as ref:
                    theirs = ref[name].values
                assert mine.shape == theirs.shape
                assert np.array_equal(np.isnan(mine), np.isnan(theirs)), (name, engine)
                if not {"scale_factor", "add_offset"} & set(ours[name].encoding):
                    # (packed data: JSON attributes lose scale_factor's float32 type, so
                    # xarray unpacks in float64; the mask and raw bits are compared)
                    assert np.array_equal(mine, theirs, equal_nan=True), (name, engine)
            with h5py.File(path, "r") as f:
                assert raw[name].values.tobytes() == f[name][...].tobytes(), name


def test_netcdf4_file_reads_like_netcdf(tmp_path: Path) -> None:
    path = tmp_path / "n.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", 6)
        nc.createDimension("x", 4)
        a = nc.createVariable("a", "f4", ("t", "x"), chunksizes=(2, 2), fill_value=-9999.0)
        a.missing_value = np.float32(-9999.0)
        a[0:2, :] = np.array([[1, -9999, 2, 3], [4, 5, 6, 7]], dtype="f4")  # rest unallocated
        b = nc.createVariable("b", "i2", ("t", "x"), chunksizes=(3, 4), fill_value=-32767)
        b[0:3, :] = np.arange(12, dtype="i2").reshape(3, 4)
        c = nc.createVariable("c", "f8", ("t",), fill_value=np.nan)
        c[:] = [1, np.nan, 3, 4, 5, 6]
        d = nc.createVariable("d", "u1", ("x",), fill_value=255)
        d[:] = [0, 255, 1, 2]
        e = nc.createVariable("e", "f4", ("t", "x"), chunksizes=(2, 4), fill_value=F32_MAX)
        e[0:2, :] = np.arange(8, dtype="f4").reshape(2, 4)
    names = ["a", "b", "c", "d", "e"]
    copy_to_zarr(path, tmp_path / "n.zarr", names)
    assert_reads_like_the_file(path, tmp_path / "n.zarr", names)


# --- the corpus: files flagged fillmsg / fill≠attr --------------------------------------

CORPUS_HDF5 = [
    "OPENDAP+hdf5_handler/t_invalid_fvalue.h5",
    "Unidata+netcdf-c/nctest_netcdf4_classic.nc",
    "Unidata+netcdf-c/ref_nc_test_netcdf4_4_0.nc",
    "corteva+rioxarray/tmmx_20190121.nc",
    "fsspec+kerchunk/air_linked.nc",
    "jjhelmus+pyfive/fillvalue_earliest.hdf5",
    "jjhelmus+pyfive/fillvalue_latest.hdf5",
    "nasa+harmony-opendap-subsetter/f16_ssmis_20200102v7.nc",
    "nasa+harmony-trajectory-subsetter/ATL03_indexbegin_start_end_FVs.h5",
    "podaac+l2ss-py/SS_MODIS_A-JPL-L2P-v2014.0.nc",
    "szcom+rnnlib/fill_old.h5",
]


def _datasets(f: h5py.File) -> list[h5py.Dataset]:
    found: list[h5py.Dataset] = []
    f.visititems(lambda _, obj: found.append(obj) if isinstance(obj, h5py.Dataset) else None)
    return found


@pytest.mark.corpus
@pytest.mark.parametrize("relpath", CORPUS_HDF5)
def test_corpus_fill_value_is_what_hdf5_returns(corpus_dir: Path, relpath: str) -> None:
    with h5py.File(corpus_dir / relpath, "r") as f:
        user_defined = 0
        for dset in _datasets(f):
            if dset.dtype.kind not in "biufcS":
                continue
            plist = dset.id.get_create_plist()
            user_defined += plist.fill_value_defined() == h5d.FILL_VALUE_USER_DEFINED
            user_defined += "_FillValue" in dset.attrs
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FillValueWarning)
                decision = decide(dset)
            if plist.fill_value_defined() == h5d.FILL_VALUE_UNDEFINED:
                # h5py refuses to read an undefined fill; Zarr needs one: the default
                with pytest.raises(RuntimeError, match="undefined"):
                    _ = dset.fillvalue
                assert bits(decision.fill_value, dset.dtype) == bits(0, dset.dtype)
                continue
            assert bits(decision.fill_value, dset.dtype) == bits(dset.fillvalue, dset.dtype)
            if unallocated(dset) and dset.chunks is None:
                # contiguous storage never written: the library returns the fill value
                first = dset[tuple(0 for _ in dset.shape)] if dset.shape else dset[()]
                assert bits(decision.fill_value, dset.dtype) == bits(first, dset.dtype)
            fill_attrs = {
                k: v for k, v in decision.attributes.items() if k in ("_FillValue", "missing_value")
            }
            json.dumps(fill_attrs, allow_nan=False)  # strict JSON, as Icechunk requires
            if "_FillValue" in decision.attributes:
                decoded = FillValueCoder.decode(decision.attributes["_FillValue"], dset.dtype)
                attr = np.asarray(dset.attrs["_FillValue"]).reshape(-1)[0]
                assert bits(decoded, dset.dtype) == bits(attr, dset.dtype)
    assert user_defined, "the corpus notes flag these files: fill messages or fill≠attr"


@pytest.mark.corpus
def test_corpus_fill_not_equal_attr_out_of_range(corpus_dir: Path) -> None:
    # fill≠attr: uint8 / uint16 datasets with _FillValue -127 / -32768 (int8 / int16)
    path = corpus_dir / "OPENDAP+hdf5_handler/t_invalid_fvalue.h5"
    with h5py.File(path, "r") as f:
        for name, dtype in (("temp", "uint8"), ("temp2", "uint16")):
            with pytest.warns(FillValueWarning, match=rf"t_invalid_fvalue\.h5: /{name}.*{dtype}"):
                decision = decide(f[name])
            assert "_FillValue" not in decision.attributes
            assert decision.fill_value == 0
            with pytest.raises(FillValueError, match=r"t_invalid_fvalue\.h5"):
                decide(f[name], on_out_of_range="raise")


@pytest.mark.corpus
def test_corpus_tmmx_fill_and_missing_value(corpus_dir: Path, tmp_path: Path) -> None:
    path = corpus_dir / "corteva+rioxarray/tmmx_20190121.nc"
    with h5py.File(path, "r") as f:
        decision = decide(f["air_temperature"])
    # _FillValue uint16 32767 and missing_value int16 32767: one sentinel
    assert decision.attributes["_FillValue"] == 32767
    assert decision.attributes["missing_value"] == 32767
    names = ["air_temperature", "lat", "lon"]
    copy_to_zarr(path, tmp_path / "tmmx.zarr", names)
    assert_reads_like_the_file(path, tmp_path / "tmmx.zarr", names)


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("relpath", "names", "warns"),
    [
        (
            "podaac+l2ss-py/SS_MODIS_A-JPL-L2P-v2014.0.nc",
            ["sea_surface_temperature", "sst_dtime", "lat", "lon"],
            False,
        ),
        ("fsspec+kerchunk/air_linked.nc", ["air", "lat", "lon"], False),
        # fill≠attr, out of range: the sentinels are dropped, values equal, nothing masked
        ("OPENDAP+hdf5_handler/t_invalid_fvalue.h5", ["temp", "temp2"], True),
    ],
)
def test_corpus_netcdf_reads_like_netcdf(
    corpus_dir: Path, tmp_path: Path, relpath: str, names: list[str], warns: bool
) -> None:
    path = corpus_dir / relpath
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        copy_to_zarr(path, tmp_path / "c.zarr", names)
    assert bool([w for w in record if w.category is FillValueWarning]) == warns
    assert_reads_like_the_file(path, tmp_path / "c.zarr", names)
