"""Many GeoTIFF tiles -> one Icechunk repository -> xarray -> a PNG map.

Run ``python examples/geotiffs_to_icechunk.py [OUT_DIR]``. The example

1. writes 8 GeoTIFF tiles (float32, UTM 33N, nodata -9999) that stack north to south.
   Each is 45 rows high in strips of 8 rows, so its last strip holds 5 rows: even tiles
   store that strip short, odd tiles padded to 8 rows (both are valid TIFF);
2. virtualizes each tile with :class:`virtualizarr_fill.TIFFParser` (headers only) and
   concatenates them along ``y``. Tile heights are not strip multiples, so the mosaic gets
   a rectilinear chunk grid whose edges are every tile's strips, and the truncate codec
   trims the padded strips;
3. writes the references to an Icechunk repository (the files stay where they are; the
   repository's virtual chunk container points at their directory);
4. opens the repository with ``xr.open_zarr``, checks every value against tifffile's
   reading of the tiles, checks that nodata is masked, and saves a map to PNG.

The same repository can be built from the command line::

    virtualizarr-fill build 'OUT_DIR/tiles/*.tif' --concat-dim y --out OUT_DIR/mosaic.icechunk

It exits non-zero if a comparison fails.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import tifffile
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _samples

import virtualizarr_fill
from virtualizarr_fill import TIFFParser

TILES = 8


def save_map(data: xr.DataArray, path: Path) -> None:
    """A map of the mosaic (matplotlib, non-interactive backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 8))
    data.plot.imshow(ax=axes, cmap="viridis", cbar_kwargs={"label": "value"})
    axes.set_title("8 GeoTIFF tiles, one virtual mosaic")
    axes.set_aspect("equal")
    figure.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(figure)


def main(out_dir: Path) -> int:
    from virtualizarr import open_virtual_dataset

    if out_dir.exists():
        shutil.rmtree(out_dir)
    tiles = _samples.write_geotiff_tiles(out_dir / "tiles", TILES)
    print(f"{len(tiles)} GeoTIFF tiles written to {out_dir / 'tiles'}")

    # --- virtualize and concatenate --------------------------------------------------
    registry = _samples.local_registry()
    parser = TIFFParser()
    virtual = [open_virtual_dataset(p.as_uri(), registry=registry, parser=parser) for p in tiles]
    # combine_attrs: keep the attributes the tiles share (``_FillValue``, ``grid_mapping``);
    # combine_nested's default drops every variable attribute.
    mosaic = xr.combine_nested(
        virtual,
        concat_dim="y",
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",
    )
    grid = mosaic["band_data"].data.metadata.chunk_grid
    print(f"virtual mosaic: {dict(mosaic.sizes)}, chunk grid {type(grid).__name__}")

    # --- write to Icechunk; the commit makes it visible ------------------------------
    repo = _samples.icechunk_repository(out_dir / "mosaic.icechunk", out_dir / "tiles")
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(mosaic, session.store)
    session.commit("mosaic of 8 GeoTIFF tiles")

    # --- read back ---------------------------------------------------------------------
    store = repo.readonly_session("main").store
    decoded = xr.open_zarr(store, consolidated=False, zarr_format=3)
    raw = xr.open_zarr(store, consolidated=False, zarr_format=3, mask_and_scale=False)
    expected = np.concatenate([tifffile.imread(p) for p in tiles])[np.newaxis]

    checks = {
        "values equal tifffile's": np.array_equal(raw["band_data"].values, expected),
        "nodata is masked (NaN)": np.array_equal(
            np.isnan(decoded["band_data"].values), expected == _samples.NODATA
        ),
        "y coordinates are continuous": bool(
            np.allclose(np.diff(decoded["y"].values), -_samples.PIXEL_SIZE)
        ),
    }
    for label, passed in checks.items():
        print(f"  {'OK  ' if passed else 'FAIL'} {label}")

    png = out_dir / "mosaic.png"
    save_map(decoded["band_data"].isel(band=0), png)
    print(f"map saved to {png}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("geotiffs-output")
    sys.exit(main(target))
