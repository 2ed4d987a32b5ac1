"""Scenes stacked along ``time`` (``TIFFParser(time_from=...)``, ``build --time-from``)
and COG mosaics as multiscale groups (``build --overviews``), from the command line to
the stores read back with xarray. Scenes are written by GDAL with known dates and
values; the time coordinate must come back decoded as ``datetime64``.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

from fixtures import make_gdal_features
from tests._manifest_builders import kerchunk_read
from virtualizarr_fill.assemble.time_stack import stack_by_time
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, main
from virtualizarr_fill.multiscales.conventions import check_description
from virtualizarr_fill.tiff import TIFFParser
from virtualizarr_fill.tiff.scene_time import TimeCoordinateError, TimeSource, parse_time

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
UTC = dt.UTC


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _open(path: Path, time_from: str) -> xr.Dataset:
    return open_virtual_dataset(
        _url(path), registry=REGISTRY, parser=TIFFParser(time_from=time_from)
    )


def _open_icechunk(path: Path, data_dir: Path) -> tuple[object, object]:
    import icechunk

    prefix = data_dir.resolve().as_uri() + "/"
    repo = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(path)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    return repo, repo.readonly_session("main").store


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20240117", dt.datetime(2024, 1, 17, tzinfo=UTC)),
        ("202401171030", dt.datetime(2024, 1, 17, 10, 30, tzinfo=UTC)),
        ("20240117103005", dt.datetime(2024, 1, 17, 10, 30, 5, tzinfo=UTC)),
        ("2024:01:17 10:30:05", dt.datetime(2024, 1, 17, 10, 30, 5, tzinfo=UTC)),
        ("2024-01-17", dt.datetime(2024, 1, 17, tzinfo=UTC)),
        ("2024-01-17T10:30:05Z", dt.datetime(2024, 1, 17, 10, 30, 5, tzinfo=UTC)),
        ("2024-01-17T12:30:05+02:00", dt.datetime(2024, 1, 17, 10, 30, 5, tzinfo=UTC)),
    ],
)
def test_date_forms(text: str, expected: dt.datetime) -> None:
    assert parse_time(text) == expected


def test_bad_specifications_are_refused() -> None:
    with pytest.raises(ValueError, match="not a regular expression"):
        TimeSource.parse("S2_(\\d{8}")
    with pytest.raises(ValueError, match="2 groups; use one"):
        TimeSource.parse("(S2)_(\\d{8})")
    with pytest.raises(ValueError, match="not a regular expression"):
        TIFFParser(time_from="[")
    with pytest.raises(ValueError, match="time_from needs layout='image'"):
        TIFFParser(time_from="datetime", layout="tree")
    with pytest.raises(ValueError, match="is not a date"):
        parse_time("2024-13-45")


@pytest.mark.parametrize(
    ("how", "spec", "name"),
    [
        ("datetime", "datetime", "scene.tif"),
        ("metadata", "metadata:ACQUISITION_DATETIME", "scene.tif"),
        ("none", r"S2_(\d{8}T\d{6})", "S2_20240117T103000_B04.tif"),
        ("none", r"S2_\d{8}", "S2_20240117_B04.tif"),
    ],
)
def test_each_source_gives_a_decoded_time(tmp_path: Path, how: str, spec: str, name: str) -> None:
    when = (
        dt.datetime(2024, 1, 17, 10, 30)
        if "T" in spec or how != "none"
        else dt.datetime(2024, 1, 17)
    )
    path = tmp_path / name
    values = make_gdal_features.write_dated_scene(path, when, how=how)  # type: ignore[arg-type]
    if spec == "S2_\\d{8}":
        # without a group the whole match is the date: "S2_20240117" is not one
        with pytest.raises(TimeCoordinateError, match=r"S2_20240117_B04\.tif: the file name"):
            _open(path, spec)
        return
    dataset = _open(path, spec)
    assert dataset["band_data"].dims == ("time", "band", "y", "x")
    assert dataset["band_data"].shape == (1, *values.shape)
    np.testing.assert_array_equal(dataset["time"].values, [np.datetime64(when, "ns")])
    assert dataset["time"].encoding["units"] == "seconds since 1970-01-01 00:00:00"


def test_missing_time_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "undated.tif"
    make_gdal_features.write_dated_scene(path, dt.datetime(2024, 1, 1), how="none")
    with pytest.raises(
        TimeCoordinateError, match=r"undated\.tif: no time found in the TIFF DateTime"
    ):
        _open(path, "datetime")
    with pytest.raises(
        TimeCoordinateError, match=r"undated\.tif: no time found in the GDAL metadata item 'WHEN'"
    ):
        _open(path, "metadata:WHEN")


def test_stack_orders_scenes_and_refuses_duplicates(tmp_path: Path) -> None:
    days = [9, 2, 5]
    paths, values = [], {}
    for k, day in enumerate(days):
        path = tmp_path / f"scene_{k}.tif"
        # Deflate strips of 6 rows over 20: a rectilinear grid with truncation
        values[day] = make_gdal_features.write_dated_scene(
            path, dt.datetime(2023, 6, day), seed=k, BLOCKYSIZE=6, COMPRESS="DEFLATE"
        )
        paths.append(path)
    datasets = [_open(p, "datetime") for p in paths]
    grid = datasets[0]["band_data"].data.metadata.chunk_grid
    assert grid.chunk_shapes == (1, 1, (6, 6, 6, 2), 24)
    stack = stack_by_time(datasets, [str(p) for p in paths])
    assert list(stack["time"].values) == [
        np.datetime64(f"2023-06-0{d}", "ns") for d in sorted(days)
    ]
    target = tmp_path / "stack.json"
    stack.vz.to_kerchunk(str(target), format="json", zarr_format=3)
    read = kerchunk_read(str(target))
    assert read["time"].dtype.kind == "M"
    np.testing.assert_array_equal(
        read["band_data"].values, np.stack([values[d] for d in sorted(days)])
    )

    twin = tmp_path / "scene_twin.tif"
    make_gdal_features.write_dated_scene(twin, dt.datetime(2023, 6, 5), seed=9)
    with pytest.raises(
        TimeCoordinateError,
        match=r"scene_2\.tif and .*scene_twin\.tif have the same time \(2023-06-05",
    ):
        stack_by_time([*datasets, _open(twin, "datetime")], [*map(str, paths), str(twin)])


# -- the command line -------------------------------------------------------------------------


def _scenes(directory: Path, count: int) -> dict[str, tuple[dt.datetime, np.ndarray]]:
    """``count`` dated scenes, their names not in time order: name -> (time, values)."""
    directory.mkdir()
    rng = np.random.default_rng(7)
    days = rng.permutation(count)
    scenes = {}
    for k, day in enumerate(days):
        when = dt.datetime(2024, 3, 1, 10, 15) + dt.timedelta(days=int(day) * 5)
        name = f"S2_{when:%Y%m%d}_tile{k:02d}.tif"
        scenes[name] = (
            when,
            make_gdal_features.write_dated_scene(directory / name, when, how="datetime", seed=k),
        )
    return scenes


def test_cli_builds_a_time_stack_of_20_scenes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = _scenes(tmp_path / "scenes", 20)
    expected_order = sorted(scenes, key=lambda n: scenes[n][0])
    pattern = str(tmp_path / "scenes" / "*.tif")
    for spec in (r"S2_(\d{8})", "datetime"):
        repo = tmp_path / f"stack-{len(spec)}.icechunk"
        code = main(["build", pattern, "--time-from", spec, "--out", str(repo)])
        out, err = capsys.readouterr()
        assert code == EXIT_OK, err
        assert "files:     20 virtualized" in out
        _, store = _open_icechunk(repo, tmp_path / "scenes")
        stack = xr.open_zarr(store, consolidated=False, zarr_format=3).load()
        assert stack["time"].dtype == np.dtype("datetime64[ns]")
        whens = [scenes[n][0] for n in expected_order]
        if spec != "datetime":  # the file names hold dates only
            whens = [dt.datetime(w.year, w.month, w.day) for w in whens]
        np.testing.assert_array_equal(stack["time"].values, np.array(whens, dtype="datetime64[ns]"))
        np.testing.assert_array_equal(
            stack["band_data"].values, np.stack([scenes[n][1] for n in expected_order])
        )

    # kerchunk references: Zarr format 2 (what most readers expect) where the grid is
    # regular, as here
    kerchunk = tmp_path / "stack.json"
    assert main(["build", pattern, "--time-from", "datetime", "--out", str(kerchunk)]) == EXIT_OK
    assert "(Zarr format 2)" in capsys.readouterr()[0]
    read = _read_kerchunk_v2(kerchunk)
    assert read["time"].dtype == np.dtype("datetime64[ns]")
    np.testing.assert_array_equal(
        read["time"].values, np.array(sorted(scenes[n][0] for n in scenes), dtype="datetime64[ns]")
    )
    np.testing.assert_array_equal(
        read["band_data"].values, np.stack([scenes[n][1] for n in expected_order])
    )


def _read_kerchunk_v2(path: Path) -> xr.Dataset:
    import fsspec
    import zarr

    fs = fsspec.filesystem("reference", fo=str(path), remote_protocol="file", asynchronous=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    return xr.open_zarr(store, consolidated=False, zarr_format=2, mask_and_scale=False).load()


def test_cli_time_stack_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "twins"
    directory.mkdir()
    for name in ("a.tif", "b.tif"):
        make_gdal_features.write_dated_scene(directory / name, dt.datetime(2024, 1, 1))
    out = str(tmp_path / "out.icechunk")
    code = main(["build", str(directory / "*.tif"), "--time-from", "datetime", "--out", out])
    _, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    # the message of stack_by_time and open_virtual_series (tests/assemble/
    # test_time_stack_entry_points.py), after the command's prefix
    assert err.strip().splitlines()[-1] == (
        "virtualizarr-fill: error: the files cannot be combined along 'time': "
        f"{_url(directory / 'a.tif')} and {_url(directory / 'b.tif')} have the same time "
        "(2024-01-01T00:00:00); a time stack takes one scene per time"
    )
    assert not Path(out).exists()
    code = main(
        [
            "build",
            str(directory / "a.tif"),
            "--time-from",
            "datetime",
            "--concat-dim",
            "y",
            "--out",
            out,
        ]
    )
    assert code == EXIT_USAGE and "stacks along 'time'" in capsys.readouterr()[1]
    code = main(["build", str(directory / "a.tif"), "--time-from", "(a)(b)", "--out", out])
    assert code == EXIT_USAGE and "--time-from" in capsys.readouterr()[1]


def test_cli_append_refuses_a_scene_of_a_stored_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new scene at a time the repository holds, at its end or before it, is refused
    as two scenes of one time are, naming the repository and the file."""
    directory = tmp_path / "scenes"
    directory.mkdir()
    for name, day in (("a.tif", 1), ("b.tif", 3), ("late_twin.tif", 3), ("early_twin.tif", 1)):
        make_gdal_features.write_dated_scene(directory / name, dt.datetime(2024, 1, day))
    out = tmp_path / "stack.icechunk"
    built = [str(directory / n) for n in ("a.tif", "b.tif")]
    assert main(["build", *built, "--time-from", "datetime", "--out", str(out)]) == EXIT_OK
    capsys.readouterr()
    for name, day in (("late_twin.tif", "03"), ("early_twin.tif", "01")):
        code = main(["build", str(directory / name), "--append", "--out", str(out)])
        err = capsys.readouterr()[1]
        assert code == EXIT_BAD_INPUT
        assert err.strip().splitlines()[-1] == (
            "virtualizarr-fill: error: the files cannot be combined along 'time': "
            f"{out} and {directory / name} have the same time (2024-01-{day}T00:00:00); "
            "a time stack takes one scene per time"
        )
    _, store = _open_icechunk(out, directory)
    stored = xr.open_zarr(store, consolidated=False, zarr_format=3)
    assert stored["time"].values.tolist() == [
        np.datetime64("2024-01-01", "ns").item(),
        np.datetime64("2024-01-03", "ns").item(),
    ]


