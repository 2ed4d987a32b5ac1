"""Helpers shared by the edge codecs."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from zarr.abc.codec import BytesBytesCodec
from zarr.core.dtype.common import HasItemSize

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer


def fixed_item_size(chunk_spec: ArraySpec) -> int | None:
    """Bytes per element of the chunk's data type, or None for variable-length types."""
    dtype = chunk_spec.dtype
    if not isinstance(dtype, HasItemSize):
        return None
    native = dtype.to_native_dtype()
    if native.kind in "OT":  # object / numpy StringDType: no fixed width in bytes
        return None
    return dtype.item_size


def expected_nbytes(chunk_spec: ArraySpec) -> int | None:
    """Byte count of a chunk of ``chunk_spec.shape`` before the array->bytes codec reshapes it."""
    item_size = fixed_item_size(chunk_spec)
    if item_size is None:
        return None
    return math.prod(chunk_spec.shape) * item_size


class EdgeCodec(BytesBytesCodec):
    """Shared behaviour of the codecs that shrink oversized stored chunks on read.

    Subclasses implement ``_decode_sync``. Encoding is a no-op (padding on write is the
    writer's concern) and the output size depends on the input, not only on the spec.
    """

    is_fixed_size = False

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        raise NotImplementedError

    async def decode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        # A slice or a small copy per chunk: decode the batch inline rather than
        # scheduling one task per chunk.
        return [None if b is None else self._decode_sync(b, s) for b, s in chunks_and_specs]

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_bytes

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_bytes

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length
