"""Side by side with the anchors: parse time, requests, bytes, combine and read speed.

One run measures virtualizarr-fill and the tools it is compared against on the same files:
virtual-tiff (TIFF), VirtualiZarr's HDFParser and async-hdf5 through its VirtualiZarr entry
point (HDF5), kerchunk (``tiff_to_zarr``, ``SingleHdf5ToZarr``), each read

* locally, through obstore's ``LocalStore`` (kerchunk: plain files), and
* from moto's S3 server on loopback, through obstore's ``S3Store`` with the endpoint and
  credentials a user would pass (kerchunk: s3fs with the same endpoint).

Files: the generated inputs of ``_inputs.py`` (a COG with overviews, a strip file,
10 netCDF-4 variables; 10,000-chunk files with a B-tree v1 and a paged
fixed array), plus the TIFF and HDF5 files of the corpus (``--corpus-limit`` per kind;
the S3 leg uses ``--s3-corpus-limit`` of them).

Measured:

* parse time: median of ``--repeat`` runs, interleaved across tools;
* requests and bytes of one parse: through ``benchmarks._counting_store.CountingStore`` locally
  (obstore-based tools; kerchunk reads plain files, so n/a), and at the S3 server for
  every tool on the S3 leg;
* correctness of each tool on each file, with ``conformance.py``'s classification (every
  array read back through zarr and compared bit for bit with tifffile/h5py, in worker
  processes), and for HDF5 every attribute h5py reads from a dataset kept on its array
  (netCDF bookkeeping and fill attributes aside: a dropped ``scale_factor`` or ``units``
  changes what xarray decodes): ratios are computed only over files where the anchor's
  output is correct in both;
* combine time: ``xr.combine_nested`` of ``--combine-n`` virtual datasets of one file,
  per tool that produces datasets;
* read speed: every array we expose read through the ManifestStore with zarr against
  tifffile ``page.asarray()`` / h5py ``ds[()]`` on the same local file.

Targets (issue 7): parse time and requests per file ahead of every anchor whose output is
correct for that file; full-array reads within 1.3x of the native reader.

Usage::

    python benchmarks/bench_anchors.py [--repeat 5] [--corpus-limit N] [--s3-corpus-limit N]
        [--no-s3] [--no-corpus] [--no-parse] [--no-read] [--no-combine] [--json out.json]
        [--verbose] [--conformance-json report.json]

Read speed alone (a few minutes): ``--no-parse --no-s3 --no-combine``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _anchors as anchors
from _anchors import OURS, BenchFile, ParseResult

from conformance import conformance
from conformance.worker import EXACT, PARSE_ERROR, correct_outcome

READ_TARGET = 1.3
COMBINE_FILES = ("cog_1000_float32_deflate.tif", "ten_vars_zlib.nc")
NOISE = 1.1  # "behind" by more than this is unlikely to be noise on a shared machine


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- running


def run_parse_leg(
    leg: Any,
    files: list[BenchFile],
    repeat: int,
    skip: set[str],
    processes: dict[str, anchors.ToolProcess],
) -> dict[str, dict[str, ParseResult]]:
    out: dict[str, dict[str, ParseResult]] = {}
    started = time.perf_counter()
    for index, file in enumerate(files, 1):
        tools = [t for t in anchors.tools_for(file.kind) if t not in skip]
        out[file.label] = anchors.measure_parse(file, leg, tools, repeat, processes)
        if index % 10 == 0 or index == len(files):
            log(f"  {leg.name}: {index}/{len(files)} files ({time.perf_counter() - started:.0f} s)")
    return out


def run_verdicts(
    files: list[BenchFile],
    parsed: dict[str, set[str]],
    saved: Path | None,
    workers: int,
    timeout: float,
) -> dict[tuple[str, str], dict[str, Any]]:
    """conformance.py's verdict of every (tool, file) that parsed in some leg."""
    verdicts: dict[tuple[str, str], dict[str, Any]] = {}
    if saved is not None:
        for r in json.loads(saved.read_text())["results"]:
            if r["tool"] != "native":
                verdicts[(r["tool"], r["file"])] = r
    jobs = [
        conformance.Job(tool, str(file.path), file.label, file.kind)
        for file in files
        for tool in sorted(parsed.get(file.label, ()))
        if (tool, file.label) not in verdicts
    ]
    if jobs:
        log(f"correctness: {len(jobs)} (tool, file) checks in {workers} worker processes")
        results = conformance.run_jobs(
            jobs, workers, timeout, None, 6 * 2**30, progress=sys.stderr.isatty()
        )
        for r in results:
            verdicts[(r["tool"], r["file"])] = r
    return verdicts


