"""TIFFParser behaviour: chunk grids and edge codecs, sparse segments, refusals, trees,
stacks, inlined coordinates, pickling and request counts."""

from __future__ import annotations

import pickle
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset, open_virtual_datatree
from zarr.core.metadata.v3 import RectilinearChunkGridMetadata, RegularChunkGridMetadata

from fixtures import make_tiff_fixtures
from virtualizarr_fill.codecs import TruncateCodec
from virtualizarr_fill.errors import CorruptFileError, NotATiffError, UnsupportedFeatureError
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.tiff import TIFFParser

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})

NAMES = [
    "strip_padded_none",
    "strip_short_none",
    "strip_short_deflate",
    "strip_padded_deflate",
    "strip_padded_lzw",
    "strip_short_rgb_chunky_deflate",
    "strip_padded_rgb_planar_none",
    "jpeg_ycbcr_strips_short",
    "webp_strips_short",
    "tiles_chunky_rgb_deflate",
    "tiles_sparse_deflate",
    "strips_sparse_none",
    "volumetric_refused",
    "multipage_stack",
    "subifd_pyramid",
    "gdal_cog_overviews_mask",
    "gdal_jpeg_strips",
    "packed_1bit_padded_strip",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_tiff_fixtures.write_fixtures(tmp_path_factory.mktemp("tiff-parser"), NAMES)


def url_of(path: Path) -> str:
    return "file://" + str(path.resolve())


def parse(path: Path, **options: Any) -> Any:
    return TIFFParser(**options)(url_of(path), REGISTRY)


def band_data(store: Any, path: str = "band_data") -> zarr.Array:
    return zarr.open_array(store=store, path=path, mode="r", zarr_format=3)


def tifffile_bands(path: Path, ifd: int = 0) -> np.ndarray:
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[ifd]
        data = page.asarray().reshape(page.shaped)
    return data[:, 0, :, :, 0] if page.shaped[0] > 1 else np.moveaxis(data[0, 0], -1, 0)


def expected_values(name: str, path: Path) -> np.ndarray:
    """The written values where tifffile cannot decode the file, else tifffile's decode."""
    truth = make_tiff_fixtures.TRUTHS.get(name)
    return truth() if truth is not None else tifffile_bands(path)


def codec_names(array: zarr.Array) -> list[str]:
    return [codec.to_dict()["name"] for codec in array.metadata.codecs]


# -- chunk grid and edge codecs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "grid", "truncate"),
    [
        ("strip_padded_none", "regular", False),  # byte counts show the padding
        ("strip_short_none", "rectilinear", False),  # byte counts show the short strip
        ("strip_padded_rgb_planar_none", "regular", False),
        ("strip_short_deflate", "rectilinear", False),  # compressed: last strip decoded
        ("strip_padded_deflate", "regular", False),
        ("strip_padded_lzw", "regular", False),
        ("strip_short_rgb_chunky_deflate", "rectilinear", False),
        ("jpeg_ycbcr_strips_short", "rectilinear", False),  # JPEG header read: short strip
        ("webp_strips_short", "rectilinear", False),
        ("tiles_chunky_rgb_deflate", "regular", False),  # edge tiles are stored full
        ("packed_1bit_padded_strip", "regular", False),
    ],
)
def test_grid_and_edge_codec(files: dict[str, Path], name: str, grid: str, truncate: bool) -> None:
    array = band_data(parse(files[name]))
    expected = RegularChunkGridMetadata if grid == "regular" else RectilinearChunkGridMetadata
    assert isinstance(array.metadata.chunk_grid, expected)
    assert any(isinstance(c, TruncateCodec) for c in array.metadata.codecs) is truncate
    np.testing.assert_array_equal(array[...], expected_values(name, files[name]))


def test_truncate_sits_right_after_bytes(files: dict[str, Path]) -> None:
    array = band_data(parse(files["strip_short_rgb_chunky_deflate"], probe_last_strip=False))
    assert codec_names(array) == [
        "transpose",
        "bytes",
        "virtualizarr_fill.truncate",
        "numcodecs.zlib",
    ]


