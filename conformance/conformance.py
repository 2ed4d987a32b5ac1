"""Measured conformance of virtual-reference tools on the real-file corpus.

Every tool turns every corpus file of its kind into references (virtual-tiff, kerchunk and
virtualizarr-fill for TIFF; VirtualiZarr's HDFParser, async-hdf5, kerchunk and
virtualizarr-fill for HDF5/netCDF); every array it exposes is read back through zarr and
compared bit for bit with the native reader (tifffile ``page.asarray()``, h5py
``dataset[()]``). Each (tool, file, array) is classified:

``exact``         equal to the native read, bit for bit
``wrong-values``  reads, but differs (shape, data type or values)
``read-error``    parsed, fails when values are read
``dropped``       (HDF5) a dataset h5py reads that the tool does not expose
``not-compared``  no native reference (the native reader fails, object references,
                  null dataspace, too large)
and each (tool, file) additionally as ``parse-error`` (refused when building the
references), ``timeout`` or ``crash`` (the worker process died). A file takes the worst
outcome of its arrays (wrong-values > read-error > dropped > exact).

Each (tool, file) check runs in a worker process bound to that tool, with a time limit, so
a hang or crash in a C library costs one file. ``virtualizarr-fill`` is measured when
``virtualizarr_fill``'s parsers import.

Usage::

    python conformance/conformance.py [--corpus ../shared/corpus] [--json out.json]
        [--tools virtual-tiff kerchunk ...] [--timeout 60] [--workers 2]
        [--update-docs docs/features.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# The repository root first: run as a script, this file's own folder would otherwise make
# ``conformance`` name this module rather than the package.
sys.path.insert(0, str(REPO))

from conformance import worker  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
ANCHORS = ("virtual-tiff", "virtualizarr-hdf", "async-hdf5", "kerchunk")
OURS = "virtualizarr-fill"
ALL_TOOLS = (*ANCHORS, OURS)
SKIP_NAMES = {"MANIFEST.tsv", "NOTES.md"}
FILE_OUTCOMES = (
    worker.EXACT,
    worker.WRONG,
    worker.READ_ERROR,
    worker.OTHER_DTYPE,
    worker.DROPPED,
    worker.PARSE_ERROR,
    worker.TIMEOUT,
    worker.CRASH,
    worker.NOT_COMPARED,
    worker.NO_ARRAYS,
)
ARRAY_OUTCOMES = (
    worker.EXACT,
    worker.WRONG,
    worker.READ_ERROR,
    worker.OTHER_DTYPE,
    worker.DROPPED,
    worker.NOT_COMPARED,
)
PACKAGES = (
    "virtual_tiff",
    "async_tiff",
    "virtualizarr",
    "async_hdf5",
    "kerchunk",
    "zarr",
    "numcodecs",
    "imagecodecs",
    "tifffile",
    "h5py",
    "hdf5plugin",
    "obstore",
    "fsspec",
    "xarray",
    "numpy",
    "virtualizarr_fill",
)
DOCS_BEGIN = "<!-- conformance:generated:begin -->"
DOCS_END = "<!-- conformance:generated:end -->"


# -- running checks in worker processes ---------------------------------------------------


@dataclass(frozen=True)
class Job:
    tool: str
    path: str
    rel: str
    kind: str


@dataclass(frozen=True)
class Check:
    """One tool's check of one file, as the function :func:`isolated_map` runs in its
    worker processes: the first call in a process sets the tool up (its codec
    registrations stay in that process) and sends the process's output to ``log``."""

    tool: str
    log: str | None

    def __call__(self, job: Job) -> dict[str, Any]:
        global _SET_UP
        if self.tool != _SET_UP:
            worker.set_up(self.tool, self.log)
            _SET_UP = self.tool
        return worker.run_check(self.tool, job.path, job.rel)


#: The tool the current worker process is set up for (one per process).
_SET_UP: str | None = None


def _failed(job: Job, outcome: str, error: str) -> dict[str, Any]:
    result = worker.Result(job.tool, job.rel, job.kind, outcome=outcome, error=error)
    return result.as_dict()


def _checks(
    jobs: list[Job],
    workers: int,
    timeout: float,
    log: str | None,
    memory_limit: int,
    tasks_per_worker: int | None,
) -> Iterator[tuple[Job, dict[str, Any], bool]]:
    """(job, result, whether its worker process died) for every job, the tools one after
    another, each tool's jobs in :func:`isolated_map`'s worker processes."""
    from virtualizarr_fill.io.isolation import isolated_map

    by_tool: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_tool[job.tool].append(job)
    for tool, tool_jobs in by_tool.items():
        for outcome in isolated_map(
            Check(tool, log),
            tool_jobs,
            workers=min(max(1, workers), len(tool_jobs)),
            memory_limit=memory_limit or None,
            timeout=timeout,
            tasks_per_worker=tasks_per_worker,
        ):
            job = outcome.input
            if outcome.died is not None:
                kind = worker.TIMEOUT if "time limit" in outcome.died else worker.CRASH
                yield job, _failed(job, kind, outcome.died), True
            elif outcome.error is not None:  # run_check never raises: the set-up did
                yield job, _failed(job, worker.CRASH, outcome.problem), False
            else:
                assert outcome.value is not None
                yield job, outcome.value, False


