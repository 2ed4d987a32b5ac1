"""Fuzz verdicts, computed in a separate process so that a crash or hang costs one case.

A verdict parses one file with the project's parser (:class:`TIFFParser` or
:class:`HDF5Parser`), reads every array back through Zarr and compares it with the native
reader (tifffile, h5py) reading the same bytes:

* ``ok-exact``: parsed, and every array reads back exactly what the native reader returns;
* ``refused``: the parser raised a project error (a ``VirtualizarrFillError``);
* ``native-also-fails``: parsed, but the native reader cannot read some array either
  (``detail`` says whether our read failed too: then the parse should rather have
  refused);
* ``too-large-to-compare``: parsed; an array is too large to read in a test;
* ``BUG: ...``: wrong values, a read-time error where the native reader succeeds, a
  non-project exception, a crash, a timeout, or a peak RSS over the limit.

Usage::

    python -m conformance.fuzz.worker FILE [--kind tiff|hdf5] [--options JSON]   # one verdict
    python -m conformance.fuzz.worker --serve     # one verdict per JSON request line on stdin

The process limits its address space (``--headroom-mb`` above what the imports use) so
that a header claiming 10**12 elements cannot take the machine's memory with it; the
peak RSS goes into each verdict. :class:`FuzzWorker` drives a serving process from tests
and from ``conformance/fuzz_long.py``; :func:`run_once` runs one verdict in a fresh process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import select
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]

OK = "ok-exact"
REFUSED = "refused"
NATIVE_FAILS = "native-also-fails"
TOO_LARGE = "too-large-to-compare"
#: Values differ from tifffile's (or tifffile fails) on a header where the TIFF parser
#: documents that it follows GDAL -- a zero segment offset or byte count (GDAL's sparse
#: blocks, libtiff's estimate for an image's only strip), a Predictor with a compression
#: whose libtiff codec ignores it -- and they equal what rasterio reads.
GDAL_CONVENTION = "gdal-convention"
#: Our read fails, naming the size mismatch, where the mutation changed only compressed
#: segment bytes: the data no longer decodes to its rows. No parse can see that without
#: decoding every segment; tifffile cuts or pads the output and returns values that are
#: no longer the file's. A failing read is the right answer there, not a silent value.
CORRUPT_DATA = "corrupt-data"
BUG_WRONG = "BUG: wrong values"
BUG_READ = "BUG: read-time error"
BUG_EXCEPTION = "BUG: non-project exception"
BUG_CRASH = "BUG: crash"
BUG_TIMEOUT = "BUG: timeout"
BUG_MEMORY = "BUG: memory"
HARNESS_ERROR = "harness-error"  # the verdict code itself failed: not a finding
#: The stage in which h5py (the native reader), not the project, runs: libhdf5 itself
#: crashes or hangs on some headers the parser refuses or reads around. The parse is
#: over by then, so such a verdict is the native reader's failure, not a crash of ours.
NATIVE_STAGE = "native"
OUTCOMES = (
    OK,
    REFUSED,
    NATIVE_FAILS,
    TOO_LARGE,
    GDAL_CONVENTION,
    CORRUPT_DATA,
    BUG_WRONG,
    BUG_READ,
    BUG_EXCEPTION,
    BUG_CRASH,
    BUG_TIMEOUT,
    BUG_MEMORY,
    HARNESS_ERROR,
)
# Per-array outcomes, worst first: a file takes the worst of its arrays.
_ARRAY_ORDER = (BUG_WRONG, BUG_READ, NATIVE_FAILS, GDAL_CONVENTION, TOO_LARGE, OK)

MAX_COMPARE_BYTES = 256 * 2**20
MAX_COMPARE_CHUNKS = 20_000  # reading is ~1 ms per chunk through the manifest store
DEFAULT_RSS_LIMIT_MB = 500
NC4_NON_COORD = "_nc4_non_coord_"


# -- the verdict (inside the worker process) ------------------------------------------------


def _error_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:400] if text else ''}".rstrip(": ")


def _where(error: BaseException) -> str:
    """The innermost frame in this project (else the innermost frame): file:line function."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "virtualizarr_fill" in f.filename]
    if not frames:
        return ""
    frame = (ours or frames)[-1]
    name = frame.filename
    if "site-packages/" in name:
        name = name.split("site-packages/", 1)[1]
    elif str(REPO_ROOT) in name:
        name = name.split(str(REPO_ROOT) + "/", 1)[1]
    return f"{name}:{frame.lineno} {frame.name}"


