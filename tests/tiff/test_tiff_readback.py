"""Read-back of every corpus TIFF and every synthetic fixture through TIFFParser.

Each file either reads back through the virtual store bit-identical to tifffile's decode of
the same IFD (and to rasterio/GDAL, and decoded equal to rioxarray, where they open it), or
is refused while parsing with a project error that names the file and the feature. The
tests print the counts (read / refused by reason) and fail on any mismatch.
"""

from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from fixtures import make_tiff_fixtures
from tests._native_references import tifffile_reference
from virtualizarr_fill.errors import VirtualizarrFillError
from virtualizarr_fill.tiff import TIFFParser

TIFF_SUFFIXES = {".tif", ".tiff"}
REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def rasterio_reference(path: Path) -> tuple[np.ndarray | None, str | None]:
    """GDAL's raw decode of the first image (None when GDAL cannot open it), and a reason
    to skip the rioxarray comparison (subdatasets, or a mask IFD that GDAL applies)."""
    try:
        import rasterio
        from rasterio.enums import MaskFlags
        from rasterio.errors import NotGeoreferencedWarning
    except ImportError:
        return None, "rasterio not installed"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(path) as src:
                skip = None
                if src.subdatasets:
                    skip = "GDAL exposes the pages as subdatasets"
                elif any(MaskFlags.per_dataset in flags for flags in src.mask_flag_enums):
                    skip = "GDAL applies the mask IFD"
                return np.asarray(src.read()), skip
    except Exception:
        return None, "GDAL cannot open it"


def open_virtual(path: Path, **options: Any) -> Any:
    # Not Path.as_uri(): obstore takes URL paths literally, without percent-decoding.
    return TIFFParser(**options)("file://" + str(Path(path).resolve()), REGISTRY)


def read_band_data(store: Any) -> np.ndarray:
    array = zarr.open_array(store=store, path="band_data", mode="r", zarr_format=3)
    return np.asarray(array[...])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype.newbyteorder("=") != b.dtype.newbyteorder("="):
        return False
    equal_nan = a.dtype.kind in "fc"
    return bool(np.array_equal(a, b, equal_nan=equal_nan))