def run_jobs(
    jobs: list[Job],
    workers: int,
    timeout: float,
    log: str | None,
    memory_limit: int,
    progress: bool,
) -> list[dict[str, Any]]:
    """Run every job in worker processes (``virtualizarr_fill.io.isolation``, the loop the
    command-line tool runs its parses in: a per-check time limit, a crash or hang costing
    one check, an address-space cap of ``memory_limit`` bytes above the worker's imports);
    results in job order. A check whose worker died (a timeout or a crash, possibly caused
    by the files before it in that process) is run once more alone in a fresh process."""
    index = {id(job): i for i, job in enumerate(jobs)}
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    retry: list[Job] = []
    checks = _checks(jobs, workers, timeout, log, memory_limit, None)
    for done, (job, result, died) in enumerate(checks, start=1):
        results[index[id(job)]] = result
        if died:
            retry.append(job)
        if progress and (sys.stderr.isatty() or done % 100 == 0):
            end = "" if sys.stderr.isatty() else "\n"
            print(f"\r  {done}/{len(jobs)} checks", end=end, file=sys.stderr)
    for job, result, _ in _checks(retry, workers, timeout, log, memory_limit, 1):
        first = results[index[id(job)]]
        assert first is not None
        result["notes"].append(
            f"first attempt: {first['outcome']} ({first['error']}); retried in a fresh process"
        )
        results[index[id(job)]] = result
    if progress:
        print(file=sys.stderr)
    return [r for r in results if r is not None]


# -- corpus -------------------------------------------------------------------------------------


def corpus_files(corpus: Path) -> list[tuple[str, str, str]]:
    """(absolute path, path relative to the corpus, kind) of every file, sorted."""
    out = []
    for path in sorted(corpus.rglob("*")):
        if path.is_file() and path.name not in SKIP_NAMES:
            out.append(
                (str(path.resolve()), str(path.relative_to(corpus)), worker.file_kind(str(path)))
            )
    return out


def display_names(rels: Iterable[str]) -> dict[str, str]:
    """Short unique names: the file name, prefixed by its source when names collide."""
    rels = list(rels)
    counts = Counter(Path(r).name for r in rels)
    return {
        r: Path(r).name if counts[Path(r).name] == 1 else f"{r.split('/', 1)[0]}/{Path(r).name}"
        for r in rels
    }


# -- summaries ----------------------------------------------------------------------------------


KIND_GROUPS = {"TIFF": ("tiff",), "HDF5": ("hdf5",), "netCDF-3": ("netcdf3",)}


def tool_counts(
    results: list[dict[str, Any]], tool: str, kinds: tuple[str, ...] | None = None
) -> tuple[Counter[str], Counter[str]]:
    """(file outcomes, array outcomes) of one tool over the files it applies to."""
    files: Counter[str] = Counter()
    arrays: Counter[str] = Counter()
    for r in results:
        if r["tool"] != tool or r["outcome"] == worker.NOT_APPLICABLE:
            continue
        if kinds is not None and r["kind"] not in kinds:
            continue
        files[r["outcome"]] += 1
        for a in r["arrays"]:
            arrays[a["outcome"]] += 1
    return files, arrays


def cell(result: dict[str, Any] | None) -> str:
    """A compact per-file outcome: the file outcome plus array counts where they differ."""
    if result is None or result["outcome"] == worker.NOT_APPLICABLE:
        return ""
    retried = any(n.startswith("first attempt") for n in result.get("notes", []))
    return _cell(result) + (" (retried)" if retried else "")


def _cell(result: dict[str, Any]) -> str:
    outcome = result["outcome"]
    if outcome in (worker.PARSE_ERROR, worker.TIMEOUT, worker.CRASH):
        return outcome
    counts = Counter(a["outcome"] for a in result["arrays"])
    compared = sum(
        counts[o]
        for o in (worker.EXACT, worker.WRONG, worker.READ_ERROR, worker.OTHER_DTYPE, worker.DROPPED)
    )
    if outcome == worker.EXACT and counts[worker.NOT_COMPARED] == 0:
        return "exact" if compared <= 1 else f"exact {compared}/{compared}"
    parts = [
        f"{short}{counts[o]}"
        for o, short in (
            (worker.WRONG, "W"),
            (worker.READ_ERROR, "R"),
            (worker.OTHER_DTYPE, "T"),
            (worker.DROPPED, "D"),
            (worker.NOT_COMPARED, "n"),
        )
        if counts[o]
    ]
    return (
        f"{outcome} "
        + " ".join(parts)
        + (f" ok{counts[worker.EXACT]}" if counts[worker.EXACT] else "")
    )


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)) for row in rows]
    return "\n".join(out)


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(x) for x in row) + " |" for row in rows]
    return "\n".join(out)


