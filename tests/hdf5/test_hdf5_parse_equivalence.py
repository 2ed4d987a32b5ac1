"""The parser's shortcuts around h5py agree with h5py on every real file.

Attribute names are listed, and attributes of plain types read, with a few direct
libhdf5 calls instead of through h5py's ``attrs``; object references in attributes are
resolved to paths without h5py's high-level objects; the scales attached to each axis
are counted from the DIMENSION_LIST value already read instead of through
``dataset.dims``; dtype plans are cached by serialised datatype. Over every attribute
and every dataset of the HDF5 files of the corpus (and synthetic files with every plain
attribute type in both byte orders), both ways must give the same dtype and bytes, the
same names and paths, the same counts and the same plans; and the superblock's sizes of
offsets and lengths, read from its bytes, equal libhdf5's.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.hdf5 import reader as hdf5_reader
from virtualizarr_fill.hdf5.attrs import (
    MAX_ATTRIBUTE_BYTES,
    _resolver,
    _Skip,
    attribute_names,
)
from virtualizarr_fill.hdf5.dtypes import UnsupportedDtypeError, _plan, plan_dtype
from virtualizarr_fill.hdf5.nodes import _scale_counts
from virtualizarr_fill.hdf5.parser import (
    HDF5Parser,
    find_superblock,
    member_names,
    superblock_sizes,
)
from virtualizarr_fill.io.files import StoreFile

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _hdf5_files(corpus: Path) -> list[Path]:
    files = []
    for path in sorted(corpus.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                if handle.read(8) == _HDF5_SIGNATURE:
                    files.append(path)
    return files


#: Objects compared per file: files with thousands of members repeat a few kinds.
_MAX_OBJECTS = 200
#: References resolved per attribute (resolving a path is slow in large files).
_MAX_REFERENCES = 2


def _objects(file: h5py.File) -> list[Any]:
    found: list[Any] = [file]

    def visit(name: str) -> bool | None:
        try:
            obj = file[name]
        except Exception:  # dangling or unreadable: the parser skips those too
            return None
        found.append(obj)
        return True if len(found) >= _MAX_OBJECTS else None

    with contextlib.suppress(Exception):  # a corrupt group: compare what was reached
        file.visit(visit)
    return found


def _same(fast: Any, slow: Any) -> bool:
    fast_array, slow_array = np.asarray(fast), np.asarray(slow)
    return (
        type(fast) is type(slow)
        and fast_array.dtype == slow_array.dtype
        and fast_array.dtype.metadata == slow_array.dtype.metadata
        and fast_array.shape == slow_array.shape
        and fast_array.tobytes() == slow_array.tobytes()
    )


def _compare_attributes(obj: Any) -> tuple[int, list[str]]:
    fast_reads, problems = 0, []
    try:
        names = list(obj.attrs.keys())
    except Exception:
        return 0, []
    if attribute_names(obj) != names:
        problems.append(f"{obj.name}: attribute names {attribute_names(obj)} != {names}")
    for name in names:
        key = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name
        try:
            fast = _libhdf5.read_plain_attribute(obj.id, key, MAX_ATTRIBUTE_BYTES)
        except ValueError:
            continue  # too large to read: the h5py path refuses it the same way
        if fast is None:
            continue
        fast_reads += 1
        slow = obj.attrs[name]
        if not _same(fast, slow):
            problems.append(f"{obj.name}: attribute {name!r}: {fast!r} != h5py's {slow!r}")
    return fast_reads, problems


def _references(value: Any) -> list[Any]:
    if isinstance(value, h5py.Reference):
        return [value]
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":
        return [r for item in value.flat for r in _references(item)]
    if isinstance(value, np.void) and value.dtype.names:
        return [r for name in value.dtype.names for r in _references(value[name])]
    if isinstance(value, np.ndarray) and value.dtype.names:
        return [r for item in value.flat for r in _references(item)]
    return []


def _h5py_path(obj: Any, reference: Any) -> str:
    if not reference:
        return "<null>"
    try:
        name = obj.file[reference].name
    except Exception as exc:
        return f"<does not resolve ({exc})>"
    return "<anonymous>" if name is None else str(name)


def _our_path(obj: Any, reference: Any) -> str:
    try:
        return _resolver(obj)(reference)
    except _Skip as skip:
        text = str(skip)
        if text == "null object reference":
            return "<null>"
        if text.startswith("object reference does not resolve"):
            return "<" + text.removeprefix("object reference ") + ">"
        return "<anonymous>"


def _compare_references(obj: Any) -> tuple[int, list[str]]:
    resolved, problems = 0, []
    try:
        names = list(obj.attrs.keys())
    except Exception:
        return 0, []
    for name in names:
        try:
            value = obj.attrs[name]
        except Exception:
            continue
        if isinstance(value, h5py.RegionReference):
            continue
        for reference in _references(value)[:_MAX_REFERENCES]:
            if isinstance(reference, h5py.RegionReference):
                continue
            resolved += 1
            ours, theirs = _our_path(obj, reference), _h5py_path(obj, reference)
            if ours != theirs:
                problems.append(f"{obj.name}: attribute {name!r}: {ours} != h5py's {theirs}")
    return resolved, problems


def _compare_scale_counts(obj: Any) -> list[str]:
    if not isinstance(obj, h5py.Dataset) or "DIMENSION_LIST" not in obj.attrs:
        return []
    try:
        value = obj.attrs["DIMENSION_LIST"]
    except Exception:
        return []
    try:
        expected = [len(axis) for axis in obj.dims]
    except Exception:
        expected = [0] * len(obj.shape or ())
    counts = _scale_counts(obj, value)
    return [] if counts == expected else [f"{obj.name}: scale counts {counts} != {expected}"]


def _plan_or_refusal(plan: Any) -> Any:
    try:
        result = plan()
    except UnsupportedDtypeError as exc:
        return f"refused: {exc}"
    return (result, result.dtype.metadata, result.dtype.str, result.dtype.descr)


def _compare_plans(obj: Any) -> list[str]:
    """The dtype plan cached by serialised datatype equals the plan made afresh."""
    if not isinstance(obj, h5py.Dataset):
        return []
    cached = _plan_or_refusal(lambda: plan_dtype(obj))
    fresh = _plan_or_refusal(lambda: _plan(obj.dtype, obj.id.get_type()))
    return [] if cached == fresh else [f"{obj.name}: plan {cached} != {fresh}"]


def _compare_members(obj: Any) -> list[str]:
    """The walker's member listing (and the creation property list it hands on to the
    attribute listing) against h5py's, for the root group as the walker opens it too."""
    if not isinstance(obj, h5py.Group):
        return []
    group = h5py.Group(h5py.h5o.open(obj.id, b"/")) if isinstance(obj, h5py.File) else obj
    try:
        expected, attributes = list(obj), list(obj.attrs)
    except Exception:
        return []  # the walker falls back to h5py's listing, and its report
    names, plist = member_names(group)
    problems = [] if names == expected else [f"{obj.name}: members {names} != {expected}"]
    if attribute_names(group, plist) != attributes:
        problems.append(f"{obj.name}: attribute names with the walker's property list")
    return problems


