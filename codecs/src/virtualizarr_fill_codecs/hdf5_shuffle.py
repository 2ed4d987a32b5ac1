"""HDF5 shuffle filter (id 2) for buffers that are not whole elements.

HDF5's shuffle filter transposes the bytes of ``nbytes // elementsize`` elements and
copies the remaining ``nbytes % elementsize`` bytes unchanged. When shuffle runs on the
raw chunk (its usual place, first in the pipeline) the remainder is always empty and
zarr's ``numcodecs.shuffle`` is used. Files that shuffle *after* a filter that changes
the length (after deflate or fletcher32, which real writers do) need the remainder
rule, which numcodecs refuses; this codec implements exactly HDF5's rule.

JSON form: ``{"name": "virtualizarr_fill.hdf5_shuffle", "configuration": {"elementsize": 4}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

HDF5_SHUFFLE_CODEC_NAME = "virtualizarr_fill.hdf5_shuffle"


def unshuffle(data: Any, elementsize: int) -> bytes:
    """Undo HDF5's byte shuffle (remainder bytes stay in place at the end)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    whole = len(raw) - len(raw) % elementsize
    if whole == len(raw):  # whole elements: one copy
        return raw.reshape(elementsize, -1).T.tobytes()
    out = raw.copy()
    if elementsize > 1 and whole:
        out[:whole] = raw[:whole].reshape(elementsize, -1).T.reshape(-1)
    return out.tobytes()


def shuffle(data: bytes | memoryview, elementsize: int) -> bytes:
    """HDF5's byte shuffle (remainder bytes stay in place at the end)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    whole = len(raw) - len(raw) % elementsize
    out = raw.copy()
    if elementsize > 1 and whole:
        out[:whole] = raw[:whole].reshape(-1, elementsize).T.reshape(-1)
    return out.tobytes()


@dataclass(frozen=True)
class HDF5ShuffleCodec(BytesBytesCodec):
    """Byte shuffle with HDF5's handling of a trailing partial element (filter id 2).

    Used where a file shuffles after a filter that changes the length (after deflate or
    fletcher32): the bytes of ``nbytes // elementsize`` elements are transposed and the
    ``nbytes % elementsize`` remaining bytes stay in place, which numcodecs' shuffle
    refuses. JSON form: ``{"name": "virtualizarr_fill.hdf5_shuffle", "configuration":
    {"elementsize": 4}}``.

    Parameters
    ----------
    elementsize
        Bytes per element the filter transposes (the dataset's item size).
    """

    is_fixed_size = True
    elementsize: int

    def __init__(self, *, elementsize: int) -> None:
        if int(elementsize) < 1:
            raise ValueError(f"elementsize must be positive, got {elementsize}")
        object.__setattr__(self, "elementsize", int(elementsize))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, HDF5_SHUFFLE_CODEC_NAME)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": HDF5_SHUFFLE_CODEC_NAME, "configuration": {"elementsize": self.elementsize}}

    def decode_bytes(self, data: Any) -> bytes:
        """Decode one stored chunk (any bytes-like object)."""
        return unshuffle(data, self.elementsize)

    # Synchronous too: without it zarr (and the manifest read pipeline) hand every
    # chunk of a chain holding this codec to the event loop, far slower.
    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return chunk_spec.prototype.buffer.from_bytes(
            self.decode_bytes(chunk_bytes.as_numpy_array())
        )

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        encoded = shuffle(chunk_bytes.as_numpy_array().tobytes(), self.elementsize)
        return chunk_spec.prototype.buffer.from_bytes(encoded)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length


__all__ = ["HDF5_SHUFFLE_CODEC_NAME", "HDF5ShuffleCodec", "shuffle", "unshuffle"]