# -- feature table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Feature:
    """A row of the feature table: which units (images, datasets or files) have the trait."""

    label: str
    kind: str  # "tiff" or "hdf5"
    unit: str  # "array" or "file"
    test: Callable[[list[str]], bool]
    measure: str = (
        "values"  # values | nodata | fill-attr | header-fill | attributes | xarray | refusal
    )


def has(*names: str) -> Callable[[list[str]], bool]:
    return lambda traits: any(n in traits for n in names)


def has_prefix(prefix: str) -> Callable[[list[str]], bool]:
    return lambda traits: any(t.startswith(prefix) for t in traits)


TIFF_FEATURES = [
    Feature(
        "Strips, height a multiple of RowsPerStrip",
        "tiff",
        "array",
        lambda t: "strips" in t and not any(x.startswith("last-strip") for x in t),
    ),
    Feature("Short (unpadded) last strip", "tiff", "array", has("last-strip-short")),
    Feature("Padded last strip", "tiff", "array", has("last-strip-padded")),
    Feature("Tiles, partial edge tiles", "tiff", "array", has("tile-edge")),
    Feature("Predictor 2 (horizontal differencing)", "tiff", "array", has("predictor-2")),
    Feature("Predictor 2 on floating-point samples", "tiff", "array", has("predictor-2-float")),
    Feature("Predictor 3 (floating point)", "tiff", "array", has("predictor-3")),
    Feature("Big-endian (MM) file", "tiff", "array", has("big-endian")),
    Feature("BigTIFF", "tiff", "array", has("bigtiff")),
    Feature("FillOrder=2", "tiff", "array", has("fillorder-2")),
    Feature("Sparse tiles/strips (offset or byte count 0)", "tiff", "array", has("sparse")),
    Feature("JPEG", "tiff", "array", has("jpeg")),
    Feature("JPEG with JPEGTables", "tiff", "array", has("jpeg-tables")),
    Feature("YCbCr photometric", "tiff", "array", has("ycbcr")),
    Feature("Sub-byte samples (1/2/4-bit; masks)", "tiff", "array", has("sub-byte")),
    Feature("Packed samples (12-bit, ...)", "tiff", "array", has("packed-bits")),
    Feature("int64 / uint64 samples", "tiff", "array", has("dtype:int64", "dtype:uint64")),
    Feature("float16 samples", "tiff", "array", has("dtype:float16")),
    Feature("float64 samples", "tiff", "array", has("dtype:float64")),
    Feature("Complex-integer samples (SampleFormat 5)", "tiff", "array", has("complex-int")),
    Feature("Multi-band, pixel-interleaved", "tiff", "array", has("pixel-interleaved")),
    Feature("Multi-band, planar (separate)", "tiff", "array", has("planar-separate")),
    Feature("ExtraSamples (alpha, ...)", "tiff", "array", has("extrasamples")),
    Feature("Overviews (reduced-resolution IFDs)", "tiff", "array", has("overview")),
    Feature("Masks (NewSubfileType mask)", "tiff", "array", has("mask")),
    Feature("SubIFDs", "tiff", "array", has("subifd")),
    Feature("Compression: none", "tiff", "array", has("compression:none")),
    Feature(
        "Compression: deflate / Adobe deflate",
        "tiff",
        "array",
        has("compression:adobe_deflate", "compression:deflate"),
    ),
    Feature("Compression: LZW", "tiff", "array", has("compression:lzw")),
    Feature("Compression: PackBits", "tiff", "array", has("compression:packbits")),
    Feature("Compression: ZSTD", "tiff", "array", has("compression:zstd")),
    Feature("Compression: LZMA", "tiff", "array", has("compression:lzma")),
    Feature("Compression: WebP", "tiff", "array", has("compression:webp")),
    Feature("Compression: LERC", "tiff", "array", has("compression:lerc")),
    Feature("GDAL_NODATA present (values)", "tiff", "array", has("nodata")),
    Feature(
        "GDAL_NODATA kept as fill_value or _FillValue",
        "tiff",
        "array",
        has("nodata"),
        measure="nodata",
    ),
    Feature("NaN nodata", "tiff", "array", has("nodata-nan"), measure="nodata"),
    Feature("nodata outside the data type's range", "tiff", "array", has("nodata-out-of-range")),
    Feature("GDAL SCALE/OFFSET metadata", "tiff", "array", has("gdal-scale-offset")),
]

