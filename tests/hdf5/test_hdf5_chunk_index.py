"""Chunk tables read straight from chunk indexes equal what libhdf5 lists.

For every chunked dataset of every HDF5/netCDF-4 file of the corpus and of the
synthetic fixtures (``fixtures/make_hdf5_fixtures.py``, including the chunk index
files: 10,000-chunk B-trees and paged fixed arrays, filtered and not, partial edge
chunks, unallocated chunks and pages, skipped filters, unfiltered partial chunks, B-tree
ranks other than the default), the table read from the index's bytes equals h5py's
``chunk_iter`` exactly (offsets, addresses, sizes, masks, in order), and the index
types read directly really are read directly (the test fails if the direct path
silently stops running). Corrupt indexes are refused, or left to libhdf5, never turned
into a wrong manifest.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from obstore.store import LocalStore

from fixtures import make_hdf5_fixtures
from tests._hdf5_checks import check_raw, find_array, parse, read_array, registry
from virtualizarr_fill.hdf5 import _libhdf5, checksum
from virtualizarr_fill.hdf5._libhdf5 import object_address
from virtualizarr_fill.hdf5.format.chunk_index import (
    SOURCES,
    ChunkTable,
    CorruptChunkIndex,
    DatasetGeometry,
    read_chunk_table,
)
from virtualizarr_fill.hdf5.format.layout_message import (
    BTREE_V1,
    BTREE_V2,
    FIXED_ARRAY,
    IMPLICIT,
    SINGLE_CHUNK,
    chunked_layout,
)
from virtualizarr_fill.hdf5.parser import find_superblock
from virtualizarr_fill.hdf5.reader import HDF5File

REPO = Path(__file__).resolve().parents[2]


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: Index types read from their bytes (the others go through libhdf5's chunk_iter).
DIRECT = {BTREE_V1, SINGLE_CHUNK, IMPLICIT, FIXED_ARRAY, BTREE_V2}


@pytest.fixture(scope="module")
def index_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_hdf5_fixtures.make_chunk_index_fixtures(tmp_path_factory.mktemp("index"))


@pytest.fixture(scope="module")
def synthetic_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_hdf5_fixtures.make_all(tmp_path_factory.mktemp("synthetic"))


# ------------------------------------------------------------------------------ helpers


class _Opened:
    """A file opened the way the parser opens it: h5py over an :class:`HDF5File`."""

    def __init__(self, path: Path) -> None:
        self.reader = HDF5File(LocalStore(), str(path.resolve()).lstrip("/"))
        self.reader.base = find_superblock(self.reader)
        self.file = h5py.File(self.reader, "r")
        sizes = self.file.id.get_create_plist().get_sizes()
        self.sizes = (int(sizes[0]), int(sizes[1]))

    def read(self, position: int, length: int) -> bytes | None:
        if position < 0 or position + length > self.reader.size:
            return None
        return self.reader.read_range(position, length)

    def header(self, dataset: h5py.Dataset) -> int:
        return int(h5py.h5o.get_info(dataset.id).addr)

    def direct(self, dataset: h5py.Dataset) -> ChunkTable | None:
        geometry = DatasetGeometry(
            shape=tuple(int(s) for s in dataset.shape),
            maxshape=tuple(None if m is None else int(m) for m in dataset.maxshape),
            chunks=tuple(int(c) for c in dataset.chunks),
            filtered=dataset.id.get_create_plist().get_nfilters() > 0,
        )
        return read_chunk_table(
            self.read,
            base=self.reader.base,
            header=self.header(dataset),
            sizes=self.sizes,
            geometry=geometry,
        )

    def layout_version(self, dataset: h5py.Dataset) -> int:
        layout = chunked_layout(self.read, self.reader.base, self.header(dataset), self.sizes)
        assert layout is not None
        return layout.version

    def close(self) -> None:
        self.file.close()


def _iterated(dataset: h5py.Dataset) -> ChunkTable:
    infos: list[Any] = []
    dataset.id.chunk_iter(infos.append)
    n, rank = len(infos), len(dataset.chunks)
    return ChunkTable(
        source="chunk_iter",
        coords=np.array([i.chunk_offset for i in infos], dtype=np.int64).reshape(n, rank),
        addresses=np.array([i.byte_offset for i in infos], dtype=np.uint64),
        sizes=np.array([i.size for i in infos], dtype=np.uint64),
        masks=np.array([i.filter_mask for i in infos], dtype=np.int64),
    )


def _chunked(file: h5py.File) -> Iterator[tuple[str, h5py.Dataset]]:
    found: list[tuple[str, h5py.Dataset]] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            try:
                if obj.chunks is not None:
                    found.append((name, obj))
            except Exception:  # a dataset h5py cannot describe: not this test's matter
                pass

    # An object h5py cannot open stops its walk: keep what it saw.
    with contextlib.suppress(Exception):
        file.visititems(visit)
    yield from found


def _compare_file(path: Path, counts: Counter[str], problems: list[str]) -> None:
    """Every chunked dataset of ``path``: the direct table equals chunk_iter's."""
    try:
        opened = _Opened(path)
    except Exception:  # not HDF5, or an HDF5 file h5py itself cannot open
        return
    try:
        for name, dataset in _chunked(opened.file):
            index_type = _libhdf5.get_chunk_index_type(dataset.id)
            where = f"{path.name}:{name} (index type {index_type})"
            if object_address(dataset.id) != opened.header(dataset):
                problems.append(f"{where}: object_address differs from H5Oget_info's")
            try:
                expected = _iterated(dataset)
            except Exception:  # libhdf5 cannot list it: covered by the corruption tests
                continue
            try:
                table = opened.direct(dataset)
            except CorruptChunkIndex as exc:
                problems.append(f"{where}: refused although libhdf5 lists it: {exc}")
                continue
            if table is None:
                # Only other index types (extensible arrays) go to libhdf5.
                if index_type in DIRECT:
                    problems.append(f"{where}: not read directly")
                counts["chunk_iter"] += 1
                continue
            assert index_type is not None
            if index_type not in DIRECT or table.source != SOURCES[index_type]:
                problems.append(f"{where}: read as {table.source}")
            for field in ("coords", "addresses", "sizes", "masks"):
                got, want = getattr(table, field), getattr(expected, field)
                if got.dtype != want.dtype or not np.array_equal(got, want):
                    problems.append(f"{where}: {field} differ from chunk_iter's")
            if table.positions is not None:
                counts["positions"] += 1
                assert table.grid is not None
                chunks = np.array(dataset.chunks, dtype=np.int64)
                scaled = tuple((expected.coords // chunks).T)
                if not np.array_equal(np.ravel_multi_index(scaled, table.grid), table.positions):
                    problems.append(f"{where}: positions differ from chunk_iter's offsets")
            counts[table.source] += 1
    finally:
        opened.close()


def _hdf5_files(root: Path) -> list[Path]:
    found = []
    for directory, _, names in os.walk(root):
        for name in sorted(names):
            path = Path(directory) / name
            with open(path, "rb") as handle:
                head = handle.read(4096)
            # The superblock may follow a user block (at 512, 1024, 2048 ... bytes).
            if any(head[at : at + 8] == HDF5_SIGNATURE for at in (0, 512, 1024, 2048)):
                found.append(path)
    return sorted(found)


# ------------------------------------------------------------------------- equality


def test_index_fixtures_read_directly_equal_chunk_iter(index_files: dict[str, Path]) -> None:
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for path in index_files.values():
        _compare_file(path, counts, problems)
    assert not problems, "\n".join(problems)
    # Every dataset of these files has an index read directly.
    assert counts["chunk_iter"] == 0, counts
    assert counts["btree-v1"] == 17 and counts["fixed-array"] == 26, counts
    assert counts["single-chunk"] == 4 and counts["implicit"] == 2, counts
    assert counts["positions"] == counts["fixed-array"] + counts["implicit"], counts


def test_synthetic_fixtures_read_directly_equal_chunk_iter(
    synthetic_files: dict[str, Path],
) -> None:
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for path in synthetic_files.values():
        _compare_file(path, counts, problems)
    assert not problems, "\n".join(problems)
    for source in SOURCES.values():
        assert counts[source] > 0, counts
    # Extensible arrays still go through chunk_iter.
    print(dict(counts))
    assert counts["chunk_iter"] >= 1, counts


def test_corpus_read_directly_equals_chunk_iter(corpus_dir: Path) -> None:
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for path in _hdf5_files(corpus_dir):
        _compare_file(path, counts, problems)
    assert not problems, "\n".join(problems)
    print(dict(counts))
    assert counts["btree-v1"] >= 150 and counts["fixed-array"] >= 40, counts
    assert counts["single-chunk"] >= 50 and counts["implicit"] >= 1, counts


# ------------------------------------------------------------------- the parser's path


def test_parser_uses_the_direct_tables_and_reads_back(
    index_files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """The parser takes the direct path for these indexes, and values equal h5py's."""
    for name in ("index_btree_v1.h5", "index_fixed_array.h5"):
        path = index_files[name]
        with caplog.at_level(logging.DEBUG, logger="virtualizarr_fill.hdf5.chunked_manifest"):
            caplog.clear()
            parsed = parse(path)
        sources = {
            record.getMessage().split(": chunk table from ")[0]: record.getMessage()
            for record in caplog.records
            if "chunk table from" in record.getMessage()
        }
        assert sources, "no chunk table was built"
        via_libhdf5 = [message for message in sources.values() if "chunk_iter" in message]
        assert not via_libhdf5, via_libhdf5
        report = check_raw(path, parsed)
        assert not report.problems, "\n".join(report.problems)
        assert not parsed.skipped, parsed.skipped


def test_parser_reads_indexes_after_a_user_block(
    synthetic_files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Addresses are relative to the superblock, which follows a 1024-byte user block."""
    path = synthetic_files["userblock.h5"]
    with caplog.at_level(logging.DEBUG, logger="virtualizarr_fill.hdf5.chunked_manifest"):
        parsed = parse(path)
    messages = [r.getMessage() for r in caplog.records if "chunk table from" in r.getMessage()]
    assert messages == ["/data: chunk table from btree-v1 (3 chunks)"], messages
    report = check_raw(path, parsed)
    assert not report.problems, report.problems
    with h5py.File(path) as f:
        dataset = f["data"]
        assert object_address(dataset.id) == h5py.h5o.get_info(dataset.id).addr


def test_parser_falls_back_to_chunk_iter_for_other_indexes(
    synthetic_files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    path = synthetic_files["layouts.h5"]
    with caplog.at_level(logging.DEBUG, logger="virtualizarr_fill.hdf5.chunked_manifest"):
        parsed = parse(path)
    messages = [r.getMessage() for r in caplog.records if "chunk table from" in r.getMessage()]
    assert any(m.startswith("/extensible_array: chunk table from chunk_iter") for m in messages)
    assert any(m.startswith("/btree_v2: chunk table from btree-v2") for m in messages)
    assert any(m.startswith("/btree_v2_gzip: chunk table from btree-v2") for m in messages)
    assert any(m.startswith("/fixed_array_paged: chunk table from fixed-array") for m in messages)
    for name in ("/extensible_array", "/btree_v2"):
        array = find_array(parsed.store, name)
        assert array is not None
        with h5py.File(path) as f:
            np.testing.assert_array_equal(read_array(array, registry()), f[name][...])


# ------------------------------------------------------------------------- corruption


def _fixed_array_blocks(path: Path, dataset: str) -> tuple[int, int, int, int]:
    """(header position, data block position, element size, page bits) of a fixed array."""
    opened = _Opened(path)
    try:
        layout = chunked_layout(
            opened.read, opened.reader.base, opened.header(opened.file[dataset]), opened.sizes
        )
        assert layout is not None and layout.index_type == FIXED_ARRAY
        assert layout.address is not None
        header_at = opened.reader.base + layout.address
        header = opened.read(header_at, 8 + 8 + 8 + 4)
        assert header is not None and header[:4] == b"FAHD"
        block = int.from_bytes(header[16:24], "little")
        return header_at, opened.reader.base + block, header[6], layout.index_info[0]
    finally:
        opened.close()


def _mutated(source: Path, tmp_path: Path, edits: dict[int, bytes]) -> Path:
    data = bytearray(source.read_bytes())
    for position, value in edits.items():
        data[position : position + len(value)] = value
    path = tmp_path / f"mutated_{source.name}"
    path.write_bytes(bytes(data))
    return path


def _refusal(path: Path, dataset: str) -> str:
    parsed = parse(path)
    assert dataset in parsed.skipped, f"{dataset} not refused; skipped: {list(parsed.skipped)}"
    warning = parsed.skipped[dataset]
    assert warning.kind == "corrupt", warning.reason
    return warning.reason


def test_fixed_array_page_checksum_failure_is_refused(
    index_files: dict[str, Path], tmp_path: Path
) -> None:
    source = index_files["index_fixed_array.h5"]
    _, block_at, element_size, page_bits = _fixed_array_blocks(source, "chunks_10k")
    # Page 3, element 5: its address moves by one byte (the page checksum no longer
    # holds; without the check the manifest would point one byte off).
    pages = -(-10_000 // (1 << page_bits))
    prefix = 4 + 2 + 8 + (pages + 7) // 8 + 4
    at = block_at + prefix + 3 * ((1 << page_bits) * element_size + 4) + 5 * element_size
    original = source.read_bytes()[at]
    path = _mutated(source, tmp_path, {at: bytes([original ^ 0x01])})
    reason = _refusal(path, "/chunks_10k")
    assert "fails its checksum" in reason and "data block page" in reason
    with h5py.File(path) as f, pytest.raises(OSError):  # libhdf5 refuses it too
        f["chunks_10k"][...]


def test_fixed_array_header_checksum_failure_is_refused(
    index_files: dict[str, Path], tmp_path: Path
) -> None:
    source = index_files["index_fixed_array_v4.h5"]
    header_at, _, _, _ = _fixed_array_blocks(source, "edges_shuffle_gzip")
    count_at = header_at + 8  # number of elements
    original = source.read_bytes()[count_at]
    path = _mutated(source, tmp_path, {count_at: bytes([original ^ 0x10])})
    reason = _refusal(path, "/edges_shuffle_gzip")
    assert "fixed array header" in reason and "checksum" in reason


def test_unexpected_fixed_array_fields_fall_back_to_libhdf5(
    index_files: dict[str, Path], tmp_path: Path
) -> None:
    """A header this reader does not expect (page bits differing from the layout
    message's), checksum intact: not read directly, libhdf5 decides."""
    source = index_files["index_fixed_array.h5"]
    header_at, _, _, page_bits = _fixed_array_blocks(source, "sparse")
    data = bytearray(source.read_bytes())
    header = data[header_at : header_at + 28]
    header[7] = page_bits + 1
    header[24:28] = (checksum.lookup3(bytes(header[:24])) or 0).to_bytes(4, "little")
    path = _mutated(source, tmp_path, {header_at: bytes(header)})
    opened = _Opened(path)
    try:
        assert opened.direct(opened.file["sparse"]) is None
    finally:
        opened.close()
    # libhdf5 reads a data block of another page size than was written: the parser
    # either refuses the dataset or lists what libhdf5 lists, never anything else.
    parsed = parse(path)
    if "/sparse" not in parsed.skipped:
        report = check_raw(path, parsed)
        assert not report.problems, report.problems


def _btree_leaf(path: Path, dataset: str) -> tuple[int, int]:
    """(position of the first leaf node, entry size) of a B-tree v1 index."""
    opened = _Opened(path)
    try:
        ds = opened.file[dataset]
        layout = chunked_layout(opened.read, opened.reader.base, opened.header(ds), opened.sizes)
        assert layout is not None and layout.index_type == BTREE_V1
        assert layout.address is not None
        position = opened.reader.base + layout.address
        key_size = 8 + 8 * len(layout.dims)
        while True:
            node = opened.read(position, 24 + key_size + 8)
            assert node is not None and node[:4] == b"TREE"
            if node[5] == 0:
                return position, key_size + 8
            position = opened.reader.base + int.from_bytes(
                node[24 + key_size : 24 + key_size + 8], "little"
            )
    finally:
        opened.close()


def test_btree_key_extra_offset_is_refused(index_files: dict[str, Path], tmp_path: Path) -> None:
    source = index_files["index_btree_v1.h5"]
    leaf, entry_size = _btree_leaf(source, "chunks_10k")
    # Entry 2's key: size, mask, offsets (2 dims), then the extra offset that must be 0.
    extra_at = leaf + 24 + 2 * entry_size + 8 + 2 * 8
    path = _mutated(source, tmp_path, {extra_at: b"\x04"})
    reason = _refusal(path, "/chunks_10k")
    assert "last offset of a chunk key must be 0" in reason


def test_btree_node_signature_is_refused(index_files: dict[str, Path], tmp_path: Path) -> None:
    source = index_files["index_btree_v1.h5"]
    leaf, _ = _btree_leaf(source, "edges_shuffle_gzip")
    path = _mutated(source, tmp_path, {leaf: b"TRUE"})
    reason = _refusal(path, "/edges_shuffle_gzip")
    assert "is not a chunk B-tree node" in reason


def test_index_past_the_end_of_the_file_is_refused(
    index_files: dict[str, Path], tmp_path: Path
) -> None:
    """A data block address past the end of the file (checksum intact): the direct
    reader cannot read it and gives up, libhdf5 cannot list the chunks either, the
    dataset is refused."""
    source = index_files["index_fixed_array.h5"]
    header_at, _, _, _ = _fixed_array_blocks(source, "chunks_10k")
    data = source.read_bytes()
    header = bytearray(data[header_at : header_at + 28])
    header[16:24] = (len(data) + 4096).to_bytes(8, "little")
    header[24:28] = (checksum.lookup3(bytes(header[:24])) or 0).to_bytes(4, "little")
    path = _mutated(source, tmp_path, {header_at: bytes(header)})
    opened = _Opened(path)
    try:
        assert opened.direct(opened.file["chunks_10k"]) is None
    finally:
        opened.close()
    parsed = parse(path)
    assert "/chunks_10k" in parsed.skipped
    assert parsed.skipped["/chunks_10k"].kind == "corrupt"
