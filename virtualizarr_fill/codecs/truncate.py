"""TruncateCodec: trim a decompressed chunk to its logical byte count.

Archival formats often store an edge chunk at full physical size (a TIFF last strip
padded to RowsPerStrip rows, an HDF5 edge chunk). When a virtual Zarr array describes the
chunk by its logical shape, the array->bytes codec receives more bytes than it can
reshape. This codec drops the excess.

It is only correct when the logical chunk is a *prefix* of the stored bytes in storage
order (padding along the slowest-varying non-singleton axis only);
:func:`virtualizarr_fill.grid.decide_edge_handling` decides that, and
:class:`~virtualizarr_fill.codecs.crop.CropCodec` handles the other cases.

Placement: immediately after the array->bytes codec and before any compressor, so that
on decode it runs on decompressed bytes just before they are reshaped::

    [TransposeCodec(...), BytesCodec(), TruncateCodec(), GzipCodec()]

JSON form: ``{"name": "virtualizarr_fill.truncate", "configuration": {}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

from virtualizarr_fill.codecs._common import expected_nbytes

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

TRUNCATE_CODEC_NAME = "virtualizarr_fill.truncate"


@dataclass(frozen=True)
class TruncateCodec(BytesBytesCodec):
    """Bytes->bytes codec that trims buffers longer than the chunk's logical size.

    Decode: a buffer longer than ``prod(chunk_spec.shape) * item_size`` is cut to that
    length; an equal or shorter buffer, or a variable-length data type, passes through.
    Encode is a no-op: padding on write is the writer's concern.
    """

    # The output length depends on the input, not only on the chunk spec.
    is_fixed_size = False

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(
            data, TRUNCATE_CODEC_NAME, require_configuration=False
        )
        if configuration:
            raise ValueError(f"{TRUNCATE_CODEC_NAME} takes no configuration, got {configuration!r}")
        return cls()

    def to_dict(self) -> dict[str, JSON]:
        return {"name": TRUNCATE_CODEC_NAME, "configuration": {}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        expected = expected_nbytes(chunk_spec)
        if expected is not None and len(chunk_bytes) > expected:
            return chunk_bytes[:expected]
        return chunk_bytes

    async def decode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        # Trimming is a slice or a small copy: decode the whole batch inline rather than
        # scheduling one task per chunk.
        return [None if b is None else self._decode_sync(b, s) for b, s in chunks_and_specs]

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        # Slicing is cheap; no thread hop needed.
        return self._decode_sync(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_bytes

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_bytes

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length


__all__ = ["TRUNCATE_CODEC_NAME", "TruncateCodec"]
