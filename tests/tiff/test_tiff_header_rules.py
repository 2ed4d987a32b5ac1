"""Headers that tifffile and GDAL read differently: the parser follows GDAL or refuses.

Each file is written with tifffile, then one tag is patched in place: a Predictor on
uncompressed and PackBits data (libtiff ignores it, tifffile undoes it), bit depths an
image codec cannot produce (WebP with BitsPerSample 1), and zero offsets or byte counts
in classic and BigTIFF files (GDAL's sparse-block rule, libtiff's estimate for a lone
strip). Every case is judged against what rasterio (GDAL) and tifffile read from the
same bytes.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import numpy as np
import pytest
import rasterio
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from virtualizarr_fill.errors import CorruptFileError, UnsupportedFeatureError
from virtualizarr_fill.tiff import TIFFParser

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
_WIDTHS = {3: 2, 4: 4, 16: 8}  # SHORT, LONG, LONG8
_CODES = {"offset": (273, 324), "bytecount": (279, 325)}


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _ours(path: Path) -> np.ndarray:
    store = TIFFParser()(_url(path), REGISTRY)
    return np.asarray(zarr.open_array(store, path="band_data", mode="r", zarr_format=3)[...])


def _gdal(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return np.asarray(src.read())


def _tifffile(path: Path) -> np.ndarray:
    """tifffile's image in the parser's (band, y, x) order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        image = tifffile.imread(path)
    return image[np.newaxis] if image.ndim == 2 else np.moveaxis(image, -1, 0)


def _put(path: Path, position: int, value: int, width: int) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        f.write(value.to_bytes(width, "little"))


def _set_element(path: Path, which: str, index: int, value: int) -> None:
    """Element ``index`` of the first IFD's offsets or byte counts, rewritten in place."""
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        tag = page.tags[_CODES[which][1 if page.is_tiled else 0]]
        width = _WIDTHS[int(tag.dtype)]
        position = int(tag.valueoffset) + index * width
    _put(path, position, value, width)


def _write_with_predictor(path: Path, data: np.ndarray, predictor: int, **options: object) -> None:
    """tifffile refuses a Predictor without its compressions: write tag 316 and renumber it
    317 (the IFD stays sorted)."""
    tifffile.imwrite(path, data, extratags=[(316, "H", 1, predictor, False)], **options)
    with tifffile.TiffFile(path) as tif:
        position = int(tif.pages.first.tags[316].offset)
    _put(path, position, 317, 2)
    with tifffile.TiffFile(path) as tif:
        assert int(tif.pages.first.predictor) == predictor


# -- Predictor where libtiff has no predictor ---------------------------------------------


@pytest.mark.parametrize("compression", [None, "packbits"])
@pytest.mark.parametrize(
    ("dtype", "predictor"),
    [("float32", 3), ("float64", 3), ("float32", 2), ("uint16", 2), ("uint16", 3)],
)
@pytest.mark.parametrize("tiled", [False, True], ids=["strips", "tiles"])
def test_predictor_without_a_predicting_codec_is_ignored_as_gdal_does(
    tmp_path: Path, compression: str | None, dtype: str, predictor: int, tiled: bool
) -> None:
    path = tmp_path / "predictor.tif"
    data = (np.arange(40 * 32).reshape(40, 32) * 1.5 - 700).astype(dtype)
    layout: dict[str, object] = {"tile": (16, 16)} if tiled else {"rowsperstrip": 8}
    _write_with_predictor(path, data, predictor, compression=compression, **layout)
    gdal = _gdal(path)
    assert np.array_equal(gdal[0], data)  # libtiff ignores the tag
    assert np.array_equal(_ours(path), gdal)
    # tifffile undoes the predictor on the stored values: a different answer
    with contextlib.suppress(ValueError):  # or fails to
        assert not np.array_equal(_tifffile(path), gdal)


