"""Collecting parsed files for a combination, in this process, on an executor, or on a
dask cluster as a tree reduction.

A :class:`Collector` keeps each file's :class:`~.parts.FilePart` checked against the
first file and compacted (:func:`~.parts.compact`), in columns
(:class:`~.part_table.PartTable`), so that what it holds grows with the chunk references
only, not with objects per file. Collectors of the same combination merge: the other's first
file is checked against this one's, and its files compacted again against it.

That makes the work of many files a reduction. An executor's tasks each parse a batch
into a collector, which travels back compacted; on a dask cluster the collectors are
also merged on the cluster, neighbours with neighbours (so that the files keep their
order), until one collector reaches the client: the client receives what the result
needs, once, instead of every file's part.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import xarray as xr

from virtualizarr_fill.assemble.part_table import PartTable
from virtualizarr_fill.assemble.parts import (
    FilePart,
    Known,
    bounds_of,
    compact,
    file_part,
    loading_times,
    part_dataset,
    time_encoding,
)
from virtualizarr_fill.assemble.placement import X, Y
from virtualizarr_fill.assemble.series import check_same_structure
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.fill.encoding import (
    EncodingConflictError,
    encoding_conflict_message,
    encoding_difference,
)
from virtualizarr_fill.io.batching import batches

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry

    from virtualizarr_fill.manifests.store import FileManifestStore

__all__ = [
    "Collector",
    "cancelled_on_error",
    "collect",
    "collect_batch",
    "dask_client",
    "merge_collectors",
    "tree_reduce",
]


#: Parts of another collector compacted together (their objects alive meanwhile).
_COMPACTED_AT_ONCE = 1024


class Collector:
    """Parsed files for a combination along ``dims``: each checked against the first
    and compacted as it arrives (:func:`~.parts.compact`), so that what is kept grows
    with the chunk references only; the first file's part gives the template."""

    def __init__(self, dims: Sequence[str], *, new_dim: bool, decode_times: bool | None):
        self.dims = list(dims)
        self.new_dim = new_dim
        self.decode_times = decode_times
        #: The files' compacted parts, in columns.
        self.parts = PartTable()
        self._reference: FilePart | None = None
        self._combined: list[str] = []
        #: The first file's time encodings of the combined virtual variables.
        self._encodings: dict[str, tuple[Any, Any]] | None = None
        #: A mosaic's tiles by number of bands and data types (the first tile of each),
        #: so that a refusal names the tile that differs from the majority, not the
        #: second one given.
        self._band_counts: Counter[_TileKind] = Counter()
        self._band_examples: dict[_TileKind, str] = {}

    def add(self, store: FileManifestStore) -> None:
        """Check and keep one parsed file."""
        self.add_part(file_part(store, decode_times=self.decode_times))

    def add_part(self, part: FilePart) -> None:
        """Check and keep one file's part (as :func:`~.parts.file_part` makes it, with
        this collector's ``decode_times``)."""
        part = loading_times(part, self.dims, self.new_dim)
        if self._reference is None:
            self._reference = part
            self._combined = part.combined(self.dims, self.new_dim)
        if self._other_kind(part.url, _kind(part), 1):
            return  # refused by check_tiles, once every tile is counted
        check_same_structure(self._reference, part, self.dims)
        self._check_time_encodings(part)
        self._check_encodings(part)
        self.parts.append(compact(part, self._reference, self._combined, self.dims))

    def merge(self, other: Collector) -> Collector:
        """Add the files of ``other`` (a collector of the same combination) after this
        one's: its first file is checked against this one's first (and so, as each of
        its files was checked against its first, every one of them), then its files are
        compacted against this one's first. Returns this collector."""
        if other._reference is None:
            return self
        if self._reference is None:
            self._reference, self._combined = other._reference, other._combined
            self.parts.extend(other.parts)  # (a copy: merge_collectors leaves its inputs)
            self._band_counts.update(other._band_counts)
            self._band_examples.update(other._band_examples)
            return self
        other_kind = self._other_kind(other._reference.url, _kind(other._reference), 0)
        self._band_counts.update(other._band_counts)
        for key, url in other._band_examples.items():
            self._band_examples.setdefault(key, url)
        if other_kind:
            return self  # its files are of the other kind: refused by check_tiles
        check_same_structure(self._reference, other._reference, self.dims)
        self._check_time_encodings(other._reference)
        self._check_encodings(other._reference)
        for start in range(0, len(other.parts), _COMPACTED_AT_ONCE):
            # ``known`` goes by identity: the parts it saw are kept until it is dropped
            # (the table builds a part's objects anew each time it is read)
            known: Known = {}
            others = other.parts[start : start + _COMPACTED_AT_ONCE]
            reference, combined = self._reference, self._combined
            self.parts.extend([compact(p, reference, combined, self.dims, known) for p in others])
        return self

    def _check_time_encodings(self, part: FilePart) -> None:
        """Refuse a file whose combined virtual variables hold times in other units or
        calendar than the first file's: its stored numbers would be read with the first
        file's units (xarray's ``drop_conflicts`` would drop a variable's own ``units``
        and leave raw numbers; a bounds variable takes its coordinate's, the first
        file's), wrong dates either way. The small ones were loaded instead
        (:func:`~.parts.loading_times`); the encodings of the first file are looked
        up once."""
        reference = self._reference
        assert reference is not None
        if part is reference or self.decode_times is False:
            return
        if self._encodings is None:
            bounds = bounds_of(reference.var_attrs)
            self._encodings = {
                name: encoding
                for name in self._combined
                if (encoding := time_encoding(reference.var_attrs, name, bounds)) is not None
            }
        if not self._encodings:
            return
        bounds = bounds_of(part.var_attrs)
        for name, expected in self._encodings.items():
            found = time_encoding(part.var_attrs, name, bounds)
            if found != expected:
                raise IncompatibleArraysError(
                    f"{name!r} holds times in {_described(found)} in {part.url} and in "
                    f"{_described(expected)} in {reference.url}: a virtual variable cannot "
                    "read numbers stored in different units as one; rewrite the files so "
                    f"that {name!r} has one 'units' and 'calendar' in all of them (with "
                    f"xarray: encoding={{{name!r}: {{'units': ...}}}})"
                )

    def _check_encodings(self, part: FilePart) -> None:
        """Refuse a file whose combined virtual variables store their numbers with
        another data type or CF encoding (``scale_factor``, ``add_offset``, ``units``,
        ...: :mod:`virtualizarr_fill.fill.encoding`) than the first file's: the combined
        variable keeps one, and the other file's values would decode wrong. Times are
        checked by :meth:`_check_time_encodings` (loaded ones decode file by file)."""
        reference = self._reference
        assert reference is not None
        if part is reference:
            return
        for name in self._combined:
            expected, found = reference.var_attrs[name], part.var_attrs[name]
            dtype = reference.arrays[name].dtype
            if part.arrays[name].dtype != dtype:
                difference: tuple[str, Any, Any] | None = (
                    "data type",
                    str(dtype),
                    str(part.arrays[name].dtype),
                )
            elif expected is found:
                continue
            else:
                difference = encoding_difference(
                    dtype, expected, found, time_units=self.decode_times is False
                )
            if difference is not None:
                attribute, first_value, other_value = difference
                raise EncodingConflictError(
                    encoding_conflict_message(
                        name, attribute, reference.url, first_value, part.url, other_value
                    )
                )

    def _other_kind(self, url: str, kind: _TileKind, count: int) -> bool:
        """Count a mosaic tile's kind; whether it differs from the first tile's."""
        if self.dims != [Y, X] or self._reference is None:
            return False
        self._band_counts[kind] += count
        self._band_examples.setdefault(kind, url)
        return kind != _kind(self._reference)

    def check_tiles(self) -> None:
        """Refuse a mosaic whose tiles have different numbers of bands or data types,
        naming a tile that differs from the majority (the first tile when it is the odd
        one).

        Raises
        ------
        IncompatibleArraysError
            The tiles' band counts or data types differ.
        """
        if len(self._band_counts) < 2:
            return
        common = self._band_counts.most_common(1)[0][0]
        odd = next(kind for kind in self._band_examples if kind != common)
        tile, other = self._band_examples[odd], self._band_examples[common]
        if odd[0] != common[0]:

            def described(bands: int | None) -> str:
                if bands is None:
                    return "no 'band' dimension"
                return f"{bands} band{'' if bands == 1 else 's'}"

            raise IncompatibleArraysError(
                f"{tile} has {described(odd[0])}, the other tiles (such as {other}) "
                f"{described(common[0])}; the tiles of a mosaic must have the same bands: "
                "select them first (gdal_translate -b, or rioxarray and .isel(band=...))"
            )
        ours, theirs = dict(odd[1]), dict(common[1])
        name = next(n for n in sorted(ours.keys() | theirs.keys()) if ours.get(n) != theirs.get(n))
        raise IncompatibleArraysError(
            f"{tile}: {name!r} is {ours.get(name, 'none')}, in the other tiles (such as "
            f"{other}) {theirs.get(name, 'none')}; one virtual array has one data type"
        )

    def template(self) -> xr.Dataset:
        """The first file's virtual dataset."""
        if self._reference is None:
            raise ValueError("no files to combine")
        return part_dataset(self._reference)


