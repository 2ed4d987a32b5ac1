"""One conformance check, run inside a worker process started by ``conformance.py``.

A check takes one tool and one file: the tool turns the file into references, every array
the tool exposes is read back through zarr and compared with the native reader (tifffile
``page.asarray()`` for TIFF, h5py ``dataset[()]`` for HDF5), and the outcome is classified.
The pseudo-tool ``native`` describes the file instead (its traits and which arrays the
native reader can read), for the feature table.

Worker processes are bound to one tool, so a tool's codec registrations never leak into
another tool's reads, and a crash or hang in a C library costs one file, not the run.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Array outcomes, worst first (a file takes the worst outcome of its arrays).
WRONG = "wrong-values"
READ_ERROR = "read-error"
OTHER_DTYPE = "other-dtype"  # the native bytes, under a lossy data type (e.g. opaque void)
DROPPED = "dropped"
EXACT = "exact"
NOT_COMPARED = "not-compared"
# File outcomes that stop before any array is read.
PARSE_ERROR = "parse-error"
TIMEOUT = "timeout"
CRASH = "crash"
NO_ARRAYS = "no-arrays"
NOT_APPLICABLE = "n/a"

ARRAY_ORDER = (WRONG, READ_ERROR, OTHER_DTYPE, DROPPED, EXACT, NOT_COMPARED)
# A file whose values are all exact but whose datasets lack attributes the file holds (a
# dropped scale_factor, add_offset or units changes what xarray decodes).
ATTRIBUTES_MISSING = "attributes-missing"

#: Fill attributes, checked by their own measures (``fill-attr``), not by name.
FILL_ATTRIBUTES = frozenset({"_FillValue", "missing_value"})

#: Attributes netCDF-4 and the HDF5 dimension-scale API keep for their own bookkeeping,
#: which netCDF readers (and so xarray) do not show: no tool is expected to keep them.
#: (Listed here, not imported from virtualizarr_fill: the judge of every tool does not
#: take one tool's definition.)
BOOKKEEPING_ATTRIBUTES = frozenset(
    {
        "REFERENCE_LIST",
        "CLASS",
        "DIMENSION_LIST",
        "NAME",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_nc3_strict",
        "_NCProperties",
    }
)

# Arrays larger than this are not read (the corpus has one 2 GiB mostly-unallocated array).
MAX_COMPARE_BYTES = 512 * 2**20

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


# -- file kinds ---------------------------------------------------------------------------


def file_kind(path: str) -> str:
    """``tiff``, ``hdf5``, ``netcdf3`` or ``other``, from the magic bytes."""
    with open(path, "rb") as f:
        head = f.read(8)
        if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
            return "tiff"
        if head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05"):
            return "netcdf3"
        # The HDF5 superblock sits at 0, 512, 1024, 2048, ... (after a user block).
        offset = 0
        size = os.path.getsize(path)
        while offset < size:
            f.seek(offset)
            if f.read(8) == HDF5_SIGNATURE:
                return "hdf5"
            offset = 512 if offset == 0 else offset * 2
    return "other"


# -- value comparison ---------------------------------------------------------------------


def _as_text(value: Any) -> Any:
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "surrogateescape")
    if isinstance(value, np.ndarray):
        return _texts(value)
    return value


def _texts(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    for index in np.ndindex(a.shape):
        out[index] = _as_text(a[index])
    return out


def _is_text_like(dtype: np.dtype) -> bool:
    return dtype.kind in "OSUT"


def _equal_items(a: Any, b: Any) -> bool:
    """Element equality that also holds for array elements (vlen sequences)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _first_difference(native: np.ndarray, got: np.ndarray, differs: np.ndarray) -> str:
    where = np.argwhere(differs)
    count = int(differs.sum())
    index = tuple(int(i) for i in where[0]) if where.size else ()
    return (
        f"{count} of {native.size} elements differ; first at {list(index)}: "
        f"native {native[index]!r} vs tool {got[index]!r}"
    )


def compare(native: np.ndarray, got: np.ndarray) -> tuple[str, str]:
    """(outcome, detail) of one array read through a tool against the native reader."""
    try:
        return _compare(native, got)
    except Exception as error:  # representations that cannot even be compared
        return WRONG, f"dtype {got.dtype} vs native {native.dtype} ({error_line(error)})"


def _same_bytes(native: np.ndarray, got: np.ndarray) -> bool:
    if native.dtype.itemsize != got.dtype.itemsize or native.dtype.hasobject or got.dtype.hasobject:
        return False
    return bool(np.ascontiguousarray(native).tobytes() == np.ascontiguousarray(got).tobytes())


