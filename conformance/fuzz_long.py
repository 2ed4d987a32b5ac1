"""The long fuzz run (outside CI): structural mutations of every corpus file.

For each TIFF and HDF5 file of the corpus, mutations from ``conformance/fuzz/mutations.py``
(bit flips, truncation at structural boundaries, swapped tag types, huge counts, offsets
past the end, dimensions of 10**12, HDF5 superblock and object-header fields with their
checksums restored) are judged by worker processes (``conformance/fuzz/worker.py``): parse
with the project's parser, read back, compare with tifffile/h5py on the same bytes. A
crash, a hang or a memory blow-up costs one case, never the run.

The header classes of ``conformance/fuzz/header_mutations.py`` (fields that are valid alone
but contradict each other: a Predictor on uncompressed data, bit depths an image codec
cannot produce, zero segment offsets and byte counts, HDF5 dimension scales of another
length than their dimension, fill-value message sizes and flags, filter counts) are mixed
in, each as likely as one structural kind; ``--classes`` picks among them
(``structural`` names the structural mix).

Prints the counts per outcome (and refusals per error class) and per mutation class,
then every distinct bug with the command that reproduces it; ``--json`` keeps all
verdicts.

    python conformance/fuzz_long.py --minutes 10 --workers 2 --seed 0
    python conformance/fuzz_long.py --minutes 12 --classes zero-segment,fill-value-message
"""

from __future__ import annotations

import argparse
import collections
import json
import queue
import random
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from conformance.fuzz.header_mutations import HEADER_KINDS, header_mutation  # noqa: E402
from conformance.fuzz.mutations import (  # noqa: E402
    HDF5_KINDS,
    TIFF_KINDS,
    Mutation,
    RandomChooser,
    file_kind,
    mutate,
)
from conformance.fuzz.worker import OUTCOMES, FuzzWorker, reclassify_corrupt_data  # noqa: E402

DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpus"
STRUCTURAL = "structural"
ALL_CLASSES = (STRUCTURAL, *HEADER_KINDS["tiff"], *HEADER_KINDS["hdf5"])


@dataclass
class Case:
    number: int
    mutation: Mutation
    kind: str
    path: Path
    timeout: float


def corpus_files(corpus: Path, pattern: str | None, max_bytes: int) -> list[tuple[str, str]]:
    """(path relative to the corpus, kind) of every TIFF and HDF5 file."""
    out = []
    for path in sorted(corpus.rglob("*")):
        if not path.is_file() or path.name in ("MANIFEST.tsv", "NOTES.md"):
            continue
        if pattern and not re.search(pattern, str(path.relative_to(corpus))):
            continue
        if path.stat().st_size > max_bytes:
            continue
        kind = file_kind(path)
        if kind in ("tiff", "hdf5"):
            out.append((str(path.relative_to(corpus)), kind))
    return out


