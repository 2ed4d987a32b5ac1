"""The HDF5 read-back checks the corpus tests use detect what they must."""

from __future__ import annotations

import copy
from pathlib import Path

import h5py
import numpy as np
import pytest
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore

from tests._hdf5_checks import (
    Report,
    check_netcdf,
    check_raw,
    check_refusals,
    parse,
    registry,
)
from virtualizarr_fill.hdf5 import (
    SkippedDatasetWarning,
)


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("readback") / "small.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(20, dtype="<i4").reshape(4, 5), chunks=(2, 5))
        f["x"].attrs["units"] = "m"
    return path


def test_check_raw_passes_on_a_correct_store(small_file: Path) -> None:
    parsed = parse(small_file)
    report = check_raw(small_file, parsed)
    assert report.problems == []
    assert report.counts["equal"] == 1


def test_check_raw_detects_a_wrong_chunk(small_file: Path) -> None:
    parsed = parse(small_file)
    array = parsed.store._group.arrays["x"]
    manifest = array.manifest
    offsets = manifest._offsets.copy()
    offsets[(1, 0)] = offsets[(0, 0)]  # second chunk now points at the first one's bytes
    broken = ChunkManifest.from_arrays(
        paths=manifest._paths, offsets=offsets, lengths=manifest._lengths, validate_paths=False
    )
    wrong = ManifestArray(metadata=copy.deepcopy(array.metadata), chunkmanifest=broken)
    parsed.store = ManifestStore(ManifestGroup(arrays={"x": wrong}), registry=registry())
    report = check_raw(small_file, parsed)
    assert any("values differ" in p for p in report.problems)


def test_check_netcdf_detects_a_wrong_attribute(small_file: Path) -> None:
    parsed = parse(small_file)
    array = parsed.store._group.arrays["x"]
    metadata = array.metadata.update_attributes({"units": "km"})
    wrong = ManifestArray(metadata=metadata, chunkmanifest=array.manifest)
    parsed.store = ManifestStore(ManifestGroup(arrays={"x": wrong}), registry=registry())
    report = check_netcdf(small_file, parsed)
    assert any("attribute 'units'" in p for p in report.problems)


def test_unlisted_refusal_reason_is_a_problem(small_file: Path) -> None:
    parsed = parse(small_file)
    parsed.skipped["/made_up"] = SkippedDatasetWarning(
        "x", dataset="/made_up", kind="filter", reason="something else"
    )
    report = Report()
    check_refusals(parsed, report)
    assert report.problems
