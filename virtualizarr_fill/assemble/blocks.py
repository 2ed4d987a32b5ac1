"""Many files' arrays concatenated a block at a time.

Concatenating the arrays of 100,000 files at once needs every one of them alive
together: each file's manifest array, built again from the collector's columns
(:class:`~.part_table.PartTable`), costs more than its chunk references. Concatenated
:data:`BLOCK` at a time, from an iterator, only one block's arrays are alive, next to the
blocks already joined (each one array of a block's references); the blocks are then
concatenated in turn. Concatenation is associative (the chunk edges, codecs and fill
values of a concatenation of concatenations are those of one concatenation of all), so
the result is the one ``np.concatenate`` of every array gives.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from virtualizarr.manifests import ManifestArray

__all__ = ["BLOCK", "concatenated"]

#: Arrays concatenated in one call.
BLOCK = 4096


def _joined(arrays: list[ManifestArray], axis: int) -> ManifestArray:
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays, axis=axis)  # type: ignore[arg-type, return-value]


def concatenated(arrays: Iterable[ManifestArray], axis: int, block: int = BLOCK) -> ManifestArray:
    """``arrays`` concatenated along ``axis``, taking at most ``block`` of them from the
    iterator before joining them (a single array is returned as it is).

    Raises
    ------
    ValueError
        ``arrays`` is empty.
    """
    if block < 2:
        raise ValueError(f"block must be at least 2, not {block}")
    joined: list[ManifestArray] = []
    pending: list[ManifestArray] = []
    for array in arrays:
        pending.append(array)
        if len(pending) == block:
            joined.append(_joined(pending, axis))
            pending = []
    if pending:
        joined.append(_joined(pending, axis))
    if not joined:
        raise ValueError("nothing to concatenate")
    if len(joined) > block:
        return concatenated(joined, axis, block)
    return _joined(joined, axis)