def decoded_matches_rioxarray(path: Path, store: Any) -> str | None:
    """None when the decoded band_data equals rioxarray's (values and NaN mask), else why.

    Raw values are compared bit for bit elsewhere; here rioxarray applies scale/offset in
    float32 while xarray's CF decoding uses float64, so scaled values are compared to
    float32 precision. NaN masks must be identical.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = xr.open_dataset(path, engine="rasterio")
        got = xr.open_zarr(store, zarr_format=3, consolidated=False, chunks=None)
        (variable,) = expected.data_vars.values()
        want = np.asarray(variable.values, dtype=np.float64)
        have = np.asarray(got["band_data"].values, dtype=np.float64)
        scaled = "scale_factor" in got["band_data"].encoding or (
            "add_offset" in got["band_data"].encoding
        )
    if want.shape != have.shape:
        return f"rioxarray shape {want.shape} != {have.shape}"
    if not np.array_equal(np.isnan(want), np.isnan(have)):
        return f"NaN masks differ ({np.isnan(want).sum()} vs {np.isnan(have).sum()} NaNs)"
    if scaled:
        offset = abs(float(got["band_data"].encoding.get("add_offset", 0.0)))
        tolerance = 2.0**-20 * (np.abs(np.nan_to_num(have)) + offset)
        if not np.all(np.abs(np.nan_to_num(want - have)) <= tolerance):
            return "decoded (scaled) values differ from rioxarray beyond float32 rounding"
    elif not np.array_equal(want, have, equal_nan=True):
        return "decoded values differ from rioxarray"
    for name in ("x", "y"):
        in_both = name in expected.coords and name in got.coords
        if in_both and not np.array_equal(expected[name].values, got[name].values):
            return f"{name} coordinates differ from rioxarray"
    return None


def check_file(path: Path, notes: collections.Counter[str]) -> tuple[str, list[str]]:
    """('read' | 'refused: <reason>', problems); ``notes`` counts skipped comparisons."""
    problems: list[str] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_virtual(path, on_fill_out_of_range="warn")
    except VirtualizarrFillError as error:
        message = str(error)
        if path.name not in message:
            problems.append(f"refusal does not name the file: {message}")
        return f"refused: {type(error).__name__}: {message.split(': ', 1)[-1][:70]}", problems
    gdal, skip_rioxarray = rasterio_reference(path)
    try:
        reference = tifffile_reference(path)
    except Exception as error:
        truth = make_tiff_fixtures.TRUTHS.get(path.stem)
        if truth is not None and path.parent.name.startswith("tiff-fixtures"):
            notes["compared with the written values (tifffile cannot decode)"] += 1
            reference = truth()
            if gdal is not None and not same(reference, gdal):
                notes["GDAL decodes a padded compressed strip wrongly"] += 1
                gdal, skip_rioxarray = None, "GDAL decodes it wrongly"
        elif gdal is None:
            problems.append(f"parsed although neither tifffile nor GDAL decode it ({error})")
            return "read", problems
        else:
            notes["compared with GDAL only (tifffile cannot decode)"] += 1
            reference = gdal
    try:
        got = read_band_data(store)
    except Exception as error:
        problems.append(f"read-time error {type(error).__name__}: {error}")
        return "read", problems
    if not same(got, reference):
        problems.append(
            f"differs from the native reader: {got.shape} {got.dtype} vs "
            f"{reference.shape} {reference.dtype}"
        )
    if gdal is not None and not same(got, gdal):
        if same(reference, gdal):
            problems.append("differs from rasterio")
        else:
            notes["tifffile and GDAL disagree (compared with tifffile)"] += 1
    attributes = zarr.open_array(store=store, path="band_data", mode="r").attrs
    if "scales" in attributes or "offsets" in attributes:
        skip_rioxarray = "per-band scale/offset (rioxarray scales each band itself)"
    if got.dtype.kind == "c" and attributes.get("_FillValue") is not None:
        # GDAL masks a complex sample as nodata when its real part equals the nodata
        # value; CF decoding masks values equal to _FillValue (both parts). The raw
        # values are compared above.
        skip_rioxarray = "complex samples with nodata (GDAL masks by the real part alone)"
    if skip_rioxarray is not None:
        notes[f"rioxarray not compared: {skip_rioxarray}"] += 1
        return "read", problems
    why = decoded_matches_rioxarray(path, store)
    if why is not None:
        problems.append(why)
    return "read", problems


def check_every_image(path: Path, notes: collections.Counter[str]) -> list[str]:
    """Overviews, masks, SubIFDs and pages (``layout="tree"``) against tifffile, per IFD."""
    with tifffile.TiffFile(path) as tif:
        if len(tif.pages) < 2 and not tif.pages.first.subifds:
            return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_virtual(path, layout="tree", on_fill_out_of_range="warn")
    except VirtualizarrFillError as error:
        notes[f"tree refused: {type(error).__name__}"] += 1
        return [] if path.name in str(error) else [f"tree refusal does not name the file: {error}"]
    problems = []
    root = zarr.open_group(store=store, mode="r", zarr_format=3)
    for name, group in root.groups():
        ifd = group.attrs["tiff_ifd"]
        got = np.asarray(group["band_data"][...])
        try:
            reference = tifffile_reference(path, ifd)
        except Exception:
            notes["tree image tifffile cannot decode"] += 1
            continue
        if not same(got, reference):
            problems.append(f"group {name} (IFD {ifd}) differs from tifffile")
        notes["tree images compared with tifffile"] += 1
        if name.startswith("overview_"):
            level = int(name.split("_")[1])
            georeferenced = "x" in dict(root["image"].arrays())
            problems += overview_matches_rioxarray(path, group, level, georeferenced, notes)
    return problems


def overview_matches_rioxarray(
    path: Path, group: Any, level: int, georeferenced: bool, notes: collections.Counter[str]
) -> list[str]:
    """Raw values and x/y of overview ``level`` equal rioxarray's ``overview_level``."""
    try:
        import rioxarray
    except ImportError:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = rioxarray.open_rasterio(path, overview_level=level - 1)
        except Exception:
            notes["overview not opened by rioxarray"] += 1
            return []
    problems = []
    if not same(np.asarray(group["band_data"][...]), np.asarray(expected.values)):
        problems.append(f"overview_{level} values differ from rioxarray")
    arrays = dict(group.arrays())
    for name in ("x", "y"):
        if name not in arrays:
            if georeferenced:
                problems.append(f"overview_{level} has no {name} coordinate")
        elif not np.array_equal(arrays[name][...], expected[name].values):
            problems.append(f"overview_{level} {name} differs from rioxarray")
    notes["overviews compared with rioxarray (values, x, y)"] += 1
    return problems


