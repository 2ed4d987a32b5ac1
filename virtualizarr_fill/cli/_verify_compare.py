"""Comparing one variable of one file with the store, block by block: the native
reader's block (aligned to the file's strips, tiles or chunks, at most
:data:`VERIFY_BLOCK_BYTES`) against the same elements of the store, where the file's
placement puts them; in a mosaic whose overlaps take one tile, only the elements the
store reads from the file (:attr:`~._verify_placement.Placement.owned`).

Values are equal when they are the same number (NaN equal to NaN, NaT to NaT), the same
date, or the same text (bytes decoded as UTF-8). Floating-point values decoded at
different precisions (the store's ``scale_factor`` decoded to float64, rioxarray's to
float32) are compared at the lower precision, within four units in its last place of the
block's largest value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from virtualizarr_fill.cli._native import NativeVariable
from virtualizarr_fill.cli._verify_placement import Placement

__all__ = [
    "VERIFY_BLOCK_BYTES",
    "Comparison",
    "blocks",
    "compare",
    "decoding_difference",
    "differences",
    "owned_mask",
    "packed_in_float32",
]

#: Largest native block ``verify`` reads at once.
VERIFY_BLOCK_BYTES = 32 * 1024 * 1024


@dataclass
class Comparison:
    """The outcome of comparing one variable of one file."""

    values: int = 0
    mismatched: int = 0
    first: str = ""
    #: A difference other than of values (shapes, dimensions), or ``None``.
    problem: str | None = None
    #: Why the comparison could not be made (``None``: it was).
    unverified: str | None = None

    @property
    def equal(self) -> bool:
        return self.problem is None and self.unverified is None and self.mismatched == 0


def blocks(
    shape: tuple[int, ...], itemsize: int, align: tuple[int, ...], limit: int = VERIFY_BLOCK_BYTES
) -> Iterator[tuple[slice, ...]]:
    """Selections covering ``shape`` in blocks of at most ``limit`` bytes (a single row
    of the last axes may exceed it), cut at multiples of ``align`` along the leading axes."""
    if any(n == 0 for n in shape):
        return
    steps = list(shape)
    for axis in range(len(shape)):
        if itemsize * math.prod(steps) <= limit:
            break
        rest = itemsize * math.prod(steps[axis + 1 :])
        unit = max(1, min(int(align[axis]) if axis < len(align) else 1, shape[axis]))
        fits = max(1, limit // max(rest, 1))
        steps[axis] = min(shape[axis], max(unit, fits // unit * unit))
    ranges = [range(0, n, step) for n, step in zip(shape, steps, strict=True)]
    for starts in itertools.product(*ranges):
        yield tuple(
            slice(start, min(start + step, n))
            for start, step, n in zip(starts, steps, shape, strict=True)
        )


def _text(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "S":
        return np.char.decode(values, "utf-8", "replace")
    if values.dtype.kind == "O" and values.size:
        return np.vectorize(
            lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else v,
            otypes=[object],
        )(values)
    return values


def differences(stored: np.ndarray, native: np.ndarray) -> np.ndarray:
    """Boolean mask of the elements that differ (see the module docstring)."""
    stored, native = _text(np.asarray(stored)), _text(np.asarray(native))
    kinds = {stored.dtype.kind, native.dtype.kind}
    if kinds & {"M", "m"}:
        if len(kinds) > 1:  # a decoded time against a number
            return np.ones(np.broadcast_shapes(stored.shape, native.shape), dtype=bool)
        return np.asarray((stored != native) & ~(np.isnat(stored) & np.isnat(native)))
    if not kinds <= set("biufc") or not kinds & set("fc"):  # text, objects, integers
        return np.asarray(stored != native)
    both_nan = np.isnan(stored) & np.isnan(native)
    if stored.dtype == native.dtype or len(kinds) > 1:
        return np.asarray((stored != native) & ~both_nan)
    # the same kind of floating-point number at two precisions
    narrow = min(stored.dtype, native.dtype, key=lambda d: d.itemsize)
    a, b = stored.astype(narrow), native.astype(narrow)
    finite = np.abs(b[np.isfinite(b)])
    scale = float(finite.max()) if finite.size else 0.0
    tolerance = 4 * float(np.finfo(narrow).eps) * scale
    with np.errstate(invalid="ignore"):
        close = (a == b) | (np.abs(a - b) <= tolerance)
    return np.asarray(~close & ~both_nan)


def _scalar(value: Any) -> str:
    item = np.asarray(value)
    if item.dtype.kind in "Mm":
        return str(item)
    return repr(item.tolist())


def _store_selection(
    store_dims: tuple[str, ...],
    native_dims: tuple[str, ...],
    placement: Placement,
    block: tuple[slice, ...],
) -> tuple[slice | int, ...]:
    by_dim = dict(zip(native_dims, block, strict=True))
    selection: list[slice | int] = []
    for dim in store_dims:
        if dim in by_dim:
            offset = placement.offsets.get(dim, 0)
            part = by_dim[dim]
            selection.append(slice(part.start + offset, part.stop + offset))
        elif dim in placement.indices:
            selection.append(placement.indices[dim])
        else:  # a dimension of length one the native reader leaves out (a scene's time)
            selection.append(placement.offsets.get(dim, 0))
    return tuple(selection)


def owned_mask(
    dims: tuple[str, ...], block: tuple[slice, ...], placement: Placement
) -> np.ndarray | None:
    """Which elements of the native ``block`` (over ``dims``) the store reads from the
    file (see :attr:`Placement.owned`), broadcastable to the block; ``None``: all."""
    if placement.owned is None or "y" not in dims or "x" not in dims:
        return None
    rows, cols = block[dims.index("y")], block[dims.index("x")]
    mask = np.zeros((rows.stop - rows.start, cols.stop - cols.start), dtype=bool)
    for r0, r1, c0, c1 in placement.owned:
        a, b = max(r0, rows.start), min(r1, rows.stop)
        c, d = max(c0, cols.start), min(c1, cols.stop)
        if a < b and c < d:
            mask[a - rows.start : b - rows.start, c - cols.start : d - cols.start] = True
    if dims.index("y") > dims.index("x"):
        mask = mask.T
    shape = [1] * len(dims)
    shape[dims.index("y")], shape[dims.index("x")] = rows.stop - rows.start, cols.stop - cols.start
    return mask.reshape(shape)


def compare(
    native: NativeVariable, stored: Any, placement: Placement, tolerance: float = 0.0
) -> Comparison:
    """Compare a native variable with the store's (an xarray Variable read lazily);
    numbers within ``tolerance`` are equal (a mosaic's snapped x and y)."""
    result = Comparison()
    store_dims = tuple(str(d) for d in stored.dims)
    extra = [d for d in native.dims if d not in store_dims]
    if extra:
        result.problem = (
            f"the native reader's dimensions {native.dims} are not the store's {store_dims}"
        )
        return result
    # the native block's axes in the order of the store's
    order = [native.dims.index(d) for d in store_dims if d in native.dims]
    sizes = dict(zip(store_dims, stored.shape, strict=True))
    for dim, length in zip(native.dims, native.shape, strict=True):
        needed = placement.offsets.get(dim, 0) + length
        if needed > sizes[dim]:
            result.problem = f"the store has {sizes[dim]} values along {dim!r}, the file {needed}"
            return result
    for block in blocks(native.shape, native.itemsize, native.block):
        owned = owned_mask(native.dims, block, placement)
        if owned is not None and not owned.any():
            continue  # the store reads all of this block from other tiles
        where = _store_selection(store_dims, native.dims, placement, block)
        # the store first: where a damaged file fails both, its error names the chunk
        ours = np.asarray(stored[where].values)
        theirs = np.transpose(native.read(block), order)
        if ours.shape != theirs.shape:
            result.problem = f"block {where}: store shape {ours.shape}, native {theirs.shape}"
            return result
        different = differences(ours, theirs)
        if tolerance:
            different &= ~(np.abs(ours.astype(np.float64) - theirs) <= tolerance)
        if owned is None:
            result.values += theirs.size
        else:
            owned = np.broadcast_to(np.transpose(owned, order), theirs.shape)
            different &= owned
            result.values += int(np.count_nonzero(owned))
        count = int(np.count_nonzero(different))
        if count and not result.first:
            local = iter(int(i) for i in np.argwhere(different)[0])
            position = tuple(w if isinstance(w, int) else w.start + next(local) for w in where)
            at = tuple(int(i) for i in np.argwhere(different)[0])
            result.first = (
                f"first at {position}: store {_scalar(ours[at])}, native {_scalar(theirs[at])}"
            )
        result.mismatched += count
    return result


_PACKING = ("scale_factor", "add_offset")


def packed_in_float32(encoding: Mapping[str, Any], decoded: Any) -> bool:
    """Whether the file packs a time variable with a float32 scale or offset."""
    if np.dtype(decoded.dtype).kind not in "Mm":
        return False
    return any(np.asarray(encoding[k]).dtype == np.float32 for k in _PACKING if k in encoding)


def decoding_difference(file: Mapping[str, Any], store: Mapping[str, Any]) -> str | None:
    """How the store's encoding of a packed variable differs from the file's (the scale
    and offset compared at the file's precision), or ``None``."""
    for key in _PACKING:
        theirs, ours = file.get(key), store.get(key)
        if theirs is None and ours is None:
            continue
        if theirs is None or ours is None or np.asarray(theirs).dtype.type(ours) != theirs:
            return f"its {key} is {ours} in the store, {theirs} in the file"
    if file.get("units") != store.get("units"):
        return (
            f"its units are {store.get('units')!r} in the store, {file.get('units')!r} in the file"
        )
    return None
