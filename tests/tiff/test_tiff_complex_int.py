"""Complex-integer TIFF samples (SampleFormat=5, GDAL's CInt16 and CInt32).

The codec on its own (against words built independently with ``struct``), and GDAL-written
files read through the parser bit for bit equal to rasterio: both byte orders, strips and
tiles, uncompressed, Deflate and horizontal differencing, padded last strips, and through
Icechunk and kerchunk stores.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset
from zarr.codecs import BytesCodec

from fixtures import make_gdal_features
from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write, kerchunk_read
from virtualizarr_fill.codecs.complex_int import (
    ComplexIntCodec,
    complex_to_words,
    words_to_complex,
)
from virtualizarr_fill.errors import VirtualizarrFillError
from virtualizarr_fill.tiff import TIFFParser

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _read(path: Path, **options: Any) -> np.ndarray:
    store = TIFFParser(**options)(_url(path), REGISTRY)
    return np.asarray(zarr.open_array(store, path="band_data", mode="r", zarr_format=3)[...])


def _rasterio(path: Path, dtype: np.dtype) -> np.ndarray:
    # rasterio reads CInt32 as complex64 by default, which rounds parts beyond 2**24;
    # asked for complex128, GDAL converts exactly.
    with rasterio.open(path) as src:
        return np.asarray(src.read(out_dtype=dtype))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


# -- the codec --------------------------------------------------------------------------------


def test_json_round_trip_and_bad_configurations() -> None:
    codec = ComplexIntCodec(component_type="int32", real_part="high")
    data = json.loads(json.dumps(codec.to_dict()))
    assert data == {
        "name": "virtualizarr_fill.complex_int",
        "configuration": {"component_type": "int32", "real_part": "high"},
    }
    assert ComplexIntCodec.from_dict(data) == codec
    with pytest.raises(ValueError, match="component_type"):
        ComplexIntCodec(component_type="int8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="real_part"):
        ComplexIntCodec(component_type="int16", real_part="first")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("component_type", "pair", "word"),
    [
        ("int16", "<hh", "<I"),
        ("int16", ">hh", ">I"),
        ("int32", "<ii", "<Q"),
        ("int32", ">ii", ">Q"),
    ],
)
def test_words_split_as_stored_pairs(component_type: str, pair: str, word: str) -> None:
    """Pairs (real, imag) packed in a byte order, read back as words of that byte order:
    the real part is the low half in little-endian words, the high half in big-endian."""
    info = np.iinfo(np.dtype(component_type))
    parts = [(1, -1), (info.min, info.max), (-7, 0), (0, info.min)]
    raw = b"".join(struct.pack(pair, re, im) for re, im in parts)
    words = np.frombuffer(raw, dtype=word)
    real_part = "low" if pair[0] == "<" else "high"
    got = words_to_complex(words, component_type, real_part)
    assert got.dtype == make_gdal_features.COMPLEX_TYPES[component_type]
    np.testing.assert_array_equal(got, [complex(re, im) for re, im in parts])
    # encoding gives the same words back; values no pair of integers holds are refused
    np.testing.assert_array_equal(complex_to_words(got, component_type, real_part), words)
    with pytest.raises(ValueError, match=r"not .* integers"):
        complex_to_words(np.array([0.5 + 1j]), component_type, real_part)
    with pytest.raises(ValueError, match=r"not .* integers"):
        complex_to_words(np.array([complex(info.max + 1, 0)]), component_type, real_part)


def test_reference_values_of_the_specification() -> None:
    """The table at the end of docs/codecs/complex_int.md."""
    words = np.array([0xFFFF0001, 0x7FFF8000], dtype=np.uint32)
    low = words_to_complex(words, "int16", "low")
    high = words_to_complex(words, "int16", "high")
    np.testing.assert_array_equal(low, [1 - 1j, -32768 + 32767j])
    np.testing.assert_array_equal(high, [-1 + 1j, 32767 - 32768j])


@pytest.mark.parametrize("endian", ["little", "big"])
def test_codec_through_zarr(endian: str) -> None:
    """zarr writes and reads complex64 arrays with the codec before ``bytes``; the stored
    chunk holds the (real, imag) int16 pairs in the file's byte order."""
    real_part = "low" if endian == "little" else "high"
    values = np.array([[1 - 2j, -32768 + 32767j, 5j]], dtype=np.complex64)
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(
        store,
        shape=values.shape,
        chunks=values.shape,
        dtype="complex64",
        filters=[ComplexIntCodec(component_type="int16", real_part=real_part)],
        serializer=BytesCodec(endian=endian),  # type: ignore[arg-type]
        compressors=None,
        fill_value=0,
    )
    array[...] = values
    stored = store._store_dict["c/0/0"].to_bytes()
    order = "<" if endian == "little" else ">"
    expected = b"".join(struct.pack(f"{order}hh", int(v.real), int(v.imag)) for v in values.ravel())
    assert stored == expected
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], values)


