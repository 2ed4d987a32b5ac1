"""TruncateCodec: trim a decompressed chunk to its logical byte count.

Archival formats often store an edge chunk at full physical size (a TIFF last strip
padded to RowsPerStrip rows, an HDF5 edge chunk). When a virtual Zarr array describes the
chunk by its logical shape, the array->bytes codec receives more bytes than it can
reshape. This codec drops the excess.

It is only correct when the logical chunk is a *prefix* of the stored bytes in storage
order (padding along the slowest-varying non-singleton axis only);
``virtualizarr_fill.zarr_model.edge_codecs.decide_edge_handling`` decides that in
virtualizarr-fill, and :class:`~virtualizarr_fill_codecs.crop.CropCodec` handles the other
cases.

Placement: immediately after the array->bytes codec and before any compressor, so that
on decode it runs on decompressed bytes just before they are reshaped::

    [TransposeCodec(...), BytesCodec(), TruncateCodec(), GzipCodec()]

JSON form: ``{"name": "virtualizarr_fill.truncate", "configuration": {}}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zarr.core.common import JSON, parse_named_configuration

from virtualizarr_fill_codecs._common import EdgeCodec, expected_nbytes

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

TRUNCATE_CODEC_NAME = "virtualizarr_fill.truncate"


def truncated_length(nbytes: int, chunk_spec: ArraySpec) -> int | None:
    """The length a decoded buffer of ``nbytes`` is cut to: the chunk's logical byte
    count when the buffer is longer; None (kept whole) when it is not, or when the data
    type has no fixed item size."""
    expected = expected_nbytes(chunk_spec)
    return expected if expected is not None and nbytes > expected else None


def truncator(chunk_spec: ArraySpec) -> Callable[[Any], Any]:
    """:func:`truncated_length`'s cut bound to one chunk spec: a function from a
    decoded bytes-like chunk to the same bytes, cut to the chunk's logical byte count
    when longer, for reads that decode many chunks of one shape without zarr's buffers."""
    expected = expected_nbytes(chunk_spec)
    if expected is None:
        return _whole

    def cut(data: Any) -> Any:
        view = memoryview(data)
        return data if view.nbytes <= expected else view.cast("B")[:expected]

    return cut


def _whole(data: Any) -> Any:
    return data


@dataclass(frozen=True)
class TruncateCodec(EdgeCodec):
    """Bytes->bytes codec that trims buffers longer than the chunk's logical size.

    Decode: a buffer longer than ``prod(chunk_spec.shape) * item_size`` is cut to that
    length; an equal or shorter buffer, or a variable-length data type, passes through.
    Encode is a no-op: padding on write is the writer's concern.

    Right only where the logical chunk is a prefix of the stored bytes in storage order
    (a TIFF strip padded with rows, an HDF5 chunk padded along its first axis);
    :class:`~virtualizarr_fill_codecs.crop.CropCodec` handles padding inside the rows.
    It sits right after the ``bytes`` codec and before any compressor. It takes no
    parameters; JSON form: ``{"name": "virtualizarr_fill.truncate", "configuration": {}}``.

    Its specification for other implementations: [codec
    `virtualizarr_fill.truncate`][truncate-specification] (``docs/codecs/truncate.md``).
    """

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
        cut = truncated_length(len(chunk_bytes), chunk_spec)
        return chunk_bytes if cut is None else chunk_bytes[:cut]


__all__ = ["TRUNCATE_CODEC_NAME", "TruncateCodec", "truncated_length", "truncator"]
