"""Malformed files made by hand: each gets a clear project error at parse time.

The error is a :class:`~virtualizarr_fill.errors.VirtualizarrFillError` of the right
kind (and the matching builtin, ``ValueError`` for corrupt or foreign files), raised by
the parser -- not later while reading -- and its message names the file and the values
that disagree. Files are written by tifffile/h5py and then edited byte by byte; one case
serves a truncated object from a real S3 server on loopback. Cases where libhdf5 itself
would hang or allocate gigabytes are first judged in a fresh process (bounded in time
and memory), then parsed here for the message.
"""

from __future__ import annotations

import re
import struct
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from conformance.fuzz.mutations import (
    TiffStructure,
    _tiff_set_scalar,
    apply_ops,
    hdf5_structure,
    tiff_structure,
)
from conformance.fuzz.worker import BUG_MEMORY, BUG_TIMEOUT, acceptable, run_once
from fixtures.servers import S3Server
from virtualizarr_fill.errors import (
    CorruptFileError,
    NotATiffError,
    NotHDF5Error,
    UnsupportedFeatureError,
    VirtualizarrFillError,
)
from virtualizarr_fill.hdf5 import HDF5Parser, SkippedDatasetWarning
from virtualizarr_fill.hdf5.attrs import AttributeWarning
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


def test_bytecount_overflowing_64_bits(tmp_path: Path) -> None:
    """BigTIFF StripByteCounts 2**64-1: no conversion overflows, and ``offsets +
    lengths`` must not wrap around in uint64 (the past-the-end check would pass)."""
    path = tmp_path / "bytecount_overflow.tif"
    structure = _write_tiff(path, bigtiff=True)
    _edit(path, [_element(structure, 279, 0, 2**64 - 1)])
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, 2**64 - 1)


@pytest.mark.parametrize("delta", [1, 37])
def test_uncompressed_strip_longer_than_its_rows(tmp_path: Path, delta: int) -> None:
    """An interior uncompressed strip of 5 rows x 20 bytes holding 100 + delta bytes
    (zarr's bytes codec would fail at read time)."""
    path = tmp_path / f"strip_{delta}.tif"
    structure = _write_tiff(path, rowsperstrip=5)
    _edit(path, [_element(structure, 279, 1, 100 + delta)])
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, 100 + delta, 100)


def test_single_strip_longer_than_image(tmp_path: Path) -> None:
    """ImageWidth says 2 columns, the one uncompressed strip holds 20 x 20 bytes (the
    last strip's length is checked when RowsPerStrip divides the image too)."""
    path = tmp_path / "narrowed.tif"
    structure = _write_tiff(path)
    _edit(path, _scalar(structure, 256, 2))
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, 400, 40)


@pytest.mark.parametrize("delta", [-1, -37])
def test_uncompressed_strip_shorter_than_its_rows(tmp_path: Path, delta: int) -> None:
    """An interior uncompressed strip of 5 rows x 20 bytes must hold exactly 100 bytes."""
    path = tmp_path / f"strip_{delta}.tif"
    structure = _write_tiff(path, rowsperstrip=5)
    _edit(path, [_element(structure, 279, 1, 100 + delta)])
    with pytest.raises(CorruptFileError) as info:
        parse_tiff(path)
    assert_names(info.value, path, 100 + delta, 100)


@pytest.mark.parametrize("tag", [256, 257], ids=["ImageWidth", "ImageLength"])
def test_dimension_of_10_to_the_12(tmp_path: Path, tag: int) -> None:
    """BigTIFF ImageWidth or ImageLength 10**12 over a 400-byte strip."""
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


def test_hdf5_unopenable_dataset_with_on_unsupported_raise(tmp_path: Path) -> None:
    """A contiguous dataset whose data runs past the end: libhdf5 refuses to open the
    object; the link walk skips it with a warning, or raises with
    ``on_unsupported="raise"``."""
    path = tmp_path / "data_past_eof.h5"
    _write_hdf5(path)
    hdf5_structure.cache_clear()
    structure = hdf5_structure(str(path))
    address = next(f for f in structure.fields if f.label == "contiguous data address")
    moved = structure.size - 100
    _edit(
        path,
        [{"op": "put", "pos": address.pos, "hex": moved.to_bytes(address.width, "little").hex()}],
    )
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path)