def test_predictor_with_deflate_is_still_undone(tmp_path: Path) -> None:
    path = tmp_path / "deflate.tif"
    data = (np.arange(40 * 32).reshape(40, 32) * 1.5).astype("float32")
    tifffile.imwrite(path, data, compression="zlib", predictor=3, rowsperstrip=8)
    assert np.array_equal(_gdal(path), data[np.newaxis])
    assert np.array_equal(_tifffile(path), data[np.newaxis])
    assert np.array_equal(_ours(path), data[np.newaxis])


# -- bit depths an image codec cannot produce ---------------------------------------------


def _set_bits(path: Path, bits: int) -> None:
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages.first.tags[258]
        position, count = int(tag.valueoffset), int(tag.count)
    for k in range(count):
        _put(path, position + 2 * k, bits, 2)


@pytest.mark.parametrize(
    ("compression", "samples", "bits", "expected"),
    [
        ("webp", 3, 1, "1-bit unsigned integer samples, 3 per pixel, but WebP"),
        ("webp", 3, 16, "16-bit unsigned integer samples, 3 per pixel, but WebP"),
        ("jpeg", 1, 1, "1-bit unsigned integer samples, 1 per pixel, but JPEG"),
        ("jpeg", 1, 16, "16-bit unsigned integer samples, 1 per pixel, but JPEG"),
        ("png", 1, 1, "1-bit unsigned integer samples, 1 per pixel, but PNG"),
    ],
)
def test_bit_depth_the_codec_cannot_produce_is_refused(
    tmp_path: Path, compression: str, samples: int, bits: int, expected: str
) -> None:
    path = tmp_path / f"{compression}.tif"
    shape = (32, 32, samples) if samples > 1 else (32, 32)
    data = (np.arange(np.prod(shape)).reshape(shape) % 200).astype("uint8")
    photometric = "rgb" if samples == 3 else "minisblack"
    tifffile.imwrite(path, data, compression=compression, photometric=photometric)
    _set_bits(path, bits)
    # tifffile reinterprets the decoded bytes at the claimed depth; GDAL fails or differs
    stored = data[np.newaxis] if samples == 1 else np.moveaxis(data, -1, 0)
    native = _tifffile(path)
    assert native.dtype != stored.dtype or not np.array_equal(native, stored)
    if compression != "png":  # GDAL has no PNG codec for TIFF
        try:
            gdal = _gdal(path)
        except rasterio.errors.RasterioIOError:
            pass
        else:
            assert not np.array_equal(gdal, native)
    with pytest.raises(UnsupportedFeatureError) as raised:
        TIFFParser()(_url(path), REGISTRY)
    message = str(raised.value)
    assert message.startswith(_url(path) + ": the header claims ")
    assert expected in message and "\n" not in message


def test_bit_depths_the_codec_produces_still_read(tmp_path: Path) -> None:
    path = tmp_path / "webp.tif"
    data = (np.arange(32 * 32 * 3).reshape(32, 32, 3) % 200).astype("uint8")
    tifffile.imwrite(path, data, compression="webp", compressionargs={"level": 101})
    assert np.array_equal(_ours(path), _gdal(path))
    assert np.array_equal(_ours(path), _tifffile(path))


def test_codec_table_matches_the_decoders() -> None:
    """A table entry per image codec the parser maps, and the messages name the codec."""
    from virtualizarr_fill.tiff import codecs_map
    from virtualizarr_fill.tiff.codec_samples import CODEC_SAMPLES

    assert set(CODEC_SAMPLES) == set(codecs_map.IMAGE_COMPRESSIONS)
    assert CODEC_SAMPLES[codecs_map.WEBP].describe() == (
        "8-bit unsigned integer, 3, 4 samples per pixel"
    )


# -- zero offsets and byte counts ---------------------------------------------------------


def _image(path: Path, bigtiff: bool, compression: str | None, **layout: object) -> np.ndarray:
    data = (np.arange(32 * 32).reshape(32, 32) % 250 + 1).astype("uint8")
    tifffile.imwrite(path, data, bigtiff=bigtiff, compression=compression, **layout)
    return data[np.newaxis]


LAYOUTS = {"strips": {"rowsperstrip": 4}, "tiles": {"tile": (16, 16)}}