# --------------------------------------------------------------------------- summary


@dataclass
class Comparison:
    """Ours against one anchor, on one format and leg."""

    anchor: str
    kind: str
    leg: str
    files: int = 0  # files the anchor was run on
    anchor_errors: Counter[str] = field(default_factory=Counter)  # failed to parse
    anchor_not_correct: Counter[str] = field(default_factory=Counter)  # verdict counts
    time_ratios: dict[str, float] = field(default_factory=dict)  # over anchor-correct files
    request_ratios: dict[str, float] = field(default_factory=dict)
    request_pairs: dict[str, tuple[int, int]] = field(default_factory=dict)
    byte_ratios: dict[str, float] = field(default_factory=dict)
    ours_failed: list[str] = field(default_factory=list)  # anchor correct, ours raised
    ours_not_exact: list[str] = field(default_factory=list)  # anchor correct, ours not

    @property
    def correct(self) -> int:
        return len(self.time_ratios) + len(self.ours_failed)


def compare(
    leg: str,
    results: dict[str, dict[str, ParseResult]],
    files: dict[str, BenchFile],
    verdicts: dict[tuple[str, str], dict[str, Any]],
) -> list[Comparison]:
    out = []
    for kind in ("tiff", "hdf5"):
        for anchor in anchors.ANCHORS:
            if kind not in anchors.TOOLS[anchor].kinds:
                continue
            c = Comparison(anchor, kind, leg)
            for label, row in results.items():
                if files[label].kind != kind or anchor not in row:
                    continue
                c.files += 1
                theirs, ours = row[anchor], row[OURS]
                if theirs.seconds is None and theirs.flaky:
                    c.anchor_not_correct["failed in a timed run"] += 1
                    continue
                if theirs.seconds is None:
                    timeout = theirs.error.startswith(("timeout", "crash"))
                    c.anchor_errors["timed out or crashed" if timeout else "raised"] += 1
                    continue
                verdict = correct_outcome(verdicts.get((anchor, label), {})) or "not checked"
                if verdict == PARSE_ERROR:
                    verdict = "raised in the check"  # the timed parses did not
                if theirs.flaky:
                    verdict = "failed in a timed run"
                if verdict != EXACT:
                    c.anchor_not_correct[verdict] += 1
                    continue
                if ours.seconds is None:
                    c.ours_failed.append(label)
                    continue
                if correct_outcome(verdicts.get((OURS, label), {})) != EXACT:
                    c.ours_not_exact.append(label)
                c.time_ratios[label] = ours.seconds / theirs.seconds
                if ours.requests is not None and theirs.requests:
                    c.request_ratios[label] = ours.requests / theirs.requests
                    c.request_pairs[label] = (ours.requests, theirs.requests)
                if ours.nbytes is not None and theirs.nbytes:
                    c.byte_ratios[label] = ours.nbytes / theirs.nbytes
            if c.files:
                out.append(c)
    return out


def _median_max(values: dict[str, float]) -> str:
    if not values:
        return "n/a"
    v = list(values.values())
    return f"{statistics.median(v):.2f} / {max(v):.2f}"


def _requests_cell(c: Comparison, leg_counts_kerchunk: bool) -> str:
    if not c.request_pairs:
        if c.anchor == "kerchunk" and not leg_counts_kerchunk:
            return "n/a (plain file reads)"
        return "n/a"
    fewer = sum(1 for a, b in c.request_pairs.values() if a < b)
    equal = sum(1 for a, b in c.request_pairs.values() if a == b)
    more = len(c.request_pairs) - fewer - equal
    return f"{_median_max(c.request_ratios)} ({fewer} fewer, {equal} equal, {more} more)"


