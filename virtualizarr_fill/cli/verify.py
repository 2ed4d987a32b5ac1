"""``virtualizarr-fill verify``: read a store back the way its users read it and compare
every variable of every given file with what the field's reader of that file returns.

1. The store is opened with xarray's Zarr backend, CF-decoded (:mod:`._verify_store`);
   its build record says how the files are parsed (the recorded parser options) and,
   for a multiscale group, which levels to check.
2. Each file is parsed again and placed in the store by its coordinates
   (:mod:`._verify_placement`): a file that is not where its coordinates say, or not in
   the store at all, is a mismatch. In a mosaic built with ``--overlap``, a tile is
   compared only where the store reads it, where it wins the overlaps
   (:mod:`._verify_overlaps`).
3. Each variable is compared, block by block, with its native reader's values
   (:mod:`._native`, :mod:`._verify_compare`).

Output: a ``SKIPPED`` line per dataset the parser refused (left out of the store, with
the parser's reason), a ``MISMATCH`` line per file or variable that differs (with the
first differing element), an ``UNVERIFIED`` line per variable whose native reader
failed, then ``verified N arrays of M files: all equal`` (or ``K mismatches``,
``U unverified``, ``S datasets not in the store (the parser refused them)``); the exit
code is 0 when everything is equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._errors import EXIT_MISMATCH, EXIT_OK, FileError
from virtualizarr_fill.cli._inputs import display, expand_inputs
from virtualizarr_fill.cli._native import TIFF_NATIVE, open_native
from virtualizarr_fill.cli._parse import describe_failure, parser_from_options
from virtualizarr_fill.cli._verify_compare import (
    Comparison,
    compare,
    decoding_difference,
    packed_in_float32,
)
from virtualizarr_fill.cli._verify_overlaps import Windows, overlap_order, owned_windows
from virtualizarr_fill.cli._verify_placement import (
    SNAPPED_FRACTION,
    CombinedOrder,
    Misplaced,
    Placement,
    SizesOf,
    place,
    store_sizes,
)
from virtualizarr_fill.cli._verify_store import StoreLevel, VerifiedStore, open_verified_store
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.io.registries import registry_for

if TYPE_CHECKING:
    from virtualizarr_fill.assemble import FilePart

__all__ = ["command_verify"]


@dataclass
class _File:
    """One given file, parsed: its part for each level of the store."""

    url: str
    tiff: bool
    parts: dict[str | None, FilePart]
    #: The datasets the parser refused (left out of the store): (dataset, reason).
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Task:
    """One variable of one file to compare."""

    file: _File
    level: StoreLevel
    name: str
    placement: Placement


@dataclass
class _Report:
    """What ``verify`` found."""

    lines: list[str] = field(default_factory=list)
    mismatches: int = 0
    unverified: int = 0
    #: Datasets of the files the parser refused, so the store lacks them.
    skipped: int = 0
    compared: int = 0
    not_compared: set[str] = field(default_factory=set)
    #: Variables of the files the store does not hold (dropped when it was built).
    not_stored: set[str] = field(default_factory=set)

    def problem(self, url: str, text: str) -> None:
        self.mismatches += 1
        self.lines.append(f"MISMATCH {display(url)}: {text}")

    def cannot_compare(self, url: str, text: str) -> None:
        self.unverified += 1
        self.lines.append(f"UNVERIFIED {display(url)}: {text}")

    def refused(self, url: str, dataset: str, reason: str) -> None:
        self.skipped += 1
        self.lines.append(f"SKIPPED {display(url)}: {dataset}: {reason}")

    def verdict(self) -> str:
        if not self.lines:
            return "all equal"
        counts = []
        if self.mismatches:
            counts.append(f"{self.mismatches} mismatch{'es' if self.mismatches > 1 else ''}")
        if self.unverified:
            counts.append(f"{self.unverified} unverified")
        if self.skipped:
            counts.append(
                f"{self.skipped} dataset{'s' if self.skipped > 1 else ''} not in the store "
                "(the parser refused them)"
            )
        return ", ".join(counts)


# --------------------------------------------------------------------------- parsing


def _level_parts(store: Any, levels: Sequence[str | None]) -> dict[str | None, FilePart]:
    """The file's part of each level (its root group when the store has no levels)."""
    from virtualizarr_fill.assemble.parts import file_part
    from virtualizarr_fill.manifests.store import FileManifestStore

    if levels == [None]:
        return {None: file_part(store)}
    parts: dict[str | None, FilePart] = {}
    for name in levels:
        group = store._group.groups.get(name)
        if group is not None:
            level = FileManifestStore(group, registry=store._registry, url=store.url)
            parts[name] = file_part(level)
    return parts


def _parser(store: VerifiedStore) -> Any:
    """The parser as the build configured it (its recorded options)."""
    record = store.record
    if record is None:
        return parser_from_options({}, {})
    return parser_from_options(record.tiff_options, record.hdf5_options)


