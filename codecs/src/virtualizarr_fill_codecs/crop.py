"""CropCodec: slice a chunk stored at a larger physical shape down to its logical shape.

Truncation is only right when the logical chunk is a prefix of the stored bytes. A TIFF
edge tile padded in x, or an HDF5 edge chunk that became an interior chunk of a
concatenation along an inner axis, stores its padding *inside* every row: cutting the
buffer's tail would return silently wrong values. This codec instead views the buffer as
an array of ``stored_shape`` (storage order: the order the array->bytes codec sees, i.e.
after any transposes) and keeps the leading ``chunk_spec.shape`` corner.

A buffer of exactly the logical size passes through, so one codec chain serves arrays
whose chunks are stored sometimes padded and sometimes not. Any other size is an error
naming both expected sizes: never a reshape of the wrong bytes.

Placement is the same as :class:`~virtualizarr_fill_codecs.truncate.TruncateCodec`.

JSON form::

    {"name": "virtualizarr_fill.crop", "configuration": {"stored_shape": [10, 180, 360]}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from zarr.core.common import JSON, parse_named_configuration

from virtualizarr_fill_codecs._common import EdgeCodec, expected_nbytes, fixed_item_size
from virtualizarr_fill_codecs.errors import ChunkSizeMismatchError

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

CROP_CODEC_NAME = "virtualizarr_fill.crop"


def _parse_stored_shape(value: object) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"{CROP_CODEC_NAME}: stored_shape must be a non-empty list, got {value!r}")
    shape = tuple(int(v) for v in value)
    if any(s < 1 for s in shape):
        raise ValueError(f"{CROP_CODEC_NAME}: stored_shape entries must be >= 1, got {shape}")
    return shape


@dataclass(frozen=True)
class CropCodec(EdgeCodec):
    """Bytes->bytes codec that crops a chunk stored at ``stored_shape`` to its logical shape.

    On decode, a buffer of ``stored_shape`` (in storage order) is viewed as that array and
    its leading corner of the chunk's logical shape is kept: right where the padding lies
    inside the rows (an edge tile padded in x, an HDF5 chunk padded along an inner axis),
    where cutting the buffer's tail would return wrong values. A buffer of the logical
    size passes through; any other size raises
    :class:`~virtualizarr_fill_codecs.errors.ChunkSizeMismatchError`. Encode is a no-op.

    It sits right after the ``bytes`` codec, as
    :class:`~virtualizarr_fill_codecs.truncate.TruncateCodec` does. JSON form:
    ``{"name": "virtualizarr_fill.crop", "configuration": {"stored_shape": [10, 180, 360]}}``.

    Its specification for other implementations: [codec
    `virtualizarr_fill.crop`][crop-specification] (``docs/codecs/crop.md``).

    Parameters
    ----------
    stored_shape
        Shape of the stored (padded) chunks, in storage order: the order the ``bytes``
        codec sees, after any transposes.
    """

    stored_shape: tuple[int, ...]

    def __init__(self, *, stored_shape: tuple[int, ...] | list[int]) -> None:
        object.__setattr__(self, "stored_shape", _parse_stored_shape(stored_shape))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, CROP_CODEC_NAME)
        unknown = set(configuration) - {"stored_shape"}
        if unknown:
            raise ValueError(f"{CROP_CODEC_NAME}: unknown configuration keys {sorted(unknown)}")
        return cls(stored_shape=configuration["stored_shape"])  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": CROP_CODEC_NAME, "configuration": {"stored_shape": list(self.stored_shape)}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        logical_nbytes = expected_nbytes(chunk_spec)
        item_size = fixed_item_size(chunk_spec)
        if logical_nbytes is None or item_size is None or len(chunk_bytes) == logical_nbytes:
            return chunk_bytes
        logical_shape = tuple(chunk_spec.shape)
        stored_nbytes = int(np.prod(self.stored_shape)) * item_size
        if len(chunk_bytes) != stored_nbytes or len(logical_shape) != len(self.stored_shape):
            raise ChunkSizeMismatchError(
                f"{CROP_CODEC_NAME}: chunk of {len(chunk_bytes)} bytes is neither its logical "
                f"size {logical_nbytes} bytes (shape {logical_shape}) nor its stored size "
                f"{stored_nbytes} bytes (shape {self.stored_shape}), item size {item_size}"
            )
        if any(lg > st for lg, st in zip(logical_shape, self.stored_shape, strict=True)):
            raise ChunkSizeMismatchError(
                f"{CROP_CODEC_NAME}: logical chunk shape {logical_shape} exceeds the stored "
                f"shape {self.stored_shape}"
            )
        # Opaque items of the element's width: the crop never interprets values, so it is
        # independent of byte order and data type.
        stored = np.frombuffer(chunk_bytes.as_numpy_array(), dtype=np.dtype(f"V{item_size}"))
        cropped = stored.reshape(self.stored_shape)[tuple(slice(0, n) for n in logical_shape)]
        contiguous = np.ascontiguousarray(cropped).view(np.uint8).reshape(-1)
        return chunk_spec.prototype.buffer.from_array_like(contiguous)


__all__ = ["CROP_CODEC_NAME", "CropCodec"]