HDF5_FEATURES = [
    Feature("Contiguous layout", "hdf5", "array", has("contiguous")),
    Feature("Contiguous, never written", "hdf5", "array", has("never-written")),
    Feature("Chunked layout", "hdf5", "array", has("chunked")),
    Feature("Compact layout", "hdf5", "array", has("compact")),
    Feature("Virtual dataset (VDS)", "hdf5", "array", has("virtual")),
    Feature("External raw storage", "hdf5", "array", has("external-storage")),
    Feature("Partial edge chunks", "hdf5", "array", has("partial-edge-chunk")),
    Feature("Chunk larger than the array", "hdf5", "array", has("chunk-larger-than-shape")),
    Feature("Unallocated chunks (read as fill)", "hdf5", "array", has("unallocated-chunks")),
    Feature("Per-chunk filter mask (filters skipped)", "hdf5", "array", has("chunk-filter-mask")),
    Feature("Filter: deflate", "hdf5", "array", has("filter:deflate")),
    Feature("Filter: shuffle", "hdf5", "array", has("filter:shuffle")),
    Feature("Filter: fletcher32", "hdf5", "array", has("filter:fletcher32")),
    Feature("Filter: lzf", "hdf5", "array", has("filter:lzf")),
    Feature("Filter: lz4", "hdf5", "array", has("filter:lz4")),
    Feature("Filter: bzip2", "hdf5", "array", has("filter:bzip2")),
    Feature("Filter: blosc", "hdf5", "array", has("filter:blosc")),
    Feature("Filter: zstd", "hdf5", "array", has("filter:zstd")),
    Feature("Filter: bitshuffle", "hdf5", "array", has("filter:bitshuffle")),
    Feature("Filter: szip", "hdf5", "array", has("filter:szip")),
    Feature("Filter: zfp", "hdf5", "array", has("filter:zfp")),
    Feature("Filter: nbit", "hdf5", "array", has("filter:nbit")),
    Feature("Filter: scaleoffset", "hdf5", "array", has("filter:scaleoffset")),
    Feature(
        "Filter: unregistered id",
        "hdf5",
        "array",
        lambda t: any(x.startswith("filter:") and x[7:].isdigit() for x in t),
    ),
    Feature("Big-endian data type", "hdf5", "array", has("big-endian")),
    Feature("64-bit integers", "hdf5", "array", has("int64")),
    Feature("float16", "hdf5", "array", has("float16")),
    Feature("bool (h5py enum)", "hdf5", "array", has("bool")),
    Feature("Enum", "hdf5", "array", has("enum")),
    Feature("Complex (compound r/i)", "hdf5", "array", has("complex")),
    Feature("Compound", "hdf5", "array", lambda t: "compound" in t and "complex" not in t),
    Feature("Fixed-length strings", "hdf5", "array", has("fixed-string")),
    Feature("Variable-length strings", "hdf5", "array", has("vlen-string")),
    Feature("Variable-length sequences", "hdf5", "array", has("vlen-sequence")),
    Feature("Opaque", "hdf5", "array", has("opaque")),
    Feature("Bitfield", "hdf5", "array", has("bitfield")),
    Feature("Array data type", "hdf5", "array", has("array-type")),
    Feature("Object references", "hdf5", "array", has("object-reference")),
    Feature("Scalar dataspace", "hdf5", "array", has("scalar")),
    Feature("Null dataspace", "hdf5", "array", has("null-dataspace")),
    Feature("Zero-size dataset", "hdf5", "array", has("zero-size")),
    Feature("User fill value (values)", "hdf5", "array", has("user-fill-value")),
    Feature(
        "User fill value kept as Zarr fill_value",
        "hdf5",
        "array",
        has("user-fill-value"),
        measure="header-fill",
    ),
    Feature(
        "_FillValue attribute kept", "hdf5", "array", has("_FillValue-attr"), measure="fill-attr"
    ),
    Feature(
        "Dataset attributes kept (all h5py reads; bookkeeping and fill attributes aside)",
        "hdf5",
        "array",
        has("attributes"),
        measure="attributes",
    ),
    Feature(
        "Datasets without dimension scales (phony dims): xarray opens the result",
        "hdf5",
        "file",
        has("no-dimension-scales"),
        measure="xarray",
    ),
    Feature(
        "netCDF-4 files: xarray opens the result", "hdf5", "file", has("netcdf4"), measure="xarray"
    ),
    Feature("Groups", "hdf5", "file", has("groups")),
    Feature("User block", "hdf5", "file", has("userblock")),
    Feature("Superblock v0/v1", "hdf5", "file", has("superblock-v0", "superblock-v1")),
    Feature("Superblock v2/v3", "hdf5", "file", has("superblock-v2", "superblock-v3")),
    Feature("Dangling soft link", "hdf5", "file", has("dangling-link")),
    Feature("External link", "hdf5", "file", has("external-link")),
    Feature("Dataset reachable by several links", "hdf5", "file", has("soft-or-hard-link-alias")),
    Feature("Dataset h5py cannot open", "hdf5", "array", has("dataset-native-open-fails")),
    Feature("File h5py cannot open", "hdf5", "file", has("native-open-fails")),
    Feature(
        "netCDF-3 file (must be refused as not HDF5)",
        "netcdf3",
        "file",
        lambda t: True,
        measure="refusal",
    ),
]


