"""The edge codec of a codec chain: which one a padded chunk needs, and where it goes.

A stored chunk may be larger than the logical chunk the Zarr grid describes (a padded
TIFF strip, an HDF5 edge chunk that became interior after concatenation). Two codecs
handle that, and choosing between them is a question of storage order:

* **truncate** when the logical chunk is a contiguous *prefix* of the stored bytes:
  padding only along the slowest-varying axis that is not of length one;
* **crop** otherwise (padding along an inner axis, or along several axes).

The decision needs the codec chain because transposes before the array->bytes codec
change which axis is slowest in the stored bytes. The edge codec itself has exactly one
correct place, right after the ``bytes`` codec; this module inserts, removes, checks and
reads it back (its stored shape), on chains of codec objects or of JSON dicts alike.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec, BaseCodec
from zarr.codecs import BytesCodec, TransposeCodec
from zarr.core.chunk_grids import ChunkGrid
from zarr.registry import get_codec_class

from virtualizarr_fill.codecs.crop import CROP_CODEC_NAME, CropCodec
from virtualizarr_fill.codecs.truncate import TRUNCATE_CODEC_NAME, TruncateCodec

CodecLike = BaseCodec[Any, Any] | Mapping[str, Any]
_EDGE_CODEC_NAMES = frozenset({TRUNCATE_CODEC_NAME, CROP_CODEC_NAME})


class EdgeHandling(enum.IntEnum):
    """What an array needs so that oversized stored chunks decode correctly.

    Ordered by strength: combining two arrays needs the stronger of the two.
    """

    NONE = 0
    TRUNCATE = 1
    CROP = 2

    def __str__(self) -> str:
        return self.name.lower()


def _codec_name(codec: CodecLike) -> str:
    if isinstance(codec, Mapping):
        return str(codec["name"])
    return str(codec.to_dict()["name"])


def _codec_class(codec: CodecLike) -> type[BaseCodec[Any, Any]]:
    if isinstance(codec, Mapping):
        return get_codec_class(str(codec["name"]))
    return type(codec)


def _transpose_order(codec: CodecLike) -> tuple[int, ...] | None:
    if isinstance(codec, TransposeCodec):
        return tuple(codec.order)
    if isinstance(codec, Mapping) and codec.get("name") == "transpose":
        return tuple(codec["configuration"]["order"])
    return None


def storage_order_shape(codecs: Sequence[CodecLike], shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` (array order) as the array->bytes codec sees it, after every transpose."""
    current = tuple(shape)
    for codec in codecs:
        if issubclass(_codec_class(codec), ArrayBytesCodec):
            break
        order = _transpose_order(codec)
        if order is not None:
            if sorted(order) != list(range(len(current))):
                raise ValueError(f"transpose order {order} does not fit a {len(current)}-d chunk")
            current = tuple(current[i] for i in order)
    return current


def _is_storage_prefix(logical: Sequence[int], stored: Sequence[int]) -> bool:
    """Whether a C-order array of ``logical`` shape is the leading bytes of ``stored``."""
    differing = [i for i, (lg, st) in enumerate(zip(logical, stored, strict=True)) if lg != st]
    if not differing:
        return True
    first = differing[0]
    # One padded axis, and every axis before it of length one.
    return len(differing) == 1 and all(stored[i] == 1 for i in range(first))


def decide_edge_handling(
    codecs: Sequence[CodecLike], logical_shape: Sequence[int], stored_shape: Sequence[int]
) -> EdgeHandling:
    """Decide how a chunk of ``logical_shape`` stored at ``stored_shape`` must be decoded.

    Both shapes are in array order; ``codecs`` is the Zarr v3 codec chain (objects or
    JSON dicts), whose transposes fix the storage order.
    """
    if len(logical_shape) != len(stored_shape):
        raise ValueError(
            f"logical chunk shape {tuple(logical_shape)} and stored shape "
            f"{tuple(stored_shape)} differ in rank"
        )
    if any(lg > st for lg, st in zip(logical_shape, stored_shape, strict=True)):
        raise ValueError(
            f"logical chunk shape {tuple(logical_shape)} exceeds the stored shape "
            f"{tuple(stored_shape)}"
        )
    if tuple(logical_shape) == tuple(stored_shape):
        return EdgeHandling.NONE
    logical = storage_order_shape(codecs, logical_shape)
    stored = storage_order_shape(codecs, stored_shape)
    return EdgeHandling.TRUNCATE if _is_storage_prefix(logical, stored) else EdgeHandling.CROP


def decide_grid_edge_handling(
    codecs: Sequence[CodecLike], chunk_grid: ChunkGrid, stored_shape: Sequence[int]
) -> EdgeHandling:
    """The handling every chunk of ``chunk_grid`` needs when each is stored at ``stored_shape``.

    The grid is a Cartesian product of per-axis edges, so the worst chunk is the one with
    the smallest edge on every axis: if that one is a storage prefix, all are.
    """
    smallest = [min(dim._unique_edge_lengths) for dim in chunk_grid.dimensions]
    return decide_edge_handling(codecs, smallest, stored_shape)


def edge_handling_of(codecs: Sequence[CodecLike]) -> EdgeHandling:
    """The edge codec already present in a chain (NONE when there is none)."""
    names = {_codec_name(c) for c in codecs}
    if CROP_CODEC_NAME in names:
        return EdgeHandling.CROP
    if TRUNCATE_CODEC_NAME in names:
        return EdgeHandling.TRUNCATE
    return EdgeHandling.NONE


def without_edge_codecs(codecs: Sequence[CodecLike]) -> list[CodecLike]:
    """The chain with any truncate/crop codec removed."""
    return [c for c in codecs if _codec_name(c) not in _EDGE_CODEC_NAMES]


