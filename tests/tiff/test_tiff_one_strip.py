"""Images of one strip whose RowsPerStrip exceeds ImageLength.

Such a strip holds the image's rows, or is stored padded to RowsPerStrip rows (both valid
TIFF; libtiff reads only the image's rows). Every case must read back through the
virtual store exactly the image's rows as written, and what the native readers decode
where they can: tifffile sizes its decompression buffer to the image's rows and so
fails on padded Deflate, Zstd and PackBits strips; GDAL reads the Zstd and PackBits
ones, but padded Deflate strips wrongly (zeros, or other bytes) without an error, has no
PNG codec and fails on WebP strips. Lossy codecs (JPEG, WebP) are compared with
tifffile's decode.

The files are written by tifffile with RowsPerStrip rows, then edited: a smaller
ImageLength makes the one strip padded; a larger RowsPerStrip leaves it holding exactly
the image's rows.
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from virtualizarr_fill.tiff import TIFFParser
from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, edge_handling_of

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
ROWS_PER_STRIP = 16
HEIGHT = 5
WIDTH = 24

#: compression, tifffile keyword arguments, band counts.
CASES: dict[str, tuple[str | None, dict[str, Any], int]] = {
    "none": (None, {}, 3),
    "lzw": ("lzw", {}, 3),
    "deflate": ("zlib", {}, 3),
    "deflate-predictor": ("zlib", {"predictor": True}, 3),
    "zstd": ("zstd", {}, 3),
    "lzma": ("lzma", {}, 3),
    "packbits": ("packbits", {}, 3),
    "jpeg": ("jpeg", {}, 3),
    "webp": ("webp", {}, 3),
    "png": ("png", {}, 3),
}
#: Image codecs decode whole strips; tifffile writes them pixel-interleaved only.
IMAGE_CODECS = {"jpeg", "webp", "png"}
#: Padded strips a native reader decodes without an error but wrongly.
NATIVE_MISREADS = {("GDAL", "deflate"), ("GDAL", "deflate-predictor")}


def _write(path: Path, case: str, planar: str, rows: int) -> np.ndarray:
    """Write the file; the image as written, arranged (band, y, x)."""
    compression, extra, bands = CASES[case]
    rng = np.random.default_rng(len(case))
    if case in IMAGE_CODECS:  # smooth content: lossy codecs still decode deterministically
        base = np.linspace(0, 250, rows * WIDTH * bands).reshape(rows, WIDTH, bands)
        data = base.astype(np.uint8)
    elif planar == "separate":
        data = rng.integers(0, 60000, size=(bands, rows, WIDTH)).astype(np.uint16)
    else:
        data = rng.integers(0, 60000, size=(rows, WIDTH, bands)).astype(np.uint16)
    tifffile.imwrite(
        path,
        data,
        compression=compression,
        rowsperstrip=rows,
        planarconfig=planar,
        photometric="rgb",
        **extra,
    )
    return data if planar == "separate" else np.moveaxis(data, -1, 0)


def _set_tag(path: Path, code: int, value: int) -> None:
    """Overwrite a one-value SHORT or LONG tag in place."""
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages[0].tags[code]
        fmt = tif.byteorder + {3: "H", 4: "I"}[int(tag.dtype)]
        position = tag.valueoffset
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, position, value)
    path.write_bytes(bytes(data))


def _tifffile_bands(path: Path) -> np.ndarray | None:
    """tifffile's decode, arranged (band, y, x); None where tifffile cannot decode it."""
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        try:
            data = page.asarray().reshape(page.shaped)
        except Exception:  # its codecs raise their own error types
            return None
        return data[:, 0, :, :, 0] if page.shaped[0] > 1 else np.moveaxis(data[0, 0], -1, 0)


def _gdal_bands(path: Path) -> np.ndarray | None:
    """GDAL's decode (band, y, x); None where GDAL cannot decode it."""
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            dataset = rasterio.open(path)
        with dataset:
            return np.asarray(dataset.read())
    except rasterio.errors.RasterioError:
        return None


def _read_back(path: Path, **options: Any) -> tuple[np.ndarray, EdgeHandling]:
    store = TIFFParser(**options)("file://" + str(path), REGISTRY)
    array = zarr.open_group(store, mode="r", zarr_format=3)["band_data"]
    return np.asarray(array[...]), edge_handling_of(array.metadata.codecs)


def _one_strip(tmp_path: Path, case: str, planar: str, padded: bool) -> tuple[Path, np.ndarray]:
    """The file, and the image's rows as written (band, y, x)."""
    path = tmp_path / f"{case}_{planar}_{'padded' if padded else 'short'}.tif"
    if padded:  # the strip holds ROWS_PER_STRIP rows; the image states HEIGHT
        written = _write(path, case, planar, ROWS_PER_STRIP)
        _set_tag(path, 257, HEIGHT)
    else:  # the strip holds HEIGHT rows; RowsPerStrip states more
        written = _write(path, case, planar, HEIGHT)
        _set_tag(path, 278, ROWS_PER_STRIP)
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        assert (page.imagelength, len(page.dataoffsets)) == (
            HEIGHT,
            1 if planar == "contig" else 3,
        )
        assert page.tags[278].value == ROWS_PER_STRIP
    return path, written[:, :HEIGHT]


