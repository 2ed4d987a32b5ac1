"""Zarr format 2 kerchunk references read as xarray reads the HDF5 file with h5netcdf:
0-d arrays, header fill values that are not the CF ``_FillValue``, and unwritten
chunks, which format 2 cannot always describe (then format 3 is written).

Files are written with h5py, parsed with HDF5Parser, written with ``to_kerchunk`` and
read back through fsspec's reference file system.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import virtualizarr
import xarray as xr

from tests._manifest_builders import file_url, local_registry
from virtualizarr_fill import open_kerchunk, to_kerchunk
from virtualizarr_fill.hdf5 import HDF5Parser
from virtualizarr_fill.writers.kerchunk import ZarrFormat2Error


def _dense(path: Path) -> Path:
    """Every chunk written; a scalar, a header fill (0) that is valid data and no
    _FillValue, and a _FillValue equal to the header fill."""
    with h5py.File(path, "w") as f:
        f.create_dataset("height", data=np.float64(2.0), fillvalue=7.0)
        rain = np.arange(16, dtype="f4").reshape(4, 4) % 3  # zeros are valid values
        f.create_dataset("rain", data=rain, chunks=(2, 2), fillvalue=0)
        counts = np.arange(16, dtype="i2").reshape(4, 4)
        counts[1, 2] = counts[3, 0] = -99
        masked = f.create_dataset("counts", data=counts, chunks=(2, 2), fillvalue=-99)
        masked.attrs["_FillValue"] = np.int16(-99)
    return path


def _sparse(path: Path, with_fill_attribute: bool) -> Path:
    """One of four chunks written; unwritten chunks hold the header fill 9.5."""
    with h5py.File(path, "w") as f:
        d = f.create_dataset("sparse", shape=(4, 4), dtype="f8", chunks=(2, 2), fillvalue=9.5)
        d[:2, :2] = [[0.0, 1.0], [9.5, 3.0]]
        if with_fill_attribute:
            d.attrs["_FillValue"] = np.float64(-1.0)
    return path


def _virtual(path: Path) -> xr.Dataset:
    return virtualizarr.open_virtual_dataset(
        file_url(path), registry=local_registry(), parser=HDF5Parser()
    )


def _assert_reads_as_h5netcdf(refs: Path, path: Path) -> None:
    ours = open_kerchunk(refs).load()
    native = xr.open_dataset(path, engine="h5netcdf").load()
    assert set(ours.variables) == set(native.variables)
    for name, expected in native.variables.items():
        got = ours[name]
        assert got.dtype == expected.dtype, name
        assert got.shape == expected.shape, name
        np.testing.assert_array_equal(got.values, expected.values, err_msg=str(name))


def test_scalars_and_header_fills_read_as_h5netcdf_in_format_2(tmp_path: Path) -> None:
    path = _dense(tmp_path / "dense.h5")
    refs = to_kerchunk(_virtual(path), format="dict")
    assert refs is not None
    store = refs["refs"]
    assert "height/0" in store and "height/" not in store
    for name in ("height", "rain", "counts"):
        zarray = json.loads(store[f"{name}/.zarray"])
        assert zarray["zarr_format"] == 2
        assert "attributes" not in zarray
        assert "_FillValue" not in json.loads(store[f"{name}/.zattrs"])
    # fill_value is the mask xarray applies to format 2: the CF _FillValue or nothing
    assert json.loads(store["rain/.zarray"])["fill_value"] is None
    assert json.loads(store["height/.zarray"])["fill_value"] is None
    assert json.loads(store["counts/.zarray"])["fill_value"] == -99

    for kind, target in (("json", tmp_path / "refs.json"), ("parquet", tmp_path / "refs.parq")):
        to_kerchunk(_virtual(path), str(target), format=kind)  # type: ignore[arg-type]
        _assert_reads_as_h5netcdf(target, path)


@pytest.mark.parametrize("with_fill_attribute", [False, True])
def test_unwritten_chunks_whose_header_fill_format_2_cannot_give_get_format_3(
    tmp_path: Path, with_fill_attribute: bool
) -> None:
    path = _sparse(tmp_path / "sparse.h5", with_fill_attribute)
    refs = to_kerchunk(_virtual(path), format="dict")
    assert refs is not None
    assert "sparse/zarr.json" in refs["refs"]  # format 3 chosen
    with pytest.raises(ZarrFormat2Error, match=r"'sparse'.*header fill value 9\.5"):
        to_kerchunk(_virtual(path), format="dict", zarr_format=2)
    for kind, target in (("json", tmp_path / "refs.json"), ("parquet", tmp_path / "refs.parq")):
        to_kerchunk(_virtual(path), str(target), format=kind)  # type: ignore[arg-type]
        _assert_reads_as_h5netcdf(target, path)


def test_unwritten_chunks_whose_header_fill_is_the_fill_value_stay_format_2(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sparse_fill.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("sparse", shape=(4, 4), dtype="f8", chunks=(2, 2), fillvalue=-1.0)
        d[:2, :2] = [[0.0, 1.0], [-1.0, 3.0]]
        d.attrs["_FillValue"] = np.float64(-1.0)
    refs = to_kerchunk(_virtual(path), format="dict")
    assert refs is not None
    assert json.loads(refs["refs"]["sparse/.zarray"])["fill_value"] == -1.0
    to_kerchunk(_virtual(path), str(tmp_path / "refs.json"), format="json")
    _assert_reads_as_h5netcdf(tmp_path / "refs.json", path)


@pytest.mark.parametrize("compression", ["lzw", "packbits"])
def test_codecs_without_a_format_2_name_are_written_as_format_3(
    tmp_path: Path, compression: str
) -> None:
    """imagecodecs' LZW and PackBits take no options, and VirtualiZarr's format 2
    conversion fails on a codec without a configuration: ``auto`` writes format 3, a
    forced format 2 is refused naming the codec."""
    import tifffile

    from virtualizarr_fill import TIFFParser

    path = tmp_path / f"{compression}.tif"
    values = np.random.default_rng(4).integers(0, 255, (32, 24), dtype=np.uint8)
    tifffile.imwrite(path, values, compression=compression, rowsperstrip=8)
    vds = virtualizarr.open_virtual_dataset(
        file_url(path), registry=local_registry(), parser=TIFFParser()
    )
    refs = tmp_path / "refs.json"
    to_kerchunk(vds, refs, format="json")
    assert json.loads(refs.read_text())["refs"]["band_data/zarr.json"]  # format 3
    np.testing.assert_array_equal(open_kerchunk(refs)["band_data"].values[0], values)
    with pytest.raises(ZarrFormat2Error, match=r"'band_data'.*codec .* \(no Zarr format 2 name\)"):
        to_kerchunk(vds, tmp_path / "v2.json", format="json", zarr_format=2)
