"""What ``virtualizarr-fill build`` writes reads as the netCDF file does: kerchunk
references in the format ``auto`` picks (JSON and parquet) and Icechunk repositories,
compared with xarray reading the file with h5netcdf (default decoding), values, masks,
data types and attributes.

The corpus files here are real netCDF-4 files with 0-d variables, header fill values that
are valid data, netCDF's default fill values in unwritten chunks, and attributes holding
infinities.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import virtualizarr_fill
from tests._cli import error_line as _error_line
from tests.conftest import CORPUS_DIR
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, main


@pytest.fixture(scope="module")
def corpus() -> Path:
    """The corpus; these tests fail, never skip, when it is missing."""
    if not (CORPUS_DIR / "MANIFEST.tsv").is_file():
        pytest.fail(f"conformance corpus not found at {CORPUS_DIR}")
    return CORPUS_DIR


def _build(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    code = main(["build", *[str(a) for a in argv]])
    _, err = capsys.readouterr()
    return code, err


def _open(out: Path, **options: Any) -> xr.Dataset:
    if out.suffix == ".icechunk":
        return virtualizarr_fill.open_icechunk(out, **options)
    return virtualizarr_fill.open_kerchunk(out, **options)


def _packed_as_float32(var: xr.Variable) -> bool:
    """Packed with float32 scale_factor/add_offset: JSON attributes cannot say float32,
    so xarray unpacks the Zarr copy to float64 (the stored integers are compared exactly
    undecoded)."""
    return any(isinstance(var.encoding.get(k), np.float32) for k in ("scale_factor", "add_offset"))


def assert_reads_as_h5netcdf(out: Path, source: Path) -> None:
    """Every variable of ``source`` read through ``out`` as xarray reads it with h5netcdf:
    undecoded bit for bit (data type included), decoded with the same mask, data type
    and values."""
    raw = _open(out, decode_cf=False).load()
    native_raw = xr.open_dataset(source, engine="h5netcdf", decode_cf=False).load()
    for name, expected in native_raw.variables.items():
        got = raw[name]
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape), name
        np.testing.assert_array_equal(got.values, expected.values, err_msg=f"{name} undecoded")

    ours = _open(out).load()
    native = xr.open_dataset(source, engine="h5netcdf").load()
    for name, expected in native.variables.items():
        got = ours[name]
        np.testing.assert_array_equal(
            pd.isnull(got.values), pd.isnull(expected.values), err_msg=f"{name} mask"
        )
        if _packed_as_float32(native[name]):
            valid = ~pd.isnull(expected.values)
            a, b = got.values[valid], expected.values[valid]
            # float32 arithmetic against float64: within a millionth of a packing step
            atol = 1e-6 * abs(float(native[name].encoding.get("scale_factor", 1.0)))
            if a.dtype.kind == "M":
                a, b, atol = a.astype("i8"), b.astype("i8"), 0.0
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=atol, err_msg=str(name))
            continue
        assert got.dtype == expected.dtype, name
        np.testing.assert_array_equal(got.values, expected.values, err_msg=str(name))


KERCHUNK_CORPUS = [
    # every variable 0-d or tiny, many integer types without _FillValue
    "Unidata+netcdf-c/ref_nc_test_netcdf4_4_0.nc",
    # netCDF's default fill in unwritten chunks, no _FillValue: needs format 3
    "Unidata+netcdf-c/nctest_netcdf4_classic.nc",
    # rainfall_rate: header fill 0 is valid data, no _FillValue
    "nasa+harmony-opendap-subsetter/f16_ssmis_20200102v7.nc",
    # 0-d time coordinates
    "corteva+rioxarray/tmmx_20190121.nc",
    "NCAS-CMS+pyfive/tests/data/issue23_A.nc",
]


@pytest.mark.corpus
@pytest.mark.parametrize("suffix", ["json", "parquet"])
@pytest.mark.parametrize("relpath", KERCHUNK_CORPUS)
def test_default_kerchunk_references_read_as_h5netcdf(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], relpath: str, suffix: str
) -> None:
    source = corpus / relpath
    out = tmp_path / f"refs.{suffix}"
    code, err = _build(capsys, source, "--out", out)
    assert code == EXIT_OK, err
    assert_reads_as_h5netcdf(out, source)


def _days(directory: Path, lengths: list[int]) -> list[Path]:
    """netCDF-4 files of daily steps, chunked by 2 along time."""
    directory.mkdir()
    paths, start = [], pd.Timestamp("2024-01-01")
    for length in lengths:
        path = directory / f"{start.date()}.nc"
        ds = xr.Dataset(
            {"t": (("time", "x"), np.ones((length, 3), "f4"))},
            coords={"time": pd.date_range(start, periods=length, freq="D")},
        )
        encoding = {"t": {"chunksizes": (2, 3)}, "time": {"units": "days since 2024-01-01"}}
        ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
        paths.append(path)
        start += pd.Timedelta(days=length)
    return paths


def test_forced_format_2_refusal_names_the_command_line_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _days(tmp_path / "days", [3, 3])  # chunks 2,1,2,1: a rectilinear grid
    out = tmp_path / "refs.json"
    code, err = _build(
        capsys, *paths, "--concat-dim", "time", "--out", out, "--kerchunk-format", "2"
    )
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "'t'" in line and "Zarr format 2" in line
    assert "--kerchunk-format 3" in line
    assert "zarr_format" not in line and "'dict'" not in line
    assert not out.exists()


@pytest.mark.corpus
def test_forced_format_2_refusal_for_unwritten_chunks(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = corpus / "Unidata+netcdf-c/nctest_netcdf4_classic.nc"
    out = tmp_path / "refs.json"
    code, err = _build(capsys, source, "--out", out, "--kerchunk-format", "2")
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "unwritten chunks" in line and "--kerchunk-format 3" in line
    assert not out.exists()


# --------------------------------------------------------------------------- attributes


def _inf_attributes(path: Path) -> Path:
    """A netCDF-4 file whose attributes hold ±inf (as netCDF-C's test files do)."""
    import netCDF4

    path.parent.mkdir(parents=True, exist_ok=True)
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 3)
        v = ds.createVariable("v", "f4", ("x",))
        v[:] = [1, 2, 3]
        ds.valid_range_f = np.array([-np.inf, np.inf], "f4")
        ds.title = "kept"
        v.actual_max = np.float32(np.inf)
        v.units = "K"
    return path


