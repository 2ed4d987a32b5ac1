"""Which part of each tile a mosaic built with ``--overlap first|last`` reads.

Where tiles overlap, the store reads each pixel from one tile (the one given first or
last, as ``rasterio.merge.merge`` takes it): a tile that loses an overlap is not in the
store there, so ``verify`` compares each tile only where it wins. The winners are those
of the build: the layout (:func:`virtualizarr_fill.assemble.mosaic.tile_grid`) of every
tile of the store, in the order the build combined them, with its recorded options.

That order is the one an Icechunk repository's commits list; for kerchunk references,
the order the tiles are given to ``verify``, checked against the order the build
recorded (a digest) when they are the same files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, EXIT_USAGE, CliError
from virtualizarr_fill.cli._inputs import display
from virtualizarr_fill.cli._record import BuildRecord, inputs_digest, order_digest

if TYPE_CHECKING:
    from virtualizarr_fill.assemble import FilePart

__all__ = ["Windows", "owned_windows", "overlap_order"]

#: Per tile URL, the windows ``(row start, row stop, column start, column stop)`` of its
#: own pixels that the store reads from it.
type Windows = dict[str, tuple[tuple[int, int, int, int], ...]]


def overlap_order(
    record: BuildRecord, given: Sequence[str], recorded: Sequence[str] | None
) -> list[str]:
    """The order the build combined the tiles in (see the module docstring)."""
    if recorded and all(url in recorded for url in given):
        return list(recorded)
    if record.inputs and len(given) != record.inputs:
        raise CliError(
            f"the mosaic was built with --overlap {record.overlap} from {record.inputs} "
            f"tiles, so which tile each overlap takes depends on all of them: verify "
            f"against every tile, in the order they were built ({len(given)} given)",
            EXIT_USAGE,
        )
    same_files = record.inputs_digest == inputs_digest(given)
    if same_files and record.order_digest and record.order_digest != order_digest(given):
        raise CliError(
            f"the mosaic was built with --overlap {record.overlap}, so which tile each "
            "overlap takes depends on the order the tiles were given: verify against "
            "them in the order they were built",
            EXIT_USAGE,
        )
    return list(given)


def owned_windows(
    order: Sequence[str],
    part_of: Callable[[str], FilePart | None],
    record: BuildRecord,
) -> Windows:
    """The windows of each tile the store reads (see :data:`Windows`)."""
    from virtualizarr_fill.assemble.mosaic import tile_grid
    from virtualizarr_fill.errors import IncompatibleArraysError

    parts = []
    for url in order:
        part = part_of(url)
        if part is None:
            raise CliError(
                f"{display(url)}: the mosaic was built with --overlap {record.overlap} from "
                "this tile, which is neither given nor readable; verify needs every tile "
                "to know which one each overlap takes",
                EXIT_USAGE,
            )
        parts.append(part)
    try:
        grid = tile_grid(
            parts,
            allow_gaps=record.allow_gaps,
            overlap=record.overlap,  # type: ignore[arg-type]
        )
    except IncompatibleArraysError as error:
        raise CliError(
            f"the tiles given do not form the mosaic the store records: {error}", EXIT_BAD_INPUT
        ) from None
    owned: dict[str, list[tuple[int, int, int, int]]] = {url: [] for url in order}
    for (i, j), tile in grid.cells.items():
        owned[tile.part.url].append(
            (
                grid.row_edges[i] - tile.row,
                grid.row_edges[i + 1] - tile.row,
                grid.col_edges[j] - tile.col,
                grid.col_edges[j + 1] - tile.col,
            )
        )
    return {url: tuple(windows) for url, windows in owned.items()}
