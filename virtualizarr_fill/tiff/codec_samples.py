"""Which samples each TIFF image codec can produce, checked against the IFD's header.

An image codec (JPEG, WebP, PNG, JPEG 2000, JPEG XL, LERC) decodes a whole segment into
samples of the type its stream holds, whatever BitsPerSample and SampleFormat say. A
header that claims samples the codec cannot produce (WebP with BitsPerSample 1, JPEG with
16-bit samples) is damaged: tifffile and GDAL then disagree with each other (tifffile
reinterprets the decoded bytes, GDAL fails or returns zeros), so the IFD is refused at
parse time instead of being read one way or the other.

The table follows the decoders that read these files: libtiff's codecs as GDAL builds
them (JPEG 8 and 12 bits; WebP 8-bit RGB or RGBA; LERC) and, for codecs libtiff lacks
(PNG, JPEG 2000), the imagecodecs decoders tifffile uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.tiff import codecs_map

if TYPE_CHECKING:
    from tifffile import TiffPage

    from virtualizarr_fill.tiff.tags import SampleType

# SampleFormat (339) values.
_UINT, _INT, _FLOAT, _COMPLEX = 1, 2, 3, 6
_FORMAT_NAMES = {
    _UINT: "unsigned integer",
    _INT: "signed integer",
    _FLOAT: "floating-point",
    _COMPLEX: "complex",
}
_FORMAT_OF_KIND = {"u": _UINT, "i": _INT, "f": _FLOAT, "c": _COMPLEX}


@dataclass(frozen=True)
class CodecSamples:
    """What one image codec decodes to: (SampleFormat, BitsPerSample) pairs, and the
    samples per pixel of one segment (None: any)."""

    name: str
    types: frozenset[tuple[int, int]]
    samples: frozenset[int] | None = None

    def describe(self) -> str:
        """E.g. ``8- or 12-bit unsigned integer``, with the sample counts if limited."""
        parts = []
        for fmt in sorted({fmt for fmt, _ in self.types}):
            bits = sorted(b for f, b in self.types if f == fmt)
            parts.append(f"{_widths(bits)} {_FORMAT_NAMES[fmt]}")
        types = ", ".join(parts)
        if self.samples is None:
            return types
        counts = ", ".join(str(n) for n in sorted(self.samples))
        return f"{types}, {counts} samples per pixel"


def _widths(bits: list[int]) -> str:
    """``8- or 12-bit``, or ``1- to 16-bit`` for a run of widths."""
    if len(bits) > 2 and bits == list(range(bits[0], bits[-1] + 1)):
        return f"{bits[0]}- to {bits[-1]}-bit"
    return (
        " or ".join(f"{b}-" for b in bits[:-1])
        + (" or " if len(bits) > 1 else "")
        + (f"{bits[-1]}-bit")
    )


def _pairs(sampleformat: int, *bits: int) -> set[tuple[int, int]]:
    return {(sampleformat, b) for b in bits}


_JPEG = CodecSamples("JPEG", frozenset(_pairs(_UINT, 8, 12)))
# libtiff's WebP codec (and GDAL's) takes 8-bit RGB or RGBA only; imagecodecs'
# decoder always returns 3 or 4 samples.
_WEBP = CodecSamples("WebP", frozenset(_pairs(_UINT, 8)), frozenset({3, 4}))
_PNG = CodecSamples("PNG", frozenset(_pairs(_UINT, 8, 16)), frozenset({1, 2, 3, 4}))
_JPEG2000 = CodecSamples("JPEG 2000", frozenset(_pairs(_UINT, *range(1, 17)) | _pairs(_INT, 8, 16)))
_JPEGXL = CodecSamples("JPEG XL", frozenset(_pairs(_UINT, 8, 16) | _pairs(_FLOAT, 16, 32)))
_LERC = CodecSamples(
    "LERC", frozenset(_pairs(_UINT, 8, 16, 32) | _pairs(_INT, 8, 16, 32) | _pairs(_FLOAT, 32, 64))
)

CODEC_SAMPLES: dict[int, CodecSamples] = {
    **{code: _JPEG for code in codecs_map.JPEG_FAMILY},
    codecs_map.WEBP: _WEBP,
    codecs_map.WEBP_OLD: _WEBP,
    codecs_map.PNG: _PNG,
    **{code: _JPEG2000 for code in codecs_map.JPEG2000},
    **{code: _JPEGXL for code in codecs_map.JPEGXL},
    codecs_map.LERC: _LERC,
}


def check_codec_samples(page: TiffPage, sample: SampleType, source: str) -> None:
    """Refuse an IFD whose image codec cannot produce its stated samples.

    ``sample`` is what BitsPerSample and SampleFormat say (:func:`.tags.sample_type`);
    ``source`` names the file and image in the message.
    """
    codec = CODEC_SAMPLES.get(int(page.compression))
    if codec is None:
        return
    bits, sampleformat = sample.bits, _FORMAT_OF_KIND[sample.dtype.kind]
    samples = int(page.samplesperpixel) if int(page.planarconfig) == 1 else 1
    type_ok = (sampleformat, bits) in codec.types
    samples_ok = codec.samples is None or samples in codec.samples
    if type_ok and samples_ok:
        return
    claimed = f"{bits}-bit {_FORMAT_NAMES[sampleformat]}"
    raise UnsupportedFeatureError(
        f"{source}: the header claims {claimed} samples, {samples} per pixel, but "
        f"{codec.name} (Compression={int(page.compression)}) decodes to "
        f"{codec.describe()} (a damaged header?)"
    )


__all__ = ["CODEC_SAMPLES", "CodecSamples", "check_codec_samples"]
