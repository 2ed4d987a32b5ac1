"""Reads of Icechunk repositories through ``open_icechunk`` and ``open_icechunk_datatree``:
a batch of keys per Icechunk call, dask chunks of whole stored chunks in every group of
a tree, the values of the native readers, zarr's settings untouched.

Repositories are real (``virtualizarr-fill build`` on disk, or arrays written by zarr
into an Icechunk repository); files are written with GDAL (rasterio), whose reads are
the expected values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.storage import WrapperStore

import virtualizarr_fill
from tests._damaged_files import damage_strip
from virtualizarr_fill.cli import EXIT_OK, main
from virtualizarr_fill.reads import keyed_batches
from virtualizarr_fill.writers.repository import _readable_store

rasterio = pytest.importorskip("rasterio")
icechunk = pytest.importorskip("icechunk")

ROWS, COLS, STRIP = 100, 48, 16  # 7 strips a file, the last of 4 rows


def _build(capsys: pytest.CaptureFixture[str], *argv: str) -> None:
    code = main(["build", *argv, "--workers", "0"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, out + err


def _column(directory: Path, count: int) -> list[Path]:
    """GeoTIFFs (deflate, strips of 16 rows, two bands) stacked along y, top first."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True)
    rng = np.random.default_rng(38)
    paths = []
    for k in range(count):
        path = directory / f"part_{k:02d}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="uint16",
            crs="EPSG:32633", transform=from_origin(500000, 6000000 - k * ROWS * 10, 10, 10),
            compress="deflate", blockysize=STRIP,
        ) as dst:  # fmt: skip
            dst.write(rng.integers(1, 3000, (2, ROWS, COLS)).astype("uint16"))
        paths.append(path)
    return paths


def _rasterio_column(paths: list[Path]) -> np.ndarray:
    parts = []
    for path in paths:
        with rasterio.open(path) as src:
            parts.append(src.read())
    return np.concatenate(parts, axis=1)


class _CountingStore(WrapperStore[Any]):
    """Icechunk's store, its reads counted: ``get`` of chunk keys, and calls of
    ``get_partial_values`` with the keys each asked for."""

    batches_keys = True  # its get_partial_values is Icechunk's

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.chunk_gets = 0
        self.batches: list[int] = []

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        if "/c/" in key:
            self.chunk_gets += 1
        return await self._store.get(key, prototype, byte_range)

    async def get_partial_values(
        self, prototype: Any, key_ranges: Iterable[tuple[str, Any]]
    ) -> list[Any]:
        asked = list(key_ranges)
        self.batches.append(len(asked))
        return await self._store.get_partial_values(prototype, asked)


def test_a_read_fetches_a_piece_of_keys_per_icechunk_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _column(tmp_path / "tiles", count=6)
    location = tmp_path / "column.icechunk"
    _build(capsys, *map(str, paths), "--out", str(location))
    strips = len(paths) * math.ceil(ROWS / STRIP)
    native = _rasterio_column(paths)

    zarrs = _CountingStore(_readable_store(location, "main"))
    values = zarr.open_array(zarrs, path="band_data", mode="r")[...]
    assert zarrs.chunk_gets == strips  # zarr's own pipeline: one get per strip
    np.testing.assert_array_equal(values, native)

    ours = _CountingStore(_readable_store(location, "main"))
    with virtualizarr_fill.use_manifest_pipeline():
        array = zarr.open_array(ours, path="band_data", mode="r")
    np.testing.assert_array_equal(array[...], native)
    assert ours.chunk_gets == 0
    assert sum(ours.batches) == strips
    assert len(ours.batches) <= keyed_batches.max_workers()  # a piece per worker thread

    # a part of the column: only its strips are fetched
    ours.batches.clear()
    np.testing.assert_array_equal(array[:, 150:260], native[:, 150:260])
    assert ours.chunk_gets == 0
    # rows 150-259: the strips of the second file from row 148 (4), of the third to row 263 (4)
    assert sum(ours.batches) == 8


def test_open_icechunk_reads_a_column_as_rasterio_and_leaves_zarr_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _column(tmp_path / "tiles", count=5)
    location = tmp_path / "column.icechunk"
    _build(capsys, *map(str, paths), "--out", str(location))
    native = _rasterio_column(paths)
    before = zarr.config.get("codec_pipeline.path")

    for chunks in ("stored-multiples", None, {}, {"y": 200}):
        ds = virtualizarr_fill.open_icechunk(location, chunks=chunks)
        np.testing.assert_array_equal(ds["band_data"].values, native)
        assert zarr.config.get("codec_pipeline.path") == before
    small = virtualizarr_fill.open_icechunk(location, chunk_bytes=2 * ROWS * COLS * 2 * 2)
    assert small["band_data"].chunks[1] == (2 * ROWS, 2 * ROWS, ROWS)  # two files a task
    np.testing.assert_array_equal(small["band_data"].values, native)
    # zarr's own pipeline, for arrays opened by anyone else
    plain = zarr.open_array(_readable_store(location, "main"), path="band_data", mode="r")
    assert "ManifestCodecPipeline" not in type(plain.async_array.codec_pipeline).__name__


