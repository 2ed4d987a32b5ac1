"""``virtualizarr-fill build --stac ITEMS --asset KEY``: STAC items into an Icechunk
repository or kerchunk references, read back with xarray and compared with
``rasterio.merge.merge`` of each date's files; ``--append --stac`` with later items; bad
items named in one line or skipped with ``--skip-bad``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import virtualizarr_fill
from tests._cli import error_line as _error_line
from tests._cli import run_cli as _run
from tests._stac_items import Scene, collection, item, merged_by_date, write_dates, write_json
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE

pytest.importorskip("pystac")

DATES = ["2024-03-02T10:20:30Z", "2024-01-05T10:20:30Z", "2024-02-11T10:20:30Z"]
LATER = ["2024-04-20T10:20:30Z", "2024-04-01T10:20:30Z"]


def _items_file(path: Path, scenes: list[Scene], **kwargs: Any) -> Path:
    """An ItemCollection of the scenes, hrefs relative to it, in shuffled order."""
    documents = [item(s, str(s.path.relative_to(path.parent)), **kwargs) for s in scenes]
    random.Random(5).shuffle(documents)
    return write_json(path, collection(documents))


def _assert_store(store: Path, scenes: list[Scene]) -> xr.Dataset:
    """The store read as users read it equals rasterio.merge of each date, in date order."""
    opened = virtualizarr_fill.open_icechunk(str(store))
    expected = merged_by_date(scenes)
    order = sorted(expected)
    np.testing.assert_array_equal(opened["time"].values, np.array(order, "datetime64[ns]"))
    values = opened.band_data.values
    for step, when in enumerate(order):
        # nodata 0 reads as NaN, as rioxarray reads the files
        merged = expected[when].astype("float64")
        merged[merged == 0] = np.nan
        np.testing.assert_array_equal(values[step], merged)
    ids = [",".join(s.item_id for s in scenes if s.datetime64 == when) for when in order]
    assert list(opened["item_id"].values) == ids
    return opened


def test_build_from_item_collection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenes = write_dates(tmp_path, DATES)
    items = _items_file(tmp_path / "search.json", scenes)
    store = tmp_path / "stack.icechunk"
    code, out, err = _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)
    assert code == EXIT_OK, err
    assert "6 virtualized, 0 skipped" in out
    _assert_store(store, scenes)


def test_build_from_folder_of_items_as_kerchunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, DATES[:2], tiles=1)
    for scene in scenes:
        write_json(tmp_path / "items" / f"{scene.item_id}.json", item(scene, str(scene.path)))
    refs = tmp_path / "stack.json"
    code, _, err = _run(
        capsys, "build", "--stac", tmp_path / "items", "--asset", "B04", "--out", refs
    )
    assert code == EXIT_OK, err
    opened = virtualizarr_fill.open_kerchunk(str(refs))
    expected = merged_by_date(scenes)
    order = sorted(expected)
    np.testing.assert_array_equal(opened["time"].values, np.array(order, "datetime64[ns]"))
    raw = opened.band_data.fillna(0).values.astype("uint8")
    for step, when in enumerate(order):
        np.testing.assert_array_equal(raw[step], expected[when])


def test_append_later_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenes = write_dates(tmp_path, DATES)
    later = write_dates(tmp_path / "later", LATER, first_seed=50)
    store = tmp_path / "stack.icechunk"
    items = _items_file(tmp_path / "search.json", scenes)
    assert _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)[0] == EXIT_OK
    new = _items_file(tmp_path / "later" / "search.json", later)
    code, out, err = _run(capsys, "build", "--append", "--stac", new, "--out", store)
    assert code == EXIT_OK, err
    assert "appended" in out
    _assert_store(store, scenes + later)

    # the same items again are refused, naming a file the repository holds
    code, _, err = _run(capsys, "build", "--append", "--stac", new, "--out", store)
    assert code == EXIT_BAD_INPUT
    assert "already holds" in _error_line(err)


def test_append_of_earlier_items_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, DATES[:1])
    earlier = write_dates(tmp_path / "earlier", ["2023-06-01T10:00:00Z"], first_seed=70)
    store = tmp_path / "stack.icechunk"
    items = _items_file(tmp_path / "search.json", scenes)
    assert _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)[0] == EXIT_OK
    new = _items_file(tmp_path / "earlier" / "search.json", earlier)
    code, _, err = _run(capsys, "build", "--append", "--stac", new, "--out", store)
    assert code == EXIT_BAD_INPUT
    assert "come before the end of" in _error_line(err)
    _assert_store(store, scenes)  # nothing committed


def test_append_with_stac_to_a_store_of_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, DATES[:2], tiles=1)
    store = tmp_path / "files.icechunk"
    code, _, err = _run(
        capsys, "build", scenes[0].path, "--concat-dim", "t", "--new-dim", "--out", store
    )
    assert code == EXIT_OK, err
    items = _items_file(tmp_path / "search.json", scenes[1:])
    code, _, err = _run(capsys, "build", "--append", "--stac", items, "--out", store)
    assert code == EXIT_USAGE
    assert "not built from STAC items" in _error_line(err)


def test_bad_item_is_named_or_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenes = write_dates(tmp_path, DATES, tiles=1)
    documents = [item(s, str(s.path)) for s in scenes[:2]]
    documents.append(item(scenes[2], str(tmp_path / "data" / "gone.tif")))
    items = write_json(tmp_path / "search.json", collection(documents))
    store = tmp_path / "stack.icechunk"
    code, _, err = _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert f"item 'S2_0' (file://{tmp_path}/data/gone.tif): no such file" in line
    assert not store.exists()

    code, out, err = _run(
        capsys, "build", "--stac", items, "--asset", "B04", "--out", store, "--skip-bad"
    )
    assert code == EXIT_OK, err
    assert "2 virtualized, 1 skipped" in out
    assert "item 'S2_0'" in out
    _assert_store(store, scenes[:2])


def test_missing_asset_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenes = write_dates(tmp_path, DATES[:1], tiles=1)
    items = _items_file(tmp_path / "search.json", scenes)
    code, _, err = _run(
        capsys, "build", "--stac", items, "--asset", "B08", "--out", tmp_path / "x.icechunk"
    )
    assert code == EXIT_BAD_INPUT
    assert "item 'S0_0': no asset 'B08' (its assets: B04)" in _error_line(err)


def test_solar_day_grouping_is_recorded_for_append(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, ["2024-01-01T23:59:50Z"], tiles=1)
    scenes += [
        Scene("late", "2024-01-02T00:00:10Z", s.path.with_name("late.tif"), 1) for s in scenes[:1]
    ]
    from tests._stac_items import write_scene

    write_scene(scenes[1].path, 1, 99)
    store = tmp_path / "stack.icechunk"
    items = _items_file(tmp_path / "search.json", scenes, lon=152.0)
    code, _, err = _run(
        capsys, "build", "--stac", items, "--asset", "B04", "--group-by", "solar_day",
        "--out", store,
    )  # fmt: skip
    assert code == EXIT_OK, err
    opened = virtualizarr_fill.open_icechunk(str(store))
    assert opened.sizes["time"] == 1 and list(opened["item_id"].values) == ["S0_0,late"]
    recorded = json.loads(opened.attrs["virtualizarr_fill_stac"])
    assert recorded == {"asset": "B04", "groupby": "solar_day", "time_units": "seconds"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stac", "x.json"], "--stac needs --asset KEY"),
        (["a.tif", "--stac", "x.json", "--asset", "B04"], "drop files"),
        (["--stac", "x.json", "--asset", "B04", "--concat-dim", "t"], "drop --concat-dim"),
        ([], "build needs files (FILES_OR_GLOB_OR_URL) or --stac ITEMS"),
        (["a.tif", "--asset", "B04"], "--asset and --group-by go with --stac ITEMS"),
        (["--append", "--stac", "x.json", "--asset", "B04"], "drop --asset"),
        (
            ["--append", "--stac", "x.json", "--group-by", "time", "--tiff-option", "a=1"],
            "drop --group-by, --tiff-option",
        ),
        (["--stac", "x.json", "--asset", "B04", "--workers", "2"], "drop --workers"),
    ],
    ids=[
        "no-asset",
        "files",
        "concat-dim",
        "nothing",
        "asset-alone",
        "append-asset",
        "append-options",
        "workers",
    ],
)
def test_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = _run(capsys, "build", *argv, "--out", tmp_path / "x.icechunk")
    assert code == EXIT_USAGE
    assert message in _error_line(err)


def test_unreadable_file_is_named_or_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, DATES, tiles=1)
    scenes[1].path.write_bytes(b"<html>not found</html>")
    items = _items_file(tmp_path / "search.json", scenes)
    store = tmp_path / "stack.icechunk"
    code, _, err = _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "item 'S1_0' of 2024-01-05" in line and scenes[1].path.name in line
    code, out, err = _run(
        capsys, "build", "--stac", items, "--asset", "B04", "--out", store, "--skip-bad"
    )
    assert code == EXIT_OK, err
    assert "2 virtualized, 1 skipped" in out
    _assert_store(store, [scenes[0], scenes[2]])


def test_verify_refuses_a_stac_store_rather_than_report_mismatches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, DATES[:2], tiles=1)
    items = _items_file(tmp_path / "search.json", scenes)
    store = tmp_path / "stack.icechunk"
    assert _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)[0] == EXIT_OK
    code, out, err = _run(capsys, "verify", store, "--against", *(s.path for s in scenes))
    assert code == EXIT_USAGE
    assert "built from STAC items (build --stac)" in _error_line(err)
    assert "MISMATCH" not in out


def test_append_of_a_finer_datetime_than_the_store_counts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenes = write_dates(tmp_path, DATES[:1], tiles=1)
    later = write_dates(tmp_path / "later", ["2024-05-01T10:20:30.5Z"], tiles=1, first_seed=80)
    store = tmp_path / "stack.icechunk"
    items = _items_file(tmp_path / "search.json", scenes)
    assert _run(capsys, "build", "--stac", items, "--asset", "B04", "--out", store)[0] == EXIT_OK
    new = _items_file(tmp_path / "later" / "search.json", later)
    code, _, err = _run(capsys, "build", "--append", "--stac", new, "--out", store)
    assert code == EXIT_BAD_INPUT
    assert "is not a whole number of seconds, the store's time unit" in _error_line(err)
    _assert_store(store, scenes)