#: A mosaic tile's number of bands (None: no ``band`` dimension) and the data type of
#: each of its arrays along y and x.
type _TileKind = tuple[int | None, tuple[tuple[str, str], ...]]


def _kind(part: FilePart) -> _TileKind:
    """What the tiles of a mosaic must share: see :data:`_TileKind`."""
    images = tuple(
        sorted(
            (name, str(array.dtype))
            for name, array in part.arrays.items()
            if Y in part.dims[name] and X in part.dims[name]
        )
    )
    return part.sizes().get("band"), images


def _described(encoding: tuple[Any, Any] | None) -> str:
    if encoding is None:
        return "no time units"
    units, calendar = encoding
    return f"{units!r}" + (f" (calendar {calendar!r})" if calendar is not None else "")


def merge_collectors(*collectors: Collector) -> Collector:
    """The collectors merged in order into a new one (one task of a tree reduction;
    its inputs stay as they are, so that a task the cluster runs again sees them
    unchanged)."""
    first = collectors[0]
    merged = Collector(first.dims, new_dim=first.new_dim, decode_times=first.decode_times)
    for collector in collectors:
        merged.merge(collector)
    return merged


#: Results one merge task of a tree reduction takes: the tree is shallow (four levels
#: for 100,000 files in batches of 64) and each merge has enough to do to be worth a
#: task.
FAN_IN = 8


