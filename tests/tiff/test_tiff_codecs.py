"""The TIFF codecs (predictor, bit order, packed samples) on their own and through zarr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import imagecodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, TransposeCodec
from zarr.codecs.numcodecs import Zlib

from virtualizarr_fill.codecs.tiff_bitorder import TiffBitorderCodec, reverse_bits
from virtualizarr_fill.codecs.tiff_packints import (
    TiffPackintsCodec,
    pack_rows,
    row_bytes,
    unpack_rows,
)
from virtualizarr_fill.codecs.tiff_predictor import (
    TiffPredictorCodec,
    apply_predictor,
    undo_predictor,
)
from virtualizarr_fill.errors import ChunkSizeMismatchError
from virtualizarr_fill.tiff import TIFFParser  # noqa: F401  (registers the codecs in-process)

INTEGERS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float16", "float32", "float64"]


@pytest.mark.parametrize(
    "codec",
    [
        TiffPredictorCodec(predictor=2, axis=-2, endian="big"),
        TiffPredictorCodec(predictor=3, axis=-1, endian="little"),
        TiffBitorderCodec(),
        TiffPackintsCodec(bitspersample=12, runlen=7),
    ],
    ids=repr,
)
def test_json_round_trip(codec: Any) -> None:
    data = json.loads(json.dumps(codec.to_dict()))
    assert type(codec).from_dict(data) == codec
    assert data["name"].startswith("virtualizarr_fill.tiff_")


def test_bad_configurations_are_rejected() -> None:
    with pytest.raises(ValueError, match="must be 2 or 3"):
        TiffPredictorCodec(predictor=4)
    with pytest.raises(ValueError, match="negative"):
        TiffPredictorCodec(predictor=2, axis=1)
    with pytest.raises(ValueError, match="integer or float samples"):
        undo_predictor(np.zeros((2, 3), "c8"), 2, -1, "little")
    with pytest.raises(ValueError, match="floating-point samples"):
        undo_predictor(np.zeros((2, 3), "i4"), 3, -1, "little")


@pytest.mark.parametrize("dtype", INTEGERS + FLOATS)
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize(("shape", "axis"), [((5, 7, 3), -2), ((1, 5, 7), -1)])
def test_predictor_round_trip(dtype: str, endian: str, shape: tuple[int, ...], axis: int) -> None:
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(shape) * 1000).astype(dtype)
    predictor = 3 if dtype in FLOATS else 2
    encoded = apply_predictor(values, predictor, axis, endian)
    assert not np.array_equal(encoded, values)
    decoded = undo_predictor(encoded, predictor, axis, endian)
    np.testing.assert_array_equal(decoded, values)
    # The read path's arrays, in the stored byte order: decoded in place only when asked
    # and the memory is writable, with the same values every way.
    stored = encoded.astype(encoded.dtype.newbyteorder(">" if endian == "big" else "<"))
    kept = stored.copy()
    np.testing.assert_array_equal(undo_predictor(stored, predictor, axis, endian), values)
    np.testing.assert_array_equal(stored, kept, strict=True)
    stored.flags.writeable = False
    got = undo_predictor(stored, predictor, axis, endian, overwrite=True)
    np.testing.assert_array_equal(got, values)
    np.testing.assert_array_equal(stored, kept, strict=True)
    writable = kept.copy()
    got = undo_predictor(writable, predictor, axis, endian, overwrite=True)
    np.testing.assert_array_equal(got, values)
    if predictor == 2:  # (imagecodecs decides where predictor 3 works)
        assert np.shares_memory(got, writable) == writable.dtype.isnative


def test_predictor2_wraps_like_tiff() -> None:
    # differences of uint8 samples wrap modulo 256
    encoded = np.array([[250, 10, 246]], dtype=np.uint8)  # 250, 260, 506 -> 250, 4, 250
    np.testing.assert_array_equal(undo_predictor(encoded, 2, -1, "little"), [[250, 4, 250]])


def test_bit_reversal() -> None:
    assert reverse_bits(b"\x01\x80\xf0") == b"\x80\x01\x0f"
    data = bytes(range(256))
    assert reverse_bits(reverse_bits(data)) == data


@pytest.mark.parametrize("bits", [1, 2, 4, 12])
def test_packints_round_trip_and_padded_rows(bits: int) -> None:
    rng = np.random.default_rng(bits)
    dtype = np.dtype("u1" if bits <= 8 else "u2")
    runlen = 7
    values = rng.integers(0, 2**bits, size=(5, runlen)).astype(dtype)
    packed = pack_rows(values, bits, runlen)
    assert len(packed) == 5 * row_bytes(bits, runlen)
    np.testing.assert_array_equal(unpack_rows(packed, dtype, bits, runlen, 5), values.ravel())
    # a padded segment (more rows stored) decodes to its first rows
    np.testing.assert_array_equal(unpack_rows(packed, dtype, bits, runlen, 3), values[:3].ravel())
    with pytest.raises(ChunkSizeMismatchError, match="fewer than 6 rows"):
        unpack_rows(packed, dtype, bits, runlen, 6)


@pytest.mark.parametrize("runlen", [1, 7, 8, 13, 64])
@pytest.mark.parametrize("dtype", ["bool", "u1"])
def test_one_bit_rows_unpack_as_imagecodecs_does(runlen: int, dtype: str) -> None:
    """Rows of one-bit samples (masks, bilevel images), unpacked by NumPy, are what
    imagecodecs' unpacking gives, for rows of whole and part bytes; a padded segment
    (more rows stored) decodes to its first rows."""
    rows = 6
    packed = np.random.default_rng(runlen).integers(
        0, 256, rows * row_bytes(1, runlen), dtype=np.uint8
    )
    expected = np.asarray(imagecodecs.packints_decode(packed, np.dtype(dtype), 1, runlen=runlen))
    got = unpack_rows(packed.tobytes(), np.dtype(dtype), 1, runlen, rows)
    np.testing.assert_array_equal(got, expected.reshape(-1), strict=True)
    first = unpack_rows(packed, np.dtype(dtype), 1, runlen, rows - 2)
    np.testing.assert_array_equal(first, expected.reshape(-1)[: (rows - 2) * runlen], strict=True)
    codec = TiffPackintsCodec(bitspersample=1, runlen=runlen)
    chunk = codec.decode_array(memoryview(packed.tobytes()), (rows, runlen), np.dtype(dtype))
    np.testing.assert_array_equal(chunk, expected.reshape(rows, runlen), strict=True)


def _write_array(
    path: Path, values: np.ndarray, codecs: list[Any], chunks: tuple[int, ...]
) -> None:
    array = zarr.create_array(
        store=str(path),
        shape=values.shape,
        chunks=chunks,
        dtype=values.dtype,
        serializer=next(c for c in codecs if isinstance(c, BytesCodec | TiffPackintsCodec)),
        filters=[c for c in codecs if isinstance(c, TransposeCodec | TiffPredictorCodec)],
        compressors=[c for c in codecs if c.__class__.__name__ in ("Zlib", "TiffBitorderCodec")],
        zarr_format=3,
        fill_value=0,
    )
    array[...] = values


_FRESH_READER = """
import sys, numpy as np, zarr
array = zarr.open_array(sys.argv[1], mode="r")
np.testing.assert_array_equal(array[...], np.load(sys.argv[2]))
print([c.to_dict()["name"] for c in array.metadata.codecs])
"""


@pytest.mark.parametrize("case", ["predictor2-be", "predictor3-chunky", "packed-4bit"])
def test_fresh_interpreter_decodes_through_entry_points(tmp_path: Path, case: str) -> None:
    rng = np.random.default_rng(7)
    if case == "predictor2-be":
        values = rng.integers(-30000, 30000, size=(3, 20, 9)).astype("int16")
        codecs = [
            TiffPredictorCodec(predictor=2, axis=-1, endian="big"),
            BytesCodec(endian="big"),
            Zlib(),
            TiffBitorderCodec(),
        ]
        chunks: tuple[int, ...] = (1, 8, 9)
    elif case == "predictor3-chunky":
        values = rng.standard_normal((3, 20, 9)).astype("float32")
        codecs = [
            TransposeCodec(order=(1, 2, 0)),
            TiffPredictorCodec(predictor=3, axis=-2, endian="little"),
            BytesCodec(endian="little"),
            Zlib(),
        ]
        chunks = (3, 8, 9)
    else:
        values = rng.integers(0, 16, size=(1, 20, 9)).astype("uint8")
        codecs = [TiffPackintsCodec(bitspersample=4, runlen=9), Zlib()]
        chunks = (1, 8, 9)
    _write_array(tmp_path / "a.zarr", values, codecs, chunks)
    np.save(tmp_path / "expected.npy", values)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZARR_")}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _FRESH_READER,
            str(tmp_path / "a.zarr"),
            str(tmp_path / "expected.npy"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "virtualizarr_fill.tiff_" in result.stdout
