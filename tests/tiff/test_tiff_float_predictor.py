"""Horizontal differencing (Predictor=2) on float16/32/64 samples, as libtiff and GDAL do
it: on the samples' bits as unsigned integers. GDAL-written files in both byte orders,
pixel- and band-interleaved, strips and tiles, read bit for bit equal to rasterio, also
through Icechunk and kerchunk stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

from fixtures import make_gdal_features
from tests._manifest_builders import icechunk_read, icechunk_repo, icechunk_write, kerchunk_read
from virtualizarr_fill.codecs.tiff_predictor import apply_predictor, undo_predictor
from virtualizarr_fill.tiff import TIFFParser

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
FLOATS = ["float16", "float32", "float64"]


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


def _bits(values: np.ndarray) -> np.ndarray:
    """The values' bits, so that NaN payloads and -0.0 compare too."""
    return values.view(f"u{values.dtype.itemsize}")


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(_bits(a), _bits(b)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [-1, -2])
def test_undo_matches_integer_differences(dtype: str, axis: int) -> None:
    """Differences of the bits taken with NumPy's cumulative sum (wrapping unsigned)."""
    rng = np.random.default_rng(3)
    values = (rng.standard_normal((4, 9, 3)) * 100).astype(dtype)
    unsigned = _bits(values)
    differenced = np.concatenate(
        [np.take(unsigned, [0], axis=axis), np.diff(unsigned, axis=axis)], axis=axis
    ).astype(unsigned.dtype)
    stored = differenced.view(dtype)
    assert _same_bits(undo_predictor(stored, 2, axis, "little"), values)
    assert _same_bits(apply_predictor(values, 2, axis, "big"), stored)
    # stored bytes in big-endian order decode to the same values
    swapped = stored.astype(stored.dtype.newbyteorder(">"))
    assert _same_bits(undo_predictor(swapped, 2, axis, "big").astype(dtype), values)


def test_other_sample_types_are_still_refused() -> None:
    with pytest.raises(ValueError, match="integer or float samples"):
        undo_predictor(np.zeros((2, 3), "c8"), 2, -1, "little")


def _read(path: Path) -> np.ndarray:
    store = TIFFParser()(_url(path), REGISTRY)
    return np.asarray(zarr.open_array(store, path="band_data", mode="r", zarr_format=3)[...])


def _rasterio(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return np.asarray(src.read())


@pytest.mark.parametrize("tiled", [False, True], ids=["strips", "tiles"])
@pytest.mark.parametrize("interleave", ["PIXEL", "BAND"])
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_reads_equal_rasterio(
    tmp_path: Path, dtype: str, endian: str, interleave: str, tiled: bool
) -> None:
    path = tmp_path / "pred2.tif"
    written = make_gdal_features.write_float_predictor2(
        path,
        dtype=dtype,  # type: ignore[arg-type]
        endian=endian,  # type: ignore[arg-type]
        interleave=interleave,
        tiled=tiled,
        block=16 if tiled else 5,
    )
    reference = _rasterio(path)
    assert _same_bits(reference, written)  # GDAL reads back what it wrote
    assert _same_bits(_read(path), reference)


@pytest.fixture(scope="module")
def store_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("float-predictor-stores")
    files = {}
    for dtype, endian in (("float32", "big"), ("float64", "little"), ("float16", "big")):
        path = directory / f"{dtype}_{endian}.tif"
        make_gdal_features.write_float_predictor2(
            path,
            dtype=dtype,  # type: ignore[arg-type]
            endian=endian,  # type: ignore[arg-type]
            block=5,
        )
        files[f"{dtype}_{endian}"] = path
    return files


def test_icechunk_and_kerchunk_round_trips(store_files: dict[str, Path], tmp_path: Path) -> None:
    for name, path in store_files.items():
        reference = _rasterio(path)
        vds = open_virtual_dataset(_url(path), registry=REGISTRY, parser=TIFFParser())
        repo = icechunk_repo(tmp_path / f"{name}.icechunk", path.parent)
        icechunk_write(repo, vds)
        assert _same_bits(icechunk_read(repo)["band_data"].values, reference), name
        target = tmp_path / f"{name}.json"
        vds.vz.to_kerchunk(str(target), format="json", zarr_format=3)
        assert _same_bits(kerchunk_read(str(target))["band_data"].values, reference), name
