"""TIFF header parsing: TIFFParser side by side with virtual-tiff, in one run.

For each file, both parsers build a ManifestStore from a ``file://`` URL through an
:class:`~benchmarks._counting_store.CountingStore` wrapper (so every object-store request and
byte is counted the same way), and the median parse time of several repetitions is
reported; the two parsers take turns, repetition by repetition, so that load from other
processes affects both alike. Files:

* a generated 1000x1000 float32 Deflate COG with overviews (GDAL, through rasterio);
* a generated 150-row strip file with RowsPerStrip 10 (tifffile; virtual-tiff refuses
  RowsPerStrip 12 there, so 10 keeps it comparable);
* every corpus TIFF that virtual-tiff reads correctly (checked in a subprocess in which
  virtual-tiff's codec classes own the ``imagecodecs_*`` names, against tifffile).

Two modes: the first image only (``TIFFParser()`` vs ``VirtualTIFF(ifd=0)``) and every IFD
(``TIFFParser(tree=True)`` vs ``VirtualTIFF()``). Targets (issue 5): parse time at most
half of virtual-tiff's, requests no more than virtual-tiff's.

A third table puts the first-image parse in context, per file: ``tifffile floor`` is
what tifffile alone takes to open the file from bytes already in memory and decode the
first IFD's tags and GeoTIFF keys (every tifffile-based parser pays it before building
any Zarr metadata), and ``open_virtual_dataset`` is the whole call a user makes with
``TIFFParser()`` (parse plus VirtualiZarr building the xarray Dataset).

Every file is parsed repeatedly, so the parser's result caches (image and band
descriptions, georeferences, coordinate arrays and attributes kept by the contents of
their tags, :mod:`virtualizarr_fill.tiff.caches`) serve repetitions after the first, as
they serve the files of a time series on one grid; ``--new-placement`` forgets the
georeferences, coordinates and image descriptions before each parse (the scenes of one
product, each placed elsewhere; pessimistic for overviews, whose IFDs usually hold no
geo tags and so stay shared between scenes), and ``--no-result-caches`` measures files
that share none of these.

Run: ``python benchmarks/bench_tiff.py`` (``--repeat N``, ``--no-corpus``). ``--profile N``
instead runs N first-image and N every-IFD parses of each generated file under cProfile
and prints where the time goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _counting_store import CountingStore
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from virtualizarr_fill.tiff import TIFFParser, arrays, caches, geo
from virtualizarr_fill.tiff import image_descriptions as images

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(REPO / "fixtures"))
import make_tiff_fixtures  # noqa: E402


def make_cog(path: Path) -> None:
    """1000x1000 float32 Deflate COG with overviews, written by GDAL."""
    import rasterio
    from rasterio.shutil import copy as rio_copy
    from rasterio.transform import from_origin

    rng = np.random.default_rng(0)
    data = (rng.standard_normal((1, 1000, 1000)) * 100).astype("float32")
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain.tif"
        profile = {
            "driver": "GTiff",
            "width": 1000,
            "height": 1000,
            "count": 1,
            "dtype": "float32",
            "crs": "EPSG:4326",
            "transform": from_origin(0, 10, 0.01, 0.01),
            "tiled": True,
            "blockxsize": 256,
            "blockysize": 256,
            "compress": "DEFLATE",
        }
        with rasterio.open(plain, "w", **profile) as dst:
            dst.write(data)
            dst.build_overviews([2, 4, 8])
        rio_copy(
            plain,
            path,
            driver="GTiff",
            copy_src_overviews=True,
            tiled=True,
            blockxsize=256,
            blockysize=256,
            compress="DEFLATE",
        )


def make_strips(path: Path) -> None:
    make_tiff_fixtures.FIXTURES["strip_rps10_150rows_deflate"](path)


_VIRTUAL_TIFF_CHECK = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, tifffile, zarr
from importlib.metadata import entry_points
# virtual-tiff's classes must own the imagecodecs_* names in this process
zarr.config.set({f"codecs.{e.name}": e.value.replace(":", ".")
                 for e in entry_points(group="zarr.codecs") if e.value.startswith("virtual_tiff")})
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtual_tiff import VirtualTIFF
registry = ObjectStoreRegistry({"file://": LocalStore()})
good = []
for path in sys.argv[1:]:
    try:
        store = VirtualTIFF(ifd=0)("file://" + path, registry)
        got = np.asarray(zarr.open_group(store=store, mode="r")["0"][...])
        page = tifffile.TiffFile(path).pages[0]
        ref = page.asarray()
        if got.shape != ref.shape and got.ndim == 3:
            got = np.moveaxis(got, 0, -1)
        if got.shape == ref.shape and np.array_equal(got, ref, equal_nan=ref.dtype.kind in "fc"):
            good.append(path)
    except Exception:
        pass
print(json.dumps(good))
"""


