"""Inputs whose padded chunks lie inside the combined array (test utility): stores built
from them name ``virtualizarr_fill.crop`` (tiles padded in x) or
``virtualizarr_fill.truncate`` (chunks padded along the slowest axis)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

__all__ = ["padded_series", "padded_tiles"]


def padded_tiles(directory: Path) -> list[Path]:
    """2 x 2 GeoTIFF tiles of 40 x 40 pixels in 16-pixel internal tiles: each tile's last
    internal row and column are padded, and in the mosaic they lie inside the array."""
    import rasterio
    from rasterio.transform import from_origin

    directory.mkdir(parents=True)
    rng = np.random.default_rng(3)
    full = rng.integers(1, 60000, (1, 80, 80)).astype("uint16")
    paths = []
    for row in range(2):
        for col in range(2):
            path = directory / f"tile_{row}_{col}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=40, height=40, count=1, dtype="uint16",
                crs="EPSG:32633", transform=from_origin(500000 + col * 400, 4000000 - row * 400,
                                                        10, 10),
                nodata=0, compress="deflate", tiled=True, blockxsize=16, blockysize=16,
            ) as dst:  # fmt: skip
                dst.write(full[:, row * 40 : row * 40 + 40, col * 40 : col * 40 + 40])
            paths.append(path)
    return paths


def padded_series(directory: Path) -> list[Path]:
    """3 netCDF-4 files of 5 steps in chunks of 2 along time: each file's last chunk is
    stored padded, and in the series it lies inside the array."""
    directory.mkdir(parents=True)
    rng = np.random.default_rng(5)
    paths = []
    for i in range(3):
        path = directory / f"part_{i}.nc"
        with h5py.File(path, "w") as f:
            time = f.create_dataset("time", data=np.arange(5, dtype="f8") + 5 * i)
            time.attrs["units"] = "days since 2024-01-01"
            time.make_scale("time")
            v = f.create_dataset("v", data=rng.normal(size=(5, 3)).astype("f4"),
                                 chunks=(2, 3), compression="gzip", shuffle=True)
            v.dims[0].attach_scale(time)
        paths.append(path)
    return paths