LAYOUTS = [
    (case, planar)
    for case in sorted(CASES)
    for planar in ("contig", "separate")
    if planar == "contig" or case not in IMAGE_CODECS
]


@pytest.mark.parametrize(("case", "planar"), LAYOUTS)
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "short"])
def test_one_strip_reads_exactly(tmp_path: Path, case: str, planar: str, padded: bool) -> None:
    path, written = _one_strip(tmp_path, case, planar, padded)
    natives = {"tifffile": _tifffile_bands(path), "GDAL": _gdal_bands(path)}
    assert any(values is not None for values in natives.values())
    lossy = case in {"jpeg", "webp"}
    expected = natives["tifffile"] if lossy else written
    assert expected is not None and expected.shape == (3, HEIGHT, WIDTH)
    for options in ({}, {"probe_last_strip": True}):
        got, _ = _read_back(path, **options)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        for reader, values in natives.items():
            if values is None or (lossy and reader == "GDAL"):
                continue
            if padded and (reader, case) in NATIVE_MISREADS:
                assert not np.array_equal(values, expected), f"{reader} now reads {case}"
                continue
            np.testing.assert_array_equal(got, values, err_msg=reader)


@pytest.mark.parametrize("planar", ["contig", "separate"])
def test_one_uncompressed_strip_is_trimmed_only_when_padded(tmp_path: Path, planar: str) -> None:
    """The byte count of an uncompressed strip tells whether it is padded: only then does
    the array carry the truncate codec."""
    padded, _ = _one_strip(tmp_path, "none", planar, padded=True)
    short, _ = _one_strip(tmp_path, "none", planar, padded=False)
    assert _read_back(padded)[1] is EdgeHandling.TRUNCATE
    assert _read_back(short)[1] is EdgeHandling.NONE


def test_one_strip_longer_than_rows_per_strip_is_refused(tmp_path: Path) -> None:
    """An uncompressed strip longer than RowsPerStrip rows contradicts the header."""
    from virtualizarr_fill.errors import CorruptFileError

    path, _ = _one_strip(tmp_path, "none", "contig", padded=True)
    _set_tag(path, 278, ROWS_PER_STRIP - 2)
    with pytest.raises(CorruptFileError, match=str(path)):
        TIFFParser()("file://" + str(path), REGISTRY)


@pytest.mark.parametrize("compression", [None, "packbits", "lzw", "zlib"])
def test_one_padded_strip_of_one_bit_samples(tmp_path: Path, compression: str | None) -> None:
    """Packed samples: the unpacking codec reads the image's rows from a longer strip."""
    path = tmp_path / f"bits_{compression}.tif"
    written = np.random.default_rng(1).integers(0, 2, size=(ROWS_PER_STRIP, 21)).astype(bool)
    tifffile.imwrite(path, written, rowsperstrip=ROWS_PER_STRIP, compression=compression)
    _set_tag(path, 257, HEIGHT)
    expected = _tifffile_bands(path)
    assert expected is not None
    np.testing.assert_array_equal(expected[0], written[:HEIGHT])
    got, _ = _read_back(path)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    ("case", "options"),
    [("lzw", {"probe_last_strip": True}), ("webp", {})],
    ids=["probed-deflate", "image-codec"],
)
def test_strip_that_does_not_decode_is_refused(
    tmp_path: Path, case: str, options: dict[str, Any]
) -> None:
    """Deciding the grid decodes the last strip; a codec's failure is a refusal naming
    the file, not the codec's own exception."""
    from virtualizarr_fill.errors import CorruptFileError

    path, _ = _one_strip(tmp_path, case, "contig", padded=True)
    if case == "lzw":  # LZW bytes announced as Deflate
        _set_tag(path, 259, 8)
    else:  # the WebP stream's bytes after its header garbled
        with tifffile.TiffFile(path) as tif:
            offset = int(tif.pages[0].dataoffsets[0])
        data = bytearray(path.read_bytes())
        data[offset + 30 : offset + 60] = bytes(30)
        path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=rf"{path}.*does not decode"):
        TIFFParser(**options)("file://" + str(path), REGISTRY)


@pytest.mark.parametrize("rows", [16, 40], ids=["several-strips", "one-strip"])
def test_probed_strip_longer_than_its_rows_is_refused(tmp_path: Path, rows: int) -> None:
    """Probing decompresses the last strip: more bytes than its rows can hold means the
    header's geometry (here ImageWidth) disagrees with the data, and every strip would
    fail to read, so the parse refuses the file."""
    from virtualizarr_fill.errors import CorruptFileError

    path = tmp_path / "narrowed.tif"
    data = np.random.default_rng(3).integers(0, 250, size=(40, WIDTH)).astype(np.uint8)
    tifffile.imwrite(path, data, compression="lzw", rowsperstrip=rows, photometric="minisblack")
    _set_tag(path, 278, 64 if rows == 40 else rows)
    _set_tag(path, 256, WIDTH // 3)
    with pytest.raises(CorruptFileError, match=rf"{path}.*decompresses to \d+ bytes"):
        TIFFParser(probe_last_strip=True)("file://" + str(path), REGISTRY)
