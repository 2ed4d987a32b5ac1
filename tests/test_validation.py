"""Malformed files made by hand: each gets a clear project error at parse time.

The error is a :class:`~virtualizarr_fill.errors.VirtualizarrFillError` of the right
kind (and the matching builtin, ``ValueError`` for corrupt or foreign files), raised by
the parser -- not later while reading -- and its message names the file and the values
that disagree. Files are written by tifffile/h5py and then edited byte by byte; one case
serves a truncated object from a real S3 server on loopback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from tests._fuzz_mutations import (
    TiffStructure,
    _tiff_set_scalar,
    apply_ops,
    tiff_structure,
)
from tests.servers import S3Server
from virtualizarr_fill.errors import (
    CorruptFileError,
    NotATiffError,
    NotHDF5Error,
    VirtualizarrFillError,
)
from virtualizarr_fill.hdf5 import HDF5Parser, SkippedDatasetWarning
from virtualizarr_fill.tiff import TIFFParser

LOCAL = ObjectStoreRegistry({"file://": LocalStore()})
IMAGE = np.arange(400, dtype=np.uint8).reshape(20, 20)


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def parse_tiff(path: Path) -> Any:
    return TIFFParser()(_url(path), LOCAL)


def parse_hdf5(path: Path, **options: Any) -> Any:
    return HDF5Parser(**options)(_url(path), LOCAL)


def numbers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\d+", text)}


def assert_names(error: BaseException, path: Path, *values: int) -> None:
    """The message names the file and every value."""
    message = str(error)
    assert path.name in message, message
    missing = [v for v in values if v not in numbers(message)]
    assert not missing, f"values {missing} not in: {message}"


# -- TIFF -------------------------------------------------------------------------------------


def _write_tiff(
    path: Path, *, rowsperstrip: int = 20, bigtiff: bool = False, data: np.ndarray = IMAGE
) -> TiffStructure:
    tifffile.imwrite(
        path,
        data,
        rowsperstrip=rowsperstrip,
        bigtiff=bigtiff,
        photometric="minisblack",
        metadata=None,
    )
    tiff_structure.cache_clear()
    return tiff_structure(str(path))


def _edit(path: Path, ops: list[dict[str, Any]]) -> None:
    path.write_bytes(apply_ops(path.read_bytes(), ops))


def _element(structure: TiffStructure, code: int, index: int, value: int) -> dict[str, Any]:
    entry = next(e for e in structure.entries if e.code == code)
    width = 8 if entry.dtype == 16 else 4 if entry.dtype == 4 else 2
    position = entry.value_pos + index * width
    return {"op": "put", "pos": position, "hex": value.to_bytes(width, structure.byteorder).hex()}  # type: ignore[arg-type]


def _scalar(structure: TiffStructure, code: int, value: int) -> list[dict[str, Any]]:
    entry = next(e for e in structure.entries if e.code == code)
    return _tiff_set_scalar(structure, entry, value)


def test_strip_past_end_of_file(tmp_path: Path) -> None:
    path = tmp_path / "strip_past_eof.tif"
    structure = _write_tiff(path)
    offset = structure.segments[0][0]
    size = structure.size
    path.write_bytes(path.read_bytes()[: size - 100])  # the upload stopped early
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert isinstance(info.value, ValueError)
    assert_names(info.value, path, offset + 400, size - 100)


def test_strip_offset_past_end_of_file(tmp_path: Path) -> None:
    path = tmp_path / "offset_past_eof.tif"
    structure = _write_tiff(path, rowsperstrip=5)
    _edit(path, [_element(structure, 273, 2, structure.size + 1000)])
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, structure.size + 1000 + 100, structure.size)


def test_bytecount_past_32_bit_range(tmp_path: Path) -> None:
    path = tmp_path / "bytecount_huge.tif"
    structure = _write_tiff(path)
    _edit(path, [_element(structure, 279, 0, 2**32 - 1)])
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, structure.size)


def test_offset_count_disagrees_with_geometry(tmp_path: Path) -> None:
    """Four strips of 5 rows claimed by RowsPerStrip, but only two offsets and counts."""
    path = tmp_path / "count_mismatch.tif"
    structure = _write_tiff(path, rowsperstrip=5)
    ops = []
    for code in (273, 279):
        entry = next(e for e in structure.entries if e.code == code)
        ops.append(
            {"op": "put", "pos": entry.entry_pos + 4, "hex": (2).to_bytes(4, "little").hex()}
        )
    _edit(path, ops)
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, 2, 4)


@pytest.mark.parametrize("delta", [-1, -37])
def test_uncompressed_strip_shorter_than_its_rows(tmp_path: Path, delta: int) -> None:
    """An interior uncompressed strip of 5 rows x 20 bytes must hold exactly 100 bytes
    (longer strips: ``test_fuzz_known_bugs.py``)."""
    path = tmp_path / f"strip_{delta}.tif"
    structure = _write_tiff(path, rowsperstrip=5)
    _edit(path, [_element(structure, 279, 1, 100 + delta)])
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, 100 + delta, 100)


@pytest.mark.parametrize("tag", [257], ids=["ImageLength"])
def test_dimension_of_10_to_the_12(tmp_path: Path, tag: int) -> None:
    """(ImageWidth: ``test_fuzz_known_bugs.py``.)"""
    path = tmp_path / f"huge_{tag}.tif"
    structure = _write_tiff(path, bigtiff=True)
    _edit(path, _scalar(structure, tag, 10**12))
    with pytest.raises(VirtualizarrFillError) as info:
        parse_tiff(path)
    assert isinstance(info.value, ValueError | NotImplementedError)
    assert_names(info.value, path, 10**12)


def test_not_a_tiff(tmp_path: Path) -> None:
    path = tmp_path / "picture.tif"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    with pytest.raises(NotATiffError) as info:
        parse_tiff(path)
    assert isinstance(info.value, ValueError)
    assert_names(info.value, path)


# -- HDF5 and other formats ---------------------------------------------------------------------


def _write_hdf5(path: Path) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(5000, dtype="f8"))
        f.create_dataset(
            "b",
            data=np.arange(5000, dtype="i4").reshape(50, 100),
            chunks=(10, 100),
            compression="gzip",
        )


def test_truncated_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "truncated.h5"
    _write_hdf5(path)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path)
    assert isinstance(info.value, ValueError)
    assert_names(info.value, path)
    assert "truncat" in str(info.value).lower() or str(size // 2) in str(info.value)


def test_hdf5_chunk_past_end(tmp_path: Path) -> None:
    """A chunk index entry pointing past the end of the file: the dataset is skipped with
    a warning naming it (default), or the parse fails naming file and sizes (raise)."""
    path = tmp_path / "chunk_past_eof.h5"
    _write_hdf5(path)
    with h5py.File(path, "r") as f:
        infos: list[Any] = []
        f["b"].id.chunk_iter(infos.append)
    data = bytearray(path.read_bytes())
    old = infos[-1].byte_offset.to_bytes(8, "little")
    where = data.find(old, data.find(b"TREE"))
    assert where > 0
    moved = len(data) + 4096
    data[where : where + 8] = moved.to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path, moved + infos[-1].size, len(data))
    with pytest.warns(SkippedDatasetWarning, match="past the end"):
        store = parse_hdf5(path)
    arrays = dict(zarr.open_group(store, mode="r", zarr_format=3).arrays())
    assert sorted(arrays) == ["a"]
    np.testing.assert_array_equal(arrays["a"][...], np.arange(5000, dtype="f8"))


@pytest.mark.parametrize("parse", [parse_tiff, parse_hdf5], ids=["TIFFParser", "HDF5Parser"])
def test_text_file_is_refused_by_both_parsers(tmp_path: Path, parse: Any) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not an image, not a dataset\n" * 50)
    expected = NotATiffError if parse is parse_tiff else NotHDF5Error
    with pytest.raises(expected) as info:
        parse(path)
    assert isinstance(info.value, ValueError)
    assert_names(info.value, path)


@pytest.mark.corpus
def test_netcdf3_refused(corpus_dir: Path, tmp_path: Path) -> None:
    path = corpus_dir / "pydata+xarray" / "example_1.nc"
    with pytest.raises(NotHDF5Error) as info:
        parse_hdf5(path)
    assert_names(info.value, path)
    assert "netCDF-3" in str(info.value)
    with pytest.raises(NotATiffError):
        parse_tiff(path)


# -- S3 -------------------------------------------------------------------------------------------


BUCKET = "validation"


@pytest.fixture(scope="module")
def s3_objects(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> S3Server:
    """A TIFF and an HDF5 file uploaded shorter than their headers claim."""
    s3_server.create_bucket(BUCKET)
    folder = tmp_path_factory.mktemp("s3_validation")
    tiff = folder / "short.tif"
    structure = _write_tiff(tiff)
    s3_server.put_bytes(BUCKET, "scenes/short.tif", tiff.read_bytes()[: structure.size - 150])
    h5 = folder / "short.h5"
    _write_hdf5(h5)
    s3_server.put_bytes(BUCKET, "cubes/short.h5", h5.read_bytes()[: h5.stat().st_size // 2])
    return s3_server


def _s3_registry(server: S3Server) -> ObjectStoreRegistry:
    return ObjectStoreRegistry({f"s3://{BUCKET}": server.store(BUCKET)})


def test_s3_tiff_shorter_than_its_header(s3_objects: S3Server) -> None:
    url = f"s3://{BUCKET}/scenes/short.tif"
    with pytest.raises(CorruptFileError) as info:
        TIFFParser()(url, _s3_registry(s3_objects))
    message = str(info.value)
    assert url in message or "short.tif" in message, message
    assert "past the end" in message


def test_s3_hdf5_shorter_than_its_header(s3_objects: S3Server) -> None:
    url = f"s3://{BUCKET}/cubes/short.h5"
    with pytest.raises(CorruptFileError) as info:
        HDF5Parser()(url, _s3_registry(s3_objects))
    assert "short.h5" in str(info.value)
