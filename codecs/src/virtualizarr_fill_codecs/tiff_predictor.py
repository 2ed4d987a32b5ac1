"""TIFF predictors (tag 317) as a Zarr v3 array->array codec.

TIFF writers may difference samples along each row before compressing:

* **Predictor 2** (horizontal differencing): each integer sample minus the same sample
  of the previous pixel, in the sample's own integer arithmetic (wrapping). libtiff, and
  so GDAL, difference floating-point samples the same way, as the unsigned integers of
  their bits (not their values, as tifffile does).
* **Predictor 3** (floating-point, Adobe Photoshop TIFF technical note 3): each row's
  values are split into byte planes, most significant byte first, and the bytes are
  differenced with a distance of one pixel.

The codec runs on the array the ``bytes`` codec produced, in storage order (after any
transpose), so a truncate or crop codec can still sit directly after ``bytes``::

    [TransposeCodec((1, 2, 0)), TiffPredictorCodec(predictor=2, axis=-2),
     BytesCodec(endian="big"), TruncateCodec(), Zlib()]

Predictor 2 undoes differencing on the decoded integers (or the bits of decoded floats),
which the ``bytes`` codec has already put into native byte order, so it is right for
either file byte order, as libtiff swaps the bytes of each sample before accumulating.
Predictor 3 works on raw bytes: the ``bytes`` codec only reinterprets them, so the codec
re-serialises the array in that codec's byte order (``endian``) to recover the stored
bytes before undoing the shuffle; the resulting values do not depend on the file's
byte order (the byte planes are always most significant first).

``axis`` is the row axis (x) in storage order; any axis after it holds the samples of
one pixel (pixel-interleaved data), which predictor 2 differences independently and
predictor 3 uses as the byte distance, as libtiff does.

imagecodecs' zarr codecs were not used because their floating-point predictor is an
array->bytes codec (leaving no place for truncation of padded strips) and neither has a
notion of the stored byte order; the arithmetic itself is imagecodecs'.

JSON form: ``{"name": "virtualizarr_fill.tiff_predictor", "configuration":
{"predictor": 2|3, "axis": -1|-2, "endian": "little"|"big"}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from zarr.abc.codec import ArrayArrayCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.metadata.v3 import ChunkGridMetadata

TIFF_PREDICTOR_CODEC_NAME = "virtualizarr_fill.tiff_predictor"

Endian = Literal["little", "big"]
_BYTEORDER: dict[str, Literal["<", ">"]] = {"little": "<", "big": ">"}


def _check_config(predictor: int, axis: int, endian: str) -> None:
    if predictor not in (2, 3):
        raise ValueError(f"TIFF predictor must be 2 or 3, got {predictor!r}")
    if axis >= 0:
        raise ValueError(f"axis must be negative (counted from the last axis), got {axis!r}")
    if endian not in _BYTEORDER:
        raise ValueError(f"endian must be 'little' or 'big', got {endian!r}")


def _check_dtype(predictor: int, dtype: np.dtype) -> None:
    if predictor == 2 and not (dtype.kind in "iu" or dtype in _FLOAT_BITS):
        raise ValueError(f"TIFF predictor 2 needs integer or float samples, got {dtype}")
    if predictor == 3 and dtype.kind != "f":
        raise ValueError(f"TIFF predictor 3 needs floating-point samples, got {dtype}")


#: The unsigned integers whose arithmetic predictor 2 uses on each float type's bits.
_FLOAT_BITS = {np.dtype(f"f{n}"): np.dtype(f"u{n}") for n in (2, 4, 8)}
_FLOAT_BITS.update({t.newbyteorder(">"): u for t, u in list(_FLOAT_BITS.items())})
_FLOAT_BITS.update({t.newbyteorder("<"): u for t, u in list(_FLOAT_BITS.items())})


def _bits(values: np.ndarray) -> np.ndarray:
    """Native-order ``values`` as the integers predictor 2 differences (floats: their
    bits as unsigned integers of the same width, sharing the memory)."""
    unsigned = _FLOAT_BITS.get(values.dtype)
    return values if unsigned is None else values.view(unsigned)


def _stored_bytes_view(values: np.ndarray, endian: str) -> np.ndarray:
    """The stored bytes behind ``values``, viewed as native items of the same shape."""
    stored = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder(_BYTEORDER[endian]))
    return stored.view(values.dtype.newbyteorder("=")).reshape(values.shape)


def _as_stored_values(raw: np.ndarray, endian: str) -> np.ndarray:
    """Native values whose serialisation in ``endian`` order equals ``raw``'s bytes."""
    stored = np.frombuffer(raw.tobytes(), dtype=raw.dtype.newbyteorder(_BYTEORDER[endian]))
    return stored.astype(raw.dtype.newbyteorder("=")).reshape(raw.shape)


