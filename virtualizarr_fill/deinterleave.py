"""Pixel-interleaved samples copied into band planes: ``dest[...] = source`` where
``source`` is a ``(band, y, x)`` view of ``(y, x, band)`` memory.

That copy is what an uncompressed pixel-interleaved TIFF costs on top of reading it
(the dataset is band-first, as rioxarray's). NumPy's strided copy moves one sample at a
time: 0.75 ms for a 791x718 RGB image of bytes, more than reading the file. OpenCV's
``cv2.split`` moves whole vectors (0.1 ms for the same image); it is used when installed
(``pip install "virtualizarr-fill[fast]"``, part of the test extra) and NumPy copies
otherwise. Both are bit copies, so samples are split by their size alone, whatever
their type or byte order.
"""

from __future__ import annotations

import functools
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
    ``(band, y, x)`` view of pixel-interleaved rows and every band of ``dest`` is one
    contiguous plane (see the module docstring), else by NumPy. True when OpenCV
    split it."""
    if split_planes(dest, source):
        return True
    dest[...] = source
    return False


def split_planes(dest: np.ndarray, source: np.ndarray) -> bool:
    """Copy ``source`` into ``dest`` with ``cv2.split`` and return True, or return False
    (nothing written) where OpenCV is missing or the arrays are not laid out for it."""
    cv2 = _opencv()
    if cv2 is None or source.ndim != 3 or dest.shape != source.shape:
        return False
    if dest.dtype != source.dtype or source.dtype.hasobject:
        return False
    bands, item = source.shape[0], source.dtype.itemsize
    split_type = _SPLIT_TYPES.get(item)
    if split_type is None or not 2 <= bands <= _MAX_BANDS or 0 in source.shape:
        return False
    pixels = source.transpose(1, 2, 0)
    if pixels.strides[2] != item or pixels.strides[1] != bands * item or pixels.strides[0] <= 0:
        return False
    planes = [dest[band] for band in range(bands)]
    if not all(plane.flags.c_contiguous for plane in planes):
        return False
    targets = [plane.view(split_type) for plane in planes]
    written = cv2.split(pixels.view(split_type), targets)
    # cv2 allocates new planes, leaving ``dest`` as it was, for any it cannot write into.
    return len(written) == bands and all(w is t for w, t in zip(written, targets, strict=True))


__all__ = ["copy_planes", "split_planes"]