def _emit(stream: Any, message: dict[str, Any]) -> None:
    # skipkeys: a corrupt file can make bytes attribute names appear in error details.
    stream.write(json.dumps(message, default=str, skipkeys=True) + "\n")
    stream.flush()


def _rss_mb() -> float:
    """Peak resident memory of this process, in MB.

    Linux carries ``ru_maxrss`` across exec: a worker started by a large pytest process
    would report the parent's peak as its own (and be restarted after every case once
    pytest passed the limit). ``VmHWM`` belongs to this process's own address space.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _parser(kind: str, options: dict[str, Any]) -> Any:
    if kind == "tiff":
        from virtualizarr_fill.tiff import TIFFParser

        return TIFFParser(**options)
    from virtualizarr_fill.hdf5 import HDF5Parser

    return HDF5Parser(**options)


def _guess_kind(path: str) -> str:
    from conformance.fuzz.mutations import TIFF_SUFFIXES, file_kind

    kind = file_kind(path)
    if kind in ("tiff", "hdf5"):
        return kind
    return "tiff" if path.lower().endswith(TIFF_SUFFIXES) else "hdf5"


@contextlib.contextmanager
def _quiet() -> Iterator[list[warnings.WarningMessage]]:
    """Silence library warnings and tifffile's logging (verdicts are the output); the
    warnings raised inside are recorded in the list yielded."""
    logger = logging.getLogger("tifffile")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
    finally:
        logger.setLevel(level)


def _warning_texts(caught: list[warnings.WarningMessage]) -> list[str]:
    """The distinct warnings of a parse, as ``Category: message`` (at most 20)."""
    texts = [f"{item.category.__name__}: {item.message}" for item in caught]
    return list(dict.fromkeys(texts))[:20]


def verdict(
    path: str,
    kind: str | None = None,
    options: dict[str, Any] | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Parse ``path``, read every array back and compare with the native reader."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    from virtualizarr_fill.errors import VirtualizarrFillError

    kind = kind or _guess_kind(path)
    started = time.perf_counter()
    result: dict[str, Any] = {"kind": kind, "stage": "parse"}
    if progress is not None:
        _emit(progress, {"stage": "parse"})
    url = "file://" + str(Path(path).resolve())
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    caught: list[warnings.WarningMessage] = []
    try:
        with _quiet() as caught:
            store = _parser(kind, dict(options or {}))(url, registry)
        result["rss_parse_mb"] = round(_rss_mb(), 1)
    except VirtualizarrFillError as error:
        result.update(
            outcome=REFUSED,
            error_class=type(error).__name__,
            error=_error_line(error),
            names_file=Path(path).name in str(error),
        )
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise
        result.update(
            outcome=BUG_EXCEPTION,
            error_class=type(error).__name__,
            error=_error_line(error),
            where=_where(error),
        )
    else:
        result["stage"] = "read"
        if progress is not None:
            _emit(progress, {"stage": "read"})

        def note(stage: str) -> None:
            if progress is not None:
                _emit(progress, {"stage": stage})

        try:
            with _quiet():
                if kind == "tiff":
                    arrays = _compare_tiff(path, store)
                else:
                    arrays = _compare_hdf5(path, store, note)
        except Exception as error:
            arrays = [
                {
                    "name": "<store>",
                    "outcome": BUG_READ,
                    "detail": _error_line(error),
                    "where": _where(error),
                }
            ]
        result["arrays"] = arrays
        outcomes = {a["outcome"] for a in arrays}
        result["outcome"] = next((o for o in _ARRAY_ORDER if o in outcomes), OK)
        worst = [a for a in arrays if a["outcome"] == result["outcome"]]
        if worst and result["outcome"] != OK:
            result["detail"] = f"{worst[0]['name']}: {worst[0].get('detail', '')}"
    result["warnings"] = _warning_texts(caught)
    result["seconds"] = round(time.perf_counter() - started, 4)
    result["rss_mb"] = round(_rss_mb(), 1)
    return result


def _chunk_count(array: Any) -> float:
    import math

    try:
        chunks = array.chunks
    except Exception:
        return 0.0
    return float(
        math.prod(math.ceil(s / max(c, 1)) for s, c in zip(array.shape, chunks, strict=True))
    )


def _array_entry(
    name: str,
    ours: Any,
    read_native: Any,
    shape: tuple[int, ...],
    itemsize: int,
    chunks: float = 0.0,
    note: Callable[[str], None] = lambda stage: None,
) -> dict[str, Any]:
    """Compare one array read through Zarr (``ours``) with ``read_native()``."""
    entry: dict[str, Any] = {"name": name, "shape": list(shape)}
    if int(np.prod(shape, dtype=np.float64)) * itemsize > MAX_COMPARE_BYTES:
        entry.update(outcome=TOO_LARGE, detail=f"{shape} x {itemsize} bytes")
        return entry
    if chunks > MAX_COMPARE_CHUNKS:
        entry.update(outcome=TOO_LARGE, detail=f"{int(chunks)} chunks")
        return entry
    native_error = ours_error = None
    got = native = None
    note("read")
    try:
        got = np.asarray(ours[...])
    except Exception as error:
        ours_error = error
    note(NATIVE_STAGE)
    try:
        native = read_native()
    except Exception as error:
        native_error = error
    if native_error is not None:
        what = "ours fails too" if ours_error is not None else "ours reads"
        entry.update(outcome=NATIVE_FAILS, detail=f"native: {_error_line(native_error)}; {what}")
        if ours_error is not None:
            entry["ours"] = _error_line(ours_error)
        return entry
    if ours_error is not None:
        entry.update(outcome=BUG_READ, detail=_error_line(ours_error), where=_where(ours_error))
        return entry
    assert native is not None and got is not None
    same, detail = compare_values(native, got)
    entry.update(outcome=OK if same else BUG_WRONG, detail=detail)
    return entry


# TIFF: band_data of every group carrying the IFD it came from.


def tifffile_image(path: str, ifd: int | list[int]) -> np.ndarray:
    """tifffile's decode of one IFD (or SubIFD path), arranged as (band, y, x)."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        indices = [ifd] if isinstance(ifd, int) else list(ifd)
        page: Any = tif.pages[indices[0]]
        for sub in indices[1:]:
            page = page.pages[sub]
        data = page.asarray()
        separate = page.shaped[0]
        data = data.reshape(page.shaped)
        if data.dtype == np.bool_:
            data = data.astype(np.uint8)
        return data[:, 0, :, :, 0] if separate > 1 else np.moveaxis(data[0, 0], -1, 0)