@pytest.mark.parametrize(
    ("name", "grid"),
    [
        ("strip_padded_deflate", RegularChunkGridMetadata),
        ("strip_short_deflate", RectilinearChunkGridMetadata),
    ],
)
def test_probed_last_strip_needs_no_edge_codec(
    files: dict[str, Path], name: str, grid: type
) -> None:
    """The last strip is decompressed: padded -> regular grid, short -> short last edge;
    neither needs the truncate codec (stores read without this package)."""
    array = band_data(parse(files[name]))
    assert isinstance(array.metadata.chunk_grid, grid)
    assert "virtualizarr_fill.truncate" not in codec_names(array)
    np.testing.assert_array_equal(array[...], expected_values(name, files[name]))


@pytest.mark.parametrize("name", ["strip_padded_deflate", "strip_short_deflate"])
def test_unprobed_last_strip_gets_the_truncate_codec(files: dict[str, Path], name: str) -> None:
    array = band_data(parse(files[name], probe_last_strip=False))
    assert isinstance(array.metadata.chunk_grid, RectilinearChunkGridMetadata)
    assert "virtualizarr_fill.truncate" in codec_names(array)
    np.testing.assert_array_equal(array[...], expected_values(name, files[name]))


def test_gdal_jpeg_strips_match_gdal(files: dict[str, Path]) -> None:
    rasterio = pytest.importorskip("rasterio")
    array = band_data(parse(files["gdal_jpeg_strips"]))
    with rasterio.open(files["gdal_jpeg_strips"]) as src:
        np.testing.assert_array_equal(array[...], src.read())


# -- sparse segments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "index"), [("tiles_sparse_deflate", (0, 1, 1)), ("strips_sparse_none", (0, 2, 0))]
)
def test_sparse_segments_are_absent_and_read_as_fill(
    files: dict[str, Path], name: str, index: tuple[int, ...]
) -> None:
    store = parse(files[name])
    manifest = store._group.arrays["band_data"].manifest
    assert manifest.get_entry(index) is None
    assert sum(1 for _ in manifest.iter_refs()) == manifest._paths.size - 1
    array = band_data(store)
    np.testing.assert_array_equal(array[...], tifffile_bands(files[name]))


# -- refusals ----------------------------------------------------------------------------------


def test_volumetric_is_refused_naming_file_and_feature(files: dict[str, Path]) -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"volumetric_refused\.tif.*ImageDepth"):
        parse(files["volumetric_refused"])


def test_not_a_tiff(tmp_path: Path) -> None:
    path = tmp_path / "text.tif"
    path.write_bytes(b"this is not a TIFF file at all" * 10)
    with pytest.raises(NotATiffError, match=r"text\.tif"):
        parse(path)


def test_truncated_file_is_refused(tmp_path: Path, files: dict[str, Path]) -> None:
    path = tmp_path / "cut.tif"
    data = files["strip_short_none"].read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match=r"cut\.tif.*past the end"):
        parse(path)


# -- several images ------------------------------------------------------------------------------


def test_tree_names_overviews_and_masks(files: dict[str, Path]) -> None:
    store = parse(files["gdal_cog_overviews_mask"], tree=True)
    assert set(store._group.groups) == {
        "image",
        "mask",
        "overview_1",
        "overview_2",
        "mask_overview_1",
        "mask_overview_2",
    }
    tree = open_virtual_datatree(
        url_of(files["gdal_cog_overviews_mask"]), registry=REGISTRY, parser=TIFFParser(tree=True)
    )
    assert tree["overview_1"]["band_data"].shape == (3, 64, 48)
    assert tree["mask"]["band_data"].dtype == np.uint8
    # overviews inherit the image's georeference, scaled
    x0 = tree["image"]["x"].values
    x1 = tree["overview_1"]["x"].values
    assert x1[0] - (x1[1] - x1[0]) / 2 == pytest.approx(x0[0] - (x0[1] - x0[0]) / 2)


def test_tree_subifds(files: dict[str, Path]) -> None:
    store = parse(files["subifd_pyramid"], tree=True)
    assert set(store._group.groups) == {"image", "image_subifd_0", "image_subifd_1"}
    root = zarr.open_group(store=store, mode="r", zarr_format=3)
    with tifffile.TiffFile(files["subifd_pyramid"]) as tif:
        levels = [tif.pages[0].asarray()] + [p.asarray() for p in tif.pages[0].pages]
    for name, level in zip(["image", "image_subifd_0", "image_subifd_1"], levels, strict=True):
        np.testing.assert_array_equal(root[name]["band_data"][0], level)