def _assert_same_attributes(
    ours: dict[str, Any], native: dict[str, Any], left_out: set[str]
) -> None:
    for name, expected in native.items():
        if name in left_out:
            assert name not in ours, name
            continue
        got = ours[name]
        if isinstance(expected, str):
            assert got == expected, name
        else:
            # JSON has no float32: compare in the file's type (inf stays inf)
            expected = np.asarray(expected)
            np.testing.assert_array_equal(np.asarray(got, dtype=expected.dtype), expected, name)


@pytest.mark.parametrize("suffix", ["icechunk", "json", "parquet"])
def test_infinite_attributes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    source = _inf_attributes(tmp_path / "data" / "inf_attr.nc")
    out = tmp_path / f"out.{suffix}"
    if suffix == "icechunk":
        from virtualizarr_fill.writers.attributes import NonFiniteAttributeWarning

        with pytest.warns(NonFiniteAttributeWarning) as caught:
            code, err = _build(capsys, source, "--out", out)
        named = sorted(m for w in caught if str(source) in (m := str(w.message)))
        assert len(named) == 2 and "'actual_max'" in named[0] and "'valid_range_f'" in named[1]
        left_out = {"actual_max", "valid_range_f"}
    else:
        # kerchunk references are read with Python's json, which keeps infinities
        code, err = _build(capsys, source, "--out", out)
        left_out = set()
    assert code == EXIT_OK, err
    assert_reads_as_h5netcdf(out, source)
    ours, native = _open(out), xr.open_dataset(source, engine="h5netcdf")
    _assert_same_attributes(ours.attrs, native.attrs, left_out)
    _assert_same_attributes(ours.v.attrs, native.v.attrs, left_out)


@pytest.mark.corpus
@pytest.mark.parametrize("suffix", ["icechunk", "json"])
def test_corpus_infinite_global_attributes(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    source = corpus / "Unidata+netcdf-c/ref_nc_test_netcdf4_4_0.nc"
    out = tmp_path / f"out.{suffix}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, err = _build(capsys, source, "--out", out)
    assert code == EXIT_OK, err
    assert_reads_as_h5netcdf(out, source)
    # the global attribute Gf and the attribute f of variable i hold -inf and inf
    left_out = {"Gf", "f"} if suffix == "icechunk" else set()
    messages = sorted(
        str(w.message) for w in caught if "NonFiniteAttribute" in type(w.message).__name__
    )
    assert len(messages) == len(left_out), messages
    if left_out:
        assert any("'Gf' of the root group" in m for m in messages)
        assert any("'f' of variable 'i'" in m for m in messages)
        # the file as the build names it (a corpus reached through a symlink resolved)
        named = (f"file://{source}: ", f"file://{source.resolve()}: ")
        assert all(m.startswith(named) for m in messages), messages
    ours, native = _open(out), xr.open_dataset(source, engine="h5netcdf")
    assert np.isinf(native.attrs["Gf"]).sum() == 2 and np.isinf(native.i.attrs["f"]).sum() == 2
    for got, expected in ((ours.attrs, native.attrs), (ours.i.attrs, native.i.attrs)):
        numeric = {k: v for k, v in expected.items() if not isinstance(v, bytes | str)}
        _assert_same_attributes(got, numeric, left_out)
