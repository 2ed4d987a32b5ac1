"""The TIFF parser's caches and fast paths change nothing but the time a parse takes.

* Validated Zarr metadata is reused between arrays (``tiff/arrays.py``): every corpus TIFF
  and fixture parses to the same stores with the caches cold (each file validates its
  own metadata) as with the caches filled by every other file, in either order, so no
  file's values reach another's.
* The hand-written GeoKeyDirectory decoder gives tifffile's GeoKeys on every corpus page,
  and the Python checks of small segment lists give the NumPy checks' manifests, grids
  and errors: whole parses with these fast paths on and off are identical.
* Pixel-centre coordinates are bit-identical to rioxarray's.
* The result caches (georeferences by the bytes of their tags, coordinate arrays by
  georeference and shape, attributes by their tag texts; ``tiff/caches.py``) give the
  same stores as parses with them off, hand every parse its own attribute dictionaries,
  and never reuse a result reached with a warning.
* Groups and copied arrays built without VirtualiZarr's constructors equal constructed
  ones; the unreadable-tag check by entry count agrees with decoding every entry.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup
from zarr.codecs import BytesCodec, ZstdCodec
from zarr.codecs.numcodecs import Zlib
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata

from fixtures import make_tiff_fixtures
from tests._assertions import assert_equals_fresh_validation
from virtualizarr_fill.codecs.tiff_packints import TiffPackintsCodec
from virtualizarr_fill.errors import VirtualizarrFillError
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.manifests import FillManifestArray
from virtualizarr_fill.tiff import (
    TIFFParser,
    arrays,
    caches,
    codecs_map,
    geo,
    segments,
    tags,
)
from virtualizarr_fill.tiff import (
    band_descriptions as band,
)
from virtualizarr_fill.tiff import (
    image_descriptions as images,
)
from virtualizarr_fill.tiff import metadata as tiff_metadata
from virtualizarr_fill.tiff.arrays import CHUNK_KEY_ENCODING, array_metadata, inlined_array
from virtualizarr_fill.zarr_model import metadata_copies, metadata_templates

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
TIFF_SUFFIXES = {".tif", ".tiff"}


# -- helpers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiff_files(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every corpus TIFF, every fixture, and a truncated fixture (segments past the end)."""
    fixtures_dir = tmp_path_factory.mktemp("tiff-caches")
    written = make_tiff_fixtures.write_fixtures(fixtures_dir, sorted(make_tiff_fixtures.FIXTURES))
    source = written["tiles_sparse_deflate"]
    truncated = fixtures_dir / "truncated_tiles.tif"
    truncated.write_bytes(source.read_bytes()[: source.stat().st_size - 100])
    corpus = sorted(p for p in corpus_dir.rglob("*") if p.suffix.lower() in TIFF_SUFFIXES)
    return [*corpus, *sorted(written.values()), truncated, *_look_alikes(fixtures_dir)]


def _look_alikes(directory: Path) -> list[Path]:
    """Files alike in everything but their fill value, byte order or predictor, so that a
    cache keyed too loosely would hand one file's metadata to another."""
    data = np.arange(64, dtype="float32").reshape(8, 8)
    paths = []
    for number, nodata in enumerate([None, "0", "-0", "nan", "-9999", "1e+38", "-9999.0"]):
        extratags = [] if nodata is None else [(42113, "s", 0, nodata, True)]
        path = directory / f"look_alike_nodata_{number}.tif"
        tifffile.imwrite(path, data, compression="zlib", extratags=extratags)
        paths.append(path)
    for byteorder in ("<", ">"):
        for predictor in (None, 3):
            path = directory / f"look_alike_{'le' if byteorder == '<' else 'be'}_{predictor}.tif"
            tifffile.imwrite(
                path, data, compression="zlib", predictor=predictor, byteorder=byteorder
            )
            paths.append(path)
    # Pyramids whose overviews and masks store the same tags as each other's, or all
    # but one (nodata, predictor): see test_repeated_pyramid_levels_read_their_own_segments.
    for name, seed, profile in [
        ("a", 1, {}),
        ("b", 2, {}),
        ("nodata", 1, {"nodata": 7}),
        ("predictor", 1, {"predictor": 2}),
    ]:
        paths.append(_pyramid(directory / f"look_alike_pyramid_{name}.tif", seed, **profile))
    return paths


