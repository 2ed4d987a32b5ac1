"""GDAL metadata, fill values and georeferencing of the TIFF parser's datasets."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from fixtures import make_tiff_fixtures
from virtualizarr_fill.errors import FillValueError
from virtualizarr_fill.fill.decision import FillValueWarning
from virtualizarr_fill.tiff import TIFFParser
from virtualizarr_fill.tiff.metadata import parse_gdal_metadata, scale_offset_attributes

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")
pyproj = pytest.importorskip("pyproj")

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
NAMES = [
    "gdal_nodata_scale_offset",
    "gdal_nan_nodata_float",
    "gdal_uint8_nodata_out_of_range",
    "gdal_point_geo",
    "gdal_rotated",
    "gdal_cog_overviews_mask",
    "strip_short_none",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_tiff_fixtures.write_fixtures(tmp_path_factory.mktemp("tiff-metadata"), NAMES)


def parse(path: Path, **options: Any) -> Any:
    return TIFFParser(**options)("file://" + str(path.resolve()), REGISTRY)


def open_ds(path: Path, **options: Any) -> xr.Dataset:
    return xr.open_zarr(parse(path, **options), zarr_format=3, consolidated=False)


def attrs_of(path: Path, **options: Any) -> dict[str, Any]:
    array = zarr.open_array(store=parse(path, **options), path="band_data", mode="r")
    return dict(array.attrs)


# -- GDAL metadata --------------------------------------------------------------------------


def test_band_scale_offset_become_cf_and_other_scale_items_are_renamed(
    files: dict[str, Path],
) -> None:
    attrs = attrs_of(files["gdal_nodata_scale_offset"])
    assert attrs["scale_factor"] == 0.01
    assert attrs["add_offset"] == 5.0
    # dataset items of the same names (another convention) must not reach CF decoding
    assert attrs["gdal_scale_factor"] == "10"
    assert attrs["gdal_add_offset"] == "3"
    assert attrs["units"] == "K"


@pytest.mark.corpus
def test_modis_hdf4_scale_factor_is_not_applied_as_cf(corpus_dir: Path) -> None:
    path = (
        corpus_dir / "cogeotiff+rio-tiler-pds" / "MCD43A4.A2017006.h21v11.006.2017018074804_B01.TIF"
    )
    attrs = attrs_of(path)
    assert attrs["gdal_scale_factor"] == "0.0001"  # HDF4 item, kept under a safe name
    assert attrs["scale_factor"] == pytest.approx(0.0001)  # GDAL's band SCALE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = open_ds(path)["band_data"].values
        theirs = xr.open_dataset(path, engine="rasterio")["band_data"].values
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_per_band_scales_are_lists_not_cf() -> None:
    metadata = parse_gdal_metadata(
        '<GDALMetadata><Item name="SCALE" sample="0" role="scale">2</Item>'
        '<Item name="SCALE" sample="1" role="scale">3</Item>'
        '<Item name="OFFSET" sample="0" role="offset">1</Item>'
        '<Item name="OFFSET" sample="1" role="offset">1</Item></GDALMetadata>'
    )
    assert scale_offset_attributes(metadata, 2) == {"scales": [2.0, 3.0], "add_offset": 1.0}


def test_metadata_domains_and_bands() -> None:
    metadata = parse_gdal_metadata(
        '<GDALMetadata><Item name="A">1</Item>'
        '<Item name="B" domain="IMAGE_STRUCTURE">2</Item>'
        '<Item name="DESCRIPTION" sample="0" role="description">red</Item></GDALMetadata>'
    )
    assert metadata.dataset == {"A": "1", "IMAGE_STRUCTURE:B": "2"}
    assert metadata.bands == {0: {"DESCRIPTION": "red"}}


# -- fill values ----------------------------------------------------------------------------------


def test_nodata_becomes_fill_value_and_rioxarray_sees_it(files: dict[str, Path]) -> None:
    path = files["gdal_nodata_scale_offset"]
    array = zarr.open_array(store=parse(path), path="band_data", mode="r")
    assert array.metadata.fill_value == -9999
    assert attrs_of(path)["gdal_no_data"] == "-9999"
    ds = open_ds(path)
    assert ds["band_data"].rio.encoded_nodata == -9999
    with rasterio.open(path) as src:
        assert src.nodata == ds["band_data"].rio.encoded_nodata


@pytest.mark.parametrize("mask_with_fill", [False, True])
def test_nan_nodata_mask_equals_rioxarray(files: dict[str, Path], mask_with_fill: bool) -> None:
    path = files["gdal_nan_nodata_float"]
    ds = xr.open_zarr(
        parse(path),
        zarr_format=3,
        consolidated=False,
        use_zarr_fill_value_as_mask=mask_with_fill,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = xr.open_dataset(path, engine="rasterio")["band_data"].values
    got = ds["band_data"].values
    assert np.isnan(got).sum() == 18
    np.testing.assert_array_equal(got, expected)


def test_out_of_range_nodata_raises_by_default(files: dict[str, Path]) -> None:
    with pytest.raises(FillValueError, match=r"nodata_out_of_range\.tif.*-10000.*uint8"):
        parse(files["gdal_uint8_nodata_out_of_range"])


def test_out_of_range_nodata_can_be_downgraded(files: dict[str, Path]) -> None:
    path = files["gdal_uint8_nodata_out_of_range"]
    with pytest.warns(FillValueWarning, match="-10000"):
        attrs = attrs_of(path, on_fill_out_of_range="warn")
    assert "_FillValue" not in attrs
    with rasterio.open(path) as src:
        expected = src.read()
    with pytest.warns(FillValueWarning, match="-10000"):
        ds = open_ds(path, on_fill_out_of_range="warn")
    np.testing.assert_array_equal(ds["band_data"], expected)


def test_no_fill_information_means_no_fill_attribute(files: dict[str, Path]) -> None:
    attrs = attrs_of(files["strip_short_none"])
    assert "_FillValue" not in attrs
    assert "gdal_no_data" not in attrs


# -- georeferencing ------------------------------------------------------------------------------


def test_crs_and_geotransform_match_rioxarray(files: dict[str, Path]) -> None:
    path = files["gdal_cog_overviews_mask"]
    ours = open_ds(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = xr.open_dataset(path, engine="rasterio")
    assert pyproj.CRS.from_wkt(ours["spatial_ref"].attrs["crs_wkt"]) == pyproj.CRS.from_wkt(
        theirs["spatial_ref"].attrs["crs_wkt"]
    )
    ours_gt = [float(v) for v in ours["spatial_ref"].attrs["GeoTransform"].split()]
    theirs_gt = [float(v) for v in theirs["spatial_ref"].attrs["GeoTransform"].split()]
    assert ours_gt == theirs_gt
    assert ours.rio.crs == theirs.rio.crs
    np.testing.assert_array_equal(ours["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(ours["y"].values, theirs["y"].values)


def test_pixel_is_point_coordinates_match_rioxarray(files: dict[str, Path]) -> None:
    path = files["gdal_point_geo"]
    ours = open_ds(path)
    assert ours.attrs["AREA_OR_POINT"] == "Point"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = xr.open_dataset(path, engine="rasterio")
    np.testing.assert_array_equal(ours["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(ours["y"].values, theirs["y"].values)


def test_rotated_transform_kept_as_attributes_without_xy(files: dict[str, Path]) -> None:
    ours = open_ds(files["gdal_rotated"])
    assert "x" not in ours.coords and "y" not in ours.coords
    attrs = ours["spatial_ref"].attrs
    assert "ModelTransformation" in attrs
    with rasterio.open(files["gdal_rotated"]) as src:
        expected = src.transform
    assert [float(v) for v in attrs["GeoTransform"].split()] == list(expected.to_gdal())


def test_non_georeferenced_file_has_no_spatial_ref(files: dict[str, Path]) -> None:
    ds = open_ds(files["strip_short_none"])
    assert "spatial_ref" not in ds.variables
    assert "grid_mapping" not in ds["band_data"].attrs
    np.testing.assert_array_equal(ds["band"].values, [1])
