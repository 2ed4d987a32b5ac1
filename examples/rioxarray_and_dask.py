"""Reading a virtual GeoTIFF mosaic with rioxarray (CRS, nodata, transform) and dask.

Run ``python examples/rioxarray_and_dask.py [OUT_DIR]``. The example

1. writes 4 GeoTIFF tiles (UTM 33N, nodata -9999; short and padded last strips) and
   builds a virtual mosaic of them in an Icechunk repository with the command-line tool
   (``virtualizarr-fill build ... --concat-dim y``);
2. opens the repository lazily with dask (``xr.open_zarr(..., chunks={})``): the dask
   chunks are the virtual chunks, i.e. the tiles' strips, including each tile's short
   last strip;
3. uses rioxarray on it exactly as on ``rioxarray.open_rasterio``: the CRS comes from
   the ``spatial_ref`` coordinate, nodata from ``_FillValue``, the affine transform from
   the x/y coordinates; and compares each with what rioxarray reads from the first tile;
4. computes statistics with dask and compares them with numpy on tifffile's reading of
   the tiles, then clips a box with rioxarray and compares it with the same box cut from
   the tiles.

It exits non-zero if a comparison fails.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _samples

from virtualizarr_fill.cli import main as virtualizarr_fill_cli

TILES = 4


def open_repository(repo_dir: Path, data_dir: Path) -> xr.Dataset:
    """The mosaic, lazily, with dask chunks following the stored (virtual) chunks."""
    import icechunk

    icechunk.set_logs_filter("error")  # its warnings about local storage target developers
    prefix = data_dir.resolve().as_uri() + "/"
    repo = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repo_dir)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    store = repo.readonly_session("main").store
    return xr.open_zarr(store, consolidated=False, zarr_format=3, chunks={})


def _report(label: str, passed: Any, results: list[bool]) -> None:
    results.append(bool(passed))
    print(f"  {'OK  ' if passed else 'FAIL'} {label}")


def main(out_dir: Path) -> int:
    import rioxarray  # registers the .rio accessor

    if out_dir.exists():
        shutil.rmtree(out_dir)
    tiles = _samples.write_geotiff_tiles(out_dir / "tiles", TILES)
    repo_dir = out_dir / "mosaic.icechunk"
    code = virtualizarr_fill_cli(
        ["build", *map(str, tiles), "--concat-dim", "y", "--out", str(repo_dir)]
    )
    if code != 0:
        return code

    mosaic = open_repository(repo_dir, out_dir / "tiles")
    band = mosaic["band_data"]
    assert band.chunks is not None
    print(f"dask chunks along y: {band.chunks[1]}")
    reference = rioxarray.open_rasterio(tiles[0])
    assert isinstance(reference, xr.DataArray)
    results: list[bool] = []

    # --- rioxarray metadata ------------------------------------------------------------
    _report(f"CRS {band.rio.crs}", band.rio.crs == reference.rio.crs, results)
    _report(
        f"nodata {band.rio.encoded_nodata} (masked on read)",
        band.rio.encoded_nodata == reference.rio.nodata and np.isnan(band.rio.nodata),
        results,
    )
    _report(
        "transform equals the first tile's",
        band.rio.transform().almost_equals(reference.rio.transform()),
        results,
    )
    _report(
        f"bounds {tuple(round(b) for b in band.rio.bounds())}",
        band.rio.bounds()[2:] == reference.rio.bounds()[2:],  # same top-right corner
        results,
    )

    # --- dask computations -------------------------------------------------------------
    raw = np.concatenate([tifffile.imread(p) for p in tiles])[np.newaxis]
    masked = np.where(raw == _samples.NODATA, np.nan, raw)
    _report(
        "dask mean equals numpy's",
        np.isclose(float(band.mean().compute()), float(np.nanmean(masked)), rtol=1e-6),
        results,
    )
    _report(
        "dask count of valid pixels equals numpy's",
        int(band.count().compute()) == int(np.count_nonzero(~np.isnan(masked))),
        results,
    )
    _report(
        "row means per y chunk equal numpy's",
        np.allclose(band.mean(dim=("band", "x")).values, np.nanmean(masked, axis=(0, 2))),
        results,
    )

    # --- a rioxarray clip across tile boundaries ---------------------------------------
    x = band["x"].values
    y = band["y"].values
    box = (float(x[5]), float(y[70]), float(x[20]), float(y[30]))  # minx, miny, maxx, maxy
    clipped = band.rio.clip_box(*box).compute()
    rows = (y >= box[1]) & (y <= box[3])
    cols = (x >= box[0]) & (x <= box[2])
    expected = masked[:, rows][:, :, cols]
    _report(
        f"clip_box {clipped.shape[1:]} equals the tiles' pixels",
        clipped.shape == expected.shape
        and np.array_equal(clipped.values, expected, equal_nan=True),
        results,
    )
    reference.close()
    mosaic.close()
    return 0 if all(results) else 1


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("rioxarray-output")
    sys.exit(main(target))
