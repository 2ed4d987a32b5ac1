"""``virtualizarr-fill build``: mosaics, series placed by coordinate, appends, the build
record, and the mistakes users make on the command line.

Stores are real Icechunk repositories on disk read back as users read them
(``virtualizarr_fill.open_icechunk``, xarray, rioxarray); expected values come from
rasterio (``rasterio.merge.merge`` for mosaics) and from xarray reading the netCDF files
with h5netcdf.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import virtualizarr_fill
from tests._cli import error_line as _error_line
from tests._cli import run_cli as _run
from tests._cli import snapshot_count as _snapshots
from tests._native_references import rasterio_merge
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_IO, EXIT_OK, EXIT_USAGE

Tiles = Callable[..., list[Path]]


# --------------------------------------------------------------------------- mosaics


@pytest.mark.parametrize("workers", ["0", "2", "dask"])
def test_mosaic_of_shuffled_tiles_equals_rasterio_merge(
    tmp_path: Path,
    write_tiles: Tiles,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    workers: str,
) -> None:
    """In this process, in worker processes, and on a dask cluster (where the first tile
    says the files form a mosaic and the rest are merged on the cluster)."""
    import rioxarray  # noqa: F401  (the .rio accessor)

    paths = write_tiles(tmp_path / "tiles")
    repo = tmp_path / "mosaic.icechunk"
    parsing = ["--workers", workers]
    if workers == "dask":
        parsing = ["--dask-scheduler", request.getfixturevalue("local_cluster").scheduler_address]
    code, out, err = _run(capsys, "build", *paths, "--out", repo, *parsing)
    assert code == EXIT_OK, err
    assert "files:     6 virtualized" in out
    merged, transform = rasterio_merge(paths)
    ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    np.testing.assert_array_equal(ds["band_data"].values, merged)
    assert ds.rio.transform() == transform
    assert ds.rio.crs.to_epsg() == 32633
    assert ds["band_data"].attrs.get("_FillValue", ds["band_data"].encoding.get("_FillValue")) == 0


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("gap", r"no tile covers rows 0-47, columns 64-127 of the mosaic"),
        ("overlap", r"overlap"),
        ("crs", r"tile_1_2.tif is in another coordinate reference system"),
    ],
)
def test_mosaic_refuses_bad_tile_sets_in_one_line(
    tmp_path: Path,
    write_tiles: Tiles,
    capsys: pytest.CaptureFixture[str],
    case: str,
    message: str,
) -> None:
    if case == "gap":
        paths = [p for p in write_tiles(tmp_path / "t") if p.stem not in {"tile_0_1", "tile_1_1"}]
    elif case == "overlap":
        paths = write_tiles(tmp_path / "t", shift={(0, 1): (-20.0, 0.0)})
    else:
        paths = write_tiles(tmp_path / "t", crs=["EPSG:32633"] * 5 + ["EPSG:32634"])
    repo = tmp_path / "m.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", repo)
    assert code == EXIT_BAD_INPUT
    assert message in _error_line(err) or __import__("re").search(message, err)
    assert not repo.exists()


def test_mosaic_with_gaps_allowed_reads_fill_where_tiles_are_missing(
    tmp_path: Path, write_tiles: Tiles, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both tiles of the middle column missing: the rows still form a grid, with a gap.
    paths = [p for p in write_tiles(tmp_path / "t") if p.stem not in {"tile_0_1", "tile_1_1"}]
    repo = tmp_path / "m.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", repo, "--allow-gaps")
    assert code == EXIT_OK, err
    ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    merged, transform = rasterio_merge(paths)  # rasterio fills the gap with nodata (0)
    # the virtual mosaic spans the gap too, its missing chunks read as the fill value
    assert ds["band_data"].shape == merged.shape
    np.testing.assert_array_equal(ds["band_data"].values, merged)
    assert ds.rio.transform() == transform


# --------------------------------------------------------------------------- series


def _column_strips(directory: Path, count: int) -> list[Path]:
    """``count`` georeferenced GeoTIFF strips stacked north to south (row_0 on top)."""
    import rasterio
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    paths = []
    for i in range(count):
        path = directory / f"row_{i}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=20, height=10, count=1, dtype="int16",
            crs="EPSG:32633", transform=from_origin(300000.0, 5000000.0 - i * 100.0, 10.0, 10.0),
            nodata=-1, blockysize=4,
        ) as dst:  # fmt: skip
            dst.write(rng.integers(0, 1000, (1, 10, 20), dtype="int16"))
        paths.append(path)
    return paths


def _native_rows(rows: list[Path]) -> np.ndarray:
    """The strips as rasterio reads them, stacked north to south."""
    import rasterio

    native = []
    for path in rows:
        with rasterio.open(path) as src:
            native.append(src.read())
    return np.concatenate(native, axis=1)


def test_series_is_placed_by_coordinate_not_argument_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    rows = _column_strips(tmp_path / "rows", 3)
    repo = tmp_path / "s.icechunk"
    code, _, err = _run(
        capsys, "build", rows[1], rows[0], rows[2], "--concat-dim", "y", "--out", repo
    )
    assert code == EXIT_OK, err
    ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    np.testing.assert_array_equal(ds["band_data"].values, _native_rows(rows))
    assert np.all(np.diff(ds["y"].values) < 0)


def test_series_refuses_a_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _column_strips(tmp_path / "rows", 3)
    repo = tmp_path / "s.icechunk"
    code, _, err = _run(capsys, "build", rows[0], rows[2], "--concat-dim", "y", "--out", repo)
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "gap along 'y'" in line and "row_0.tif" in line and "row_2.tif" in line
    assert not repo.exists()


# --------------------------------------------------------------------------- append


def _days(directory: Path, starts: list[str], dtype: str = "float32") -> list[Path]:
    """netCDF-4 files of 5 daily steps each, every file with its own time units."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    paths = []
    for start in starts:
        path = directory / f"day_{start}.nc"
        times = pd.date_range(start, periods=5, freq="D")
        ds = xr.Dataset(
            {"t2m": (("time", "lat"), rng.random((5, 3)).astype(dtype), {"units": "K"})},
            coords={"time": times, "lat": [10.0, 20.0, 30.0]},
        )
        encoding = {
            "t2m": {"chunksizes": (2, 3)},
            "time": {"units": f"days since {start}", "dtype": "int32"},
        }
        ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
        paths.append(path)
    return paths


