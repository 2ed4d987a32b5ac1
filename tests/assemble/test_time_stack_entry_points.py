"""The two entry points that stack scenes by time, ``stack_by_time`` (virtual datasets
already opened) and ``open_virtual_series(..., "time")`` (URLs), order scenes and refuse
two scenes of one time by one rule: the same order, read back equal to rasterio's reads
stacked in the order of the dates the scenes were written with, and the same error class
and message for a duplicate time.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

from fixtures import make_gdal_features
from tests._manifest_builders import kerchunk_read
from virtualizarr_fill import IncompatibleArraysError, TimeCoordinateError, open_virtual_series
from virtualizarr_fill.assemble.time_stack import stack_by_time
from virtualizarr_fill.tiff import TIFFParser

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _scenes(directory: Path, whens: list[dt.datetime], **options: Any) -> list[Path]:
    """Scenes dated ``whens`` (the TIFF DateTime tag), named in the order given."""
    directory.mkdir()
    paths = []
    for k, when in enumerate(whens):
        path = directory / f"scene_{k}.tif"
        make_gdal_features.write_dated_scene(path, when, seed=k, **options)
        paths.append(path)
    return paths


def _stacked_with_stack_by_time(urls: list[str], **open_options: Any) -> xr.Dataset:
    parser = TIFFParser(time_from="datetime")
    scenes = [
        open_virtual_dataset(u, registry=REGISTRY, parser=parser, **open_options) for u in urls
    ]
    return stack_by_time(scenes, urls)


def _stacked_with_series(urls: list[str], **options: Any) -> xr.Dataset:
    return open_virtual_series(urls, REGISTRY, TIFFParser(time_from="datetime"), "time", **options)


ENTRY_POINTS = {"stack_by_time": _stacked_with_stack_by_time, "series": _stacked_with_series}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_scenes_read_back_as_rasterio_reads_them_in_time_order(tmp_path: Path, entry: str) -> None:
    days = [14, 3, 27, 9, 20]
    whens = [dt.datetime(2024, 5, d, 10, 30) for d in days]
    # Deflate strips of 6 rows over 20: a rectilinear grid whose last strip is truncated
    paths = _scenes(tmp_path / "scenes", whens, BLOCKYSIZE=6, COMPRESS="DEFLATE")
    stack = ENTRY_POINTS[entry]([_url(p) for p in paths])
    target = tmp_path / "stack.json"
    stack.vz.to_kerchunk(str(target), format="json", zarr_format=3)
    read = kerchunk_read(str(target))

    in_time_order = sorted(range(len(days)), key=lambda i: days[i])
    expected_times = np.array([whens[i] for i in in_time_order], dtype="datetime64[ns]")
    np.testing.assert_array_equal(read["time"].values, expected_times, strict=True)
    native = []
    for i in in_time_order:
        with rasterio.open(paths[i]) as src:
            native.append(src.read())
    np.testing.assert_array_equal(read["band_data"].values, np.stack(native), strict=True)


def _refusal(entry: str, urls: list[str], **options: Any) -> TimeCoordinateError:
    with pytest.raises(TimeCoordinateError) as refused:
        ENTRY_POINTS[entry](urls, **options)
    return refused.value


@pytest.mark.parametrize("decode_times", [None, False])
def test_same_time_is_refused_alike_through_both_entry_points(
    tmp_path: Path, decode_times: bool | None
) -> None:
    whens = [dt.datetime(2024, 1, 3), dt.datetime(2024, 1, 1, 6), dt.datetime(2024, 1, 1, 6)]
    urls = [_url(p) for p in _scenes(tmp_path / "twins", whens)]
    expected = (
        f"{urls[1]} and {urls[2]} have the same time (2024-01-01T06:00:00); "
        "a time stack takes one scene per time"
    )
    options = {"decode_times": decode_times}
    # undecoded, the times are the stored numbers: the message still shows the time
    from_datasets = _refusal("stack_by_time", urls, **options)
    from_urls = _refusal("series", urls, **options)
    assert str(from_datasets) == str(from_urls) == expected
    assert type(from_datasets) is type(from_urls) is TimeCoordinateError
    # code that caught the series' earlier refusal (IncompatibleArraysError) still does
    assert isinstance(from_urls, IncompatibleArraysError)


def test_a_duplicate_time_stored_in_other_units_is_shown_as_its_time(tmp_path: Path) -> None:
    """Undecoded times compare by the times they encode, not by their numbers: 0 days
    since 2024-01-01 is 1704067200 seconds since 1970-01-01."""
    urls = [_url(p) for p in _scenes(tmp_path / "units", [dt.datetime(2024, 1, 1)] * 2)]
    parser = TIFFParser(time_from="datetime")
    scenes = [
        open_virtual_dataset(u, registry=REGISTRY, parser=parser, decode_times=False) for u in urls
    ]
    assert scenes[0]["time"].values.tolist() == [1704067200]
    twin = scenes[1].assign_coords(
        time=xr.Variable(("time",), [0], {"units": "days since 2024-01-01"})
    )
    with pytest.raises(TimeCoordinateError) as refused:
        stack_by_time([scenes[0], twin], urls)
    assert str(refused.value) == (
        f"{urls[0]} and {urls[1]} have the same time (2024-01-01T00:00:00); "
        "a time stack takes one scene per time"
    )
