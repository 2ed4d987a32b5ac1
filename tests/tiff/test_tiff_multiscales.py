"""A COG's overviews as a multiscale group (``TIFFParser(overviews="multiscales")``).

The COG is written by GDAL's COG driver (three overview levels and a mask); every level
reads equal to rasterio's ``overview_level`` read, with its coordinates from rasterio's
level transform, directly, through ``open_virtual_datatree``, Icechunk and kerchunk. The
group attributes are validated against a JSON schema written here from the multiscales
v0.1 and spatial v0.1 specifications, and against GDAL's numbers.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import rasterio
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_datatree

import virtualizarr_fill
from fixtures import make_gdal_features
from tests._manifest_builders import icechunk_repo
from virtualizarr_fill.multiscales.conventions import check_description
from virtualizarr_fill.multiscales.stores import combine_multiscales
from virtualizarr_fill.tiff import TIFFParser
from virtualizarr_fill.writers.kerchunk_multiscales import multiscales_to_kerchunk

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
PARSER = TIFFParser(overviews="multiscales")
LEVELS = ["0", "1", "2", "3"]
MASK = "mask"

# The rules of multiscales v0.1 (group attributes: a registration of the convention, a
# non-empty layout of objects with a relative ``asset`` path, ``transform`` required
# where ``derived_from`` is given) and of spatial v0.1 as used in layout objects.
_PATH = {"type": "string", "pattern": r"^(?!/)(?!.*\.\.)[^/]+(/[^/]+)*$"}
_PAIR = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["zarr_conventions", "multiscales"],
    "properties": {
        "zarr_conventions": {
            "type": "array",
            "allOf": [
                {
                    "contains": {
                        "type": "object",
                        "required": ["uuid"],
                        "properties": {
                            "uuid": {"const": "d35379db-88df-4056-af3a-620245f8e347"},
                            "name": {"const": "multiscales"},
                            "schema_url": {
                                "const": "https://raw.githubusercontent.com/zarr-conventions/"
                                "multiscales/refs/tags/v0.1/schema.json"
                            },
                            "spec_url": {
                                "const": "https://github.com/zarr-conventions/multiscales/"
                                "blob/v0.1/README.md"
                            },
                        },
                    }
                },
                {
                    "contains": {
                        "type": "object",
                        "required": ["uuid"],
                        "properties": {
                            "uuid": {"const": "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4"},
                            "name": {"const": "spatial"},
                        },
                    }
                },
            ],
        },
        "multiscales": {
            "type": "object",
            "required": ["layout"],
            "properties": {
                "resampling_method": {"type": "string"},
                "layout": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["asset"],
                        "properties": {
                            "asset": _PATH,
                            "derived_from": _PATH,
                            "transform": {
                                "type": "object",
                                "properties": {"scale": _PAIR, "translation": _PAIR},
                            },
                            "resampling_method": {"type": "string"},
                            "spatial:shape": {
                                "type": "array",
                                "items": {"type": "integer", "minimum": 1},
                                "minItems": 2,
                                "maxItems": 2,
                            },
                            "spatial:transform": {
                                "type": "array",
                                "items": {"type": "number"},
                                "minItems": 6,
                                "maxItems": 6,
                            },
                        },
                        "if": {"required": ["derived_from"]},
                        "then": {"required": ["transform"]},
                    },
                },
            },
        },
        "spatial:dimensions": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 2,
            "maxItems": 2,
        },
        "spatial:bbox": {"type": "array", "items": {"type": "number"}, "minItems": 4},
    },
}


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


@pytest.fixture(scope="module")
def cog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cog") / "cog.tif"
    make_gdal_features.write_cog(path)
    return path


def rasterio_level(path: Path, level: int) -> dict[str, Any]:
    """rasterio's read of one level (0: full resolution): values, mask, transform, and
    the pixel-centre coordinates rioxarray gives the level."""
    import rioxarray

    overview = level - 1 if level else None
    with rasterio.open(path, overview_level=overview) as src:
        reference = {
            "values": src.read(),
            "mask": src.read_masks(1),
            "transform": src.transform,
            "crs": src.crs,
        }
    with rioxarray.open_rasterio(path, overview_level=overview) as opened:
        reference["x"], reference["y"] = opened["x"].values, opened["y"].values
    return reference


def _check_level(level: xr.Dataset | xr.DataTree, reference: dict[str, Any]) -> None:
    values = reference["values"]
    np.testing.assert_array_equal(np.asarray(level["band_data"].values), values, strict=True)
    # the stored 1-bit mask reads 0/1 where GDAL reports 0/255
    np.testing.assert_array_equal(
        np.asarray(level["mask"].values) != 0, reference["mask"] != 0, strict=True
    )
    np.testing.assert_array_equal(level["x"].values, reference["x"], strict=True)
    np.testing.assert_array_equal(level["y"].values, reference["y"], strict=True)


def test_levels_read_equal_rasterio_overviews(cog: Path) -> None:
    store = PARSER(_url(cog), REGISTRY)
    root = zarr.open_group(store, mode="r", zarr_format=3)
    assert sorted(root.group_keys()) == LEVELS
    with tifffile.TiffFile(cog) as tif:
        masks = [p for p in tif.pages if p.is_mask]
        for number, name in enumerate(LEVELS):
            reference = rasterio_level(cog, number)
            group = root[name]
            band = np.asarray(group["band_data"][...])
            np.testing.assert_array_equal(band, reference["values"], strict=True)
            mask = np.asarray(group["mask"][...])
            np.testing.assert_array_equal(mask, masks[number].asarray().astype(np.uint8))
            assert group["mask"].metadata.dimension_names == ("y", "x")


def test_attributes_follow_the_conventions_and_gdal(cog: Path) -> None:
    store = PARSER(_url(cog), REGISTRY)
    root = zarr.open_group(store, mode="r", zarr_format=3)
    attributes = json.loads(json.dumps(dict(root.attrs)))
    jsonschema.validate(attributes, SCHEMA)
    shapes = {name: root[name]["band_data"].shape[1:] for name in LEVELS}
    assert check_description(attributes, shapes) == []
    layout = attributes["multiscales"]["layout"]
    assert [entry["asset"] for entry in layout] == LEVELS
    assert attributes["multiscales"]["resampling_method"] == "average"  # GDAL's metadata
    assert attributes["spatial:dimensions"] == ["y", "x"]
    full = rasterio_level(cog, 0)["values"].shape[1:]
    for number, entry in enumerate(layout):
        reference = rasterio_level(cog, number)
        height, width = reference["values"].shape[1:]
        assert entry["spatial:shape"] == [height, width]
        assert entry["spatial:transform"] == pytest.approx(list(reference["transform"])[:6])
        assert entry["transform"]["scale"] == pytest.approx([full[0] / height, full[1] / width])
        assert entry["transform"]["translation"] == [0.0, 0.0]
        assert entry.get("derived_from") == (None if number == 0 else "0")
    with rasterio.open(cog) as src:
        assert attributes["spatial:bbox"] == pytest.approx(list(src.bounds))


def test_check_description_reports_what_breaks_the_rules(cog: Path) -> None:
    store = PARSER(_url(cog), REGISTRY)
    good = json.loads(json.dumps(dict(zarr.open_group(store, mode="r", zarr_format=3).attrs)))
    broken = json.loads(json.dumps(good))
    del broken["multiscales"]["layout"][1]["transform"]
    broken["multiscales"]["layout"][2]["spatial:transform"][0] *= 1.5
    broken["multiscales"]["layout"][3]["asset"] = "../3"
    broken["zarr_conventions"] = broken["zarr_conventions"][:1]
    problems = check_description(broken)
    assert any(
        "layout[1] is derived_from another level but has no transform" in p for p in problems
    )
    assert any("layout[2].spatial:transform" in p for p in problems)
    assert any("layout[3].asset '../3'" in p for p in problems)
    assert any("spatial v0.1 is not registered" in p for p in problems)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
    assert check_description(good, {"0": (300, 260)})[0].startswith("multiscales.layout[1]")


def test_open_virtual_datatree_and_rioxarray(cog: Path) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    tree = open_virtual_datatree(_url(cog), registry=REGISTRY, parser=PARSER)
    assert set(tree.children) == set(LEVELS)
    for number, name in enumerate(LEVELS):
        reference = rasterio_level(cog, number)
        level = tree[name].to_dataset()
        assert level["band_data"].dims == ("band", "y", "x")
        assert level["mask"].dims == ("y", "x")
        np.testing.assert_array_equal(level["x"].values, reference["x"], strict=True)
        np.testing.assert_array_equal(level["y"].values, reference["y"], strict=True)
        loaded = level.drop_vars(["band_data", "mask"]).load()
        assert loaded.rio.crs == reference["crs"]
        assert loaded.rio.transform() == pytest.approx(reference["transform"])


def test_icechunk_round_trip(cog: Path, tmp_path: Path) -> None:
    tree = open_virtual_datatree(_url(cog), registry=REGISTRY, parser=PARSER)
    repo = icechunk_repo(tmp_path / "repo", cog.parent)
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(tree, session.store)
    session.commit("multiscales")
    read = xr.open_datatree(repo.readonly_session("main").store, engine="zarr", consolidated=False)
    assert read.attrs["multiscales"] == json.loads(json.dumps(tree.attrs["multiscales"]))
    for number, name in enumerate(LEVELS):
        _check_level(read[name].to_dataset(), rasterio_level(cog, number))


def test_kerchunk_round_trip(cog: Path, tmp_path: Path) -> None:
    import fsspec

    tree = open_virtual_datatree(_url(cog), registry=REGISTRY, parser=PARSER)
    target = tmp_path / "refs.json"
    multiscales_to_kerchunk(tree, target, format="json")
    fs = fsspec.filesystem("reference", fo=str(target), remote_protocol="file", asynchronous=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    read = xr.open_datatree(store, engine="zarr", consolidated=False, zarr_format=3)
    assert check_description(read.attrs, {n: read[n]["band_data"].shape[1:] for n in LEVELS}) == []
    for number, name in enumerate(LEVELS):
        _check_level(read[name].to_dataset(), rasterio_level(cog, number))


def test_mosaic_of_cogs_keeps_common_levels(tmp_path: Path) -> None:
    """Two COGs side by side along x combine level by level; a third with fewer
    overviews limits the mosaic to the levels all of them have."""
    width = 256
    paths = []
    for k in range(2):
        path = tmp_path / f"tile_{k}.tif"
        origin = (
            make_gdal_features.ORIGIN[0] + k * width * make_gdal_features.PIXEL,
            make_gdal_features.ORIGIN[1],
        )
        make_gdal_features.write_cog(path, height=192, width=width, origin=origin, seed=k)
        paths.append(path)
    trees = [open_virtual_datatree(_url(p), registry=REGISTRY, parser=PARSER) for p in paths]
    # Level 3 is 32 pixels wide in 64-pixel tiles: the image's edge tile is cropped
    # inside the mosaic; the 1-bit mask's cannot be, and is left out of that level.
    with pytest.warns(UserWarning, match="level 3: the masks cannot be combined"):
        mosaic = combine_multiscales(trees, [str(p) for p in paths], "x")
    assert list(mosaic.children) == LEVELS
    assert [MASK in mosaic[n].data_vars for n in LEVELS] == [True, True, True, False]
    shapes = {n: tuple(mosaic[n]["band_data"].shape[1:]) for n in LEVELS}
    assert check_description(mosaic.attrs, shapes) == []
    assert shapes["3"] == (24, 64)
    for number, name in enumerate(LEVELS):
        references = [rasterio_level(p, number) for p in paths]
        level = mosaic[name].to_dataset()
        store = tmp_path / f"level{name}.json"
        level.vz.to_kerchunk(str(store), format="json", zarr_format=3)
        from tests._manifest_builders import kerchunk_read

        read = kerchunk_read(str(store))
        expected = np.concatenate([r["values"] for r in references], axis=2)
        np.testing.assert_array_equal(read["band_data"].values, expected, strict=True)
        if MASK in read:
            masks = np.concatenate([r["mask"] for r in references], axis=1)
            np.testing.assert_array_equal(read[MASK].values != 0, masks != 0, strict=True)
        expected_x = np.concatenate([r["x"] for r in references])
        np.testing.assert_array_equal(level["x"].values, expected_x, strict=True)
        np.testing.assert_array_equal(level["y"].values, references[0]["y"], strict=True)

    fewer = tmp_path / "tile_2.tif"
    origin = (
        make_gdal_features.ORIGIN[0] + 2 * width * make_gdal_features.PIXEL,
        make_gdal_features.ORIGIN[1],
    )
    make_gdal_features.write_cog(
        fewer, height=192, width=width, origin=origin, overview_factors=(2,)
    )
    trees.append(open_virtual_datatree(_url(fewer), registry=REGISTRY, parser=PARSER))
    with pytest.warns(UserWarning, match=r"only the 2 levels .*tile_0\.tif, .*tile_1\.tif"):
        smaller = combine_multiscales(trees, [str(p) for p in [*paths, fewer]], "x")
    assert list(smaller.children) == ["0", "1"]
    assert smaller["1"]["band_data"].shape == (3, 96, 384)


def test_an_image_without_overviews_is_one_level(tmp_path: Path) -> None:
    path = tmp_path / "plain.tif"
    make_gdal_features.write_complex_int(path, compress="DEFLATE")
    tree = open_virtual_datatree(_url(path), registry=REGISTRY, parser=PARSER)
    assert list(tree.children) == ["0"]
    assert "mask" not in tree["0"].data_vars
    assert check_description(tree.attrs, {"0": (37, 53)}) == []


def test_option_combinations_are_refused() -> None:
    with pytest.raises(ValueError, match="excludes tree"):
        TIFFParser(overviews="multiscales", tree=True)
    with pytest.raises(ValueError, match="overviews must be"):
        TIFFParser(overviews="pyramid")  # type: ignore[arg-type]


def test_default_parse_is_unchanged(cog: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = TIFFParser()(_url(cog), REGISTRY)
    root = zarr.open_group(store, mode="r", zarr_format=3)
    assert "multiscales" not in root.attrs
    assert set(root.array_keys()) == {"band_data", "band", "x", "y", "spatial_ref"}