STARTS = ["2024-01-01", "2024-01-06", "2024-01-11", "2024-01-16"]


def test_append_equals_building_everything_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the later files in a directory of their own, outside the first build's containers
    days = _days(tmp_path / "january" / "a", STARTS[:2]) + _days(
        tmp_path / "january" / "b", STARTS[2:]
    )
    whole, grown = tmp_path / "whole.icechunk", tmp_path / "grown.icechunk"
    assert _run(capsys, "build", *days, "--concat-dim", "time", "--out", whole)[0] == EXIT_OK
    assert _run(capsys, "build", *days[:2], "--concat-dim", "time", "--out", grown)[0] == EXIT_OK
    code, out, err = _run(capsys, "build", *days[2:], "--out", grown, "--append")
    assert code == EXIT_OK, err
    assert "appended" in out
    assert _snapshots(grown) == _snapshots(whole) + 1  # one commit per build or append

    expected = xr.open_mfdataset(days, engine="h5netcdf", combine="by_coords").load()
    for repo in (whole, grown):
        ds = virtualizarr_fill.open_icechunk(repo).load()
        xr.testing.assert_equal(ds["t2m"], expected["t2m"])
        np.testing.assert_array_equal(ds["time"].values, expected["time"].values)
    # the record counts every input
    record = json.loads(virtualizarr_fill.open_icechunk(grown).attrs["virtualizarr_fill_build"])
    assert record["mode"] == "series" and record["dim"] == "time" and record["inputs"] == 4


def _printed(out: str, label: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith(label))


