"""Generated parse inputs, beside the corpus: a Deflate COG with overviews, a strip TIFF
with a short last strip, and three HDF5/netCDF-4 files (ten zlib variables; 10,000 chunks
indexed by a version 1 B-tree and by a paged fixed array). Written once into a folder,
then reused."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def make_cog(path: Path) -> None:
    """1000x1000 float32 Deflate COG with overviews, written by GDAL."""
    import rasterio
    from rasterio.shutil import copy as rio_copy
    from rasterio.transform import from_origin

    rng = np.random.default_rng(0)
    data = (rng.standard_normal((1, 1000, 1000)) * 100).astype("float32")
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain.tif"
        profile = {
            "driver": "GTiff",
            "width": 1000,
            "height": 1000,
            "count": 1,
            "dtype": "float32",
            "crs": "EPSG:4326",
            "transform": from_origin(0, 10, 0.01, 0.01),
            "tiled": True,
            "blockxsize": 256,
            "blockysize": 256,
            "compress": "DEFLATE",
        }
        with rasterio.open(plain, "w", **profile) as dst:
            dst.write(data)
            dst.build_overviews([2, 4, 8])
        rio_copy(
            plain,
            path,
            driver="GTiff",
            copy_src_overviews=True,
            tiled=True,
            blockxsize=256,
            blockysize=256,
            compress="DEFLATE",
        )


def make_strips(path: Path) -> None:
    """150 rows in Deflate strips of 10 (the fixture of the TIFF parser tests)."""
    if str(REPO / "fixtures") not in sys.path:
        sys.path.insert(0, str(REPO / "fixtures"))
    import make_tiff_fixtures

    make_tiff_fixtures.FIXTURES["strip_rps10_150rows_deflate"](path)


def make_tiff_inputs(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cog = directory / "cog_1000_float32_deflate.tif"
    strips = directory / "strips_150_rps10.tif"
    if not cog.exists():
        make_cog(cog)
    if not strips.exists():
        make_strips(strips)
    return [cog, strips]


def make_hdf5_inputs(directory: Path) -> list[Path]:
    import h5py
    import netCDF4

    directory.mkdir(parents=True, exist_ok=True)
    ten = directory / "ten_vars_zlib.nc"
    if not ten.exists():
        rng = np.random.default_rng(0)
        with netCDF4.Dataset(ten, "w") as nc:
            nc.createDimension("time", 100)
            nc.createDimension("lat", 180)
            nc.createDimension("lon", 360)
            for i in range(10):
                var = nc.createVariable(
                    f"var{i}", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(10, 180, 360)
                )
                var[:] = rng.random((100, 180, 360), dtype="f4")
    btree = directory / "btree_v1_10k_chunks.h5"
    if not btree.exists():
        with h5py.File(btree, "w", libver="earliest") as f:
            f.create_dataset(
                "x", data=np.arange(10_000, dtype="<f4").reshape(100, 100), chunks=(1, 1)
            )
    paged = directory / "paged_fixed_array_10k_chunks.h5"
    if not paged.exists():
        with h5py.File(paged, "w", libver="latest") as f:
            f.create_dataset(
                "x", data=np.arange(10_000, dtype="<f4").reshape(100, 100), chunks=(1, 1)
            )
    return [ten, btree, paged]