def parse_table(comparisons: list[Comparison]) -> str:
    rows = []
    for c in comparisons:
        ratios = list(c.time_ratios.values())
        ahead = sum(1 for r in ratios if r < 1)
        behind = len(ratios) - ahead + len(c.ours_failed)
        clearly = sum(1 for r in ratios if r > NOISE) + len(c.ours_failed)
        reasons = c.anchor_errors + c.anchor_not_correct
        correct = f"{c.correct} of {c.files}"
        if reasons:
            correct += " (" + ", ".join(f"{n} {v}" for v, n in sorted(reasons.items())) + ")"
        rows.append(
            [
                c.anchor,
                {"tiff": "TIFF", "hdf5": "HDF5"}[c.kind],
                c.leg,
                correct,
                f"{statistics.median(ratios):.2f}" if ratios else "n/a",
                f"{max(ratios):.2f}" if ratios else "n/a",
                f"{ahead} / {behind} ({clearly} by >{NOISE}x)",
                _requests_cell(c, c.leg == "S3"),
                _median_max(c.byte_ratios),
            ]
        )
    return conformance.md_table(
        [
            "anchor",
            "format",
            "leg",
            "files anchor correct",
            "time ratio ours/anchor (median)",
            "worst",
            "files ahead / behind",
            "requests ratio median / max",
            "bytes ratio median / max",
        ],
        rows,
    )


def read_table(reads: dict[str, anchors.ReadResult], files: dict[str, BenchFile]) -> str:
    rows = []
    for kind, name in (("tiff", "TIFF"), ("hdf5", "HDF5")):
        done = {
            label: r
            for label, r in reads.items()
            if files[label].kind == kind and not r.error and r.seconds
        }
        if not done:
            continue
        nbytes = sum(r.nbytes for r in done.values())
        native = sum(r.seconds["native"] for r in done.values())
        unequal = sum(1 for r in done.values() if not r.equal)
        for pipeline in anchors.PIPELINES:
            ratios = {label: r.ratio(pipeline) or 0.0 for label, r in done.items()}
            ours = sum(r.seconds[pipeline] for r in done.values())
            worst = max(ratios, key=lambda label: ratios[label])
            within = sum(1 for v in ratios.values() if v <= READ_TARGET)
            rows.append(
                [
                    name,
                    pipeline,
                    f"{len(done)}" + (f" ({unequal} not equal!)" if unequal else ""),
                    f"{nbytes / 1e6:.0f} MB",
                    f"{nbytes / 1e6 / ours:.0f} MB/s",
                    f"{nbytes / 1e6 / native:.0f} MB/s",
                    f"{ours / native:.2f}",
                    f"{statistics.median(ratios.values()):.2f}",
                    f"{ratios[worst]:.1f} ({Path(worst).name})",
                    f"{within} / {len(done)}",
                ]
            )
    return conformance.md_table(
        [
            "format",
            "zarr pipeline",
            "files",
            "data read",
            "ours (ManifestStore + zarr)",
            "native",
            "time ratio, all files",
            "per-file ratio median",
            "worst",
            f"files within {READ_TARGET}x",
        ],
        rows,
    )


def combine_table(combines: dict[str, dict[str, anchors.CombineResult]], count: int) -> str:
    rows = []
    for label, results in combines.items():
        ours = results.get(OURS)
        for name, r in results.items():
            if name == OURS:
                continue
            if r.seconds is None or ours is None or ours.seconds is None:
                failed = [(n, x.error) for n, x in ((OURS, ours), (name, r)) if x and x.error]
                cell = "; ".join(f"{n} raised {e[:80]}" for n, e in failed)
                rows.append([Path(label).name, name, str(count), "", "", cell])
                continue
            rows.append(
                [
                    Path(label).name,
                    name,
                    str(count),
                    f"{ours.seconds * 1e3:.0f} ms",
                    f"{r.seconds * 1e3:.0f} ms",
                    f"{ours.seconds / r.seconds:.2f}",
                ]
            )
    return conformance.md_table(
        ["file", "anchor", "datasets", "ours", "anchor", "ratio ours/anchor"], rows
    )