def _compare(native: np.ndarray, got: np.ndarray) -> tuple[str, str]:
    if native.shape != got.shape:
        return WRONG, f"shape {got.shape} vs native {native.shape}"
    nd, gd = native.dtype, got.dtype
    if (
        "V" in (nd.kind, gd.kind)
        and nd.newbyteorder("=") != gd.newbyteorder("=")
        and not (nd.names and gd.names)
        and _same_bytes(native, got)
    ):
        # Raw bytes under another type: opaque either way (S/V) or a compound flattened.
        if {nd.kind, gd.kind} == {"V", "S"} and not (nd.names or gd.names):
            return EXACT, f"(as {gd} vs native {nd})"
        return OTHER_DTYPE, f"same bytes, dtype {gd} vs native {nd}"
    if nd.names or gd.names:
        if not (nd.names and gd.names) or set(nd.names) != set(gd.names):
            return WRONG, f"dtype {gd} vs native {nd}"
        for name in nd.names:
            outcome, detail = compare(native[name], got[name])
            if outcome != EXACT:
                return outcome, f"field {name!r}: {detail}"
        return EXACT, ""
    if _is_text_like(nd) or _is_text_like(gd):
        # Representation (bytes/str, fixed/variable length) may differ; the text may not.
        a, b = _texts(native), _texts(got)
        differs = np.empty(a.shape, dtype=bool)
        for index in np.ndindex(a.shape):
            differs[index] = not _equal_items(a[index], b[index])
        if differs.any():
            return WRONG, _first_difference(a, b, differs)
        note = "" if nd.kind == gd.kind else f"(as {gd} vs native {nd})"
        return EXACT, note
    same_kind = nd.newbyteorder("=") == gd.newbyteorder("=")
    # bool and 1-byte integers hold the same bytes (h5py reads an HDF5 bool enum as bool).
    compatible = same_kind or (
        nd.itemsize == gd.itemsize == 1 and {nd.kind, gd.kind} <= {"b", "i", "u"}
    )
    if compatible:
        a = np.ascontiguousarray(native, dtype=nd.newbyteorder("="))
        b = np.ascontiguousarray(got, dtype=gd.newbyteorder("="))
        if a.tobytes() == b.tobytes():
            return EXACT, "" if same_kind else f"(as {gd} vs native {nd})"
        if a.dtype.kind in "biufc":
            differs = a.view(np.uint8).reshape((*a.shape, -1)) != b.view(np.uint8).reshape(
                (*b.shape, -1)
            )
            return WRONG, _first_difference(a, b, differs.any(axis=-1))
        return WRONG, "bytes differ"
    try:
        equal = bool(np.array_equal(native, got, equal_nan=nd.kind in "fc" and gd.kind in "fc"))
    except (TypeError, ValueError):
        equal = False
    return WRONG, f"dtype {gd} vs native {nd}" + (" (values equal after casting)" if equal else "")


# -- results ------------------------------------------------------------------------------


@dataclass
class ArrayResult:
    name: str
    native: str
    outcome: str
    detail: str = ""
    shape: list[int] | None = None
    dtype: str = ""
    fill_value: Any = None  # the tool's Zarr fill_value
    fill_attr: Any = None  # the tool's _FillValue attribute, decoded
    # HDF5: attributes h5py reads from the dataset that the tool's array lacks
    missing_attributes: list[str] = field(default_factory=list)


@dataclass
class Result:
    tool: str
    file: str
    kind: str
    outcome: str = ""
    error: str = ""
    stage: str = ""
    parse_seconds: float | None = None
    read_seconds: float | None = None
    arrays: list[ArrayResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    traits: dict[str, Any] = field(default_factory=dict)
    xarray: str = ""  # HDF5: whether xarray opens what the tool produced

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["arrays"] = [a.__dict__ for a in self.arrays]
        return d


def error_line(error: BaseException) -> str:
    """Exception type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _warning_lines(caught: list[warnings.WarningMessage]) -> list[str]:
    seen: list[str] = []
    for w in caught:
        first = str(w.message).strip().splitlines()
        line = f"{w.category.__name__}: {first[0][:300] if first else ''}"
        if line not in seen:
            seen.append(line)
    return seen[:50]


def correct_outcome(result: dict[str, Any]) -> str:
    """A checked file's outcome as a user reading it with xarray sees it: ``exact`` only
    when every value is exact and no dataset lacks an attribute the file holds."""
    outcome = result.get("outcome", "")
    if outcome == EXACT and any(a.get("missing_attributes") for a in result.get("arrays", [])):
        return ATTRIBUTES_MISSING
    return outcome


def file_outcome(arrays: list[ArrayResult]) -> str:
    """The worst outcome of a file's arrays."""
    present = {a.outcome for a in arrays}
    for outcome in ARRAY_ORDER:
        if outcome in present:
            if outcome == NOT_COMPARED:
                return NOT_COMPARED
            return outcome
    return NO_ARRAYS


# -- reading what a tool exposes ------------------------------------------------------------


def _zarr_arrays(root: Any) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """(path, array, attributes of the containing group) for every array under ``root``."""
    import zarr

    if isinstance(root, zarr.Array):
        yield "", root, {}
        return
    yield from _walk_group(root, "")


def _walk_group(group: Any, prefix: str) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    import zarr

    attrs = dict(group.attrs)
    for name, member in sorted(group.members(), key=lambda m: m[0]):
        path = f"{prefix}{name}"
        if isinstance(member, zarr.Array):
            yield path, member, attrs
        else:
            yield from _walk_group(member, f"{path}/")


def _read(array: Any) -> np.ndarray:
    return np.asarray(array[...])


def _nbytes(shape: tuple[int, ...] | None, itemsize: int) -> int:
    return math.prod(shape or ()) * itemsize


# -- tools ----------------------------------------------------------------------------------


def _registry() -> Any:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file:///": LocalStore("/")})


def _manifest_root(store: Any) -> Any:
    import zarr

    return zarr.open_group(store, mode="r", zarr_format=3)


def _kerchunk_root(refs: dict[str, Any]) -> Any:
    import fsspec
    import zarr
    from zarr.storage import FsspecStore

    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True)
    return zarr.open(FsspecStore(fs, read_only=True, path=""), mode="r", zarr_format=2)


@dataclass(frozen=True)
class Tool:
    """How one tool turns a file into a zarr root, per file kind."""

    name: str
    kinds: frozenset[str]
    setup: Callable[[], None]
    parse: Callable[[str, str], Any]  # (absolute path, kind) -> zarr Group or Array
    tiff_mapping: str = "page-name"  # how an exposed array names its TIFF image


