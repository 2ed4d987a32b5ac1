"""The demo: virtualize padded and unpadded files, concatenate, store, read back, compare.

Run with ``scripts/dev.sh demo`` (or ``python examples/demo.py [OUT_DIR]``). It

1. writes sample files: strip TIFFs of 150 rows with RowsPerStrip 12 whose last strip is
   stored short (6 rows) or padded (12 rows), and gzip-compressed HDF5
   files whose (10, 4, 4) chunks over a (25, 7, 9) dataset are stored padded at the edges;
2. parses each with virtualizarr-fill's parsers into virtual datasets (references only);
3. concatenates the TIFFs along ``y`` and the HDF5 files along their first axis: the
   lengths are not chunk multiples, so the results use rectilinear chunk grids, and every
   file's padded edge keeps its truncation/crop codec;
4. writes the combined references to an Icechunk repository and to kerchunk JSON;
5. reads everything back with xarray and compares it, value for value, with numpy
   concatenations of what tifffile and h5py read from the original files.

It exits non-zero if any comparison fails.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

# Icechunk logs storage warnings to stderr by default; the demo's output is the comparison.
os.environ.setdefault("ICECHUNK_LOG", "error")

import h5py
import numpy as np
import tifffile
import xarray as xr

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import virtualizarr_fill  # noqa: E402
from fixtures.make_concat_fixtures import make_concat_fixtures  # noqa: E402
from virtualizarr_fill import TIFFParser  # noqa: E402
from virtualizarr_fill.hdf5 import HDF5Parser  # noqa: E402

TIFF_FILES = ["strip_short_0", "strip_padded_0", "strip_short_1", "strip_padded_1"]
HDF5_FILES = ["chunked_gzip_0", "chunked_gzip_1", "chunked_gzip_2"]


def _registry() -> object:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file:///": LocalStore("/")})


def _describe(name: str, variable: xr.Variable) -> str:
    array = variable.data
    metadata = array.metadata
    grid = metadata.chunk_grid.to_dict()
    codecs = [c["name"] if isinstance(c, dict) else c.to_dict()["name"] for c in metadata.codecs]
    return f"  {name}: shape {variable.shape}, {grid['name']} grid, codecs {codecs}"


def _read_kerchunk(refs: Path) -> xr.Dataset:
    import fsspec
    from zarr.storage import FsspecStore

    fs = fsspec.filesystem("reference", fo=str(refs), remote_protocol="file", asynchronous=True)
    store = FsspecStore(fs, read_only=True, path="")
    return xr.open_zarr(store, consolidated=False, zarr_format=3)


def _check(label: str, actual: np.ndarray, expected: np.ndarray, results: list[bool]) -> None:
    same = actual.shape == expected.shape and np.array_equal(actual, expected)
    results.append(same)
    print(f"  {'OK  ' if same else 'FAIL'} {label}: {actual.shape} {actual.dtype}")


def main(out_dir: Path) -> int:
    from virtualizarr import open_virtual_dataset

    started = time.perf_counter()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    samples = make_concat_fixtures(out_dir / "samples")
    registry = _registry()
    print(f"Sample files written to {out_dir / 'samples'}")

    # --- parse ----------------------------------------------------------------------
    tiffs = [
        open_virtual_dataset(samples[n].as_uri(), registry=registry, parser=TIFFParser())
        for n in TIFF_FILES
    ]
    hdf5s = [
        open_virtual_dataset(samples[n].as_uri(), registry=registry, parser=HDF5Parser())
        for n in HDF5_FILES
    ]
    print("Parsed (references only):")
    for name, vds in zip(TIFF_FILES, tiffs, strict=True):
        print(_describe(name, vds["band_data"].variable))
    for name, vds in zip(HDF5_FILES, hdf5s, strict=True):
        print(_describe(name, vds["data"].variable))

    # --- concatenate -------------------------------------------------------------------
    tiff_vds = xr.concat(
        [vds.drop_vars(["x", "y"], errors="ignore") for vds in tiffs],
        dim="y",
        coords="minimal",
        compat="override",
        combine_attrs="override",
    )
    hdf5_dim = hdf5s[0]["data"].dims[0]
    hdf5_vds = xr.concat(hdf5s, dim=hdf5_dim, coords="minimal", compat="override")
    print("Concatenated:")
    print(_describe("tiff band_data", tiff_vds["band_data"].variable))
    print(_describe("hdf5 data", hdf5_vds["data"].variable))

    # --- the native readers' view --------------------------------------------------------
    expected_tiff = np.concatenate(
        [tifffile.imread(samples[n])[np.newaxis] for n in TIFF_FILES], axis=1
    )
    expected_hdf5 = np.concatenate([h5py.File(samples[n], "r")["data"][...] for n in HDF5_FILES])

    results: list[bool] = []
    print("Read back and compared with tifffile / h5py:")
    import icechunk

    for label, vds, variable, expected in (
        ("TIFF strips (short + padded)", tiff_vds, "band_data", expected_tiff),
        ("HDF5 chunks (padded edges)", hdf5_vds, "data", expected_hdf5),
    ):
        repo_path = out_dir / f"icechunk-{variable}"
        config = icechunk.RepositoryConfig.default()
        container = icechunk.VirtualChunkContainer(
            (out_dir / "samples").as_uri() + "/", icechunk.local_filesystem_store(str(out_dir))
        )
        config.set_virtual_chunk_container(container)
        credentials = icechunk.containers_credentials(
            {container.url_prefix: icechunk.credentials.LocalFileSystemAccess}
        )
        repo = icechunk.Repository.create(
            icechunk.local_filesystem_storage(str(repo_path)),
            config=config,
            authorize_virtual_chunk_access=credentials,
        )
        session = repo.writable_session("main")
        virtualizarr_fill.to_icechunk(vds, session.store)
        session.commit(f"virtual {variable}")
        reopened = xr.open_zarr(
            repo.readonly_session("main").store, consolidated=False, zarr_format=3
        )
        _check(f"{label} via Icechunk", reopened[variable].values, expected, results)

        # Rectilinear grids need Zarr format 3 references (format 2 cannot describe them).
        refs = out_dir / f"kerchunk-{variable}.json"
        virtualizarr_fill.to_kerchunk(vds, str(refs), format="json")
        _check(
            f"{label} via kerchunk JSON", _read_kerchunk(refs)[variable].values, expected, results
        )

    elapsed = time.perf_counter() - started
    passed = sum(results)
    print(f"{passed}/{len(results)} comparisons equal the native readers ({elapsed:.1f} s)")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT / "demo-output"
    sys.exit(main(target))