def test_ifd_option_selects_one_image(files: dict[str, Path]) -> None:
    array = band_data(parse(files["gdal_cog_overviews_mask"], ifd=2))
    np.testing.assert_array_equal(array[...], tifffile_bands(files["gdal_cog_overviews_mask"], 2))


def test_ifd_option_out_of_range(files: dict[str, Path]) -> None:
    with pytest.raises(UnsupportedFeatureError, match="IFD 9 does not exist"):
        parse(files["strip_short_none"], ifd=9)


def test_stack_pages(files: dict[str, Path]) -> None:
    store = parse(files["multipage_stack"], stack_pages=True)
    ds = xr.open_zarr(store, zarr_format=3, consolidated=False)
    assert ds["band_data"].dims == ("page", "band", "y", "x")
    with tifffile.TiffFile(files["multipage_stack"]) as tif:
        expected = np.stack([page.asarray() for page in tif.pages])
    np.testing.assert_array_equal(ds["band_data"].values[:, 0], expected)
    np.testing.assert_array_equal(ds["page"].values, [0, 1, 2])


# -- dataset layout, inlined coordinates ----------------------------------------------------------


def test_coordinates_load_without_the_file(tmp_path: Path, files: dict[str, Path]) -> None:
    path = tmp_path / "moved.tif"
    shutil.copy(files["gdal_cog_overviews_mask"], path)
    store = parse(path)
    path.unlink()
    ds = xr.open_zarr(store, zarr_format=3, consolidated=False)
    assert ds["x"].size == 96 and ds["y"].size == 128
    np.testing.assert_array_equal(ds["band"].values, [1, 2, 3])
    assert "crs_wkt" in ds["spatial_ref"].attrs
    with pytest.raises(Exception):  # noqa: B017 - the data itself is gone
        ds["band_data"].values  # noqa: B018


def test_open_virtual_dataset_layout(files: dict[str, Path]) -> None:
    vds = open_virtual_dataset(
        url_of(files["gdal_cog_overviews_mask"]), registry=REGISTRY, parser=TIFFParser()
    )
    assert vds["band_data"].dims == ("band", "y", "x")
    assert {"band", "x", "y", "spatial_ref"} <= set(vds.coords)
    assert vds["band_data"].attrs["grid_mapping"] == "spatial_ref"


# -- pickling and requests -------------------------------------------------------------------------


def test_parser_pickles(files: dict[str, Path]) -> None:
    parser = TIFFParser(ifd=1, tree=False, on_out_of_range="warn", probe_last_strip=True)
    clone = pickle.loads(pickle.dumps(parser))
    assert clone == parser
    array = band_data(clone(url_of(files["gdal_cog_overviews_mask"]), REGISTRY))
    assert array.shape == (1, 128, 96)


def test_small_file_header_costs_one_request(files: dict[str, Path]) -> None:
    path = files["strip_short_deflate"]
    reader = StoreFile(LocalStore(), str(path.resolve()))
    TIFFParser().parse(url_of(path), reader)
    assert reader.stats.requests == 1


def test_jpeg_strip_probe_costs_at_most_one_more_request(files: dict[str, Path]) -> None:
    path = files["jpeg_ycbcr_strips_short"]
    reader = StoreFile(LocalStore(), str(path.resolve()), first_request=4096, block_size=4096)
    TIFFParser(first_request=4096).parse(url_of(path), reader)
    assert reader.stats.requests <= 2


def test_no_warnings_for_plain_file(files: dict[str, Path]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse(files["tiles_chunky_rgb_deflate"])


def test_percent_encoded_file_url(tmp_path: Path) -> None:
    """``Path.as_uri()`` encodes ``+``; local stores look paths up literally."""
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset

    folder = tmp_path / "owner+repo"
    folder.mkdir()
    data = np.arange(150 * 9, dtype="<u2").reshape(150, 9)
    tifffile.imwrite(folder / "a.tif", data, rowsperstrip=12)
    url = (folder / "a.tif").as_uri()
    assert "%2B" in url
    registry = ObjectStoreRegistry({"file:///": LocalStore("/")})
    vds = open_virtual_dataset(url, registry=registry, parser=TIFFParser())
    store = TIFFParser()(url, registry)
    loaded = xr.open_zarr(store, zarr_format=3, consolidated=False, mask_and_scale=False)
    np.testing.assert_array_equal(loaded["band_data"].values[0], data)
    assert vds["band_data"].shape == (1, 150, 9)
