"""Kerchunk parquet references of arrays with chunks missing from their manifest (the
holes of a mosaic built with ``--allow-gaps``, unwritten HDF5 chunks): the missing chunks
read back as the fill value through fsspec's parquet reader, as the native readers give
them (``rasterio.merge``, h5py).

fsspec stores the chunk paths of a record as a categorical column when few files hold
many chunks, and reads a missing chunk's null path from such a column as NaN, on which
it failed (``TypeError: argument of type 'float' is not iterable``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import virtualizarr_fill
from tests._manifest_builders import (
    concat_fixtures,
    hdf5_manifest_array,
    kerchunk_read,
    native_hdf5,
    virtual_dataset,
)
from tests._native_references import rasterio_merge
from tests.assemble.test_mosaic_placement import NODATA, _tiles
from virtualizarr_fill import to_kerchunk
from virtualizarr_fill.cli import EXIT_OK, main

__all__ = ["concat_fixtures"]


def _read_parquet(path: Path, **options: object) -> xr.Dataset:
    with warnings.catch_warnings():
        # fsspec's parquet reader lists its own ``.zmetadata`` index next to the arrays
        warnings.filterwarnings("ignore", message="Object at .zmetadata is not recognized")
        return virtualizarr_fill.open_kerchunk(path, **options).load()  # type: ignore[arg-type]


def _null_paths(references: Path, array: str) -> int:
    """How many chunk records of ``array`` hold no path (missing chunks, and the unused
    rows of the record)."""
    frame = pd.read_parquet(references / array / "refs.0.parq", columns=["path"])
    return int(frame["path"].isna().sum())


def test_unwritten_hdf5_chunks_read_as_h5py_from_parquet(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    path = concat_fixtures["chunked_fill_0"]
    vds = virtual_dataset({"data": hdf5_manifest_array(path)})
    refs = tmp_path / "unwritten.parquet"
    to_kerchunk(vds, str(refs), format="parquet", zarr_format=3)
    expected = native_hdf5(path)
    # the fixture has unwritten chunks, which h5py reads as the header fill value
    assert _null_paths(refs, "data") > 0
    assert (expected == -9999.0).any()
    np.testing.assert_array_equal(kerchunk_read(str(refs)).data.values, expected)


@pytest.mark.parametrize("suffix", ["parquet", "json"])
def test_mosaic_with_a_hole_reads_as_rasterio_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    paths = _tiles(tmp_path / "tiles", drop={(1, 1)})
    refs = tmp_path / f"mosaic.{suffix}"
    code = main(["build", *map(str, paths), "--out", str(refs), "--allow-gaps", "--workers", "0"])
    _, err = capsys.readouterr()
    assert code == EXIT_OK, err
    merged, _ = rasterio_merge(paths)
    assert (merged == NODATA).any()  # the hole, as rasterio.merge fills it
    raw = _read_parquet(refs, mask_and_scale=False)
    np.testing.assert_array_equal(raw["band_data"].values, merged)
    # decoded, the hole is masked as xarray masks the tiles' nodata
    masked = _read_parquet(refs)["band_data"].values
    np.testing.assert_array_equal(np.isnan(masked), merged == NODATA)
    np.testing.assert_array_equal(masked[merged != NODATA], merged[merged != NODATA])
