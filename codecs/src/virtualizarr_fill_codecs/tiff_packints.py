"""TIFF packed samples (BitsPerSample 1..7, 9..15, ...) as a Zarr v3 array->bytes codec.

TIFF packs samples of fewer than 8 bits (bilevel images and GDAL's 1-bit masks, 2-/4-bit
palette images, 12-bit scientific data...) most significant bit first, and starts every
row on a byte boundary. This codec unpacks a (decompressed) segment into unsigned
integers of the array's data type, one row of ``runlen`` samples at a time (``runlen`` is
the stored segment width times the samples per pixel in the segment).

A segment stored with more rows than the chunk (a padded last strip) decodes to its first
rows, so no truncation codec is needed; a segment with fewer rows is an error.

imagecodecs' zarr ``Packints`` codec reshapes the whole buffer and therefore fails on
padded strips; the bit unpacking itself is imagecodecs'.

JSON form: ``{"name": "virtualizarr_fill.tiff_packints", "configuration":
{"bitspersample": 4, "runlen": 1024}}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from zarr.abc.codec import ArrayBytesCodec
from zarr.core.common import JSON, parse_named_configuration

from virtualizarr_fill_codecs.errors import ChunkSizeMismatchError

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

TIFF_PACKINTS_CODEC_NAME = "virtualizarr_fill.tiff_packints"


def row_bytes(bitspersample: int, runlen: int) -> int:
    """Bytes of one packed row (rows start on byte boundaries)."""
    return math.ceil(bitspersample * runlen / 8)


def unpack_rows(
    data: bytes | np.ndarray, dtype: np.dtype, bitspersample: int, runlen: int, rows: int
) -> np.ndarray:
    """The first ``rows`` rows of packed ``data`` (bytes-like, or a contiguous array)
    as a (rows * runlen,) array of ``dtype``.

    One bit per sample (masks, bilevel images) is unpacked by NumPy: imagecodecs takes
    three times as long for a 64x64 mask tile, as long as inflating it."""
    import imagecodecs
    width = row_bytes(bitspersample, runlen)
    needed = rows * width
    if isinstance(data, np.ndarray):
        buffer = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    else:
        buffer = np.frombuffer(data, dtype=np.uint8)
    if buffer.size < needed:
        raise ChunkSizeMismatchError(
            f"packed segment of {buffer.size} bytes holds fewer than {rows} rows of "
            f"{runlen} {bitspersample}-bit samples ({needed} bytes)"
        )
    if bitspersample == 1:
        # most significant bit first, as TIFF packs them; each row starts on a byte
        bits = np.unpackbits(buffer[:needed].reshape(rows, width), axis=1, count=runlen)
        flat = bits.reshape(-1)
        return flat.view(np.bool_) if dtype == np.bool_ else flat.astype(dtype, copy=False)
    unpacked = imagecodecs.packints_decode(buffer[:needed], dtype, bitspersample, runlen=runlen)
    return np.asarray(unpacked).reshape(-1)[: rows * runlen]


def pack_rows(values: np.ndarray, bitspersample: int, runlen: int) -> bytes:
    """Inverse of :func:`unpack_rows` (rows of ``runlen`` samples, MSB first)."""
    flat = np.asarray(values).reshape(-1, runlen)
    packed = bytearray()
    for row in flat:
        bits = np.unpackbits(row.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1)[
            :, 64 - bitspersample :
        ]
        packed += np.packbits(bits.reshape(-1)).tobytes()
    return bytes(packed)


@dataclass(frozen=True)
class TiffPackintsCodec(ArrayBytesCodec):
    """Array->bytes codec for TIFF samples packed below a byte boundary.

    Samples of fewer than 8 bits (1-bit masks, 2- and 4-bit palette images) and of 9 to
    15 bits (12-bit data) are packed most significant bit first, every row starting on a
    byte boundary. Decode unpacks a decompressed segment into unsigned integers of the
    array's data type; a segment stored with more rows than the chunk (a padded last
    strip) decodes to its first rows. JSON form: ``{"name":
    "virtualizarr_fill.tiff_packints", "configuration": {"bitspersample": 4,
    "runlen": 1024}}``.

    Parameters
    ----------
    bitspersample
        Bits per sample, 1 to 32 (the BitsPerSample tag).
    runlen
        Samples per packed row: the stored segment width times the samples per pixel in
        the segment.
    """

    is_fixed_size = False

    bitspersample: int
    runlen: int

    def __init__(self, *, bitspersample: int, runlen: int) -> None:
        if not 1 <= int(bitspersample) <= 32:
            raise ValueError(f"bitspersample must be 1..32, got {bitspersample!r}")
        if int(runlen) < 1:
            raise ValueError(f"runlen must be positive, got {runlen!r}")
        object.__setattr__(self, "bitspersample", int(bitspersample))
        object.__setattr__(self, "runlen", int(runlen))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, TIFF_PACKINTS_CODEC_NAME)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {
            "name": TIFF_PACKINTS_CODEC_NAME,
            "configuration": {"bitspersample": self.bitspersample, "runlen": self.runlen},
        }

    def decode_array(
        self, data: bytes | np.ndarray, shape: tuple[int, ...], dtype: np.dtype
    ) -> np.ndarray:
        """A chunk of ``shape`` and ``dtype`` unpacked from ``data`` (bytes-like):
        :meth:`_decode_sync` without zarr's buffer objects, for reads that decode
        chunks themselves."""
        count = math.prod(shape)
        if count % self.runlen:
            raise ChunkSizeMismatchError(
                f"chunk of shape {shape} is not whole rows of {self.runlen} samples"
            )
        values = unpack_rows(data, dtype, self.bitspersample, self.runlen, count // self.runlen)
        return values.reshape(shape)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        values = self.decode_array(
            chunk_bytes.as_numpy_array(),
            tuple(chunk_spec.shape),
            np.dtype(chunk_spec.dtype.to_native_dtype()),
        )
        return chunk_spec.prototype.nd_buffer.from_numpy_array(values)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        packed = pack_rows(chunk_array.as_numpy_array(), self.bitspersample, self.runlen)
        return chunk_spec.prototype.buffer.from_bytes(packed)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_array, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


__all__ = ["TIFF_PACKINTS_CODEC_NAME", "TiffPackintsCodec", "pack_rows", "row_bytes", "unpack_rows"]
