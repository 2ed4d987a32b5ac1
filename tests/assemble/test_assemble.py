"""open_virtual_series and open_virtual_mosaic: many files into one virtual dataset.

Each result must equal what xarray's nested combine makes of the files' virtual datasets
in the right order (variables, coordinates, attributes, encodings, manifests), read back
what the native readers read, and, for mosaics, equal ``rasterio.merge.merge``: values,
shape, transform, CRS and nodata. Bad sets are refused naming the files.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from tests._assertions import assert_same_dataset
from tests._manifest_builders import concat_fixtures, native_tiff, read_manifest_array
from tests._native_references import rasterio_merge
from virtualizarr_fill import HDF5Parser, IncompatibleArraysError, TIFFParser

__all__ = ["concat_fixtures"]

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
NESTED = {
    "coords": "minimal",
    "compat": "override",
    "join": "exact",
    "combine_attrs": "drop_conflicts",
}


def _datasets(paths: list[Path], parser: Any, **kwargs: Any) -> list[xr.Dataset]:
    from virtualizarr import open_virtual_dataset

    return [
        open_virtual_dataset(f"file://{p}", registry=REGISTRY, parser=parser, **kwargs)
        for p in paths
    ]


def _same_combination(ours: xr.Dataset, theirs: xr.Dataset) -> None:
    """Equal as datasets go (variable order aside), except that a combined coordinate
    is one chunk where xarray keeps the first file's chunk length, compressed with zarr's
    default where the files stored theirs uncompressed."""
    assert set(ours.variables) == set(theirs.variables)
    variables = {}
    for name in ours.variables:
        variable = theirs[name].variable.copy()
        if variable.ndim == 1 and ours[name].encoding.get("chunks") == (variable.size,):
            variable.encoding["chunks"] = (variable.size,)
            variable.encoding["preferred_chunks"] = {variable.dims[0]: variable.size}
            if "compressors" not in ours[name].encoding:  # only where theirs has none
                assert variable.encoding.pop("compressors", ()) == ()
        variables[name] = variable
    ordered = xr.Dataset(
        {n: variables[n] for n in ours.data_vars},
        coords={n: variables[n] for n in ours.coords},
        attrs=theirs.attrs,
    )
    assert_same_dataset(ours, ordered)


# --------------------------------------------------------------------------- series


STRIPS = ["strip_padded_0", "strip_short_1", "strip_padded_2", "strip_short_2"]


def _georeferenced_strips(
    directory: Path, count: int, shuffle: bool = True, *, start: int = 0, bands: int = 1
) -> list[Path]:
    """Strip GeoTIFFs of one column of a grid (rows ``start`` on along y), written with
    rasterio."""
    rasterio = pytest.importorskip("rasterio")
    from rasterio.transform import from_origin

    rng = np.random.default_rng(5)
    paths = []
    for i in range(start, start + count):
        path = directory / f"row_{i}.tif"
        data = rng.integers(1, 60000, (bands, 25, 16), dtype=np.uint16)
        with rasterio.open(
            path,
            "w",
            driver="GTiff",
            width=16,
            height=25,
            count=bands,
            dtype="uint16",
            crs="EPSG:32633",
            transform=from_origin(500000, 4000000 - i * 250, 10, 10),
            nodata=0,
            compress="deflate",
            blockysize=10,
        ) as dst:
            dst.write(data)
        paths.append(path)
    if shuffle:
        paths = [paths[i] for i in (2, 0, 3, 1)[:count]] if count == 4 else paths[::-1]
    return paths


def test_series_along_y_is_ordered_by_coordinate_and_equals_xarrays(tmp_path: Path) -> None:
    paths = _georeferenced_strips(tmp_path, 4)
    series = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in paths], REGISTRY, TIFFParser(), "y"
    )
    ordered = sorted(paths, key=lambda p: int(p.stem.split("_")[1]))
    theirs = xr.combine_nested(
        _datasets(ordered, TIFFParser()), concat_dim="y", data_vars="minimal", **NESTED
    )
    _same_combination(series, theirs)
    assert series.y.encoding["chunks"] == (100,)  # one chunk, not one per file
    assert bool((np.diff(series.y.values) < 0).all())
    import rasterio

    expected = np.concatenate([rasterio.open(p).read() for p in ordered], axis=1)
    np.testing.assert_array_equal(read_manifest_array(series.band_data.data), expected)


def test_series_refuses_gaps_and_overlaps(tmp_path: Path) -> None:
    paths = sorted(_georeferenced_strips(tmp_path, 4, shuffle=False))
    with pytest.raises(IncompatibleArraysError, match=r"gap along 'y' between .*row_0.*row_2"):
        virtualizarr_fill.open_virtual_series(
            [f"file://{p}" for p in (paths[0], paths[2])], REGISTRY, TIFFParser(), "y"
        )
    gapped = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in (paths[0], paths[2])],
        REGISTRY,
        TIFFParser(),
        "y",
        allow_gaps=True,
    )
    assert gapped.sizes["y"] == 50
    with pytest.raises(IncompatibleArraysError, match="overlap along 'y'"):
        virtualizarr_fill.open_virtual_series(
            [f"file://{p}" for p in (paths[0], paths[0])], REGISTRY, TIFFParser(), "y"
        )


def test_series_of_netcdf_files_with_their_own_time_units(tmp_path: Path) -> None:
    """Each file counts time from its own start: the series decodes and orders by the
    decoded times, as xarray does."""
    rng = np.random.default_rng(2)
    paths, expected = [], []
    for day in (0, 1, 2):
        path = tmp_path / f"day_{day}.nc"
        with h5py.File(path, "w") as f:
            time = f.create_dataset("time", data=np.arange(4, dtype="f8") * 6.0)
            time.attrs["units"] = f"hours since 2020-01-{day + 1:02d}"
            time.attrs["calendar"] = "standard"
            time.make_scale("time")
            values = rng.normal(size=(4, 3)).astype("f4")
            data = f.create_dataset("v", data=values, chunks=(3, 3))
            data.dims[0].attach_scale(time)
        paths.append(path)
        expected.append(values)
    shuffled = [paths[1], paths[2], paths[0]]
    series = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in shuffled], REGISTRY, HDF5Parser(), "time"
    )
    theirs = xr.combine_nested(
        _datasets(paths, HDF5Parser()), concat_dim="time", data_vars="minimal", **NESTED
    )
    _same_combination(series, theirs)
    assert series.time.dtype.kind == "M"
    assert bool((np.diff(series.time.values) > np.timedelta64(0, "ns")).all())
    np.testing.assert_array_equal(read_manifest_array(series.v.data), np.concatenate(expected))


def test_series_of_concat_fixtures(concat_fixtures: dict[str, Path]) -> None:
    """Strip TIFFs without georeferencing have no coordinates: they combine in the order
    given, along y (padded and short last strips) or stacked along a new axis."""
    paths = [concat_fixtures[n] for n in STRIPS[:3]]
    along_y = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in paths], REGISTRY, TIFFParser(), "y"
    )
    theirs = xr.combine_nested(
        _datasets(paths, TIFFParser()), concat_dim="y", data_vars="minimal", **NESTED
    )
    _same_combination(along_y, theirs)
    np.testing.assert_array_equal(
        read_manifest_array(along_y.band_data.data)[0],
        np.concatenate([native_tiff(p) for p in paths]),
    )
    stacked = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in paths], REGISTRY, TIFFParser(), "file", new_dim=True
    )
    theirs = xr.combine_nested(
        _datasets(paths, TIFFParser()), concat_dim="file", data_vars="all", **NESTED
    )
    _same_combination(stacked, theirs)
    np.testing.assert_array_equal(
        read_manifest_array(stacked.band_data.data)[:, 0],
        np.stack([native_tiff(p) for p in paths]),
    )


# --------------------------------------------------------------------------- mosaics

#: The pixel size of the tiles the ``write_tiles`` fixture writes.
RES = 10.0


def _mosaic(paths: list[Path], **kwargs: Any) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return virtualizarr_fill.open_virtual_mosaic(
            [f"file://{p}" for p in paths], REGISTRY, **kwargs
        )


@pytest.mark.parametrize("tiled", [False, True], ids=["strips", "tiles"])
def test_mosaic_equals_rasterio_merge(
    tmp_path: Path, tiled: bool, write_tiles: Callable[..., list[Path]]
) -> None:
    rasterio = pytest.importorskip("rasterio")

    paths = write_tiles(tmp_path, tiled=tiled)
    mosaic = _mosaic(paths)
    merged, transform = rasterio_merge(paths)
    with rasterio.open(paths[0]) as first:
        crs = first.crs
    values = read_manifest_array(mosaic.band_data.data)
    assert values.shape == merged.shape == (3, 48 + 30, 64 + 64 + 40)
    np.testing.assert_array_equal(values, merged)
    import rioxarray  # noqa: F401  (the .rio accessor)

    rio = mosaic.rio
    assert rio.transform() == transform
    assert rio.crs == crs
    assert (
        mosaic.band_data.attrs.get("_FillValue") == 0
        or mosaic.band_data.encoding.get("_FillValue") == 0
    )

    # the same as xarray's 2-D nested combine of the tiles' datasets, in grid order
    grid = [[tmp_path / f"tile_{r}_{c}.tif" for c in range(3)] for r in range(2)]
    datasets = [_datasets(row, TIFFParser()) for row in grid]
    theirs = xr.combine_nested(datasets, concat_dim=["y", "x"], data_vars="minimal", **NESTED)
    _same_combination(mosaic, theirs)


def test_mosaic_written_to_icechunk_opens_with_rioxarray(
    tmp_path: Path, write_tiles: Callable[..., list[Path]]
) -> None:
    rioxarray = pytest.importorskip("rioxarray")

    from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write

    data = tmp_path / "data"
    data.mkdir()
    paths = write_tiles(data)
    repo = icechunk_repo(tmp_path / "repo", data)
    icechunk_write(repo, _mosaic(paths))
    read = icechunk_read(repo)
    merged, transform = rasterio_merge(paths)
    np.testing.assert_array_equal(read.band_data.fillna(0).values.astype("u1"), merged)
    assert read.rio.transform() == transform
    assert rioxarray is not None


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("crs", r"tile_1_2.tif is in another coordinate reference system"),
        ("misaligned", r"tile_0_1.tif is not on the grid of .*tile_\d_0.tif along 'x': \+0.50 px"),
        ("overlap", r"tile_0_\d.tif and .*tile_0_\d.tif overlap by 48 x 2 pixels"),
        ("gap", r"no tile covers rows 0-47, columns 64-127 of the mosaic"),
        ("bands", r"tile_1_2.tif has 2 bands, the other tiles \(such as .*\) 3 bands"),
    ],
)
def test_mosaic_refuses_bad_tile_sets(
    tmp_path: Path, case: str, message: str, write_tiles: Callable[..., list[Path]]
) -> None:
    if case == "crs":
        paths = write_tiles(tmp_path, crs=["EPSG:32633"] * 5 + ["EPSG:32634"])
    elif case == "misaligned":
        paths = write_tiles(tmp_path, shift={(0, 1): (RES / 2, 0.0)})
    elif case == "overlap":
        paths = write_tiles(tmp_path, shift={(0, 1): (-RES * 2, 0.0)})
    elif case == "gap":
        paths = write_tiles(tmp_path)
        paths = [p for p in paths if p.stem not in {"tile_0_1", "tile_1_1"}]
    else:
        paths = write_tiles(tmp_path, bands={(1, 2): 2})
    with pytest.raises(IncompatibleArraysError, match=message):
        _mosaic(paths)


def test_series_keeps_the_cf_attributes_users_decode(tmp_path: Path) -> None:
    """_FillValue, scale_factor, add_offset and grid_mapping survive the combination
    (xr.combine_nested's default combine_attrs="drop" loses them): the series decodes to
    what netCDF4 reads, masked and scaled."""
    import netCDF4

    paths = []
    for k in range(3):
        path = tmp_path / f"packed_{k}.nc"
        with netCDF4.Dataset(path, "w") as f:
            f.createDimension("time", 3)
            time = f.createVariable("time", "f8", ("time",))
            time.units = "days since 2001-01-01"
            time[:] = np.arange(3) + 3 * k
            crs = f.createVariable("crs", "i4")
            crs.grid_mapping_name = "latitude_longitude"
            packed = f.createVariable("t", "i2", ("time",), fill_value=-32768)
            packed.scale_factor = 0.01
            packed.add_offset = 0.0
            packed.grid_mapping = "crs"
            packed.set_auto_maskandscale(False)
            packed[:] = np.array([352, -32768, 18], dtype="i2") + k
        paths.append(path)
    series = virtualizarr_fill.open_virtual_series(
        [f"file://{p}" for p in paths[::-1]], REGISTRY, HDF5Parser(), "time"
    )
    attrs = series.t.attrs
    assert attrs["scale_factor"] == 0.01 and attrs["add_offset"] == 0.0
    assert attrs["grid_mapping"] == "crs" and attrs["_FillValue"] == -32768
    from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write

    data = tmp_path
    repo = icechunk_repo(tmp_path / "repo", data)
    icechunk_write(repo, series)
    decoded = icechunk_read(repo).t.values
    expected = []
    for path in paths:
        with netCDF4.Dataset(path) as f:
            expected.append(np.ma.filled(f["t"][:].astype("f8"), np.nan))
    np.testing.assert_allclose(decoded, np.concatenate(expected), equal_nan=True)
    assert np.isnan(decoded[1]) and decoded[0] == pytest.approx(3.52)