def _setup_virtual_tiff() -> None:
    """Import virtual-tiff and make zarr use its codec classes for the names it claims.

    virtual-tiff and imagecodecs-zarr both register ``imagecodecs_*`` names through the
    ``zarr.codecs`` entry point, and zarr then picks one of the two; with imagecodecs-zarr's
    ``Floatpred`` virtual-tiff's predictor-3 arrays cannot be opened. Pinning the names in
    zarr's configuration is what a virtual-tiff user with both installed has to do.
    """
    from importlib.metadata import entry_points

    import virtual_tiff  # noqa: F401
    import zarr

    pins = {
        f"codecs.{ep.name}": ep.value.replace(":", ".")
        for ep in entry_points(group="zarr.codecs")
        if ep.value.startswith("virtual_tiff")
    }
    zarr.config.set(pins)


def _parse_virtual_tiff(path: str, kind: str) -> Any:
    from virtual_tiff import VirtualTIFF

    return _manifest_root(VirtualTIFF()(f"file://{path}", _registry()))


def _setup_virtualizarr_hdf() -> None:
    import virtualizarr.parsers  # noqa: F401


def _parse_virtualizarr_hdf(path: str, kind: str) -> Any:
    from virtualizarr.parsers import HDFParser

    return _manifest_root(HDFParser()(f"file://{path}", _registry()))


def _setup_async_hdf5() -> None:
    import async_hdf5.virtualizarr  # noqa: F401


def _parse_async_hdf5(path: str, kind: str) -> Any:
    # async-hdf5's VirtualiZarr entry point (async_hdf5.virtualizarr.open_virtual_hdf5).
    from async_hdf5.virtualizarr import open_virtual_hdf5
    from obstore.store import LocalStore
    from zarr.core.sync import sync

    registry = _registry()
    store = sync(
        open_virtual_hdf5(
            path.lstrip("/"), store=LocalStore("/"), url=f"file://{path}", registry=registry
        )
    )
    return _manifest_root(store)


def _setup_kerchunk() -> None:
    import imagecodecs.numcodecs
    import kerchunk.hdf
    import kerchunk.tiff  # noqa: F401

    # kerchunk's TIFF references name imagecodecs' numcodecs codecs (its documented setup).
    imagecodecs.numcodecs.register_codecs(verbose=False)


def _parse_kerchunk(path: str, kind: str) -> Any:
    if kind == "tiff":
        from kerchunk.tiff import tiff_to_zarr

        refs = tiff_to_zarr(path)
    else:
        from kerchunk.hdf import SingleHdf5ToZarr

        translator = SingleHdf5ToZarr(path)
        try:
            refs = translator.translate()
        finally:
            translator.close()
    return _kerchunk_root(refs)


def _fill_parsers() -> tuple[Any, Any, str]:
    """Our parsers: from the package root where exported, else from their subpackages."""
    import virtualizarr_fill

    origins = []
    parsers = []
    for name, subpackage in (("TIFFParser", "tiff"), ("HDF5Parser", "hdf5")):
        parser = getattr(virtualizarr_fill, name, None)
        origin = f"virtualizarr_fill.{name}"
        if parser is None:
            module = importlib.import_module(f"virtualizarr_fill.{subpackage}")
            parser = getattr(module, name)
            origin = f"virtualizarr_fill.{subpackage}.{name}"
        parsers.append(parser)
        origins.append(origin)
    return parsers[0], parsers[1], ", ".join(origins)


def _setup_fill() -> None:
    _fill_parsers()


def _parse_fill(path: str, kind: str) -> Any:
    tiff_parser, hdf5_parser, _ = _fill_parsers()
    # layout="tree" exposes every image (overviews, masks, SubIFDs), like virtual-tiff's default.
    parser = tiff_parser(layout="tree") if kind == "tiff" else hdf5_parser()
    return _manifest_root(parser(f"file://{path}", _registry()))


HDF_KINDS = frozenset({"hdf5", "netcdf3"})
TOOLS: dict[str, Tool] = {
    "virtual-tiff": Tool(
        "virtual-tiff", frozenset({"tiff"}), _setup_virtual_tiff, _parse_virtual_tiff
    ),
    "virtualizarr-hdf": Tool(
        "virtualizarr-hdf", HDF_KINDS, _setup_virtualizarr_hdf, _parse_virtualizarr_hdf
    ),
    "async-hdf5": Tool("async-hdf5", HDF_KINDS, _setup_async_hdf5, _parse_async_hdf5),
    "kerchunk": Tool(
        "kerchunk",
        HDF_KINDS | {"tiff"},
        _setup_kerchunk,
        _parse_kerchunk,
        tiff_mapping="series-level",
    ),
    "virtualizarr-fill": Tool(
        "virtualizarr-fill",
        HDF_KINDS | {"tiff"},
        _setup_fill,
        _parse_fill,
        tiff_mapping="group-attr",
    ),
}


def fill_available() -> tuple[bool, str]:
    """Whether our parsers import, and from where (or why not)."""
    try:
        _, _, origin = _fill_parsers()
    except Exception as error:  # any import failure means the column is skipped
        return False, error_line(error)
    return True, origin


# -- TIFF -------------------------------------------------------------------------------------


def _tiff_native_candidates(native: np.ndarray) -> list[np.ndarray]:
    """The native array in the layouts tools use: as is, samples first, with a band axis."""
    out = [native]
    if native.ndim >= 3:
        out.append(np.moveaxis(native, -1, -3))
    if native.ndim == 2:
        out.append(native[np.newaxis])
    return out


def _match_tiff(native: np.ndarray, got: np.ndarray) -> tuple[str, str]:
    candidates = _tiff_native_candidates(native)
    for candidate in candidates:
        if candidate.shape == got.shape:
            return compare(candidate, got)
    return WRONG, f"shape {got.shape} vs native {native.shape}"


