"""A chunk that cannot be decoded is named: ``ChunkDecodeError`` with its array, its index
in the chunk grid, its file and byte range, read through the manifest pipeline
(``use_manifest_pipeline``), on every way that pipeline reads (a few chunks, many, worker
threads), and by its store key for an Icechunk store.

Files are written by tifffile and h5py, then damaged; the expected chunk and byte range
come from tifffile's strip offsets and h5py's chunk index, and the native readers fail
on the same chunk (the file is damaged, not misread).
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path
from typing import Any

import h5py
import imagecodecs
import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from tests._damaged_files import flip_bytes
from virtualizarr_fill import ChunkDecodeError, HDF5Parser, TIFFParser
from virtualizarr_fill.reads import scheduling

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})

READ_PATHS = ["use_manifest_pipeline"]


def _reading(path: str) -> Any:
    return getattr(virtualizarr_fill, path)()


def _strips(path: Path) -> tuple[list[int], list[int]]:
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        return list(page.dataoffsets), list(page.databytecounts)  # type: ignore[union-attr]


def _lzw_tiff(path: Path, rows: int, rows_per_strip: int) -> np.ndarray:
    data = np.random.default_rng(3).integers(0, 255, (rows, 64, 3), dtype=np.uint8)
    tifffile.imwrite(path, data, compression="lzw", rowsperstrip=rows_per_strip, photometric="rgb")
    return data


def _open_band(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = TIFFParser()(f"file://{path}", REGISTRY)
    return zarr.open_group(store, mode="r")["band_data"]


@pytest.mark.parametrize("read_path", READ_PATHS)
@pytest.mark.parametrize(
    ("rows", "rows_per_strip", "selection"),
    [
        (64, 16, np.s_[:]),  # a few chunks
        (64, 16, np.s_[1, 20:24, :]),  # one chunk
        (512, 2, np.s_[:]),  # many small chunks
        (8192, 512, np.s_[:]),  # large enough to be shared among threads
    ],
    ids=["few", "one", "many", "threads"],
)
def test_a_corrupt_tiff_strip_is_named(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    read_path: str,
    rows: int,
    rows_per_strip: int,
    selection: Any,
) -> None:
    ways: list[str] = []
    pool = scheduling.thread_pool
    monkeypatch.setattr(scheduling, "thread_pool", lambda: ways.append("threads") or pool())
    path = tmp_path / "damaged.tif"
    data = _lzw_tiff(path, rows, rows_per_strip)
    offsets, counts = _strips(path)
    bad = 10 if len(offsets) > 10 else 1
    flip_bytes(path, offsets[bad], counts[bad])
    with pytest.raises(Exception):  # the native reader fails on it too  # noqa: B017
        tifffile.imread(path)
    with _reading(read_path), pytest.raises(ChunkDecodeError) as raised:
        _open_band(path)[selection]
    expected = (
        f"chunk (0, {bad}, 0) of band_data in file://{path} "
        f"(bytes {offsets[bad]} to {offsets[bad] + counts[bad]}): cannot be decoded"
    )
    assert str(raised.value).startswith(expected), raised.value
    assert "IMCD_LZW" in str(raised.value)
    if rows_per_strip == 512:
        assert "threads" in ways
    # the strips before it still read as written
    with _reading(read_path):
        before = _open_band(path)[:, : bad * rows_per_strip, :]
    np.testing.assert_array_equal(before, np.moveaxis(data[: bad * rows_per_strip], -1, 0))


def _replace_strip(path: Path, strip: int, payload: bytes) -> None:
    """Point strip ``strip`` at ``payload``, appended to the file (the offsets and byte
    counts rewritten in the integer types tifffile stored them in)."""
    formats = {3: "<H", 4: "<I"}
    with tifffile.TiffFile(path) as tif:
        tags = tif.pages[0].tags  # type: ignore[union-attr]
        offsets, counts = tags["StripOffsets"], tags["StripByteCounts"]
        fields = [
            (offsets.valueoffset, formats[offsets.dtype]),
            (counts.valueoffset, formats[counts.dtype]),
        ]
    content = bytearray(path.read_bytes())
    start = len(content)
    content += payload
    for (at, form), value in zip(fields, (start, len(payload)), strict=True):
        struct.pack_into(form, content, at + struct.calcsize(form) * strip, value)
    path.write_bytes(bytes(content))


@pytest.mark.parametrize("read_path", READ_PATHS)
def test_a_strip_that_decodes_to_the_wrong_size_is_named(tmp_path: Path, read_path: str) -> None:
    """An LZW stream one byte longer than its strip: zarr alone says "cannot reshape"."""
    path = tmp_path / "long_strip.tif"
    data = _lzw_tiff(path, 64, 16)
    payload = imagecodecs.lzw_encode(data[16:32].tobytes() + b"\0")
    _replace_strip(path, 1, payload)
    offsets, counts = _strips(path)
    with _reading(read_path), pytest.raises(ChunkDecodeError) as raised:
        _open_band(path)[:]
    assert str(raised.value).startswith(
        f"chunk (0, 1, 0) of band_data in file://{path} "
        f"(bytes {offsets[1]} to {offsets[1] + counts[1]}): cannot be decoded"
    ), raised.value


@pytest.mark.parametrize("read_path", READ_PATHS)
def test_a_corrupt_hdf5_chunk_is_named(tmp_path: Path, read_path: str) -> None:
    path = tmp_path / "damaged.h5"
    values = np.random.default_rng(4).normal(size=(8, 64, 64)).astype("f4")
    with h5py.File(path, "w") as f:
        f.create_dataset("t", data=values, chunks=(2, 64, 64), compression="gzip")
    with h5py.File(path) as f:
        # the largest chunk: the parser decodes the smallest one to check the layout
        dataset = f["t"].id
        chunks = [dataset.get_chunk_info(i) for i in range(dataset.get_num_chunks())]
        info = max(chunks, key=lambda chunk: chunk.size)
    index = tuple(int(i) // 2 if k == 0 else 0 for k, i in enumerate(info.chunk_offset))
    flip_bytes(path, info.byte_offset, info.size)
    with h5py.File(path) as f, pytest.raises(OSError):  # h5py fails on it too
        f["t"][()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = HDF5Parser()(f"file://{path}", REGISTRY)
    with _reading(read_path), pytest.raises(ChunkDecodeError) as raised:
        zarr.open_group(store, mode="r")["t"][:]
    assert str(raised.value).startswith(
        f"chunk {index} of t in file://{path} "
        f"(bytes {info.byte_offset} to {info.byte_offset + info.size}): cannot be decoded"
    ), raised.value
    with _reading(read_path):
        good = next(k for k in range(4) if k != index[0])
        np.testing.assert_array_equal(
            zarr.open_group(store, mode="r")["t"][2 * good : 2 * good + 2],
            values[2 * good : 2 * good + 2],
        )


def test_a_corrupt_chunk_of_an_icechunk_store_is_named_by_its_key(tmp_path: Path) -> None:
    """Stores other than ManifestStores are read by zarr's pipeline: the chunk is named
    by its key in the store."""
    from virtualizarr import open_virtual_dataset

    from tests._manifest_builders import icechunk_repo, icechunk_write

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = data_dir / "damaged.tif"
    _lzw_tiff(path, 64, 16)
    offsets, counts = _strips(path)
    flip_bytes(path, offsets[2], counts[2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vds = open_virtual_dataset(f"file://{path}", registry=REGISTRY, parser=TIFFParser())
    repo = icechunk_repo(tmp_path / "repo", data_dir)
    icechunk_write(repo, vds)
    store = repo.readonly_session("main").store
    with pytest.raises(Exception, match="IMCD_LZW"):  # zarr's own pipeline: the codec's error
        zarr.open_group(store, mode="r")["band_data"][:]
    with virtualizarr_fill.use_manifest_pipeline(), pytest.raises(ChunkDecodeError) as raised:
        zarr.open_group(store, mode="r")["band_data"][:]
    assert str(raised.value).startswith("chunk band_data/c/0/2/0 of "), raised.value
    assert "cannot be read or decoded (ImcdError" in str(raised.value)