def tifffile_stack(path: str, count: int) -> np.ndarray:
    """tifffile's decode of the first ``count`` full-resolution pages (neither overviews
    nor masks), stacked as (page, band, y, x): what ``layout="pages"`` stacks. Pages
    are taken by index, never by iterating the chain, which may loop."""
    import tifffile

    stacked: list[np.ndarray] = []
    with tifffile.TiffFile(path) as tif:
        index = 0
        while len(stacked) < count:
            page: Any = tif.pages[index]
            if not (page.is_reduced or page.is_mask):
                stacked.append(tifffile_image(path, index))
            index += 1
    return np.stack(stacked)


def _groups(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    yield prefix, group
    for name, child in sorted(group.groups(), key=lambda item: item[0]):
        yield from _groups(child, f"{prefix}{name}/")


def _compare_tiff(path: str, store: Any) -> list[dict[str, Any]]:
    import zarr

    root = zarr.open_group(store, mode="r", zarr_format=3)
    entries = []
    for prefix, group in _groups(root):
        arrays = dict(group.arrays())
        if "band_data" not in arrays or "tiff_ifd" not in group.attrs:
            continue
        array = arrays["band_data"]
        ifd = group.attrs["tiff_ifd"]
        read_native = (
            (lambda count=array.shape[0]: tifffile_stack(path, count))
            if array.ndim == 4  # layout="pages"
            else (lambda ifd=ifd: tifffile_image(path, ifd))
        )
        entry = _array_entry(
            f"{prefix}band_data",
            array,
            read_native,
            tuple(array.shape),
            array.dtype.itemsize,
            _chunk_count(array),
        )
        if _differs_from_tifffile(entry) and _follows_gdal(path, ifd, array):
            entry["outcome"] = GDAL_CONVENTION
        entries.append(entry)
    return entries


def _differs_from_tifffile(entry: dict[str, Any]) -> bool:
    """Wrong values against tifffile, or tifffile failing where our read succeeds."""
    return entry["outcome"] == BUG_WRONG or (
        entry["outcome"] == NATIVE_FAILS and "ours reads" in str(entry.get("detail", ""))
    )


def _follows_gdal(path: str, ifd: int | list[int], array: Any) -> bool:
    """Whether the IFD has a header on which the parser follows GDAL rather than tifffile
    (see :data:`GDAL_CONVENTION`), and our values equal rasterio's."""
    import tifffile

    from virtualizarr_fill.tiff.codecs_map import PREDICTOR_COMPRESSIONS

    if not isinstance(ifd, int) or array.ndim != 3:
        return False  # rasterio opens main-chain IFDs only
    with tifffile.TiffFile(path) as tif:
        page: Any = tif.pages[ifd]
        zero = any(
            int(o) == 0 or int(n) == 0
            for o, n in zip(page.dataoffsets, page.databytecounts, strict=False)
        )
        ignored_predictor = (
            int(page.predictor) != 1 and int(page.compression) not in PREDICTOR_COMPRESSIONS
        )
    if not zero and not ignored_predictor:
        return False
    try:
        import rasterio

        name = path if ifd == 0 else f"GTIFF_DIR:{ifd + 1}:{path}"
        with warnings.catch_warnings(), rasterio.open(name) as src:
            warnings.simplefilter("ignore")
            gdal = np.asarray(src.read())
        ours = np.asarray(array[...])
    except Exception:
        return False
    same, _ = compare_values(gdal, ours)
    return bool(same)


# HDF5: every array, against the h5py dataset of the same path.


def _h5_dataset(f: Any, path: str) -> Any:
    """The h5py dataset an array path names (None when there is none); raises when
    h5py cannot open the object.

    netCDF-4 stores a variable whose name is also a dimension it does not index as
    ``_nc4_non_coord_<name>``, next to a dataset ``<name>`` that is only the dimension
    scale: the prefixed dataset is the variable when both exist (as in h5netcdf).
    """
    import h5py

    parent, _, name = path.rpartition("/")
    prefixed = f"{parent}/{NC4_NON_COORD}{name}" if parent else NC4_NON_COORD + name
    for candidate in (prefixed, path):
        if f.get("/" + candidate, getlink=True) is None:
            continue
        obj = f["/" + candidate]
        if isinstance(obj, h5py.Dataset):
            return obj
    return None


@contextlib.contextmanager
def _h5_open(path: str) -> Iterator[Any]:
    """h5py on a Python file object, as the parser opens files: libhdf5 then skips its
    file-locking and "already open for write" checks, which are about the writer, not
    the bytes."""
    import h5py

    with open(path, "rb") as raw, h5py.File(raw, "r") as f:
        yield f


class _Part:
    """The part of an array the HDF5 dataset holds: a netCDF variable along an unlimited
    dimension may be longer than its dataset (the rest reads as fill)."""

    def __init__(self, array: Any, region: Any) -> None:
        self.array, self.region = array, region

    def __getitem__(self, key: Any) -> np.ndarray:
        return np.asarray(self.array[self.region])


def _raiser(error: Exception) -> Any:
    def fail() -> np.ndarray:
        raise error

    return fail


def _compare_hdf5(
    path: str, store: Any, note: Callable[[str], None] = lambda stage: None
) -> list[dict[str, Any]]:
    """Compare every array of ``store`` with h5py's read of ``path``; ``note`` is told
    each time h5py takes over (:data:`NATIVE_STAGE`) and hands back ("read")."""
    import h5py
    import zarr

    root = zarr.open_group(store, mode="r", zarr_format=3)
    entries = []
    with contextlib.ExitStack() as stack:
        note(NATIVE_STAGE)
        try:
            f = stack.enter_context(_h5_open(path))
        except Exception as error:
            f, open_error = None, error
        for prefix, group in _groups(root):
            for name, array in sorted(group.arrays(), key=lambda item: item[0]):
                full = prefix + name
                shape = tuple(array.shape)
                region: Any = Ellipsis
                if f is None:
                    read_native = _raiser(open_error)
                else:
                    note(NATIVE_STAGE)
                    try:
                        dataset = _h5_dataset(f, full)
                    except Exception as error:
                        read_native = _raiser(error)
                    else:
                        if dataset is None or h5py.check_dtype(ref=dataset.dtype) is not None:
                            continue  # no native counterpart, or object references
                        if dataset.shape is not None and tuple(dataset.shape) != shape:
                            region = tuple(slice(0, n) for n in dataset.shape)
                        read_native = lambda dataset=dataset: np.asarray(dataset[()])  # noqa: E731
                entries.append(
                    _array_entry(
                        full,
                        _Part(array, region),
                        read_native,
                        shape,
                        array.dtype.itemsize,
                        _chunk_count(array),
                        note,
                    )
                )
    return entries


def _as_text(value: Any) -> Any:
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "surrogateescape")
    return value if not isinstance(value, np.str_) else str(value)


