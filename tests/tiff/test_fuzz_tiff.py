"""Fuzzing TIFFParser with structural mutations of small real TIFFs.

Every mutated file must either parse into references that read back exactly what
tifffile reads from the same bytes, or be refused at parse time with a project error
naming the file -- never another exception, a crash, a hang or a memory blow-up. Cases
run in a worker process (``conformance/fuzz/worker.py``) so that a crash or a hang in a C
decoder costs one case; hypothesis is derandomised, so CI runs the same cases every time.

Verdicts matching a bug listed in ``tests/_known_bugs.py`` (each with its own
failing test there) are counted, not failed, here; any other failure is a new bug.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.fuzz.header_mutations import HEADER_KINDS, header_mutation
from conformance.fuzz.mutations import (
    Mutation,
    RandomChooser,
    TiffStructure,
    apply_ops,
    tiff_mutation,
    tiff_structure,
)
from conformance.fuzz.worker import BUG_MEMORY, GDAL_CONVENTION, FuzzWorker, acceptable, run_once
from tests._fuzz_driver import (
    FUZZ_SETTINGS,
    HypothesisChooser,
    judge,
    judge_truncations,
    worker_session,
)
from tests._known_bugs import known_bug

pytestmark = pytest.mark.corpus

#: Small real TIFFs: strips and tiles, chunky and planar, 1-5 bands, uint8/int16/float32/
#: float16, little- and big-endian, BigTIFF, none/deflate+predictor 3/LZW/PackBits.
TIFF_FILES = (
    "rasterio+rasterio/byte.tif",
    "rasterio+rasterio/float_nan.tif",
    "rasterio+rasterio/rotated.tif",
    "OSGeo+PROJ/test_vgrid_bigendian.tif",
    "OSGeo+PROJ/test_vgrid_deflate_floatingpointpredictor.tif",
    "OSGeo+PROJ/test_vgrid_nodata.tif",
    "OSGeo+PROJ/test_hgrid_strip.tif",
    "OSGeo+PROJ/test_hgrid_separate.tif",
    "image-rs+image-tiff/geo-5b.tif",
    "image-rs+image-tiff/random-fp16-pred3.tiff",
    "image-rs+image-tiff/BigTIFFMotorola.tif",
    "mapnik+test-data/tiff_rgb8_stripped_band.tif",
    "cogeotiff+rio-tiler/cog_uint8_rgba.tif",
)
#: Files whose every structural boundary is a truncation point.
TRUNCATED_FILES = (
    "rasterio+rasterio/byte.tif",
    "OSGeo+PROJ/test_vgrid_deflate_floatingpointpredictor.tif",
    "image-rs+image-tiff/BigTIFFMotorola.tif",
    "cogeotiff+rio-tiler/cog_uint8_rgba.tif",
)


@pytest.fixture(scope="module")
def worker() -> Iterator[FuzzWorker]:
    yield from worker_session()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_tiff")


@pytest.mark.slow  # over 10 s on two cores: CI runs it, the default local run does not
@FUZZ_SETTINGS
@given(data=st.data())
def test_mutated_tiff_reads_exactly_or_is_refused(
    data: st.DataObject, worker: FuzzWorker, corpus_dir: Path, scratch: Path
) -> None:
    name = data.draw(st.sampled_from(TIFF_FILES))
    mutation = tiff_mutation(str(corpus_dir / name), name, HypothesisChooser(data))
    judge(worker, corpus_dir, scratch, mutation, "tiff")


@pytest.mark.parametrize("name", TRUNCATED_FILES)
def test_truncation_at_every_boundary(
    name: str, worker: FuzzWorker, corpus_dir: Path, scratch: Path
) -> None:
    points = tiff_structure(str(corpus_dir / name)).boundaries()
    judge_truncations(worker, corpus_dir, scratch, name, points, "tiff")


def _scalar_tag(structure: TiffStructure, code: int) -> Any:
    return next(e for e in structure.entries if e.code == code and e.ifd == 0)


def _set_long(structure: TiffStructure, code: int, value: int) -> list[dict[str, Any]]:
    from conformance.fuzz.mutations import _tiff_set_scalar

    return _tiff_set_scalar(structure, _scalar_tag(structure, code), value)


HUGE_HEADERS = {
    # (file, {tag: value}): dimensions far beyond the file, segment grids of billions.
    "width 2**32-1, one strip": ("rasterio+rasterio/byte.tif", {256: 2**32 - 1}),
    "height 2**32-1, rows per strip 1": ("rasterio+rasterio/byte.tif", {257: 2**32 - 1, 278: 1}),
    "width and height 2**32-1": ("rasterio+rasterio/byte.tif", {256: 2**32 - 1, 257: 2**32 - 1}),
    "tiles of 16 over 2**32-1 x 2**32-1": (
        "cogeotiff+rio-tiler/cog_uint8_rgba.tif",
        {256: 2**32 - 1, 257: 2**32 - 1, 322: 16, 323: 16},
    ),
    "BigTIFF width 10**12": ("image-rs+image-tiff/BigTIFFMotorola.tif", {256: 10**12}),
    "BigTIFF 10**12 x 10**12, one row per strip": (
        "image-rs+image-tiff/BigTIFFMotorola.tif",
        {256: 10**12, 257: 10**12, 278: 1},
    ),
    "65535 samples per pixel": ("rasterio+rasterio/byte.tif", {277: 0xFFFF}),
}


@pytest.mark.parametrize("case", sorted(HUGE_HEADERS))
def test_huge_dimensions_bounded_in_time_and_memory(
    case: str, corpus_dir: Path, tmp_path: Path
) -> None:
    """Headers claiming billions of elements or segments: a fresh process per case, so
    its peak RSS is exactly this case's."""
    name, tags = HUGE_HEADERS[case]
    structure = tiff_structure(str(corpus_dir / name))
    ops = [op for code, value in tags.items() for op in _set_long(structure, code, value)]
    path = tmp_path / Path(name).name
    path.write_bytes(apply_ops((corpus_dir / name).read_bytes(), ops))
    result = run_once(str(path), "tiff", timeout=60)
    assert result["outcome"] != BUG_MEMORY, result
    assert acceptable(result) or known_bug(result) is not None, (
        f"{case}: {result}\nmutation: {Mutation(name, case, ops).to_json()}"
    )


@pytest.mark.parametrize("kind", HEADER_KINDS["tiff"])
def test_header_classes_follow_gdal_or_are_refused(
    kind: str, worker: FuzzWorker, corpus_dir: Path, scratch: Path
) -> None:
    """Each TIFF header class (``conformance/fuzz/header_mutations.py``), 3 seeded mutations of
    each small file: no bug, and the class's own outcome shows up (GDAL's reading where
    tifffile differs, or a refusal)."""
    chooser = RandomChooser(random.Random(kind))
    outcomes = set()
    for name in TIFF_FILES:
        for _ in range(3):
            mutation = header_mutation(str(corpus_dir / name), name, chooser, kind)
            if mutation is not None:
                outcomes.add(judge(worker, corpus_dir, scratch, mutation, "tiff")["outcome"])
    expected = {"refused"} if kind == "codec-bit-depth" else {GDAL_CONVENTION}
    assert expected <= outcomes, outcomes