def _tiff_native(tif: Any, key: Any, path: str) -> np.ndarray:
    """tifffile's decode of the image a key names; for complex-integer samples
    (SampleFormat 5), which tifffile does not decode, GDAL's (rasterio, first image only,
    as complex64/complex128: the type that holds every value)."""
    image = _tiff_image(tif, key)
    try:
        return np.asarray(image.asarray())
    except Exception:
        page = getattr(image, "keyframe", image)
        if int(page.sampleformat) != 5 or int(page.index) != 0:
            raise
    import rasterio

    complex_type = np.complex64 if int(page.bitspersample) == 32 else np.complex128
    with rasterio.open(path) as src:
        return np.asarray(src.read(out_dtype=complex_type))


def _tiff_image(tif: Any, key: Any) -> Any:
    """The tifffile page (or series level) a key names."""
    kind, *index = key
    if kind == "page":
        page = tif.pages[index[0]]
        for sub in index[1:]:
            page = page.pages[sub]
        return page
    return tif.series[0].levels[index[0]]


def _tiff_key(tool: Tool, name: str, array: Any, group_attrs: dict[str, Any]) -> Any:
    """The native image an exposed array corresponds to, or None (coordinates etc.)."""
    if tool.tiff_mapping == "page-name":
        return ("page", int(name)) if name.isdigit() else None
    if tool.tiff_mapping == "series-level":
        last = name.rsplit("/", 1)[-1]
        return ("level", int(last)) if last.isdigit() else ("level", 0) if name == "" else None
    # virtualizarr-fill: band_data of each group, whose attributes carry the IFD index.
    if name.rsplit("/", 1)[-1] != "band_data" or "tiff_ifd" not in group_attrs:
        return None
    ifd = group_attrs["tiff_ifd"]
    return ("page", *(ifd if isinstance(ifd, list) else [ifd]))


def _key_label(tif: Any, key: Any) -> str:
    """``ifdN`` (or ``ifdN.subM``) of the image a key names."""
    kind, *index = key
    if kind == "level":
        with contextlib.suppress(Exception):
            page_index = tif.series[0].levels[index[0]].keyframe.index
            if isinstance(page_index, tuple):
                return "ifd" + ".sub".join(str(i) for i in page_index)
            return f"ifd{page_index}"
        return f"series0.level{index[0]}"
    return "ifd" + ".sub".join(str(i) for i in index)


def _fill_info(array: Any, entry: ArrayResult) -> None:
    """Record the tool's fill value and decoded ``_FillValue`` attribute."""
    with contextlib.suppress(Exception):
        entry.fill_value = _jsonable(array.fill_value)
    with contextlib.suppress(Exception):
        raw = array.attrs.get("_FillValue")
        if raw is None:
            return
        if isinstance(raw, str) and array.dtype.kind in "fc":
            from xarray.backends.zarr import FillValueCoder

            raw = FillValueCoder.decode(raw, array.dtype)
        entry.fill_attr = _jsonable(raw)


def check_tiff(tool: Tool, path: str, root: Any, result: Result) -> None:
    import tifffile

    with tifffile.TiffFile(path) as tif:
        exposed = coordinates = 0
        for name, array, group_attrs in _zarr_arrays(root):
            key = _tiff_key(tool, name, array, group_attrs)
            label = name or "<root>"
            if key is None:
                coordinates += 1
                continue
            exposed += 1
            entry = ArrayResult(label, _key_label(tif, key), "", shape=list(array.shape))
            entry.dtype = str(array.dtype)
            _fill_info(array, entry)
            result.arrays.append(entry)
            try:
                native = _tiff_native(tif, key, path)
            except Exception as error:
                entry.outcome, entry.detail = NOT_COMPARED, f"native: {error_line(error)}"
                with contextlib.suppress(Exception):
                    _read(array)
                    entry.detail += "; tool reads values"
                continue
            try:
                got = _read(array)
            except Exception as error:
                entry.outcome, entry.detail = READ_ERROR, error_line(error)
                continue
            entry.outcome, entry.detail = _match_tiff(native, got)
        total = len(tif.pages) + sum(len(p.pages or ()) for p in tif.pages)
        result.notes.append(f"images exposed: {exposed} of {total} IFDs")
        if coordinates:
            result.notes.append(f"{coordinates} coordinate arrays not compared (no native image)")


# -- HDF5 -------------------------------------------------------------------------------------


@dataclass
class NativeDataset:
    path: str
    aliases: list[str]
    error: str = ""
    dimension_only: bool = False  # a netCDF dimension that is not a variable


NETCDF_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"


def _is_dimension_only(ds: Any) -> bool:
    with contextlib.suppress(Exception):
        name = ds.attrs.get("NAME")
        if isinstance(name, str):
            name = name.encode()
        return bool(isinstance(name, bytes) and name.startswith(NETCDF_DIMENSION_ONLY))
    return False