def _array_order(codecs: Sequence[Any], storage_shape: Sequence[int]) -> tuple[int, ...]:
    """Invert :func:`storage_order_shape`: a storage-order shape back in array order."""
    permutation = storage_order_shape(codecs, range(len(storage_shape)))
    array_shape = [0] * len(storage_shape)
    for position, axis in enumerate(permutation):
        array_shape[axis] = storage_shape[position]
    return tuple(array_shape)


def crop_stored_shape(codecs: Sequence[Any]) -> tuple[int, ...] | None:
    """The stored chunk shape (array order) of the chain's crop codec, if it has one."""
    for codec in codecs:
        if isinstance(codec, CropCodec):
            return _array_order(codecs, codec.stored_shape)
        if isinstance(codec, dict) and codec.get("name") == CROP_CODEC_NAME:
            stored = codec["configuration"]["stored_shape"]
            return _array_order(codecs, stored)
    return None


def whole_row_axes(codecs: Sequence[Any], ndim: int) -> frozenset[int]:
    """The axes (array order) along which no edge codec can cut a chunk short: those of
    the rows a floating-point predictor (TIFF predictor 3) shuffles into byte planes,
    whose leading values are not the leading stored bytes."""
    from virtualizarr_fill.codecs.tiff_predictor import TiffPredictorCodec

    for codec in codecs:
        predictor, axis = None, None
        if isinstance(codec, TiffPredictorCodec):
            predictor, axis = codec.predictor, codec.axis
        elif isinstance(codec, Mapping) and codec.get("name") == "virtualizarr_fill.tiff_predictor":
            configuration = codec.get("configuration", {})
            predictor, axis = configuration.get("predictor"), configuration.get("axis", -1)
        if predictor == 3 and axis is not None:
            storage_axes = range(ndim + int(axis), ndim)
            order = _array_order_of_axes(codecs, ndim)
            return frozenset(order[a] for a in storage_axes)
    return frozenset()


def _array_order_of_axes(codecs: Sequence[Any], ndim: int) -> tuple[int, ...]:
    """For each storage-order axis, the array axis it is."""
    return storage_order_shape(codecs, range(ndim))


def _array_bytes_index(codecs: Sequence[CodecLike]) -> int:
    for i, codec in enumerate(codecs):
        if issubclass(_codec_class(codec), ArrayBytesCodec):
            return i
    raise ValueError(f"codec chain {[_codec_name(c) for c in codecs]} has no array->bytes codec")


def check_edge_codec_placement(codecs: Sequence[CodecLike]) -> None:
    """Raise ``ValueError`` unless every truncate/crop codec sits right after a ``bytes`` codec.

    Anywhere else it would act on compressed bytes, or on bytes an image codec decodes
    itself, and could silently yield wrong values.
    """
    for i, codec in enumerate(codecs):
        if _codec_name(codec) not in _EDGE_CODEC_NAMES:
            continue
        previous = codecs[i - 1] if i > 0 else None
        if previous is None or not issubclass(_codec_class(previous), BytesCodec):
            names = [_codec_name(c) for c in codecs]
            raise ValueError(
                f"{_codec_name(codec)} must come immediately after the 'bytes' codec "
                f"(before any compressor) so it sees decompressed bytes; got chain {names}"
            )


def insert_edge_codec(
    codecs: Sequence[CodecLike],
    handling: EdgeHandling,
    stored_shape: Sequence[int] | None = None,
) -> list[CodecLike]:
    """Return ``codecs`` with the codec ``handling`` asks for at its only correct place.

    Any existing truncate/crop codec is replaced. The new codec goes immediately after
    the array->bytes codec, which must be zarr's ``bytes`` codec: an array->bytes codec
    that decompresses (JPEG, sharding, ...) leaves no point where raw stored bytes can
    be cut. ``stored_shape`` (array order) is required for :attr:`EdgeHandling.CROP`.
    The result holds JSON dicts when every input codec was a dict, otherwise objects.
    """
    chain = without_edge_codecs(codecs)
    if handling is EdgeHandling.NONE:
        return chain
    position = _array_bytes_index(chain)
    array_bytes = chain[position]
    if not issubclass(_codec_class(array_bytes), BytesCodec):
        raise ValueError(
            f"cannot trim padded chunks: the array->bytes codec {_codec_name(array_bytes)!r} "
            "does not expose the raw stored bytes (only the 'bytes' codec does)"
        )
    for codec in chain[:position]:
        cls = _codec_class(codec)
        if not issubclass(cls, ArrayArrayCodec):
            raise ValueError(
                f"unexpected codec {_codec_name(codec)!r} before the array->bytes codec"
            )
    edge_codec: BaseCodec[Any, Any]
    if handling is EdgeHandling.TRUNCATE:
        edge_codec = TruncateCodec()
    else:
        if stored_shape is None:
            raise ValueError("crop needs the stored chunk shape")
        edge_codec = CropCodec(stored_shape=storage_order_shape(chain, stored_shape))
    as_dicts = all(isinstance(c, Mapping) for c in chain)
    new: CodecLike = edge_codec.to_dict() if as_dicts else edge_codec
    objects: list[CodecLike] = list(chain)
    objects.insert(position + 1, new)
    return objects


__all__ = [
    "CodecLike",
    "EdgeHandling",
    "check_edge_codec_placement",
    "crop_stored_shape",
    "decide_edge_handling",
    "decide_grid_edge_handling",
    "edge_handling_of",
    "insert_edge_codec",
    "storage_order_shape",
    "without_edge_codecs",
]