def compare_values(native: np.ndarray, got: np.ndarray) -> tuple[bool, str]:
    """(equal, detail): shapes, then bytes for numbers (NaN payloads included), text as
    text, records field by field."""
    if native.shape != got.shape:
        return False, f"shape {got.shape} vs native {native.shape}"
    nd, gd = native.dtype, got.dtype
    if nd.names or gd.names:
        if not (nd.names and gd.names) or set(nd.names) != set(gd.names):
            return False, f"dtype {gd} vs native {nd}"
        for name in nd.names:
            same, detail = compare_values(native[name], got[name])
            if not same:
                return False, f"field {name!r}: {detail}"
        return True, ""
    if nd.kind in "OSUT" or gd.kind in "OSUT":
        text = np.frompyfunc(_as_text, 1, 1)
        a = text(native.astype(object)) if native.size else native
        b = text(got.astype(object)) if got.size else got
        differs = np.asarray(a != b, dtype=bool)
        if differs.any():
            index = tuple(int(i) for i in np.argwhere(differs)[0])
            return False, f"at {list(index)}: native {a[index]!r} vs ours {b[index]!r}"
        return True, ""
    compatible = nd.newbyteorder("=") == gd.newbyteorder("=") or (
        nd.itemsize == gd.itemsize == 1 and {nd.kind, gd.kind} <= {"b", "i", "u"}
    )
    if not compatible:
        return False, f"dtype {gd} vs native {nd}"
    a = np.ascontiguousarray(native, dtype=nd.newbyteorder("="))
    b = np.ascontiguousarray(got, dtype=gd.newbyteorder("="))
    if a.tobytes() == b.tobytes():
        return True, ""
    differs = (
        a.view(np.uint8).reshape((*a.shape, -1)) != b.view(np.uint8).reshape((*b.shape, -1))
    ).any(axis=-1)
    index = tuple(int(i) for i in np.argwhere(differs)[0])
    return False, (
        f"{int(differs.sum())} of {a.size} elements differ; first at {list(index)}: "
        f"native {a[index]!r} vs ours {b[index]!r}"
    )