@pytest.mark.parametrize("bigtiff", [False, True], ids=["classic", "bigtiff"])
@pytest.mark.parametrize("compression", [None, "zlib"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("index", [0, -1])
def test_zero_byte_count_is_sparse_as_in_gdal(
    tmp_path: Path, bigtiff: bool, compression: str | None, layout: str, index: int
) -> None:
    path = tmp_path / "sparse.tif"
    data = _image(path, bigtiff, compression, **LAYOUTS[layout])  # type: ignore[arg-type]
    count = 8 if layout == "strips" else 4
    _set_element(path, "bytecount", index % count, 0)
    gdal = _gdal(path)
    assert not np.array_equal(gdal, data)  # a block of zeros
    assert np.array_equal(_tifffile(path), gdal)
    assert np.array_equal(_ours(path), gdal)


@pytest.mark.parametrize("bigtiff", [False, True], ids=["classic", "bigtiff"])
@pytest.mark.parametrize("rows_per_strip", [32, 64], ids=["image-rows", "padded-rps"])
def test_lone_uncompressed_strip_of_byte_count_zero_reads_the_image(
    tmp_path: Path, bigtiff: bool, rows_per_strip: int
) -> None:
    """libtiff estimates the byte count of an image's only strip; tifffile reads the
    image's bytes there too."""
    path = tmp_path / "lone.tif"
    data = _image(path, bigtiff, None, rowsperstrip=rows_per_strip)
    _set_element(path, "bytecount", 0, 0)
    assert np.array_equal(_gdal(path), data)
    assert np.array_equal(_tifffile(path), data)
    assert np.array_equal(_ours(path), data)


@pytest.mark.parametrize("bigtiff", [False, True], ids=["classic", "bigtiff"])
def test_lone_strip_with_offset_and_byte_count_zero_is_sparse_as_in_gdal(
    tmp_path: Path, bigtiff: bool
) -> None:
    path = tmp_path / "lone.tif"
    _image(path, bigtiff, None, rowsperstrip=32)
    _set_element(path, "bytecount", 0, 0)
    _set_element(path, "offset", 0, 0)
    gdal = _gdal(path)
    assert not gdal.any()
    assert _tifffile(path).any()  # tifffile reads bytes: the readers disagree
    assert np.array_equal(_ours(path), gdal)


@pytest.mark.parametrize("bigtiff", [False, True], ids=["classic", "bigtiff"])
def test_lone_compressed_strip_of_byte_count_zero_is_refused(tmp_path: Path, bigtiff: bool) -> None:
    path = tmp_path / "lone.tif"
    data = _image(path, bigtiff, "zlib", rowsperstrip=32)
    _set_element(path, "bytecount", 0, 0)
    assert np.array_equal(_gdal(path), data)  # decoded from an estimated length
    assert not _tifffile(path).any()  # read as fill
    with pytest.raises(CorruptFileError, match=r"only strip \(offset \d+\) has byte count 0"):
        TIFFParser()(_url(path), REGISTRY)


@pytest.mark.parametrize("bigtiff", [False, True], ids=["classic", "bigtiff"])
@pytest.mark.parametrize("layout", ["strips", "tiles", "one-strip"])
def test_segment_at_offset_zero_holding_bytes_is_refused(
    tmp_path: Path, bigtiff: bool, layout: str
) -> None:
    path = tmp_path / "offset0.tif"
    options = LAYOUTS.get(layout, {"rowsperstrip": 32})
    data = _image(path, bigtiff, None, **options)  # type: ignore[arg-type]
    _set_element(path, "offset", 0, 0)
    gdal, native = _gdal(path), _tifffile(path)
    assert not np.array_equal(gdal, data) and not np.array_equal(gdal, native)
    with pytest.raises(CorruptFileError) as raised:
        TIFFParser()(_url(path), REGISTRY)
    message = str(raised.value)
    kind = "tile" if layout == "tiles" else "strip"
    assert message.startswith(f"{_url(path)}: {kind} (0, 0, 0) lies at offset 0 with ")
    assert "GDAL reads the file's header there" in message