def test_append_summary_is_true_of_the_whole_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After appending files of another folder, the summary gives the whole arrays'
    shapes, and authorizing exactly the containers it prints reads the repository."""
    import icechunk
    import zarr

    days = _days(tmp_path / "january" / "a", STARTS[:2]) + _days(
        tmp_path / "january" / "b", STARTS[2:]
    )
    repo = tmp_path / "grown.icechunk"
    assert _run(capsys, "build", *days[:2], "--concat-dim", "time", "--out", repo)[0] == EXIT_OK
    code, out, err = _run(capsys, "build", *days[2:], "--out", repo, "--append")
    assert code == EXIT_OK, err

    expected = xr.open_mfdataset(days, engine="h5netcdf", combine="by_coords").load()
    assert _printed(out, "t2m ").split()[:3] == ["t2m", "20x3", "float32"]
    assert _printed(out, "time ").split()[:3] == ["time", "20", "datetime64[ns]"]
    assert expected["t2m"].shape == (20, 3)

    printed = _printed(out, "containers:").split("containers:", 1)[1]
    prefixes = printed.split(" (virtual chunk containers")[0].strip().split(", ")
    storage = icechunk.local_filesystem_storage(str(repo))
    config = icechunk.Repository.fetch_config(storage)
    assert config is not None
    assert sorted(prefixes) == sorted(config.virtual_chunk_containers or {})
    access = icechunk.containers_credentials(
        {prefix: icechunk.credentials.LocalFileSystemAccess for prefix in prefixes}
    )
    reader = icechunk.Repository.open(storage, authorize_virtual_chunk_access=access)
    virtualizarr_fill.enable_rectilinear_chunks()
    group = zarr.open_group(reader.readonly_session("main").store, mode="r")
    ds = xr.open_zarr(group.store, consolidated=False, zarr_format=3).load()
    xr.testing.assert_equal(ds["t2m"], expected["t2m"])


def _dated_scenes(directory: Path, days: list[str]) -> list[Path]:
    """One GeoTIFF scene per day (``S2_YYYYMMDD.tif``) of the same grid."""
    import rasterio
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(8)
    paths = []
    for day in days:
        path = directory / f"S2_{day}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=20, height=10, count=1, dtype="uint16",
            crs="EPSG:32633", transform=from_origin(300000.0, 5000000.0, 10.0, 10.0),
            nodata=0, blockysize=4, compress="deflate",
        ) as dst:  # fmt: skip
            dst.write(rng.integers(1, 60000, (1, 10, 20), dtype="uint16"))
        paths.append(path)
    return paths


@pytest.mark.parametrize("kind", ["strips-along-y", "time-stack"])
def test_append_geotiffs_equals_building_everything_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """GeoTIFF archives grow too: their scalar ``spatial_ref`` is written again with
    every append, and the bands' last strips keep being trimmed."""
    import rasterio
    import rioxarray  # noqa: F401  (the .rio accessor)

    if kind == "strips-along-y":
        files = _column_strips(tmp_path / "rows", 4)
        how = ["--concat-dim", "y"]
    else:
        files = _dated_scenes(tmp_path / "scenes", ["20240101", "20240102", "20240103", "20240104"])
        how = ["--time-from", r"S2_(\d{8})"]
    whole, grown = tmp_path / "whole.icechunk", tmp_path / "grown.icechunk"
    assert _run(capsys, "build", *files, *how, "--out", whole)[0] == EXIT_OK
    assert _run(capsys, "build", *files[:2], *how, "--out", grown)[0] == EXIT_OK
    code, out, err = _run(capsys, "build", *files[2:], "--out", grown, "--append")
    assert code == EXIT_OK, err
    assert "appended" in out
    natives = []
    for path in files:
        with rasterio.open(path) as src:
            natives.append(src.read())
    expected = np.concatenate(natives, axis=1) if kind == "strips-along-y" else np.stack(natives)
    for repo in (whole, grown):
        ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
        np.testing.assert_array_equal(ds["band_data"].values, expected)
        assert ds.rio.crs.to_epsg() == 32633
    code, out, _ = _run(capsys, "verify", grown, "--against", *files)
    assert code == EXIT_OK, out


