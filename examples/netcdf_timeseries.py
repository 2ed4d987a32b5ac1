"""A netCDF-4 time series -> one virtual dataset -> Icechunk and kerchunk references.

Run ``python examples/netcdf_timeseries.py [OUT_DIR]``. The example

1. writes 4 netCDF-4 files of 10 daily time steps each, ``tas(time, lat, lon)`` chunked
   4 steps per chunk and deflate-compressed, with a ``_FillValue`` and missing values.
   10 is not a multiple of 4: HDF5 stores every file's last time chunk padded (2 real
   steps + 2 of padding);
2. virtualizes each file with :class:`virtualizarr_fill.HDF5Parser` (metadata only) and
   concatenates them along ``time``. VirtualiZarr alone refuses this ("partial chunks");
   here the result has a rectilinear chunk grid whose time edges are ``4, 4, 2`` per file
   (the last file's final chunk keeps its stored size 4 and overhangs the array, as in
   any Zarr array), and the truncate codec drops the padding of each file's last chunk;
3. writes the references to an Icechunk repository and, the same dataset, to kerchunk
   JSON references (Zarr format 3, the format that has rectilinear grids);
4. opens both with xarray and compares them, decoded (times, missing values), with
   ``xr.open_mfdataset`` of the original files through h5netcdf.

The same from the command line::

    virtualizarr-fill build 'OUT_DIR/series/*.nc' --concat-dim time --out OUT_DIR/series.icechunk
    virtualizarr-fill build 'OUT_DIR/series/*.nc' --concat-dim time --out OUT_DIR/series.json

It exits non-zero if a comparison fails.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _samples

import virtualizarr_fill

FILES = 4


def _open_kerchunk(path: Path) -> xr.Dataset:
    """Kerchunk references (Zarr format 3) through fsspec's reference filesystem."""
    import fsspec
    from zarr.storage import FsspecStore

    fs = fsspec.filesystem("reference", fo=str(path), remote_protocol="file", asynchronous=True)
    return xr.open_zarr(FsspecStore(fs, read_only=True, path=""), consolidated=False, zarr_format=3)


def _same(label: str, actual: xr.Dataset, expected: xr.Dataset) -> bool:
    try:
        xr.testing.assert_identical(actual[["tas"]].load(), expected[["tas"]].load())
    except AssertionError as error:
        print(f"  FAIL {label}: {str(error).splitlines()[0]}")
        return False
    print(f"  OK   {label}")
    return True


def main(out_dir: Path) -> int:
    from virtualizarr import open_virtual_dataset

    from virtualizarr_fill.hdf5 import HDF5Parser

    if out_dir.exists():
        shutil.rmtree(out_dir)
    files = _samples.write_netcdf_series(out_dir / "series", FILES)
    print(f"{len(files)} netCDF-4 files written to {out_dir / 'series'}")

    # --- virtualize and concatenate --------------------------------------------------
    registry = _samples.local_registry()
    parser = HDF5Parser()
    virtual = [open_virtual_dataset(p.as_uri(), registry=registry, parser=parser) for p in files]
    series = xr.combine_nested(
        virtual,
        concat_dim="time",
        data_vars="minimal",  # lat/lon are not stacked along time
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",  # keeps the attributes all files share
    )
    edges = series["tas"].data.metadata.chunk_grid.chunk_shapes[0]
    print(f"virtual series: {dict(series.sizes)}, time chunks {list(edges)}")

    # --- the references, two ways ----------------------------------------------------
    repo = _samples.icechunk_repository(out_dir / "series.icechunk", out_dir / "series")
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(series, session.store)
    session.commit(f"{FILES} netCDF files along time")
    refs = out_dir / "series.json"
    virtualizarr_fill.to_kerchunk(series, str(refs), format="json")
    print(f"wrote {out_dir / 'series.icechunk'} and {refs}")

    # --- read back and compare with the files themselves --------------------------------
    expected = xr.open_mfdataset(
        files, engine="h5netcdf", combine="nested", concat_dim="time", data_vars="minimal"
    )
    from_icechunk = xr.open_zarr(
        repo.readonly_session("main").store,
        consolidated=False,
        zarr_format=3,
    )
    results = [
        _same("Icechunk equals the netCDF files (decoded)", from_icechunk, expected),
        _same("kerchunk JSON equals the netCDF files (decoded)", _open_kerchunk(refs), expected),
    ]
    expected.close()
    return 0 if all(results) else 1


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("netcdf-output")
    sys.exit(main(target))