def corpus_files_virtual_tiff_reads() -> list[Path]:
    paths = sorted(p for p in CORPUS.rglob("*") if p.suffix.lower() in {".tif", ".tiff"})
    result = subprocess.run(
        [sys.executable, "-c", _VIRTUAL_TIFF_CHECK, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    return [Path(p) for p in json.loads(result.stdout.strip().splitlines()[-1])]


#: Called before every timed parse (``--new-placement``), outside the timing.
BEFORE_EACH_PARSE: Callable[[], None] | None = None


def _forget_placement() -> None:
    # A scene placed elsewhere stores other geo tags: its georeference, coordinates and
    # image descriptions (keyed by every tag) are new; its band description is not.
    geo.clear_cache()
    arrays.clear_kept_arrays()
    images.clear_cache()


def _measure_once(parser: Callable[[str, Any], Any], path: Path) -> tuple[float, int, int]:
    """Seconds, requests and bytes of one parse through a counting store."""
    counting = CountingStore(LocalStore())
    registry = ObjectStoreRegistry({"file://": counting})
    if BEFORE_EACH_PARSE is not None:
        BEFORE_EACH_PARSE()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parser("file://" + str(path), registry)
    seconds = time.perf_counter() - start
    return seconds, counting.stats.requests, counting.stats.bytes_read


def measure(parser: Callable[[str, Any], Any], path: Path, repeat: int) -> dict[str, Any]:
    """Median parse time, and requests/bytes of one parse, through a counting store."""
    return measure_side_by_side([parser], path, repeat)[0]


def measure_side_by_side(
    parsers: list[Callable[[str, Any], Any]], path: Path, repeat: int
) -> list[dict[str, Any]]:
    """:func:`measure` for several parsers, their repetitions taking turns, so that load
    from other processes on a shared machine falls on each alike."""
    times: list[list[float]] = [[] for _ in parsers]
    counts: list[tuple[int, int]] = [(0, 0) for _ in parsers]
    errors: list[str | None] = [None for _ in parsers]
    for _ in range(repeat):
        for index, parser in enumerate(parsers):
            if errors[index] is not None:
                continue
            try:
                seconds, requests, nbytes = _measure_once(parser, path)
            except Exception as exc:
                errors[index] = f"{type(exc).__name__}: {exc}"[:80]
                continue
            times[index].append(seconds)
            counts[index] = (requests, nbytes)
    return [
        {"error": error}
        if error is not None
        else {"seconds": statistics.median(t), "requests": c[0], "bytes": c[1]}
        for t, c, error in zip(times, counts, errors, strict=True)
    ]


def run(files: list[Path], repeat: int) -> None:
    from virtual_tiff import VirtualTIFF

    modes = {
        "first image": (TIFFParser(), VirtualTIFF(ifd=0)),
        "every IFD": (TIFFParser(tree=True), VirtualTIFF()),
    }
    for mode, (ours, theirs) in modes.items():
        print(f"\n== {mode}: TIFFParser vs virtual-tiff (median of {repeat}) ==")
        print(
            f"{'file':48s} {'ours ms':>8s} {'vt ms':>8s} {'ratio':>6s} "
            f"{'req':>4s} {'vt req':>6s} {'KiB':>7s} {'vt KiB':>7s}"
        )
        ratios, request_pairs = [], []
        for path in files:
            measure_side_by_side([ours, theirs], path, 1)  # warm caches and imports
            a, b = measure_side_by_side([ours, theirs], path, repeat)
            name = path.name[:48]
            if "error" in a or "error" in b:
                print(f"{name:48s} ours={a.get('error', 'ok')} vt={b.get('error', 'ok')}")
                continue
            ratio = a["seconds"] / b["seconds"]
            ratios.append(ratio)
            request_pairs.append((a["requests"], b["requests"]))
            print(
                f"{name:48s} {a['seconds'] * 1e3:8.2f} {b['seconds'] * 1e3:8.2f} "
                f"{ratio:6.2f} {a['requests']:4d} {b['requests']:6d} "
                f"{a['bytes'] / 1024:7.1f} {b['bytes'] / 1024:7.1f}"
            )
        if ratios:
            fewer_or_equal = sum(1 for a, b in request_pairs if a <= b)
            print(
                f"median time ratio (ours / virtual-tiff): {statistics.median(ratios):.2f}; "
                f"max {max(ratios):.2f}; files with requests <= virtual-tiff's: "
                f"{fewer_or_equal}/{len(request_pairs)}; median requests "
                f"{statistics.median(a for a, _ in request_pairs):.0f} vs "
                f"{statistics.median(b for _, b in request_pairs):.0f}"
            )


def _median_seconds(action: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _tifffile_floor(data: bytes) -> None:
    import io

    import tifffile

    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        page = tif.pages.first
        _ = (page.dataoffsets, page.databytecounts, page.geotiff_tags)


def _registry() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": LocalStore()})


def _context_of(path: Path, repeat: int, ours: Any, theirs: Any) -> tuple[float, ...] | None:
    """(tifffile floor, virtual-tiff, ours, open_virtual_dataset) median seconds."""
    from virtualizarr import open_virtual_dataset

    url = "file://" + str(path)
    data = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            open_virtual_dataset(url, registry=_registry(), parser=ours)
            theirs(url, _registry())
        except Exception:
            return None
        return (
            _median_seconds(lambda: _tifffile_floor(data), repeat),
            _median_seconds(lambda: theirs(url, _registry()), repeat),
            _median_seconds(lambda: ours(url, _registry()), repeat),
            _median_seconds(
                lambda: open_virtual_dataset(url, registry=_registry(), parser=ours), repeat
            ),
        )


def run_context(files: list[Path], repeat: int) -> None:
    """The first-image parse beside tifffile's own floor and open_virtual_dataset."""
    from virtual_tiff import VirtualTIFF

    ours, theirs = TIFFParser(), VirtualTIFF(ifd=0)
    print(f"\n== context of the first-image parse (median of {repeat}) ==")
    print(
        f"{'file':48s} {'floor ms':>8s} {'vt ms':>8s} {'floor/vt':>8s} "
        f"{'ours ms':>8s} {'ovd ms':>8s} {'ours/ovd':>8s}"
    )
    floor_ratios, share = [], []
    for path in files:
        measured = _context_of(path, repeat, ours, theirs)
        if measured is None:
            print(f"{path.name[:48]:48s} skipped (a parser raised)")
            continue
        floor, vt, parse, ovd = measured
        floor_ratios.append(floor / vt)
        share.append(parse / ovd)
        print(
            f"{path.name[:48]:48s} {floor * 1e3:8.2f} {vt * 1e3:8.2f} {floor / vt:8.2f} "
            f"{parse * 1e3:8.2f} {ovd * 1e3:8.2f} {parse / ovd:8.2f}"
        )
    if floor_ratios:
        print(
            f"median tifffile floor / virtual-tiff parse: {statistics.median(floor_ratios):.2f}; "
            f"median share of open_virtual_dataset spent parsing: {statistics.median(share):.2f}"
        )


def run_profile(files: list[Path], parses: int) -> None:
    """cProfile of repeated parses: the functions that take the most time, cumulatively."""
    import cProfile
    import pstats

    for path in files:
        for mode, parser in (("first image", TIFFParser()), ("every IFD", TIFFParser(tree=True))):
            url = "file://" + str(path)
            parser(url, _registry())  # imports and caches
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(parses):
                parser(url, _registry())
            profile.disable()
            print(f"\n== {path.name}, {mode}: {parses} parses under cProfile ==")
            stats = pstats.Stats(profile)
            stats.sort_stats("cumulative").print_stats(r"virtualizarr_fill|tifffile\.py", 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-corpus", action="store_true")
    parser.add_argument("--profile", type=int, metavar="N", help="profile N parses instead")
    parser.add_argument(
        "--no-result-caches",
        action="store_true",
        help="derive georeferences, coordinates and attributes afresh on every parse (as "
        "for an archive whose files share none), instead of reusing them by tag contents",
    )
    parser.add_argument(
        "--new-placement",
        action="store_true",
        help="forget georeferences and coordinate arrays before each parse (as for the "
        "scenes of one product, each placed elsewhere); the other result caches stay",
    )
    args = parser.parse_args()
    if args.no_result_caches:
        caches.ENABLED = False
    if args.new_placement:
        global BEFORE_EACH_PARSE
        BEFORE_EACH_PARSE = _forget_placement
    with tempfile.TemporaryDirectory() as tmp:
        cog, strips = Path(tmp) / "cog_1000_float32_deflate.tif", Path(tmp) / "strips_150_rps10.tif"
        make_cog(cog)
        make_strips(strips)
        files = [cog, strips]
        if args.profile:
            run_profile(files, args.profile)
            return
        if not args.no_corpus and CORPUS.is_dir():
            corpus = corpus_files_virtual_tiff_reads()
            print(f"corpus files virtual-tiff reads correctly: {len(corpus)}")
            files += corpus
        run(files, args.repeat)
        run_context(files, args.repeat)


if __name__ == "__main__":
    main()
