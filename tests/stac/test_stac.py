"""open_virtual_stac: STAC items (plain STAC 1.0 JSON and pystac objects) as a mosaic per
time step stacked along time, equal to rasterio.merge of each date's files."""

from __future__ import annotations

import functools
import http.server
import json
import random
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from tests._manifest_builders import (
    icechunk_read,
    icechunk_repo,
    icechunk_write,
    read_manifest_array,
)
from tests._stac_items import (
    Scene,
    collection,
    item,
    merged_by_date,
    write_dates,
    write_json,
    write_scene,
)
from virtualizarr_fill.stac import StacItemError, open_virtual_stac, solar_date

pystac = pytest.importorskip("pystac")

DATES = ["2024-03-02T10:20:30Z", "2024-01-05T10:20:30.250Z", "2024-02-11T10:20:30Z"]


def _open(items: Any, asset: str = "B04", **kwargs: Any) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return open_virtual_stac(items, asset, **kwargs)


def _shuffled(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    shuffled = list(documents)
    random.Random(3).shuffle(shuffled)
    return shuffled


def _decoded_times(dataset: xr.Dataset) -> np.ndarray:
    return np.asarray(xr.decode_cf(xr.Dataset(coords={"time": dataset["time"].variable}))["time"])


def _assert_stack(dataset: xr.Dataset, scenes: list[Scene]) -> None:
    """Every time step equals rasterio.merge of its date's files, in date order."""
    expected = merged_by_date(scenes)
    order = sorted(expected)
    np.testing.assert_array_equal(_decoded_times(dataset), np.array(order, "datetime64[ns]"))
    values = read_manifest_array(dataset.band_data.data)
    assert values.shape[0] == len(order)
    for step, when in enumerate(order):
        np.testing.assert_array_equal(values[step], expected[when])
    ids = [",".join(s.item_id for s in scenes if s.datetime64 == when) for when in order]
    assert list(dataset["item_id"].values) == ids


def test_item_collection_json_with_relative_hrefs_in_shuffled_order(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, DATES)
    documents = [item(s, f"data/{s.path.name}") for s in scenes]
    path = write_json(tmp_path / "search.json", collection(_shuffled(documents)))
    dataset = _open(path)
    assert dataset.band_data.dims == ("time", "band", "y", "x")
    # a datetime with milliseconds: microseconds, so that it decodes to the same value
    assert dataset["time"].attrs["units"].startswith("microseconds since 1970-01-01")
    _assert_stack(dataset, scenes)


def test_whole_second_datetimes_are_seconds_as_time_from_encodes_them(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, [DATES[0], DATES[2]], tiles=1)
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in scenes]))
    dataset = _open(path)
    assert dataset["time"].attrs["units"] == "seconds since 1970-01-01 00:00:00"
    _assert_stack(dataset, scenes)


def test_pystac_objects_with_absolute_hrefs(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, DATES)
    items = [pystac.Item.from_dict(item(s, str(s.path))) for s in _shuffled(scenes)]  # type: ignore[arg-type]
    _assert_stack(_open(items), scenes)
    _assert_stack(_open(pystac.ItemCollection(items)), scenes)


def test_folder_of_items_written_to_icechunk_reads_back_with_xarray(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, DATES)
    for scene in scenes:  # hrefs relative to each Item file, one folder up
        write_json(
            tmp_path / "items" / f"{scene.item_id}.json", item(scene, f"../data/{scene.path.name}")
        )
    dataset = _open(tmp_path / "items")
    _assert_stack(dataset, scenes)
    repo = icechunk_repo(tmp_path / "repo", tmp_path / "data")
    icechunk_write(repo, dataset)
    stored = icechunk_read(repo)
    expected = merged_by_date(scenes)
    order = sorted(expected)
    np.testing.assert_array_equal(stored["time"].values, np.array(order, "datetime64[ns]"))
    assert list(stored["item_id"].values) == list(dataset["item_id"].values)
    raw = xr.open_zarr(
        repo.readonly_session("main").store, consolidated=False, mask_and_scale=False
    )
    for step, when in enumerate(order):
        np.testing.assert_array_equal(raw.band_data.isel(time=step).values, expected[when])


