"""Structures libhdf5 would follow blindly, made corrupt: never handed to it.

Each case edits a B-tree, heap or attribute index of a real file the way a corrupt
upload or a bit flip would, in the ways that crash libhdf5 (SIGSEGV: a B-tree child
pointing at its own node, a version 2 B-tree of the wrong record type), make it
allocate gigabytes (an attribute index's record count or node size), or hang it (a
local heap free list that loops). h5py alone crashes or hangs on every one of them;
each is parsed in a fresh, memory-capped process (``tests/_parse_probe.py``), which
must exit normally with the structure refused by name, and what is left must read back
exactly what h5py reads from the unmodified file.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from conformance.fuzz.mutations import apply_ops, lookup3
from tests._parse_probe import probe

PYFIVE = "NCAS-CMS+pyfive/tests/data"
JHDF = "jamesmudd+jhdf/jhdf/src/test/resources/hdf5"
#: Peak memory a parse of these files (a few kB to 70 kB) may take.
PEAK_MB = 500


def _nodes(data: bytes, signature: bytes) -> list[int]:
    found, at = [], data.find(signature)
    while at >= 0:
        found.append(at)
        at = data.find(signature, at + 1)
    return found


def _self_referencing(data: bytearray, node: int, key_size: int = 8) -> None:
    """Make the version 1 B-tree node at ``node`` an internal node (level 1) whose first
    child is the node itself (8-byte addresses, superblock at 0; group B-tree keys are
    8-byte heap offsets)."""
    data[node + 5] = 1
    child = node + 24 + key_size
    data[child : child + 8] = node.to_bytes(8, "little")


def _write(tmp_path: Path, name: str, data: bytes | bytearray) -> Path:
    path = tmp_path / Path(name).name
    path.write_bytes(bytes(data))
    return path


def _assert_sound_process(result: dict[str, Any]) -> None:
    assert result["returncode"] == 0, result["stderr"]
    assert result.get("peak_parse_mb", 0) < PEAK_MB, result


def _messages(result: dict[str, Any]) -> list[str]:
    return [message for _, message in result["warnings"]]


def _assert_same_as_h5py(result: dict[str, Any], clean: Path, paths: list[str]) -> None:
    """The arrays at ``paths`` read back what h5py reads from the unmodified file."""
    with h5py.File(clean, "r") as f:
        for path in paths:
            expected = np.asarray(f[path][()])
            got = result["arrays"][path.lstrip("/")]
            assert got["shape"] == list(expected.shape), path
            np.testing.assert_array_equal(np.asarray(got["values"], dtype=expected.dtype), expected)


# -- version 1 B-trees of groups (symbol tables) ------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize(
    "name",
    [
        f"{PYFIVE}/dim_scales.hdf5",
        f"{PYFIVE}/fletcher32.hdf5",
        f"{JHDF}/test_fill_value_earliest.hdf5",
    ],
)
def test_root_group_btree_child_pointing_at_its_own_node(
    corpus_dir: Path, tmp_path: Path, name: str
) -> None:
    """libhdf5 recurses into the child until the stack overflows (SIGSEGV)."""
    data = bytearray((corpus_dir / name).read_bytes())
    root = _nodes(data, b"TREE")[0]
    assert data[root + 4] == 0  # the root group's symbol table B-tree
    _self_referencing(data, root)
    result = probe(_write(tmp_path, name, data))
    _assert_sound_process(result)
    kind, message = result["error"]
    assert kind == "CorruptFileError"
    assert Path(name).name in message
    assert f"symbol table B-tree node at address {root} is reached twice" in message


@pytest.mark.corpus
def test_subgroup_btree_cycle_skips_that_group_only(corpus_dir: Path, tmp_path: Path) -> None:
    name = f"{JHDF}/test_fill_value_earliest.hdf5"
    data = bytearray((corpus_dir / name).read_bytes())
    node = _nodes(data, b"TREE")[1]  # the symbol table of group /float
    _self_referencing(data, node)
    result = probe(_write(tmp_path, name, data))
    _assert_sound_process(result)
    assert result["error"] is None
    assert any(
        "/float: group '/float': symbol table B-tree node at address" in m and "group skipped" in m
        for m in _messages(result)
    ), result["warnings"]
    assert not any(path.startswith("float/") for path in result["arrays"])
    _assert_same_as_h5py(result, corpus_dir / name, ["/no_fill"])


def test_reference_names_never_walk_a_skipped_group(tmp_path: Path) -> None:
    """libhdf5 finds the name of an object opened through a reference by walking every
    group of the file, the corrupt one too (SIGSEGV): the names come from the walk."""
    clean = tmp_path / "references.h5"
    with h5py.File(clean, "w", libver="earliest") as f:
        f.create_group("a_first").create_dataset("x", data=[1])
        target = f.create_group("z_last").create_dataset("d", data=[1, 2])
        f.attrs["target"] = target.ref
    data = bytearray(clean.read_bytes())
    _self_referencing(data, _nodes(data, b"TREE")[1])  # group /a_first
    result = probe(_write(tmp_path, "edited.h5", data))
    _assert_sound_process(result)
    assert result["attributes"]["target"] == "/z_last/d"
    assert any("/a_first" in m and "group skipped" in m for m in _messages(result))
    _assert_same_as_h5py(result, clean, ["/z_last/d"])


def test_local_heap_free_list_that_loops(tmp_path: Path) -> None:
    """libhdf5 walks a group's local heap free list as it finds it: a block pointing back
    at itself makes it loop, allocating as it goes."""
    clean = tmp_path / "heap.h5"
    with h5py.File(clean, "w", libver="earliest") as f:
        f["values"] = np.arange(6)
    data = bytearray(clean.read_bytes())
    heap = _nodes(data, b"HEAP")[0]
    size = int.from_bytes(data[heap + 8 : heap + 16], "little")
    segment = int.from_bytes(data[heap + 24 : heap + 32], "little")
    block = size - 16
    data[heap + 16 : heap + 24] = block.to_bytes(8, "little")
    data[segment + block : segment + block + 16] = struct.pack("<QQ", block, 16)
    result = probe(_write(tmp_path, "edited.h5", data), timeout=60)
    _assert_sound_process(result)
    kind, message = result["error"]
    assert kind == "CorruptFileError" and "edited.h5" in message
    assert f"local heap at address {heap}: free list entry at heap offset {block}" in message


# -- version 1 B-trees of chunks ------------------------------------------------------------------


@pytest.mark.corpus
def test_chunk_btree_child_pointing_at_its_own_node(corpus_dir: Path, tmp_path: Path) -> None:
    """The same cycle in a dataset's chunk index (SIGSEGV in libhdf5's chunk_iter)."""
    name = f"{PYFIVE}/fletcher32.hdf5"
    data = bytearray((corpus_dir / name).read_bytes())
    node = next(n for n in _nodes(data, b"TREE") if data[n + 4] == 1)  # /dataset1's index
    # Chunk keys: size, filter mask, then the offsets of a 2-d dataset plus one.
    _self_referencing(data, node, key_size=4 + 4 + 8 * 3)
    result = probe(_write(tmp_path, name, data))
    _assert_sound_process(result)
    assert any(
        "'/dataset1' skipped" in m and f"node at byte {node} is reached twice" in m
        for m in _messages(result)
    ), result["warnings"]
    _assert_same_as_h5py(result, corpus_dir / name, ["/dataset2"])


# -- version 2 B-trees: chunk indexes and attribute indexes ---------------------------------------


def _edit_btree_header(data: bytearray, header: int, field: str, value: int) -> None:
    """Set a field of the version 2 B-tree header at ``header`` (8-byte addresses and
    lengths) and restore its checksum, so the edit reaches libhdf5."""
    at, width = {"type": (5, 1), "node size": (6, 4), "root records": (24, 2), "records": (26, 8)}[
        field
    ]
    data[header + at : header + at + width] = value.to_bytes(width, "little")
    data[header + 34 : header + 38] = struct.pack("<I", lookup3(bytes(data[header : header + 34])))


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("type", 2, "record type 2, expected one of [10]"),  # SIGSEGV
        ("node size", 2048 + 2**31, "implausible node size"),  # SIGSEGV
        ("root records", 85, "85 records, more than a level-1 node holds"),
        ("records", 2**28, f"the header counts {2**28} records, the tree holds 100"),
    ],
)
def test_chunk_index_btree_v2_header_edited(
    corpus_dir: Path, tmp_path: Path, field: str, value: int, problem: str
) -> None:
    name = f"{PYFIVE}/btreev2.hdf5"
    data = bytearray((corpus_dir / name).read_bytes())
    header = _nodes(data, b"BTHD")[0]  # /btreev2's chunk index
    _edit_btree_header(data, header, field, value)
    result = probe(_write(tmp_path, name, data))
    _assert_sound_process(result)
    assert any(
        "'/btreev2' skipped" in m and "chunk index" in m and problem in m for m in _messages(result)
    ), result["warnings"]
    _assert_same_as_h5py(result, corpus_dir / name, ["/btreev2_filters"])


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("records", 14 + (1 << 28), f"the header counts {14 + (1 << 28)} records"),  # 2 GB
        ("node size", 512 + (1 << 31), "implausible node size"),  # 2 GB
        ("type", 10, "record type 10, expected one of [8]"),  # SIGSEGV
    ],
)
def test_attribute_index_header_edited(
    corpus_dir: Path, tmp_path: Path, field: str, value: int, problem: str
) -> None:
    """Dense attribute storage: a dataset's attribute index whose header lies is refused
    with the dataset; a group's loses its attributes, with a warning."""
    name = f"{JHDF}/test_attribute_latest.hdf5"
    data = bytearray((corpus_dir / name).read_bytes())
    group_index, dataset_index = _nodes(data, b"BTHD")
    _edit_btree_header(data, dataset_index, field, value)
    _edit_btree_header(data, group_index, field, value)
    result = probe(_write(tmp_path, name, data))
    _assert_sound_process(result)
    messages = _messages(result)
    assert any(
        "'/hard_link_data' skipped" in m and "attribute index" in m and problem in m
        for m in messages
    ), messages
    assert any(
        "of group '/test_group'" in m and "attribute index" in m and "all skipped" in m
        for m in messages
    ), messages