def _pyramid(path: Path, seed: int, **profile: Any) -> Path:
    """A GDAL pyramid: a tiled Deflate image of two bands, its internal mask, and two
    overviews of each. Other seeds give other values (other segment byte counts and
    offsets) in IFDs that store the same tags."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 200, (2, 64, 48), dtype=np.uint8)
    mask = np.full((64, 48), 255, np.uint8)
    mask[: 8 + seed, :10] = 0
    make_tiff_fixtures.write_gdal(
        path,
        data,
        compress="DEFLATE",
        tiled=True,
        blockxsize=16,
        blockysize=16,
        overviews=[2, 4],
        mask=mask,
        **profile,
    )
    return path


def _json(value: Any) -> Any:
    """Metadata documents as comparable JSON (NaN fill values spelled as zarr spells them)."""
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def _array_record(array: ManifestArray) -> dict[str, Any]:
    metadata = array.metadata
    fill = np.asarray(metadata.fill_value)
    return {
        "document": _json(metadata.to_dict()),
        "codec_classes": [type(c).__qualname__ for c in metadata.codecs],
        "fill_bytes": fill.tobytes().hex(),
        "fill_dtype": fill.dtype.str,
        "manifest": _json(
            {
                key: {**entry, "data": entry["data"].hex()} if "data" in entry else entry
                for key, entry in array.manifest.dict().items()
            }
        ),
    }


def _group_record(group: ManifestGroup) -> dict[str, Any]:
    return {
        "attributes": _json(group.metadata.attributes),
        "arrays": {name: _array_record(a) for name, a in group.arrays.items()},
        "groups": {name: _group_record(g) for name, g in group.groups.items()},
    }


def _parse(path: Path, **options: Any) -> ManifestGroup:
    url = "file://" + str(path)
    store, key = REGISTRY.resolve(url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TIFFParser(**options).parse(url, StoreFile(store, key))


def _parse_record(path: Path, **options: Any) -> Any:
    """What parsing ``path`` gives: the group's content, or the error it raises."""
    try:
        group = _parse(path, **options)
    except VirtualizarrFillError as error:
        return {"error": type(error).__name__, "message": str(error)}
    return _group_record(group)


def _records(files: list[Path], **options: Any) -> Iterator[tuple[Path, Any]]:
    for path in files:
        yield path, _parse_record(path, **options)


# -- metadata cache -----------------------------------------------------------------------


def test_cold_and_warm_caches_give_identical_stores(tiff_files: list[Path]) -> None:
    cold = {}
    for path in tiff_files:
        arrays.clear_caches()  # this file validates every metadata it builds itself
        cold[path] = _parse_record(path, layout="tree")
    arrays.clear_caches()
    forward = dict(_records(tiff_files, layout="tree"))  # later files reuse earlier ones' work
    backward = dict(_records(tiff_files[::-1], layout="tree"))
    parsed = [p for p in tiff_files if "error" not in cold[p]]
    assert len(parsed) > 40, "too few files parsed for the comparison to mean anything"
    for path in tiff_files:
        assert forward[path] == cold[path], path
        assert backward[path] == cold[path], path


def test_every_parsed_metadata_equals_a_fresh_validation(tiff_files: list[Path]) -> None:
    """Each cached copy equals ArrayV3Metadata validated afresh from the same fields."""
    checked = 0
    for path in tiff_files:
        try:
            root = _parse(path, layout="tree")
        except VirtualizarrFillError:
            continue
        groups = [root, *root.groups.values()]
        for group in groups:
            for name, array in group.arrays.items():
                assert_equals_fresh_validation(array.metadata, (path, name))
                checked += 1
    assert checked > 100


def _fresh(**arguments: Any) -> ArrayV3Metadata:
    dtype = arguments.pop("dtype")
    return ArrayV3Metadata(
        data_type=arrays.zarr_data_type(dtype),
        chunk_key_encoding=CHUNK_KEY_ENCODING,  # type: ignore[arg-type]
        storage_transformers=None,
        **arguments,
    )


def _arguments(**changes: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "shape": (1, 40, 30),
        "dtype": np.dtype("float32"),
        "chunk_grid": RegularChunkGridMetadata(chunk_shape=(1, 16, 16)),
        "fill_value": np.float32(0),
        "codecs": [BytesCodec(endian="little"), Zlib()],
        "attributes": {"units": "m"},
        "dimension_names": ("band", "y", "x"),
    }
    arguments.update(changes)
    return arguments