def acceptable(result: dict[str, Any]) -> bool:
    """Whether a verdict meets the bar: exact values, or a project error naming the file
    at parse time (or an array too large to compare, or one the native reader cannot
    read either, which the long run reports separately)."""
    outcome = result.get("outcome")
    if outcome == REFUSED:
        return bool(result.get("names_file"))
    return outcome in (OK, TOO_LARGE, NATIVE_FAILS, GDAL_CONVENTION, CORRUPT_DATA)


#: How a chunk's decoded size mismatch reads in zarr's and this package's errors.
_SIZE_MISMATCH = (
    "cannot reshape array of size",
    "decodes to",
    "ChunkSizeMismatchError",
    # zarr's bytes codec viewing a decoded chunk whose length is not whole elements
    "its size must be a divisor of the total size in bytes",
)


def reclassify_corrupt_data(
    result: dict[str, Any], original: str, ops: list[dict[str, Any]], kind: str
) -> dict[str, Any]:
    """``result`` as :data:`CORRUPT_DATA` when it is a read-time size mismatch and every
    byte the mutation changed lies in a compressed segment of the first TIFF image, or
    in a stored chunk of a filtered HDF5 dataset, of ``original`` (the unmutated file);
    unchanged otherwise."""
    if result.get("outcome") != BUG_READ or not ops:
        return result
    arrays = result.get("arrays") or []
    failing = [a for a in arrays if a.get("outcome") == BUG_READ]
    if not failing or not all(
        any(text in str(a.get("detail", "")) for text in _SIZE_MISMATCH) for a in failing
    ):
        return result
    try:
        segments = _compressed_ranges(original, kind)
    except Exception:
        return result
    for op in ops:
        if op.get("op") != "flip":
            return result
        position = int(op["pos"])
        if not any(start <= position < start + length for start, length in segments):
            return result
    return {**result, "outcome": CORRUPT_DATA, "was": BUG_READ}


