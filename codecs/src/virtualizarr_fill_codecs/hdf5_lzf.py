"""HDF5 LZF filter (id 32000) as a Zarr v3 bytes->bytes codec.

The HDF5 LZF filter (shipped with h5py) stores a bare liblzf stream: no header, no
decoded length. liblzf needs the output size up front, and the filter records it
itself (the chunk's byte count, its third ``cd_values`` entry), so the codec carries
it as ``nbytes``. imagecodecs' LZF codec assumes its own length header and cannot be
told the size, hence this thin wrapper around ``imagecodecs.lzf_decode``.

JSON form: ``{"name": "virtualizarr_fill.hdf5_lzf", "configuration": {"nbytes": N}}``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

HDF5_LZF_CODEC_NAME = "virtualizarr_fill.hdf5_lzf"


@dataclass(frozen=True)
class HDF5LZFCodec(BytesBytesCodec):
    """Decode chunks written by HDF5's LZF filter.

    Parameters
    ----------
    nbytes
        Decoded byte count of every chunk (the stored, padded chunk size).
    """

    is_fixed_size = False
    nbytes: int

    def __init__(self, *, nbytes: int) -> None:
        if int(nbytes) < 1:
            raise ValueError(f"nbytes must be positive, got {nbytes}")
        object.__setattr__(self, "nbytes", int(nbytes))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, HDF5_LZF_CODEC_NAME)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": HDF5_LZF_CODEC_NAME, "configuration": {"nbytes": self.nbytes}}

    def decode_bytes(self, data: Any) -> bytes:
        """Decode one stored chunk (any bytes-like object)."""
        import imagecodecs
        decoded = imagecodecs.lzf_decode(
            np.frombuffer(data, dtype=np.uint8), header=False, out=self.nbytes
        )
        return bytes(decoded)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return chunk_spec.prototype.buffer.from_bytes(
            self.decode_bytes(chunk_bytes.as_numpy_array())
        )

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        import imagecodecs
        encoded = imagecodecs.lzf_encode(chunk_bytes.as_numpy_array(), header=False)
        return chunk_spec.prototype.buffer.from_bytes(bytes(encoded))

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


__all__ = ["HDF5_LZF_CODEC_NAME", "HDF5LZFCodec"]
