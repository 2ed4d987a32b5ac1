"""``build --dask-scheduler``: the files parsed on a dask cluster, and combined there.

The first file is parsed on its own, so that this process knows the plan (a GeoTIFF is
a mosaic tile) and the dimension is checked before the cluster starts on the rest. The
other files are parsed in batches, each task keeping its files' parts in a
:class:`~virtualizarr_fill.assemble.collecting.Collector` (checked and compacted), and
the batches are merged on the cluster as a tree
(:func:`~virtualizarr_fill.assemble.collecting.tree_reduce`), so that this process
receives one collection and every file's outcome (decisions, warnings, errors) once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._errors import EXIT_IO, CliError
from virtualizarr_fill.cli._parse import ParsedFile, parse_file

if TYPE_CHECKING:
    from virtualizarr_fill.assemble.collecting import Collector

__all__ = [
    "BatchOutcome",
    "collect_on_dask",
    "connect",
    "first_files",
    "merge_outcomes",
    "parse_and_collect",
]


@dataclass
class BatchOutcome:
    """Files parsed on the cluster: each file's outcome, its part moved into
    ``collector`` (None once a file failed and the build stops at failures)."""

    files: list[ParsedFile] = field(default_factory=list)
    collector: Collector | None = None


def parse_and_collect(
    urls: Sequence[str], parser: Any, dims: Sequence[str], new_dim: bool, skip_bad: bool
) -> BatchOutcome:
    """Parse a batch of files into a collector (one task on the cluster)."""
    from virtualizarr_fill.assemble.collecting import Collector

    collector = Collector(dims, new_dim=new_dim, decode_times=None)
    files: list[ParsedFile] = []
    for url in urls:
        parsed = parse_file(url, parser)
        part, parsed.part = parsed.part, None
        files.append(parsed)
        if part is not None:
            collector.add_part(part)
        elif not skip_bad:  # the build stops: nothing more to collect
            return BatchOutcome(files=files, collector=None)
    return BatchOutcome(files=files, collector=collector)


def merge_outcomes(*outcomes: BatchOutcome) -> BatchOutcome:
    """Batches merged in order into a new outcome (one task of the tree); once any of
    them stopped at a failed file, only the files' outcomes are kept."""
    from virtualizarr_fill.assemble.collecting import merge_collectors

    files = [file for outcome in outcomes for file in outcome.files]
    collectors = [outcome.collector for outcome in outcomes if outcome.collector is not None]
    if len(collectors) < len(outcomes):
        return BatchOutcome(files=files, collector=None)
    return BatchOutcome(files=files, collector=merge_collectors(*collectors))


def connect(address: str) -> Any:
    """A client of the dask scheduler at ``address``."""
    try:
        from distributed import Client
    except ImportError:
        raise CliError(
            "--dask-scheduler needs the 'distributed' package (pip install "
            "'virtualizarr-fill[dask]')",
            EXIT_IO,
        ) from None
    try:
        return Client(address, timeout=30)
    except OSError as error:
        raise CliError(
            f"cannot connect to the dask scheduler {address}: {error}", EXIT_IO
        ) from None


def first_files(client: Any, urls: Sequence[str], parser: Any) -> Iterator[ParsedFile]:
    """The files at the head of ``urls``, parsed on the cluster one at a time (until the
    caller has a file that parses)."""
    for url in urls:
        yield client.submit(parse_file, url, parser, pure=False).result()


def collect_on_dask(
    client: Any,
    urls: Sequence[str],
    parser: Any,
    dims: Sequence[str],
    new_dim: bool,
    skip_bad: bool,
    progress: Any,
) -> BatchOutcome:
    """``urls`` parsed and collected on the cluster; ``progress`` advances as batches
    finish."""
    from distributed import as_completed

    from virtualizarr_fill.assemble.collecting import cancelled_on_error, tree_reduce
    from virtualizarr_fill.io.batching import batches

    if not urls:
        return BatchOutcome(files=[], collector=None)
    workers = max(1, sum(client.nthreads().values()))
    work = batches(urls, workers)
    leaves = client.map(
        parse_and_collect,
        work,
        parser=parser,
        dims=list(dims),
        new_dim=new_dim,
        skip_bad=skip_bad,
        pure=False,
    )
    root = tree_reduce(client, leaves, merge_outcomes)
    size = {leaf.key: len(batch) for leaf, batch in zip(leaves, work, strict=True)}
    with cancelled_on_error(client, [*leaves, root]):
        for leaf in as_completed(leaves):
            progress.advance(size[leaf.key])
        outcome: BatchOutcome = root.result()
        return outcome