def _compare_file(path: Path) -> tuple[int, int, list[str]]:
    fast_reads, references, problems = 0, 0, []
    try:
        file = h5py.File(path, "r")
    except Exception:
        return 0, 0, []
    with file:
        for obj in _objects(file):
            reads, found = _compare_attributes(obj)
            fast_reads += reads
            problems += found
            resolved, found = _compare_references(obj)
            references += resolved
            problems += found
            problems += _compare_scale_counts(obj)
            problems += _compare_plans(obj)
            problems += _compare_members(obj)
    return fast_reads, references, [f"{path.name}: {p}" for p in problems]


def test_shortcuts_equal_h5py_on_the_corpus(corpus_dir: Path) -> None:
    if _libhdf5._attribute_calls() is None:
        pytest.fail("libhdf5 not reachable through ctypes: the fast path is never taken")
    fast_reads, references, problems = 0, 0, []
    for path in _hdf5_files(corpus_dir):
        reads, resolved, found = _compare_file(path)
        fast_reads += reads
        references += resolved
        problems += found
    assert not problems, "\n".join(problems[:20])
    assert fast_reads > 500  # the corpus is full of plain attributes
    assert references > 50  # DIMENSION_LIST and REFERENCE_LIST, at least


def test_plain_attribute_types_both_byte_orders(tmp_path: Path) -> None:
    path = tmp_path / "attributes.h5"
    values: dict[str, Any] = {}
    for order in "<>":
        for code in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"):
            dtype = np.dtype(order + code)
            values[f"{order}{code}_scalar"] = np.array(7, dtype=dtype)[()]
            values[f"{order}{code}_array"] = np.arange(5, dtype=dtype)
            values[f"{order}{code}_2d"] = np.arange(6, dtype=dtype).reshape(2, 3)
            values[f"{order}{code}_empty"] = np.zeros((0,), dtype=dtype)
    values["ascii"] = np.bytes_(b"abc")
    values["ascii_array"] = np.array([b"a", b"bcd"], dtype="S3")
    with h5py.File(path, "w") as file:
        for name, value in values.items():
            file.attrs[name] = value
        file.attrs.create("utf8", "é".encode(), dtype=h5py.string_dtype("utf-8", 2))
        space = h5py.h5t.C_S1.copy()
        space.set_size(6)
        space.set_strpad(h5py.h5t.STR_SPACEPAD)
        attr = h5py.h5a.create(file.id, b"spacepad", space, h5py.h5s.create(h5py.h5s.SCALAR))
        attr.write(np.array(b"ab    ", dtype="S6"))
        nullterm = h5py.h5t.C_S1.copy()
        nullterm.set_size(4)
        nullterm.set_strpad(h5py.h5t.STR_NULLTERM)
        attr = h5py.h5a.create(file.id, b"nullterm", nullterm, h5py.h5s.create(h5py.h5s.SCALAR))
        attr.write(np.array(b"abcd", dtype="S4"))
    reads, _, problems = _compare_file(path)
    assert not problems, "\n".join(problems)
    assert reads == len(values) + 3


