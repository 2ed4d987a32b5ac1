"""The build summary says which package a reader of the store needs besides zarr, and
the claim holds: a process without virtualizarr-fill and its codecs reads the store it
says zarr alone reads, and fails on the one it says needs virtualizarr-fill-codecs."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from tests._environments import run_python, site_without_project
from tests._native_references import rasterio_merge
from tests._padded_inputs import padded_series, padded_tiles
from virtualizarr_fill.cli import EXIT_OK, main

NEEDS = "needs virtualizarr-fill-codecs (pip install virtualizarr-fill-codecs)"

_READ_WITHOUT = r"""
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
assert importlib.util.find_spec("virtualizarr_fill") is None
assert importlib.util.find_spec("virtualizarr_fill_codecs") is None
import numpy as np, xarray as xr, icechunk, zarr
zarr.config.set({"array.rectilinear_chunks": True})
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(REPO),
    authorize_virtual_chunk_access=icechunk.containers_credentials(
        {PREFIX: icechunk.credentials.LocalFileSystemAccess}))
try:
    ds = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3,
                      mask_and_scale=False, decode_times=False)
    np.save(OUT, ds[NAME].values)
    print(json.dumps({"read": True}))
except Exception as error:
    print(json.dumps({"read": False, "error": f"{type(error).__name__}: {error}"}))
"""


def _build(capsys: pytest.CaptureFixture[str], inputs: list[Path], out: Path, *extra: str) -> str:
    code = main(["build", *map(str, inputs), "--out", str(out), *extra])
    stdout, stderr = capsys.readouterr()
    assert code == EXIT_OK, stderr
    return stdout


def _readers_line(summary: str) -> str:
    (line,) = [x for x in summary.splitlines() if x.startswith("  readers:")]
    return line


def _read_without_codecs(tmp_path: Path, repo: Path, data_dir: Path, name: str) -> dict:
    out = tmp_path / "read.npy"
    code = (
        f"REPO = {str(repo)!r}\nPREFIX = {data_dir.as_uri() + '/'!r}\n"
        f"NAME = {name!r}\nOUT = {str(out)!r}\n" + _READ_WITHOUT
    )
    result = run_python(code, cwd=tmp_path, without_project=site_without_project(tmp_path / "site"))
    assert result.returncode == 0, result.stderr[-4000:]
    outcome: dict = json.loads(result.stdout.strip().splitlines()[-1])
    if outcome["read"]:
        outcome["values"] = np.load(out)
    return outcome


def _short_strip_tiles(directory: Path) -> list[Path]:
    """Two GeoTIFF strips side by side, 10 rows in strips of 4 (the last stored short, as
    GDAL writes it): a mosaic that needs no codec of ours."""
    import rasterio
    from rasterio.transform import from_origin

    directory.mkdir()
    rng = np.random.default_rng(8)
    paths = []
    for col in range(2):
        path = directory / f"tile_{col}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=20, height=10, count=1, dtype="int16",
            crs="EPSG:32633", transform=from_origin(300000.0 + col * 200, 5000000.0, 10.0, 10.0),
            nodata=-1, blockysize=4,
        ) as dst:  # fmt: skip
            dst.write(rng.integers(0, 1000, (1, 10, 20), dtype="int16"))
        paths.append(path)
    return paths


def test_summary_says_zarr_alone_reads_a_mosaic_without_padding_and_it_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiles = _short_strip_tiles(tmp_path / "tiles")
    repo = tmp_path / "plain.icechunk"
    summary = _build(capsys, tiles, repo)
    assert _readers_line(summary) == "  readers:   reads with zarr alone"
    outcome = _read_without_codecs(tmp_path, repo, tmp_path / "tiles", "band_data")
    assert outcome["read"], outcome
    np.testing.assert_array_equal(outcome["values"], rasterio_merge(tiles)[0], strict=True)


def test_summary_says_a_mosaic_of_padded_tiles_needs_the_codec_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiles = padded_tiles(tmp_path / "tiles")
    repo = tmp_path / "padded.icechunk"
    summary = _build(capsys, tiles, repo)
    assert _readers_line(summary) == f"  readers:   {NEEDS} for band_data"
    outcome = _read_without_codecs(tmp_path, repo, tmp_path / "tiles", "band_data")
    assert not outcome["read"]
    assert "virtualizarr_fill.crop" in outcome["error"], outcome


def test_summary_names_the_codec_package_for_a_padded_series_in_kerchunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    series = padded_series(tmp_path / "series")
    refs = tmp_path / "series.json"
    summary = _build(capsys, series, refs, "--concat-dim", "time")
    assert _readers_line(summary) == f"  readers:   {NEEDS} for v"
    assert "virtualizarr_fill.truncate" in refs.read_text()


def test_a_series_padded_only_in_its_last_chunk_reads_with_zarr_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """4 then 5 steps in chunks of 2: the grid is regular and its last chunk, stored
    padded, is the grid's own overhang, which zarr cuts without any codec."""
    data_dir = tmp_path / "series"
    data_dir.mkdir()
    paths, parts = [], []
    for i, steps in enumerate([4, 5]):
        path = data_dir / f"part_{i}.nc"
        part = np.arange(steps * 3, dtype="f4").reshape(steps, 3) + 100 * i
        with h5py.File(path, "w") as f:
            time = f.create_dataset("time", data=np.arange(steps, dtype="f8") + 4 * i)
            time.attrs["units"] = "days since 2024-01-01"
            time.make_scale("time")
            f.create_dataset("v", data=part, chunks=(2, 3), compression="gzip")
            f["v"].dims[0].attach_scale(time)
        paths.append(path)
        with h5py.File(path, "r") as f:
            parts.append(f["v"][...])
    repo = tmp_path / "series.icechunk"
    summary = _build(capsys, paths, repo, "--concat-dim", "time")
    assert _readers_line(summary) == "  readers:   reads with zarr alone"
    outcome = _read_without_codecs(tmp_path, repo, data_dir, "v")
    assert outcome["read"], outcome
    np.testing.assert_array_equal(outcome["values"], np.concatenate(parts), strict=True)