def _compressed_ranges(original: str, kind: str) -> list[tuple[int, int]]:
    """(start, length) of the compressed data of ``original``: the segments of its first
    TIFF image, or the stored chunks of its HDF5 datasets that have filters."""
    if kind == "tiff":
        from conformance.fuzz.mutations import tiff_structure

        return list(tiff_structure(original).segments)
    if kind != "hdf5":
        return []
    import h5py

    ranges: list[tuple[int, int]] = []

    def visit(_: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset) or not obj.chunks:
            return
        if obj.id.get_create_plist().get_nfilters():
            obj.id.chunk_iter(lambda info: ranges.append((int(info.byte_offset), int(info.size))))

    with _h5_open(original) as f:
        f.visititems(visit)
    return ranges


# -- the worker process -------------------------------------------------------------------


def _limit_address_space(headroom_mb: int) -> None:
    """Cap the address space at what is mapped now plus ``headroom_mb``."""
    with contextlib.suppress(OSError, ValueError):
        status = Path(f"/proc/{os.getpid()}/status").read_text()
        vm_kb = int(
            next(line for line in status.splitlines() if line.startswith("VmSize:")).split()[1]
        )
        limit = (vm_kb * 1024) + headroom_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _warm_up() -> None:
    """Import what verdicts use, so that timing and memory limits see only the case."""
    import h5py  # noqa: F401
    import tifffile  # noqa: F401
    import zarr  # noqa: F401

    import virtualizarr_fill  # noqa: F401
    from virtualizarr_fill.hdf5 import HDF5Parser  # noqa: F401
    from virtualizarr_fill.tiff import TIFFParser  # noqa: F401


def _serve(headroom_mb: int) -> int:
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    _warm_up()
    _limit_address_space(headroom_mb)
    _emit(protocol, {"ready": True, "rss_mb": round(_rss_mb(), 1)})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        before = round(_rss_mb(), 1)
        try:
            result = verdict(
                request["path"], request.get("kind"), request.get("options"), progress=protocol
            )
        except Exception as error:
            result = {
                "outcome": HARNESS_ERROR,
                "error": _error_line(error),
                "where": _where(error),
                "rss_mb": round(_rss_mb(), 1),
            }
        result["rss_before_mb"] = before
        _emit(protocol, result)
    return 0


def main(argv: list[str]) -> int:
    import argparse
    import faulthandler

    faulthandler.enable()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--kind", choices=("tiff", "hdf5"))
    parser.add_argument("--options", default="{}", help="parser keyword arguments (JSON)")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--headroom-mb", type=int, default=3072)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.headroom_mb)
    if not args.file:
        parser.error("FILE or --serve is required")
    _warm_up()
    _limit_address_space(args.headroom_mb)
    print(json.dumps(verdict(args.file, args.kind, json.loads(args.options)), default=str))
    return 0


# -- driving workers (inside tests and the long run) -------------------------------------------


def _worker_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "conformance.fuzz.worker", *extra]


def _signal_name(returncode: int) -> str:
    import signal

    if returncode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-returncode).name
    return f"exit status {returncode}"


def run_once(
    path: str,
    kind: str | None = None,
    *,
    options: dict[str, Any] | None = None,
    timeout: float = 60.0,
    rss_limit_mb: float = DEFAULT_RSS_LIMIT_MB,
) -> dict[str, Any]:
    """One verdict in a fresh process (``subprocess.run``): crash, timeout and peak RSS
    of exactly this case are observed."""
    command = _worker_command(path, "--options", json.dumps(options or {}))
    if kind:
        command += ["--kind", kind]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, check=False
        )
    except subprocess.TimeoutExpired:
        return {"outcome": BUG_TIMEOUT, "detail": f"no verdict within {timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {
            "outcome": BUG_CRASH,
            "detail": _signal_name(done.returncode),
            "stderr": done.stderr[-3000:],
        }
    result: dict[str, Any] = json.loads(lines[-1])
    parse_peak = result.get("rss_parse_mb", 0)
    if parse_peak > rss_limit_mb and not result["outcome"].startswith("BUG"):
        result["detail"] = (
            f"peak RSS while parsing {parse_peak} MB > {rss_limit_mb} MB; was {result['outcome']}"
        )
        result["outcome"] = BUG_MEMORY
    return result


