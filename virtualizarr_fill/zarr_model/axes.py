"""A codec chain rewritten for an array that gains or loses an axis of length one.

Stacking adds an axis and integer indexing drops one; the stored bytes stay the same,
but the chain's transposes and the crop codec's stored shape name axes by position, so
they are renumbered here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zarr.codecs import TransposeCodec

from virtualizarr_fill.codecs.crop import CropCodec
from virtualizarr_fill.errors import UnsupportedFeatureError


def _transpose_axes_after_insert(codecs: Sequence[Any], axis: int) -> tuple[list[Any], int]:
    """Codecs for an array with a new length-one axis at ``axis``.

    Each transpose puts the new axis first in storage order (a length-one axis can sit
    anywhere without changing the stored bytes). Returns the codecs and the position
    of the new axis in storage order.
    """
    position = axis
    new_codecs: list[Any] = []
    for codec in codecs:
        if isinstance(codec, TransposeCodec):
            order = [position] + [o if o < position else o + 1 for o in codec.order]
            # After this transpose the new axis (input position ``position``) is first.
            new_codecs.append(TransposeCodec(order=order))
            position = 0
        else:
            new_codecs.append(codec)
    return new_codecs, position


def codecs_with_new_axis(codecs: Sequence[Any], axis: int) -> list[Any]:
    """The codec chain of an array that gained a length-one axis at ``axis``."""
    new_codecs, storage_position = _transpose_axes_after_insert(codecs, axis)
    result: list[Any] = []
    for codec in new_codecs:
        if isinstance(codec, CropCodec):
            stored = list(codec.stored_shape)
            stored.insert(storage_position, 1)
            result.append(CropCodec(stored_shape=stored))
        else:
            result.append(codec)
    return result


def codecs_without_axis(codecs: Sequence[Any], axis: int) -> list[Any]:
    """The codec chain of an array that lost its length-one axis ``axis``.

    Raises :class:`UnsupportedFeatureError` when the crop codec stores more than one
    element along that axis (the stored chunk is not length one there).
    """
    position = axis
    result: list[Any] = []
    for codec in codecs:
        if isinstance(codec, TransposeCodec):
            order = list(codec.order)
            new_position = order.index(position)
            reduced = [o if o < position else o - 1 for o in order if o != position]
            if reduced:
                result.append(TransposeCodec(order=reduced))
            position = new_position
        else:
            result.append(codec)
    final: list[Any] = []
    for codec in result:
        if isinstance(codec, CropCodec):
            stored = list(codec.stored_shape)
            if stored[position] != 1:
                raise UnsupportedFeatureError(
                    f"cannot drop axis {axis}: its chunks are stored {stored[position]} "
                    "long (padded), so an integer index would split a stored chunk; "
                    "select it with a slice instead"
                )
            del stored[position]
            final.append(CropCodec(stored_shape=stored))
        else:
            final.append(codec)
    return final


__all__ = ["codecs_with_new_axis", "codecs_without_axis"]