def undo_predictor(
    values: np.ndarray, predictor: int, axis: int, endian: str, *, overwrite: bool = False
) -> np.ndarray:
    """Decode one chunk in storage order (used by the codec, the read path and tests).

    ``values`` is left as it is unless ``overwrite``: then, where its memory already
    holds the items in the order the decoder takes and is writable, it is decoded in
    place instead of in a copy (a caller that owns a freshly decoded buffer saves a
    copy of every byte)."""
    import imagecodecs
    _check_dtype(predictor, values.dtype)
    if predictor == 2:
        data = values
        if not (overwrite and _in_place(values) and values.dtype.isnative):
            data = np.array(values, dtype=values.dtype.newbyteorder("="), copy=True)
        integers = _bits(data)
        imagecodecs.delta_decode(integers, axis=axis, out=integers)
        return data
    raw = _stored_bytes_view(values, endian)
    # ``raw`` shares ``values``' memory exactly when no byte swap or copy was needed.
    if not (overwrite and _in_place(values) and np.may_share_memory(raw, values)):
        raw = np.array(raw, copy=True)
    return np.asarray(imagecodecs.floatpred_decode(raw, axis=axis, out=raw))


def _in_place(values: np.ndarray) -> bool:
    return bool(values.flags.writeable and values.flags.c_contiguous)


def apply_predictor(values: np.ndarray, predictor: int, axis: int, endian: str) -> np.ndarray:
    """Encode one chunk in storage order (inverse of :func:`undo_predictor`)."""
    import imagecodecs
    _check_dtype(predictor, values.dtype)
    native = np.array(values, dtype=values.dtype.newbyteorder("="), copy=True)
    if predictor == 2:
        encoded = np.asarray(imagecodecs.delta_encode(_bits(native), axis=axis))
        return encoded.view(native.dtype)
    raw = np.asarray(imagecodecs.floatpred_encode(native, axis=axis))
    return _as_stored_values(raw, endian)


@dataclass(frozen=True)
class TiffPredictorCodec(ArrayArrayCodec):
    """Array->array codec undoing TIFF predictor 2 or 3 along ``axis`` (storage order).

    Predictor 2 (horizontal differencing) is undone on the integers the ``bytes`` codec
    decoded (on the bits of floating-point samples, as libtiff and GDAL difference
    them); predictor 3 (floating point) on the stored byte planes, which the codec
    recovers by serialising the array in ``endian`` order. It sits before the ``bytes``
    codec, so a truncate or crop codec can follow that one directly. JSON form:
    ``{"name": "virtualizarr_fill.tiff_predictor", "configuration": {"predictor": 2,
    "axis": -1, "endian": "little"}}``.

    Parameters
    ----------
    predictor
        The TIFF Predictor tag: 2 (horizontal differencing) or 3 (floating point).
    axis
        The row axis (x) in storage order: -1, or -2 for pixel-interleaved samples (the
        last axis then holds the samples of one pixel, differenced independently).
    endian
        Byte order of the ``bytes`` codec that follows: ``"little"`` (default) or
        ``"big"``.
    """

    is_fixed_size = True

    predictor: int
    axis: int = -1
    endian: Endian = "little"

    def __init__(self, *, predictor: int, axis: int = -1, endian: Endian = "little") -> None:
        _check_config(int(predictor), int(axis), str(endian))
        object.__setattr__(self, "predictor", int(predictor))
        object.__setattr__(self, "axis", int(axis))
        object.__setattr__(self, "endian", endian)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, TIFF_PREDICTOR_CODEC_NAME)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {
            "name": TIFF_PREDICTOR_CODEC_NAME,
            "configuration": {
                "predictor": self.predictor,
                "axis": self.axis,
                "endian": self.endian,
            },
        }

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGridMetadata,
    ) -> None:
        if len(shape) < -self.axis:
            raise ValueError(f"axis {self.axis} does not exist in a {len(shape)}-d array")
        native = np.dtype(dtype.to_native_dtype())
        # zarr also validates every codec against the array's own data type: a complex
        # array reaches predictor 2 as integer words (virtualizarr_fill.complex_int).
        if not (self.predictor == 2 and native.kind == "c"):
            _check_dtype(self.predictor, native)

    def resolve_metadata(self, chunk_spec: ArraySpec) -> ArraySpec:
        return chunk_spec

    def _decode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        values = chunk_array.as_numpy_array()
        decoded = undo_predictor(values, self.predictor, self.axis, self.endian)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(decoded)

    async def _decode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_sync(chunk_array, chunk_spec)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        values = chunk_array.as_numpy_array()
        encoded = apply_predictor(values, self.predictor, self.axis, self.endian)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(encoded)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        return self._encode_sync(chunk_array, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length


__all__ = [
    "TIFF_PREDICTOR_CODEC_NAME",
    "TiffPredictorCodec",
    "apply_predictor",
    "undo_predictor",
]
