"""Complex numbers stored as pairs of integers, as a Zarr v3 array->array codec.

Zarr has no complex-integer data type. TIFF files with SampleFormat=5 (GDAL's ``CInt16``
and ``CInt32``, the samples of Sentinel-1 SLC products and many SAR images) store each
sample as two signed integers, real part then imaginary part. This codec exposes them as
``complex64`` (16-bit parts) or ``complex128`` (32-bit parts), which hold every such
value exactly.

Encoded, a chunk is an array of the same shape of unsigned integer *words*, ``uint32``
for 16-bit parts and ``uint64`` for 32-bit parts: one word per complex sample, whose low
and high halves are the two parts, each a two's complement signed integer. The
``bytes`` codec that follows reads the words in the file's byte order, and a TIFF
predictor may sit between them: libtiff differences such samples as whole words
(BitsPerSample is 32 or 64), so the predictor works on the words too.

Which half is the real part (``real_part``) follows from where the words came from:

* without a predictor, TIFF stores the real part first: in a little-endian file it is
  the low half of the word, in a big-endian file the high half;
* with horizontal differencing (Predictor=2), libtiff undoes the difference on whole
  words in the machine's byte order and skips the swap of the two halves it otherwise
  makes, so the real part is the low half in either file byte order (on the
  little-endian machines that write and read these files; rasterio reads them so).

The specification for other implementations is ``docs/codecs/complex_int.md``.

JSON form: ``{"name": "virtualizarr_fill.complex_int", "configuration":
{"component_type": "int16"|"int32", "real_part": "low"|"high"}}``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from zarr.abc.codec import ArrayArrayCodec
from zarr.core.common import JSON, parse_named_configuration
from zarr.core.dtype import parse_dtype

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.metadata.v3 import ChunkGridMetadata

COMPLEX_INT_CODEC_NAME = "virtualizarr_fill.complex_int"

ComponentType = Literal["int16", "int32"]
RealPart = Literal["low", "high"]

#: The decoded complex type and the encoded word type of each component type.
_TYPES: dict[str, tuple[np.dtype[Any], np.dtype[Any]]] = {
    "int16": (np.dtype(np.complex64), np.dtype(np.uint32)),
    "int32": (np.dtype(np.complex128), np.dtype(np.uint64)),
}
#: In a native word viewed as two native integers, the position of the low half.
_LOW = 0 if sys.byteorder == "little" else 1


def component_type_of(dtype: np.dtype[Any]) -> ComponentType:
    """The component type whose complex type is ``dtype`` (complex64 or complex128)."""
    for name, (complex_type, _) in _TYPES.items():
        if np.dtype(dtype) == complex_type:
            return name  # type: ignore[return-value]
    raise ValueError(
        f"{COMPLEX_INT_CODEC_NAME} decodes to complex64 or complex128, not {np.dtype(dtype)}"
    )


def _check_config(component_type: str, real_part: str) -> None:
    if component_type not in _TYPES:
        raise ValueError(f"component_type must be 'int16' or 'int32', got {component_type!r}")
    if real_part not in ("low", "high"):
        raise ValueError(f"real_part must be 'low' or 'high', got {real_part!r}")


def words_to_complex(words: np.ndarray, component_type: str, real_part: str) -> np.ndarray:
    """Decode: one complex value per word (see the module docstring)."""
    complex_type, word_type = _TYPES[component_type]
    native = np.ascontiguousarray(words, dtype=word_type)
    parts = native.view(f"i{word_type.itemsize // 2}").reshape(*native.shape, 2)
    real = _LOW if real_part == "low" else 1 - _LOW
    out = np.empty(native.shape, dtype=complex_type)
    out.real = parts[..., real]
    out.imag = parts[..., 1 - real]
    return out


def complex_to_words(values: np.ndarray, component_type: str, real_part: str) -> np.ndarray:
    """Encode: the words of complex values whose parts are integers of ``component_type``;
    raises ValueError for any other value (the encoding would lose it)."""
    complex_type, word_type = _TYPES[component_type]
    values = np.asarray(values, dtype=complex_type)
    part_type = np.dtype(f"i{word_type.itemsize // 2}")
    info = np.iinfo(part_type)
    parts = np.stack([values.real, values.imag], axis=-1)
    exact = np.isfinite(parts) & (parts == np.round(parts))
    if not (exact.all() and (parts >= info.min).all() and (parts <= info.max).all()):
        raise ValueError(
            f"{COMPLEX_INT_CODEC_NAME}: values whose parts are not {component_type} integers"
        )
    real = _LOW if real_part == "low" else 1 - _LOW
    words = np.empty((*values.shape, 2), dtype=part_type)
    words[..., real] = parts[..., 0]
    words[..., 1 - real] = parts[..., 1]
    return words.view(word_type).reshape(values.shape)


@dataclass(frozen=True)
class ComplexIntCodec(ArrayArrayCodec):
    """Array->array codec between complex values and words holding integer part pairs.

    Zarr has no complex-integer data type: TIFF samples with SampleFormat=5 (GDAL's
    CInt16 and CInt32) are exposed as ``complex64`` and ``complex128``. Encoded, a chunk
    is an array of unsigned words (``uint32`` for 16-bit parts, ``uint64`` for 32-bit
    parts), one per sample, whose halves are the two parts (two's complement). The
    specification for other implementations is on the site's *complex_int* page. JSON
    form: ``{"name": "virtualizarr_fill.complex_int", "configuration":
    {"component_type": "int16", "real_part": "low"}}``.

    Parameters
    ----------
    component_type
        Integer type of each part: ``"int16"`` (values are ``complex64``) or ``"int32"``
        (values are ``complex128``).
    real_part
        Which half of each word holds the real part: ``"low"`` (little-endian files, and
        files of either byte order with Predictor=2) or ``"high"`` (big-endian files
        without a predictor).
    """

    is_fixed_size = True

    component_type: ComponentType
    real_part: RealPart = "low"

    def __init__(self, *, component_type: ComponentType, real_part: RealPart = "low") -> None:
        _check_config(str(component_type), str(real_part))
        object.__setattr__(self, "component_type", component_type)
        object.__setattr__(self, "real_part", real_part)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, COMPLEX_INT_CODEC_NAME)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {
            "name": COMPLEX_INT_CODEC_NAME,
            "configuration": {"component_type": self.component_type, "real_part": self.real_part},
        }

    @property
    def complex_type(self) -> np.dtype[Any]:
        """The data type of the decoded array."""
        return _TYPES[self.component_type][0]

    @property
    def word_type(self) -> np.dtype[Any]:
        """The data type of the encoded array."""
        return _TYPES[self.component_type][1]

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGridMetadata,
    ) -> None:
        native = np.dtype(dtype.to_native_dtype())
        if native.newbyteorder("=") != self.complex_type:
            raise ValueError(
                f"{COMPLEX_INT_CODEC_NAME} with {self.component_type} parts decodes to "
                f"{self.complex_type}, not {native}"
            )

    def resolve_metadata(self, chunk_spec: ArraySpec) -> ArraySpec:
        fill = chunk_spec.fill_value
        try:
            encoded_fill = complex_to_words(np.array(fill), self.component_type, self.real_part)
        except (TypeError, ValueError):
            # A fill value no pair of integers holds never reaches the stored words.
            encoded_fill = np.zeros((), dtype=self.word_type)
        return replace(
            chunk_spec,
            dtype=parse_dtype(self.word_type, zarr_format=3),
            fill_value=self.word_type.type(encoded_fill[()]),
        )

    def _decode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        words = chunk_array.as_numpy_array()
        decoded = words_to_complex(words, self.component_type, self.real_part)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(decoded)

    async def _decode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_sync(chunk_array, chunk_spec)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        values = chunk_array.as_numpy_array()
        encoded = complex_to_words(values, self.component_type, self.real_part)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(encoded)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        return self._encode_sync(chunk_array, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length // 2


__all__ = [
    "COMPLEX_INT_CODEC_NAME",
    "ComplexIntCodec",
    "complex_to_words",
    "component_type_of",
    "words_to_complex",
]