# -- the dimension-scale library ------------------------------------------------------------------


@pytest.mark.corpus
def test_dimension_list_longer_than_the_dataset_rank(corpus_dir: Path, tmp_path: Path) -> None:
    """A dataset whose rank is edited from 3 to 1 keeps its 3-entry DIMENSION_LIST: the
    dimension-scale library reads it into a buffer of one entry per axis and corrupts
    the heap (an abort, "double free or corruption"). The dataset is skipped."""
    name = "nasa+harmony-opendap-subsetter/f16_ssmis_20200102v7.nc"
    ops = [{"op": "put", "pos": 7105, "hex": "01"}, {"op": "checksum", "start": 7056, "end": 7892}]
    result = probe(_write(tmp_path, name, apply_ops((corpus_dir / name).read_bytes(), ops)))
    _assert_sound_process(result)
    assert any(
        "'/wind_speed' skipped" in m and "DIMENSION_LIST has 3 entries for 1 axes" in m
        for m in _messages(result)
    ), result["warnings"]
    _assert_same_as_h5py(result, corpus_dir / name, ["/latitude", "/longitude"])


def test_a_library_failure_while_closing_names_the_file(tmp_path: Path) -> None:
    """libhdf5 failing to close a file (seen once in fuzzing as h5py's bare
    ``RuntimeError: Can't decrement id ref count``; no mutant reproduces it on demand) is
    a CorruptFileError naming the file, not an exception without it. The session is
    real and opens a real file; the failure is pushed onto its close sequence, where
    libhdf5's would surface."""
    import h5py
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    from virtualizarr_fill.errors import CorruptFileError
    from virtualizarr_fill.hdf5.session import FileSession

    path = tmp_path / "small.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(4)
    url = f"file://{path}"
    session = FileSession(ObjectStoreRegistry({"file://": LocalStore()}), {}, main_url=url)
    file, _ = session.open(url)
    assert file["x"].shape == (4,)

    def failing_close() -> None:
        raise RuntimeError("Can't decrement id ref count (unable to close file)")

    session.stack.callback(failing_close)
    with pytest.raises(CorruptFileError, match=f"{path}: the HDF5 library failed to close"):
        session.close(url)