@pytest.mark.parametrize("case", ["again", "earlier", "gap", "dtype", "kerchunk", "mosaic"])
def test_append_refuses_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_tiles: Tiles, case: str
) -> None:
    days = _days(tmp_path / "data", STARTS)
    repo = tmp_path / "r.icechunk"
    build = ["build", *days[1:3], "--concat-dim", "time", "--out", repo]
    if case == "kerchunk":
        repo = tmp_path / "r.json"
        build = ["build", *days[1:3], "--concat-dim", "time", "--out", repo]
    if case == "mosaic":
        build = ["build", *write_tiles(tmp_path / "tiles"), "--out", repo]
    assert _run(capsys, *build)[0] == EXIT_OK
    before = _snapshots(repo) if case != "kerchunk" else 0
    new = {
        "again": [days[2]],
        "earlier": [days[0]],
        "gap": [days[3].with_name("x.nc")],
        "dtype": _days(tmp_path / "f8", [STARTS[3]], dtype="float64"),
        "kerchunk": [days[3]],
        "mosaic": [days[3]],
    }[case]
    if case == "gap":  # one day missing between the stored files and the new one
        new = _days(tmp_path / "late", ["2024-01-17"])
    code, _, err = _run(capsys, "build", *new, "--out", repo, "--append")
    line = _error_line(err)
    expected = {
        "again": ("already holds", EXIT_BAD_INPUT),
        "earlier": ("come before the end", EXIT_BAD_INPUT),
        "gap": ("gap along 'time'", EXIT_BAD_INPUT),
        "dtype": ("cannot", EXIT_BAD_INPUT),
        "kerchunk": ("cannot be appended to", EXIT_USAGE),
        "mosaic": ("built as a mosaic", EXIT_USAGE),
    }[case]
    assert expected[0] in line and code == expected[1], err
    if case != "kerchunk":
        assert _snapshots(repo) == before  # nothing committed


def test_append_refuses_options_and_a_repository_without_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    days = _days(tmp_path / "data", STARTS[:2])
    repo = tmp_path / "r.icechunk"
    code, _, err = _run(capsys, "build", days[1], "--out", repo, "--append", "--concat-dim", "time")
    assert code == EXIT_USAGE and "drop --concat-dim" in _error_line(err)
    # a repository written in Python, without a build record
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    from virtualizarr_fill.writers.repository import create_repository

    url = f"file://{days[0]}"
    python_repo = create_repository(repo, [url])
    session = python_repo.writable_session("main")
    store = virtualizarr_fill.HDF5Parser()(url, ObjectStoreRegistry({"file://": LocalStore()}))
    virtualizarr_fill.to_icechunk(store.to_virtual_dataset(), session.store)
    session.commit("written in Python")
    code, _, err = _run(capsys, "build", days[1], "--out", repo, "--append")
    assert code == EXIT_USAGE and "no build record" in _error_line(err)


# --------------------------------------------------------------------------- small things


def test_single_file_needs_no_dimension_and_the_summary_opens_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import rasterio

    path = _column_strips(tmp_path / "one", 1)[0]
    repo = tmp_path / "one.icechunk"
    code, out, err = _run(capsys, "build", path, "--out", repo)
    assert code == EXIT_OK, err
    containers = next(line for line in out.splitlines() if "containers:" in line)
    assert f"file://{path.parent}/" in containers
    snippet = next(line for line in out.splitlines() if "open with:" in line)
    namespace: dict[str, object] = {}
    exec(snippet.split("open with:", 1)[1].strip(), namespace)  # the printed snippet runs
    ds = namespace["ds"]
    assert isinstance(ds, xr.Dataset)
    with rasterio.open(path) as src:
        native = src.read(masked=True)
    np.testing.assert_array_equal(ds["band_data"].values, native.astype("f4").filled(np.nan))


