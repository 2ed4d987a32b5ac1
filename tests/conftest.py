"""Shared pytest fixtures."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hdf5plugin
import numpy as np
import pytest

from fixtures.servers import S3Server, running_s3

# netCDF4, once imported, points HDF5_PLUGIN_PATH at its own filter plugins, which are
# built against its own copy of libhdf5: h5py loading one of them to write or read a
# blosc or bitshuffle dataset fails or crashes, depending on which test ran first.
# Registered filters take precedence over the plugin path, so h5py always uses
# hdf5plugin's, whatever the test order.
hdf5plugin.register(force=True)

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The real-file conformance corpus (``../shared/corpus``).

    CI always has it, so there a missing corpus is a failure. Elsewhere (a contributor's
    checkout without the corpus) the corpus tests are skipped with the reason.
    """
    if not (CORPUS_DIR / "MANIFEST.tsv").is_file():
        message = f"conformance corpus not found at {CORPUS_DIR}"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return CORPUS_DIR


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3-compatible server (moto) on loopback for the whole session."""
    with running_s3() as server:
        yield server


@pytest.fixture
def s3_environment(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server with the standard AWS variables set as users set them; the command line's
    stores, cached per process, configured afresh from that environment."""
    from virtualizarr_fill.io import registries

    for key, value in s3_server.aws_environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(registries, "_STORES", {})
    return s3_server


# --------------------------------------------------------------------------- GeoTIFF tiles

#: The tile set :func:`write_tiles` writes: 2 rows x 3 columns cut from one image, the
#: last column narrower and the last row shorter; 10 m pixels, north up.
TILE_WIDTHS, TILE_HEIGHTS = [64, 64, 40], [48, 30]
TILE_ORIGIN, TILE_RES = (500000.0, 4000000.0), 10.0


def _write_tiles(
    directory: Path,
    *,
    crs: list[str] | None = None,
    shift: dict[tuple[int, int], tuple[float, float]] | None = None,
    bands: dict[tuple[int, int], int] | None = None,
    tiled: bool = False,
    dtype: str = "uint8",
) -> list[Path]:
    """Write the tile set with rasterio (deflate, nodata 0) as ``tile_{row}_{col}.tif``,
    returned in shuffled order. ``shift`` moves a tile by (dx, dy) metres, ``bands``
    gives a tile another band count, ``crs`` one CRS per tile (row-major)."""
    import rasterio
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(9)
    full = rng.integers(1, 250, (3, sum(TILE_HEIGHTS), sum(TILE_WIDTHS))).astype(dtype)
    paths = []
    top = 0
    for r, height in enumerate(TILE_HEIGHTS):
        left = 0
        for c, width in enumerate(TILE_WIDTHS):
            dx, dy = (shift or {}).get((r, c), (0.0, 0.0))
            count = (bands or {}).get((r, c), 3)
            path = directory / f"tile_{r}_{c}.tif"
            # one strip height for every width (GDAL would pick one per width, and tiles
            # whose strips differ along y cannot share one array's chunks)
            options: dict[str, Any] = (
                {"blockxsize": 16, "blockysize": 16} if tiled else {"blockysize": 16}
            )
            with rasterio.open(
                path, "w", driver="GTiff", width=width, height=height, count=count,
                dtype=dtype, crs=(crs or ["EPSG:32633"] * 6)[r * 3 + c],
                transform=from_origin(
                    TILE_ORIGIN[0] + left * TILE_RES + dx,
                    TILE_ORIGIN[1] - top * TILE_RES + dy,
                    TILE_RES,
                    TILE_RES,
                ),
                nodata=0, compress="deflate", tiled=tiled, **options,
            ) as dst:  # fmt: skip
                dst.write(full[:count, top : top + height, left : left + width])
            paths.append(path)
            left += width
        top += height
    random.Random(4).shuffle(paths)
    return paths


@pytest.fixture
def write_tiles() -> Callable[..., list[Path]]:
    """The function writing a GeoTIFF tile set (see :func:`_write_tiles`)."""
    return _write_tiles


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Any]:
    """A dask ``LocalCluster`` of two single-threaded worker processes on loopback,
    shared by the tests of one module."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        yield cluster
