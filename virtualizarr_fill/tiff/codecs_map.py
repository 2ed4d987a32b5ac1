"""TIFF Compression, Predictor, FillOrder and JPEG tags mapped to a Zarr v3 codec chain.

The chain is built from codecs that Zarr finds through the ``zarr.codecs`` entry point,
so a reader process that never imports this package decodes the arrays:

* zarr's own ``bytes``, ``transpose`` and ``zstd``, and ``numcodecs.zlib`` (shipped with
  zarr) for Deflate;
* ``imagecodecs_*`` codecs from the ``imagecodecs-zarr`` package for LZW, PackBits, LZMA,
  JPEG, JPEG 2000, JPEG XL, WebP, PNG and LERC;
* this package's ``virtualizarr_fill.tiff_predictor``, ``virtualizarr_fill.tiff_bitorder``
  and ``virtualizarr_fill.complex_int`` where no existing codec does what TIFF needs (see
  those modules).

Image codecs (JPEG, WebP, ...) are array->bytes codecs that decode whole images; like
libtiff and tifffile, predictors and FillOrder are ignored with them.

Predictor (tag 317) is applied only with the compressions whose libtiff codec applies it
(LZW, Deflate, LZMA, Zstd: :data:`PREDICTOR_COMPRESSIONS`). libtiff, and so GDAL,
ignores the tag on uncompressed and PackBits data; tifffile undoes it there, so the two
readers disagree on such files and the parser follows GDAL, as rioxarray reads them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.codecs import BytesCodec, TransposeCodec, ZstdCodec
from zarr.codecs.numcodecs import Zlib

from virtualizarr_fill.codecs.complex_int import ComplexIntCodec, component_type_of
from virtualizarr_fill.codecs.tiff_bitorder import TiffBitorderCodec
from virtualizarr_fill.codecs.tiff_packints import TiffPackintsCodec
from virtualizarr_fill.codecs.tiff_predictor import TiffPredictorCodec
from virtualizarr_fill.errors import UnsupportedFeatureError

if TYPE_CHECKING:
    from tifffile import TiffPage
    from zarr.abc.codec import BaseCodec

    from virtualizarr_fill.tiff.tags import Endian, SegmentLayout

# Compression (tag 259) values.
NONE = 1
LZW = 5
OJPEG = 6
JPEG = 7
ADOBE_DEFLATE = 8
JPEG_DNG = 34892
DEFLATE = 32946
PACKBITS = 32773
LZMA = 34925
ZSTD = 50000
ZSTD_OLD = 34926
WEBP = 50001
WEBP_OLD = 34927
JPEG2000 = frozenset({33003, 33004, 33005, 34712})
JPEGXL = frozenset({50002, 52546})
LERC = 34887
PNG = 34933

JPEG_FAMILY = frozenset({JPEG, JPEG_DNG})
#: Compressions whose libtiff codec applies a Predictor (libtiff's TIFFPredictorInit
#: callers); Zstd's pre-standard code has no libtiff codec, and tifffile applies it.
PREDICTOR_COMPRESSIONS = frozenset({LZW, ADOBE_DEFLATE, DEFLATE, LZMA, ZSTD, ZSTD_OLD})
IMAGE_COMPRESSIONS = JPEG_FAMILY | JPEG2000 | JPEGXL | {WEBP, WEBP_OLD, PNG, LERC}

# GDAL private tags.
ZSTD_LEVEL_TAG = 65564
LERC_PARAMETERS_TAG = 50674

# Photometric values that matter for JPEG colour conversion.
_MINISBLACK, _RGB, _SEPARATED, _YCBCR = 1, 2, 5, 6

_EXACT_ARGUMENT_TYPES = frozenset({str, int, bytes, bool, tuple, type(None)})


def _shared(cls: Any, **arguments: Any) -> Any:
    """``cls(**arguments)``, one instance per distinct class and arguments.

    Codecs are immutable, and the files of an archive use the same few: sharing the
    instances lets :mod:`virtualizarr_fill.zarr_model.metadata_templates` recognise a codec it
    has seen without serializing it again. Arguments are keyed with their types (``1`` and
    ``True`` stay apart); other argument types get a new instance.
    """
    key = []
    for name, value in arguments.items():
        kind = type(value)
        if kind not in _EXACT_ARGUMENT_TYPES:
            return cls(**arguments)
        key.append((name, kind, value))
    return _shared_instance(cls, tuple(key))


@functools.lru_cache(maxsize=256)
def _shared_instance(cls: Any, arguments: tuple[tuple[str, type, Any], ...]) -> Any:
    return cls(**{name: value for name, _, value in arguments})


def _imagecodecs_zarr() -> Any:
    try:
        import imagecodecs.zarr as module
    except ImportError as error:  # pragma: no cover - a declared dependency
        raise UnsupportedFeatureError(
            "TIFF image codecs need the 'imagecodecs-zarr' package"
        ) from error
    return module


@dataclass
class CodecChain:
    """A Zarr v3 codec list split by role, for one TIFF IFD."""

    array_array: list[BaseCodec[Any, Any]] = field(default_factory=list)
    array_bytes: BaseCodec[Any, Any] = field(default_factory=BytesCodec)
    bytes_bytes: list[BaseCodec[Any, Any]] = field(default_factory=list)
    #: The IFD's Compression tag (1: none), which names the decoder of an image codec.
    compression: int = 1

    @property
    def is_image_codec(self) -> bool:
        """Whether an image codec decodes whole segments (no raw bytes to trim)."""
        return not isinstance(self.array_bytes, BytesCodec | TiffPackintsCodec)

    @property
    def packed(self) -> TiffPackintsCodec | None:
        """The packed-sample codec, which itself ignores rows beyond the chunk."""
        return self.array_bytes if isinstance(self.array_bytes, TiffPackintsCodec) else None

    @property
    def is_compressed(self) -> bool:
        return self.is_image_codec or any(
            not isinstance(c, TiffBitorderCodec) for c in self.bytes_bytes
        )

    def codecs(self) -> list[BaseCodec[Any, Any]]:
        return [*self.array_array, self.array_bytes, *self.bytes_bytes]


def transpose_for(layout: SegmentLayout) -> list[BaseCodec[Any, Any]]:
    """``(band, y, x)`` to pixel-interleaved storage ``(y, x, band)``."""
    return [_shared(TransposeCodec, order=(1, 2, 0))] if layout.pixel_interleaved else []


def jpeg_colorspaces(page: TiffPage) -> tuple[str | None, str | None]:
    """JPEG stream and output colour spaces from Photometric, as libtiff/tifffile decode.

    YCbCr is converted to RGB; RGB streams without a JFIF marker are taken as RGB;
    separate planes decode as grayscale; with extra samples the library's guess stands.
    """
    photometric = int(page.photometric)
    jpeg_space: str | None = None
    data_space: str | None = None
    if not page.extrasamples:
        if photometric == _YCBCR:
            data_space = "RGB"
        elif photometric == _RGB:
            if not page.is_jfif:
                jpeg_space = "RGB"
            data_space = "RGB"
        elif photometric == _SEPARATED:
            data_space = "CMYK"
        elif photometric > 3:
            raise UnsupportedFeatureError(f"JPEG with Photometric={photometric}")
    if int(page.planarconfig) != 1:
        data_space = "GRAYSCALE"
    return jpeg_space, data_space


def _jpeg_codec(page: TiffPage, source: str) -> BaseCodec[Any, Any]:
    try:
        jpeg_space, data_space = jpeg_colorspaces(page)
    except UnsupportedFeatureError as error:
        raise UnsupportedFeatureError(f"{source}: {error}") from None
    tables = page.jpegtables
    return _shared(
        _imagecodecs_zarr().Jpeg,
        tables=bytes(tables) if tables else None,
        colorspace_jpeg=jpeg_space,
        colorspace_data=data_space,
    )


def _lerc_codecs(page: TiffPage, source: str) -> tuple[BaseCodec[Any, Any], list[Any]]:
    """LERC, with the Deflate/Zstd layer GDAL may add (LercParameters tag 50674)."""
    tag = page.tags.get(LERC_PARAMETERS_TAG)
    extra = int(tag.value[1]) if tag is not None and len(tag.value) > 1 else 0
    outer: list[Any]
    if extra == 0:
        outer = []
    elif extra == 1:
        outer = [_shared(Zlib)]
    elif extra == 2:
        outer = [_shared(ZstdCodec)]
    else:
        raise UnsupportedFeatureError(f"{source}: LERC with additional compression {extra}")
    return _shared(_imagecodecs_zarr().Lerc), outer


def compression_codecs(
    page: TiffPage, source: str
) -> tuple[BaseCodec[Any, Any] | None, list[BaseCodec[Any, Any]]]:
    """(image array->bytes codec or None, bytes->bytes decompressors) for Compression."""
    compression = int(page.compression)
    module = _imagecodecs_zarr
    if compression == NONE:
        return None, []
    if compression in (ADOBE_DEFLATE, DEFLATE):
        return None, [_shared(Zlib)]
    if compression == LZW:
        return None, [_shared(module().Lzw)]
    if compression == PACKBITS:
        return None, [_shared(module().Packbits)]
    if compression == LZMA:
        return None, [_shared(module().Lzma)]
    if compression in (ZSTD, ZSTD_OLD):
        level = page.tags.get(ZSTD_LEVEL_TAG)
        return None, [_shared(ZstdCodec, level=int(level.value) if level is not None else 0)]
    if compression in JPEG_FAMILY:
        return _jpeg_codec(page, source), []
    if compression == OJPEG:
        raise UnsupportedFeatureError(f"{source}: old-style JPEG (Compression=6)")
    if compression in (WEBP, WEBP_OLD):
        # WebP drops an all-opaque alpha channel; ask the decoder to restore it.
        return _shared(module().Webp, hasalpha=True if int(page.samplesperpixel) == 4 else None), []
    if compression in JPEG2000:
        return _shared(module().Jpeg2k), []
    if compression in JPEGXL:
        return _shared(module().Jpegxl), []
    if compression == PNG:
        return _shared(module().Png), []
    if compression == LERC:
        lerc, outer = _lerc_codecs(page, source)
        return lerc, outer
    raise UnsupportedFeatureError(f"{source}: Compression={compression} is not supported")


def predictor_codec(
    page: TiffPage, layout: SegmentLayout, dtype: np.dtype, endian: Endian, source: str
) -> TiffPredictorCodec | None:
    """Predictor (tag 317) as a codec on the storage-order array, or None (also where
    libtiff ignores the tag: with a compression outside :data:`PREDICTOR_COMPRESSIONS`)."""
    predictor = int(page.predictor)
    if predictor == 1 or int(page.compression) not in PREDICTOR_COMPRESSIONS:
        return None
    if predictor not in (2, 3):
        raise UnsupportedFeatureError(f"{source}: Predictor={predictor} is not supported")
    # libtiff differences floating-point samples as the integers of their bits.
    if predictor == 2 and dtype.kind not in "iuf":
        raise UnsupportedFeatureError(
            f"{source}: horizontal differencing (Predictor=2) on {dtype} samples"
        )
    if predictor == 3 and dtype.kind != "f":
        raise UnsupportedFeatureError(
            f"{source}: floating-point predictor (Predictor=3) on {dtype} samples"
        )
    axis = -2 if layout.pixel_interleaved else -1
    return _shared(TiffPredictorCodec, predictor=predictor, axis=axis, endian=endian)  # type: ignore[no-any-return]


def _complex_int_codec(
    decoded_dtype: np.dtype, endian: Endian, predictor: TiffPredictorCodec | None
) -> ComplexIntCodec:
    """The codec splitting complex-integer words (see its module for ``real_part``:
    libtiff undoes horizontal differencing on whole words, in the machine's order)."""
    differenced = predictor is not None and predictor.predictor == 2
    real_part = "low" if endian == "little" or differenced else "high"
    return _shared(  # type: ignore[no-any-return]
        ComplexIntCodec, component_type=component_type_of(decoded_dtype), real_part=real_part
    )


def is_image_compression(page: TiffPage) -> bool:
    """Whether Compression names a codec that decodes whole images (JPEG, WebP, ...)."""
    return int(page.compression) in IMAGE_COMPRESSIONS


def codec_chain(
    page: TiffPage,
    layout: SegmentLayout,
    dtype: np.dtype,
    endian: Endian,
    source: str,
    *,
    packed_bits: int | None = None,
    decoded_dtype: np.dtype | None = None,
) -> CodecChain:
    """The full codec chain for one IFD, without any edge (truncate/crop) codec.

    ``dtype`` is the type of the stored samples; ``packed_bits`` is the BitsPerSample of
    samples packed below byte size; ``decoded_dtype`` the complex type of
    complex-integer samples, whose stored words ``dtype`` is.
    """
    image_codec, decompressors = compression_codecs(page, source)
    chain = CodecChain(array_array=transpose_for(layout), compression=int(page.compression))
    if image_codec is not None:
        chain.array_bytes = image_codec
        chain.bytes_bytes = decompressors
        if int(page.compression) == LERC and int(page.predictor) != 1:
            raise UnsupportedFeatureError(f"{source}: LERC with Predictor={page.predictor}")
        return chain
    if packed_bits is not None:
        if int(page.predictor) != 1 and int(page.compression) in PREDICTOR_COMPRESSIONS:
            raise UnsupportedFeatureError(
                f"{source}: Predictor={page.predictor} on {packed_bits}-bit packed samples"
            )
        bands, _, cols = layout.chunk_shape
        chain.array_bytes = _shared(
            TiffPackintsCodec, bitspersample=packed_bits, runlen=cols * bands
        )
    else:
        predictor = predictor_codec(page, layout, dtype, endian, source)
        if decoded_dtype is not None and decoded_dtype != dtype:
            chain.array_array.append(_complex_int_codec(decoded_dtype, endian, predictor))
        if predictor is not None:
            chain.array_array.append(predictor)
        chain.array_bytes = _shared(BytesCodec, endian=endian if dtype.itemsize > 1 else None)
    chain.bytes_bytes = list(decompressors)
    if int(page.fillorder) == 2:
        chain.bytes_bytes.append(_shared(TiffBitorderCodec))
    return chain


__all__ = [
    "IMAGE_COMPRESSIONS",
    "PREDICTOR_COMPRESSIONS",
    "CodecChain",
    "codec_chain",
    "is_image_compression",
    "compression_codecs",
    "jpeg_colorspaces",
    "predictor_codec",
    "transpose_for",
]
