"""``inspect`` and ``build`` over the real-file corpus (``../shared/corpus``): every file
inspects in one call, and files xarray reads in its own way are read, or refused in one
line, as xarray reads or refuses them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from virtualizarr_fill import open_kerchunk
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, main

pytestmark = pytest.mark.corpus

H5NETCDF_TEST = Path("NCAS-CMS+pyfive", "tests", "data", "h5netcdf_test.hdf5")
OPAQUE_DATETIME = Path("NCAS-CMS+pyfive", "tests", "opaque_datetime.hdf5")


def _corpus_files(corpus_dir: Path) -> list[Path]:
    with (corpus_dir / "MANIFEST.tsv").open(newline="") as manifest:
        return [corpus_dir / row["corpus_path"] for row in csv.DictReader(manifest, delimiter="\t")]


def test_inspect_json_whole_corpus(corpus_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One ``inspect --json`` call over every corpus file gives one JSON document with an
    entry per file, none of them an internal error (datetime fill values, of HDF5 opaque
    datetimes, once made json.dump report a circular reference and print nothing)."""
    files = _corpus_files(corpus_dir)
    code = main(["inspect", "--json", *map(str, files)])
    out, err = capsys.readouterr()
    assert "internal error" not in err
    entries = json.loads(out)["files"]
    assert code in (EXIT_OK, EXIT_BAD_INPUT)
    assert len(entries) == len(files)
    internal = [e["error"] for e in entries if "internal error" in e.get("error", "")]
    assert internal == []


def test_inspect_json_datetime_fill_value(
    corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An opaque HDF5 datetime array's fill value is shown as h5py gives it, in ISO 8601."""
    path = corpus_dir / OPAQUE_DATETIME
    code = main(["inspect", "--json", str(path)])
    out, _ = capsys.readouterr()
    assert code == EXIT_OK
    (group,) = json.loads(out)["files"][0]["groups"]
    arrays = {a["name"]: a for a in group["arrays"]}
    with h5py.File(path) as f:
        dataset = f["opaque_datetimes"]
        assert arrays["opaque_datetimes"]["dtype"] == str(dataset.dtype)
        assert arrays["opaque_datetimes"]["fill_value"] == str(dataset.fillvalue)


def test_inspect_group_not_aligned_with_parents(
    corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A subgroup whose dimension lengths differ from its parent's: xarray.open_datatree
    refuses the file, inspect says so in one line naming the group and the dimension, and
    the flag it suggests inspects the group."""
    path = corpus_dir / H5NETCDF_TEST
    with pytest.raises(ValueError, match="'/subgroup' is not aligned"):
        xr.open_datatree(path, engine="h5netcdf")
    code = main(["inspect", str(path)])
    out, _ = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    (error,) = [line for line in out.splitlines() if "error:" in line]
    assert "internal error" not in error
    assert "group '/subgroup' is not aligned with its parents" in error
    assert "dimension 'y' has length 10 there and 5 in '/'" in error
    assert "--hdf5-option group=/subgroup" in error
    assert len(out.splitlines()) == 2  # the file's header and the error
    code = main(["inspect", "--json", str(path), "--hdf5-option", "group=/subgroup"])
    out, _ = capsys.readouterr()
    assert code == EXIT_OK
    with h5py.File(path) as f:
        expected = {name: list(f["subgroup"][name].shape) for name in ("subvar", "y_var")}
    (group,) = json.loads(out)["files"][0]["groups"]
    assert {a["name"]: a["shape"] for a in group["arrays"]} == expected


def test_build_group_not_aligned_reads_root_as_xarray(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """build takes the root group, as xr.open_dataset does; its 'y' coordinate holds a
    fill value (NaN once decoded), which once made the file differ from itself."""
    path = corpus_dir / H5NETCDF_TEST
    out = tmp_path / "h5netcdf_test.json"
    code = main(["build", str(path), "--out", str(out)])
    report, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "--hdf5-option group=NAME" in report  # the subgroup left out is named
    with xr.open_dataset(path, engine="h5netcdf") as native:
        expected = native.load()
    actual = open_kerchunk(out).load()
    assert np.isnan(expected["y"].values).any()
    for name in ("foo", "y", "intscalar", "scalar"):
        xr.testing.assert_identical(actual[name].variable, expected[name].variable)


@pytest.mark.parametrize("name", ["cog.tif", "cog_uint8_rgb_mask.tif"])
def test_build_overviews_as_parquet_reads_as_rasterio(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """``build --overviews`` writes kerchunk parquet references (once a KeyError in
    kerchunk's parquet writer); every level reads back as rasterio reads that overview,
    its mask as rasterio's dataset mask, and the root group says how to open a level."""
    import rasterio

    from virtualizarr_fill.writers.repository import MultiscaleGroupError

    path = corpus_dir / "cogeotiff+rio-tiler" / name
    refs = tmp_path / "pyramid.parquet"
    code = main(["build", str(path), "--overviews", "--out", str(refs)])
    _, err = capsys.readouterr()
    assert code == EXIT_OK, err
    with pytest.raises(MultiscaleGroupError, match="group='0'"):
        open_kerchunk(refs)
    with rasterio.open(path) as src:
        factors = src.overviews(1)
        has_mask = rasterio.enums.MaskFlags.per_dataset in src.mask_flag_enums[0]
    assert factors
    for level in range(len(factors) + 1):
        with rasterio.open(path, overview_level=level - 1 if level else None) as src:
            expected, expected_mask = src.read(), src.dataset_mask()
            xs, _ = src.xy(np.zeros(src.width), np.arange(src.width))
            _, ys = src.xy(np.arange(src.height), np.zeros(src.height))
        actual = open_kerchunk(refs, group=str(level), mask_and_scale=False).load()
        np.testing.assert_array_equal(actual["band_data"].values, expected)
        np.testing.assert_allclose(actual["x"].values, xs, rtol=0, atol=1e-9)
        np.testing.assert_allclose(actual["y"].values, ys, rtol=0, atol=1e-9)
        if has_mask:
            np.testing.assert_array_equal(actual["mask"].values != 0, expected_mask != 0)


@pytest.mark.parametrize(
    "relative", ["rasterio+rasterio/cogeo.tif", "mapnik+test-data/stefan_full_ycbcr_mask.tif"]
)
def test_build_jpeg_tiff_as_parquet_reads_as_rasterio(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], relative: str
) -> None:
    """JPEG-compressed TIFFs as parquet references: their codec's JPEG tables (base64 in
    the metadata) once reached the parquet metadata as bytes (an internal TypeError)."""
    import rasterio

    path = corpus_dir / relative
    refs = tmp_path / "jpeg.parquet"
    code = main(["build", str(path), "--out", str(refs)])
    _, err = capsys.readouterr()
    assert code == EXIT_OK, err
    with rasterio.open(path) as src:
        expected = src.read()
    actual = open_kerchunk(refs, mask_and_scale=False).load()
    np.testing.assert_array_equal(actual["band_data"].values, expected)
