"""Parsing many files at once -- from threads and from processes -- gives the same results
as parsing them one after the other: the same Zarr metadata, the same chunk references and
the same values read back.

The parsers keep no state between calls, but tifffile, h5py (which serialises libhdf5
behind one lock), zarr's event loop and obstore all run underneath; this is where a
shared cache, a non-reentrant file object or a global codec registration would show.
Parsers are sent to the worker processes pickled, as Dask and ``open_virtual_mfdataset``
send them.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from virtualizarr_fill.hdf5 import HDF5Parser
from virtualizarr_fill.tiff import TIFFParser

pytestmark = pytest.mark.corpus

TIFF_FILES = (
    "rasterio+rasterio/byte.tif",
    "rasterio+rasterio/float_nan.tif",
    "rasterio+rasterio/rotated.tif",
    "OSGeo+PROJ/test_vgrid_bigendian.tif",
    "OSGeo+PROJ/test_vgrid_deflate_floatingpointpredictor.tif",
    "OSGeo+PROJ/test_hgrid_tiled_separate.tif",
    "image-rs+image-tiff/geo-5b.tif",
    "image-rs+image-tiff/BigTIFFMotorola.tif",
    "image-rs+image-tiff/int16_zstd.tif",
    "mapnik+test-data/tiff_rgb8_stripped_band.tif",
    "cogeotiff+rio-tiler/cog_uint8_rgba.tif",
    "cogeotiff+rio-tiler-pds/AOT.tif",
)
HDF5_FILES = (
    "jjhelmus+pyfive/fillvalue_earliest.hdf5",
    "jjhelmus+pyfive/fillvalue_latest.hdf5",
    "jjhelmus+pyfive/earliest.hdf5",
    "jjhelmus+pyfive/compressed_v1.hdf5",
    "fsspec+kerchunk/hdf5_mali_chunk.h5",
    "fsspec+kerchunk/vlen.h5",
    "NCAS-CMS+pyfive/tests/data/netcdf4_classic.nc",
    "NCAS-CMS+pyfive/tests/compact.hdf5",
    "corteva+rioxarray/tmmx_20190121.nc",
)
ROUNDS = 2  # every file is parsed this many times in each concurrent run


def _digest(values: np.ndarray) -> str:
    if values.dtype.kind in "OTU":
        payload = json.dumps([str(v) for v in values.ravel().tolist()]).encode()
    else:
        payload = np.ascontiguousarray(values).tobytes()
    return hashlib.sha256(payload + str(values.shape).encode()).hexdigest()


def _manifest_group_summary(group: Any, prefix: str = "") -> dict[str, Any]:
    """Metadata and chunk references of every array under a ManifestGroup."""
    out: dict[str, Any] = {}
    for name, array in sorted(group.arrays.items()):
        manifest = array.manifest
        out[prefix + name] = {
            "metadata": json.dumps(array.metadata.to_dict(), sort_keys=True, default=str),
            "references": json.dumps(manifest.dict(), sort_keys=True, default=str),
        }
    for name, child in sorted(group.groups.items()):
        out.update(_manifest_group_summary(child, f"{prefix}{name}/"))
    return out


def _values_summary(store: Any) -> dict[str, str]:
    """The digest of every array's values read back through zarr."""
    root = zarr.open_group(store, mode="r", zarr_format=3)
    digests = {}
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        prefix, group = stack.pop()
        for name, array in group.arrays():
            digests[prefix + name] = _digest(np.asarray(array[...]))
        stack.extend((f"{prefix}{name}/", child) for name, child in group.groups())
    return digests


def describe(parser: Any, path: str) -> dict[str, Any]:
    """Parse ``path`` and summarise the result (module-level: runs in worker processes)."""
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skipped datasets warn identically every time
        store = parser("file://" + path, registry)
        # VirtualiZarr offers no public accessor for a ManifestStore's group.
        references = _manifest_group_summary(store._group)
        values = _values_summary(store)
    return {"file": path, "references": references, "values": values}


def _jobs(corpus: Path) -> list[tuple[Any, str]]:
    jobs: list[tuple[Any, str]] = [(TIFFParser(), str(corpus / n)) for n in TIFF_FILES]
    jobs += [(HDF5Parser(), str(corpus / n)) for n in HDF5_FILES]
    return jobs


@pytest.fixture(scope="module")
def serial(corpus_dir: Path) -> dict[str, dict[str, Any]]:
    results = {}
    for parser, path in _jobs(corpus_dir):
        summary = describe(parser, path)
        assert summary["references"], f"{path}: no arrays"
        results[path] = summary
    return results


def _check(results: list[dict[str, Any]], serial: dict[str, dict[str, Any]]) -> None:
    assert len(results) == len(serial) * ROUNDS
    for result in results:
        expected = serial[result["file"]]
        assert result["references"] == expected["references"], result["file"]
        assert result["values"] == expected["values"], result["file"]


def test_threads_match_serial(corpus_dir: Path, serial: dict[str, dict[str, Any]]) -> None:
    jobs = _jobs(corpus_dir) * ROUNDS
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: describe(*job), jobs))
    _check(results, serial)


def test_processes_match_serial(corpus_dir: Path, serial: dict[str, dict[str, Any]]) -> None:
    # spawn: forking a process that runs zarr's event-loop thread is unsafe.
    context = multiprocessing.get_context("spawn")
    jobs = _jobs(corpus_dir) * ROUNDS
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        futures = [pool.submit(describe, parser, path) for parser, path in jobs]
        results = [future.result(timeout=300) for future in futures]
    _check(results, serial)


def test_one_parser_shared_by_threads(corpus_dir: Path, serial: dict[str, dict[str, Any]]) -> None:
    """A single parser instance used from many threads at once (as a Dask worker does)."""
    tiff, hdf5 = TIFFParser(), HDF5Parser()
    jobs = [(tiff, str(corpus_dir / n)) for n in TIFF_FILES]
    jobs += [(hdf5, str(corpus_dir / n)) for n in HDF5_FILES]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: describe(*job), jobs * ROUNDS))
    _check(results, serial)


_THREAD_STRESS = r"""
import sys, warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import h5py, numpy as np
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr_fill.hdf5 import HDF5Parser

directory = Path(sys.argv[1])
paths = []
for i in range(40):
    path = directory / f"f{i}.nc"
    with h5py.File(path, "w") as f:
        # A filtered dataset whose last chunk is partial: the parser asks libhdf5
        # whether partial edge chunks are filtered.
        f.create_dataset("tas", data=np.arange(7 * 5, dtype="f4").reshape(7, 5) + i,
                         chunks=(4, 5), compression="gzip")
    paths.append(path)
registry = ObjectStoreRegistry({"file://": LocalStore()})
parser = HDF5Parser()

def parse(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = parser(f"file://{path}", registry)
    return store._group.arrays["tas"].manifest.dict()

serial = [parse(p) for p in paths]
for _ in range(15):
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(parse, paths)) == serial
print("ok")
"""


def test_hdf5_parsing_from_threads_does_not_crash(tmp_path: Path) -> None:
    """Every direct libhdf5 call must hold h5py's lock, or threads race inside libhdf5
    (a segmentation fault, not an exception): run in a child process to see a crash."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", _THREAD_STRESS, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
