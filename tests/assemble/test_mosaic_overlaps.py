"""Overlapping tiles with ``overlap="first"`` or ``"last"``: equal to
``rasterio.merge.merge(method=...)`` of the same files in the same (shuffled) order,
values, shape, transform and nodata, for overlaps of odd sizes that cut the tiles'
32-pixel internal tiles (the mosaic then stores the cut chunks' parts as values), and
DEM tiles sharing their edge row and column. Where rasterio would fill the winning
tile's nodata from another tile, the mosaic is refused.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import virtualizarr_fill
from tests._manifest_builders import read_manifest_array
from virtualizarr_fill import IncompatibleArraysError

rasterio = pytest.importorskip("rasterio")

from tests.assemble.test_assemble import REGISTRY  # noqa: E402

SIZE, BLOCK, RES = 100, 32, 0.001
ORIGIN = (10.0, 20.0)


def overlapping_tiles(
    directory: Path,
    overlap: int,
    *,
    dtype: str = "uint8",
    nodata: float | None = 255,
    holes: dict[tuple[int, int], tuple[slice, slice]] | None = None,
    seed: int = 7,
) -> list[Path]:
    """2 x 2 tiles of SIZE pixels overlapping their neighbours by ``overlap`` pixels
    (rows and columns), each of its own random values (so that which tile an overlap
    takes shows), in 32-pixel internal tiles, written in shuffled order. ``holes`` sets
    a window of a tile to nodata."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(overlap)
    step = SIZE - overlap
    paths = []
    for r in range(2):
        for c in range(2):
            values = rng.integers(0, 250, (2, SIZE, SIZE)).astype(dtype)
            if dtype.startswith("float"):
                values += rng.random((2, SIZE, SIZE)).astype(dtype)
            if holes and (r, c) in holes:
                values[(slice(None), *holes[(r, c)])] = nodata
            path = directory / f"tile_{r}_{c}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=SIZE, height=SIZE, count=2, dtype=dtype,
                crs="EPSG:4326",
                transform=from_origin(ORIGIN[0] + c * step * RES, ORIGIN[1] - r * step * RES,
                                      RES, RES),
                nodata=nodata, compress="deflate", tiled=True, blockxsize=BLOCK,
                blockysize=BLOCK,
            ) as dst:  # fmt: skip
                dst.write(values)
            paths.append(path)
    random.Random(seed).shuffle(paths)
    return paths


def mosaic(paths: list[Path], **kwargs: Any) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return virtualizarr_fill.open_virtual_mosaic(
            [f"file://{p}" for p in paths], REGISTRY, **kwargs
        )


def merged(paths: list[Path], method: str) -> tuple[np.ndarray, Any, Any]:
    """rasterio.merge.merge's values, transform and nodata."""
    from rasterio.merge import merge

    sources = [rasterio.open(p) for p in paths]
    try:
        values, transform = merge(sources, method=method)
        return values, transform, sources[0].nodata
    finally:
        for source in sources:
            source.close()


def assert_equals_rasterio_merge(result: xr.Dataset, paths: list[Path], method: str) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    expected, transform, nodata = merged(paths, method)
    values = read_manifest_array(result.band_data.data)
    assert values.shape == expected.shape
    np.testing.assert_array_equal(values, expected)
    assert result.rio.transform() == transform
    # rasterio's nodata, a float, as GDAL stores it
    assert float(result.band_data.attrs["gdal_no_data"]) == nodata


@pytest.mark.parametrize("method", ["first", "last"])
@pytest.mark.parametrize("overlap", [5, 13, 37])
def test_overlaps_inside_chunks_equal_rasterio_merge(
    tmp_path: Path, overlap: int, method: str
) -> None:
    paths = overlapping_tiles(tmp_path, overlap)
    result = mosaic(paths, overlap=method)
    assert_equals_rasterio_merge(result, paths, method)
    # the kept part of the tiles right of or below an overlap starts inside a chunk
    assert result.band_data.encoding["materialised_chunks"] > 0


def test_the_method_decides_which_tile_an_overlap_takes(tmp_path: Path) -> None:
    paths = overlapping_tiles(tmp_path, 13)
    first = read_manifest_array(mosaic(paths, overlap="first").band_data.data)
    last = read_manifest_array(mosaic(paths, overlap="last").band_data.data)
    assert (first != last).sum() > 2 * 13 * 100  # the overlaps, of different values
    np.testing.assert_array_equal(first, merged(paths, "first")[0])
    np.testing.assert_array_equal(last, merged(paths, "last")[0])


