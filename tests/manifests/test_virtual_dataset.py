"""The parsers' virtual datasets equal VirtualiZarr's construction of them.

``FileManifestStore.to_virtual_dataset`` builds the dataset from the parsed metadata
(``virtualizarr_fill/manifests/dataset.py``); VirtualiZarr's ``construct_virtual_dataset``
opens the store with ``xr.open_zarr`` instead. For every corpus file and for each way of
choosing what to load, both must give the same variables, coordinates, indexes,
attributes, encodings, loaded values and manifests.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from typing import Any

import pytest
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.xarray import construct_virtual_dataset

from fixtures import make_hdf5_fixtures, make_tiff_fixtures
from tests._assertions import assert_same_dataset
from tests.conftest import CORPUS_DIR
from virtualizarr_fill import VirtualizarrFillError
from virtualizarr_fill.formats import AutoParser

# Files whose root group holds thousands of arrays (minutes to compare, nothing new).
_SLOW = ("test_large_group", "chunked_v4_datasets", "fixed_array_paged_datasets")


def _corpus() -> list[str]:
    manifest = CORPUS_DIR / "MANIFEST.tsv"
    if not manifest.is_file():
        return ["<corpus missing>"]
    with manifest.open() as f:
        names = [row["corpus_path"] for row in csv.DictReader(f, delimiter="\t")]
    return [n for n in names if n.endswith((".tif", ".tiff", ".h5", ".hdf5", ".nc", ".he5"))
            and not any(s in n for s in _SLOW)]


def _compare_part_dataset(store: Any) -> None:
    """The dataset rebuilt from a file's part (what combining keeps of a file) equals the
    file's virtual dataset."""
    from virtualizarr_fill.assemble.parts import file_part, part_dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = store.to_virtual_dataset()
        rebuilt = part_dataset(file_part(store))
    assert_same_dataset(rebuilt, expected)


def _compare(path: Path) -> None:
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = AutoParser()(f"file://{path}", registry)
    except VirtualizarrFillError:
        return  # refused with a project error: nothing to compare (the corpus tests say why)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store.to_virtual_dataset()
    except Exception:
        pass  # a dataset that cannot be built is compared with VirtualiZarr's below
    else:
        _compare_part_dataset(store)
    for loadable, decode_times in [(None, None), ([], None), (None, False)]:
        outcomes = []
        for ours_first in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    if ours_first:
                        built = store.to_virtual_dataset(
                            loadable_variables=loadable, decode_times=decode_times
                        )
                    else:
                        built = construct_virtual_dataset(
                            manifest_store=store,
                            loadable_variables=loadable,
                            decode_times=decode_times,
                        )
                    outcomes.append(built)
                except Exception as error:  # both must fail alike
                    outcomes.append(error)
        ours, theirs = outcomes
        if isinstance(theirs, Exception):
            assert isinstance(ours, type(theirs)), (ours, theirs)
            continue
        assert not isinstance(ours, Exception), ours
        assert_same_dataset(ours, theirs)


@pytest.mark.corpus
@pytest.mark.parametrize("name", _corpus())
def test_virtual_dataset_equals_virtualizarrs(corpus_dir: Path, name: str) -> None:
    _compare(corpus_dir / name)


@pytest.fixture(scope="module")
def tiff_fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("vds_tiff")
    return make_tiff_fixtures.write_fixtures(directory, list(make_tiff_fixtures.FIXTURES))


@pytest.mark.parametrize("name", sorted(make_tiff_fixtures.FIXTURES))
def test_virtual_dataset_of_tiff_fixtures(tiff_fixtures: dict[str, Path], name: str) -> None:
    _compare(tiff_fixtures[name])


_HDF5_MAKERS = sorted(n for n in dir(make_hdf5_fixtures) if n.startswith("make_"))


@pytest.mark.parametrize("maker", _HDF5_MAKERS)
def test_virtual_dataset_of_hdf5_fixtures(tmp_path: Path, maker: str) -> None:
    if maker == "make_superblocks":  # writes one file per version into a folder
        for path in make_hdf5_fixtures.make_superblocks(tmp_path).values():
            _compare(path)
        return
    path = tmp_path / f"{maker}.h5"
    getattr(make_hdf5_fixtures, maker)(path)
    _compare(path)