def native_datasets(f: Any) -> tuple[list[NativeDataset], dict[str, str]]:
    """Every dataset reachable through hard and soft links (one entry per object), and
    through external links h5py follows (one entry per link), and the links h5py does
    not follow within the file (path -> reason; every external link is listed there)."""
    import h5py

    found: dict[Any, NativeDataset] = {}
    broken: dict[str, str] = {}
    seen_groups: set[Any] = set()

    def key_of(obj: Any, path: str) -> Any:
        try:
            return hash(obj.id)
        except Exception:
            return path

    def walk(group: Any, prefix: str) -> None:
        for name in group:
            path = f"{prefix}{name}"
            try:
                link = group.get(name, getlink=True)
            except Exception as error:
                broken[path] = error_line(error)
                continue
            if isinstance(link, h5py.ExternalLink):
                broken[path] = f"external link to {link.filename}:{link.path}"
                # h5py reads a dataset in another file at this path: so must a tool.
                with contextlib.suppress(Exception):
                    if isinstance(group[name], h5py.Dataset):
                        found[path] = NativeDataset(path, [path])
                continue
            try:
                obj = group[name]
            except Exception as error:
                if isinstance(link, h5py.SoftLink):
                    broken[path] = f"dangling soft link to {link.path}"
                else:
                    found[path] = NativeDataset(path, [path], f"native: {error_line(error)}")
                continue
            key = key_of(obj, path)
            if isinstance(obj, h5py.Group):
                if key not in seen_groups:
                    seen_groups.add(key)
                    walk(obj, f"{path}/")
            elif isinstance(obj, h5py.Dataset):
                if key in found:
                    found[key].aliases.append(path)
                else:
                    found[key] = NativeDataset(path, [path], dimension_only=_is_dimension_only(obj))

    walk(f, "")
    return list(found.values()), broken


def _names_dataset(warning: str, path: str) -> bool:
    """Whether a warning names this dataset by its absolute path ('/a/b' or ' /a/b:')."""
    return f"'/{path}'" in warning or f" /{path}:" in warning


def _netcdf_variable_path(f: Any, path: str) -> str:
    """The dataset behind an exposed name: netCDF-4 stores a variable that shares its name
    with a dimension it does not index as ``_nc4_non_coord_<name>`` (readers rename it)."""
    head, _, base = path.rpartition("/")
    hidden = f"{head}/_nc4_non_coord_{base}" if head else f"_nc4_non_coord_{base}"
    with contextlib.suppress(Exception):
        if hidden in f and _is_dimension_only(f[path]):
            return hidden
    return path


def native_attribute_names(obj: Any) -> list[str]:
    """The attributes of an h5py object a reader shows: every one h5py lists and can read,
    netCDF/dimension-scale bookkeeping aside, and the fill attributes, which tools may
    rightly move (to a Zarr fill_value) or drop (a sentinel the type cannot hold, a text
    _FillValue xarray's Zarr backend refuses): the fill rows of the report judge those."""
    names = []
    for name in obj.attrs:
        if name in BOOKKEEPING_ATTRIBUTES or name in FILL_ATTRIBUTES:
            continue
        try:
            obj.attrs[name]
        except Exception:
            continue  # no tool could match what h5py cannot read
        names.append(name)
    return names


def _missing_attributes(obj: Any, array: Any) -> list[str]:
    """Attributes of dataset ``obj`` the tool's ``array`` lacks (by name)."""
    try:
        kept = set(array.attrs)
    except Exception:
        kept = set()
    try:
        return sorted(set(native_attribute_names(obj)) - kept)
    except Exception:
        return []  # h5py cannot list them: nothing to hold the tool to


def _native_hdf5_value(f: Any, path: str) -> tuple[np.ndarray | None, str]:
    """h5py's read of a dataset, or why it cannot serve as the reference."""
    import h5py

    ds = f[path]
    if ds.shape is None:
        return None, "null dataspace (no value)"
    if ds.dtype.kind == "O" and h5py.check_dtype(ref=ds.dtype) is not None:
        return None, "object references"
    if _nbytes(ds.shape, ds.dtype.itemsize) > MAX_COMPARE_BYTES:
        return None, f"too large to compare ({_nbytes(ds.shape, ds.dtype.itemsize)} bytes)"
    return np.asarray(ds[()]), ""


def check_hdf5(tool: Tool, path: str, root: Any, result: Result, caught: list[str]) -> None:
    import h5py

    try:
        f = h5py.File(path, "r")
    except Exception as error:
        f = None
        native_error = error_line(error)
    with f if f is not None else contextlib.nullcontext():
        datasets, _ = native_datasets(f) if f is not None else ([], {})
        primary = {alias: d.path for d in datasets for alias in d.aliases}
        exposed: set[str] = set()
        for name, array, _ in _zarr_arrays(root):
            exposed.add(name)
            entry = ArrayResult(name, primary.get(name, name), "", shape=list(array.shape))
            entry.dtype = str(array.dtype)
            _fill_info(array, entry)
            result.arrays.append(entry)
            native: np.ndarray | None = None
            reason = f"native: {native_error}" if f is None else ""
            if f is not None:
                name_in_file = _netcdf_variable_path(f, name)
                entry.native = primary.get(name_in_file, name_in_file)
                try:
                    obj = f.get(name_in_file)
                except Exception as error:
                    obj, reason = None, f"native: {error_line(error)}"
                if not isinstance(obj, h5py.Dataset):
                    reason = reason or "no native dataset at this path"
                else:
                    entry.missing_attributes = _missing_attributes(obj, array)
                    try:
                        native, reason = _native_hdf5_value(f, name_in_file)
                    except Exception as error:
                        reason = f"native: {error_line(error)}"
            if _nbytes(tuple(array.shape), array.dtype.itemsize) > MAX_COMPARE_BYTES:
                native, reason = None, "too large to compare"
            if native is None:
                entry.outcome = NOT_COMPARED
                entry.detail = reason
                try:
                    if _nbytes(tuple(array.shape), array.dtype.itemsize) <= MAX_COMPARE_BYTES:
                        _read(array)
                        entry.detail += "; tool reads values"
                except Exception as error:
                    entry.detail += f"; tool read fails: {error_line(error)}"
                continue
            try:
                got = _read(array)
            except Exception as error:
                entry.outcome, entry.detail = READ_ERROR, error_line(error)
                continue
            entry.outcome, entry.detail = compare(native, got)
        hidden = 0
        exposed_native = {a.native for a in result.arrays}
        for dataset in datasets:
            if any(alias in exposed or alias in exposed_native for alias in dataset.aliases):
                continue
            if dataset.dimension_only:
                # netCDF readers (h5netcdf, netCDF4) show these as dimensions, not variables.
                hidden += 1
                continue
            said = [w for w in caught if _names_dataset(w, dataset.path)]
            detail = f"warned: {said[0]}" if said else "silently"
            outcome = DROPPED
            unreadable = dataset.error
            if not unreadable and f is not None:
                try:
                    value, why = _native_hdf5_value(f, dataset.path)
                    unreadable = "" if value is not None else why
                except Exception as error:
                    unreadable = f"native: {error_line(error)}"
            if unreadable:
                # Without a native read there is nothing a tool could have matched.
                outcome, detail = NOT_COMPARED, f"not exposed; {unreadable}"
            result.arrays.append(ArrayResult(dataset.path, dataset.path, outcome, detail))
    if hidden:
        result.notes.append(f"{hidden} netCDF dimension-only datasets not exposed (as netCDF does)")
    result.xarray = _xarray_open(root)


