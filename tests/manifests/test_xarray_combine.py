"""xarray's combining functions on virtual datasets of real files.

xarray hands the wrapped ManifestArrays to ``np.concatenate`` / ``np.stack``, which
VirtualiZarr dispatches to virtualizarr-fill's implementations. Results are read back
through ManifestStore and compared with numpy combinations of the native reads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests._manifest_builders import (
    concat_fixtures,
    hdf5_manifest_array,
    native_hdf5,
    native_tiff,
    read_manifest_array,
    tiff_manifest_array,
    virtual_dataset,
    with_attributes,
)
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.fill import FillValueWarning
from virtualizarr_fill.fill.conflicts import fill_conflicts
from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, edge_handling_of

__all__ = ["concat_fixtures"]


def _tiff_vds(fx: dict[str, Path], name: str, **attrs: object) -> xr.Dataset:
    return virtual_dataset({"band": with_attributes(tiff_manifest_array(fx[name]), **attrs)})


def _h5_vds(fx: dict[str, Path], name: str) -> xr.Dataset:
    return virtual_dataset({"data": hdf5_manifest_array(fx[name])})


def test_concat_along_existing_dimension(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_padded_zlib_0", "strip_short_zlib_1", "strip_padded_zlib_2"]
    combined = xr.concat([_tiff_vds(concat_fixtures, n) for n in names], dim="y")
    assert combined.band.shape == (450, 21)
    assert edge_handling_of(combined.band.data.metadata.codecs) is EdgeHandling.TRUNCATE
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    np.testing.assert_array_equal(read_manifest_array(combined.band.data), expected)


def test_concat_along_new_dimension(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_short_0", "strip_padded_1"]
    combined = xr.concat([_tiff_vds(concat_fixtures, n) for n in names], dim="t")
    assert combined.band.dims == ("t", "y", "x")
    expected = np.stack([native_tiff(concat_fixtures[n]) for n in names])
    np.testing.assert_array_equal(read_manifest_array(combined.band.data), expected)


def test_combine_nested_tile_mosaic(concat_fixtures: dict[str, Path]) -> None:
    names = [["tiled_0", "tiled_1"], ["tiled_2", "tiled_0"]]
    nested = [[_tiff_vds(concat_fixtures, n) for n in column] for column in names]
    # the outer list runs along x (concatenated first, a crop), the inner along y
    mosaic = xr.combine_nested(nested, concat_dim=["x", "y"])
    natives = [[native_tiff(concat_fixtures[n]) for n in column] for column in names]
    expected = np.block([[natives[0][0], natives[1][0]], [natives[0][1], natives[1][1]]])
    assert mosaic.band.shape == expected.shape == (300, 300)
    np.testing.assert_array_equal(read_manifest_array(mosaic.band.data), expected)


def test_combine_nested_hdf5_inner_and_outer_axes(concat_fixtures: dict[str, Path]) -> None:
    names = [["chunked_gzip_0", "chunked_gzip_1"], ["chunked_gzip_2", "chunked_gzip_1"]]
    nested = [[_h5_vds(concat_fixtures, n) for n in row] for row in names]
    combined = xr.combine_nested(nested, concat_dim=["y", "t"])
    natives = [[native_hdf5(concat_fixtures[n]) for n in row] for row in names]
    # result[t-block j, y-block i] = nested[i][j]
    expected = np.concatenate(
        [np.concatenate([natives[0][j], natives[1][j]], axis=1) for j in range(2)], axis=0
    )
    np.testing.assert_array_equal(read_manifest_array(combined.data.data), expected)


def test_combine_by_coords(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_short_0", "strip_padded_1", "strip_short_2"]
    pieces = [
        _tiff_vds(concat_fixtures, n).assign_coords(y=np.arange(150) + 150 * i)
        for i, n in enumerate(names)
    ]
    combined = xr.combine_by_coords([pieces[2], pieces[0], pieces[1]])
    np.testing.assert_array_equal(combined.y.values, np.arange(450))
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    np.testing.assert_array_equal(read_manifest_array(combined.band.data), expected)


def test_fill_attribute_difference_is_refused(concat_fixtures: dict[str, Path]) -> None:
    a = _tiff_vds(concat_fixtures, "strip_short_0", _FillValue=0)
    b = _tiff_vds(concat_fixtures, "strip_short_1", _FillValue=1)
    with pytest.raises(IncompatibleArraysError, match="_FillValue differs") as info:
        xr.concat([a, b], dim="y")
    assert "strip_short_0.tif" in str(info.value) and "strip_short_1.tif" in str(info.value)
    with fill_conflicts("drop"), pytest.warns(FillValueWarning):
        combined = xr.concat([a, b], dim="y")
    assert "_FillValue" not in combined.band.data.metadata.attributes
    agreed = xr.concat([a, _tiff_vds(concat_fixtures, "strip_short_1", _FillValue=0)], dim="y")
    assert agreed.band.attrs["_FillValue"] == 0


def test_zarr_fill_value_and_codec_differences_are_refused(
    concat_fixtures: dict[str, Path],
) -> None:
    plain, filled = (
        _h5_vds(concat_fixtures, "chunked_0"),
        _h5_vds(concat_fixtures, "chunked_fill_1"),
    )
    with pytest.raises(IncompatibleArraysError, match="Zarr fill_value differs"):
        xr.concat([plain, filled], dim="t")
    gzip = _h5_vds(concat_fixtures, "chunked_gzip_1")
    with pytest.raises(IncompatibleArraysError, match="different codecs") as info:
        xr.combine_nested([plain, gzip], concat_dim="t")
    assert "chunked_gzip_1.h5" in str(info.value)


def _native_bands(path: Path) -> np.ndarray:
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path) as src:
            return np.asarray(src.read())


def test_tiff_parser_pixel_interleaved_strips(concat_fixtures: dict[str, Path]) -> None:
    # Band-first arrays over (y, x, sample) storage: the transpose decides truncation.
    import virtualizarr

    from tests._manifest_builders import file_url, local_registry
    from virtualizarr_fill.tiff.parser import TIFFParser

    paths = [concat_fixtures[f"rgb_padded_{k}"] for k in range(3)]
    vds = [
        virtualizarr.open_virtual_dataset(
            file_url(p), registry=local_registry(), parser=TIFFParser()
        )
        for p in paths
    ]
    natives = [_native_bands(p) for p in paths]
    along_y = xr.concat(vds, dim="y", coords="minimal", compat="override").band_data.data
    assert edge_handling_of(along_y.metadata.codecs) is EdgeHandling.TRUNCATE
    np.testing.assert_array_equal(read_manifest_array(along_y), np.concatenate(natives, axis=1))
    along_x = xr.concat(vds, dim="x", coords="minimal", compat="override").band_data.data
    assert edge_handling_of(along_x.metadata.codecs) is EdgeHandling.NONE
    np.testing.assert_array_equal(read_manifest_array(along_x), np.concatenate(natives, axis=2))