@dataclass
class Tally:
    """Outcomes of the files checked so far in one group (corpus or fixtures)."""

    outcomes: dict[str, str] = field(default_factory=dict)  # file -> outcome
    notes: collections.Counter[str] = field(default_factory=collections.Counter)

    def check(self, path: Path) -> list[str]:
        outcome, problems = check_file(path, self.notes)
        if outcome == "read":
            problems += check_every_image(path, self.notes)
        self.outcomes[str(path)] = outcome
        return problems

    def report(self, paths: list[Path]) -> list[str]:
        """Check files not checked yet (when run alone), print the counts, return problems."""
        problems = []
        for path in paths:
            if str(path) not in self.outcomes:
                problems += [f"{path}: {p}" for p in self.check(path)]
        counts = collections.Counter(
            "read" if self.outcomes[str(p)] == "read" else self.outcomes[str(p)] for p in paths
        )
        print(f"\n{len(paths)} files: {counts['read']} read")
        for outcome, count in sorted(counts.items()):
            if outcome != "read":
                print(f"  {count:3d}  {outcome}")
        for note, count in sorted(self.notes.items()):
            print(f"  note: {count:3d}  {note}")
        return problems


CORPUS_TALLY = Tally()
FIXTURE_TALLY = Tally()
# The corpus as tests/conftest.py locates it; the ``corpus_dir`` fixture decides whether a
# missing corpus fails (CI) or skips.
CORPUS_LOCATION = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
CORPUS_FILES = sorted(
    str(p.relative_to(CORPUS_LOCATION))
    for p in CORPUS_LOCATION.rglob("*")
    if p.suffix.lower() in TIFF_SUFFIXES
)


def corpus_paths(corpus_dir: Path) -> list[Path]:
    return sorted(p for p in corpus_dir.rglob("*") if p.suffix.lower() in TIFF_SUFFIXES)


@pytest.fixture(scope="session")
def tiff_fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiff-fixtures")
    make_tiff_fixtures.write_fixtures(directory)
    return directory


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS_FILES)
def test_corpus_tiff(corpus_dir: Path, relative: str) -> None:
    problems = CORPUS_TALLY.check(corpus_dir / relative)
    assert not problems, "; ".join(problems)


@pytest.mark.corpus
def test_corpus_counts(corpus_dir: Path) -> None:
    """Prints read / refused-by-reason counts over the whole corpus; fails on any mismatch."""
    paths = corpus_paths(corpus_dir)
    assert len(paths) > 50
    problems = CORPUS_TALLY.report(paths)
    assert not problems, "\n".join(problems)
    assert sum(o == "read" for o in CORPUS_TALLY.outcomes.values()) >= 55


@pytest.mark.parametrize("name", sorted(make_tiff_fixtures.FIXTURES))
def test_fixture_tiff(tiff_fixture_dir: Path, name: str) -> None:
    problems = FIXTURE_TALLY.check(tiff_fixture_dir / f"{name}.tif")
    assert not problems, "; ".join(problems)


def test_fixture_counts(tiff_fixture_dir: Path) -> None:
    """Prints read / refused-by-reason counts over every fixture; fails on any mismatch."""
    paths = sorted(tiff_fixture_dir.glob("*.tif"))
    assert len(paths) == len(make_tiff_fixtures.FIXTURES)
    problems = FIXTURE_TALLY.report(paths)
    assert not problems, "\n".join(problems)