def bug_signature(result: dict[str, Any]) -> str:
    """What makes two bug verdicts the same bug: outcome, exception and place, or the
    shape of the detail with numbers removed."""
    detail = re.sub(r"\d+", "N", str(result.get("detail", "")))[:120]
    where = result.get("where") or ""
    if not where:
        for array in result.get("arrays", ()):
            if array.get("outcome") == result["outcome"]:
                where = array.get("where", "")
                break
    return " | ".join(
        str(x)
        for x in (
            result["outcome"],
            result.get("error_class", ""),
            where,
            detail if not where else "",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--per-file", type=int, default=10**9, help="mutations per file at most")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    parser.add_argument("--files", help="regular expression on corpus paths")
    parser.add_argument("--max-bytes", type=int, default=8 * 2**20)
    parser.add_argument(
        "--max-clean-seconds",
        type=float,
        default=5.0,
        help="leave out files whose clean verdict takes longer",
    )
    parser.add_argument("--rss-limit-mb", type=float, default=500.0)
    parser.add_argument("--json", type=Path, help="write every verdict here (JSON lines)")
    parser.add_argument("--save", type=Path, help="keep the mutated file of every bug here")
    parser.add_argument(
        "--classes",
        default=",".join(ALL_CLASSES),
        help="comma-separated mutation classes: 'structural' and/or "
        + ", ".join(ALL_CLASSES[1:])
        + " (default: all)",
    )
    args = parser.parse_args(argv)
    classes = [name.strip() for name in args.classes.split(",") if name.strip()]
    unknown = sorted(set(classes) - set(ALL_CLASSES))
    if unknown or not classes:
        parser.error(f"unknown mutation classes {unknown}; choose from {', '.join(ALL_CLASSES)}")

    files = corpus_files(args.corpus, args.files, args.max_bytes)
    if not files:
        print(f"no TIFF or HDF5 files under {args.corpus}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.minutes * 60
    work: queue.Queue[Case | None] = queue.Queue(maxsize=args.workers * 4)
    results: list[tuple[Case, dict[str, Any]]] = []
    lock = threading.Lock()
    scratch = Path(tempfile.mkdtemp(prefix="fuzz_long_"))
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    log = args.json.open("w") if args.json else None

    def run_worker() -> None:
        with FuzzWorker(rss_limit_mb=args.rss_limit_mb) as worker:
            while (case := work.get()) is not None:
                result = worker.check(
                    str(case.path),
                    case.kind,
                    options=case.mutation.options,
                    timeout=case.timeout,
                )
                result = reclassify_corrupt_data(
                    result, str(args.corpus / case.mutation.file), case.mutation.ops, case.kind
                )
                with lock:
                    results.append((case, result))
                    if log is not None:
                        log.write(
                            json.dumps(
                                {
                                    "mutation": json.loads(case.mutation.to_json()),
                                    "verdict": result,
                                },
                                default=str,
                            )
                            + "\n"
                        )
                if result["outcome"].startswith("BUG") and args.save:
                    target = args.save / f"case{case.number}{case.path.suffix}"
                    target.write_bytes(case.path.read_bytes())
                case.path.unlink(missing_ok=True)

    threads = [threading.Thread(target=run_worker, daemon=True) for _ in range(args.workers)]
    for thread in threads:
        thread.start()

    # The clean files first: their verdicts tell mutation findings from conformance gaps.
    number = 0
    for name, kind in files:
        if time.monotonic() >= deadline:
            break
        path = scratch / f"clean{number}{Path(name).suffix}"
        path.write_bytes((args.corpus / name).read_bytes())
        work.put(
            Case(
                number, Mutation(name, "clean", []), kind, path, timeout=3 * args.max_clean_seconds
            )
        )
        number += 1
    # Files whose clean verdict is slow (tens of thousands of chunks to read back) would
    # eat the run: they are left out, and listed.
    while len(results) < number and time.monotonic() < deadline:
        time.sleep(0.2)
    with lock:
        slow = {
            c.mutation.file
            for c, r in results
            if c.mutation.label == "clean"
            and (r["outcome"] == "BUG: timeout" or r.get("seconds", 0) > args.max_clean_seconds)
        }
    if slow:
        print(
            f"not mutated (clean verdict slower than {args.max_clean_seconds} s): "
            + ", ".join(sorted(slow)),
            file=sys.stderr,
        )
    rng = random.Random(args.seed)
    chooser = RandomChooser(rng)
    per_file: collections.Counter[str] = collections.Counter()
    originals: dict[str, bytes] = {}
    order = [item for item in files if item[0] not in slow]
    while time.monotonic() < deadline and order:
        rng.shuffle(order)
        for name, kind in list(order):
            if time.monotonic() >= deadline:
                break
            if per_file[name] >= args.per_file:
                order.remove((name, kind))
                continue
            per_file[name] += 1
            source = args.corpus / name
            try:
                mutation = _mutation(str(source), name, kind, classes, chooser)
            except Exception as error:
                print(f"skipping {name}: cannot map its structure ({error})", file=sys.stderr)
                order.remove((name, kind))
                continue
            if mutation is None:
                continue
            data = originals.setdefault(name, source.read_bytes())
            path = scratch / f"m{number}{source.suffix}"
            path.write_bytes(mutation.apply(data))
            work.put(Case(number, mutation, kind, path, timeout=args.timeout))
            number += 1
    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join()
    if log is not None:
        log.close()
    report(results, args)
    return 0


def _mutation(
    path: str, name: str, kind: str, classes: list[str], chooser: RandomChooser
) -> Mutation | None:
    """One mutation of a class drawn from ``classes``: the structural mix weighs as many
    classes as it has kinds. None when the drawn class finds nothing to edit."""
    structural = len(TIFF_KINDS if kind == "tiff" else HDF5_KINDS)
    options = [c for c in classes if c == STRUCTURAL or c in HEADER_KINDS[kind]]
    if not options:
        return None
    weighted = [c for c in options for _ in range(structural if c == STRUCTURAL else 1)]
    chosen = chooser.choice(weighted)
    if chosen == STRUCTURAL:
        return mutate(path, name, chooser)
    return header_mutation(path, name, chooser, chosen)


def mutation_class(case: Case) -> str:
    """The class a mutation's label names (a structural kind, or a header class)."""
    return case.mutation.label.split(":", 1)[0]


def report(results: list[tuple[Case, dict[str, Any]]], args: argparse.Namespace) -> None:
    clean = {
        case.mutation.file: {**result, "kind": case.kind}
        for case, result in results
        if case.mutation.label == "clean"
    }
    mutated = [(c, r) for c, r in results if c.mutation.label != "clean"]
    files = {c.mutation.file for c, _ in mutated}
    print(f"corpus: {args.corpus}")
    print(
        f"files: {len(files)} ({sum(1 for _, r in clean.items() if r['kind'] == 'tiff')} TIFF,"
        f" {sum(1 for _, r in clean.items() if r['kind'] == 'hdf5')} HDF5); "
        f"mutations judged: {len(mutated)}"
    )
    not_clean = {name: r["outcome"] for name, r in clean.items() if r["outcome"] != "ok-exact"}
    if not_clean:
        print(f"clean files not ok-exact (their mutations inherit it): {len(not_clean)}")
        for name, outcome in sorted(not_clean.items()):
            why = clean[name].get("error", clean[name].get("detail", ""))
            print(f"  {name}: {outcome} {why[:150]}")
    for kind in ("tiff", "hdf5"):
        subset = [r for c, r in mutated if c.kind == kind]
        counts = collections.Counter(r["outcome"] for r in subset)
        print(f"\n{kind.upper()}: {len(subset)} mutations")
        for outcome in OUTCOMES:
            if counts[outcome]:
                print(f"  {outcome:28s} {counts[outcome]}")
        refused = collections.Counter(
            r.get("error_class", "?") for r in subset if r["outcome"] == "refused"
        )
        for name, count in refused.most_common():
            print(f"    refused by {name:24s} {count}")
        unnamed = sum(1 for r in subset if r["outcome"] == "refused" and not r.get("names_file"))
        if unnamed:
            print(f"    refusals whose message does not name the file: {unnamed}")
        kinds = collections.Counter(mutation_class(c) for c, r in mutated if c.kind == kind)
        print("  mutation kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        header = [k for k in HEADER_KINDS[kind] if kinds[k]]
        if header:
            print("  header classes (outcome: count):")
        for name in header:
            outcomes = collections.Counter(
                r["outcome"] for c, r in mutated if c.kind == kind and mutation_class(c) == name
            )
            line = ", ".join(f"{o} {outcomes[o]}" for o in OUTCOMES if outcomes[o])
            print(f"    {name:24s} {kinds[name]:5d}: {line}")
    bugs: dict[str, list[tuple[Case, dict[str, Any]]]] = collections.defaultdict(list)
    findings: dict[str, list[tuple[Case, dict[str, Any]]]] = collections.defaultdict(list)
    for case, result in mutated:
        if (
            clean.get(case.mutation.file, {}).get("outcome", "ok-exact") == result["outcome"]
            and (result["outcome"] != "ok-exact")
            and result["outcome"].startswith("BUG")
        ):
            continue  # the clean file already has it
        if result["outcome"].startswith("BUG"):
            bugs[bug_signature(result)].append((case, result))
        elif result["outcome"] == "native-also-fails":
            findings[bug_signature(result)].append((case, result))
    print(f"\ndistinct bugs: {len(bugs)} ({sum(len(v) for v in bugs.values())} cases)")
    for signature, cases in sorted(bugs.items(), key=lambda item: -len(item[1])):
        _print_group(signature, cases, args)
    print(
        f"\nparsed although the native reader fails too: {len(findings)} kinds "
        f"({sum(len(v) for v in findings.values())} cases)"
    )
    for signature, cases in sorted(findings.items(), key=lambda item: -len(item[1]))[:15]:
        _print_group(signature, cases, args)


def _print_group(
    signature: str, cases: list[tuple[Case, dict[str, Any]]], args: argparse.Namespace
) -> None:
    case, result = min(cases, key=lambda item: len(item[0].mutation.ops))
    print(f"\n- [{len(cases)}x] {signature}")
    print(f"  file: {case.mutation.file} ({case.kind}); mutation: {case.mutation.label}")
    print(f"  error: {result.get('error') or result.get('detail', '')}"[:400])
    if result.get("where"):
        print(f"  where: {result['where']}")
    options = f" --options '{json.dumps(case.mutation.options)}'" if case.mutation.options else ""
    print(
        f"  repro: python -m conformance.fuzz.mutations '{case.mutation.to_json()}' /tmp/case"
        f"{Path(case.mutation.file).suffix} && python -m conformance.fuzz.worker /tmp/case"
        f"{Path(case.mutation.file).suffix} --kind {case.kind}{options}"
    )
    if result.get("stderr"):
        tail = [line for line in result["stderr"].splitlines() if line.strip()][-6:]
        print("  stderr: " + "\n          ".join(tail))


if __name__ == "__main__":
    raise SystemExit(main())