def test_missing_chunks_read_as_the_fill_value(tmp_path: Path) -> None:
    """Icechunk's batched fetch fails on a key with no chunk; such a piece is read by
    zarr's pipeline, which returns the fill value."""
    storage = icechunk.local_filesystem_storage(str(tmp_path / "sparse.icechunk"))
    repo = icechunk.Repository.create(storage)
    session = repo.writable_session("main")
    group = zarr.group(session.store)
    array = group.create_array(
        "values", shape=(40, 30), chunks=(4, 30), dtype="int32", fill_value=-7,
        dimension_names=("y", "x"),
    )  # fmt: skip
    expected = np.full((40, 30), -7, dtype="int32")
    for start in (0, 8, 12, 28):  # chunks 0, 2, 3, 7 of 10; the others never written
        block = np.arange(4 * 30, dtype="int32").reshape(4, 30) + start
        array[start : start + 4] = block
        expected[start : start + 4] = block
    session.commit("some chunks")

    for chunks in ("stored-multiples", None):
        ds = virtualizarr_fill.open_icechunk(tmp_path / "sparse.icechunk", chunks=chunks)
        np.testing.assert_array_equal(ds["values"].values, expected)
        np.testing.assert_array_equal(ds["values"][5:30].values, expected[5:30])


def test_a_datatree_is_chunked_level_by_level_as_open_icechunk_chunks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fixtures import make_gdal_features

    cog = tmp_path / "cog.tif"
    make_gdal_features.write_cog(cog, height=256, width=96, block=32, overview_factors=(2, 4),
                                 mask=False)  # fmt: skip
    location = tmp_path / "pyramid.icechunk"
    _build(capsys, str(cog), "--overviews", "--out", str(location))
    with rasterio.open(cog) as src:
        expected = [src.read()] + [
            src.read(out_shape=(src.count, src.height // f, src.width // f))
            for f in src.overviews(1)
        ]

    tree = virtualizarr_fill.open_icechunk_datatree(location)
    for level, values in enumerate(expected):
        variable = tree[str(level)]["band_data"].variable
        # each level far below the default target: one task, as open_icechunk(group=...)
        assert variable.chunks == tuple((n,) for n in values.shape)
        single = virtualizarr_fill.open_icechunk(location, group=str(level))["band_data"]
        assert single.chunks == variable.chunks
        np.testing.assert_array_equal(variable.values, values)

    # a target of 64 rows of the full resolution: whole 32-row tiles, two by two
    row = expected[0].shape[0] * expected[0].shape[2] * expected[0].dtype.itemsize
    small = virtualizarr_fill.open_icechunk_datatree(location, chunk_bytes=64 * row)
    full = small["0"]["band_data"].variable
    stored = full.encoding["chunks"]
    for sizes, edge in zip(full.chunks[1:], stored[1:], strict=True):
        assert all(s % edge == 0 or s == sizes[-1] for s in sizes), (sizes, edge)
    assert full.chunks[1] == (64, 64, 64, 64)
    assert len(list(itertools.chain(*full.chunks))) > 3
    for level, values in enumerate(expected):
        np.testing.assert_array_equal(small[str(level)]["band_data"].values, values)

    lazy = virtualizarr_fill.open_icechunk_datatree(location, chunks=None)
    assert lazy["0"]["band_data"].chunks is None  # no dask, as xarray
    np.testing.assert_array_equal(lazy["2"]["band_data"].values, expected[2])


def test_open_icechunk_computes_on_a_cluster_as_rasterio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], local_cluster: Any
) -> None:
    """The arrays carry the pipeline to worker processes, which read with it."""
    from distributed import Client

    paths = _column(tmp_path / "tiles", count=4)
    location = tmp_path / "column.icechunk"
    _build(capsys, *map(str, paths), "--out", str(location))
    ds = virtualizarr_fill.open_icechunk(location, chunk_bytes=ROWS * COLS * 2 * 2)
    assert len(ds["band_data"].chunks[1]) == len(paths)  # a task per file
    with Client(local_cluster) as client:
        values = client.compute(ds["band_data"].data).result()
    np.testing.assert_array_equal(values, _rasterio_column(paths))


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_a_strip_that_does_not_decode_is_named_by_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The piece holding it is read again by zarr's pipeline, which names the chunk."""
    import tifffile

    from virtualizarr_fill.errors import ChunkDecodeError

    path = tmp_path / "damaged.tif"
    values = np.random.default_rng(5).integers(0, 255, (64, 40), dtype=np.uint8)
    tifffile.imwrite(path, values, compression="zlib", rowsperstrip=16)
    damage_strip(path, 2)
    with rasterio.open(path) as src, pytest.raises(rasterio.errors.RasterioIOError):
        src.read()
    location = tmp_path / "damaged.icechunk"
    _build(capsys, str(path), "--out", str(location))

    ds = virtualizarr_fill.open_icechunk(location)
    with pytest.raises(ChunkDecodeError) as raised:
        ds["band_data"].load()
    assert "chunk band_data/c/0/2/0 of <icechunk.IcechunkStore>: cannot be read or decoded" in str(
        raised.value
    )
    # the strips around it read as GDAL reads them
    with rasterio.open(path) as src:
        top = src.read(window=((0, 32), (0, 40)))
    np.testing.assert_array_equal(ds["band_data"][:, :32].values, top)