def _set_hdf5_fields(path: Path, values: dict[str, int]) -> None:
    """Set header fields (by the mutation mapper's labels) and restore checksums."""
    hdf5_structure.cache_clear()
    structure = hdf5_structure(str(path))
    ops: list[dict[str, Any]] = []
    for label, value in values.items():
        field = next(f for f in structure.fields if f.label == label)
        ops.append(
            {"op": "put", "pos": field.pos, "hex": value.to_bytes(field.width, "little").hex()}
        )
        ops += [fix for fix in structure.checksum_fix(field.pos) if fix not in ops]
    checksums = [op for op in ops if op["op"] == "checksum"]  # last, over the edited bytes
    _edit(path, [op for op in ops if op["op"] != "checksum"] + checksums)


def _judged_in_a_fresh_process(path: Path) -> None:
    """The verdict of a fresh worker process: no hang, no memory blow-up, values exact
    or a refusal (so that parsing here afterwards is safe)."""
    result = run_once(str(path), "hdf5", timeout=60)
    assert result["outcome"] not in (BUG_TIMEOUT, BUG_MEMORY), result
    assert acceptable(result), result


def test_single_chunk_index_smaller_than_dataset(tmp_path: Path) -> None:
    """A "single chunk" index whose chunk dimensions no longer cover the dataset: libhdf5
    would serve the one chunk at every chunk position; the header is refused."""
    path = tmp_path / "single_chunk.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("s", data=np.arange(50, dtype="i4").reshape(10, 5), chunks=(10, 5))
    _set_hdf5_fields(path, {"chunk dim 0": 3, "chunk dim 1": 2})
    with h5py.File(path, "r") as f:
        assert f["s"].chunks == (3, 2)  # the edit is what libhdf5 sees
    _judged_in_a_fresh_process(path)
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path, 3, 2, 12, 10, 5)
    assert "single-chunk index" in str(info.value) and "'/s'" in str(info.value)


def test_chunk_dimensions_disagree_with_stored_chunks(tmp_path: Path) -> None:
    """Deflated chunks of 256 elements under a layout that says 64: every chunk position
    is on the 64-grid, sizes are plausible, only decoding tells (libhdf5 would use the
    first 64 values of each chunk; zarr would fail at read time)."""
    path = tmp_path / "chunk_dims.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("g", data=np.arange(1024, dtype="i4"), chunks=(256,), compression="gzip")
    _set_hdf5_fields(path, {"chunk dim 0": 64})
    _judged_in_a_fresh_process(path)
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path, 1024, 256, 64)
    assert "'/g'" in str(info.value)


def _chunk_btree_nodes(data: bytes) -> list[tuple[int, int]]:
    """(position, level) of every chunk B-tree node (version 1) of a small file."""
    nodes, position = [], data.find(b"TREE")
    while position >= 0:
        if data[position + 4] == 1:  # node type 1: raw data chunks
            nodes.append((position, data[position + 5]))
        position = data.find(b"TREE", position + 4)
    return nodes


#: A chunk B-tree node of a 1-D dataset: 24-byte header, then (key, child) entries with
#: keys of chunk size, filter mask and two 8-byte offsets (the second always 0).
NODE_HEADER, KEY_SIZE, ENTRY_SIZE = 24, 24, 32


def _key_offset_position(node: int, key: int, axis: int) -> int:
    return node + NODE_HEADER + key * ENTRY_SIZE + 8 + 8 * axis


def test_chunk_key_with_extra_offset_set(tmp_path: Path) -> None:
    """The last offset of a version 1 B-tree chunk key must be 0. h5py's iteration does
    not show it, but libhdf5's search for that chunk misses it and reads fill values:
    the manifest would point at data where h5py shows fill."""
    path = tmp_path / "chunk_key.h5"
    values = np.arange(80, dtype="i2")
    with h5py.File(path, "w") as f:
        f.create_dataset("k", data=values, chunks=(10,), compression="gzip")
    data = bytearray(path.read_bytes())
    [(node, _)] = _chunk_btree_nodes(bytes(data))
    position = _key_offset_position(node, 3, 1)
    data[position : position + 8] = (2**49).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with h5py.File(path, "r") as f:
        assert not np.array_equal(f["k"][()], values)  # libhdf5 misses chunk 3
    _judged_in_a_fresh_process(path)
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path, node, 2**49)
    assert "'/k'" in str(info.value) and "key 3" in str(info.value)


