"""Variables of a parsed file loaded lazily (``loadable_variables``) read the file's values,
also after the dataset was pickled, as dask and process pools send it between processes."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import from_origin

from tests._manifest_builders import local_registry


def test_lazily_loaded_variable_survives_pickling(tmp_path: Path) -> None:
    from virtualizarr_fill.tiff.parser import TIFFParser

    path = tmp_path / "tile.tif"
    values = np.random.default_rng(3).integers(0, 60000, (1, 40, 24), dtype=np.uint16)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=24,
        height=40,
        count=1,
        dtype="uint16",
        crs="EPSG:32633",
        transform=from_origin(500000.0, 4000000.0, 10.0, 10.0),
        compress="deflate",
        blockysize=16,
    ) as dst:
        dst.write(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = TIFFParser()(f"file://{path}", local_registry())
        ds = store.to_virtual_dataset(loadable_variables=["band_data", "y"])
    copy = pickle.loads(pickle.dumps(ds))
    with rasterio.open(path) as src:
        expected = src.read()
    for dataset in (copy, ds):
        band = dataset["band_data"].values
        assert band.dtype == expected.dtype
        np.testing.assert_array_equal(band, expected)
