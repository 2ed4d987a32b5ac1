"""Deterministic inputs for ``bench_scale.py``: many small GeoTIFFs and netCDF-4 files.

GeoTIFF ``tile_NNNNN.tif``: one float32 band of ``TIFF_ROWS`` x ``TIFF_COLS`` pixels,
deflate-compressed strips of ``ROWS_PER_STRIP`` rows (the last strip holds fewer rows, so
every file has a partial edge chunk), georeferenced (UTM 33N, 30 m pixels, GDAL nodata)
so that file ``k`` lies directly south of file ``k - 1``: the files tile along ``y``.
``TIFF_ROWS`` is not a multiple of ``ROWS_PER_STRIP``, so concatenating them along ``y``
needs a rectilinear chunk grid.

netCDF-4 ``series_NNNNN.nc`` (written with netCDF4): ``NC_STEPS`` daily records along an
unlimited ``time`` dimension, chunked ``NC_TIME_CHUNK`` records per chunk (not a
divisor), with two deflate-compressed float32 variables carrying ``_FillValue`` and a few
missing values, and ``lat``/``lon``/``time`` coordinates. File ``k`` continues the time
axis of file ``k - 1``.

Values depend only on the file index (seeded), so two runs write identical data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import tifffile

TIFF_ROWS, TIFF_COLS, ROWS_PER_STRIP = 60, 64, 16  # strips of 16, 16, 16 and 12 rows
NC_STEPS, NC_TIME_CHUNK, NC_LAT, NC_LON = 7, 4, 6, 8  # time chunks of 4 and 3 records
PIXEL_SIZE = 30.0
ORIGIN_X, ORIGIN_Y = 500_000.0, 4_100_000.0
EPSG = 32633
TIFF_NODATA = -9999.0
NC_FILL = np.float32(-1.0e20)

# GeoTIFF tag codes (GeoTIFF 1.1 specification; GDAL_NODATA is GDAL's private tag).
_MODEL_PIXEL_SCALE, _MODEL_TIEPOINT, _GEO_KEY_DIRECTORY, _GDAL_NODATA = 33550, 33922, 34735, 42113
#: Projected model, pixel-is-area, projected CRS given by its EPSG code.
_GEO_KEYS = (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, EPSG)
_STAMP = "inputs.json"


def tiff_values(index: int) -> np.ndarray:
    """The pixels of tile ``index`` (a few set to the nodata value)."""
    rng = np.random.default_rng(10_000 + index)
    values = rng.normal(280.0, 5.0, (TIFF_ROWS, TIFF_COLS)).astype(np.float32)
    values[index % TIFF_ROWS, :3] = TIFF_NODATA
    return values


def write_tiff(path: Path, index: int) -> None:
    """Tile ``index``: its top edge lies ``index * TIFF_ROWS`` pixels south of the origin."""
    top = ORIGIN_Y - index * TIFF_ROWS * PIXEL_SIZE
    extratags = [
        (_MODEL_PIXEL_SCALE, "d", 3, (PIXEL_SIZE, PIXEL_SIZE, 0.0), True),
        (_MODEL_TIEPOINT, "d", 6, (0.0, 0.0, 0.0, ORIGIN_X, top, 0.0), True),
        (_GEO_KEY_DIRECTORY, "H", len(_GEO_KEYS), _GEO_KEYS, True),
        (_GDAL_NODATA, "s", 0, f"{TIFF_NODATA:g}", True),
    ]
    tifffile.imwrite(
        path,
        tiff_values(index),
        rowsperstrip=ROWS_PER_STRIP,
        compression="zlib",
        metadata=None,
        extratags=extratags,
    )


def nc_values(index: int, name: str) -> np.ndarray:
    """Variable ``name`` of file ``index``, masked where the file holds its fill value."""
    seed = 20_000 + 2 * index + (name == "pr")
    rng = np.random.default_rng(seed)
    shape = (NC_STEPS, NC_LAT, NC_LON)
    if name == "tas":
        values = rng.normal(285.0, 3.0, shape).astype(np.float32)
    else:
        values = rng.gamma(2.0, 1.5, shape).astype(np.float32)
    masked = np.ma.masked_array(values, mask=np.zeros(shape, dtype=bool))
    masked[index % NC_STEPS, index % NC_LAT, :2] = np.ma.masked
    return masked


def write_netcdf(path: Path, index: int) -> None:
    """File ``index``: records ``index * NC_STEPS`` to ``(index + 1) * NC_STEPS - 1``."""
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", NC_LAT)
        nc.createDimension("lon", NC_LON)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time.calendar = "standard"
        time.axis = "T"
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon.units = "degrees_east"
        lat[:] = np.linspace(40.0, 45.0, NC_LAT, dtype=np.float32)
        lon[:] = np.linspace(5.0, 12.0, NC_LON, dtype=np.float32)
        time[:] = np.arange(NC_STEPS, dtype=np.float64) + index * NC_STEPS
        for name, units in (("tas", "K"), ("pr", "mm day-1")):
            variable = nc.createVariable(
                name,
                "f4",
                ("time", "lat", "lon"),
                chunksizes=(NC_TIME_CHUNK, NC_LAT, NC_LON),
                zlib=True,
                complevel=4,
                fill_value=NC_FILL,
            )
            variable.units = units
            variable.coordinates = "lat lon"
            variable[:] = nc_values(index, name)


def tiff_paths(directory: Path, count: int) -> list[Path]:
    """Names of ``count`` tiles, zero-padded so that name order is index order (six
    digits up to 10^6 tiles, the same names whatever the count)."""
    width = max(6, len(str(count - 1)))
    return [directory / "tiff" / f"tile_{k:0{width}d}.tif" for k in range(count)]


def netcdf_paths(directory: Path, count: int) -> list[Path]:
    return [directory / "netcdf" / f"series_{k:05d}.nc" for k in range(count)]


def _settings(count: int) -> dict[str, object]:
    return {
        "files": count,
        "tiff": [TIFF_ROWS, TIFF_COLS, ROWS_PER_STRIP],
        "netcdf": [NC_STEPS, NC_TIME_CHUNK, NC_LAT, NC_LON],
    }


def make_inputs(directory: Path, count: int) -> tuple[list[Path], list[Path]]:
    """Write ``count`` GeoTIFFs and ``count`` netCDF-4 files under ``directory`` (reused
    when a previous call wrote the same set); returns both path lists, in order."""
    tiffs, ncs = tiff_paths(directory, count), netcdf_paths(directory, count)
    stamp = directory / _STAMP
    settings = _settings(count)
    written = stamp.exists() and json.loads(stamp.read_text()) == settings
    if written and all(p.exists() for p in tiffs + ncs):
        return tiffs, ncs
    stamp.unlink(missing_ok=True)
    (directory / "tiff").mkdir(parents=True, exist_ok=True)
    (directory / "netcdf").mkdir(parents=True, exist_ok=True)
    for index, path in enumerate(tiffs):
        write_tiff(path, index)
    for index, path in enumerate(ncs):
        write_netcdf(path, index)
    stamp.write_text(json.dumps(settings))
    return tiffs, ncs


class _TileBytes:
    """Tiles as :func:`write_tiff` writes them, made faster (for 10^6 tiles): tile 0's
    header and directory with the three values that differ from tile to tile patched
    in (the tie point's top edge, the strips' offsets and sizes), then the strips
    deflated as tifffile does. Checked byte for byte against :func:`write_tiff`."""

    def __init__(self, reference: Path):
        """``reference``: a scratch file (removed) for the tiles to check against."""
        import imagecodecs

        self._deflate = imagecodecs.deflate_encode
        write_tiff(reference, 0)
        with tifffile.TiffFile(reference) as tif:
            page = tif.pages[0]
            tags = page.tags
            self._header_size = page.dataoffsets[0]
            self._offsets_at = tags["StripOffsets"].valueoffset
            self._counts_at = tags["StripByteCounts"].valueoffset
            self._top_at = tags["ModelTiepointTag"].valueoffset + 4 * 8
            assert tags["StripOffsets"].dtype == 4 and tags["StripByteCounts"].dtype == 3
        self._header = reference.read_bytes()[: self._header_size]
        for index in (0, 1, 777):
            write_tiff(reference, index)
            assert self.tile(index) == reference.read_bytes(), "tile bytes differ"
        reference.unlink()

    def tile(self, index: int) -> bytes:
        values = tiff_values(index)
        strips = [
            self._deflate(values[row : row + ROWS_PER_STRIP].tobytes())
            for row in range(0, TIFF_ROWS, ROWS_PER_STRIP)
        ]
        sizes = [len(strip) for strip in strips]
        offsets = np.cumsum([self._header_size, *sizes[:-1]]).tolist()
        header = bytearray(self._header)
        struct.pack_into(f"<{len(strips)}I", header, self._offsets_at, *offsets)
        struct.pack_into(f"<{len(strips)}H", header, self._counts_at, *sizes)
        struct.pack_into("<d", header, self._top_at, ORIGIN_Y - index * TIFF_ROWS * PIXEL_SIZE)
        return bytes(header) + b"".join(strips)


def _write_missing_tiffs(job: tuple[Path, int, int, int]) -> None:
    directory, count, start, step = job
    tiffs = tiff_paths(directory, count)
    maker = _TileBytes(directory / f"reference-{start}.tiff")
    for index in range(start, count, step):
        if not tiffs[index].exists():
            tiffs[index].write_bytes(maker.tile(index))


def make_tiffs(directory: Path, count: int, processes: int = 1) -> list[Path]:
    """Write ``count`` GeoTIFFs under ``directory`` (those already there are kept: a
    tile's bytes depend only on its index), in ``processes`` processes; returns their
    paths, in order."""
    tiffs = tiff_paths(directory, count)
    (directory / "tiff").mkdir(parents=True, exist_ok=True)
    jobs = [(directory, count, start, processes) for start in range(processes)]
    if processes == 1:
        _write_missing_tiffs(jobs[0])
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(processes) as pool:
            list(pool.map(_write_missing_tiffs, jobs))
    return tiffs