def test_codec_is_found_through_its_entry_point() -> None:
    """A process that never imports virtualizarr_fill finds the codec by name, in the
    virtualizarr-fill-codecs distribution."""
    code = (
        "import zarr.registry as r\n"
        "print(r.get_codec_class('virtualizarr_fill.complex_int').__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "virtualizarr_fill_codecs.complex_int"


# -- GDAL-written files -----------------------------------------------------------------------

LAYOUTS: dict[str, dict[str, Any]] = {
    "strips": {},
    "strips-deflate": {"compress": "DEFLATE", "block": 5},
    "strips-band-interleaved": {"interleave": "BAND", "block": 8},
    "tiles-deflate": {"tiled": True, "compress": "DEFLATE"},
    "tiles-uncompressed-one-band": {"tiled": True, "bands": 1},
    "predictor2-deflate": {"compress": "DEFLATE", "predictor": 2, "block": 5},
    "predictor2-tiles-band-interleaved": {
        "compress": "LZW",
        "predictor": 2,
        "tiled": True,
        "interleave": "BAND",
    },
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("component_type", ["int16", "int32"])
def test_reads_equal_rasterio(
    tmp_path: Path, component_type: str, endian: str, layout: str
) -> None:
    path = tmp_path / f"c{component_type}_{endian}_{layout}.tif"
    written = make_gdal_features.write_complex_int(
        path,
        component_type=component_type,  # type: ignore[arg-type]
        endian=endian,  # type: ignore[arg-type]
        **LAYOUTS[layout],
    )
    reference = _rasterio(path, written.dtype)
    assert _same(reference, written)  # GDAL reads back what it wrote
    assert _same(_read(path), reference)


@pytest.mark.parametrize("compress", [None, "DEFLATE"])
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("component_type", ["int16", "int32"])
def test_padded_last_strip(tmp_path: Path, component_type: str, endian: str, compress: Any) -> None:
    """A last strip stored with RowsPerStrip rows though the image ends before: the
    uncompressed one gets a regular grid, the compressed one a truncating codec."""
    path = tmp_path / "padded.tif"
    written = make_gdal_features.write_complex_int(
        path,
        component_type=component_type,  # type: ignore[arg-type]
        endian=endian,  # type: ignore[arg-type]
        compress=compress,
        bands=1,
        height=37,
        width=21,
        block=8,
        pad_last_strip=True,
    )
    got = _read(path)
    assert _same(got, written)
    if compress is None:
        # GDAL stops decompressing at the rows the image needs, which libdeflate refuses
        # for a padded strip; uncompressed, it reads the same.
        assert _same(got, _rasterio(path, written.dtype))


@pytest.mark.corpus
def test_corpus_cint16(corpus_dir: Path) -> None:
    path = corpus_dir / "corteva+rioxarray" / "cint16.tif"
    got = _read(path)
    assert got.dtype == np.complex64
    assert _same(got, _rasterio(path, np.dtype(np.complex64)))


def test_nodata_becomes_a_complex_fill_value(tmp_path: Path) -> None:
    path = tmp_path / "nodata.tif"
    make_gdal_features.write_complex_int(path, bands=1, compress="DEFLATE")
    with rasterio.open(path, "r+") as dst:
        dst.nodata = -9999
    vds = open_virtual_dataset(_url(path), registry=REGISTRY, parser=TIFFParser())
    variable = vds["band_data"]
    assert variable.data.metadata.fill_value == np.complex64(-9999)
    assert vds["band_data"].dtype == np.complex64


def test_other_complex_integer_widths_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "cint8.tif"
    tifffile_write_cint8(path)
    # tifffile itself cannot describe such a page; either way the parse names the file.
    with pytest.raises(VirtualizarrFillError, match=r"cint8\.tif"):
        _read(path)


def tifffile_write_cint8(path: Path) -> None:
    """A 16-bit complex-integer sample (two int8 parts), which no writer produces:
    written as int16 and relabelled SampleFormat=5."""
    import tifffile

    tifffile.imwrite(path, np.zeros((4, 4), np.int16))
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages.first.tags["SampleFormat"].overwrite(5)


# -- stores -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray]]:
    directory = tmp_path_factory.mktemp("complex-int-stores")
    files = {}
    for name, options in {
        "cint16_big_deflate_padded": dict(
            component_type="int16", endian="big", compress="DEFLATE", bands=1, block=8
        ),
        "cint32_little_tiles": dict(component_type="int32", endian="little", tiled=True),
        "cint16_little_predictor2": dict(
            component_type="int16", endian="little", compress="DEFLATE", predictor=2, block=5
        ),
    }.items():
        path = directory / f"{name}.tif"
        written = make_gdal_features.write_complex_int(path, **options)  # type: ignore[arg-type]
        files[name] = (path, _rasterio(path, written.dtype))
    return files


def _virtual(path: Path) -> xr.Dataset:
    return open_virtual_dataset(_url(path), registry=REGISTRY, parser=TIFFParser())


def test_icechunk_round_trip(
    store_files: dict[str, tuple[Path, np.ndarray]], tmp_path: Path
) -> None:
    for name, (path, reference) in store_files.items():
        repo = icechunk_repo(tmp_path / f"{name}.icechunk", path.parent)
        icechunk_write(repo, _virtual(path))
        got = icechunk_read(repo)["band_data"].values
        assert _same(got, reference), name


def test_kerchunk_round_trip(
    store_files: dict[str, tuple[Path, np.ndarray]], tmp_path: Path
) -> None:
    for name, (path, reference) in store_files.items():
        target = tmp_path / f"{name}.json"
        _virtual(path).vz.to_kerchunk(str(target), format="json", zarr_format=3)
        document = json.loads(target.read_text())
        codecs = json.loads(document["refs"]["band_data/zarr.json"])["codecs"]
        assert "virtualizarr_fill.complex_int" in [c["name"] for c in codecs]
        got = kerchunk_read(str(target))["band_data"].values
        assert _same(got, reference), name
