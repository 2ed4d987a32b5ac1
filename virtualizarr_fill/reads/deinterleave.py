"""Pixel-interleaved samples copied into band planes: ``dest[...] = source`` where
``source`` is a ``(band, y, x)`` view of ``(y, x, band)`` memory.

That copy is what an uncompressed pixel-interleaved TIFF costs on top of reading it
(the dataset is band-first, as rioxarray's). NumPy's strided copy moves one sample at a
time, which for an RGB image of bytes takes longer than reading the file. OpenCV's
``cv2.split`` moves whole vectors, several times quicker; it is used when installed
(``pip install "virtualizarr-fill[fast]"``, part of the test extra) and NumPy copies
otherwise. Both are bit copies, so samples are split by their size alone, whatever
their type or byte order.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

#: OpenCV's element types used to move samples of each size (bit copies).
_SPLIT_TYPES: dict[int, type[np.generic]] = {1: np.uint8, 2: np.uint16, 4: np.int32}
#: Most channels an OpenCV matrix holds (``CV_CN_MAX``).
_MAX_BANDS = 512


@functools.cache
def _opencv() -> Any | None:
    """The ``cv2`` module, or None where OpenCV is not installed."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def copy_planes(dest: np.ndarray, source: np.ndarray) -> bool:
    """``dest[...] = source``: by OpenCV's channel split where ``source`` is a
    ``(band, y, x)`` view of pixel-interleaved rows of at least :data:`SPLIT_MIN_BYTES`
    (see the module docstring), else by NumPy. True when OpenCV split it.

    OpenCV writes planes with gaps between their rows (a tile's place in a larger
    output) more slowly than NumPy copies them: those are split into a new band-first
    array first, whose planes NumPy then copies row by row (quicker for a 512x512 RGB
    tile than NumPy's copy from the interleaved samples)."""
    if _splittable(dest, source):
        if _planes_contiguous(dest):
            if _split(source, dest):
                return True
        else:
            planes = np.empty(source.shape, dtype=source.dtype)
            if _split(source, planes):
                dest[...] = planes
                return True
    dest[...] = source
    return False


#: Fewest bytes split by OpenCV. A call has a fixed cost as large as NumPy's copy of
#: 32 KiB; into planes with gaps it gains little below 128 KiB (a 128x128 RGB tile),
#: which reads of small tiles did not show.
SPLIT_MIN_BYTES = 128 << 10


def _splittable(dest: np.ndarray, source: np.ndarray) -> bool:
    """Whether OpenCV is installed and ``source`` is laid out for its split into an
    array of ``dest``'s shape and type. The cheapest tests come first: most calls are
    for tiles too small to split, and these checks run once per chunk."""
    if source.nbytes < SPLIT_MIN_BYTES or source.ndim != 3 or _opencv() is None:
        return False
    if dest.shape != source.shape or dest.dtype != source.dtype:
        return False
    bands, item = source.shape[0], source.dtype.itemsize
    if item not in _SPLIT_TYPES or not 2 <= bands <= _MAX_BANDS or source.dtype.hasobject:
        return False
    band, rows, samples = source.strides
    return band == item and samples == bands * item and rows > 0


def _planes_contiguous(dest: np.ndarray) -> bool:
    """Whether each band of ``dest`` (band, y, x) is one C-contiguous plane."""
    _, rows, width = dest.shape
    _, row_stride, sample_stride = dest.strides
    item = dest.itemsize
    return (width == 1 or sample_stride == item) and (rows == 1 or row_stride == width * item)


def _split(source: np.ndarray, dest: np.ndarray) -> bool:
    """``cv2.split`` of ``source`` (:func:`_splittable`) into the contiguous planes of
    ``dest``; False, ``dest`` untouched, where OpenCV would not write into them."""
    cv2 = _opencv()
    assert cv2 is not None  # _splittable checked
    split_type = _SPLIT_TYPES[source.dtype.itemsize]
    pixels = source.transpose(1, 2, 0)
    if dest.dtype != split_type:  # a bit copy: OpenCV moves samples of the same size
        dest, pixels = dest.view(split_type), pixels.view(split_type)
    targets = list(dest)
    written = cv2.split(pixels, targets)
    # cv2 allocates new planes, leaving ``dest`` as it was, for any it cannot write into.
    return len(written) == len(targets) and all(map(operator.is_, written, targets))


__all__ = ["SPLIT_MIN_BYTES", "copy_planes"]