@pytest.fixture
def http_directory(tmp_path: Path) -> Iterator[str]:
    """A loopback HTTP server of ``tmp_path``; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_item_collection_over_http(tmp_path: Path, http_directory: str) -> None:
    scenes = write_dates(tmp_path, DATES)
    # the files stay local: file:// URLs (a bare absolute path would be on the server)
    documents = [item(s, f"file://{s.path}") for s in scenes]
    write_json(tmp_path / "search.json", collection(documents))
    _assert_stack(_open(f"{http_directory}/search.json"), scenes)


def test_relative_href_of_an_http_collection_resolves_against_its_url(
    tmp_path: Path, http_directory: str
) -> None:
    from virtualizarr_fill.stac.items import read_items, scenes_of

    scene = write_dates(tmp_path, [DATES[0]], tiles=1)[0]
    other = Scene("other", DATES[1], scene.path, 0)
    documents = [item(scene, "../data/x.tif"), item(other, "/archive/y.tif")]
    write_json(tmp_path / "cat" / "search.json", collection(documents))
    found, _ = scenes_of(read_items(f"{http_directory}/cat/search.json"), "B04")
    assert [s.href for s in found] == [
        f"{http_directory}/data/x.tif",
        f"{http_directory}/archive/y.tif",
    ]


# --------------------------------------------------------------------------- grouping


def test_items_of_one_datetime_form_one_mosaic(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, [DATES[0]], tiles=3)
    path = write_json(
        tmp_path / "search.json", collection(_shuffled([item(s, str(s.path)) for s in scenes]))
    )
    dataset = _open(path)
    assert dataset.sizes["time"] == 1 and dataset.sizes["x"] == 3 * 24
    _assert_stack(dataset, scenes)


def test_solar_day_is_odc_stac_rule() -> None:
    import datetime as dt

    when = dt.datetime(2024, 1, 1, 6, 30, tzinfo=dt.UTC)
    # int(-100 / 15) = -6 hours (truncated towards zero): 00:30 on the same date
    assert solar_date(when, -100.0) == dt.date(2024, 1, 1)
    # int(-110 / 15) = -7 hours: 23:30 the day before
    assert solar_date(when, -110.0) == dt.date(2023, 12, 31)
    late = dt.datetime(2024, 1, 1, 23, 30, tzinfo=dt.UTC)
    assert solar_date(late, 150.0) == dt.date(2024, 1, 2)
    assert solar_date(late, 10.0) == dt.date(2024, 1, 1)


def test_solar_day_groups_passes_across_midnight_utc(tmp_path: Path) -> None:
    # Two tiles of one pass east of 150°E, acquired before and after 00:00 UTC: one solar
    # day (UTC + 10 h), two datetimes.
    tiles = [
        Scene("A", "2024-01-01T23:59:50Z", write_scene(tmp_path / "a.tif", 0, 1), 0),
        Scene("B", "2024-01-02T00:00:10Z", write_scene(tmp_path / "b.tif", 1, 2), 1),
    ]
    documents = [item(s, str(s.path), lon=152.0) for s in tiles]
    path = write_json(tmp_path / "search.json", collection(documents[::-1]))
    # by datetime they are two steps, on different footprints
    with pytest.raises(StacItemError, match="not on one grid"):
        _open(path)
    by_day = _open(path, groupby="solar_day")
    assert by_day.sizes["time"] == 1 and by_day.sizes["x"] == 48
    from tests._native_references import rasterio_merge

    merged, _ = rasterio_merge([t.path for t in tiles])
    np.testing.assert_array_equal(read_manifest_array(by_day.band_data.data)[0], merged)
    # the step's time is the earliest datetime of its items
    np.testing.assert_array_equal(
        _decoded_times(by_day), np.array(["2024-01-01T23:59:50"], "datetime64[ns]")
    )
    assert list(by_day["item_id"].values) == ["A,B"]


# --------------------------------------------------------------------------- checks


def _one_date(tmp_path: Path) -> list[Scene]:
    return write_dates(tmp_path, DATES[:2], tiles=1)


def test_item_without_the_asset_is_named(tmp_path: Path) -> None:
    scenes = _one_date(tmp_path)
    documents = [
        item(scenes[0], str(scenes[0].path)),
        item(scenes[1], str(scenes[1].path), asset="B08"),
    ]
    path = write_json(tmp_path / "search.json", collection(documents))
    with pytest.raises(StacItemError, match=r"item 'S1_0': no asset 'B04' \(its assets: B08\)"):
        _open(path)
    dataset = _open(path, skip_bad=True)
    _assert_stack(dataset, scenes[:1])
    assert dataset.attrs["virtualizarr_fill_stac_skipped"] == [
        "item 'S1_0': no asset 'B04' (its assets: B08)"
    ]


def test_missing_file_names_the_item_and_the_file(tmp_path: Path) -> None:
    scenes = _one_date(tmp_path)
    documents = [item(scenes[0], str(scenes[0].path)), item(scenes[1], "data/gone.tif")]
    path = write_json(tmp_path / "search.json", collection(documents))
    gone = tmp_path / "data" / "gone.tif"
    with pytest.raises(StacItemError, match=rf"item 'S1_0' \(file://{gone}\): no such file"):
        _open(path)
    _assert_stack(_open(path, skip_bad=True), scenes[:1])


def test_unreadable_file_names_the_item(tmp_path: Path) -> None:
    scenes = _one_date(tmp_path)
    scenes[1].path.write_bytes(b"not a TIFF at all" * 10)
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in scenes]))
    with pytest.raises(StacItemError, match=rf"item 'S1_0' of 2024-01-05.*{scenes[1].path.name}"):
        _open(path)
    dataset = _open(path, skip_bad=True)
    _assert_stack(dataset, scenes[:1])
    (reason,) = dataset.attrs["virtualizarr_fill_stac_skipped"]
    assert reason.startswith("item 'S1_0' of 2024-01-05") and scenes[1].path.name in reason


def test_unreadable_tile_of_a_mosaic_is_left_out_with_skip_bad(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, DATES[:1], tiles=3)
    scenes[2].path.write_bytes(b"II*\x00" + b"\xff" * 60)  # a TIFF header pointing nowhere
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in scenes]))
    with pytest.raises(StacItemError, match=r"item 'S0_2' of 2024-03-02"):
        _open(path)
    dataset = _open(path, skip_bad=True)
    assert dataset.sizes["x"] == 2 * 24
    _assert_stack(dataset, scenes[:2])


def test_tiles_that_do_not_form_a_mosaic_are_not_skipped(tmp_path: Path) -> None:
    a = Scene("A", DATES[0], write_scene(tmp_path / "a.tif", 0, 1), 0)
    b = Scene("B", DATES[0], write_scene(tmp_path / "b.tif", 1, 2, crs="EPSG:32634"), 1)
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in (a, b)]))
    # which tile is wrong is not ours to choose: the group is refused even with skip_bad
    with pytest.raises(StacItemError, match="coordinate reference"):
        _open(path, skip_bad=True)


def test_items_of_different_crs_in_one_group_are_named(tmp_path: Path) -> None:
    a = Scene("A", DATES[0], write_scene(tmp_path / "a.tif", 0, 1), 0)
    b = Scene("B", DATES[0], write_scene(tmp_path / "b.tif", 1, 2, crs="EPSG:32634"), 1)
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in (a, b)]))
    with pytest.raises(StacItemError, match=r"item 'A', 'B' of 2024-03-02.*coordinate reference"):
        _open(path)


def test_items_of_different_resolution_in_one_group_are_named(tmp_path: Path) -> None:
    a = Scene("A", DATES[0], write_scene(tmp_path / "a.tif", 0, 1), 0)
    b = Scene("B", DATES[0], write_scene(tmp_path / "b.tif", 1, 2, res=20.0), 1)
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in (a, b)]))
    with pytest.raises(StacItemError, match=r"item .*'B'.* of 2024-03-02.*resolution"):
        _open(path)


def test_proj_fields_that_agree_pass(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, [DATES[0]], tiles=2)
    documents = [
        item(
            s,
            str(s.path),
            properties={
                "proj:code": "EPSG:32633",
                "proj:shape": [20, 24],
                "proj:transform": [
                    10.0,
                    0.0,
                    500_000.0 + 240.0 * s.column,
                    0.0,
                    -10.0,
                    4_000_000.0,
                ],
            },
        )
        for s in scenes
    ]
    path = write_json(tmp_path / "search.json", collection(documents))
    _assert_stack(_open(path), scenes)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        (
            {"proj:epsg": 32634},
            r"item 'S0_0' \(file://.*d0_0.tif\): proj says EPSG:32634, "
            r"the file's CRS is EPSG:32633",
        ),
        (
            {"proj:transform": [10.0, 0.0, 500_010.0, 0.0, -10.0, 4_000_000.0]},
            r"item 'S0_0' .*proj:transform \[10.0, 0.0, 500010.0.*"
            r"disagree with the file's georeferencing",
        ),
        (
            {
                "proj:shape": [21, 24],
                "proj:transform": [10.0, 0.0, 500_000.0, 0.0, -10.0, 4_000_000.0],
            },
            r"item 'S0_0' .*proj:shape \[21, 24\] disagree",
        ),
    ],
    ids=["crs", "transform", "shape"],
)
def test_proj_fields_that_disagree_are_named(
    tmp_path: Path, properties: dict[str, Any], message: str
) -> None:
    scene = write_dates(tmp_path, [DATES[0]], tiles=1)[0]
    path = write_json(
        tmp_path / "search.json", collection([item(scene, str(scene.path), properties=properties)])
    )
    with pytest.raises(StacItemError, match=message):
        _open(path)


def test_steps_on_different_grids_are_refused(tmp_path: Path) -> None:
    a = Scene("A", DATES[0], write_scene(tmp_path / "a.tif", 0, 1), 0)
    b = Scene("B", DATES[1], write_scene(tmp_path / "b.tif", 0, 2, row=1), 0)
    path = write_json(tmp_path / "search.json", collection([item(s, str(s.path)) for s in (a, b)]))
    with pytest.raises(StacItemError, match="not on one grid"):
        _open(path)


def test_item_collection_and_folder_of_items_on_s3(tmp_path: Path, s3_environment: Any) -> None:
    s3_server = s3_environment
    s3_server.create_bucket("stac-items")
    scenes = write_dates(tmp_path, DATES)
    documents = [item(s, f"file://{s.path}") for s in scenes]
    s3_server.put_bytes(
        "stac-items", "search/all.json", json.dumps(collection(_shuffled(documents))).encode()
    )
    for document in documents:
        key = f"items/{document['id']}.json"
        s3_server.put_bytes("stac-items", key, json.dumps(document).encode())
    _assert_stack(_open("s3://stac-items/search/all.json"), scenes)
    _assert_stack(_open("s3://stac-items/items/"), scenes)


def test_pystac_items_read_from_files_resolve_relative_hrefs_by_their_self_link(
    tmp_path: Path,
) -> None:
    scenes = write_dates(tmp_path, DATES)
    for scene in scenes:
        write_json(
            tmp_path / "items" / f"{scene.item_id}.json",
            item(scene, f"../data/{scene.path.name}"),
        )
    items = [pystac.Item.from_file(str(p)) for p in sorted((tmp_path / "items").glob("*.json"))]
    _assert_stack(_open(_shuffled(items)), scenes)  # type: ignore[arg-type]


def test_pystac_items_without_self_link_and_relative_hrefs_are_refused(tmp_path: Path) -> None:
    scene = write_dates(tmp_path, DATES[:1], tiles=1)[0]
    items = [pystac.Item.from_dict(item(scene, f"data/{scene.path.name}"))]
    with pytest.raises(StacItemError, match="pass the JSON file's path or URL instead"):
        _open(items)


def test_proj_transform_of_an_item_off_its_mosaic_is_named(tmp_path: Path) -> None:
    scenes = write_dates(tmp_path, [DATES[0]], tiles=2)
    # the second item claims a place half a pixel off the mosaic's grid
    claims = {0: 500_000.0, 1: 500_005.0}
    documents = [
        item(
            s,
            str(s.path),
            properties={"proj:transform": [10.0, 0.0, claims[s.column], 0.0, -10.0, 4e6]},
        )
        for s in scenes
    ]
    path = write_json(tmp_path / "search.json", collection(documents))
    with pytest.raises(StacItemError, match=r"item 'S0_1' .*for the mosaic of its time step"):
        _open(path)


@pytest.mark.parametrize(("shift", "refused"), [(0.0, False), (1.0, True)], ids=["same", "moved"])
def test_proj_transform_written_with_fewer_digits_is_the_same_grid(
    tmp_path: Path, shift: float, refused: bool
) -> None:
    """A geographic grid of 1" pixels, its transform rounded to 9 decimals as catalogues
    write it: the same grid; one pixel off: another one."""
    import rasterio
    from rasterio.transform import from_origin

    res = 1 / 3600
    path = tmp_path / "dem.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=30, height=20, count=1, dtype="int16",
        crs="EPSG:4326", transform=from_origin(15.0 + 7 * res, 46.0 - 3 * res, res, res),
    ) as dst:  # fmt: skip
        dst.write(np.arange(600, dtype="int16").reshape(1, 20, 30))
    transform = [round(v, 9) for v in (res, 0.0, 15.0 + (7 + shift) * res, 0.0, -res)]
    transform.append(round(46.0 - 3 * res, 9))
    scene = Scene("dem", DATES[0], path, 0)
    properties = {"proj:code": "EPSG:4326", "proj:shape": [20, 30], "proj:transform": transform}
    document = item(scene, str(path), properties=properties)
    items = write_json(tmp_path / "search.json", collection([document]))
    if refused:
        with pytest.raises(StacItemError, match="disagree with the file's georeferencing"):
            _open(items)
    else:
        values = read_manifest_array(_open(items).band_data.data)
        with rasterio.open(path) as src:
            np.testing.assert_array_equal(values[0], src.read())
