"""Planning a mosaic: placing thousands of tiles on rasterio.merge's grid.

The tiles are 40000 x 40000 px, 0.00025 degrees (a 10-degree tile), in a square grid of
``side x side`` tiles given in shuffled order, each origin off the exact grid by up to
1e-12 degrees (float noise, snapped) and one tile in a hundred missing (``allow_gaps``).
Each tile is what a parsed file brings to the placement (a ``FilePart`` with its
GeoTransform, CRS and coordinates, the coordinates zero-copy views): the parse itself
and the chunk manifests are measured by ``bench_build.py``. The time of
``virtualizarr_fill.assemble.placement.layout`` is printed for each size, with the time
per ``n log2 n`` (flat when the placement costs O(n log n)).

Usage::

    python benchmarks/bench_mosaic_placement.py [--sides 10 32 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import random
import time

import numpy as np
import xarray as xr

from virtualizarr_fill.assemble.parts import FilePart
from virtualizarr_fill.assemble.placement import layout

SIZE, RES = 40000, 0.00025
WKT = 'GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]]]'


def _parts(side: int) -> list[FilePart]:
    rng = random.Random(side)
    axis = np.broadcast_to(np.float64(0.0), (SIZE,))
    parts = []
    for r in range(side):
        for c in range(side):
            if rng.random() < 0.01:
                continue
            left = -180.0 + c * SIZE * RES + rng.uniform(-1e-12, 1e-12)
            top = 80.0 - r * SIZE * RES + rng.uniform(-1e-12, 1e-12)
            geotransform = f"{left!r} {RES!r} 0.0 {top!r} 0.0 {-RES!r}"
            parts.append(
                FilePart(
                    url=f"s3://tiles/tile_{r}_{c}.tif",
                    arrays={},
                    dims={},
                    var_attrs={"spatial_ref": {"crs_wkt": WKT, "GeoTransform": geotransform}},
                    attributes={},
                    coords={"x": xr.Variable("x", axis), "y": xr.Variable("y", axis)},
                )
            )
    rng.shuffle(parts)
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[10, 32, 100])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'tiles':>7} {'layout s':>9} {'us per n log2 n':>16}")
    for side in args.sides:
        parts = _parts(side)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = layout(parts, allow_gaps=True)
            times.append(time.perf_counter() - start)
        assert result.width == side * SIZE and result.height == side * SIZE
        best = min(times)
        n = len(parts)
        print(f"{n:>7} {best:>9.3f} {1e6 * best / (n * math.log2(n)):>16.3f}")


if __name__ == "__main__":
    main()