def test_cli_builds_a_multiscale_mosaic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    paths = []
    for k in range(2):
        path = tiles / f"cog_{k}.tif"
        origin = (
            make_gdal_features.ORIGIN[0],
            make_gdal_features.ORIGIN[1] - k * 256 * make_gdal_features.PIXEL,
        )
        make_gdal_features.write_cog(path, height=256, width=192, origin=origin, seed=k)
        paths.append(path)
    code = main(["inspect", str(paths[0]), "--tiff-option", "overviews=multiscales"])
    stdout = capsys.readouterr()[0]
    assert code == EXIT_OK
    level_1 = stdout[stdout.index("group /1") : stdout.index("group /2")]
    assert "mask         y,x       128x96" in level_1  # the mask of the 128x96 overview
    assert "padding: IFD 5:" in level_1  # GDAL's COG puts the overviews' masks last
    for out in (tmp_path / "mosaic.icechunk", tmp_path / "mosaic.json"):
        code = main(
            ["build", str(tiles / "*.tif"), "--concat-dim", "y", "--overviews", "--out", str(out)]
        )
        stdout, err = capsys.readouterr()
        assert code == EXIT_OK, err
        assert "level 2:   band_data 3x128x48, mask" in stdout
        # 32 rows of 64-row tiles: the first file's bit-packed mask tile cannot be cut
        assert "level 3:   band_data 3x64x24\n" in stdout
        assert "level 3: the masks cannot be combined along 'y'" in stdout
        if out.suffix == ".json":
            import fsspec
            import zarr

            fs = fsspec.filesystem(
                "reference", fo=str(out), remote_protocol="file", asynchronous=True
            )
            store = zarr.storage.FsspecStore(fs, read_only=True, path="")
        else:
            _, store = _open_icechunk(out, tiles)
        tree = xr.open_datatree(store, engine="zarr", consolidated=False, zarr_format=3)
        shapes = {n: tree[n]["band_data"].shape[1:] for n in tree.children}
        assert check_description(json.loads(json.dumps(tree.attrs)), shapes) == []
        for level in range(4):
            references = []
            for path in paths:
                with rasterio.open(path, overview_level=level - 1 if level else None) as src:
                    references.append(src.read())
            np.testing.assert_array_equal(
                tree[str(level)]["band_data"].values,
                np.concatenate(references, axis=1),
                strict=True,
            )
