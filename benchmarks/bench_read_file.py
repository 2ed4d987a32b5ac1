"""Full-array reads of a few files, ours (manifest pipeline) against the native reader.

``bench_anchors.py`` reads every file three times per side, after zarr's own pipelines
have read the same file, which is the right survey and a noisy single-file measure. This
reads only the files named, with many interleaved rounds of the two sides, and prints
medians and their ratio: a file's time alone, outside the survey.

    python benchmarks/bench_read_file.py --rounds 50 rasterio+rasterio/RGB.byte.tif

Files are corpus-relative paths (as ``bench_anchors.py --verbose`` names them) or paths.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _anchors as anchors  # noqa: E402


def bench_file(name: str) -> anchors.BenchFile:
    path = Path(name)
    if not path.exists():
        path = anchors.CORPUS / name
    if not path.exists():
        raise SystemExit(f"{name}: no such file here or in {anchors.CORPUS}")
    tiff = path.suffix.lower() in (".tif", ".tiff")
    return anchors.BenchFile(name, path, "tiff" if tiff else "hdf5")


def time_file(file: anchors.BenchFile, rounds: int) -> tuple[float, float]:
    """Median seconds of (ours, native) over ``rounds`` interleaved rounds, after one
    untimed read each way that checks the values are the native reader's, bit for bit."""
    import zarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = anchors.TOOLS[anchors.OURS].parse(anchors.LocalLeg(count=False).target(file))
    pairs = anchors._pairs(file, zarr.open_group(store, mode="r", zarr_format=3))
    if not pairs:
        raise SystemExit(f"{file.label}: no array both readers read")
    names, keys = [n for n, _ in pairs], [k for _, k in pairs]

    def ours() -> list[object]:
        with anchors.reading_with("manifest"):
            return list(anchors._read_ours(store, names))

    def native() -> list[object]:
        return list(anchors._read_native(file, keys))

    match = anchors.worker._match_tiff if file.kind == "tiff" else anchors.worker.compare
    for got, ref in zip(ours(), native(), strict=True):
        if match(ref, got)[0] != anchors.worker.EXACT:
            raise SystemExit(f"{file.label}: values differ from the native read")
    times: dict[str, list[float]] = {"ours": [], "native": []}
    sides = [("ours", ours), ("native", native)]
    for round_ in range(rounds):
        for side, read in sides if round_ % 2 else sides[::-1]:
            start = time.perf_counter()
            read()
            times[side].append(time.perf_counter() - start)
    return statistics.median(times["ours"]), statistics.median(times["native"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="corpus-relative paths, or paths")
    parser.add_argument("--rounds", type=int, default=50, help="timed reads per side")
    args = parser.parse_args(argv)
    logging.getLogger("tifffile").setLevel(logging.ERROR)
    for name in args.files:
        ours, native = time_file(bench_file(name), args.rounds)
        print(
            f"{name}: ours {ours * 1e3:.3f} ms, native {native * 1e3:.3f} ms, "
            f"ratio {ours / native:.2f} (medians of {args.rounds})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
