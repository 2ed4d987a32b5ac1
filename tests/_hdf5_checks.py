"""Read-back checks shared by the HDF5 tests (their own tests: test_hdf5_readback.py).

``check_raw`` reads every dataset of a file through the virtual store and compares it
with h5py; ``check_netcdf`` compares the decoded and raw xarray views with
``xr.open_datatree(path, engine="h5netcdf", phony_dims="sort")``. Both return a
:class:`Report` of counts and problems rather than asserting, so the corpus test can
print totals and fail once with every problem listed.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore

from virtualizarr_fill.fill.decision import FillValueWarning
from virtualizarr_fill.hdf5 import (
    AttributeWarning,
    HDF5Parser,
    SkippedDatasetWarning,
    SkippedLinkWarning,
)
from virtualizarr_fill.hdf5.nodes import NON_COORD_PREFIX, NOT_A_VARIABLE

#: Reasons a dataset may be refused for (the issue's list); anything else is a failure.
ALLOWED_REFUSALS = {
    "datatype": re.compile(
        r"object references|region references|variable-length sequences|HDF5 array datatype|"
        r"compound field .* (is an array|holds variable-length data or references)|"
        r"not valid UTF-8"
    ),
    "filter": re.compile(r"unsupported HDF5 filter '[^']+' \(id \d+\)"),
    "dataspace": re.compile(r"null dataspace"),
    "layout": re.compile(r"virtual dataset \(VDS\)"),
    "external": re.compile(r"external raw storage"),
    "unreadable": re.compile(r"h5py cannot read it"),
    "corrupt": re.compile(
        r"implausible shape|truncated|chunk index|unfiltered chunks stored|"
        r"chunk shape does not match|"
        r"the HDF5 library cannot open it"
    ),
    "size": re.compile(r"exceed max_inline_bytes|exceeds max_chunks"),
}


#: Larger arrays are not compared value by value (a 2**31-element all-fill array exists).
MAX_COMPARED_ELEMENTS = 20_000_000


def registry() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": LocalStore()})


def url_of(path: Path | str) -> str:
    # Plain (not percent-encoded) paths: obstore and ManifestStore use the URL path as is.
    return "file://" + str(Path(path).resolve())


@dataclass
class Parsed:
    """A parse result with the warnings it raised, sorted by kind."""

    store: ManifestStore
    skipped: dict[str, SkippedDatasetWarning]
    attribute_warnings: list[str]
    fill_warnings: list[str]
    link_warnings: list[str]

    def skipped_attributes(self, owner: str) -> set[str]:
        """Attribute names reported (converted or skipped) for one object path."""
        names = set()
        for message in self.attribute_warnings + self.fill_warnings:
            match = re.search(r"attribute '([^']+)' of \w+ '([^']+)'", message)
            if match and match.group(2) == owner:
                names.add(match.group(1))
            match = re.search(r": (/\S*): (_FillValue|missing_value) attribute", message)
            if match and match.group(1) == owner:
                names.add(match.group(2))
        return names


def parse(path: Path | str, **options: Any) -> Parsed:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = HDF5Parser(**options)(url_of(path), registry())
    skipped = {}
    attribute_warnings, fill_warnings, link_warnings = [], [], []
    for item in caught:
        message = item.message
        if isinstance(message, SkippedDatasetWarning):
            skipped[message.dataset] = message
        elif isinstance(message, AttributeWarning):
            attribute_warnings.append(str(message))
        elif isinstance(message, FillValueWarning):
            fill_warnings.append(str(message))
        elif isinstance(message, SkippedLinkWarning):
            link_warnings.append(str(message))
    return Parsed(store, skipped, attribute_warnings, fill_warnings, link_warnings)


def iter_arrays(group: ManifestGroup, prefix: str = "") -> Iterator[tuple[str, ManifestArray]]:
    for name, array in group.arrays.items():
        yield f"{prefix}/{name}", array
    for name, child in group.groups.items():
        yield from iter_arrays(child, f"{prefix}/{name}")


def find_array(store: ManifestStore, path: str) -> ManifestArray | None:
    group: ManifestGroup = store._group
    parts = [p for p in path.split("/") if p]
    for part in parts[:-1]:
        if part not in group.groups:
            return None
        group = group.groups[part]
    return group.arrays.get(parts[-1]) if parts else None


def read_array(
    array: ManifestArray,
    reg: ObjectStoreRegistry | None = None,
    selection: tuple[slice, ...] | None = None,
) -> np.ndarray:
    """Decode one virtual array through zarr (a one-array store keeps zarr's lookups cheap)."""
    store = ManifestStore(ManifestGroup(arrays={"a": array}), registry=reg or registry())
    opened = zarr.open_array(store, path="a", mode="r", zarr_format=3)
    return np.asarray(opened[...] if selection is None else opened[selection])


#: Arrays with more chunks are compared on two slabs (first and last) of about this many.
SAMPLED_CHUNKS = 300


def sample_selection(array: ManifestArray) -> list[tuple[slice, ...]] | None:
    """Leading and trailing slabs along the first axis when reading all chunks is slow."""
    grid = array.manifest.shape_chunk_grid
    if not grid or int(np.prod(grid)) <= 3 * SAMPLED_CHUNKS:
        return None
    per_row = int(np.prod(grid[1:]))
    rows = max(1, SAMPLED_CHUNKS // max(per_row, 1))
    chunk = array.metadata.chunks[0]
    length = array.shape[0]
    head = slice(0, min(length, rows * chunk))
    tail = slice(max(0, length - rows * chunk), length)
    return [(head,), (tail,)]


def values_equal(got: Any, expected: Any) -> bool:
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return False
    if got.dtype.names or expected.dtype.names:
        names = expected.dtype.names or ()
        return got.dtype.names == names and all(values_equal(got[n], expected[n]) for n in names)
    if got.dtype.kind in "OTUS" or expected.dtype.kind in "OTUS":
        return _plain(got.tolist()) == _plain(expected.tolist())
    if got.dtype.kind == "V" or expected.dtype.kind == "V":
        return got.tobytes() == expected.tobytes()
    if got.dtype.kind in "fc" or expected.dtype.kind in "fc":
        return bool(np.array_equal(got, expected, equal_nan=True))
    return bool(np.array_equal(got, expected))


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


@dataclass
class Report:
    """Outcome counts and the problems that make a check fail."""

    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)

    def merge(self, other: Report) -> None:
        self.counts.update(other.counts)
        self.problems.extend(other.problems)
        self.refusals.update(other.refusals)


def h5py_datasets(file: h5py.File) -> Iterator[tuple[str, h5py.Dataset]]:
    """Datasets the way the parser walks them: link paths, soft links followed, no cycles."""

    def walk(group: h5py.Group, path: str, seen: tuple[int, ...]) -> Iterator[tuple[str, Any]]:
        for key in group:
            child = f"{path.rstrip('/')}/{key}"
            link = group.get(key, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                continue
            try:
                obj = group[key]
            except Exception:  # dangling or unopenable: the parser warns
                continue
            if isinstance(obj, h5py.Group):
                address = h5py.h5o.get_info(obj.id).addr
                if address not in seen:
                    yield from walk(obj, child, (*seen, address))
            elif isinstance(obj, h5py.Dataset):
                yield child, obj

    yield from walk(file, "/", (h5py.h5o.get_info(file.id).addr,))


def _is_dimension_only(dataset: h5py.Dataset) -> bool:
    name = dataset.attrs.get("NAME", b"") if "NAME" in dataset.attrs else b""
    return isinstance(name, bytes) and NOT_A_VARIABLE in name


def check_refusals(parsed: Parsed, report: Report) -> None:
    for dataset, warning in parsed.skipped.items():
        pattern = ALLOWED_REFUSALS.get(warning.kind)
        report.refusals[warning.kind] += 1
        if pattern is None or not pattern.search(warning.reason):
            report.problems.append(f"{dataset}: refused for an unlisted reason: {warning.reason}")


def check_raw(path: Path, parsed: Parsed, *, max_elements: int = MAX_COMPARED_ELEMENTS) -> Report:
    """Every dataset reads back equal to h5py's raw read, or was refused for a listed reason."""
    report = Report()
    check_refusals(parsed, report)
    reg = registry()
    with _open_h5py(path) as file:
        for link_path, dataset in h5py_datasets(file):
            if link_path in parsed.skipped:
                report.counts["refused"] += 1
                continue
            if _is_dimension_only(dataset):
                report.counts["dimension-only"] += 1
                continue
            group, _, key = link_path.rpartition("/")
            array = find_array(parsed.store, f"{group}/{key.replace(NON_COORD_PREFIX, '')}")
            if array is None:
                report.problems.append(f"{link_path}: neither virtualised nor reported")
                continue
            if dataset.size > max_elements:
                report.counts["too large to compare"] += 1
                continue
            samples = sample_selection(array)
            if samples is not None and array.shape == dataset.shape:
                for selection in samples:
                    got = read_array(array, reg, selection)
                    expected = np.asarray(dataset[selection])
                    if not values_equal(got, expected):
                        report.problems.append(f"{link_path}{selection}: values differ from h5py")
                report.counts["equal (sampled slabs)"] += 1
                continue
            expected = _h5py_read(dataset)
            got = read_array(array, reg)
            if got.shape != expected.shape:
                # netCDF padding along an unlimited dimension: the rest must be fill
                region = tuple(slice(0, n) for n in expected.shape)
                padding = got.copy()
                padding[region] = _fill_of(dataset, got.dtype)
                if not values_equal(padding, np.full_like(got, _fill_of(dataset, got.dtype))):
                    report.problems.append(f"{link_path}: padding is not the fill value")
                got = got[region]
            if values_equal(got, expected):
                report.counts["equal"] += 1
            else:
                report.problems.append(
                    f"{link_path}: values differ from h5py ({got.dtype} {got.ravel()[:4]} vs "
                    f"{expected.dtype} {expected.ravel()[:4]})"
                )
    return report


@contextlib.contextmanager
def _open_h5py(path: Path) -> Iterator[h5py.File]:
    """Open by path (so HDF5 finds virtual-dataset sources next to the file); files
    whose superblock says "open for writing" only open through a file object."""
    try:
        file = h5py.File(path, "r")
    except OSError:
        with open(path, "rb") as raw, h5py.File(raw, "r") as fallback:
            yield fallback
        return
    with file:
        yield file


def _h5py_read(dataset: h5py.Dataset) -> np.ndarray:
    if h5py.check_vlen_dtype(dataset.dtype) in (str, bytes):
        return np.asarray(dataset.asstr()[()], dtype=object)
    return np.asarray(dataset[()])


def _fill_of(dataset: h5py.Dataset, dtype: np.dtype) -> Any:
    value = dataset.fillvalue
    if dtype.kind == "T":
        return value.decode() if isinstance(value, bytes) else (value or "")
    return np.asarray(value).astype(dtype)[()]


# --------------------------------------------------------------------- xarray / h5netcdf


def open_h5netcdf(path: Path, *, decode: bool) -> xr.DataTree | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return xr.open_datatree(
                path,
                engine="h5netcdf",
                phony_dims="sort",
                mask_and_scale=decode,
                decode_times=decode,
                decode_coords=decode,
            )
        except Exception:  # h5netcdf cannot open every HDF5 file
            return None


class _QuietManifestStore(ManifestStore):
    """ManifestStore whose ``str`` is short.

    zarr formats ``str(store)`` for every node it opens, and ManifestStore's ``str``
    prints the whole hierarchy, which makes opening a group of N arrays cost O(N^2).
    """

    def __str__(self) -> str:
        return "ManifestStore"


def quiet(store: ManifestStore) -> ManifestStore:
    return _QuietManifestStore(store._group, registry=store._registry)


def open_virtual(parsed: Parsed, *, decode: bool) -> xr.DataTree:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_datatree(
            quiet(parsed.store),
            engine="zarr",
            zarr_format=3,
            consolidated=False,
            mask_and_scale=decode,
            decode_times=decode,
            decode_coords=decode,
        )


def _plain_attr(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return _plain_attr(value.tolist())
    if isinstance(value, (list, tuple)):
        items = [_plain_attr(v) for v in value]
        return items[0] if len(items) == 1 else items
    if isinstance(value, np.generic):
        return _plain_attr(value.item())
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def attrs_equal(a: Any, b: Any) -> bool:
    a, b = _plain_attr(a), _plain_attr(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(attrs_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return bool(a == b)


def _float32_packing(attrs: dict[str, Any]) -> bool:
    """JSON attributes carry no float32: xarray then unpacks in float64 (a known difference)."""
    return any(
        isinstance(attrs.get(name), (np.floating, np.ndarray))
        and np.asarray(attrs[name]).dtype == np.float32
        for name in ("scale_factor", "add_offset")
    )


def _decoded_equal(
    got: np.ndarray, expected: np.ndarray, float32_packed: bool, offset: float = 0.0
) -> bool:
    if values_equal(got, expected):
        return True
    if not float32_packed or got.shape != expected.shape:
        return False
    if expected.dtype.kind == "M":
        delta = np.abs(got.astype("i8") - expected.astype("i8"))
        scale = np.abs(expected.astype("i8")).astype("f8") * 2.0**-22
        return bool(np.all((delta <= scale) | (np.isnat(got) & np.isnat(expected))))
    # float32 arithmetic: relative error of the result, absolute error of the offset
    # (cancellation near zero)
    atol = 2.0**-20 * abs(offset)
    return bool(
        np.allclose(got.astype(expected.dtype), expected, rtol=2.0**-21, atol=atol, equal_nan=True)
    )


def check_netcdf(path: Path, parsed: Parsed) -> Report:
    """The virtual DataTree equals h5netcdf's, decoded and raw (where h5netcdf opens it)."""
    report = Report()
    # Open each side once, undecoded; decoding is xr.decode_cf, what open_* applies.
    expected_tree = open_h5netcdf(path, decode=False)
    if expected_tree is None:
        report.counts["h5netcdf cannot open"] += 1
        return report
    got_tree = open_virtual(parsed, decode=False)
    for decode in (True, False):
        mode = "decoded" if decode else "raw"
        for node in expected_tree.subtree:
            where = f"{node.path} ({mode})"
            try:
                got_node = got_tree[node.path]
            except KeyError:
                report.problems.append(f"{where}: group missing")
                continue
            expected = node.to_dataset(inherit=False)
            got = got_node.to_dataset(inherit=False)
            if decode:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    expected, got = xr.decode_cf(expected), xr.decode_cf(got)
            group_path = node.path if node.path != "/" else ""
            refused = {
                d.rsplit("/", 1)[1].replace(NON_COORD_PREFIX, "")
                for d in parsed.skipped
                if d.rsplit("/", 1)[0] == group_path
            }
            missing = set(expected.variables) - set(got.variables) - refused
            extra = set(got.variables) - set(expected.variables)
            if missing or extra:
                report.problems.append(f"{where}: variables missing {missing}, extra {extra}")
            reported = parsed.skipped_attributes(node.path)
            _compare_attrs(expected.attrs, got.attrs, reported, where, report)
            for name in sorted(set(expected.variables) & set(got.variables)):
                e, g = expected.variables[name], got.variables[name]
                var_where = f"{node.path.rstrip('/')}/{name} ({mode})"
                if e.dims != g.dims:
                    report.problems.append(f"{var_where}: dims {g.dims} != {e.dims}")
                    continue
                owner = f"{group_path}/{name}"
                reported = parsed.skipped_attributes(owner) | parsed.skipped_attributes(
                    f"{group_path}/{NON_COORD_PREFIX}{name}"
                )
                if g.dtype.kind in "OTSU":
                    reported |= {"_FillValue", "missing_value"}  # not written for strings
                _compare_attrs(e.attrs, g.attrs, reported, var_where, report)
                if not decode:
                    continue  # raw values were compared with h5py by check_raw
                if e.size > MAX_COMPARED_ELEMENTS:
                    report.counts["too large to compare"] += 1
                    continue
                packing = e.encoding | e.attrs
                packed = _float32_packing(packing)
                offset = float(np.ravel(packing.get("add_offset", 0.0))[0])
                virtual = find_array(parsed.store, f"{group_path}/{name}")
                samples = sample_selection(virtual) if virtual is not None else None
                pairs = [(e, g)]
                if samples and e.dims:
                    pairs = [
                        (e.isel({e.dims[0]: sel[0]}), g.isel({g.dims[0]: sel[0]}))
                        for sel in samples
                    ]
                for e_part, g_part in pairs:
                    try:
                        expected_values = e_part.values
                    except Exception:  # h5netcdf itself cannot read it
                        report.counts["h5netcdf cannot read variable"] += 1
                        break
                    got_values = g_part.values
                    if _decoded_equal(got_values, expected_values, packed, offset):
                        report.counts[f"{mode} equal"] += 1
                    else:
                        report.problems.append(
                            f"{var_where}: values differ from h5netcdf ({got_values.dtype} "
                            f"{got_values.ravel()[:3]} vs {expected_values.dtype} "
                            f"{expected_values.ravel()[:3]})"
                        )
    return report


def _compare_attrs(
    expected: dict[str, Any], got: dict[str, Any], reported: set[str], where: str, report: Report
) -> None:
    for key in set(expected) | set(got):
        if key in reported:
            report.counts["attribute reported"] += 1
            continue
        if key not in got or key not in expected or not attrs_equal(expected[key], got[key]):
            report.problems.append(
                f"{where}: attribute {key!r} {got.get(key)!r} != {expected.get(key)!r}"
            )
