"""What a :class:`~virtualizarr_fill.assemble.collecting.Collector` keeps of its files:
columns (:class:`~virtualizarr_fill.assemble.part_table.PartTable`), not objects per
file; and the mosaics and series combined from those columns, read back as rasterio
reads the tiles."""

from __future__ import annotations

import gc
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

import virtualizarr_fill
from tests._manifest_builders import read_manifest_array
from tests._native_references import rasterio_merge
from tests.assemble.test_assemble import REGISTRY
from tests.assemble.test_collector_memory import _collected
from virtualizarr_fill import TIFFParser
from virtualizarr_fill.assemble.parts import file_part

#: Worker processes started afresh (a fork would copy the parent's I/O threads' locks).
_SPAWN = multiprocessing.get_context("spawn")


def _one_chunk_tiles(directory: Path, rows: int, columns: int) -> list[Path]:
    """GeoTIFF tiles of a ``rows`` x ``columns`` grid, each one Deflate strip (one chunk
    reference), with a GeoTransform of its own, written by rasterio (in row order)."""
    rng = np.random.default_rng(11)
    paths = []
    for row in range(rows):
        for column in range(columns):
            path = directory / f"tile_{row:03d}_{column:03d}.tif"
            with rasterio.open(
                path,
                "w",
                driver="GTiff",
                width=12,
                height=9,
                count=1,
                dtype="int16",
                crs="EPSG:32633",
                transform=from_origin(500000 + column * 120, 4000000 - row * 90, 10, 10),
                nodata=-1,
                compress="deflate",
                blockysize=9,
            ) as dst:
                dst.write(rng.integers(0, 3000, (1, 9, 12), dtype=np.int16))
            paths.append(path)
    return paths


def _arrays_held(root: object) -> int:
    """How many NumPy arrays ``root`` holds (reachable through its references)."""
    seen: set[int] = set()
    stack = [root]
    arrays = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            arrays += 1
        stack.extend(gc.get_referents(obj))
    return arrays


def test_a_collector_holds_as_many_arrays_for_many_files_as_for_few(tmp_path: Path) -> None:
    """The chunk references and coordinate values of N files are kept in columns: the
    NumPy arrays a collector holds (the first file's) do not grow with N."""
    paths = _one_chunk_tiles(tmp_path, 40, 2)
    few, many = _collected(paths[:4]), _collected(paths)
    assert len(many.parts) == 80
    assert _arrays_held(many) == _arrays_held(few)
    # and so after travelling from a worker process
    assert _arrays_held(pickle.loads(pickle.dumps(many))) == _arrays_held(few)


def test_parts_read_from_the_columns_equal_the_files_parsed_alone(tmp_path: Path) -> None:
    paths = _one_chunk_tiles(tmp_path, 3, 3)
    collector = pickle.loads(pickle.dumps(_collected(paths)))
    parser = TIFFParser()
    for path, part in zip(paths, collector.parts, strict=True):
        alone = file_part(parser(url=f"file://{path}", registry=REGISTRY))
        assert part.url == alone.url
        assert dict(part.var_attrs) == alone.var_attrs
        assert set(part.coords) == set(alone.coords)
        for name, coordinate in part.coords.items():
            assert coordinate.dims == alone.coords[name].dims
            assert coordinate.attrs == alone.coords[name].attrs
            assert coordinate.encoding == alone.coords[name].encoding
            np.testing.assert_array_equal(coordinate.values, alone.coords[name].values)
        with rasterio.open(path) as src:
            np.testing.assert_array_equal(read_manifest_array(part.arrays["band_data"]), src.read())


@pytest.mark.parametrize("executor", [False, True], ids=["here", "worker-processes"])
def test_a_mosaic_from_the_columns_equals_rasterio_merge(tmp_path: Path, executor: bool) -> None:
    paths = _one_chunk_tiles(tmp_path, 5, 4)
    shuffled = [paths[i] for i in np.random.default_rng(3).permutation(len(paths))]
    urls = [f"file://{p}" for p in shuffled]
    if executor:
        with ProcessPoolExecutor(2, mp_context=_SPAWN) as pool:
            mosaic = virtualizarr_fill.open_virtual_mosaic(urls, REGISTRY, executor=pool)
    else:
        mosaic = virtualizarr_fill.open_virtual_mosaic(urls, REGISTRY)
    merged, transform = rasterio_merge(paths)
    values = read_manifest_array(mosaic.band_data.data)
    assert values.shape == merged.shape == (1, 45, 48)
    np.testing.assert_array_equal(values, merged)
    import rioxarray  # noqa: F401  (the .rio accessor)

    assert mosaic.rio.transform() == transform


def test_a_series_from_the_columns_equals_the_tiles_read_with_rasterio(tmp_path: Path) -> None:
    paths = _one_chunk_tiles(tmp_path, 30, 1)
    shuffled = [paths[i] for i in np.random.default_rng(4).permutation(len(paths))]
    with ProcessPoolExecutor(2, mp_context=_SPAWN) as pool:
        series = virtualizarr_fill.open_virtual_series(
            [f"file://{p}" for p in shuffled], REGISTRY, TIFFParser(), "y", executor=pool
        )
    expected = []
    ys = []
    for path in paths:
        with rasterio.open(path) as src:
            expected.append(src.read())
            rows = np.arange(src.height)
            ys.append(np.asarray(src.xy(rows, np.zeros_like(rows))[1]))
    np.testing.assert_array_equal(
        read_manifest_array(series.band_data.data), np.concatenate(expected, axis=1)
    )
    np.testing.assert_array_equal(series.y.values, np.concatenate(ys))
