"""Fuzzing HDF5Parser with structural mutations of small real HDF5 / netCDF-4 files.

Every mutated file must either parse into references that read back exactly what h5py
reads from the same bytes (datasets the parser skips with a warning are allowed), or be
refused with a project error naming the file -- never another exception, a crash of
libhdf5, a hang or a memory blow-up. Every case runs in a worker process
(``conformance/fuzz/worker.py``): a libhdf5 crash costs one case, not the test session.

Mutations target the superblock fields, object-header messages (dataspace dimensions,
layout addresses and chunk dimensions, datatypes, filters, continuation blocks),
signature-bearing blocks (B-tree nodes, heaps, chunk indexes), raw data, and truncation
at every structural boundary; in superblock v2/v3 files the lookup3 checksum of an edited
block is restored so the edit reaches the parser. Verdicts matching a bug listed in
``tests/_known_bugs.py`` are counted, not failed, here.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.fuzz.mutations import (
    HDF5_GENERATORS,
    Mutation,
    RandomChooser,
    apply_ops,
    hdf5_mutation,
    hdf5_structure,
)
from conformance.fuzz.worker import BUG_MEMORY, FuzzWorker, acceptable, run_once
from tests._fuzz_driver import (
    FUZZ_SETTINGS,
    HypothesisChooser,
    judge,
    judge_truncations,
    worker_session,
)
from tests._known_bugs import known_bug

pytestmark = pytest.mark.corpus

#: Small real files: superblocks v0, v2, v3 (and a user block), contiguous, compact and
#: chunked layouts, B-tree v1/v2, implicit, fixed-array indexes, deflate/zstd filters,
#: partial edge chunks, fill-value messages, netCDF-4 dimension scales, groups.
HDF5_FILES = (
    "jjhelmus+pyfive/fillvalue_earliest.hdf5",
    "jjhelmus+pyfive/fillvalue_latest.hdf5",
    "jjhelmus+pyfive/earliest.hdf5",
    "jjhelmus+pyfive/compressed_v1.hdf5",
    "fsspec+kerchunk/hdf5_mali_chunk.h5",
    "NCAS-CMS+pyfive/tests/data/netcdf4_classic.nc",
    "NCAS-CMS+pyfive/tests/compact.hdf5",
    "NCAS-CMS+pyfive/tests/data/chunked.hdf5",
    "szcom+rnnlib/fill_old.h5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_chunked_datasets_latest.hdf5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/implicit_index_datasets.hdf5",
)
TRUNCATED_FILES = (
    "jjhelmus+pyfive/fillvalue_latest.hdf5",
    "jjhelmus+pyfive/earliest.hdf5",
    "fsspec+kerchunk/hdf5_mali_chunk.h5",
)


#: Files holding the structures libhdf5 follows blindly: symbol table B-trees and local
#: heaps (v0 superblock), version 1 chunk B-trees, version 2 B-tree chunk indexes, dense
#: attribute storage (fractal heaps and their v2 B-tree indexes).
STRUCTURE_FILES = (
    "NCAS-CMS+pyfive/tests/data/dim_scales.hdf5",
    "NCAS-CMS+pyfive/tests/data/fletcher32.hdf5",
    "NCAS-CMS+pyfive/tests/data/btreev2.hdf5",
    "jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_attribute_latest.hdf5",
)
STRUCTURE_KINDS = ("btree-self-child", "btree-v2-header", "fractal-heap-header", "local-heap")
STRUCTURE_CASES = 6


@pytest.fixture(scope="module")
def worker() -> Iterator[FuzzWorker]:
    yield from worker_session()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_hdf5")


@pytest.mark.slow  # over 10 s on two cores: CI runs it, the default local run does not
@FUZZ_SETTINGS
@given(data=st.data())
def test_mutated_hdf5_reads_exactly_or_is_refused(
    data: st.DataObject, worker: FuzzWorker, corpus_dir: Path, scratch: Path
) -> None:
    name = data.draw(st.sampled_from(HDF5_FILES))
    mutation = hdf5_mutation(str(corpus_dir / name), name, HypothesisChooser(data))
    judge(worker, corpus_dir, scratch, mutation, "hdf5")


@pytest.mark.parametrize("kind", STRUCTURE_KINDS)
@pytest.mark.parametrize("name", STRUCTURE_FILES)
def test_structure_mutations_never_reach_libhdf5(
    name: str, kind: str, worker: FuzzWorker, corpus_dir: Path, scratch: Path
) -> None:
    """Self-referencing B-tree children, edited version 2 B-tree and fractal heap
    headers, broken local heaps: each mutant is judged in the capped worker process
    (a libhdf5 crash or allocation would be a verdict, not a lost session). Files
    without the structure get the nearest other structural edit."""
    structure = hdf5_structure(str(corpus_dir / name))
    chooser = RandomChooser(random.Random(f"{name}:{kind}"))
    for _ in range(STRUCTURE_CASES):
        ops, label = HDF5_GENERATORS[kind](structure, chooser)
        judge(worker, corpus_dir, scratch, Mutation(name, f"{kind}: {label}", ops), "hdf5")


@pytest.mark.parametrize("name", TRUNCATED_FILES)
def test_truncation_at_every_boundary(
    name: str, worker: FuzzWorker, corpus_dir: Path, scratch: Path
) -> None:
    points = hdf5_structure(str(corpus_dir / name)).boundaries()
    judge_truncations(worker, corpus_dir, scratch, name, points, "hdf5")


def _set_fields(name: str, corpus: Path, labels: dict[str, int]) -> list[dict[str, Any]]:
    """Set every field whose label starts with a key of ``labels``; restore checksums."""
    structure = hdf5_structure(str(corpus / name))
    ops: list[dict[str, Any]] = []
    for field in structure.fields:
        for label, value in labels.items():
            if field.label.startswith(label):
                value &= (1 << (8 * field.width)) - 1
                ops.append(
                    {
                        "op": "put",
                        "pos": field.pos,
                        "hex": value.to_bytes(field.width, "little").hex(),
                    }
                )
                ops += [fix for fix in structure.checksum_fix(field.pos) if fix not in ops]
    assert ops, f"{name} has no field {sorted(labels)}"
    # Checksums last, over the edited bytes.
    return [op for op in ops if op["op"] != "checksum"] + [
        op for op in ops if op["op"] == "checksum"
    ]


HUGE_HEADERS = {
    # (file, {field label prefix: value}): dataspaces and chunk grids far beyond the file.
    "dataspace 10**12 (superblock v0, contiguous)": (
        "jjhelmus+pyfive/fillvalue_earliest.hdf5",
        {"dataspace dim": 10**12},
    ),
    "dataspace 10**12 (superblock v2, checksummed)": (
        "jjhelmus+pyfive/fillvalue_latest.hdf5",
        {"dataspace dim": 10**12},
    ),
    "dataspace and max 10**12 (chunked, B-tree v1)": (
        "jjhelmus+pyfive/compressed_v1.hdf5",
        {"dataspace dim": 10**12},
    ),
    "chunk dim 1: 816852 chunks (chunked)": (
        "jjhelmus+pyfive/compressed_v1.hdf5",
        {"chunk dim 0": 1},
    ),
    "contiguous size 2**62": ("jjhelmus+pyfive/earliest.hdf5", {"contiguous data size": 2**62}),
    "contiguous address past the end": (
        "jjhelmus+pyfive/earliest.hdf5",
        {"contiguous data address": 2**40},
    ),
}


@pytest.mark.parametrize("case", sorted(HUGE_HEADERS))
def test_huge_dimensions_bounded_in_time_and_memory(
    case: str, corpus_dir: Path, tmp_path: Path
) -> None:
    """A fresh process per case (``subprocess.run``), so its peak RSS is this case's and
    a libhdf5 crash is seen as one."""
    name, labels = HUGE_HEADERS[case]
    ops = _set_fields(name, corpus_dir, labels)
    path = tmp_path / Path(name).name
    path.write_bytes(apply_ops((corpus_dir / name).read_bytes(), ops))
    result = run_once(str(path), "hdf5", timeout=60)
    assert result["outcome"] != BUG_MEMORY, result
    assert acceptable(result) or known_bug(result) is not None, (
        f"{case}: {result}\nmutation: {Mutation(name, case, ops).to_json()}"
    )