def behind_list(comparisons: list[Comparison]) -> list[str]:
    lines = []
    for c in comparisons:
        for label, ratio in sorted(c.time_ratios.items(), key=lambda kv: -kv[1]):
            if ratio > NOISE:
                lines.append(f"  {c.leg:5s} time     x{ratio:5.2f} vs {c.anchor:16s} {label}")
        for label, (a, b) in c.request_pairs.items():
            if a > b:
                lines.append(f"  {c.leg:5s} requests {a} vs {b} ({c.anchor}) {label}")
        for label in c.ours_failed:
            lines.append(f"  {c.leg:5s} ours failed, {c.anchor} correct: {label}")
        for label in c.ours_not_exact:
            lines.append(f"  {c.leg:5s} ours not exact, {c.anchor} exact: {label}")
    return lines


def verbose_detail(
    leg: str,
    results: dict[str, dict[str, ParseResult]],
    verdicts: dict[tuple[str, str], dict[str, Any]],
) -> str:
    short = {
        OURS: "ours",
        "virtual-tiff": "vtiff",
        "virtualizarr-hdf": "vz-hdf",
        "async-hdf5": "async",
        "kerchunk": "kerchunk",
    }
    lines = [f"\n== per file, {leg} (ms, requests, KiB, verdict) =="]
    for label, row in results.items():
        cells = []
        for tool, r in row.items():
            verdict = correct_outcome(verdicts.get((tool, label), {})) or "-"
            if r.seconds is None:
                cells.append(f"{short[tool]}: {r.error[:60] or 'failed in a timed run'}")
                continue
            if r.flaky:
                verdict += ", failed in a timed run"
            req = "-" if r.requests is None else str(r.requests)
            kib = "-" if r.nbytes is None else f"{r.nbytes / 1024:.0f}"
            cells.append(f"{short[tool]} {r.seconds * 1e3:.1f} {req} {kib} {verdict}")
        lines.append(f"{label[-60:]:60s} " + " | ".join(cells))
    return "\n".join(lines)


def read_detail(reads: dict[str, anchors.ReadResult]) -> str:
    lines = ["\n== read time per file (ms): native, then each zarr pipeline and its ratio =="]
    for label, r in reads.items():
        if r.error or not r.seconds:
            lines.append(f"{label[-60:]:60s} {r.error}")
            continue
        cells = [f"native {r.seconds['native'] * 1e3:8.1f}"] + [
            f"{p} {r.seconds[p] * 1e3:8.1f} x{r.ratio(p) or 0:6.2f}" for p in anchors.PIPELINES
        ]
        lines.append(
            f"{label[-60:]:60s} {r.arrays:4d} arrays {r.nbytes / 1e6:8.2f} MB  "
            + "  ".join(cells)
            + ("" if r.equal else "  NOT EQUAL")
        )
    return "\n".join(lines)


def store_count_check(results: dict[str, dict[str, ParseResult]]) -> str:
    """On S3: does CountingStore's request count equal the server's, for obstore tools?"""
    pairs = [
        (r.store_requests, r.requests)
        for row in results.values()
        for r in row.values()
        if r.store_requests is not None and r.requests is not None and r.seconds is not None
    ]
    same = sum(1 for a, b in pairs if a == b)
    return f"CountingStore's request count equals the server's for {same} of {len(pairs)} parses"


