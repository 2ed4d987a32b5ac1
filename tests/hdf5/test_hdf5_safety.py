"""HDF5Parser's safety rules: what it follows, what it leaves to others, what it refuses.

* Path policy: references to other files (external links, external raw storage,
  virtual dataset sources) are followed only inside the directory of the file parsed,
  symbolic links resolved, unless ``external_files="allow"``; whatever the registry
  could reach.
* Depth: groups nested deeper than zarr and xarray can walk are left out with a
  warning, so the result always opens (zarr's recursive ``groups()``, VirtualiZarr's
  ``open_virtual_datatree``).
* Good citizen: parsing leaves no conversion path registered in libhdf5 (h5py users
  of the same process see libhdf5 as without the package).
* Dimension bookkeeping that cannot be read never changes another variable's length or
  dimensions silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import virtualizarr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from conformance.fuzz.mutations import apply_ops
from virtualizarr_fill.hdf5 import HDF5Parser, SkippedDatasetWarning, SkippedLinkWarning
from virtualizarr_fill.hdf5.session import outside_directory
from virtualizarr_fill.hdf5.walk import MAX_GROUP_DEPTH

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The registry the README shows: every local file.
EVERYTHING = ObjectStoreRegistry({"file:///": LocalStore("/")})


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _parse(path: Path, **options: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = HDF5Parser(**options)(_url(path), EVERYTHING)
    return store, list(caught)


def _arrays(store: Any) -> dict[str, np.ndarray]:
    root = zarr.open_group(store, mode="r", zarr_format=3)
    return {name: np.asarray(array[...]) for name, array in root.arrays()}


def _warned(caught: list[warnings.WarningMessage], kind: type, *texts: str) -> bool:
    return any(
        isinstance(w.message, kind) and all(text in str(w.message) for text in texts)
        for w in caught
    )


# -- path policy --------------------------------------------------------------------------------


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """``data/main.h5`` with references inside ``data/`` and outside it."""
    data, outside = tmp_path / "data", tmp_path / "secret"
    (data / "sub").mkdir(parents=True)
    outside.mkdir()
    for folder in (data / "sub", outside):
        with h5py.File(folder / "source.h5", "w") as f:
            f["values"] = np.arange(6, dtype="i4")
        (folder / "raw.bin").write_bytes(np.arange(6, dtype="<i4").tobytes())
    (data / "link.h5").symlink_to(outside / "source.h5")
    main = data / "main.h5"
    with h5py.File(main, "w") as f:
        f["inside"] = h5py.ExternalLink("sub/source.h5", "/values")
        f["outside"] = h5py.ExternalLink("../secret/source.h5", "/values")
        f["absolute"] = h5py.ExternalLink(str(outside / "source.h5"), "/values")
        f["symlinked"] = h5py.ExternalLink("link.h5", "/values")
        f.create_dataset("raw_inside", (6,), "<i4", external=[("sub/raw.bin", 0, 24)])
        f.create_dataset("raw_outside", (6,), "<i4", external=[("../secret/raw.bin", 0, 24)])
        for name, source in (
            ("vds_inside", "sub/source.h5"),
            ("vds_outside", "../secret/source.h5"),
        ):
            vlayout = h5py.VirtualLayout((6,), "i4")
            vlayout[:] = h5py.VirtualSource(source, "values", shape=(6,))
            f.create_virtual_dataset(name, vlayout)
    return {"main": main, "data": data, "outside": outside}


def test_references_outside_the_directory_are_not_followed(layout: dict[str, Path]) -> None:
    store, caught = _parse(layout["main"])
    arrays = _arrays(store)
    expected = np.arange(6, dtype="i4")
    for name in ("inside", "raw_inside", "vds_inside"):
        np.testing.assert_array_equal(arrays[name], expected)
    for name in ("outside", "absolute", "symlinked", "raw_outside", "vds_outside"):
        assert name not in arrays, name
    for link, filename in (
        ("outside", "../secret/source.h5"),
        ("absolute", str(layout["outside"] / "source.h5")),
        ("symlinked", "link.h5"),
    ):
        assert _warned(caught, SkippedLinkWarning, f"/{link}", filename, "outside the directory")
    assert _warned(caught, SkippedDatasetWarning, "'/raw_outside'", "../secret/raw.bin")
    assert _warned(caught, SkippedDatasetWarning, "'/vds_outside'", "../secret/source.h5")
    kinds = {w.message.kind for w in caught if isinstance(w.message, SkippedDatasetWarning)}
    assert kinds == {"external"}


def test_external_files_allow_follows_them(layout: dict[str, Path]) -> None:
    store, caught = _parse(layout["main"], external_files="allow")
    arrays = _arrays(store)
    for name in ("inside", "outside", "absolute", "symlinked", "raw_outside", "vds_outside"):
        np.testing.assert_array_equal(arrays[name], np.arange(6, dtype="i4"))
    assert not [
        w for w in caught if isinstance(w.message, SkippedLinkWarning | SkippedDatasetWarning)
    ]


def test_external_files_option_is_checked() -> None:
    with pytest.raises(ValueError, match="external_files"):
        HDF5Parser(external_files="anywhere")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "outside"),
    [
        ("s3://bucket/archive/2024/b.h5", False),
        ("s3://bucket/archive/b.h5", False),
        ("s3://bucket/other/b.h5", True),
        ("s3://bucket/archive2/b.h5", True),
        ("s3://another/archive/b.h5", True),
        ("file:///archive/b.h5", True),
        ("gs://bucket/archive/b.h5", True),
    ],
)
def test_bucket_prefix(target: str, outside: bool) -> None:
    assert outside_directory("s3://bucket/archive/a.h5", target) is outside


# -- depth -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_GROUP_DEPTH + 50, 1100])
def test_groups_deeper_than_zarr_can_walk_are_left_out(tmp_path: Path, depth: int) -> None:
    path = tmp_path / f"deep{depth}.h5"
    with h5py.File(path, "w") as f:
        group: Any = f
        for _ in range(depth):
            group = group.create_group("g")
            group["values"] = [1, 2]
    store, caught = _parse(path)
    cut = "/" + "/".join(["g"] * (MAX_GROUP_DEPTH + 1))
    assert _warned(caught, SkippedLinkWarning, f"{cut}: group nested {MAX_GROUP_DEPTH + 1} levels")

    def deepest(group: Any, level: int = 0) -> int:  # zarr's groups(), recursively
        return max([level, *(deepest(child, level + 1) for _, child in group.groups())])

    assert deepest(zarr.open_group(store, mode="r", zarr_format=3)) == MAX_GROUP_DEPTH
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = virtualizarr.open_virtual_datatree(
            _url(path), registry=EVERYTHING, parser=HDF5Parser()
        )
    assert len(list(tree.subtree)) == MAX_GROUP_DEPTH + 1


# -- good citizen ----------------------------------------------------------------------------------

_CONVERSION_PROBE = """
import ctypes, json, sys, warnings
import h5py, numpy as np
path, parse = sys.argv[1], sys.argv[2] == "parse"
if parse:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr_fill.hdf5 import HDF5Parser
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        HDF5Parser()("file://" + path, ObjectStoreRegistry({"file://": LocalStore()}))
tag = b"virtualizarr_fill vlen descriptor"
result = {}
with h5py.File(path, "r") as f:
    for name in ("strings", "sequences"):
        opaque = h5py.h5t.create(h5py.h5t.OPAQUE, 16)
        opaque.set_tag(tag)
        out = np.zeros((3, 16), np.uint8)
        try:
            f[name].id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=opaque)
            result[name] = "read"
        except Exception as error:
            result[name] = type(error).__name__ + ": " + str(error)