def test_non_plain_attributes_take_h5py_path(tmp_path: Path) -> None:
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as file:
        file.attrs["vlen"] = "text"
        file.attrs["compound"] = np.array((1, 2.0), dtype=[("a", "<i4"), ("b", "<f8")])
        file.attrs["enum"] = np.array(1, dtype=h5py.enum_dtype({"a": 0, "b": 1}, basetype="i1"))
        file.attrs["empty"] = h5py.Empty("f4")
        file.attrs["complex"] = np.complex64(1 + 2j)
        file.attrs["bool"] = np.True_
    with h5py.File(path, "r") as file:
        for name in file.attrs:
            assert _libhdf5.read_plain_attribute(file.id, name.encode(), 1 << 20) is None, name


def test_reference_attributes_resolve_like_h5py(tmp_path: Path) -> None:
    path = tmp_path / "references.h5"
    with h5py.File(path, "w") as file:
        data = file.create_dataset("group/data", data=[1, 2])
        file["type"] = np.dtype("<i2")
        gone = file.create_dataset("gone", data=[1])
        anonymous = file.create_dataset(None, data=[3])
        file.attrs["dataset"] = data.ref
        file.attrs["group"] = file["group"].ref
        file.attrs["type"] = file["type"].ref
        file.attrs["null"] = h5py.Reference()
        file.attrs["anonymous"] = anonymous.ref
        file.attrs["dangling"] = gone.ref
        file.attrs["several"] = np.array([data.ref, file["group"].ref], dtype=h5py.ref_dtype)
        del file["gone"]
    with h5py.File(path, "r") as file:
        resolved, problems = _compare_references(file)
        paths = {name: _our_path(file, file.attrs[name]) for name in ("dataset", "null")}
    assert not problems, "\n".join(problems)
    assert resolved == 8
    assert paths == {"dataset": "/group/data", "null": "<null>"}


def test_attribute_and_member_names_in_creation_order_when_tracked(tmp_path: Path) -> None:
    path = tmp_path / "order.h5"
    with h5py.File(path, "w", track_order=True) as file:
        for name in ("zeta", "alpha", "mu"):
            file.attrs[name] = 1
        untracked = file.create_group("untracked", track_order=False)
        for name in ("zeta", "alpha", "mu"):
            untracked.attrs[name] = 1
        for name in ("zeta", "alpha", "mu"):
            file[name] = 1
            untracked[name] = 1
    with h5py.File(path, "r") as file:
        assert attribute_names(file) == list(file.attrs) == ["zeta", "alpha", "mu"]
        group = file["untracked"]
        assert attribute_names(group) == list(group.attrs) == ["alpha", "mu", "zeta"]
        root = h5py.Group(h5py.h5o.open(file.id, b"/"))
        assert member_names(root)[0] == list(file) == ["untracked", "zeta", "alpha", "mu"]
        assert member_names(group)[0] == list(group) == ["alpha", "mu", "zeta"]


