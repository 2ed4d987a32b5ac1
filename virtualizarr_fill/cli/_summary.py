"""What ``build`` prints when it has written a store: the arrays (after an append, the
whole stored arrays), chunk counts, the packages a reader needs, refusals, dropped
attributes, warnings, timings, and how to open the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._destinations import Destination, open_icechunk_repository
from virtualizarr_fill.cli._inputs import display
from virtualizarr_fill.cli._write import virtual_names

if TYPE_CHECKING:
    import xarray as xr

    from virtualizarr_fill.assemble.windows import Materialised
    from virtualizarr_fill.cli.build import _Parsed

__all__ = [
    "DatasetFacts",
    "array_lines",
    "chunk_count",
    "dataset_facts",
    "print_build_summary",
    "stored_array_lines",
]


def chunk_count(dataset: xr.Dataset) -> int:
    return sum(
        sum(1 for _ in dataset.variables[n].data.manifest.iter_nonempty_paths())
        for n in virtual_names(dataset)
    )


def _grid_summary(metadata: Any) -> str:
    """``(regular grid)``, ``(rectilinear grid, truncate)``... of a Zarr array's metadata."""
    from zarr.core.metadata.v3 import RegularChunkGridMetadata

    from virtualizarr_fill.zarr_model.edge_codecs import edge_handling_of

    regular = isinstance(metadata.chunk_grid, RegularChunkGridMetadata)
    kind = "regular" if regular else "rectilinear"
    handling = edge_handling_of(metadata.codecs).name.lower()
    extra = f", {handling}" if handling != "none" else ""
    return f"({kind} grid{extra})"


def _array_line(name: str, shape: Sequence[int], dtype: Any, metadata: Any) -> str:
    """One array of the summary; ``metadata`` is ``None`` for a loaded variable."""
    shown = "x".join(str(n) for n in shape) or "scalar"
    return f"{name} {shown} {dtype} {_grid_summary(metadata) if metadata else '(loaded)'}"


def array_lines(dataset: xr.Dataset) -> list[str]:
    virtual = set(virtual_names(dataset))
    return [
        _array_line(str(n), v.shape, v.dtype, v.data.metadata if n in virtual else None)
        for n, v in dataset.variables.items()
    ]


def stored_array_lines(repo: Any, snapshot: str, appended: xr.Dataset) -> list[str]:
    """The arrays of a repository after an append: their whole shapes, as stored."""
    import zarr

    group = zarr.open_group(repo.readonly_session(snapshot_id=snapshot).store, mode="r")
    virtual = set(virtual_names(appended))
    lines = []
    for name in appended.variables:
        array = group[str(name)]
        assert isinstance(array, zarr.Array)
        metadata = array.metadata if name in virtual else None
        # the dtype as decoded (time as datetimes), which an append cannot change
        dtype = appended.variables[name].dtype
        lines.append(_array_line(str(name), array.shape, dtype, metadata))
    return lines


def how_to_open(destination: Destination) -> list[str]:
    """Lines saying what a reader authorizes (the virtual chunk containers the
    repository declares, read back from it) and a snippet that opens the result."""
    if destination.kind == "icechunk":
        repo = open_icechunk_repository(destination.text)
        declared = repo.config.virtual_chunk_containers or {}
        containers = ", ".join(sorted(declared))
        return [
            f"  containers: {containers} (virtual chunk containers a reader authorizes)",
            "  open with: import virtualizarr_fill; "
            f"ds = virtualizarr_fill.open_icechunk({destination.text!r})",
        ]
    return [
        "  open with: import virtualizarr_fill; "
        f"ds = virtualizarr_fill.open_kerchunk({destination.text!r})"
    ]


@dataclass(frozen=True)
class DatasetFacts:
    """What the summary says of the combined dataset, taken before it is written (the
    writer frees the dataset as it goes)."""

    arrays: list[str]
    chunks: int
    stored: Materialised
    readers: str
    dropped: dict[str, list[str]]


def dataset_facts(dataset: xr.Dataset) -> DatasetFacts:
    """The summary's facts of ``dataset`` (its arrays as combined)."""
    from virtualizarr_fill.assemble import dropped_attributes
    from virtualizarr_fill.assemble.windows import materialised_in
    from virtualizarr_fill.codecs.reader_packages import reader_requirement

    codecs = {n: dataset.variables[n].data.metadata.codecs for n in virtual_names(dataset)}
    return DatasetFacts(
        arrays=array_lines(dataset),
        chunks=chunk_count(dataset),
        stored=materialised_in(dataset),
        readers=reader_requirement(codecs),
        dropped=dropped_attributes(dataset),
    )


def print_summary(
    written: str,
    parsed: _Parsed,
    facts: DatasetFacts,
    arrays: Sequence[str],
    timings: dict[str, float],
    notes: Sequence[str],
    how_to_open: Sequence[str],
    appended: bool,
) -> None:
    report = parsed.report
    lines = [f"wrote {written}"]
    lines.append(f"  files:     {len(parsed.used)} virtualized, {len(parsed.skipped)} skipped")
    lines.append(f"  arrays:    {len(arrays)}")
    lines.extend(f"    {line}" for line in arrays)
    stored = facts.stored
    added = " by the appended files" if appended else ""
    as_values = f", {stored}" if stored.chunks else ""
    lines.append(f"  chunks:    {facts.chunks} referenced{added}{as_values}")
    lines.append(f"  readers:   {facts.readers}")
    lines.append(f"  refusals:  {len(report.refusals)}")
    lines.extend(f"    {display(r.url)}: {r.name}: {r.reason}" for r in report.refusals)
    dropped = facts.dropped
    if dropped:  # descriptive attributes the files disagree on (history, ...)
        listed = "; ".join(f"{n or '(dataset)'}: {', '.join(k)}" for n, k in dropped.items())
        lines.append(f"  dropped attributes (they differ between files): {listed}")
    warned = list(dict.fromkeys([*parsed.warnings, *notes]))
    if warned:
        lines.append(f"  warnings:  {len(warned)}")
        lines.extend(f"    {w}" for w in warned)
    if parsed.skipped:
        lines.append(f"  skipped files ({len(parsed.skipped)}):")
        lines.extend(f"    {error}" for error in parsed.skipped)
    lines.extend(how_to_open)
    times = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    lines.append(f"  time:      {times}")
    print("\n".join(lines), flush=True)


# --------------------------------------------------------------------------- the command


def print_build_summary(
    written: str,
    snapshot: str | None,
    parsed: _Parsed,
    facts: DatasetFacts,
    destination: Destination,
    timings: dict[str, float],
    notes: Sequence[str],
    appended: xr.Dataset | None = None,
) -> None:
    """Print the build summary; after an append (``appended``, the dataset appended),
    of the whole stored arrays."""
    if appended is not None:
        assert snapshot is not None
        repo = open_icechunk_repository(destination.text)
        arrays = stored_array_lines(repo, snapshot, appended)
    else:
        arrays = facts.arrays
    how = how_to_open(destination)
    print_summary(written, parsed, facts, arrays, timings, notes, how, appended is not None)