def _xarray_open(root: Any) -> str:
    """``ok`` when xarray opens the store as a DataTree (undecoded), else the error."""
    import xarray as xr

    try:
        tree = xr.open_datatree(
            root.store,
            engine="zarr",
            consolidated=False,
            zarr_format=root.metadata.zarr_format,
            decode_cf=False,
        )
        tree.close()
    except Exception as error:
        return error_line(error)
    return "ok"


# -- native traits --------------------------------------------------------------------------


def native_traits(path: str, kind: str) -> dict[str, Any]:
    """What the file contains, per image (TIFF) or dataset (HDF5), read with the native reader."""
    if kind == "tiff":
        return tiff_traits(path)
    if kind == "hdf5":
        return hdf5_traits(path)
    return {"file": [kind], "arrays": {}}


# TIFF Compression values whose raw strip can be decompressed to measure the last strip.
_DECOMPRESS = {
    5: "lzw_decode",
    8: "zlib_decode",
    32946: "zlib_decode",
    32773: "packbits_decode",
    50000: "zstd_decode",
    34925: "lzma_decode",
}


def _last_strip_trait(tif: Any, page: Any) -> str:
    """``last-strip-short`` / ``-padded`` when the height is not a multiple of RowsPerStrip."""
    height, rps = int(page.imagelength), int(page.rowsperstrip or page.imagelength)
    if page.is_tiled or rps >= height or height % rps == 0:
        return ""
    samples = int(page.samplesperpixel) if page.planarconfig == 1 else 1
    row_bytes = math.ceil(int(page.imagewidth) * samples * int(page.bitspersample) / 8)
    per_plane = math.ceil(height / rps)
    last = per_plane - 1
    offset, count = int(page.dataoffsets[last]), int(page.databytecounts[last])
    if int(page.compression) == 1:
        size = count
    else:
        name = _DECOMPRESS.get(int(page.compression))
        if name is None:
            return "last-strip-partial"
        import imagecodecs

        tif.filehandle.seek(offset)
        try:
            size = len(getattr(imagecodecs, name)(tif.filehandle.read(count)))
        except Exception:
            return "last-strip-partial"
    remaining = (height - last * rps) * row_bytes
    return (
        "last-strip-padded"
        if size >= rps * row_bytes
        else ("last-strip-short" if size >= remaining else "last-strip-partial")
    )


def _compression_name(value: int) -> str:
    import tifffile

    try:
        return tifffile.COMPRESSION(value).name.lower()
    except ValueError:
        return str(value)


def _page_traits(tif: Any, page: Any, main_images: int) -> list[str]:
    t: list[str] = []
    t.append(f"compression:{_compression_name(int(page.compression))}")
    t.append("tiles" if page.is_tiled else "strips")
    if page.is_tiled and (page.imagelength % page.tilelength or page.imagewidth % page.tilewidth):
        t.append("tile-edge")
    if trait := _last_strip_trait(tif, page):
        t.append(trait)
    if int(page.predictor) in (2, 3):
        t.append(f"predictor-{int(page.predictor)}")
    if int(page.predictor) == 2 and int(page.sampleformat) == 3:
        t.append("predictor-2-float")
    if int(page.fillorder) == 2:
        t.append("fillorder-2")
    if tif.byteorder == ">":
        t.append("big-endian")
    if tif.is_bigtiff:
        t.append("bigtiff")
    segments = zip(page.dataoffsets, page.databytecounts, strict=False)
    if any(int(offset) == 0 or int(count) == 0 for offset, count in segments):
        t.append("sparse")
    if int(page.compression) in (6, 7):
        t.append("jpeg")
        if page.jpegtables:
            t.append("jpeg-tables")
    if int(page.photometric) == 6:
        t.append("ycbcr")
    bits = int(page.bitspersample)
    if bits % 8:
        t.append("sub-byte" if bits < 8 else "packed-bits")
    sample_format = int(page.sampleformat)
    if sample_format in (5, 6):
        t.append("complex-int")
    with contextlib.suppress(Exception):
        t.append(f"dtype:{np.dtype(page.dtype).name}")
    if int(page.samplesperpixel) > 1:
        t.append("planar-separate" if page.planarconfig == 2 else "pixel-interleaved")
    if page.extrasamples:
        t.append("extrasamples")
    if page.is_mask:
        t.append("mask")
    elif page.is_reduced:
        t.append("overview")
    if page.index and not (page.is_mask or page.is_reduced) and main_images > 1:
        t.append("further-page")
    if getattr(page, "subifds", None):
        t.append("has-subifds")
    if 42113 in page.tags:
        t.append("nodata")
        with contextlib.suppress(Exception):
            value = float(page.tags[42113].value.strip("\x00 "))
            if math.isnan(value):
                t.append("nodata-nan")
            elif np.dtype(page.dtype).kind in "iu":
                info = np.iinfo(np.dtype(page.dtype))
                if not (info.min <= value <= info.max) or value != int(value):
                    t.append("nodata-out-of-range")
    gdal = page.tags.get(42112)
    if gdal is not None and ("SCALE" in str(gdal.value) or "OFFSET" in str(gdal.value)):
        t.append("gdal-scale-offset")
    return t


