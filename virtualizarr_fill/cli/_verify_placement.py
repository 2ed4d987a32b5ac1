"""Where one file lies in the store ``verify`` checks, found from the file's own
coordinates rather than from the order the files are given in.

Along each dimension of the file's variables:

* where the file and the store have a 1-D coordinate, the file's values must appear as
  one contiguous run of the store's (a series along ``time``, the rows and columns of a
  mosaic tile, a coordinate shared by every file): the run's start is the file's offset;
* where neither has one and the lengths are equal, the file spans the store;
* where the store is longer and there is no coordinate (a series along an HDF5 phony
  dimension), the files follow each other in the order they were combined: the offset
  is the length of the files before this one;
* a dimension of the store the file does not have is the one files were stacked along:
  the file's index in the order they were combined.

The order files were combined in is the order an Icechunk repository's commits list
them (``build`` records it), else the order the files are given to ``verify``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from virtualizarr_fill.cli._errors import EXIT_USAGE, CliError
from virtualizarr_fill.cli._inputs import display

__all__ = [
    "SNAPPED_FRACTION",
    "CombinedOrder",
    "Misplaced",
    "Placement",
    "SizesOf",
    "locate_run",
    "place",
    "store_sizes",
]


#: The dimension lengths of a file the store was built from, or ``None`` when unknown.
type SizesOf = Callable[[str], Mapping[str, int] | None]


class Misplaced(Exception):
    """The file is not where its coordinates (or the build's order) say: a mismatch."""


@dataclass(frozen=True)
class Placement:
    """Where one file lies in a dataset of the store."""

    #: The store index of the file's first element, along each of the file's dimensions.
    offsets: dict[str, int] = field(default_factory=dict)
    #: The store index along each dimension the file does not have (stacked files).
    indices: dict[str, int] = field(default_factory=dict)
    #: The windows ``(row start, row stop, column start, column stop)``, in the file's
    #: own pixels, that the store reads from this file: in a mosaic whose overlaps take
    #: one tile (``--overlap``), the parts it wins; ``None``: all of it.
    owned: tuple[tuple[int, int, int, int], ...] | None = None


@dataclass(frozen=True)
class CombinedOrder:
    """The order the files were combined in, and where it comes from."""

    urls: list[str]
    #: Whether the store recorded it (an Icechunk repository's commits) rather than the
    #: order the files were given in.
    recorded: bool

    def position(self, url: str) -> int | None:
        try:
            return self.urls.index(url)
        except ValueError:
            return None


#: The fraction of a pixel within which a mosaic tile's x and y match the store's: the
#: build snaps tiles less than half a pixel off the mosaic's grid onto it.
SNAPPED_FRACTION = 0.499


def _spacing(values: np.ndarray) -> float:
    if values.size < 2:
        return 0.0
    return float(np.median(np.abs(np.diff(values))))


def _matches(store: np.ndarray, file: np.ndarray, tolerance: float) -> np.ndarray:
    """Elementwise equality of coordinate values (floats within ``tolerance``)."""
    if store.dtype.kind in "fc" and file.dtype.kind in "fc":
        return np.asarray(np.abs(store - file) <= tolerance)
    return np.asarray(store == file)


def _describe(values: np.ndarray) -> str:
    if values.size == 0:
        return "none"
    first, last = values[0], values[-1]
    return f"{first}" if values.size == 1 else f"{first} .. {last}"


def locate_run(dim: str, store: np.ndarray, file: np.ndarray, snapped: bool = False) -> int:
    """The index where ``file``'s coordinate values start as a contiguous run of
    ``store``'s; :class:`Misplaced` when there is no such run.

    Floating-point values match within a millionth of the file's spacing (coordinates a
    different program computed from the same georeferencing differ in the last digits);
    ``snapped`` (the x and y of a mosaic, whose tiles are snapped to its grid) within
    less than half the spacing.
    """
    if file.size == 0:
        return 0
    tolerance = 0.0
    if file.dtype.kind in "fc" and store.dtype.kind in "fc":
        scale = float(np.max(np.abs(file)))
        fraction = SNAPPED_FRACTION if snapped else 1e-6
        tolerance = max(fraction * max(_spacing(file), _spacing(store)), 1e-12 * scale)
    starts = np.flatnonzero(_matches(store, file[:1], tolerance))
    partial: tuple[int, int] | None = None
    for start in starts.tolist():
        stop = start + file.size
        window = store[start:stop]
        same = _matches(window, file[: window.size], tolerance)
        if window.size == file.size and bool(np.all(same)):
            return int(start)
        if partial is None:
            differing = np.flatnonzero(~same)
            partial = (start, int(differing[0]) if differing.size else window.size)
    if partial is None:
        raise Misplaced(
            f"its {dim} values ({_describe(file)}) are not in the store's {dim} "
            f"({_describe(store)})"
        )
    start, at = partial
    if at >= store.size - start:
        raise Misplaced(
            f"its {dim} values ({_describe(file)}) start at store index {start} but run "
            f"past the end of the store's {dim} ({store.size} values)"
        )
    raise Misplaced(
        f"its {dim} values ({_describe(file)}) start at store index {start} but differ "
        f"from the store's at index {start + at}: store {store[start + at]}, file {file[at]}"
    )


def _offset_by_order(url: str, dim: str, order: CombinedOrder, sizes: SizesOf) -> int:
    """The offset of a file along a dimension without coordinate values: the length of
    the files combined before it."""
    position = order.position(url)
    if position is None:
        raise Misplaced(f"not among the files the store was built from (along {dim!r})")
    offset = 0
    for before in order.urls[:position]:
        found = sizes(before)
        if found is None:
            raise CliError(
                f"cannot place {display(url)} along {dim!r}, which has no coordinate values: "
                f"it follows {display(before)} in the store, which is neither given nor "
                "readable; verify against every file the store was built from",
                EXIT_USAGE,
            )
        offset += int(found.get(dim, 0))
    return offset


def _stack_index(url: str, dim: str, order: CombinedOrder, length: int) -> int:
    position = order.position(url)
    if position is None:
        raise Misplaced(f"not among the files the store was built from (stacked along {dim!r})")
    if not order.recorded and len(order.urls) != length:
        raise CliError(
            f"the store stacks {length} file(s) along {dim!r} and records no order; verify "
            f"against all of them, in the order they were built ({len(order.urls)} given)",
            EXIT_USAGE,
        )
    if position >= length:
        raise Misplaced(f"its position {position} along {dim!r} is past the store's {length}")
    return position


def place(
    url: str,
    file_sizes: Mapping[str, int],
    file_coords: Mapping[str, Any],
    store_sizes: Mapping[str, int],
    store_coordinate: Any,
    order: CombinedOrder,
    all_sizes: SizesOf,
    snapped: frozenset[str] = frozenset(),
) -> Placement:
    """Where the file lies (see the module docstring).

    Parameters
    ----------
    url
        The file.
    file_sizes, file_coords
        The file's dimension lengths and decoded 1-D dimension coordinates (its
        :class:`~virtualizarr_fill.assemble.FilePart`).
    store_sizes
        The lengths of the store's dimensions the file's variables span.
    store_coordinate
        ``store_coordinate(dim)``: the store's decoded coordinate values, or ``None``.
    order, all_sizes
        The order the files were combined in, and the dimension lengths of a file in it
        (for dimensions without coordinate values).
    snapped
        Dimensions whose coordinate values match within half their spacing (the x and y
        of a mosaic).

    Raises
    ------
    Misplaced
        The file is not in the store where its coordinates say.
    CliError
        The file cannot be placed from what was given (usage).
    """
    offsets: dict[str, int] = {}
    indices: dict[str, int] = {}
    for dim, length in store_sizes.items():
        if dim not in file_sizes:
            indices[dim] = _stack_index(url, dim, order, length)
            continue
        size = int(file_sizes[dim])
        stored = store_coordinate(dim)
        ours = file_coords.get(dim)
        if stored is not None and ours is not None:
            offset = locate_run(
                dim, np.asarray(stored), np.asarray(ours.values), snapped=dim in snapped
            )
        elif size == length:
            offset = 0
        else:
            offset = _offset_by_order(url, dim, order, all_sizes)
        if offset + size > length:
            raise Misplaced(
                f"it needs {offset + size} values along {dim!r} where the store has {length}"
            )
        offsets[dim] = offset
    return Placement(offsets, indices)


def store_sizes(names: Sequence[str], dataset: Any) -> dict[str, int]:
    """The lengths of the store's dimensions spanned by those of the variables ``names``
    the store has."""
    sizes: dict[str, int] = {}
    for name in names:
        variable = dataset.variables.get(name)
        if variable is None:
            continue
        for dim, length in zip(variable.dims, variable.shape, strict=True):
            sizes[str(dim)] = int(length)
    return sizes
