"""Chunks stored as plain numbers, decoded by viewing their bytes as an array.

A codec chain of the ``bytes`` codec, transposes before it and, between them, a TIFF
predictor stores each chunk's numbers as they are. Decoding such a chunk through zarr's
buffer objects is most of the per-chunk cost of reading small strips; viewing its bytes
as an array and undoing the predictor and the transposes with NumPy gives the same
values. :class:`RawLayout` describes that view for an array's codec chain; the codec
pipeline builds it once (:meth:`RawLayout.of_chain`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from zarr.codecs.bytes import BytesCodec
from zarr.codecs.transpose import TransposeCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.dtype.common import HasEndianness

from virtualizarr_fill.codecs.tiff_predictor import TiffPredictorCodec, undo_predictor


@dataclasses.dataclass(frozen=True)
class RawLayout:
    """How chunks stored as plain numbers (``bytes`` codec, transposes before it, and a
    TIFF predictor between them) are viewed as arrays. Same result as the codecs: the
    ``bytes`` codec's stored byte order, the predictor undone (native order), then each
    transpose undone."""

    view_dtype: np.dtype[Any]
    aa_codecs: tuple[TransposeCodec, ...]
    inverse_orders: tuple[tuple[int, ...], ...]  # in decode order (last codec first)
    predictor: TiffPredictorCodec | None = None

    @classmethod
    def of_chain(cls, pipeline: BatchedCodecPipeline, array_spec: ArraySpec) -> RawLayout | None:
        """The layout of the chunks of ``array_spec`` that ``pipeline``'s codecs store,
        or None where they are not stored as plain numbers."""
        ab = pipeline.array_bytes_codec
        if type(ab) is not BytesCodec:
            return None
        aa_codecs = pipeline.array_array_codecs
        predictor = None
        if aa_codecs and type(aa_codecs[-1]) is TiffPredictorCodec:
            predictor, aa_codecs = aa_codecs[-1], aa_codecs[:-1]
        if not all(type(c) is TransposeCodec for c in aa_codecs):
            return None
        dtype = array_spec.dtype.to_native_dtype()
        if dtype.kind not in "biufc" or dtype.fields is not None:
            return None
        if isinstance(array_spec.dtype, HasEndianness):
            view = dataclasses.replace(array_spec.dtype, endianness=ab.endian).to_native_dtype()  # type: ignore[call-arg]
        else:
            view = dtype
        aa = tuple(c for c in aa_codecs if isinstance(c, TransposeCodec))
        return cls(view, aa, inverse_orders(aa), predictor)

    @property
    def interleaved(self) -> bool:
        """Whether (band, y, x) chunks are stored pixel-interleaved: (y, x, band)."""
        return self.inverse_orders == ((2, 0, 1),)

    def undo_predictor(
        self, stored: np.ndarray[Any, Any], *, overwrite: bool = False
    ) -> np.ndarray[Any, Any]:
        """``stored`` (one or more chunks' ``bytes``-codec arrays, in :attr:`view_dtype`,
        any axes before a chunk's) with the predictor undone, in native order; ``stored``
        itself without a predictor. The predictor works row by row, so a stack of
        chunks is undone at once. ``overwrite``: ``stored`` is the caller's own buffer,
        which may be decoded in place."""
        codec = self.predictor
        if codec is None:
            return stored
        return undo_predictor(
            stored, codec.predictor, codec.axis, codec.endian, overwrite=overwrite
        )

    def stored_shape(self, spec: ArraySpec) -> tuple[int, ...]:
        """The shape of a chunk of ``spec`` as the ``bytes`` codec stores it: permuted
        by each transpose in turn, as ``TransposeCodec.resolve_metadata`` does (without
        building a spec per codec, which costs more than the read of a small chunk)."""
        shape = tuple(spec.shape)
        for codec in self.aa_codecs:
            shape = tuple(shape[axis] for axis in codec.order)
        return shape

    def untransposed(self, blocks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A stack of chunks in stored order (first axis: the chunk) with the transposes
        undone, as a view."""
        for order in self.inverse_orders:
            blocks = blocks.transpose((0, *(1 + o for o in order)))
        return blocks

    def rows_whole(self, spec: ArraySpec, short: dict[int, ArraySpec]) -> bool:
        """Whether every chunk in ``short`` has whole predictor rows of a chunk of
        ``spec`` (is shorter only in axes before the predictor's row axis): then, padded
        at the end to a whole chunk, its rows undo as a whole chunk's would."""
        if self.predictor is None or not short:
            return True
        axis = self.predictor.axis
        whole = self.stored_shape(spec)[axis:]
        return all(self.stored_shape(own)[axis:] == whole for own in short.values())


def inverse_orders(transposes: Sequence[TransposeCodec]) -> tuple[tuple[int, ...], ...]:
    """The axis orders undoing ``transposes``, in decode order (last codec first).
    Inverted in Python: for a few axes ``np.argsort``'s call costs more than the work."""
    return tuple(_inverse_permutation(c.order) for c in reversed(transposes))


def _inverse_permutation(order: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(order)
    for position, axis in enumerate(order):
        inverse[axis] = position
    return tuple(inverse)


__all__ = ["RawLayout", "inverse_orders"]