def _fill_bits(metadata: ArrayV3Metadata) -> bytes:
    return np.asarray(metadata.fill_value).tobytes()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (np.float32(0.0), np.float32(-0.0)),  # equal as numbers, different bits
        (
            np.frombuffer(b"\x00\x00\xc0\x7f", dtype="<f4")[0],
            np.frombuffer(b"\x01\x00\xc0\x7f", dtype="<f4")[0],
        ),  # NaNs with different payloads
        (0.0, -0.0),
        (np.float32(1), 1.0),
    ],
)
def test_fill_values_that_compare_equal_stay_apart(first: Any, second: Any) -> None:
    arrays.clear_caches()
    a = array_metadata(**_arguments(fill_value=first))
    b = array_metadata(**_arguments(fill_value=second))
    assert _fill_bits(a) == _fill_bits(_fresh(**_arguments(fill_value=first)))
    assert _fill_bits(b) == _fill_bits(_fresh(**_arguments(fill_value=second)))
    if math.copysign(1, float(first)) != math.copysign(1, float(second)):
        assert _fill_bits(a) != _fill_bits(b)


def test_codec_configuration_and_grid_are_part_of_the_key() -> None:
    arrays.clear_caches()
    variants = [
        _arguments(codecs=[BytesCodec(endian="little"), ZstdCodec(level=1)]),
        _arguments(codecs=[BytesCodec(endian="little"), ZstdCodec(level=2)]),
        _arguments(codecs=[BytesCodec(endian="big"), ZstdCodec(level=2)]),
        _arguments(chunk_grid=RegularChunkGridMetadata(chunk_shape=(1, 8, 16))),
        _arguments(shape=(1, 41, 30)),
        _arguments(dtype=np.dtype("int32"), fill_value=np.int32(0)),
    ]
    built = [array_metadata(**dict(v)) for v in variants]
    for arguments, metadata in zip(variants, built, strict=True):
        fresh = _fresh(**dict(arguments))
        assert _json(metadata.to_dict()) == _json(fresh.to_dict())
        assert metadata.codecs == fresh.codecs
    assert len({json.dumps(_json(m.to_dict()), sort_keys=True) for m in built}) == len(built)


def test_copies_do_not_share_attributes() -> None:
    arrays.clear_caches()
    first = array_metadata(**_arguments())
    first.attributes["added"] = 1
    second = array_metadata(**_arguments(attributes={"units": "m"}))
    assert second.attributes == {"units": "m"}
    assert second.attributes is not first.attributes
    assert second.extra_fields is not first.extra_fields


@pytest.mark.parametrize(
    "values",
    [
        np.arange(1, 4, dtype=np.int64),
        np.linspace(-1, 1, 7).astype(">f8"),  # big-endian input is stored little-endian
        np.array(0, dtype=np.int64),
        np.arange(5, dtype=np.uint8),
    ],
)
def test_inlined_arrays_equal_a_fresh_build(values: np.ndarray) -> None:
    dims = tuple(f"d{i}" for i in range(values.ndim))
    attributes = {"a": 1}
    array = inlined_array(values, dims, attributes=attributes)
    fresh = _fresh(
        shape=values.shape,
        dtype=values.dtype.newbyteorder("="),
        chunk_grid=RegularChunkGridMetadata(chunk_shape=values.shape),
        fill_value=0,
        codecs=[BytesCodec(endian="little")],
        attributes=attributes,
        dimension_names=dims,
    )
    assert _json(array.metadata.to_dict()) == _json(fresh.to_dict())
    assert array.metadata.codecs == fresh.codecs
    (entry,) = array.manifest.dict().values()
    assert entry["data"] == values.astype(values.dtype.newbyteorder("<")).tobytes()
    assert entry["length"] == values.nbytes
    attributes["a"] = 2  # the array keeps its own copy
    assert array.metadata.attributes == {"a": 1}


# -- fast paths against the general paths ----------------------------------------------------


