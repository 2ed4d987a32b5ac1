"""Format detection from signatures, and AutoParser choosing the parser per file.

Every file is written by the format's own library (tifffile, h5py, netCDF4); values read
through the virtual store are compared with tifffile's and h5py's.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Literal

import h5py
import netCDF4
import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

from benchmarks._counting_store import CountingStore
from virtualizarr_fill import TIFFParser
from virtualizarr_fill.errors import (
    NotATiffError,
    NotHDF5Error,
    StoreReadError,
    VirtualizarrFillError,
)
from virtualizarr_fill.formats import (
    AutoParser,
    FileFormat,
    UnknownFormatError,
    detect_format,
    format_of_head,
)

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
IMAGE = np.arange(30 * 7, dtype=np.uint16).reshape(30, 7)


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


def _read(vds: xr.Dataset, name: str) -> np.ndarray:
    """Values of a virtual variable, decoded by zarr through the ManifestStore."""
    from tests._manifest_builders import read_manifest_array

    return np.asarray(read_manifest_array(vds[name].data))


@pytest.mark.parametrize(
    ("byteorder", "bigtiff"), [("<", False), (">", False), ("<", True), (">", True)]
)
def test_tiff_variants(tmp_path: Path, byteorder: Literal["<", ">"], bigtiff: bool) -> None:
    path = tmp_path / "image.tif"
    tifffile.imwrite(path, IMAGE, byteorder=byteorder, bigtiff=bigtiff, rowsperstrip=8)
    with tifffile.TiffFile(path) as tif:  # the file really is the variant under test
        assert tif.is_bigtiff == bigtiff and tif.byteorder == byteorder
    assert detect_format(_uri(path), REGISTRY) is FileFormat.TIFF
    vds = open_virtual_dataset(_uri(path), registry=REGISTRY, parser=AutoParser())
    np.testing.assert_array_equal(_read(vds, "band_data")[0], tifffile.imread(path))


@pytest.mark.parametrize("userblock", [0, 512, 1024, 128 * 1024])
def test_hdf5_signature_after_user_block(tmp_path: Path, userblock: int) -> None:
    path = tmp_path / "data.h5"
    data = np.linspace(0, 1, 60, dtype=np.float32).reshape(6, 10)
    with h5py.File(path, "w", userblock_size=userblock or None) as f:
        f.create_dataset("values", data=data, chunks=(4, 10))
    head = path.read_bytes()[:8]
    assert (format_of_head(head) is FileFormat.HDF5) == (userblock == 0)
    assert detect_format(_uri(path), REGISTRY) is FileFormat.HDF5
    vds = open_virtual_dataset(_uri(path), registry=REGISTRY, parser=AutoParser())
    with h5py.File(path) as f:
        np.testing.assert_array_equal(_read(vds, "values"), f["values"][...])


@pytest.mark.parametrize(
    ("netcdf_format", "variant"),
    [
        ("NETCDF3_CLASSIC", "CDF-1"),
        ("NETCDF3_64BIT_OFFSET", "CDF-2"),
        ("NETCDF3_64BIT_DATA", "CDF-5"),
    ],
)
def test_netcdf3_is_refused_clearly(tmp_path: Path, netcdf_format: Any, variant: str) -> None:
    path = tmp_path / "classic.nc"
    with netCDF4.Dataset(path, "w", format=netcdf_format) as nc:
        nc.createDimension("x", 3)
        nc.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]
    for call in (
        lambda: detect_format(_uri(path), REGISTRY),
        lambda: AutoParser()(_uri(path), REGISTRY),
    ):
        with pytest.raises(NotHDF5Error, match="netCDF-3") as info:
            call()
        assert str(path) in str(info.value) and variant in str(info.value)


def test_unknown_format_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, not an image")
    with pytest.raises(UnknownFormatError, match="unrecognised file format") as info:
        AutoParser()(_uri(path), REGISTRY)
    assert str(path) in str(info.value)
    # one project error, catchable as either "not a TIFF" or "not HDF5"
    assert isinstance(info.value, NotATiffError)
    assert isinstance(info.value, NotHDF5Error)
    assert isinstance(info.value, VirtualizarrFillError)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tif"
    empty.write_bytes(b"")
    with pytest.raises(UnknownFormatError, match="empty"):
        detect_format(_uri(empty), REGISTRY)
    with pytest.raises(StoreReadError, match=r"missing\.tif"):
        detect_format(_uri(tmp_path / "missing.tif"), REGISTRY)


def test_tiff_costs_no_extra_request(tmp_path: Path) -> None:
    path = tmp_path / "image.tif"
    tifffile.imwrite(path, IMAGE, rowsperstrip=8)
    auto = CountingStore(LocalStore())
    AutoParser()(_uri(path), ObjectStoreRegistry({"file://": auto}))
    direct = CountingStore(LocalStore())
    TIFFParser()(_uri(path), ObjectStoreRegistry({"file://": direct}))
    assert auto.stats.requests == direct.stats.requests == 1


def test_options_pass_through_and_pickle(tmp_path: Path) -> None:
    from virtualizarr_fill.hdf5 import HDF5Parser

    pages = tmp_path / "pages.tif"
    with tifffile.TiffWriter(pages) as tif:
        tif.write(IMAGE, rowsperstrip=8)
        tif.write(IMAGE[::-1].copy(), rowsperstrip=8)
    netcdf = tmp_path / "vars.h5"
    with h5py.File(netcdf, "w") as f:
        f["keep"] = np.arange(5.0)
        f["drop"] = np.arange(5.0)

    parser = AutoParser(tiff=TIFFParser(ifd=1), hdf5=HDF5Parser(drop_variables=["drop"]))
    restored = pickle.loads(pickle.dumps(parser))
    assert restored.tiff == parser.tiff

    second = open_virtual_dataset(_uri(pages), registry=REGISTRY, parser=restored)
    np.testing.assert_array_equal(_read(second, "band_data")[0], tifffile.imread(pages, key=1))
    hdf5 = open_virtual_dataset(_uri(netcdf), registry=REGISTRY, parser=restored)
    assert set(hdf5.variables) == {"keep"}
    np.testing.assert_array_equal(_read(hdf5, "keep"), np.arange(5.0))


def test_every_parser_returns_a_store_named_by_its_file(tmp_path: Path) -> None:
    """zarr formats ``str(store)`` into every array it opens: it must name the file, in
    one line that does not grow with the number of arrays, and survive pickling. Paths
    that name no node are missing (upstream served their deepest ancestor instead)."""
    from virtualizarr.manifests import ManifestStore

    from virtualizarr_fill import HDF5Parser

    tif = tmp_path / "image.tif"
    tifffile.imwrite(tif, IMAGE)
    few, many = tmp_path / "few.h5", tmp_path / "many.h5"
    for path, count in ((few, 2), (many, 200)):
        with h5py.File(path, "w") as f:
            for i in range(count):
                f[f"v{i}"] = IMAGE + i
    stores = [
        (TIFFParser()(_uri(tif), REGISTRY), tif),
        (AutoParser()(_uri(tif), REGISTRY), tif),
        (HDF5Parser()(_uri(few), REGISTRY), few),
        (AutoParser()(_uri(many), REGISTRY), many),
    ]
    for store, path in stores:
        assert isinstance(store, ManifestStore)
        assert str(store) == f"ManifestStore({_uri(path)!r})"
        assert repr(store) == str(store)
        restored = pickle.loads(pickle.dumps(store))
        assert str(restored) == str(store)
        root = zarr.open_group(restored, mode="r", zarr_format=3)
        name, expected = ("band_data", IMAGE[np.newaxis]) if path == tif else ("v1", IMAGE + 1)
        np.testing.assert_array_equal(root[name][...], expected)
        assert repr(root[name]).startswith(f"<Array {store}/{name} ")
        for missing in ("no such array", f"{name}/below an array"):
            with pytest.raises(KeyError):
                root[missing]
            assert store.get_sync(f"{missing}/zarr.json") is None  # type: ignore[attr-defined]
        with pytest.raises(FileNotFoundError):
            xr.open_dataset(store, engine="zarr", group="typo", consolidated=False)
