"""open_virtual_mfdataset of strip TIFFs, serially and in worker processes.

Workers are *spawned* (fresh interpreters, as dask's process scheduler and a
``ProcessPoolExecutor`` with the spawn context start them): whatever they unpickle must
bring virtualizarr-fill's adapter, its codecs (zarr entry points) and zarr's
``array.rectilinear_chunks`` flag with it.

This module imports virtualizarr-fill only inside functions, so that a spawned worker
unpickling the probe functions below starts without it.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

NAMES = ["strip_padded_0", "strip_short_1", "strip_padded_2"]


@pytest.fixture(scope="module")
def fixture_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests._manifest_builders import make_concat_fixtures

    return make_concat_fixtures.make_concat_fixtures(tmp_path_factory.mktemp("mf-fixtures"))


def _expected(fx: dict[str, Path]) -> np.ndarray:
    from tests._manifest_builders import native_tiff

    return np.concatenate([native_tiff(fx[n]) for n in NAMES])


def _open(fx: dict[str, Path], parallel: Any) -> Any:
    import virtualizarr

    from tests._manifest_builders import StripTiffParser, local_registry, worker_state

    return virtualizarr.open_virtual_mfdataset(
        [str(fx[n]) for n in NAMES],
        registry=local_registry(),
        parser=StripTiffParser(),
        combine="nested",
        concat_dim="y",
        parallel=parallel,
        preprocess=worker_state,
    )


def _check(vds: Any, fx: dict[str, Path]) -> None:
    from tests._manifest_builders import read_manifest_array
    from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, edge_handling_of

    assert vds.band.shape == (450, 21)
    assert edge_handling_of(vds.band.data.metadata.codecs) is EdgeHandling.TRUNCATE
    np.testing.assert_array_equal(read_manifest_array(vds.band.data), _expected(fx))


def test_serial(fixture_files: dict[str, Path]) -> None:
    vds = _open(fixture_files, parallel=False)
    assert vds.attrs["opened_in_pid"] == os.getpid()
    _check(vds, fixture_files)


def test_dask_process_scheduler(fixture_files: dict[str, Path]) -> None:
    import dask

    with dask.config.set(scheduler="processes", num_workers=1):
        vds = _open(fixture_files, parallel="dask")
    assert vds.attrs["opened_in_pid"] != os.getpid()
    assert vds.attrs["array_type"] == "FillManifestArray"
    _check(vds, fixture_files)


# --------------------------------------------------------------------------- bare workers


def _probe() -> tuple[bool, bool]:
    """Whether virtualizarr_fill is imported and the rectilinear flag is on, in this process."""
    import sys

    import zarr

    return "virtualizarr_fill" in sys.modules, bool(
        zarr.config.get("array.rectilinear_chunks", False)
    )


def _read_values(marr: Any) -> np.ndarray:
    """Read a ManifestArray in this process with VirtualiZarr and zarr only."""
    import zarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.manifests import ManifestGroup, ManifestStore

    group = ManifestGroup(arrays={"a": marr}, attributes={})
    store = ManifestStore(group, registry=ObjectStoreRegistry({"file://": LocalStore()}))
    return np.asarray(zarr.open_array(store, path="a", mode="r", zarr_format=3)[...])


def test_unpickling_a_rectilinear_array_brings_the_extension(
    fixture_files: dict[str, Path],
) -> None:
    from tests._manifest_builders import concatenate, read_manifest_array, tiff_manifest_array

    arrays = [tiff_manifest_array(fixture_files[n]) for n in NAMES]
    local = concatenate(arrays, axis=0)
    context = multiprocessing.get_context("spawn")
    env = os.environ.pop("ZARR_ARRAY__RECTILINEAR_CHUNKS", None)
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
            assert executor.submit(_probe).result() == (False, False)
            # The worker unpickles rectilinear arrays (which turns zarr's rectilinear flag
            # on there), concatenates them with their own array-function dispatch, and
            # reads a concatenation through the truncate codec.
            remote: Any = executor.submit(np.concatenate, arrays, axis=0).result()
            values = executor.submit(_read_values, local).result()
            assert executor.submit(_probe).result() == (True, True)
    finally:
        if env is not None:
            os.environ["ZARR_ARRAY__RECTILINEAR_CHUNKS"] = env
    assert remote.metadata == local.metadata
    np.testing.assert_array_equal(values, _expected(fixture_files))
    np.testing.assert_array_equal(read_manifest_array(remote), values)


# --------------------------------------------------------------------------- the TIFF parser

ZLIB_NAMES = ["strip_padded_zlib_0", "strip_short_zlib_1", "strip_padded_zlib_2"]


def _open_with_tiff_parser(fx: dict[str, Path], parallel: Any) -> Any:
    import virtualizarr

    from tests._manifest_builders import local_registry, worker_state
    from virtualizarr_fill.tiff.parser import TIFFParser

    return virtualizarr.open_virtual_mfdataset(
        [str(fx[n]) for n in ZLIB_NAMES],
        registry=local_registry(),
        parser=TIFFParser(),
        combine="nested",
        concat_dim="y",
        coords="minimal",
        compat="override",
        parallel=parallel,
        preprocess=worker_state,
    )


def _check_tiff_parser(vds: Any, fx: dict[str, Path]) -> None:
    from tests._manifest_builders import native_tiff, read_manifest_array

    expected = np.concatenate([native_tiff(fx[n]) for n in ZLIB_NAMES])
    assert vds.band_data.dims == ("band", "y", "x")
    np.testing.assert_array_equal(read_manifest_array(vds.band_data.data)[0], expected)


def test_tiff_parser_serial(fixture_files: dict[str, Path]) -> None:
    _check_tiff_parser(_open_with_tiff_parser(fixture_files, False), fixture_files)


def test_tiff_parser_in_a_process_pool(fixture_files: dict[str, Path]) -> None:
    # The spawned worker unpickles the parser and the preprocess hook, which records
    # that it built FillManifestArrays with the rectilinear flag on.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
        vds = _open_with_tiff_parser(fixture_files, executor)
    assert vds.attrs["opened_in_pid"] != os.getpid()
    assert vds.attrs["array_type"] == "FillManifestArray"
    _check_tiff_parser(vds, fixture_files)


# --------------------------------------------------------------------------- the HDF5 parser
# The HDF5 parser runs in a spawned worker whose process holds only h5py's libhdf5:
# netCDF4 (imported by other test modules) points HDF5_PLUGIN_PATH at filter plugins
# linked against its own copy of the library, which must not be inherited.


@pytest.fixture
def hdf5_executor(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessPoolExecutor]:
    monkeypatch.delenv("HDF5_PLUGIN_PATH", raising=False)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
        yield executor


def test_hdf5_parser_files(
    fixture_files: dict[str, Path], hdf5_executor: ProcessPoolExecutor
) -> None:
    import virtualizarr

    from tests._manifest_builders import local_registry, native_hdf5, read_manifest_array
    from virtualizarr_fill.hdf5.parser import HDF5Parser

    names = [f"chunked_gzip_{k}" for k in range(3)]
    natives = [native_hdf5(fixture_files[n]) for n in names]
    for axis, dim in enumerate(["phony_dim_0", "phony_dim_1"]):
        vds = virtualizarr.open_virtual_mfdataset(
            [str(fixture_files[n]) for n in names],
            registry=local_registry(),
            parser=HDF5Parser(),
            combine="nested",
            concat_dim=dim,
            parallel=hdf5_executor,
        )
        expected = np.concatenate(natives, axis=axis)
        np.testing.assert_array_equal(read_manifest_array(vds.data.data), expected)


@pytest.mark.corpus
def test_hdf5_parser_corpus_partial_edge(
    corpus_dir: Path, hdf5_executor: ProcessPoolExecutor
) -> None:
    import virtualizarr

    from tests._manifest_builders import (
        file_url,
        local_registry,
        native_hdf5,
        read_manifest_array,
    )
    from virtualizarr_fill.hdf5.parser import HDF5Parser
    from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, edge_handling_of

    path = corpus_dir / "jjhelmus+pyfive" / "compressed_v1.hdf5"
    # file_url: VirtualiZarr would percent-encode the "+" of a bare path (Path.as_uri).
    vds = virtualizarr.open_virtual_mfdataset(
        [file_url(path), file_url(path)],
        registry=local_registry(),
        parser=HDF5Parser(),
        combine="nested",
        concat_dim="phony_dim_0",
        parallel=hdf5_executor,
    )
    data = vds.temperature.data
    assert edge_handling_of(data.metadata.codecs) is EdgeHandling.TRUNCATE
    native = native_hdf5(path, "temperature")
    np.testing.assert_array_equal(read_manifest_array(data), np.concatenate([native, native]))
