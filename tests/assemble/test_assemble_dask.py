"""open_virtual_series and open_virtual_mosaic parsing on executors: a process pool,
and a dask cluster of worker processes where the files' parts are also merged on the
cluster, as a tree.

Each result must equal the same call parsing in this process (itself checked against
xarray's nested combine in test_assemble.py) and read back what tifffile or rasterio
read; the dask tests also check from the scheduler's task stream that the merging ran
on the workers.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

import virtualizarr_fill
from tests._manifest_builders import native_tiff, read_manifest_array
from tests._native_references import rasterio_merge
from tests.assemble.test_assemble import REGISTRY, _georeferenced_strips, _same_combination
from virtualizarr_fill import IncompatibleArraysError, TIFFParser
from virtualizarr_fill.assemble import collecting


@pytest.fixture(scope="module")
def client(local_cluster: Any) -> Iterator[Any]:
    from distributed import Client

    with Client(local_cluster) as client:
        yield client


@pytest.fixture
def binary_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merge two results per task, so that nine files make a tree of three levels."""
    monkeypatch.setattr(collecting, "FAN_IN", 2)


def _urls(paths: list[Path]) -> list[str]:
    return [f"file://{p}" for p in paths]


def _tasks_run(client: Any, call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``call()`` and the names of the tasks the cluster ran for it."""
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        result = call()
    names = [
        str(task["key"][0] if isinstance(task["key"], tuple) else task["key"])
        for task in stream.data
    ]
    return result, names


@pytest.mark.parametrize("handle", ["client", "executor"])
@pytest.mark.usefixtures("binary_tree")
def test_series_is_merged_on_the_cluster(tmp_path: Path, client: Any, handle: str) -> None:
    paths = _georeferenced_strips(tmp_path, 9)
    expected = virtualizarr_fill.open_virtual_series(_urls(paths), REGISTRY, TIFFParser(), "y")
    executor = client if handle == "client" else client.get_executor()
    parsed, tasks = _tasks_run(
        client,
        lambda: virtualizarr_fill.open_virtual_series(
            _urls(paths), REGISTRY, TIFFParser(), "y", executor=executor
        ),
    )
    # nine files on two workers: five batches, merged two by two in three levels
    assert sum(t.startswith("collect_batch") for t in tasks) == 5
    assert sum(t.startswith("merge_collectors") for t in tasks) == 4
    _same_combination(parsed, expected)
    np.testing.assert_array_equal(
        read_manifest_array(parsed.band_data.data),
        np.concatenate([native_tiff(p) for p in sorted(paths)], axis=0)[np.newaxis],
    )


@pytest.mark.usefixtures("binary_tree")
def test_stack_keeps_the_order_given_through_the_tree(tmp_path: Path, client: Any) -> None:
    paths = _georeferenced_strips(tmp_path, 9, shuffle=False)
    for i, path in enumerate(paths):  # one grid for all, so that they stack
        with rasterio.open(path, "r+") as dst:
            dst.transform = from_origin(500000, 4000000, 10, 10)
            assert i == int(path.stem.split("_")[1])
    order = [paths[i] for i in (4, 0, 8, 2, 6, 1, 7, 3, 5)]
    expected = virtualizarr_fill.open_virtual_series(
        _urls(order), REGISTRY, TIFFParser(), "scene", new_dim=True
    )
    parsed = virtualizarr_fill.open_virtual_series(
        _urls(order), REGISTRY, TIFFParser(), "scene", new_dim=True, executor=client
    )
    _same_combination(parsed, expected)
    np.testing.assert_array_equal(
        read_manifest_array(parsed.band_data.data),
        np.stack([native_tiff(p) for p in order])[:, np.newaxis],
    )


@pytest.mark.usefixtures("binary_tree")
def test_mosaic_is_merged_on_the_cluster(
    tmp_path: Path, client: Any, write_tiles: Callable[..., list[Path]]
) -> None:
    paths = write_tiles(tmp_path)
    expected = virtualizarr_fill.open_virtual_mosaic(_urls(paths), REGISTRY)
    mosaic, tasks = _tasks_run(
        client,
        lambda: virtualizarr_fill.open_virtual_mosaic(_urls(paths), REGISTRY, executor=client),
    )
    assert any(t.startswith("merge_collectors") for t in tasks)
    _same_combination(mosaic, expected)
    merged, _ = rasterio_merge(paths)
    np.testing.assert_array_equal(read_manifest_array(mosaic.band_data.data), merged)


@pytest.mark.usefixtures("binary_tree")
@pytest.mark.parametrize("method", ["first", "last"])
def test_overlapping_mosaic_merged_on_the_cluster_keeps_the_given_order(
    tmp_path: Path, client: Any, method: str
) -> None:
    """The tree merge keeps the tiles in the order given, which decides the overlaps."""
    from tests.assemble.test_mosaic_overlaps import merged as merged_with
    from tests.assemble.test_mosaic_overlaps import overlapping_tiles

    paths = overlapping_tiles(tmp_path, 13)
    mosaic, tasks = _tasks_run(
        client,
        lambda: virtualizarr_fill.open_virtual_mosaic(
            _urls(paths), REGISTRY, overlap=method, executor=client
        ),
    )
    assert any(t.startswith("merge_collectors") for t in tasks)
    expected, _, _ = merged_with(paths, method)
    np.testing.assert_array_equal(read_manifest_array(mosaic.band_data.data), expected)


@pytest.mark.usefixtures("binary_tree")
def test_a_file_that_differs_is_refused_through_the_tree(tmp_path: Path, client: Any) -> None:
    paths = _georeferenced_strips(tmp_path, 8, shuffle=False)
    odd_dir = tmp_path / "odd"
    odd_dir.mkdir()
    (odd,) = _georeferenced_strips(odd_dir, 1, start=8, bands=2)
    with pytest.raises(IncompatibleArraysError, match=r"odd/row_8\.tif .*different 'band'"):
        virtualizarr_fill.open_virtual_series(
            _urls([*paths, odd]), REGISTRY, TIFFParser(), "y", executor=client
        )


def test_series_parsed_by_a_process_pool(tmp_path: Path) -> None:
    """Each task sends back its batch compacted; this process merges the batches."""
    paths = _georeferenced_strips(tmp_path, 9)
    expected = virtualizarr_fill.open_virtual_series(_urls(paths), REGISTRY, TIFFParser(), "y")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as executor:
        parsed = virtualizarr_fill.open_virtual_series(
            _urls(paths), REGISTRY, TIFFParser(), "y", executor=executor
        )
    _same_combination(parsed, expected)
    np.testing.assert_array_equal(
        read_manifest_array(parsed.band_data.data),
        np.concatenate([native_tiff(p) for p in sorted(paths)], axis=0)[np.newaxis],
    )