def test_chunk_btree_internal_key_disagrees_with_its_child(tmp_path: Path) -> None:
    """A separator key of an internal B-tree node no longer equals its child's first
    key: the search for the chunks between the two misses them (libhdf5 reads fill)."""
    path = tmp_path / "internal_key.h5"
    values = np.arange(300, dtype="i2")
    with h5py.File(path, "w") as f:
        f.create_dataset("m", data=values, chunks=(1,))  # 300 chunks: two levels
    data = bytearray(path.read_bytes())
    root = next(position for position, level in _chunk_btree_nodes(bytes(data)) if level == 1)
    position = _key_offset_position(root, 2, 0)
    separator = int.from_bytes(data[position : position + 8], "little")
    data[position : position + 8] = (separator + 10).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with h5py.File(path, "r") as f:
        assert not np.array_equal(f["m"][()], values)
    _judged_in_a_fresh_process(path)
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path, root)
    assert "differ from those its parent holds" in str(info.value)


def _write_strings(path: Path, count: int = 3, text: str = "hello") -> None:
    with h5py.File(path, "w") as f:
        f.attrs["title"] = text  # a variable-length string attribute
        f.create_dataset("names", data=[text] * count, dtype=h5py.string_dtype())


def test_vlen_string_claiming_gigabytes(tmp_path: Path) -> None:
    """A string descriptor claiming 2**31 characters: libhdf5 would allocate (and clear)
    2 GiB before looking at the heap. Bounded before any allocation, refused naming the
    dataset and the size."""
    path = tmp_path / "vlen_huge.h5"
    _write_strings(path)
    with h5py.File(path, "r") as f:
        offset = f["names"].id.get_offset()
    _edit(path, [{"op": "put", "pos": offset, "hex": (2**31).to_bytes(4, "little").hex()}])
    _judged_in_a_fresh_process(path)
    with pytest.raises(CorruptFileError) as info:
        parse_hdf5(path, on_unsupported="raise")
    assert_names(info.value, path, 2**31, path.stat().st_size)
    assert "'/names'" in str(info.value)


def test_vlen_strings_larger_than_max_inline_bytes(tmp_path: Path) -> None:
    """Strings are inlined at parse time: what their descriptors claim counts against
    ``max_inline_bytes``, not just 16 bytes an element."""
    path = tmp_path / "vlen_long.h5"
    _write_strings(path, count=10, text="x" * 100)
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_hdf5(path, on_unsupported="raise", max_inline_bytes=500)
    assert_names(info.value, path, 1000, 500)
    store = parse_hdf5(path, max_inline_bytes=2000)
    values = zarr.open_group(store, mode="r", zarr_format=3)["names"][...]
    assert list(values) == ["x" * 100] * 10


def _break_global_heap(path: Path) -> int:
    """Make the first object of the file's global heap collection a free-space object of
    size 0 (libhdf5 walks the collection by object sizes); its address."""
    data = bytearray(path.read_bytes())
    collection = data.find(b"GCOL")
    assert collection > 0
    first = collection + 16
    data[first : first + 2] = (0).to_bytes(2, "little")  # object index 0: free space
    data[first + 8 : first + 16] = (0).to_bytes(8, "little")  # of size 0
    path.write_bytes(bytes(data))
    return collection


def test_global_heap_collection_that_would_loop_libhdf5(tmp_path: Path) -> None:
    """libhdf5 loops forever on a heap collection with a zero-size free-space object (h5py
    alone hangs reading the attribute); the attribute is skipped with a warning and the
    dataset refused, both naming the collection."""
    path = tmp_path / "heap_loop.h5"
    _write_strings(path)
    collection = _break_global_heap(path)
    _judged_in_a_fresh_process(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parse_hdf5(path)
    messages = [str(w.message) for w in caught]
    attribute = [m for m in messages if "'title'" in m]
    dataset = [m for m in messages if "'/names'" in m]
    assert attribute and dataset, messages
    for message in attribute + dataset:
        assert f"global heap collection at byte {collection}" in message, message
    assert any(isinstance(w.message, AttributeWarning) for w in caught)
    assert any(isinstance(w.message, SkippedDatasetWarning) for w in caught)


def test_vlen_attribute_claiming_gigabytes(tmp_path: Path) -> None:
    """A string attribute whose descriptor claims 2**31 characters is skipped with a
    warning naming the size, not read."""
    path = tmp_path / "vlen_attribute.h5"
    _write_strings(path)
    data = bytearray(path.read_bytes())
    collection = data.find(b"GCOL")
    descriptor = data.find(struct.pack("<IQ", 5, collection))  # "hello" in that collection
    assert descriptor > 0
    data[descriptor : descriptor + 4] = (2**31).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    _judged_in_a_fresh_process(path)
    with pytest.warns(AttributeWarning, match="'title'") as caught:
        store = parse_hdf5(path)
    message = next(str(w.message) for w in caught if "'title'" in str(w.message))
    assert str(2**31) in message, message
    assert "title" not in zarr.open_group(store, mode="r", zarr_format=3).attrs


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