def collect_batch(
    urls: Sequence[str],
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any],
    dims: Sequence[str],
    new_dim: bool,
    decode_times: bool | None,
) -> Collector:
    """Parse files into a :class:`Collector` (one task of an executor): what travels
    back is the files' manifests and coordinate values, compacted."""
    collector = Collector(dims, new_dim=new_dim, decode_times=decode_times)
    for url in urls:
        collector.add(parser(url=url, registry=registry))
    return collector


def dask_client(executor: Any) -> Any:
    """The dask ``distributed.Client`` behind ``executor`` (a client, or the executor
    of ``client.get_executor()``), or None for any other executor."""
    if type(executor).__module__.partition(".")[0] != "distributed":
        return None
    client = getattr(executor, "_client", executor)  # a ClientExecutor keeps its client
    return client if callable(getattr(client, "submit", None)) else None


def _workers(executor: Any) -> int:
    """How many tasks the executor runs at once (a guess of 4 where it does not say)."""
    client = dask_client(executor)
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return max(1, int(getattr(executor, "_max_workers", 0) or 4))


def tree_reduce(client: Any, futures: Sequence[Any], merge: Callable[..., Any]) -> Any:
    """The future of ``merge`` applied over ``futures`` on a dask cluster, up to
    :data:`FAN_IN` neighbours per task, level by level, so that order is kept and no
    task waits on more than :data:`FAN_IN` results."""
    level = list(futures)
    while len(level) > 1:
        groups = [level[i : i + FAN_IN] for i in range(0, len(level), FAN_IN)]
        level = [
            client.submit(merge, *group, pure=False) if len(group) > 1 else group[0]
            for group in groups
        ]
    return level[0]


def collect(
    urls: Sequence[str],
    registry: ObjectStoreRegistry,
    parser: Callable[..., Any],
    executor: Executor | Any | None,
    collector: Collector,
) -> Collector:
    """Parse ``urls`` into ``collector``: here, with an executor's ``map`` (each task a
    batch, merged here as the tasks finish), or on a dask cluster (a client or its
    executor: batches merged on the cluster by :func:`tree_reduce`)."""
    if executor is None:
        for url in urls:
            collector.add(parser(url=url, registry=registry))
        return collector
    task = functools.partial(
        collect_batch,
        registry=registry,
        parser=parser,
        dims=collector.dims,
        new_dim=collector.new_dim,
        decode_times=collector.decode_times,
    )
    work = batches(urls, _workers(executor))
    client = dask_client(executor)
    if client is None:
        for batch in executor.map(task, work):
            collector.merge(batch)
        return collector
    leaves = client.map(task, work, pure=False)
    root = tree_reduce(client, leaves, merge_collectors)
    with cancelled_on_error(client, [*leaves, root]):
        return collector.merge(root.result())


@contextlib.contextmanager
def cancelled_on_error(client: Any, futures: Sequence[Any]) -> Iterator[None]:
    """Cancel the cluster's work on ``futures`` (and what depends on them) when the
    block fails or is interrupted; finished ones are released as they go out of use."""
    try:
        yield
    except BaseException:
        client.cancel([f for f in futures if not f.done()])
        raise