def test_superblock_sizes_equal_libhdf5s(corpus_dir: Path, tmp_path: Path) -> None:
    from obstore.store import LocalStore

    paths = _hdf5_files(corpus_dir)
    for version, options in ((0, {"libver": "earliest"}), (3, {"libver": "latest"})):
        path = tmp_path / f"superblock_v{version}.h5"
        with h5py.File(path, "w", **options) as file:  # type: ignore[arg-type]
            file.create_dataset("x", data=[1])
        paths.append(path)
    compared = 0
    for path in paths:
        try:
            with h5py.File(path, "r") as file:
                plist = file.id.get_create_plist()
                expected = tuple(int(size) for size in plist.get_sizes())
        except OSError:
            continue  # libhdf5 refuses to open it: nothing to compare with
        reader = StoreFile(LocalStore(), str(path).lstrip("/"))
        sizes = superblock_sizes(reader.read_range(find_superblock(reader), 16))
        assert sizes == expected, path.name
        compared += 1
    assert compared > 80


# -------------------------------------------------------------- in-memory opening


def _store_state(store: Any) -> list[Any]:
    """Everything a parse produced, comparable with ``==``."""
    from zarr.core.buffer import default_buffer_prototype

    state: list[Any] = []

    def visit(group: Any, path: str) -> None:
        attributes = json.dumps(group.metadata.attributes, sort_keys=True, default=repr)
        state.append((path, attributes))
        for name, array in sorted(group.arrays.items()):
            documents = array.metadata.to_buffer_dict(default_buffer_prototype())
            manifest = array.manifest
            state.append(
                (
                    f"{path}/{name}",
                    documents["zarr.json"].to_bytes(),
                    manifest._paths.tolist(),
                    manifest._offsets.tolist(),
                    manifest._lengths.tolist(),
                    sorted(manifest._inlined.items()),
                )
            )
        for name, child in sorted(group.groups.items()):
            visit(child, f"{path}/{name}")

    visit(store._group, "")
    return state


def _parse_state(path: Path) -> tuple[Any, list[str]]:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            state: Any = _store_state(HDF5Parser()("file://" + str(path), registry))
        except Exception as exc:  # both ways must fail alike
            state = ("raised", type(exc).__name__, str(exc))
    return state, [f"{type(w.message).__name__}: {w.message}" for w in caught]


def _driver(path: Path) -> int:
    from obstore.store import LocalStore

    reader = hdf5_reader.HDF5File(
        LocalStore(), str(path).lstrip("/"), first_request=1 << 20, block_size=1 << 20
    )
    with hdf5_reader.open_h5py(reader) as file:
        return int(file.id.get_access_plist().get_driver())