def _units(feature: Feature, native: dict[str, dict[str, Any]]) -> list[tuple[str, str | None]]:
    """(file, array label or None) of every unit that has the feature's trait."""
    units: list[tuple[str, str | None]] = []
    for rel, r in sorted(native.items()):
        if r["kind"] != feature.kind:
            continue
        traits = r.get("traits") or {}
        if feature.unit == "file":
            all_traits = list(traits.get("file", []))
            for arr in traits.get("arrays", {}).values():
                all_traits += arr
            if feature.test(all_traits):
                units.append((rel, None))
        else:
            for label, arr in sorted(traits.get("arrays", {}).items()):
                # netCDF dimensions without a variable are not arrays anyone should expose.
                if "netcdf-dimension-only" in arr:
                    continue
                if feature.test(arr):
                    units.append((rel, label))
    return units


def _same_value(a: Any, b: Any, dtype: str = "") -> bool:
    """Equal as numbers (NaN equals NaN), after rounding both to ``dtype`` when given: a
    float32 fill value holds GDAL's decimal nodata string only to float32 precision."""
    try:
        fa, fb = float(a), float(b)
        if dtype and np.dtype(dtype).kind == "f":
            fa, fb = float(np.dtype(dtype).type(fa)), float(np.dtype(dtype).type(fb))
    except (TypeError, ValueError):
        try:  # a complex fill value (recorded as its repr, "0j") against GDAL's text
            return complex(a) == complex(b)
        except (TypeError, ValueError):
            return bool(a == b)
    return fa == fb or (fa != fa and fb != fb)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _unit_outcome(
    feature: Feature, result: dict[str, Any] | None, label: str | None, native: dict[str, Any]
) -> tuple[str, str]:
    """(outcome, detail) of one unit for one tool."""
    if result is None or result["outcome"] == worker.NOT_APPLICABLE:
        return "n/a", ""
    if result["outcome"] in (worker.PARSE_ERROR, worker.TIMEOUT, worker.CRASH):
        if feature.measure == "refusal" and result["outcome"] == worker.PARSE_ERROR:
            return "refused", result["error"]
        return result["outcome"], result["error"]
    if feature.measure == "refusal":
        return "not refused", result["outcome"]
    if feature.measure == "xarray":
        x = result.get("xarray") or ""
        if not x:  # reading stopped before xarray was tried
            return result["outcome"], result["error"]
        return ("xarray ok", "") if x == "ok" else ("xarray error", x)
    if label is None:
        return result["outcome"], ""
    matches = [a for a in result["arrays"] if a["native"] == label]
    if not matches:
        return "not exposed", ""
    best = next((a for a in matches if a["outcome"] == worker.EXACT), matches[0])
    if feature.measure == "values" or best["outcome"] != worker.EXACT:
        return best["outcome"], best["detail"]
    if feature.measure == "attributes":
        missing = best.get("missing_attributes") or []
        return ("kept", "") if not missing else ("not kept", "missing: " + ", ".join(missing[:8]))
    traits = native.get("traits") or {}
    if feature.measure == "nodata":
        nodata = traits.get("nodata", {}).get(label)
        dtype = best["dtype"]
        kept = _same_value(best["fill_value"], nodata, dtype) or _same_value(
            best["fill_attr"], nodata, dtype
        )
        return (
            ("kept", "")
            if kept
            else ("not kept", f"fill_value {best['fill_value']}, _FillValue {best['fill_attr']}")
        )
    fill = traits.get("fill", {}).get(label, {})
    if feature.measure == "header-fill":
        header, fill_value = fill.get("header"), best["fill_value"]
        if isinstance(header, str) and not _is_number(header):
            # Text fill values: an empty string, NULs and no fill value all read as "".
            ok = str(fill_value or "").strip("\x00 ") == header.strip("\x00 ")
        else:
            ok = _same_value(fill_value, header)
        return (
            ("equal", "")
            if ok
            else ("differs", f"fill_value {best['fill_value']} vs header {fill.get('header')}")
        )
    ok = _same_value(best["fill_attr"], fill.get("attr"))
    return (
        ("kept", "")
        if ok
        else ("not kept", f"_FillValue {best['fill_attr']} vs native {fill.get('attr')}")
    )


GOOD = {"exact", "kept", "equal", "xarray ok", "refused"}


