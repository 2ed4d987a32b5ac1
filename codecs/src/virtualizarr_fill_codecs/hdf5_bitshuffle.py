"""HDF5 bitshuffle filter (id 32008) as a Zarr v3 bytes->bytes codec.

The filter bit-transposes the chunk block by block and may compress each block with
LZ4 or Zstandard. Its compressed framing is specific to HDF5: a 12-byte header (decoded
byte count as big-endian uint64, block size in bytes as big-endian uint32), then one
record per block (big-endian uint32 compressed length, then the compressed block), and
the trailing ``n % 8`` elements copied verbatim. imagecodecs provides the block
primitives (``bitshuffle_decode``, ``lz4_decode``, ``zstd_decode``) but not this
framing, and numcodecs has no bitshuffle-LZ4 codec, so the framing is read here.

JSON form::

    {"name": "virtualizarr_fill.hdf5_bitshuffle",
     "configuration": {"elementsize": 4, "blocksize": 0, "compression": "lz4"}}

``blocksize`` is in elements (0: the bitshuffle library default); ``compression`` is
``"none"``, ``"lz4"`` or ``"zstd"``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

HDF5_BITSHUFFLE_CODEC_NAME = "virtualizarr_fill.hdf5_bitshuffle"

Compression = Literal["none", "lz4", "zstd"]
_COMPRESSIONS: tuple[Compression, ...] = ("none", "lz4", "zstd")

# Constants of the bitshuffle library (bitshuffle_core.h).
_TARGET_BLOCK_BYTES = 8192
_MIN_BLOCK = 128
_BLOCK_MULTIPLE = 8
_HEADER_BYTES = 12


def default_block_size(elementsize: int) -> int:
    """The bitshuffle library's block size (elements) when none is configured."""
    size = (_TARGET_BLOCK_BYTES // elementsize) // _BLOCK_MULTIPLE * _BLOCK_MULTIPLE
    return max(size, _MIN_BLOCK)


def _block_sizes(nelements: int, block: int) -> list[int]:
    """Element counts of the transposed blocks; the ``n % 8`` tail is stored verbatim."""
    sizes = [block] * (nelements // block)
    last = nelements % block
    last -= last % _BLOCK_MULTIPLE
    if last:
        sizes.append(last)
    return sizes


@dataclass(frozen=True)
class HDF5BitshuffleCodec(BytesBytesCodec):
    """Decode (and encode) chunks of HDF5's bitshuffle filter (id 32008).

    The filter bit-transposes a chunk block by block, optionally compressing each block,
    in a framing of its own (a header, then one length-prefixed record per block, then
    the ``n % 8`` trailing elements verbatim). JSON form: ``{"name":
    "virtualizarr_fill.hdf5_bitshuffle", "configuration": {"elementsize": 4,
    "blocksize": 0, "compression": "lz4"}}``.

    Parameters
    ----------
    elementsize
        Bytes per element of the dataset's data type.
    blocksize
        Elements per block, a multiple of 8; 0 (default) for the bitshuffle library's
        default block size.
    compression
        How each block is compressed: ``"none"`` (default), ``"lz4"`` or ``"zstd"``.
    level
        Zstandard level used on encode (0: the library's default); decoding ignores it.
    """

    is_fixed_size = False
    elementsize: int
    blocksize: int
    compression: Compression
    level: int

    def __init__(
        self,
        *,
        elementsize: int,
        blocksize: int = 0,
        compression: Compression = "none",
        level: int = 0,
    ) -> None:
        if int(elementsize) < 1:
            raise ValueError(f"elementsize must be positive, got {elementsize}")
        if compression not in _COMPRESSIONS:
            raise ValueError(f"compression must be one of {_COMPRESSIONS}, got {compression!r}")
        if int(blocksize) < 0 or int(blocksize) % _BLOCK_MULTIPLE:
            raise ValueError(f"blocksize must be a non-negative multiple of 8, got {blocksize}")
        object.__setattr__(self, "elementsize", int(elementsize))
        object.__setattr__(self, "blocksize", int(blocksize))
        object.__setattr__(self, "compression", compression)
        object.__setattr__(self, "level", int(level))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, HDF5_BITSHUFFLE_CODEC_NAME)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        configuration: dict[str, JSON] = {
            "elementsize": self.elementsize,
            "blocksize": self.blocksize,
            "compression": self.compression,
        }
        if self.level:
            configuration["level"] = self.level
        return {"name": HDF5_BITSHUFFLE_CODEC_NAME, "configuration": configuration}

    # -- decoding ---------------------------------------------------------------

    def decode_bytes(self, data: bytes | memoryview) -> bytes:
        """Decode one stored chunk."""
        import imagecodecs
        size = self.elementsize
        if self.compression == "none":
            if len(data) % size:
                raise ValueError(
                    f"bitshuffled chunk of {len(data)} bytes is not a whole number of "
                    f"{size}-byte elements"
                )
            return bytes(
                imagecodecs.bitshuffle_decode(data, itemsize=size, blocksize=self.blocksize)
            )
        view = memoryview(data)
        if len(view) < _HEADER_BYTES:
            raise ValueError(f"bitshuffle chunk of {len(view)} bytes is shorter than its header")
        nbytes = int.from_bytes(view[:8], "big")
        block_bytes = int.from_bytes(view[8:12], "big")
        if nbytes % size or block_bytes % size or block_bytes == 0:
            raise ValueError(
                f"corrupt bitshuffle header: {nbytes} bytes in blocks of {block_bytes} bytes "
                f"for {size}-byte elements"
            )
        nelements = nbytes // size
        out = bytearray(nbytes)
        position = _HEADER_BYTES
        written = 0
        for count in _block_sizes(nelements, block_bytes // size):
            length = int.from_bytes(view[position : position + 4], "big")
            position += 4
            if position + length > len(view):
                raise ValueError(
                    f"bitshuffle chunk is truncated: a block of {length} bytes at byte "
                    f"{position} runs past its end ({len(view)} bytes)"
                )
            packed = view[position : position + length]
            position += length
            expected = count * size
            if self.compression == "lz4":
                block = imagecodecs.lz4_decode(packed, header=False, out=expected)
            else:
                block = imagecodecs.zstd_decode(packed, out=expected)
            if len(block) != expected:
                raise ValueError(
                    f"bitshuffle block decoded to {len(block)} bytes, expected {expected}"
                )
            out[written : written + expected] = imagecodecs.bitshuffle_decode(
                block, itemsize=size, blocksize=count
            )
            written += expected
        tail = nbytes - written
        if position + tail != len(view):
            raise ValueError(
                f"bitshuffle chunk of {len(view)} bytes does not end after its "
                f"{tail} trailing bytes (at byte {position})"
            )
        out[written:] = view[position : position + tail]
        return bytes(out)

    def encode_bytes(self, data: bytes | memoryview) -> bytes:
        """Encode one chunk as the HDF5 filter writes it."""
        import imagecodecs
        size = self.elementsize
        if len(data) % size:
            raise ValueError(f"{len(data)} bytes is not a whole number of {size}-byte elements")
        if self.compression == "none":
            return bytes(
                imagecodecs.bitshuffle_encode(data, itemsize=size, blocksize=self.blocksize)
            )
        view = memoryview(data)
        block = self.blocksize or default_block_size(size)
        nelements = len(view) // size
        parts = [len(view).to_bytes(8, "big"), (block * size).to_bytes(4, "big")]
        written = 0
        for count in _block_sizes(nelements, block):
            raw = view[written : written + count * size]
            shuffled = imagecodecs.bitshuffle_encode(raw, itemsize=size, blocksize=count)
            if self.compression == "lz4":
                packed = imagecodecs.lz4_encode(shuffled, header=False)
            else:
                packed = imagecodecs.zstd_encode(shuffled, level=self.level or None)
            parts += [len(packed).to_bytes(4, "big"), bytes(packed)]
            written += count * size
        parts.append(bytes(view[written:]))
        return b"".join(parts)

    # -- zarr codec API -----------------------------------------------------------

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        decoded = self.decode_bytes(chunk_bytes.as_numpy_array().tobytes())
        return chunk_spec.prototype.buffer.from_bytes(decoded)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        encoded = self.encode_bytes(chunk_bytes.as_numpy_array().tobytes())
        return chunk_spec.prototype.buffer.from_bytes(encoded)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        if self.compression == "none":
            return input_byte_length
        raise NotImplementedError


__all__ = ["HDF5_BITSHUFFLE_CODEC_NAME", "HDF5BitshuffleCodec", "default_block_size"]