class FuzzWorker:
    """A serving worker process: one verdict per :meth:`check`, restarted after a crash,
    a timeout or a case that pushed its peak RSS over ``rss_limit_mb``."""

    def __init__(
        self,
        *,
        rss_limit_mb: float = DEFAULT_RSS_LIMIT_MB,
        headroom_mb: int = 3072,
        startup_timeout: float = 120.0,
    ) -> None:
        self.rss_limit_mb = rss_limit_mb
        self.headroom_mb = headroom_mb
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._log: Any = None
        self.restarts = 0

    def __enter__(self) -> FuzzWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        # Kept open for the worker's lifetime (its stderr); closed in _kill.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            _worker_command("--serve", "--headroom-mb", str(self.headroom_mb)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=REPO_ROOT,
        )
        self._buffer = b""
        ready = self._message(time.monotonic() + self.startup_timeout)
        if not ready or not ready.get("ready"):
            raise RuntimeError(f"fuzz worker did not start: {self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return str(self._log.read()[-3000:].decode("utf-8", "replace"))

    def _message(self, deadline: float) -> dict[str, Any] | None:
        """The next protocol message; None at end of stream; TimeoutError at deadline."""
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def _kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        if self._log is not None:
            self._log.close()
        self.process, self._log = None, None

    def close(self) -> None:
        self._kill()

    def check(
        self,
        path: str,
        kind: str | None = None,
        *,
        options: dict[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """The verdict on ``path`` (crash and timeout verdicts included)."""
        if self.process is None or self.process.poll() is not None:
            if self.process is not None:
                self._kill()
            self._start()
            self.restarts += 1
        assert self.process is not None and self.process.stdin is not None
        request = {"path": str(path), "kind": kind, "options": options or {}}
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        stage = "start"
        while True:
            try:
                message = self._message(deadline)
            except TimeoutError:
                self._kill()
                if stage == NATIVE_STAGE:
                    return _native_died(f"no answer from h5py within {timeout} s")
                return {
                    "outcome": BUG_TIMEOUT,
                    "stage": stage,
                    "detail": f"no verdict within {timeout} s (stage {stage})",
                }
            if message is None:
                returncode = self.process.wait()
                tail = self._stderr_tail()
                self._kill()
                if stage == NATIVE_STAGE:
                    return _native_died(f"h5py died ({_signal_name(returncode)})", tail)
                return {
                    "outcome": BUG_CRASH,
                    "stage": stage,
                    "detail": f"worker died ({_signal_name(returncode)}) in stage {stage}",
                    "stderr": tail,
                }
            if "outcome" in message:
                break
            stage = message.get("stage", stage)
        # Memory is judged on the parse (reading back both arrays for the comparison
        # costs what the data costs); the peak belongs to this case only if it rose.
        parse_peak = message.get("rss_parse_mb", 0)
        over = parse_peak > self.rss_limit_mb and parse_peak > message.get("rss_before_mb", 0)
        if over and not message["outcome"].startswith("BUG"):
            message["detail"] = (
                f"peak RSS while parsing {parse_peak} MB > {self.rss_limit_mb} MB;"
                f" was {message['outcome']}"
            )
            message["outcome"] = BUG_MEMORY
        if message.get("rss_mb", 0) > self.rss_limit_mb:
            self._kill()  # a fresh process measures the next case's peak
        return message


def _native_died(what: str, stderr: str = "") -> dict[str, Any]:
    """The verdict when the native reader crashed or hung after the parse had finished
    (the arrays compared before it are not reported: the process is gone)."""
    return {
        "outcome": NATIVE_FAILS,
        "stage": NATIVE_STAGE,
        "detail": f"native: {what} after the parse finished; ours parsed",
        "stderr": stderr,
    }


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