def feature_rows(
    tools: list[str], results: list[dict[str, Any]], names: dict[str, str]
) -> list[dict[str, Any]]:
    """Per feature and tool: outcome counts and example files, from the measurement."""
    by = {(r["tool"], r["file"]): r for r in results}
    native = {r["file"]: r for r in results if r["tool"] == "native"}
    rows = []
    for feature in TIFF_FEATURES + HDF5_FEATURES:
        units = _units(feature, native)
        row: dict[str, Any] = {
            "feature": feature.label,
            "kind": feature.kind,
            "unit": feature.unit,
            "units": len(units),
            "files": len({u[0] for u in units}),
            "tools": {},
        }
        for tool in tools:
            outcomes: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for rel, label in units:
                outcome, detail = _unit_outcome(feature, by.get((tool, rel)), label, native[rel])
                outcomes[outcome].append((names[rel], detail))
            row["tools"][tool] = {k: v for k, v in outcomes.items() if k != "n/a"}
        rows.append(row)
    return rows


def feature_cell(
    outcomes: dict[str, list[tuple[str, str]]], total: int, examples: bool = True
) -> str:
    """Outcome counts of one feature for one tool, citing the files that show each."""
    if not total:
        return ""
    if not outcomes:
        return "n/a"
    parts = []
    for outcome in sorted(outcomes, key=lambda o: (o not in GOOD, -len(outcomes[o]))):
        units = outcomes[outcome]
        if not examples:
            parts.append(f"{len(units)} {outcome}")
            continue
        if (outcome in GOOD and outcome != "refused") or not any(d for _, d in units):
            head = (
                f"**{len(units)}/{total} {outcome}**"
                if outcome in GOOD
                else f"{len(units)} {outcome}"
            )
            parts.append(f"{head} ({_examples(units)})")
            continue
        # Failures grouped by their message, each with the files that show it.
        by_reason: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for unit in units:
            by_reason[_reason_key(unit[1])].append(unit)
        reasons = sorted(by_reason.items(), key=lambda item: -len(item[1]))
        shown = [f"{len(u)} x `{_reason(u[0][1])}` ({_examples(u)})" for _, u in reasons[:3]]
        if len(reasons) > 3:
            shown.append(f"{sum(len(u) for _, u in reasons[3:])} x other reasons")
        head = (
            f"**{len(units)}/{total} {outcome}**" if outcome in GOOD else f"{len(units)} {outcome}"
        )
        parts.append(f"{head}: " + ", ".join(shown))
    return "; ".join(parts)


def _examples(units: list[tuple[str, str]]) -> str:
    files = sorted({f for f, _ in units})
    return ", ".join(files[:2]) + (", ..." if len(files) > 2 else "")


_VALUES_DIFFER = re.compile(r"\d+ of \d+ elements differ; first at \[[^\]]*\]: (.*)")


def _reason_key(detail: str) -> str:
    """Failures with the same cause share a key (differing values count as one cause)."""
    return "values differ" if _VALUES_DIFFER.match(detail) else _reason(detail)


def _reason(detail: str) -> str:
    """A failure message without file locations and volatile numbers, for grouping."""
    if match := _VALUES_DIFFER.match(detail):
        detail = f"values differ, e.g. {match.group(1)}"
    text = re.sub(r"file://\S+?\.(?:tiff?|TIF|h5|hdf5|nc)\b:?", "<file>", detail)
    text = re.sub(r"/\S+/", "", text)
    text = text.replace("|", "/").replace("`", "'")
    return text[:90] + ("…" if len(text) > 90 else "")