@pytest.mark.parametrize("name", ["own+er", "with space", "ünï", "a=b,c;d@e"])
def test_paths_with_special_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:

    rows = _column_strips(tmp_path / name / "data", 2)
    repo = tmp_path / name / "r.icechunk"
    code, _, err = _run(capsys, "build", *rows, "--concat-dim", "y", "--out", repo)
    assert code == EXIT_OK, err
    ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    np.testing.assert_array_equal(ds["band_data"].values, _native_rows(rows))
    code, _, err = _run(capsys, "inspect", rows[0])
    assert code == EXIT_OK, err


def test_paths_a_url_cannot_name_and_malformed_file_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, character in [("a#b", "'#'"), ("100%", "'%'")]:
        odd = _column_strips(tmp_path / name, 1)[0]
        code, _, err = _run(capsys, "build", odd, "--out", tmp_path / "r.icechunk")
        assert code == EXIT_USAGE and character in _error_line(err)
    plain = _column_strips(tmp_path / "plain", 1)[0]
    code, _, err = _run(capsys, "build", f"file://localhost{plain}", "--out", tmp_path / "r")
    assert code == EXIT_OK, err
    two_slashes = "file://" + str(plain).lstrip("/")
    code, _, err = _run(capsys, "build", two_slashes, "--out", tmp_path / "r.icechunk")
    assert code == EXIT_USAGE and "three slashes" in _error_line(err)


def test_destination_type_comes_from_its_suffix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _column_strips(tmp_path / "one", 1)[0]
    code, _, err = _run(capsys, "build", path, "--out", tmp_path / "x.zarr")
    assert code == EXIT_USAGE and "unknown store type '.zarr'" in _error_line(err)
    assert not (tmp_path / "x.zarr").exists()
    assert _run(capsys, "build", path, "--out", tmp_path / "plain")[0] == EXIT_OK
    assert (tmp_path / "plain" / "repo").exists() or any((tmp_path / "plain").iterdir())


def test_inspect_carries_on_past_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _column_strips(tmp_path / "one", 1)[0]
    code, out, _ = _run(capsys, "inspect", tmp_path / "missing.tif", path)
    assert code != EXIT_OK
    assert "missing.tif" in out and "no such file" in out
    assert "band_data" in out  # the file after the missing one was inspected