def test_fast_paths_change_no_parse(
    tiff_files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = dict(_records(tiff_files, layout="tree"))
    # The general paths: tifffile's GeoKey decoding, NumPy checks of every segment list.
    monkeypatch.setattr(geo, "_plain_geokeys", lambda page: None)
    monkeypatch.setattr(segments, "_FEW_SEGMENTS", -1)
    monkeypatch.setattr(tags, "_ifd_tag_count", lambda page: None)
    # Metadata copied through dataclasses.replace, as with a zarr whose ArrayV3Metadata
    # holds more state than its fields.
    monkeypatch.setattr(metadata_copies, "COPY_BY_FIELDS", False)
    arrays.clear_caches()
    general = dict(_records(tiff_files, layout="tree"))
    arrays.clear_caches()
    assert any("error" in r and "past the end" in r["message"] for r in fast.values())
    for path in tiff_files:
        assert fast[path] == general[path], path


def _tifffile_geokeys(page: tifffile.TiffPage) -> Any:
    try:
        keys = page.geotiff_tags or {}
    except Exception as error:
        return type(error).__name__
    return {k: geo._json_value(v) for k, v in keys.items() if k not in geo._SKIPPED_GEOTIFF_TAGS}


def _pages(path: Path) -> Iterator[tifffile.TiffPage]:
    try:
        tif = tifffile.TiffFile(path)
    except Exception:
        return
    with tif:
        for page in tif.pages:
            if isinstance(page, tifffile.TiffPage):
                yield page


def test_geokeys_equal_tifffiles_on_every_corpus_page(corpus_dir: Path) -> None:
    decoded = 0
    for path in sorted(p for p in corpus_dir.rglob("*") if p.suffix.lower() in TIFF_SUFFIXES):
        for page in _pages(path):
            if geo.GEO_KEY_DIRECTORY not in page.tags:
                continue
            ours = geo._plain_geokeys(page)
            if ours is None:
                continue
            decoded += 1
            theirs = _tifffile_geokeys(page)
            # repr: 1 and 1.0 (or key order) must not pass as equal
            assert repr(ours) == repr(theirs), (path, page.index)
    assert decoded > 20


def _geotiff(path: Path, directory: list[int], doubles: Any, ascii_params: Any) -> Path:
    extratags: list[tuple[Any, ...]] = [(34735, 3, len(directory), directory, False)]
    if doubles is not None:
        extratags.append((34736, 12, len(doubles), doubles, False))
    if ascii_params is not None:
        extratags.append((34737, 2, 0, ascii_params, False))
    extratags += [(33550, 12, 3, (1.0, 1.0, 0.0), False)]
    extratags += [(33922, 12, 6, (0.0, 0.0, 0.0, 10.0, 20.0, 0.0), False)]
    tifffile.imwrite(path, np.zeros((4, 4), "u1"), extratags=extratags)
    return path


@pytest.mark.parametrize(
    ("directory", "doubles", "ascii_params"),
    [
        ([1, 1, 0, 3, 1024, 0, 1, 2, 2049, 34737, 4, 0, 2057, 34736, 1, 0], [6378137.0], "WGS|"),
        ([1, 1, 0, 2, 1024, 0, 1, 1, 2049, 34737, 1, 2], None, "ab|"),  # one ASCII character
        ([1, 1, 0, 2, 1024, 34736, 1, 0, 3072, 34736, 2, 0], [2.0, 3.5], None),  # coded float
        ([1, 1, 0, 1, 2049, 34737, 9, 0], None, "short|"),  # past the end of the params
        ([1, 1, 0, 1, 2049, 34737, 0, 0], None, "x|"),  # zero count
        ([1, 1, 0, 1, 2057, 34736, 1, 0], None, None),  # params tag missing
        ([1, 1, 0, 1, 2057, 33550, 1, 0], None, None),  # values in another tag
        ([1, 1, 0, 3, 1024, 0, 1, 2], None, None),  # fewer keys than announced
        ([1, 1, 0, 1, 1024, 0, 1, 2, 7, 7], None, None),  # trailing values
        ([2, 1, 0, 1, 1024, 0, 1, 2], None, None),  # unknown directory version
        ([1, 1, 0, 1, 60000, 0, 1, 5], None, None),  # unknown key
        ([1, 1, 0, 1, 1024, 0, 1, 999], None, None),  # unknown code of a coded key
    ],
)
def test_geokeys_equal_tifffiles_on_unusual_directories(
    tmp_path: Path, directory: list[int], doubles: Any, ascii_params: Any
) -> None:
    path = _geotiff(tmp_path / "geo.tif", directory, doubles, ascii_params)
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        theirs = _tifffile_geokeys(page)
        try:
            ours: Any = geo.geokeys_of(page)
        except Exception as error:
            ours = type(error).__name__
    assert repr(ours) == repr(theirs if theirs is not None else {})


@pytest.mark.parametrize("code", [34735, 34736, 34737, 33922])
def test_geokeys_equal_tifffiles_when_a_geo_tag_is_unreadable(tmp_path: Path, code: int) -> None:
    directory = [1, 1, 0, 3, 1024, 0, 1, 2, 2049, 34737, 4, 0, 2057, 34736, 1, 0]
    path = _geotiff(tmp_path / "geo.tif", directory, [6378137.0, 1.0], "WGS|")
    with tifffile.TiffFile(path) as tif:
        entry = tif.pages.first.tags[code].offset
    with path.open("r+b") as file:  # point the tag's values past the end of the file
        file.seek(entry + 8)
        file.write((2**32 - 16).to_bytes(4, "little"))
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        theirs = _tifffile_geokeys(page)
        ours = geo.geokeys_of(page)
    assert repr(ours) == repr(theirs if theirs is not None else {})


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # rioxarray's own use of affine
def test_pixel_centres_are_bit_identical_to_rioxarrays() -> None:
    affine = pytest.importorskip("affine")
    spatial_utils = pytest.importorskip("rioxarray._spatial_utils")
    rng = np.random.default_rng(5)
    transforms = [
        (0.01, 0.0, 0.0, 0.0, -0.01, 10.0),
        (-0.5, -0.0, -0.0, -0.0, 0.5, -0.0),
        (1e-300, 0.0, 1e300, 0.0, -1e-300, -1e300),
    ]
    for _ in range(300):
        a, c, e, f = rng.standard_normal(4) * 10.0 ** rng.integers(-8, 8, 4)
        transforms.append((a, float(rng.choice([0.0, -0.0])), c, 0.0, e, f))
    for transform in transforms:
        height, width = (int(n) for n in rng.integers(1, 300, 2))
        x, y = geo.pixel_centres(transform, height, width)
        expected = spatial_utils.affine_to_coords(affine.Affine(*transform), width, height)
        assert x.tobytes() == np.asarray(expected["x"], dtype=np.float64).tobytes()
        assert y.tobytes() == np.asarray(expected["y"], dtype=np.float64).tobytes()


# -- result caches (georeferences, coordinate arrays, attributes) and direct construction --


def test_result_caches_change_no_parse(
    tiff_files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parses with the result caches on (filled by every other file, twice over) equal
    parses that derive every georeference, coordinate array and attribute afresh."""
    arrays.clear_caches()
    list(_records(tiff_files, layout="tree"))  # every file's results cached
    cached = dict(_records(tiff_files[::-1], layout="tree"))
    first_image = dict(_records(tiff_files))
    assert len(geo._georeferences) > 10 and len(arrays._kept) > 10 and len(band._descriptions) > 10
    assert len(images._known) > 10  # pyramid levels read as frames in the second pass
    monkeypatch.setattr(caches, "ENABLED", False)
    arrays.clear_caches()
    fresh = dict(_records(tiff_files, layout="tree"))
    fresh_first_image = dict(_records(tiff_files))
    assert not (
        geo._georeferences
        or arrays._kept
        or tiff_metadata._known
        or band._descriptions
        or images._known
    )
    for path in tiff_files:
        assert cached[path] == fresh[path], path
        assert first_image[path] == fresh_first_image[path], path


def test_cached_results_are_not_shared_between_parses(tiff_files: list[Path]) -> None:
    """Changing one parse's attributes (nested lists included) changes no other parse."""
    path = next(p for p in tiff_files if p.name == "cog.tif")
    arrays.clear_caches()
    first = _parse(path, layout="tree")
    for group in first.groups.values():
        for array in group.arrays.values():
            for value in array.metadata.attributes.values():
                if isinstance(value, list):
                    value.append("changed")
            array.metadata.attributes["added"] = True
    assert _group_record(_parse(path, layout="tree")) == _parse_record_fresh(path)


def test_repeated_pyramid_levels_read_their_own_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyramid whose overview and mask IFDs store the same tags as another file's has
    them read as tifffile frames (segment offsets and byte counts only) and described
    from that file's parse, yet every level reads back its own values, bit for bit, and
    the store equals a parse with every cache off."""
    first = _pyramid(tmp_path / "first.tif", 1)
    second = _pyramid(tmp_path / "second.tif", 2)
    arrays.clear_caches()
    first_record = _parse_record(first, layout="tree")
    url = "file://" + str(second)
    store, key = REGISTRY.resolve(url)
    reader = StoreFile(store, key)
    with tifffile.TiffFile(reader) as tif:  # type: ignore[arg-type]
        chain = list(images.main_chain(tif, reader.cached_range, b"", lambda: iter(())))
    assert len(chain) == 6
    assert [image.page is None for image in chain] == [False] + [True] * 5
    assert all(image.known is not None for image in chain)  # the first IFD's too
    assert all(isinstance(image.segments, tifffile.TiffFrame) for image in chain[1:])

    root = zarr.open_group(store=TIFFParser(layout="tree")(url, REGISTRY), mode="r", zarr_format=3)
    with tifffile.TiffFile(second) as tif:
        for name, group in root.groups():
            page = tif.pages[int(group.attrs["tiff_ifd"])]
            expected = page.asarray().reshape(page.shaped)
            if page.shaped[0] == 1:  # pixel-interleaved (or one band)
                expected = np.moveaxis(expected[0, 0], -1, 0)
            np.testing.assert_array_equal(group["band_data"][...], expected, err_msg=name)
    record = _parse_record(second, layout="tree")
    # The files' segments differ, so a level given the other file's would show.
    for name in first_record["groups"]:
        assert (
            record["groups"][name]["arrays"]["band_data"]["manifest"]
            != first_record["groups"][name]["arrays"]["band_data"]["manifest"]
        ), name
    monkeypatch.setattr(caches, "ENABLED", False)
    assert record == _parse_record(second, layout="tree")


def _with_tile_offsets_past_the_end(source: Path, path: Path) -> None:
    """``source`` with the TileOffsets array of its first IFD after the first that has
    several tiles pointed past the end of the file (its other tags, and so its
    stored-tags key, unchanged)."""
    data = bytearray(source.read_bytes())
    with tifffile.TiffFile(source) as tif:
        tag = next(p.tags[324] for p in list(tif.pages)[1:] if p.tags[324].count > 1)
    struct.pack_into("<I", data, tag.offset + 8, len(data) + 1000)
    path.write_bytes(bytes(data))


def test_a_known_ifd_whose_segment_table_is_unreadable_is_refused_as_without_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An overview that stores the same tags as one described before, but whose tile
    offsets lie past the end of the file, is refused with the error a parse with the
    caches off gives (naming the unreadable tag), not read as an empty frame."""
    first = _pyramid(tmp_path / "first.tif", 1)
    damaged = tmp_path / "damaged.tif"
    _with_tile_offsets_past_the_end(_pyramid(tmp_path / "second.tif", 2), damaged)
    arrays.clear_caches()
    assert "groups" in _parse_record(first, layout="tree")
    refused = _parse_record(damaged, layout="tree")
    monkeypatch.setattr(caches, "ENABLED", False)
    assert refused == _parse_record(damaged, layout="tree")
    assert refused["error"] == "CorruptFileError" and "TileOffsets" in refused["message"]


def test_later_pages_of_a_stack_are_read_as_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one file, each page that stores the same tags as an earlier one is read as a
    tifffile frame, described from that page's parse, and reads back its own values."""
    path = tmp_path / "stack.tif"
    data = np.arange(5 * 12 * 10, dtype="<u2").reshape(5, 12, 10)
    tifffile.imwrite(path, data, compression="zlib")  # page 0 alone holds the shape
    arrays.clear_caches()
    full_parses = 0
    page_init = tifffile.TiffPage.__init__

    def counting_init(self: tifffile.TiffPage, *args: Any, **kwargs: Any) -> None:
        nonlocal full_parses
        full_parses += 1
        page_init(self, *args, **kwargs)

    monkeypatch.setattr(tifffile.TiffPage, "__init__", counting_init)
    store = TIFFParser(layout="tree")("file://" + str(path), REGISTRY)
    assert full_parses == 2  # pages 0 and 1; pages 2 to 4 take page 1's description
    monkeypatch.setattr(tifffile.TiffPage, "__init__", page_init)
    root = zarr.open_group(store=store, mode="r", zarr_format=3)
    for number in range(5):
        name = "image" if number == 0 else f"page_{number}"
        np.testing.assert_array_equal(root[name]["band_data"][0], data[number], err_msg=name)
    record = _parse_record(path, layout="tree")
    monkeypatch.setattr(caches, "ENABLED", False)
    assert record == _parse_record(path, layout="tree")


def _parse_record_fresh(path: Path) -> Any:
    arrays.clear_caches()
    return _parse_record(path, layout="tree")


def test_fill_warnings_are_issued_for_every_file(tmp_path: Path) -> None:
    """Attributes reached with a warning are never reused: each parse warns itself."""
    path = tmp_path / "out_of_range.tif"
    tifffile.imwrite(path, np.zeros((4, 4), "u1"), extratags=[(42113, "s", 0, "-10000", True)])
    arrays.clear_caches()
    url = "file://" + str(path)
    for _ in range(2):
        store, key = REGISTRY.resolve(url)
        with pytest.warns(UserWarning, match="out_of_range.tif"):
            TIFFParser(on_fill_out_of_range="warn").parse(url, StoreFile(store, key))


def _with_unreadable_sample_format(path: Path) -> None:
    """A uint8 image whose IFD also lists SampleFormat (339) with an invalid field type:
    tifffile drops the entry, keeping exactly the tags of the plain image."""
    # tifffile writes no SampleFormat extratag: write a private tag, then re-label it.
    private = 65000
    image = np.arange(16, dtype="u1").reshape(4, 4)
    tifffile.imwrite(path, image, extratags=[(private, 3, 1, 2, True)])
    data = bytearray(path.read_bytes())
    (ifd,) = struct.unpack_from("<I", data, 4)
    (count,) = struct.unpack_from("<H", data, ifd)
    for entry in range(ifd + 2, ifd + 2 + 12 * count, 12):
        if struct.unpack_from("<H", data, entry)[0] == private:
            struct.pack_into("<HH", data, entry, 339, 0)  # field type 0 does not exist
    path.write_bytes(bytes(data))


def test_differently_placed_scenes_share_their_band_description(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scenes of one product that differ only in where they lie share one band
    description (the geo tags are keyed apart), and each still gets its own
    coordinates: the same stores as parses with every cache off."""
    scenes = []
    for index, (x, y) in enumerate([(500000.0, 4100000.0), (530000.0, 4070000.0)]):
        path = tmp_path / f"scene_{index}.tif"
        tifffile.imwrite(
            path,
            np.arange(64, dtype="<u2").reshape(8, 8),
            extratags=[
                (33550, 12, 3, (30.0, 30.0, 0.0), True),
                (33922, 12, 6, (0.0, 0.0, 0.0, x, y, 0.0), True),
                (34735, 3, 16, (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32611), True),
            ],
        )
        scenes.append(path)
    arrays.clear_caches()
    cached = [_parse_record(path) for path in scenes]
    assert len(band._descriptions) == 1
    assert cached[0]["arrays"]["x"] != cached[1]["arrays"]["x"]
    monkeypatch.setattr(caches, "ENABLED", False)
    assert cached == [_parse_record(path) for path in scenes]


def test_band_descriptions_never_skip_the_unreadable_tag_check(tmp_path: Path) -> None:
    """An IFD whose readable tags equal a cached one's, plus an essential tag tifffile
    could not read, is refused as it would be with the caches off (never handed the
    cached description, which would read signed samples as unsigned)."""
    plain, damaged = tmp_path / "plain.tif", tmp_path / "damaged.tif"
    tifffile.imwrite(plain, np.arange(16, dtype="u1").reshape(4, 4))
    _with_unreadable_sample_format(damaged)
    with tifffile.TiffFile(plain) as a, tifffile.TiffFile(damaged) as b:
        assert sorted(a.pages[0].tags.keys()) == sorted(b.pages[0].tags.keys())
    arrays.clear_caches()
    assert "arrays" in _parse_record(plain)
    assert len(band._descriptions) == 1
    refused = _parse_record(damaged)
    assert refused["error"] == "CorruptFileError" and "SampleFormat" in refused["message"]


def test_unreadable_tag_check_by_count_agrees_with_decoding_the_entries(
    corpus_dir: Path,
) -> None:
    """Where the IFD lists as many entries as tifffile kept tags, no essential tag is
    missing (what decoding every entry code would find)."""
    compared = 0
    for path in sorted(p for p in corpus_dir.rglob("*") if p.suffix.lower() in TIFF_SUFFIXES):
        for page in _pages(path):
            if tags._ifd_tag_count(page) != len(page.tags):
                continue
            codes = tags._ifd_tag_codes(page)
            assert all(code in page.tags for code in codes), (path, page.index)
            compared += 1
    assert compared > 100


def test_shared_codec_instances_keep_exact_arguments_apart() -> None:
    first = codecs_map._shared(ZstdCodec, level=1)
    assert codecs_map._shared(ZstdCodec, level=1) is first
    assert codecs_map._shared(ZstdCodec, level=2) is not first
    assert first.to_dict() == ZstdCodec(level=1).to_dict()
    packed = codecs_map._shared(TiffPackintsCodec, bitspersample=1, runlen=8)
    assert codecs_map._shared(TiffPackintsCodec, bitspersample=True, runlen=8) is not packed
    codec = codecs_map._shared(BytesCodec, endian="big")
    metadata_templates.clear_cache()
    assert metadata_templates._codec_key(codec) == metadata_templates._codec_key(codec)
    assert metadata_templates._codec_key(codec) == metadata_templates._codec_key(
        BytesCodec(endian="big")
    )


def test_georeferences_from_cached_bytes_equal_decoded_ones(corpus_dir: Path) -> None:
    """Every corpus page's georeference through the cache (filled by every other page)
    equals the one decoded from its tags."""
    geo.clear_cache()
    pages = 0
    for rounds in range(2):
        for path in sorted(p for p in corpus_dir.rglob("*") if p.suffix.lower() in TIFF_SUFFIXES):
            store, key = REGISTRY.resolve("file://" + str(path))
            reader = StoreFile(store, key)
            try:
                tif = tifffile.TiffFile(reader)  # type: ignore[arg-type]
            except Exception:
                continue
            with tif, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for page in tif.pages:
                    if not isinstance(page, tifffile.TiffPage):
                        continue
                    try:
                        decoded = geo._decode_georeference(page)[0]
                    except Exception:
                        continue
                    cached = geo.georeference(page, reader.cached_range)
                    assert repr(cached) == repr(decoded), (path, page.index)
                    pages += rounds
    assert pages > 50


def test_inherited_georeference_key_equals_a_fresh_key() -> None:
    parent = geo.Georeference(
        transform=(2.0, 0.0, 10.0, 0.0, -2.0, 20.0),
        geokeys={"GTModelTypeGeoKey": 2, "GeogCitationGeoKey": "WGS 84", "x": [1.0, -0.0]},
        tag_attributes={"ModelPixelScale": [2.0, 2.0, 0.0]},
        crs_wkt="GEOGCRS[...]",
    )
    child = geo.inherited_georeference(parent, (100, 200), (50, 100))
    fresh = geo.Georeference(
        transform=child.transform,
        geokeys=dict(parent.geokeys),
        tag_attributes={},
        crs_wkt=parent.crs_wkt,
    )
    assert child.content_key == fresh.content_key
    assert child.content_key != parent.content_key


def test_direct_groups_equal_validated_groups() -> None:
    band = inlined_array(np.arange(1, 4, dtype=np.int64), ("band",))
    attributes = {"tiff_ifd": [0, 1], "AREA_OR_POINT": "Area"}
    ours = arrays.manifest_group(arrays={"band": band}, attributes=attributes)
    theirs = ManifestGroup(arrays={"band": band}, attributes=attributes)
    assert type(ours) is type(theirs)
    assert vars(ours).keys() == vars(theirs).keys()
    assert ours.metadata == theirs.metadata
    assert ours.metadata.to_dict() == theirs.metadata.to_dict()
    assert dict(ours) == dict(theirs)
    attributes["added"] = 1  # the group keeps its own copy
    assert "added" not in ours.metadata.attributes
    nested = arrays.manifest_group(groups={"image": ours}, attributes={})
    assert nested.metadata == ManifestGroup(groups={"image": ours}, attributes={}).metadata
    assert nested.groups == {"image": ours}
    with pytest.raises(ValueError, match="collide"):
        arrays.manifest_group(arrays={"image": band}, groups={"image": ours}, attributes={})


def test_copied_arrays_equal_validated_arrays() -> None:
    original = inlined_array(
        np.array(0, dtype=np.int64), (), attributes={"GeoTransform": "1 2", "a": [1.0]}
    )
    copy = arrays.copied_array(original)
    validated = FillManifestArray(metadata=copy.metadata, chunkmanifest=original.manifest)
    assert type(copy) is type(validated)
    assert vars(copy).keys() == vars(validated).keys()
    assert copy.manifest is original.manifest
    assert _array_record(copy) == _array_record(validated) == _array_record(original)
    copy.metadata.attributes["a"].append(2.0)
    assert original.metadata.attributes["a"] == [1.0]


@pytest.mark.parametrize("lengths", [[10, 20, 30, 40], [10, 0, 30, 40]])
def test_direct_manifests_equal_validated_manifests(lengths: list[int]) -> None:
    paths = np.array(["/data/a.tif"] * 4, dtype=np.dtypes.StringDType()).reshape(1, 2, 2)
    if 0 in lengths:
        paths[0, 0, 1] = ""  # a sparse segment: what from_arrays requires of zero lengths
    offsets = np.array([100, 200, 0 if 0 in lengths else 300, 400], dtype=np.uint64)
    offsets = offsets.reshape(1, 2, 2)
    sizes = np.array(lengths, dtype=np.uint64).reshape(1, 2, 2)
    ours = arrays.segment_manifest(paths, offsets, sizes)
    theirs = ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=sizes, validate_paths=False
    )
    assert type(ours) is type(theirs)
    assert vars(ours).keys() == vars(theirs).keys()
    assert ours.dict() == theirs.dict()
    assert ours == theirs
    if 0 in lengths:  # a zero length with a path is refused, as by from_arrays
        bad = paths.copy()
        bad[0, 0, 1] = "/data/a.tif"
        with pytest.raises(ValueError):
            arrays.segment_manifest(bad, offsets, sizes)
