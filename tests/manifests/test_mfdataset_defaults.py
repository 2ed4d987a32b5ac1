"""VirtualiZarr's ``open_virtual_mfdataset`` with the TIFF parser and xarray's default
combining arguments, as VirtualiZarr's documentation calls it: only ``combine`` and
``concat_dim``.

Each GeoTIFF brings a scalar ``spatial_ref`` that is not concatenated: with xarray's
defaults (``compat="no_conflicts"``) the first file's array is compared with every other
file's and filled from it through ``np.where``. The result, written to a real Icechunk
repository and read back, must equal ``xr.open_mfdataset`` with rioxarray's engine (GDAL)
of the same files, values and coordinates, bit for bit.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write, local_registry


def _column(directory: Path, count: int) -> list[Path]:
    """``count`` georeferenced tiles of 40 x 24 uint16, Deflate strips of 16 rows (the
    last one short), tile k directly south of tile k - 1."""
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(7)
    paths = []
    for k in range(count):
        path = directory / f"tile_{k}.tif"
        with rasterio.open(
            path,
            "w",
            driver="GTiff",
            width=24,
            height=40,
            count=1,
            dtype="uint16",
            crs="EPSG:32633",
            transform=from_origin(500000.0, 4000000.0 - k * 400.0, 10.0, 10.0),
            compress="deflate",
            blockysize=16,
        ) as dst:
            dst.write(rng.integers(0, 60000, (1, 40, 24), dtype=np.uint16))
        paths.append(path)
    return paths


@pytest.mark.parametrize("count", [2, 5])
def test_default_combine_arguments_equal_gdal(tmp_path: Path, count: int) -> None:
    from rasterio.crs import CRS
    from virtualizarr import open_virtual_mfdataset

    from virtualizarr_fill.tiff.parser import TIFFParser

    data = tmp_path / "data"
    data.mkdir()
    paths = _column(data, count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        vds = open_virtual_mfdataset(
            [str(p) for p in paths],
            registry=local_registry(),
            parser=TIFFParser(),
            combine="nested",
            concat_dim="y",
        )
        expected = xr.open_mfdataset(
            [str(p) for p in paths],
            engine="rasterio",
            mask_and_scale=False,
            combine="nested",
            concat_dim="y",
        ).load()
    repo = icechunk_repo(tmp_path / "repo", data)
    icechunk_write(repo, vds)
    got = icechunk_read(repo)
    assert got["band_data"].dims == expected["band_data"].dims
    np.testing.assert_array_equal(got["band_data"].values, expected["band_data"].values)
    assert got["band_data"].dtype == expected["band_data"].dtype
    for name in ("band", "x", "y"):
        np.testing.assert_array_equal(got[name].values, expected[name].values, err_msg=name)
    # the same CRS (GDAL writes WKT1, the parser WKT2)
    ours, gdal = (CRS.from_wkt(d["spatial_ref"].attrs["crs_wkt"]) for d in (got, expected))
    assert ours == gdal
    # the combined y is written as one chunk, not one per file
    import zarr

    stored = zarr.open_group(repo.readonly_session("main").store, mode="r", zarr_format=3)
    assert stored["y"].chunks == (40 * count,)