def test_a_missing_object_is_one_readable_line(
    s3_environment: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    s3_environment.create_bucket("missing-objects")
    url = "s3://missing-objects/tiles/nothing.tif"
    code, _, err = _run(capsys, "build", url, "--out", tmp_path / "r.icechunk", "--workers", "0")
    line = _error_line(err)
    assert code == EXIT_IO
    assert url in line and "not found" in line.lower()
    assert len(line) < 300, line  # not a debug dump of the object store's error


@pytest.mark.parametrize("parser", ["TIFFParser", "HDF5Parser"])
def test_a_url_outside_the_registry_lists_the_registered_prefixes(parser: str) -> None:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    with pytest.raises(virtualizarr_fill.UnregisteredURLError) as raised:
        getattr(virtualizarr_fill, parser)()("s3://bucket/x.tif", registry)
    assert "s3://bucket/x.tif" in str(raised.value)
    assert "registered: file://" in str(raised.value)


@pytest.mark.parametrize("suffix", ["json", "parquet"])
def test_kerchunk_summary_snippet_opens_the_references(
    tmp_path: Path, write_tiles: Tiles, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    paths = write_tiles(tmp_path / "tiles", tiled=True)
    refs = tmp_path / f"mosaic.{suffix}"
    code, out, err = _run(capsys, "build", *paths, "--out", refs)
    assert code == EXIT_OK, err
    snippet = next(line for line in out.splitlines() if "open with:" in line)
    namespace: dict[str, object] = {}
    exec(snippet.split("open with:", 1)[1].strip(), namespace)
    ds = namespace["ds"]
    assert isinstance(ds, xr.Dataset)
    merged, _ = rasterio_merge(paths)
    np.testing.assert_array_equal(ds["band_data"].fillna(0).values.astype("u1"), merged)


def test_forced_zarr_format_2_that_cannot_hold_the_codecs_is_a_clear_refusal(
    tmp_path: Path, write_tiles: Tiles, capsys: pytest.CaptureFixture[str]
) -> None:
    # three interleaved bands: the array needs a transpose codec, which format 2 lacks
    path = write_tiles(tmp_path / "tiles")[0]
    refs = tmp_path / "one.json"
    code, _, err = _run(capsys, "build", path, "--out", refs, "--kerchunk-format", "2")
    assert code == EXIT_BAD_INPUT
    assert "Zarr format 2" in _error_line(err)
    assert not refs.exists()
    assert _run(capsys, "build", path, "--out", refs)[0] == EXIT_OK  # auto: format 3


def test_append_to_something_that_is_not_a_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _column_strips(tmp_path / "one", 1)[0]
    other = tmp_path / "not-a-repo"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    code, _, err = _run(capsys, "build", path, "--out", other, "--append")
    assert code == EXIT_USAGE and "no Icechunk repository" in _error_line(err)
    code, _, err = _run(capsys, "build", path, "--out", tmp_path / "missing", "--append")
    assert code == EXIT_USAGE and "no Icechunk repository" in _error_line(err)


def test_append_in_a_fresh_process_to_a_rectilinear_series(tmp_path: Path) -> None:
    """Five time steps per file in chunks of two: the stored series is rectilinear, and
    a new process appending to it must be able to open it."""
    import subprocess
    import sys

    days = _days(tmp_path / "data", STARTS[:3])
    repo = tmp_path / "r.icechunk"
    command = [sys.executable, "-m", "virtualizarr_fill.cli", "build"]
    env = {k: v for k, v in __import__("os").environ.items() if "RECTILINEAR" not in k}
    first = [*command, str(days[0]), str(days[1]), "--concat-dim", "time", "--out", str(repo)]
    for argv in (first, [*command, str(days[2]), "--out", str(repo), "--append"]):
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        assert done.returncode == EXIT_OK, done.stderr
    ds = virtualizarr_fill.open_icechunk(repo).load()
    expected = xr.open_mfdataset(days, engine="h5netcdf", combine="by_coords").load()
    xr.testing.assert_equal(ds["t2m"], expected["t2m"])


# ------------------------------------------------------------- calendars, single steps


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_series_in_a_model_calendar_reads_back_as_xarrays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], calendar: str
) -> None:
    """CMIP-like files in a noleap or 360-day calendar, each counting time from its own
    start: the store reads back as ``xr.open_mfdataset`` reads the files."""
    from tests.assemble.test_series_spacing import calendar_files, native_series

    paths = calendar_files(tmp_path / "data", calendar, [0, 6, 12, 18])
    repo = tmp_path / "tas.icechunk"
    code, _, err = _run(capsys, "build", *paths[::-1], "--concat-dim", "time", "--out", repo)
    assert code == EXIT_OK, err
    ds = virtualizarr_fill.open_icechunk(repo).load()
    expected = native_series(paths)
    assert ds.time.values[0].calendar == calendar
    np.testing.assert_array_equal(ds.time.values, expected.time.values)
    xr.testing.assert_equal(ds.tas, expected.tas)

    gapped = [*paths[:2], paths[3]]
    code, _, err = _run(
        capsys, "build", *gapped, "--concat-dim", "time", "--out", tmp_path / "g.icechunk"
    )
    line = _error_line(err)
    assert code == EXIT_BAD_INPUT
    assert "gap along 'time'" in line and "tas_0006.nc and " in line and "tas_0018.nc" in line


