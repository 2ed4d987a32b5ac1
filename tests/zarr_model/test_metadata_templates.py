"""The validated metadata templates (:mod:`virtualizarr_fill.zarr_model.metadata_templates`)
on HDF5 files.

The TIFF side is covered by ``tests/tiff/test_tiff_parse_caches.py``. Here every HDF5 and
netCDF-4 file of the corpus must give the same virtual store whether each file is parsed
with the cache emptied first (every metadata validated afresh), after all the others in
either order (later files copy earlier ones' validated metadata), or with the cache
bypassed - so a cached copy can never carry one file's values into another's.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestArray, ManifestGroup

from tests._assertions import assert_equals_fresh_validation, json_value
from virtualizarr_fill.errors import VirtualizarrFillError
from virtualizarr_fill.hdf5 import HDF5Parser
from virtualizarr_fill.zarr_model import json_values, metadata_templates
from virtualizarr_fill.zarr_model.data_types import zarr_data_type

pytestmark = pytest.mark.corpus

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
HDF5_SUFFIXES = {".h5", ".hdf5", ".nc", ".he5", ".nc4", ".h5ad"}


@pytest.fixture(scope="module")
def hdf5_files(corpus_dir: Path) -> list[Path]:
    files = sorted(p for p in corpus_dir.rglob("*") if p.suffix.lower() in HDF5_SUFFIXES)
    assert len(files) > 80
    return files


def _array_record(array: ManifestArray) -> dict[str, Any]:
    fill = np.asarray(array.metadata.fill_value)
    return {
        "document": json_value(array.metadata.to_dict()),
        "codec_classes": [type(c).__qualname__ for c in array.metadata.codecs],
        "fill": (fill.dtype.str, fill.tobytes().hex()),
    }


def _group_record(group: ManifestGroup) -> dict[str, Any]:
    return {
        "arrays": {name: _array_record(a) for name, a in group.arrays.items()},
        "groups": {name: _group_record(g) for name, g in group.groups.items()},
    }


def _parse(path: Path) -> ManifestGroup:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HDF5Parser()(f"file://{path}", REGISTRY)._group


def _record(path: Path) -> Any:
    try:
        return _group_record(_parse(path))
    except VirtualizarrFillError as error:
        return {"error": type(error).__name__}


def _records(files: list[Path]) -> Iterator[tuple[Path, Any]]:
    for path in files:
        yield path, _record(path)


def _arrays(group: ManifestGroup) -> Iterator[tuple[str, ManifestArray]]:
    yield from group.arrays.items()
    for child in group.groups.values():
        yield from _arrays(child)


@pytest.mark.slow  # over 10 s on two cores: CI runs it, the default local run does not
def test_cold_warm_and_bypassed_caches_give_identical_hdf5_stores(
    hdf5_files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = {}
    for path in hdf5_files:
        metadata_templates.clear_cache()
        cold[path] = _record(path)
    metadata_templates.clear_cache()
    forward = dict(_records(hdf5_files))
    assert metadata_templates._validated.cache_info().hits > 0, "the cache was never used"
    backward = dict(_records(hdf5_files[::-1]))
    # Bypassed: every key uncacheable, so every metadata is validated with its attributes.
    monkeypatch.setattr(metadata_templates, "exact_key", _uncacheable)
    bypassed = dict(_records(hdf5_files))
    parsed = [p for p in hdf5_files if "error" not in cold[p]]
    assert len(parsed) > 80
    for path in hdf5_files:
        assert forward[path] == cold[path], path
        assert backward[path] == cold[path], path
        assert bypassed[path] == cold[path], path


def _uncacheable(value: Any) -> Any:
    raise json_values.Uncacheable


def test_every_hdf5_metadata_equals_a_fresh_validation(hdf5_files: list[Path]) -> None:
    checked = 0
    for path in hdf5_files:
        try:
            root = _parse(path)
        except VirtualizarrFillError:
            continue
        for name, array in _arrays(root):
            assert_equals_fresh_validation(array.metadata, (path, name))
            checked += 1
    assert checked > 300


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("r", "<f4"), ("i", "<f4")]),
        np.dtype("O"),
        np.dtypes.StringDType(na_object=None),
        np.dtypes.StringDType(coerce=False),
    ],
    ids=["record", "object", "vlen-string-with-na", "vlen-string-not-coercing"],
)
def test_data_types_without_an_exact_key_are_built_afresh(dtype: np.dtype) -> None:
    with pytest.raises(json_values.Uncacheable):
        metadata_templates._dtype_key(dtype)


def test_default_string_dtype_metadata_is_cached_and_equals_a_fresh_one() -> None:
    metadata_templates.clear_cache()
    dtype = np.dtypes.StringDType()
    common: dict[str, Any] = {
        "shape": (3,),
        "dtype": dtype,
        "data_type": zarr_data_type(dtype),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": (3,)}},
        "codecs": [{"name": "vlen-utf8"}],
        "fill_value": "",
        "attributes": {},
        "dimension_names": ("x",),
    }
    first = metadata_templates.array_metadata(**common)
    second = metadata_templates.array_metadata(**{**common, "attributes": {"units": "m"}})
    assert metadata_templates._validated.cache_info().hits == 1
    assert second.attributes == {"units": "m"} and first.attributes == {}
    assert_equals_fresh_validation(first, "first")
    assert_equals_fresh_validation(second, "second")


def test_fill_values_that_compare_equal_get_their_own_metadata() -> None:
    metadata_templates.clear_cache()
    common: dict[str, Any] = {
        "shape": (4,),
        "dtype": np.dtype("<f4"),
        "data_type": zarr_data_type(np.dtype("<f4")),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": (2,)}},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
        "dimension_names": ("x",),
    }
    zero = metadata_templates.array_metadata(fill_value=0.0, **common)
    negative_zero = metadata_templates.array_metadata(fill_value=-0.0, **common)
    assert np.signbit(negative_zero.fill_value) and not np.signbit(zero.fill_value)