def _parse_file(url: str, parser: Any, levels: Sequence[str | None]) -> _File:
    from virtualizarr_fill.formats import FileFormat, detect_format
    from virtualizarr_fill.hdf5.parser import SkippedDatasetWarning

    registry = registry_for([url])
    with warnings.catch_warnings(record=True) as caught:
        # The parser's warnings were the build's to report, except the datasets it
        # left out: the store lacks them, which the comparison alone cannot show.
        warnings.simplefilter("always")
        tiff = detect_format(url, registry) is FileFormat.TIFF
        parts = _level_parts(parser(url=url, registry=registry), levels)
    skipped = [
        (w.message.dataset, w.message.reason)
        for w in caught
        if isinstance(w.message, SkippedDatasetWarning)
    ]
    return _File(url, tiff, parts, skipped)


def _parse(urls: Sequence[str], parser: Any, levels: Sequence[str | None]) -> list[_File]:
    files: list[_File] = []
    with Progress("parse", len(urls), "files") as progress:
        for url in urls:
            try:
                files.append(_parse_file(url, parser, levels))
            except Exception as error:
                message, code = describe_failure(url, error)
                raise FileError(message, code, traceback.format_exc()) from None
            progress.advance()
    return files


class _Sizes:
    """The dimension lengths of the files, at each level: of the given files, and of
    the other files the store was built from, parsed when a file without coordinate
    values needs them to be placed."""

    def __init__(self, files: Sequence[_File], parser: Any, levels: Sequence[str | None]):
        self._parser = parser
        self._levels = levels
        self._known: dict[str, _File | None] = {f.url: f for f in files}

    def part(self, url: str, level: str | None = None) -> FilePart | None:
        """The file's part of ``level``; ``None`` when it is gone or unreadable."""
        if url not in self._known:
            try:
                self._known[url] = _parse_file(url, self._parser, self._levels)
            except Exception:  # gone or unreadable: the caller says what it needs
                self._known[url] = None
        found = self._known[url]
        return None if found is None else found.parts.get(level)

    def at(self, level: str | None) -> SizesOf:
        def sizes(url: str) -> dict[str, int] | None:
            part = self.part(url, level)
            return None if part is None else part.sizes()

        return sizes


# --------------------------------------------------------------------------- planning


def _comparable(file: _File, part: FilePart, name: str) -> bool:
    """Whether a native reader has a counterpart of the file's variable ``name``."""
    if not file.tiff:
        return True
    if name == "band_data":
        return isinstance(part.attributes.get("tiff_ifd", 0), int)
    return name in TIFF_NATIVE


def _plan(
    files: Sequence[_File],
    store: VerifiedStore,
    order: CombinedOrder,
    all_sizes: _Sizes,
    report: _Report,
) -> list[_Task]:
    tasks: list[_Task] = []
    for level in store.levels:
        owned = _owned(files, store, all_sizes, level.name)
        prefix = "" if level.name is None else f"level {level.name}: "
        sizes = all_sizes.at(level.name)
        for file in files:
            part = file.parts.get(level.name)
            if part is None:
                report.problem(file.url, f"{prefix}the file has no such level")
                continue
            names = list(part.arrays)
            present = [n for n in names if n in level.decoded.variables]
            report.not_stored.update(level.label(n) for n in names if n not in present)
            if not present:
                report.problem(file.url, f"{prefix}none of its variables is in the store")
                continue
            try:
                placement = place(
                    file.url,
                    part.sizes(),
                    part.coords,
                    store_sizes(present, level.decoded),
                    level.coordinate,
                    order,
                    sizes,
                    snapped=_snapped(store),
                )
            except Misplaced as misplaced:
                report.problem(file.url, f"{prefix}{misplaced}")
                continue
            if owned is not None:
                placement = dataclasses.replace(placement, owned=owned.get(file.url, ()))
            for name in present:
                if _comparable(file, part, name):
                    tasks.append(_Task(file, level, name, placement))
                else:
                    report.not_compared.add(level.label(name))
    return tasks


def _mosaic(store: VerifiedStore) -> bool:
    """Whether the store is a mosaic: of images, or of the levels of multiscale tiles."""
    record = store.record
    if record is None:
        return False
    return record.mode == "mosaic" or (record.mode == "multiscales" and record.dim is None)


def _owned(
    files: Sequence[_File], store: VerifiedStore, all_sizes: _Sizes, level: str | None
) -> Windows | None:
    """In a mosaic built with ``--overlap``, the part of each tile the store reads at
    ``level``."""
    record = store.record
    if record is None or not _mosaic(store) or not record.overlap:
        return None
    order = overlap_order(record, [f.url for f in files], store.inputs)
    return owned_windows(order, lambda url: all_sizes.part(url, level), record)


# --------------------------------------------------------------------------- comparing


def _snapped(store: VerifiedStore) -> frozenset[str]:
    """The dimensions whose coordinates the build snapped to a grid: a mosaic's."""
    return frozenset({"x", "y"}) if _mosaic(store) else frozenset()