# -- output -------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            try:
                out[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                out[name] = "-"
    out["python"] = platform.python_version()
    return out


def render(report: dict[str, Any], markdown: bool) -> str:
    """Outcome counts per tool and kind of file: per file, then per array."""
    results = report["results"]
    table = md_table if markdown else text_table
    heading = "#### " if markdown else ""
    groups = []
    for tool in report["tools"]:
        for label, kinds in KIND_GROUPS.items():
            files, arrays = tool_counts(results, tool, kinds)
            if files:
                groups.append((f"{tool} ({label})", files, arrays))
    file_rows = [
        [name, str(sum(files.values())), *[str(files[o]) for o in FILE_OUTCOMES]]
        for name, files, _ in groups
    ]
    array_rows = [
        [name, str(sum(arrays.values())), *[str(arrays[o]) for o in ARRAY_OUTCOMES]]
        for name, _, arrays in groups
        if arrays
    ]
    return "\n\n".join(
        [
            heading + "Files (each takes the worst outcome of its arrays)",
            table(["tool (files)", "files", *FILE_OUTCOMES], file_rows),
            heading + "Arrays (TIFF images, HDF5 datasets) in the files each tool parsed",
            table(["tool (files)", "arrays", *ARRAY_OUTCOMES], array_rows),
        ]
    )


def render_matrix(report: dict[str, Any], markdown: bool) -> str:
    tools = report["tools"]
    results = report["results"]
    by = {(r["tool"], r["file"]): r for r in results}
    native = [r for r in results if r["tool"] == "native"]
    names = display_names(r["file"] for r in native)
    rows = [
        [names[r["file"]], r["kind"], *[cell(by.get((t, r["file"]))) for t in tools]]
        for r in native
    ]
    return (md_table if markdown else text_table)(["file", "kind", *tools], rows)


def render_failures(report: dict[str, Any]) -> str:
    results = report["results"]
    names = display_names(r["file"] for r in results if r["tool"] == "native")
    out = []
    for tool in report["tools"]:
        lines = []
        for r in results:
            if r["tool"] != tool or r["outcome"] in (worker.EXACT, worker.NOT_APPLICABLE):
                continue
            name = names.get(r["file"], r["file"])
            for note in r.get("notes", []):
                if note.startswith("first attempt"):
                    lines.append(f"  {'note':13} {name}: {note}")
            if r["outcome"] in (worker.PARSE_ERROR, worker.TIMEOUT, worker.CRASH):
                lines.append(f"  {r['outcome']:13} {name}: {r['error']}")
                continue
            for a in r["arrays"]:
                if a["outcome"] not in (worker.EXACT,):
                    lines.append(f"  {a['outcome']:13} {name} [{a['name']}]: {a['detail'][:200]}")
        rank = {
            o: i
            for i, o in enumerate(
                (
                    worker.WRONG,
                    worker.READ_ERROR,
                    worker.CRASH,
                    worker.TIMEOUT,
                    "note",
                    worker.OTHER_DTYPE,
                    worker.PARSE_ERROR,
                    worker.DROPPED,
                )
            )
        }
        lines.sort(key=lambda line: rank.get(line.split()[0], 99))
        out.append(f"{tool}: {len(lines)} non-exact entries\n" + "\n".join(lines))
    return "\n\n".join(out)


def _scope(row: dict[str, Any]) -> str:
    """How much of the corpus has a feature: "12 images in 5 files", "3 files"."""
    if not row["units"]:
        return "not in corpus"

    def plural(n: int, word: str) -> str:
        return f"{n} {word}" + ("" if n == 1 else "s")

    files = plural(row["files"], "file")
    if row["unit"] == "file":
        return files
    return f"{plural(row['units'], 'image' if row['kind'] == 'tiff' else 'dataset')} in {files}"


def render_features(report: dict[str, Any], markdown: bool) -> str:
    tools = report["tools"]
    rows = []
    for row in report["features"]:
        total = row["units"]
        scope = _scope(row)
        rows.append(
            [
                row["feature"],
                scope,
                *[feature_cell(row["tools"].get(t, {}), total, examples=markdown) for t in tools],
            ]
        )
    headers = ["feature", "corpus", *tools]
    return (md_table if markdown else text_table)(headers, rows)


def compact_feature_cell(outcomes: dict[str, list[tuple[str, str]]], total: int) -> str:
    """Outcome counts of one feature for one tool, without reasons or files: the good
    outcome as a bold fraction first (``**18/23** exact, 4 parse-error``)."""
    if not total:
        return ""
    if not outcomes:
        return "n/a"
    parts = []
    for outcome in sorted(outcomes, key=lambda o: (o not in GOOD, -len(outcomes[o]))):
        count = len(outcomes[outcome])
        parts.append(f"**{count}/{total}** {outcome}" if outcome in GOOD else f"{count} {outcome}")
    return ", ".join(parts)


def _features_md(report: dict[str, Any], rows: list[dict[str, Any]], cols: list[str]) -> str:
    body = []
    for row in rows:
        total = row["units"]
        scope = _scope(row)
        cells = [
            compact_feature_cell(row["tools"].get(t, {}), total)
            if t in report["tools_run"]
            else "pending"
            for t in cols
        ]
        body.append([row["feature"], scope, *cells])
    return md_table(["feature", "in the corpus", *cols], body)


def docs_section(report: dict[str, Any]) -> str:
    """The generated part of docs/features.md: counts and feature tables. The reasons of
    each failure and the outcome of every file are in the printed report and the JSON."""
    tools = report["tools"]
    fill = report["virtualizarr_fill"]
    pending = (
        ""
        if fill["measured"]
        else (
            f"\n\nThe `virtualizarr-fill` column is **pending**: its parsers did not import "
            f"when this was measured ({fill['detail']})."
        )
    )
    tiff_rows = [r for r in report["features"] if r["kind"] == "tiff"]
    hdf_rows = [r for r in report["features"] if r["kind"] != "tiff"]
    tiff_tools = [t for t in tools if t in ("virtual-tiff", "kerchunk", OURS)]
    hdf_tools = [t for t in tools if t != "virtual-tiff"]
    return "\n".join(
        [
            DOCS_BEGIN,
            f"Measured {report['date']} with `{report['command']}` "
            f"({report['seconds']:.0f} s, {report['workers']} worker processes, "
            f"{report['timeout']:.0f} s limit per tool and file).",
            "",
            "Versions: "
            + ", ".join(f"{k} {v}" for k, v in report["versions"].items())
            + "."
            + pending,
            "",
            "### Counts",
            "",
            render(sub_with_pending(report), markdown=True),
            "",
            "### TIFF features",
            "",
            _features_md(report, tiff_rows, tiff_tools),
            "",
            "### HDF5 / netCDF features",
            "",
            _features_md(report, hdf_rows, hdf_tools),
            DOCS_END,
        ]
    )


def sub_with_pending(report: dict[str, Any]) -> dict[str, Any]:
    """The report restricted to the tools that ran (a pending column has no counts)."""
    out = dict(report)
    out["tools"] = [t for t in report["tools"] if t in report["tools_run"]]
    return out


def update_docs(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    if DOCS_BEGIN in text and DOCS_END in text:
        head, rest = text.split(DOCS_BEGIN, 1)
        _, tail = rest.split(DOCS_END, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


# -- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", type=Path, help="write the full report as JSON")
    parser.add_argument("--tools", nargs="+", choices=ALL_TOOLS, default=list(ALL_TOOLS))
    parser.add_argument(
        "--files", nargs="+", help="only files whose corpus path contains one of these"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per tool and file")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--memory-limit-gb",
        type=float,
        default=6.0,
        help="address space a worker may map beyond its imports (0: no limit)",
    )
    parser.add_argument("--worker-log", help="append worker stdout/stderr here (default: discard)")
    parser.add_argument(
        "--update-docs", type=Path, help="rewrite the generated section of this Markdown file"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--from-json",
        type=Path,
        help="print (and --update-docs from) a saved report instead of running",
    )
    args = parser.parse_args(argv)

    if args.from_json:
        report: dict[str, Any] = json.loads(args.from_json.read_text())
        names = display_names(r["file"] for r in report["results"] if r["tool"] == "native")
        report["features"] = feature_rows(report["tools_run"], report["results"], names)
        print_report(report)
        if args.update_docs:
            update_docs(args.update_docs, docs_section(report))
            print(f"Updated {args.update_docs}")
        return 0

    started = time.perf_counter()
    corpus = args.corpus.resolve()
    if not corpus.is_dir():
        parser.error(f"corpus not found: {corpus}")
    files = corpus_files(corpus)
    if args.files:
        files = [f for f in files if any(s in f[1] for s in args.files)]
    tools = list(args.tools)
    fill_ok, fill_detail = worker.fill_available()
    tools_run = [t for t in tools if t != OURS or fill_ok]
    if OURS in tools and not fill_ok:
        print(f"virtualizarr-fill: skipped, parsers not importable ({fill_detail})")
    elif OURS in tools:
        print(f"virtualizarr-fill: measured (parsers from {fill_detail})")

    jobs = [Job("native", path, rel, kind) for path, rel, kind in files]
    for tool in tools_run:
        for path, rel, kind in files:
            if kind in worker.TOOLS[tool].kinds:
                jobs.append(Job(tool, path, rel, kind))
    results = run_jobs(
        jobs,
        args.workers,
        args.timeout,
        args.worker_log,
        int(args.memory_limit_gb * 2**30),
        progress=not args.quiet,
    )
    names = display_names(rel for _, rel, _ in files)

    command = "python conformance/conformance.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    report = {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "corpus": str(corpus),
        "files": len(files),
        "tools": tools,
        "tools_run": tools_run,
        "virtualizarr_fill": {"measured": fill_ok, "detail": fill_detail},
        "timeout": args.timeout,
        "workers": args.workers,
        "versions": versions(),
        "results": results,
    }
    report["features"] = feature_rows(tools_run, results, names)
    report["seconds"] = time.perf_counter() - started

    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
        print(f"\nJSON written to {args.json}")
    if args.update_docs:
        update_docs(args.update_docs, docs_section(report))
        print(f"Updated {args.update_docs}")
    return 0


def print_report(report: dict[str, Any]) -> None:
    """Counts, per-file matrix, failures and feature table, as plain text."""
    shown = sub_with_pending(report)
    print(
        f"\nConformance on {report['files']} corpus files ({report['date']}; "
        f"{report['seconds']:.0f} s)\n"
    )
    print(render(shown, markdown=False))
    print(
        "\nPer file (cells: outcome, then W wrong / R read-error / D dropped / "
        "n not compared / ok exact array counts)\n"
    )
    print(render_matrix(shown, markdown=False))
    print("\nFailures\n")
    print(render_failures(shown))
    print("\nFeatures\n")
    print(render_features(shown, markdown=False))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
