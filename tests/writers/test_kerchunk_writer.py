"""virtualizarr_fill.to_kerchunk: Zarr format 2 references for regular grids as VirtualiZarr
writes them, Zarr format 3 references (dict, JSON, parquet) for rectilinear arrays.

References are read back through fsspec's reference filesystem and compared with the
native readers.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import xarray as xr
from zarr.storage import FsspecStore

from tests._manifest_builders import (
    ROUND_TRIP_CASES,
    concat_fixtures,
    hdf5_manifest_array,
    kerchunk_read,
    native_hdf5,
    native_tiff,
    round_trip_case,
    tiff_manifest_array,
    virtual_dataset,
    with_attributes,
    with_edge_codec,
)
from virtualizarr_fill import to_kerchunk
from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling

__all__ = ["concat_fixtures"]

TIFFS = ["strip_padded_0", "strip_short_1", "strip_padded_2"]


def _tiff_concat(fx: dict[str, Path]) -> tuple[xr.Dataset, np.ndarray]:
    vds = xr.concat([virtual_dataset({"band": tiff_manifest_array(fx[n])}) for n in TIFFS], "y")
    return vds, np.concatenate([native_tiff(fx[n]) for n in TIFFS])


def _read_parquet(path: Path) -> xr.Dataset:
    # fsspec's parquet reader lists its own ``.zmetadata`` index next to the arrays,
    # which zarr reports as an unrecognised object of the hierarchy.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Object at .zmetadata is not recognized")
        return kerchunk_read(str(path))


def _read_v2(refs: Any) -> xr.Dataset:
    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="file", asynchronous=True)
    store = FsspecStore(fs, read_only=True, path="")
    return xr.open_zarr(store, consolidated=False, zarr_format=2).load()


def test_rectilinear_v3_dict_json_parquet(concat_fixtures: dict[str, Path], tmp_path: Path) -> None:
    vds, expected = _tiff_concat(concat_fixtures)
    refs = to_kerchunk(vds, format="dict", zarr_format=3)
    document = json.loads(refs["refs"]["band/zarr.json"])
    assert document["chunk_grid"]["name"] == "rectilinear"
    np.testing.assert_array_equal(kerchunk_read(refs).band.values, expected)

    to_kerchunk(vds, str(tmp_path / "refs.json"), format="json", zarr_format=3)
    np.testing.assert_array_equal(kerchunk_read(str(tmp_path / "refs.json")).band.values, expected)

    to_kerchunk(vds, str(tmp_path / "refs.parq"), format="parquet", zarr_format=3, record_size=7)
    assert len(list((tmp_path / "refs.parq" / "band").glob("refs.*.parq"))) == 6  # 39 refs / 7
    np.testing.assert_array_equal(_read_parquet(tmp_path / "refs.parq").band.values, expected)


def test_hdf5_crop_v3_parquet_and_unwritten_chunks(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    paths = [concat_fixtures[f"chunked_gzip_{k}"] for k in range(2)]
    vds = xr.concat([virtual_dataset({"data": hdf5_manifest_array(p)}) for p in paths], dim="y")
    to_kerchunk(vds, str(tmp_path / "h5.parq"), format="parquet", zarr_format=3)
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=1)
    np.testing.assert_array_equal(_read_parquet(tmp_path / "h5.parq").data.values, expected)

    # Unwritten chunks have no reference and read as the fill value (parquet:
    # tests/writers/test_kerchunk_parquet_holes.py).
    paths = [concat_fixtures[f"chunked_fill_{k}"] for k in range(2)]
    vds = xr.concat([virtual_dataset({"data": hdf5_manifest_array(p)}) for p in paths], dim="y")
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=1)
    refs = to_kerchunk(vds, format="dict", zarr_format=3)
    assert "data/c.0.0.0" not in refs["refs"] and "data/c.0.0.1" in refs["refs"]
    np.testing.assert_array_equal(kerchunk_read(refs).data.values, expected)


def test_v2_references_of_rectilinear_arrays_are_refused(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    vds, _ = _tiff_concat(concat_fixtures)
    for kwargs in [
        {},
        {"format": "dict"},
        {"format": "json", "filepath": str(tmp_path / "r.json")},
    ]:
        with pytest.raises(
            UnsupportedFeatureError, match=r"'band' has a rectilinear.*zarr_format=3"
        ):
            to_kerchunk(vds, zarr_format=2, **kwargs)
    with pytest.raises(UnsupportedFeatureError, match="to_icechunk"):
        to_kerchunk(vds, str(tmp_path / "r.parq"), format="parquet", zarr_format=2)


def test_format_3_is_chosen_where_an_array_needs_it(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    vds, expected = _tiff_concat(concat_fixtures)
    refs = to_kerchunk(vds)
    assert refs is not None and "band/zarr.json" in refs["refs"]
    np.testing.assert_array_equal(kerchunk_read(refs).band.values, expected)


def test_v2_references_of_edge_codecs_are_refused(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_padded_0"])
    truncating = with_edge_codec(marr, EdgeHandling.TRUNCATE)
    with pytest.raises(UnsupportedFeatureError, match="padded edge chunks"):
        to_kerchunk(virtual_dataset({"band": truncating}), zarr_format=2)


def test_regular_grids_are_v2_references_as_before(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    tiff = tiff_manifest_array(concat_fixtures["strip_padded_1"])
    h5 = hdf5_manifest_array(concat_fixtures["chunked_gzip_0"], dimension_names=("t", "v", "w"))
    vds = virtual_dataset({"band": with_attributes(tiff, _FillValue=0), "data": h5})
    refs = to_kerchunk(vds, format="dict")
    assert refs is not None
    assert "band/.zarray" in refs["refs"] and "band/0.0" in refs["refs"]
    zarray = json.loads(refs["refs"]["band/.zarray"])
    assert zarray["chunks"] == [12, 21] and zarray["shape"] == [150, 21]

    # VirtualiZarr's own references, with fill_value the CF _FillValue (null without
    # one), no _FillValue attribute and no "attributes" entry in .zarray
    upstream = vds.vz.to_kerchunk(format="dict")["refs"]
    assert refs["refs"].keys() == upstream.keys()
    for key, value in upstream.items():
        if key.endswith((".zarray", ".zattrs")) and "/" in key:
            expected = {
                k: v for k, v in json.loads(value).items() if k not in ("attributes", "_FillValue")
            }
            if key.endswith(".zarray"):
                expected["fill_value"] = 0 if key.startswith("band/") else None
            assert json.loads(refs["refs"][key]) == expected, key
        else:
            assert refs["refs"][key] == value, key

    read = _read_v2(refs)
    np.testing.assert_array_equal(read.band.values, native_tiff(concat_fixtures["strip_padded_1"]))
    np.testing.assert_array_equal(read.data.values, native_hdf5(concat_fixtures["chunked_gzip_0"]))

    to_kerchunk(vds, str(tmp_path / "v2.parq"), format="parquet")
    fs = fsspec.filesystem(
        "reference", fo=str(tmp_path / "v2.parq"), remote_protocol="file", asynchronous=True
    )
    parquet = xr.open_zarr(
        FsspecStore(fs, read_only=True, path=""), consolidated=False, zarr_format=2
    )
    np.testing.assert_array_equal(
        parquet.data.values, native_hdf5(concat_fixtures["chunked_gzip_0"])
    )


@pytest.mark.parametrize("case", ROUND_TRIP_CASES)
def test_round_trips(concat_fixtures: dict[str, Path], tmp_path: Path, case: str) -> None:
    vds, name, expected = round_trip_case(concat_fixtures, case)
    to_kerchunk(vds, str(tmp_path / "refs.json"), format="json", zarr_format=3)
    np.testing.assert_array_equal(kerchunk_read(str(tmp_path / "refs.json"))[name].values, expected)