def test_small_files_parse_alike_from_memory(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = [p for p in _hdf5_files(corpus_dir) if p.stat().st_size <= hdf5_reader.IMAGE_MAX_BYTES]
    from_memory = 0
    for path in small:
        with contextlib.suppress(OSError):  # files libhdf5 refuses either way
            from_memory += _driver(path) == h5py.h5fd.CORE
    fast = {path: _parse_state(path) for path in small}
    monkeypatch.setattr(hdf5_reader, "IMAGE_MAX_BYTES", 0)
    assert all(_driver(path) != h5py.h5fd.CORE for path in small[:5])
    differ = [path.name for path in small if _parse_state(path) != fast[path]]
    assert not differ, differ
    assert from_memory > 50  # most of the corpus's HDF5 files are small


def test_unsound_heap_collection_is_opened_through_the_reader(tmp_path: Path) -> None:
    """A global heap collection the reader's check refuses keeps the file off the
    in-memory path: libhdf5 must load it through the reader, which raises."""
    from obstore.store import LocalStore

    path = tmp_path / "strings.h5"
    with h5py.File(path, "w", libver="earliest") as file:
        file.create_dataset("s", data=np.array(["a", "bc"], dtype=h5py.string_dtype()))
    data = bytearray(path.read_bytes())
    collection = data.find(b"GCOL\x01")
    assert collection > 0
    sound = hdf5_reader.HDF5File(LocalStore(), str(path).lstrip("/"), first_request=1 << 20)
    assert sound.whole_image() == bytes(data)
    data[collection + 8 : collection + 16] = (len(data) * 2).to_bytes(8, "little")
    broken = tmp_path / "broken.h5"
    broken.write_bytes(bytes(data))
    reader = hdf5_reader.HDF5File(LocalStore(), str(broken).lstrip("/"), first_request=1 << 20)
    assert reader.whole_image() is None
    with hdf5_reader.open_h5py(reader) as file:
        assert file.id.get_access_plist().get_driver() != h5py.h5fd.CORE


# ---------------------------------------------------------------- header fill values


def _h5py_fill(dataset: h5py.Dataset) -> Any:
    try:
        if dataset._dcpl.fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED:
            return None
        return dataset.fillvalue
    except Exception:  # the parser reads such a fill as absent too
        return None


def _compare_fills(path: Path) -> tuple[int, list[str]]:
    from virtualizarr_fill.hdf5.arrays import _header_fill

    compared, problems = 0, []
    try:
        file = h5py.File(path, "r")
    except OSError:
        return 0, []
    with file:
        for obj in _objects(file):
            if not isinstance(obj, h5py.Dataset):
                continue
            try:
                dtype = obj.dtype
            except Exception:  # a type h5py cannot describe: the parser refuses it
                continue
            ours, theirs = _header_fill(dtype, obj._dcpl), _h5py_fill(obj)
            if (ours is None) != (theirs is None) or (ours is not None and not _same(ours, theirs)):
                problems.append(f"{path.name}:{obj.name}: {ours!r} != {theirs!r}")
            compared += 1
    return compared, problems


def test_header_fill_equals_h5py_fillvalue(corpus_dir: Path, tmp_path: Path) -> None:
    """The default fill value is read without libhdf5's conversion: every dataset of
    the corpus and of every plain type in both byte orders, default or set, compares
    bit for bit with h5py's ``fillvalue``."""
    path = tmp_path / "fills.h5"
    with h5py.File(path, "w") as file:
        for order in "<>":
            for code in ("i1", "u2", "i4", "u8", "f2", "f4", "f8", "c8", "c16"):
                dtype = np.dtype(order + code)
                file.create_dataset(f"default_{order}{code}", (3,), dtype=dtype)
                if dtype.kind != "c":  # libhdf5 cannot convert a complex fill value
                    file.create_dataset(f"set_{order}{code}", (3,), dtype=dtype, fillvalue=7)
        file.create_dataset("bool", (2,), dtype=bool)
        file.create_dataset("string", (2,), dtype=h5py.string_dtype())
        file.create_dataset("record", (2,), dtype=[("a", "<i2"), ("b", ">f4")])
    compared, problems = _compare_fills(path)
    assert compared == 2 * (9 + 7) + 3
    for corpus_file in _hdf5_files(corpus_dir):
        count, found = _compare_fills(corpus_file)
        compared += count
        problems += found
    assert not problems, "\n".join(problems[:20])
    assert compared > 400


# ------------------------------------------------------- chunks stored unfiltered


def test_unfiltered_edge_chunks_read_from_their_bytes(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partial edge chunk stored with every filter skipped is re-encoded from its
    bytes instead of read through h5py: the store is the same both ways, and the
    values equal h5py's."""
    from virtualizarr_fill.hdf5 import materialise

    path = corpus_dir / "fsspec+kerchunk" / "hdf5_mali_chunk.h5"
    original = materialise.unfiltered_values
    taken: list[np.ndarray] = []

    def recording(*args: Any) -> Any:
        values = original(*args)
        if values is not None:
            taken.append(np.array(values))
        return values

    monkeypatch.setattr(materialise, "unfiltered_values", recording)
    fast = _parse_state(path)
    assert len(taken) == 1
    with h5py.File(path, "r") as file:
        assert np.array_equal(taken[0], file["data"][7:]), (taken[0], file["data"][7:])
    monkeypatch.setattr(materialise, "unfiltered_values", lambda *args: None)
    assert _parse_state(path) == fast
