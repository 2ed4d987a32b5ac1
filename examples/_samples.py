"""Small sample files for the examples (deterministic; written with tifffile and netCDF4),
and the local object-store registry and Icechunk repository the examples write to.

Not an example itself: the examples import it to make their input data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tifffile

#: EPSG code of the sample GeoTIFFs (WGS 84 / UTM zone 33N).
EPSG = 32633
PIXEL_SIZE = 30.0
ORIGIN_X, ORIGIN_Y = 500_000.0, 4_100_000.0
NODATA = -9999.0

# GeoTIFF tags (GeoTIFF 1.1 specification).
_MODEL_PIXEL_SCALE = 33550
_MODEL_TIEPOINT = 33922
_GEO_KEY_DIRECTORY = 34735
_GDAL_NODATA = 42113


def _geokeys(epsg: int) -> tuple[int, ...]:
    """GeoKeyDirectory: projected model, pixel-is-area, the projected CRS by EPSG code."""
    return (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, epsg)


def _field(seed: int, rows: int, cols: int, first_row: int) -> np.ndarray:
    """A smooth surface with noise, continuous across tiles stacked along y."""
    y = np.arange(first_row, first_row + rows)[:, None]
    x = np.arange(cols)[None, :]
    rng = np.random.default_rng(seed)
    surface = 280.0 + 10.0 * np.sin(y / 17.0) * np.cos(x / 11.0)
    return (surface + rng.normal(0.0, 0.3, (rows, cols))).astype(np.float32)


def write_geotiff(
    path: Path,
    data: np.ndarray,
    *,
    top: float,
    rows_per_strip: int,
    padded_last_strip: bool,
    compression: str | None = None,
) -> None:
    """A single-band float32 GeoTIFF in strips, georeferenced on the sample grid.

    With ``padded_last_strip`` the last strip is stored with all ``rows_per_strip`` rows
    (as some writers do): the file is written one strip taller, then its ImageLength is
    rewritten to the real height, leaving NODATA rows as padding in the last strip.
    """
    rows, cols = data.shape
    stored = data
    if padded_last_strip and rows % rows_per_strip:
        full = -(-rows // rows_per_strip) * rows_per_strip
        stored = np.full((full, cols), NODATA, dtype=data.dtype)
        stored[:rows] = data
    extratags = [
        (_MODEL_PIXEL_SCALE, "d", 3, (PIXEL_SIZE, PIXEL_SIZE, 0.0), True),
        (_MODEL_TIEPOINT, "d", 6, (0.0, 0.0, 0.0, ORIGIN_X, top, 0.0), True),
        (_GEO_KEY_DIRECTORY, "H", 16, _geokeys(EPSG), True),
        (_GDAL_NODATA, "s", 0, f"{NODATA:g}", True),
    ]
    tifffile.imwrite(
        path,
        stored,
        rowsperstrip=rows_per_strip,
        compression=compression,
        metadata=None,
        extratags=extratags,
    )
    if stored is not data:
        with tifffile.TiffFile(path, mode="r+") as tif:
            tif.pages.first.tags["ImageLength"].overwrite(rows)


def write_geotiff_tiles(
    directory: Path,
    count: int,
    *,
    rows: int = 45,
    cols: int = 60,
    rows_per_strip: int = 8,
    holes: bool = True,
) -> list[Path]:
    """``count`` GeoTIFF tiles that stack north to south along y into one mosaic.

    ``rows`` is not a multiple of ``rows_per_strip``, so every tile has a partial last
    strip: even tiles store it short, odd tiles padded. ``holes`` sets a few pixels of
    every tile to NODATA.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        data = _field(index, rows, cols, first_row=index * rows)
        if holes:
            data[3 + index : 6 + index, 10:14] = NODATA
        path = directory / f"tile_{index:03d}.tif"
        write_geotiff(
            path,
            data,
            top=ORIGIN_Y - index * rows * PIXEL_SIZE,
            rows_per_strip=rows_per_strip,
            padded_last_strip=index % 2 == 1,
        )
        paths.append(path)
    return paths


def write_netcdf_series(
    directory: Path,
    count: int,
    *,
    steps: int = 10,
    time_chunk: int = 4,
    shape: Sequence[int] = (6, 8),
) -> list[Path]:
    """``count`` netCDF-4 files of ``steps`` daily time steps each, ``time_chunk`` per chunk.

    ``steps`` is not a multiple of ``time_chunk``, so every file's last time chunk is
    stored padded by HDF5. ``tas`` is deflate-compressed with a ``_FillValue`` and a few
    missing values; ``time`` has CF units.
    """
    import netCDF4

    directory.mkdir(parents=True, exist_ok=True)
    lat_n, lon_n = shape
    paths = []
    for index in range(count):
        path = directory / f"tas_{index:03d}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("lat", lat_n)
            nc.createDimension("lon", lon_n)
            time = nc.createVariable("time", "f8", ("time",))
            time.units = "days since 2020-01-01"
            time.calendar = "standard"
            lat = nc.createVariable("lat", "f4", ("lat",))
            lat.units = "degrees_north"
            lon = nc.createVariable("lon", "f4", ("lon",))
            lon.units = "degrees_east"
            tas = nc.createVariable(
                "tas",
                "f4",
                ("time", "lat", "lon"),
                chunksizes=(time_chunk, lat_n, lon_n),
                zlib=True,
                fill_value=np.float32(-1.0e20),
            )
            tas.units = "K"
            tas.long_name = "near-surface air temperature"
            lat[:] = np.linspace(40.0, 45.0, lat_n)
            lon[:] = np.linspace(5.0, 12.0, lon_n)
            time[:] = np.arange(steps) + index * steps
            rng = np.random.default_rng(index)
            values = 285.0 + rng.normal(0.0, 3.0, (steps, lat_n, lon_n)).astype(np.float32)
            tas[:] = values
            tas[1, 0, :2] = np.ma.masked  # missing values: read as NaN by xarray
        paths.append(path)
    return paths


def local_registry() -> Any:
    """An object-store registry that resolves ``file://`` URLs on this machine."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file://": LocalStore()})


def icechunk_repository(repo_dir: Path, data_dir: Path) -> Any:
    """A new local Icechunk repository allowed to read virtual chunks under ``data_dir``."""
    import icechunk

    icechunk.set_logs_filter("error")  # its warnings about local storage target developers
    prefix = data_dir.resolve().as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data_dir)))
    )
    return icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(repo_dir)),
        config,
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