def tiff_traits(path: str) -> dict[str, Any]:
    """Traits of every image (IFD and SubIFD) of a TIFF, keyed ``ifdN`` / ``ifdN.subM``."""
    import tifffile

    out: dict[str, Any] = {"file": [], "arrays": {}, "nodata": {}}
    with tifffile.TiffFile(path) as tif:
        pages: list[Any] = [tif.pages[i] for i in range(len(tif.pages))]
        main = sum(1 for p in pages if not (p.is_reduced or p.is_mask))
        for page in pages:
            label = f"ifd{page.index}"
            out["arrays"][label] = _page_traits(tif, page, main)
            if 42113 in page.tags:
                out["nodata"][label] = str(page.tags[42113].value).strip("\x00 ")
            for j, sub in enumerate(page.pages or ()):
                traits = [*_page_traits(tif, sub, main), "subifd"]
                out["arrays"][f"{label}.sub{j}"] = traits
        if tif.byteorder == ">":
            out["file"].append("big-endian")
        if tif.is_bigtiff:
            out["file"].append("bigtiff")
    return out


# HDF5 filter identifiers (registered filter ids, https://portal.hdfgroup.org/...).
FILTER_NAMES = {
    1: "deflate",
    2: "shuffle",
    3: "fletcher32",
    4: "szip",
    5: "nbit",
    6: "scaleoffset",
    307: "bzip2",
    32000: "lzf",
    32001: "blosc",
    32004: "lz4",
    32008: "bitshuffle",
    32013: "zfp",
    32015: "zstd",
    32026: "blosc2",
}


def _dtype_traits(ds: Any) -> list[str]:
    import h5py

    t: list[str] = []
    dt = ds.dtype
    type_class = ds.id.get_type().get_class()
    names = {
        h5py.h5t.BITFIELD: "bitfield",
        h5py.h5t.OPAQUE: "opaque",
        h5py.h5t.ENUM: "enum",
        h5py.h5t.REFERENCE: "object-reference",
        h5py.h5t.ARRAY: "array-type",
        h5py.h5t.COMPOUND: "compound",
    }
    if type_class in names:
        t.append(names[type_class])
    string = h5py.check_string_dtype(dt)
    if string is not None:
        t.append("vlen-string" if string.length is None else "fixed-string")
    elif h5py.check_vlen_dtype(dt) is not None:
        t.append("vlen-sequence")
    if dt.kind == "c":
        t.append("complex")
    if dt.kind == "b":
        t.append("bool")
    if dt.kind == "f" and dt.itemsize == 2:
        t.append("float16")
    if dt.kind in "iuf" and dt.itemsize == 8 and dt.kind != "f":
        t.append("int64")
    byteorders = [dt.byteorder] + [dt.fields[n][0].byteorder for n in dt.names or ()]
    if ">" in byteorders:
        t.append("big-endian")
    return t


def _dataset_traits(ds: Any) -> list[str]:
    import h5py

    t: list[str] = []
    dcpl = ds.id.get_create_plist()
    layout = dcpl.get_layout()
    t.append(
        {
            h5py.h5d.COMPACT: "compact",
            h5py.h5d.CONTIGUOUS: "contiguous",
            h5py.h5d.CHUNKED: "chunked",
            h5py.h5d.VIRTUAL: "virtual",
        }.get(layout, f"layout-{layout}")
    )
    if dcpl.get_external_count() > 0:
        t.append("external-storage")
    for i in range(dcpl.get_nfilters()):
        fid = dcpl.get_filter(i)[0]
        t.append(f"filter:{FILTER_NAMES.get(fid, str(fid))}")
    if ds.shape is None:
        t.append("null-dataspace")
    elif ds.shape == ():
        t.append("scalar")
    elif 0 in ds.shape:
        t.append("zero-size")
    if layout == h5py.h5d.CONTIGUOUS and ds.shape and ds.id.get_offset() is None:
        t.append("never-written")
    if layout == h5py.h5d.CHUNKED and ds.chunks and ds.shape and 0 not in ds.shape:
        grid = math.prod(math.ceil(s / c) for s, c in zip(ds.shape, ds.chunks, strict=False))
        if any(s % c for s, c in zip(ds.shape, ds.chunks, strict=False)):
            t.append("partial-edge-chunk")
        if any(c > s for s, c in zip(ds.shape, ds.chunks, strict=False)):
            t.append("chunk-larger-than-shape")
        masks: list[int] = []
        ds.id.chunk_iter(lambda info: masks.append(info.filter_mask))
        if len(masks) < grid:
            t.append("unallocated-chunks")
        if any(masks):
            t.append("chunk-filter-mask")
    if dcpl.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED:
        t.append("user-fill-value")
    attrs = ds.attrs
    with contextlib.suppress(Exception):
        if "_FillValue" in attrs:
            t.append("_FillValue-attr")
    with contextlib.suppress(Exception):
        if native_attribute_names(ds):
            t.append("attributes")
    if _is_dimension_only(ds):
        t.append("netcdf-dimension-only")
    with contextlib.suppress(Exception):
        cls = attrs.get("CLASS")
        if cls in (b"DIMENSION_SCALE", "DIMENSION_SCALE"):
            t.append("dimension-scale")
        elif ds.shape and "DIMENSION_LIST" not in attrs:
            t.append("no-dimension-scales")
    with contextlib.suppress(Exception):
        t.extend(_dtype_traits(ds))
    return t