print(json.dumps(result))
"""


def _conversion_behaviour(path: Path, parse: bool) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _CONVERSION_PROBE, str(path), "parse" if parse else "plain"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    result: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_parsing_leaves_no_conversion_registered_in_libhdf5(tmp_path: Path) -> None:
    """An h5py read of variable-length data into an opaque type of the tag and size the
    parser's descriptor reads used behaves after a parse exactly as in a process that
    never imported the package (libhdf5 finds no conversion path)."""
    path = tmp_path / "strings.h5"
    with h5py.File(path, "w") as f:
        f["strings"] = np.array(["a", "bb", "ccc"], dtype=h5py.string_dtype())
        f["strings"].attrs["names"] = np.array(["x", "yy"], dtype=h5py.string_dtype())
        sequences = f.create_dataset("sequences", (3,), dtype=h5py.vlen_dtype("i4"))
        sequences[:] = [np.arange(n, dtype="i4") for n in (1, 2, 3)]
    after_parse = _conversion_behaviour(path, parse=True)
    untouched = _conversion_behaviour(path, parse=False)
    assert after_parse == untouched
    # Without a registration libhdf5 has no path from strings to an opaque type.
    assert "Conversion function not found" in untouched["strings"], untouched


# -- dimension bookkeeping -------------------------------------------------------------------------

ISSUE23 = "NCAS-CMS+pyfive/tests/data/issue23_A_contiguous.nc"


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("ops", "skipped", "reason"),
    [
        # One bit of lon's attribute table: libhdf5 cannot list lon's attributes. lat
        # used to grow from 5 to 8 values on a phony dimension, without a warning.
        ([{"op": "flip", "pos": 8738, "bit": 2}], "/lon", "its attributes cannot be listed"),
        # lat's _Netcdf4Coordinates names lon's dimension id: lat used to take lon's
        # dimension and length.
        ([{"op": "flip", "pos": 442, "bit": 1}], "/lat", "name dimension 'lon' first"),
        # lon's _Netcdf4Dimid becomes lat's: lat used to take lon's dimension.
        ([{"op": "flip", "pos": 8741, "bit": 1}], "/lat", "which several dimensions claim"),
    ],
)
def test_unreadable_dimension_bookkeeping_changes_no_other_variable(
    corpus_dir: Path, tmp_path: Path, ops: list[dict[str, Any]], skipped: str, reason: str
) -> None:
    from conformance.fuzz.mutations import hdf5_structure

    source = corpus_dir / ISSUE23
    structure = hdf5_structure(str(source))
    ops = ops + [fix for op in ops for fix in structure.checksum_fix(op["pos"])]
    path = tmp_path / "issue23.nc"
    path.write_bytes(apply_ops(source.read_bytes(), ops))
    store, caught = _parse(path)
    assert _warned(caught, SkippedDatasetWarning, f"'{skipped}' skipped", reason)
    root = zarr.open_group(store, mode="r", zarr_format=3)
    clean = zarr.open_group(_parse(source)[0], mode="r", zarr_format=3)
    for name, array in root.arrays():
        expected = clean[name]
        assert array.shape == expected.shape, name
        assert array.metadata.dimension_names == expected.metadata.dimension_names, name
    assert skipped.lstrip("/") not in dict(root.arrays())
