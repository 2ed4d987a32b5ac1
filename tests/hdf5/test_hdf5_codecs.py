"""The HDF5 filter codecs against chunks the real HDF5 filters wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import hdf5plugin
import numpy as np
import pytest
from zarr.registry import get_codec_class

from virtualizarr_fill.codecs.hdf5_bitshuffle import HDF5BitshuffleCodec
from virtualizarr_fill.codecs.hdf5_lzf import HDF5LZFCodec
from virtualizarr_fill.codecs.hdf5_shuffle import HDF5ShuffleCodec, shuffle, unshuffle


def _stored_chunks(path: Path, name: str) -> list[tuple[Any, bytes]]:
    """(chunk info, stored bytes) of every allocated chunk, as HDF5 wrote them."""
    with h5py.File(path, "r") as f:
        infos: list[Any] = []
        f[name].id.chunk_iter(infos.append)
    raw = path.read_bytes()
    return [(info, raw[info.byte_offset : info.byte_offset + info.size]) for info in infos]


def _expected_chunk(data: np.ndarray, offset: tuple[int, ...], chunks: tuple[int, ...]) -> bytes:
    """The chunk as HDF5 pads it (zeros beyond the array edge)."""
    out = np.zeros(chunks, dtype=data.dtype)
    region = tuple(
        slice(o, min(o + c, s)) for o, c, s in zip(offset, chunks, data.shape, strict=True)
    )
    part = data[region]
    out[tuple(slice(0, n) for n in part.shape)] = part
    return out.tobytes()


BITSHUFFLE_CASES = [
    ("<i2", "none", 0, (1037,)),
    ("<f4", "lz4", 0, (37, 23)),
    ("<f8", "zstd", 0, (5003,)),
    ("|u1", "lz4", 16, (999,)),
    (">i4", "lz4", 64, (130, 7)),
]


@pytest.mark.parametrize(("dtype", "cname", "nelems", "shape"), BITSHUFFLE_CASES)
def test_bitshuffle_decodes_hdf5_chunks(
    tmp_path: Path, dtype: str, cname: str, nelems: int, shape: tuple[int, ...]
) -> None:
    data = (np.arange(int(np.prod(shape))) % 251).astype(dtype).reshape(shape)
    chunks = tuple(max(1, s // 2 + 1) for s in shape)  # partial edge chunks
    path = tmp_path / "bitshuffle.h5"
    options: dict[str, Any] = {"nelems": nelems, "cname": cname}
    if cname == "zstd":
        options["clevel"] = 3
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks, **hdf5plugin.Bitshuffle(**options))
        cd = f["x"].id.get_create_plist().get_filter(0)[2]
    codec = HDF5BitshuffleCodec(
        elementsize=cd[2],
        blocksize=cd[3],
        compression={0: "none", 2: "lz4", 3: "zstd"}[cd[4]],
    )
    for info, stored in _stored_chunks(path, "x"):
        expected = _expected_chunk(data, info.chunk_offset, chunks)
        assert codec.decode_bytes(stored) == expected
        assert codec.decode_bytes(codec.encode_bytes(expected)) == expected


def test_bitshuffle_rejects_a_truncated_chunk() -> None:
    codec = HDF5BitshuffleCodec(elementsize=4, compression="lz4")
    encoded = codec.encode_bytes(np.arange(1000, dtype="<i4").tobytes())
    with pytest.raises(ValueError):
        codec.decode_bytes(encoded[:-40])


def test_lzf_decodes_hdf5_chunks(tmp_path: Path) -> None:
    data = (np.arange(37 * 23) % 13).astype("<f8").reshape(37, 23)
    path = tmp_path / "lzf.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(10, 8), compression="lzf")
    codec = HDF5LZFCodec(nbytes=10 * 8 * 8)
    for info, stored in _stored_chunks(path, "x"):
        assert info.filter_mask == 0
        decoded = imagecodecs_lzf_decode(codec, stored)
        assert decoded == _expected_chunk(data, info.chunk_offset, (10, 8))


def imagecodecs_lzf_decode(codec: HDF5LZFCodec, stored: bytes) -> bytes:
    import imagecodecs

    return bytes(imagecodecs.lzf_decode(stored, header=False, out=codec.nbytes))


@pytest.mark.parametrize("size", [0, 1, 7, 8, 33, 1001])
def test_shuffle_matches_hdf5_with_a_partial_trailing_element(size: int) -> None:
    data = bytes(range(256)) * 4
    data = data[:size]
    shuffled = shuffle(data, 4)
    assert unshuffle(shuffled, 4) == data
    whole = size - size % 4
    assert shuffled[whole:] == data[whole:]  # the remainder is copied unchanged
    if whole:
        expected = np.frombuffer(data[:whole], "u1").reshape(-1, 4).T.tobytes()
        assert shuffled[:whole] == expected


def test_shuffle_matches_hdf5_after_deflate(tmp_path: Path) -> None:
    """A file that deflates before shuffling: HDF5 shuffles compressed bytes."""
    import zlib

    path = tmp_path / "deflate_shuffle.h5"
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((1000,))  # values chosen so the deflated chunk is not a multiple of 8
    dcpl.set_deflate(4)
    dcpl.set_shuffle()
    values = np.arange(1000, dtype="<i8") % 89
    with h5py.File(path, "w") as f:
        space = h5py.h5s.create_simple((1000,))
        h5py.h5d.create(f.id, b"x", h5py.h5t.STD_I64LE, space, dcpl=dcpl)
        f["x"][...] = values
    [(_, stored)] = _stored_chunks(path, "x")
    assert len(stored) % 8  # the case numcodecs' shuffle refuses
    assert zlib.decompress(unshuffle(stored, 8)) == values.tobytes()


@pytest.mark.parametrize(
    "codec",
    [
        HDF5LZFCodec(nbytes=4096),
        HDF5ShuffleCodec(elementsize=8),
        HDF5BitshuffleCodec(elementsize=2, blocksize=16, compression="zstd", level=3),
        HDF5BitshuffleCodec(elementsize=4),
    ],
)
def test_codec_json_round_trip(codec: Any) -> None:
    as_dict = codec.to_dict()
    assert as_dict["name"].startswith("virtualizarr_fill.hdf5_")
    assert type(codec).from_dict(as_dict) == codec
    assert get_codec_class(as_dict["name"]) is type(codec)


def test_codec_configuration_is_validated() -> None:
    with pytest.raises(ValueError):
        HDF5BitshuffleCodec(elementsize=4, blocksize=12)
    with pytest.raises(ValueError):
        HDF5BitshuffleCodec(elementsize=4, compression="gzip")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        HDF5LZFCodec(nbytes=0)
    with pytest.raises(ValueError):
        HDF5ShuffleCodec(elementsize=0)


@pytest.mark.parametrize("shuffled", [False, True], ids=["zlib", "shuffle+zlib"])
@pytest.mark.parametrize("stored_rows", [8, 6, 10], ids=["exact", "shorter", "longer"])
def test_decoded_size_of_a_deflate_chunk_is_exact(shuffled: bool, stored_rows: int) -> None:
    """The parse-time chunk check measures a deflate chunk with libdeflate when it fits;
    a stream decoding to fewer or more bytes than the chunk must still report its true
    size (the longer one through the general path), and garbage must still raise."""
    import zlib

    from virtualizarr_fill.hdf5.arrays import array_metadata
    from virtualizarr_fill.hdf5.chunk_verification import decoded_size

    chunks = (8, 4)
    codecs: list[dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if shuffled:
        codecs.append({"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}})
    codecs.append({"name": "numcodecs.zlib", "configuration": {"level": 6}})
    metadata = array_metadata(
        shape=(16, 4),
        dtype=np.dtype("<i4"),
        chunks=chunks,
        fill_value=0,
        codecs=codecs,
        attributes={},
        dimension_names=("y", "x"),
    )
    expected = 8 * 4 * 4
    stored = np.arange(stored_rows * 4, dtype="<i4").tobytes()
    data = zlib.compress(stored)
    assert decoded_size(metadata, chunks, data, expected) == len(stored)
    with pytest.raises(Exception):  # noqa: B017  (whatever zlib raises)
        decoded_size(metadata, chunks, b"not a deflate stream", expected)