def jsonable(value: Any) -> Any:
    """``value`` with every mapping key a string (``json`` rejects tuple keys, e.g. the
    Counter that ``dataclasses.asdict`` rebuilds from a Counter's items)."""
    if isinstance(value, dict):
        return {_json_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _json_key(key: Any) -> str | int | float | bool | None:
    if key is None or isinstance(key, (str, int, float, bool)):
        return key
    if isinstance(key, tuple):
        return "|".join(str(k) for k in key)
    return str(key)


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed parses per tool and file")
    parser.add_argument("--s3-repeat", type=int, default=3)
    parser.add_argument("--read-repeat", type=int, default=3)
    parser.add_argument(
        "--read-seconds",
        type=float,
        default=0.1,
        help="native and manifest reads go on, interleaved, until each has taken this long",
    )
    parser.add_argument("--corpus-limit", type=int, help="corpus files per kind (default all)")
    parser.add_argument("--s3-corpus-limit", type=int, default=12, help="per kind, on S3")
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--no-corpus", action="store_true")
    parser.add_argument(
        "--no-parse",
        action="store_true",
        help="skip parse timing, requests and correctness checks (e.g. to measure reads alone)",
    )
    parser.add_argument("--no-read", action="store_true", help="skip the read-speed part")
    parser.add_argument("--no-combine", action="store_true")
    parser.add_argument("--combine-n", type=int, default=100)
    parser.add_argument(
        "--conformance-json",
        type=Path,
        help="take verdicts from a saved `conformance.py --json` report (same versions!)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="per correctness check")
    parser.add_argument("--parse-timeout", type=float, default=60.0, help="per timed parse")
    parser.add_argument("--workers", type=int, default=2, help="correctness worker processes")
    parser.add_argument("--workdir", type=Path, default=anchors.REPO / ".cache" / "bench-inputs")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--verbose", action="store_true", help="per-file detail")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    anchors.constant_manifest_store_str()
    # tifffile logs every tag it cannot parse (the native reads of damaged corpus files).
    logging.getLogger("tifffile").setLevel(logging.ERROR)

    files = anchors.generated_files(args.workdir.resolve())
    corpus = [] if args.no_corpus else anchors.corpus_sample(args.corpus_limit)
    files += corpus
    by_label = {f.label: f for f in files}
    s3_files = [f for f in files if f.generated]
    for kind in ("tiff", "hdf5"):
        s3_files += anchors.evenly([f for f in corpus if f.kind == kind], args.s3_corpus_limit)
    s3fs_ok, s3fs_detail = anchors.s3fs_available()
    log(f"{len(files)} files ({len(corpus)} from the corpus); {s3fs_detail}")

    count_check = ""
    legs: dict[str, dict[str, ParseResult]] = {}
    if not args.no_parse:
        with anchors.tool_processes(args.parse_timeout) as processes:
            log("parse: local")
            legs["local"] = run_parse_leg(anchors.LocalLeg(), files, args.repeat, set(), processes)
            if not args.no_s3:
                with anchors.s3_leg() as leg:
                    log(f"parse: S3 ({len(s3_files)} files; uploading)")
                    leg.upload(s3_files)
                    skip = set() if s3fs_ok else {"kerchunk"}
                    legs["S3"] = run_parse_leg(leg, s3_files, args.s3_repeat, skip, processes)
                count_check = store_count_check(legs["S3"])

    parsed: dict[str, set[str]] = {}
    for results in legs.values():
        for label, row in results.items():
            parsed.setdefault(label, set()).update(t for t, r in row.items() if not r.error)
    verdicts = run_verdicts(files, parsed, args.conformance_json, args.workers, args.timeout)

    reads: dict[str, anchors.ReadResult] = {}
    if not args.no_read:
        log("read speed")
        started_reads = time.perf_counter()
        for index, file in enumerate(files, 1):
            reads[file.label] = anchors.measure_read(file, args.read_repeat, args.read_seconds)
            if index % 20 == 0 or index == len(files):
                elapsed_reads = time.perf_counter() - started_reads
                log(f"  read: {index}/{len(files)} files ({elapsed_reads:.0f} s)")

    combines: dict[str, dict[str, anchors.CombineResult]] = {}
    if not args.no_combine:
        log("combine")
        for file in files:
            if file.generated and file.path.name in COMBINE_FILES:
                tools = [t for t in anchors.tools_for(file.kind) if t != "kerchunk"]
                combines[file.label] = anchors.measure_combine(
                    file, tools, args.combine_n, args.repeat
                )

    comparisons = []
    for name, results in legs.items():
        comparisons += compare(name, results, by_label, verdicts)
    elapsed = time.perf_counter() - started
    command = "python benchmarks/bench_anchors.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )

    if args.verbose:
        for name, results in legs.items():
            print(verbose_detail(name, results, verdicts))
        if reads:
            print(read_detail(reads))
    n_tiff = sum(1 for f in files if f.kind == "tiff")
    print(
        f"\nCommand: `{command}` ({datetime.date.today().isoformat()}, {elapsed:.0f} s; "
        f"{len(files)} files locally ({n_tiff} TIFF, {len(files) - n_tiff} HDF5), "
        f"{len(s3_files) if 'S3' in legs else 0} on S3; parse medians of {args.repeat} local / "
        f"{args.s3_repeat} S3 runs, interleaved; load average "
        f"{os.getloadavg()[0]:.1f} at the end)."
    )
    if legs:
        print(
            "\nParse time and requests per file, over the files where the anchor's output is "
            "correct (every array equal to tifffile/h5py, bit for bit); ratio < 1: ours is "
            "faster / makes fewer requests. Requests: CountingStore locally, counted at the "
            "server on S3" + (f" ({count_check})" if count_check else "") + ".\n"
        )
        print(parse_table(comparisons))
    if "S3" in legs and not s3fs_ok:
        print(f"\nkerchunk not run on S3: s3fs is not installed ({s3fs_detail}).")
    if reads:
        print(
            "\nFull-array reads of every array we expose that the native reader also reads "
            f"(same local file; medians of {args.read_repeat} rounds, native and manifest "
            f"until {args.read_seconds} s each; target ratio <= {READ_TARGET}).\n"
        )
        print(read_table(reads, by_label))
    if combines:
        print(
            f"\n`xr.combine_nested` of {args.combine_n} virtual datasets along a new dimension "
            f"(medians of {args.repeat}); kerchunk produces references, not datasets.\n"
        )
        print(combine_table(combines, args.combine_n))
    behind = behind_list(comparisons)
    slow_reads = [
        f"  read {' '.join(f'{p} x{r.ratio(p) or 0:.2f}' for p in anchors.PIPELINES)}: {label}"
        for label, r in sorted(reads.items(), key=lambda kv: -(kv[1].ratio("manifest") or 0))
        if not r.error and min(r.ratio(p) or 0 for p in anchors.PIPELINES) > READ_TARGET
    ]
    print(
        f"\nBehind a correct anchor (time by >{NOISE}x, more requests, failed or not exact): "
        f"{len(behind)}"
    )
    print("\n".join(behind))
    print(f"\nReads slower than {READ_TARGET}x native with every pipeline: {len(slow_reads)}")
    print("\n".join(slow_reads))

    if args.json:
        report = {
            "command": command,
            "date": datetime.date.today().isoformat(),
            "seconds": elapsed,
            "versions": conformance.versions(),
            "s3fs": s3fs_detail,
            "files": [{"label": f.label, "path": str(f.path), "kind": f.kind} for f in files],
            "parse": {
                leg: {label: {t: asdict(r) for t, r in row.items()} for label, row in res.items()}
                for leg, res in legs.items()
            },
            "verdicts": {f"{t}|{label}": correct_outcome(v) for (t, label), v in verdicts.items()},
            "reads": {label: asdict(r) for label, r in reads.items()},
            "combine": {
                label: {t: asdict(r) for t, r in res.items()} for label, res in combines.items()
            },
            # asdict() rebuilds a Counter from its items, so those two are converted here.
            "comparisons": [
                {
                    **asdict(c),
                    "anchor_errors": dict(c.anchor_errors),
                    "anchor_not_correct": dict(c.anchor_not_correct),
                }
                for c in comparisons
            ],
        }
        args.json.write_text(json.dumps(jsonable(report), indent=1, default=str))
        log(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