def hdf5_traits(path: str) -> dict[str, Any]:
    """Traits of the file and of every dataset (keyed by its first path)."""
    import h5py

    out: dict[str, Any] = {"file": [], "arrays": {}, "fill": {}}
    with open(path, "rb") as raw:
        head = raw.read(4096)
    offset = head.find(HDF5_SIGNATURE)
    if offset > 0:
        out["file"].append("userblock")
    if offset >= 0 and len(head) > offset + 8:
        out["file"].append(f"superblock-v{head[offset + 8]}")
    try:
        f = h5py.File(path, "r")
    except Exception as error:
        out["file"].append("native-open-fails")
        out["native_error"] = error_line(error)
        return out
    with f:
        if "_NCProperties" in f.attrs:
            out["file"].append("netcdf4")
        datasets, broken = native_datasets(f)
        for reason in broken.values():
            if reason.startswith("external link"):
                out["file"].append("external-link")
            elif reason.startswith("dangling"):
                out["file"].append("dangling-link")
        groups: list[str] = []
        f.visit(lambda name: groups.append(name) if isinstance(f.get(name), h5py.Group) else None)
        if groups:
            out["file"].append("groups")
        for dataset in datasets:
            if len(dataset.aliases) > 1:
                out["file"].append("soft-or-hard-link-alias")
            if dataset.error:
                out["arrays"][dataset.path] = ["dataset-native-open-fails"]
                continue
            ds = f[dataset.path]
            try:
                out["arrays"][dataset.path] = _dataset_traits(ds)
            except Exception as error:
                out["arrays"][dataset.path] = [f"traits-error:{type(error).__name__}"]
            with contextlib.suppress(Exception):
                out["fill"][dataset.path] = {
                    "header": _jsonable(ds.fillvalue),
                    "attr": _jsonable(ds.attrs["_FillValue"]) if "_FillValue" in ds.attrs else None,
                }
        out["file"] = sorted(set(out["file"]))
    return out


def _jsonable(value: Any) -> Any:
    """A JSON-friendly form of a scalar fill value (NaN and infinities as strings)."""
    value = np.asarray(value)
    if value.size != 1:
        return repr(value.tolist())
    item = value.reshape(()).item()
    if isinstance(item, float) and not math.isfinite(item):
        return str(item)
    if isinstance(item, bytes):
        return item.decode("utf-8", "replace")
    if isinstance(item, int | float | str | bool):
        return item
    return repr(item)


# -- entry points ---------------------------------------------------------------------------


def run_check(tool_name: str, path: str, rel: str) -> dict[str, Any]:
    """One (tool, file) check; never raises."""
    kind = file_kind(path)
    result = Result(tool_name, rel, kind)
    if tool_name == "native":
        try:
            result.traits = native_traits(path, kind)
            result.outcome = "ok"
        except Exception as error:
            result.outcome, result.error = "error", error_line(error)
        return result.as_dict()
    tool = TOOLS[tool_name]
    if kind not in tool.kinds:
        result.outcome = NOT_APPLICABLE
        return result.as_dict()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            root = tool.parse(path, kind)
        except Exception as error:
            result.parse_seconds = time.perf_counter() - start
            result.outcome, result.stage, result.error = PARSE_ERROR, "parse", error_line(error)
            result.warnings = _warning_lines(caught)
            result.notes.append(_origin(error))
            return result.as_dict()
        result.parse_seconds = time.perf_counter() - start
        parse_warnings = _warning_lines(caught)
        start = time.perf_counter()
        try:
            if kind == "tiff":
                check_tiff(tool, path, root, result)
            else:
                check_hdf5(tool, path, root, result, parse_warnings)
        except Exception as error:
            result.outcome, result.stage, result.error = READ_ERROR, "walk", error_line(error)
        result.read_seconds = time.perf_counter() - start
        result.warnings = _warning_lines(caught)
    if not result.outcome:
        result.outcome = file_outcome(result.arrays)
    return result.as_dict()


def _origin(error: BaseException) -> str:
    """Where an exception was raised (last frame outside this module)."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if Path(frame.filename).resolve() != Path(__file__).resolve():
            return f"raised at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"
    return ""


def _constant_manifest_store_str() -> None:
    """Make ``str(ManifestStore)`` constant-time.

    zarr formats the store's string on every array open and ManifestStore's ``__str__``
    renders every array of the hierarchy, so opening all arrays of a file with 1,000 of
    them is quadratic (minutes). Only the string changes; what is read does not.
    """
    with contextlib.suppress(ImportError):
        from virtualizarr.manifests import ManifestStore

        ManifestStore.__str__ = lambda self: f"ManifestStore(<{id(self):#x}>)"  # type: ignore[method-assign]


def set_up(tool_name: str, log_path: str | None) -> None:
    """Prepare a worker process for ``tool_name``'s checks (once per process; a process
    serves one tool): its output goes to ``log_path`` (else nowhere)."""
    fd = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import virtualizarr_fill  # noqa: F401  (codec entry points, rectilinear grids)

    if tool_name != "native":
        TOOLS[tool_name].setup()
    _constant_manifest_store_str()