def _tolerance(store: VerifiedStore, task: _Task, native: Any) -> float:
    """How far a mosaic's x or y may be from a tile's own: under half a pixel (the
    build snaps tiles onto the mosaic's grid); nothing for any other variable."""
    import numpy as np

    if task.name not in _snapped(store):
        return 0.0
    values = np.asarray(native.read(tuple(slice(None) for _ in native.shape)), dtype=np.float64)
    if values.size < 2:
        return 0.0
    return SNAPPED_FRACTION * float(np.median(np.abs(np.diff(values))))


def _native_options(file: _File, level: StoreLevel, store: VerifiedStore) -> dict[str, Any]:
    part = file.parts[level.name]
    if file.tiff:
        ifd = part.attributes.get("tiff_ifd", 0)
        if level.name is not None:  # a multiscale level: GDAL's overviews
            return {"overview": int(level.name) - 1 if level.name != "0" else None}
        return {"tiff_ifd": ifd if isinstance(ifd, int) else 0}
    group = store.record.hdf5_options.get("group") if store.record is not None else None
    return {"hdf5_group": group, "dims": part.dims}


def _outcome(report: _Report, task: _Task, comparison: Comparison) -> None:
    label = task.level.label(task.name)
    if comparison.unverified is not None:
        report.cannot_compare(task.file.url, f"{label}: {comparison.unverified}")
        return
    report.compared += 1
    if comparison.problem is not None:
        report.problem(task.file.url, f"{label}: {comparison.problem}")
    elif comparison.mismatched:
        report.problem(
            task.file.url,
            f"{label}: {comparison.mismatched} of {comparison.values} values differ; "
            f"{comparison.first}",
        )


def _compare_level(tasks: Sequence[_Task], store: VerifiedStore, report: _Report) -> None:
    """Compare the tasks of one file and level, its native reader opened once."""
    first = tasks[0]
    options = _native_options(first.file, first.level, store)
    with contextlib.ExitStack() as stack:
        try:
            native = stack.enter_context(open_native(first.file.url, first.file.tiff, **options))
        except Exception as error:
            reason = f"its native reader cannot open it ({type(error).__name__}: {error})"
            for task in tasks:
                _outcome(report, task, Comparison(unverified=reason))
            return
        for task in tasks:
            variable = native.variable(task.name)
            if variable is None:  # e.g. x and y of an image GDAL sees no geotransform in
                report.not_compared.add(task.level.label(task.name))
                continue
            dataset = task.level.decoded if native.decoded else task.level.raw
            stored = dataset.variables[task.name]
            raw = native.raw_variable(task.name)
            try:
                if raw is not None and packed_in_float32(variable.encoding, stored):
                    difference = decoding_difference(variable.encoding, stored.encoding)
                    if difference is not None:
                        comparison = Comparison(problem=difference)
                    else:
                        raw_stored = task.level.raw.variables[task.name]
                        comparison = compare(raw, raw_stored, task.placement)
                else:
                    comparison = compare(
                        variable, stored, task.placement, _tolerance(store, task, variable)
                    )
            except Exception as error:
                comparison = Comparison(
                    unverified=f"could not compare ({type(error).__name__}: {error})"
                )
            _outcome(report, task, comparison)


def _compare(
    files: Sequence[_File], tasks: Sequence[_Task], store: VerifiedStore, report: _Report
) -> None:
    by_file: dict[str, dict[str | None, list[_Task]]] = {f.url: {} for f in files}
    for task in tasks:
        by_file[task.file.url].setdefault(task.level.name, []).append(task)
    with Progress("verify", len(files), "files") as progress, warnings.catch_warnings():
        # rioxarray warns about images without georeferencing; xarray about decoding
        # choices. The values are what is compared.
        warnings.simplefilter("ignore")
        for levels in by_file.values():
            for level_tasks in levels.values():
                _compare_level(level_tasks, store, report)
            progress.advance()


# --------------------------------------------------------------------------- the command


def _order(urls: Sequence[str], store: VerifiedStore) -> CombinedOrder:
    if store.inputs:
        return CombinedOrder(list(store.inputs), recorded=True)
    return CombinedOrder(list(urls), recorded=False)


def command_verify(args: argparse.Namespace) -> int:
    urls = expand_inputs(args.against)
    store = open_verified_store(args.dest, urls)
    parser = _parser(store)
    levels = [level.name for level in store.levels]
    files = _parse(urls, parser, levels)
    report = _Report()
    for file in files:
        for dataset, reason in file.skipped:
            report.refused(file.url, dataset, reason)
    sizes = _Sizes(files, parser, levels)
    tasks = _plan(files, store, _order(urls, store), sizes, report)
    _compare(files, tasks, store, report)
    for line in report.lines:
        print(line)
    if report.not_compared:
        listed = ", ".join(sorted(report.not_compared))
        print(f"not compared (no native reader): {listed}")
    if report.not_stored:
        print(f"not in the store: {', '.join(sorted(report.not_stored))}")
    if store.record is not None and store.record.inputs and store.record.inputs != len(urls):
        print(f"note: the store was built from {store.record.inputs} files; {len(urls)} given")
    print(f"verified {report.compared} arrays of {len(files)} files: {report.verdict()}")
    return EXIT_OK if not report.lines else EXIT_MISMATCH
