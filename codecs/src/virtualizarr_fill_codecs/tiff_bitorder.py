"""TIFF FillOrder=2 (tag 266) as a Zarr v3 bytes->bytes codec.

With FillOrder 2, the bits of every stored byte are in reverse order (least
significant bit first). The reversal applies to the stored segment, before
decompression, so this codec goes last in the codec list (first on decode)::

    [BytesCodec(), TruncateCodec(), Zlib(), TiffBitorderCodec()]

imagecodecs' zarr ``Bitorder`` codec is an array->array codec, which would reverse bits
after decompression instead of before; the bit reversal itself is imagecodecs'.

JSON form: ``{"name": "virtualizarr_fill.tiff_bitorder", "configuration": {}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

TIFF_BITORDER_CODEC_NAME = "virtualizarr_fill.tiff_bitorder"


def reverse_bits(data: bytes | np.ndarray) -> bytes:
    """Every byte of ``data`` with its bit order reversed (an involution)."""
    import imagecodecs
    return bytes(imagecodecs.bitorder_decode(np.frombuffer(bytes(data), dtype=np.uint8)))


@dataclass(frozen=True)
class TiffBitorderCodec(BytesBytesCodec):
    """Bytes->bytes codec reversing the bit order of every byte (decode and encode).

    For TIFF files with FillOrder=2 (tag 266: the least significant bit of each byte
    first). It takes no parameters; JSON form: ``{"name":
    "virtualizarr_fill.tiff_bitorder", "configuration": {}}``.
    """

    is_fixed_size = True

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(
            data, TIFF_BITORDER_CODEC_NAME, require_configuration=False
        )
        if configuration:
            raise ValueError(
                f"{TIFF_BITORDER_CODEC_NAME} takes no configuration, got {configuration!r}"
            )
        return cls()

    def to_dict(self) -> dict[str, JSON]:
        return {"name": TIFF_BITORDER_CODEC_NAME, "configuration": {}}

    def _reverse(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        reversed_bytes = reverse_bits(chunk_bytes.as_numpy_array())
        return chunk_spec.prototype.buffer.from_bytes(reversed_bytes)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._reverse(chunk_bytes, chunk_spec)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._reverse(chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._reverse(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._reverse(chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length


__all__ = ["TIFF_BITORDER_CODEC_NAME", "TiffBitorderCodec", "reverse_bits"]