def test_with_an_executor_overlaps_equal_rasterio_merge(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    paths = overlapping_tiles(tmp_path, 5)
    with ThreadPoolExecutor(2) as executor:
        result = mosaic(paths, overlap="last", executor=executor)
    assert_equals_rasterio_merge(result, paths, "last")


def dem_tiles(directory: Path, *, shared: int = 1) -> list[Path]:
    """3 x 3 float32 DEM tiles of 101 pixels sharing ``shared`` edge rows and columns
    with their neighbours (nodata -9999), as DEM products are cut; each tile's
    elevations off by its own few millimetres, as separate acquisitions disagree."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    size = 101
    step = size - shared
    y, x = np.mgrid[0 : 3 * step + shared, 0 : 3 * step + shared]
    surface = (1000 + 50 * np.sin(x / 17.0) * np.cos(y / 23.0)).astype("float32")
    paths = []
    for r in range(3):
        for c in range(3):
            tile = surface[r * step : r * step + size, c * step : c * step + size]
            tile = tile + np.float32(0.001 * (3 * r + c + 1))
            path = directory / f"dem_{r}_{c}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=size, height=size, count=1, dtype="float32",
                crs="EPSG:32633",
                transform=from_origin(500000 + c * step * 30.0, 4000000 - r * step * 30.0,
                                      30.0, 30.0),
                nodata=-9999.0, compress="deflate", predictor=3, tiled=True,
                blockxsize=BLOCK, blockysize=BLOCK,
            ) as dst:  # fmt: skip
                dst.write(tile[np.newaxis])
            paths.append(path)
    random.Random(3).shuffle(paths)
    return paths


@pytest.mark.parametrize("method", ["first", "last"])
def test_dem_tiles_sharing_an_edge_row_and_column_equal_rasterio_merge(
    tmp_path: Path, method: str
) -> None:
    paths = dem_tiles(tmp_path)
    with pytest.raises(IncompatibleArraysError, match=r"overlap by (1|101) x (1|101) pixels"):
        mosaic(paths)
    result = mosaic(paths, overlap=method)
    assert result.band_data.shape == (1, 301, 301)
    assert_equals_rasterio_merge(result, paths, method)


def test_an_overlap_is_refused_naming_both_tiles_and_the_flag(tmp_path: Path) -> None:
    paths = overlapping_tiles(tmp_path, 13)
    with pytest.raises(IncompatibleArraysError) as refused:
        mosaic(paths)
    message = str(refused.value)
    assert "overlap by 100 x 13 pixels (rows x columns)" in message or "13 x 100" in message
    assert message.count("tile_") == 2
    assert "--overlap first|last" in message and 'overlap="first"' in message
    # what the message suggests
    assert_equals_rasterio_merge(mosaic(paths, overlap="first"), paths, "first")


def test_nodata_of_the_winning_tile_inside_an_overlap_is_refused(tmp_path: Path) -> None:
    """rasterio fills the winner's nodata pixels from the other tile; a virtual mosaic
    cannot, so it refuses: with "first" tile_0_0 (given first) wins the overlap, where
    it holds nodata. With "last" the other tiles win there and the mosaic is built."""
    paths = sorted(overlapping_tiles(tmp_path, 13, holes={(0, 0): (slice(90, 100), slice(40, 50))}))
    expected = merged(paths, "first")[0]
    assert (expected[:, 90:100, 40:50] != 255).all()  # rasterio took tile_1_0's values
    with pytest.raises(IncompatibleArraysError) as refused:
        mosaic(paths, overlap="first")
    message = str(refused.value)
    assert "tile_0_0.tif and " in message and "tile_1_0.tif" in message
    assert "rows 87-99" in message and "200 pixels of 'band_data'" in message
    assert_equals_rasterio_merge(mosaic(paths, overlap="last"), paths, "last")


def test_nodata_in_all_the_tiles_of_an_overlap_is_accepted(tmp_path: Path) -> None:
    holes = {(0, 0): (slice(90, 100), slice(40, 50)), (1, 0): (slice(3, 13), slice(40, 50))}
    paths = sorted(overlapping_tiles(tmp_path, 13, holes=holes))
    result = mosaic(paths, overlap="first")
    assert_equals_rasterio_merge(result, paths, "first")
    assert (read_manifest_array(result.band_data.data)[:, 90:100, 40:50] == 255).all()


def test_overlaps_read_back_through_icechunk_and_kerchunk(tmp_path: Path) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    from tests._manifest_builders import (
        icechunk_read,
        icechunk_repo,
        icechunk_write,
        kerchunk_read,
    )

    data = tmp_path / "data"
    paths = overlapping_tiles(data, 13)
    result = mosaic(paths, overlap="first")
    assert result.band_data.encoding["materialised_chunks"] > 0
    expected, transform, _ = merged(paths, "first")
    repo = icechunk_repo(tmp_path / "repo", data)
    icechunk_write(repo, result)
    refs = tmp_path / "refs.json"
    virtualizarr_fill.to_kerchunk(result, refs, format="json")
    for read in (icechunk_read(repo), kerchunk_read(str(refs))):
        values = read.band_data.values  # no nodata pixels in these tiles
        np.testing.assert_array_equal(values, expected)
        assert read.rio.transform() == transform


def test_a_lossy_codec_cut_inside_a_chunk_is_refused(tmp_path: Path) -> None:
    """JPEG tiles: re-encoding the part of a chunk an overlap leaves would change its
    values, so the mosaic is refused rather than stored inexactly."""
    from rasterio.transform import from_origin

    tmp_path.mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    paths = []
    for c in range(2):
        path = tmp_path / f"jpeg_{c}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=SIZE, height=SIZE, count=3, dtype="uint8",
            crs="EPSG:4326",
            transform=from_origin(ORIGIN[0] + c * (SIZE - 13) * RES, ORIGIN[1], RES, RES),
            compress="jpeg", photometric="YCBCR", tiled=True, blockxsize=BLOCK,
            blockysize=BLOCK,
        ) as dst:  # fmt: skip
            # no dark pixels: without nodata, rasterio's "first" takes 0 as empty
            dst.write(rng.integers(64, 192, (3, SIZE, SIZE)).astype("uint8"))
        paths.append(path)
    with pytest.raises(IncompatibleArraysError) as refused:
        mosaic(paths, overlap="first")
    message = str(refused.value)
    assert "jpeg_1.tif: 'band_data': an overlap ends inside its chunks" in message
    assert "cannot be stored exactly as values" in message


def test_float_predictor_chunks_cut_short_are_refused_or_stored_as_values(
    tmp_path: Path,
) -> None:
    """Abutting DEM tiles of 101 pixels with TIFF predictor 3: a tile's last, padded
    chunk column becomes interior, but the predictor shuffles each row into byte planes,
    so no edge codec can cut it (cropping returned wrong values): refused. With an
    ``overlap`` method those chunks are stored as values and the mosaic equals
    rasterio.merge."""
    paths = dem_tiles(tmp_path, shared=0)
    with pytest.raises(
        IncompatibleArraysError, match=r"floating-point predictor \(TIFF predictor 3\)"
    ):
        mosaic(paths)
    result = mosaic(paths, overlap="first")
    assert result.band_data.shape == (1, 303, 303)
    assert_equals_rasterio_merge(result, paths, "first")
    assert result.band_data.encoding["materialised_chunks"] > 0


@pytest.mark.parametrize("method", ["first", "last"])
def test_overlaps_and_a_hole_equal_rasterio_merge(tmp_path: Path, method: str) -> None:
    """3 x 3 tiles overlapping by 13 pixels, the centre one missing: the hole, cut
    where its neighbours' chunks are, reads as nodata as rasterio fills it."""
    from rasterio.transform import from_origin

    tmp_path.mkdir(exist_ok=True)
    rng = np.random.default_rng(5)
    step = SIZE - 13
    paths = []
    for r in range(3):
        for c in range(3):
            if (r, c) == (1, 1):
                continue
            path = tmp_path / f"tile_{r}_{c}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", width=SIZE, height=SIZE, count=1, dtype="uint8",
                crs="EPSG:4326",
                transform=from_origin(ORIGIN[0] + c * step * RES, ORIGIN[1] - r * step * RES,
                                      RES, RES),
                nodata=255, compress="deflate", tiled=True, blockxsize=BLOCK, blockysize=BLOCK,
            ) as dst:  # fmt: skip
                dst.write(rng.integers(0, 250, (1, SIZE, SIZE)).astype("uint8"))
            paths.append(path)
    random.Random(11).shuffle(paths)
    with pytest.raises(IncompatibleArraysError, match="no tile covers"):
        mosaic(paths, overlap=method)
    result = mosaic(paths, overlap=method, allow_gaps=True)
    assert_equals_rasterio_merge(result, paths, method)


def test_without_nodata_first_refuses_zeros_rasterio_would_overwrite(tmp_path: Path) -> None:
    """Tiles without nodata: rasterio.merge's "first" takes 0 as its nodata, so a 0 of
    the winning tile inside an overlap is overwritten by the next tile; "last" copies
    every pixel of each tile in turn."""
    paths = overlapping_tiles(tmp_path, 13, nodata=None)  # values 0-249: zeros included
    first = merged(paths, "first")[0]
    with pytest.raises(IncompatibleArraysError, match=r'rasterio.merge \(method="first"\) takes'):
        mosaic(paths, overlap="first")
    result = mosaic(paths, overlap="last")
    np.testing.assert_array_equal(
        read_manifest_array(result.band_data.data), merged(paths, "last")[0]
    )
    assert (first != read_manifest_array(mosaic(paths, overlap="last").band_data.data)).any()