def test_daily_files_of_one_step_refuse_a_missing_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daily archive of the documentation: one step a file, day 5 missing."""
    from tests.assemble.test_series_spacing import single_step_files

    days = [pd.Timestamp(f"2024-01-{d:02d}") for d in (1, 2, 3, 4, 6, 7)]
    paths = single_step_files(tmp_path / "daily", days)
    repo = tmp_path / "daily.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--concat-dim", "time", "--out", repo)
    line = _error_line(err)
    assert code == EXIT_BAD_INPUT
    assert "gap along 'time' between" in line
    assert "day_20240104.nc and " in line and "day_20240106.nc" in line
    assert "spacing is 1 day;" in line and "nanoseconds" not in line
    assert not repo.exists()

    code, _, err = _run(
        capsys, "build", *paths, "--concat-dim", "time", "--out", repo, "--allow-gaps"
    )
    assert code == EXIT_OK, err
    expected = xr.open_mfdataset(paths, engine="h5netcdf", combine="by_coords").load()
    xr.testing.assert_equal(virtualizarr_fill.open_icechunk(repo).load().v, expected.v)


@pytest.mark.parametrize("new", [[6], [5, 6]], ids=["gap", "overlap"])
def test_append_of_one_step_files_names_the_new_file_at_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new: list[int]
) -> None:
    """A store of days 1 to 4 (one step a file): appending day 6 leaves a gap, and
    appending a copy of day 4 under another name repeats a stored time (refused as two
    scenes of one time are); the refusal names the new file, not "the new files"."""
    from tests.assemble.test_series_spacing import single_step_files

    days = [pd.Timestamp(f"2024-01-{d:02d}") for d in range(1, 7)]
    paths = single_step_files(tmp_path / "daily", days)
    repo = tmp_path / "daily.icechunk"
    code, _, err = _run(capsys, "build", *paths[:4], "--concat-dim", "time", "--out", repo)
    assert code == EXIT_OK, err
    before = _snapshots(repo)
    if new == [6]:
        appended = [paths[5]]
        fault, message = "day_20240106.nc", "gap along 'time'"
    else:
        copy = tmp_path / "late" / "day_copy.nc"
        copy.parent.mkdir()
        copy.write_bytes(paths[3].read_bytes())
        appended = [copy, paths[4]]
        fault, message = "day_copy.nc", "have the same time (2024-01-04T00:00:00)"
    code, _, err = _run(capsys, "build", *appended, "--out", repo, "--append")
    line = _error_line(err)
    assert code == EXIT_BAD_INPUT
    assert message in line and fault in line and "the new files" not in line
    if new == [6]:
        assert "spacing is 1 day;" in line
    assert _snapshots(repo) == before

    code, _, err = _run(capsys, "build", paths[4], "--out", repo, "--append")
    assert code == EXIT_OK, err
    stored = virtualizarr_fill.open_icechunk(repo).load()
    expected = xr.open_mfdataset(paths[:5], engine="h5netcdf", combine="by_coords").load()
    xr.testing.assert_equal(stored.v, expected.v)


def test_scene_stacks_are_not_refused_for_a_scene_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Acquisitions every 5 days, the cloudy one of 2024-01-11 left out: a time stack of
    scenes is irregular by design, built and appended to without --allow-gaps."""
    import rasterio

    files = _dated_scenes(
        tmp_path / "scenes", ["20240101", "20240106", "20240116", "20240121", "20240131"]
    )
    repo = tmp_path / "stack.icechunk"
    how = ["--time-from", r"S2_(\d{8})"]
    code, _, err = _run(capsys, "build", *files[:4], *how, "--out", repo)
    assert code == EXIT_OK, err
    code, _, err = _run(capsys, "build", files[4], "--out", repo, "--append")
    assert code == EXIT_OK, err
    ds = virtualizarr_fill.open_icechunk(repo, mask_and_scale=False)
    expected_times = pd.to_datetime([p.stem[3:] for p in files]).to_numpy("datetime64[ns]")
    np.testing.assert_array_equal(ds.time.values, expected_times)
    natives = []
    for path in files:
        with rasterio.open(path) as src:
            natives.append(src.read())
    np.testing.assert_array_equal(ds["band_data"].values, np.stack(natives))
