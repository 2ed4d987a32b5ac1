"""zarr's array reads and group opens for ManifestStores read with the manifest
pipeline (:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`), without
zarr's per-chunk objects and event-loop trips.

Before it calls the codec pipeline, zarr builds three objects for every chunk of a read:
a chunk projection from the indexer, a ``StorePath`` for the chunk key (which the
pipeline then parses back into grid indices) and, on rectilinear grids, an
``ArraySpec``: most of the time taken to read an array of ten thousand small
chunks. And every synchronous read or group member access is handed to zarr's
event-loop thread and waited for, and every open parses the member's ``zarr.json``
again: most of reading a file of many small arrays. When the array's pipeline is a
:class:`ManifestCodecPipeline` and its store a ManifestStore, this module

1. projects the selection per dimension (zarr's own dimension indexers) and looks the
   chunks' grid indices up in the manifest all at once (:func:`get_selection`);
2. hands the pipeline's fetch and decode steps one lazily built chunk description per
   chunk (one ``ArraySpec`` per distinct chunk shape);
3. for a step-1 selection of many small chunks on a regular lattice (regular grids,
   and rectilinear dimensions whose last chunk only is shorter), decodes every chunk
   into one array of whole chunks and copies the selected part into the output at
   once; chunks stored as plain numbers are joined and viewed as that array;
4. runs ``Array`` reads (:func:`array_getitem`, :func:`get_basic_selection`,
   :func:`get_orthogonal_selection`), ``Group`` member opens (:func:`group_getitem`)
   and read-only ``zarr.open_group``
   (:func:`open_group`) in the calling thread: they never wait on anything there
   (local files are read directly, larger and remote reads in worker threads), so
   zarr's event loop is not involved;
5. parses each node's ``zarr.json`` once (:func:`read_metadata_v3`), giving every open
   its own copy, and builds each array's chunk grid, runtime configuration and codec
   pipeline once per configuration (:func:`get_node_v3`).

The values are those of zarr's own read, bit for bit (tests/test_zarr_read_path.py).
Every other read or open (other pipelines or stores, zarr format 2, structured-field or
``out=`` reads, ``array.read_missing_chunks=False``, non-NumPy buffers) goes to zarr's
own functions unchanged. Installed by :func:`virtualizarr_fill.fast_reads` for the
duration of its ``with`` block,
for the zarr releases it was written against (:func:`supported`).

Retire when zarr's read path hands codec pipelines chunk grid indices instead of
per-chunk store paths and specs, and reads stores that never wait without its event
loop (or VirtualiZarr's ManifestStore reads whole batches itself).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import functools
import itertools
import math
import operator
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

import numpy as np
import zarr
import zarr.api.asynchronous as zarr_async_api
import zarr.api.synchronous as zarr_sync_api
import zarr.core.array as zarr_array
import zarr.core.group as zarr_group
from obstore.store import LocalStore
from packaging.version import Version
from virtualizarr.manifests import ManifestArray
from virtualizarr.manifests.store import ManifestStore
from zarr.core.array import AsyncArray
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.chunk_grids import FixedDimension
from zarr.core.chunk_utils import fill_value_or_default
from zarr.core.group import AsyncGroup, Group, GroupMetadata
from zarr.core.indexing import (
    BasicIndexer,
    ChunkDimProjection,
    IntDimIndexer,
    OrthogonalIndexer,
    SliceDimIndexer,
)
from zarr.core.metadata import ArrayV3Metadata
from zarr.storage._common import StorePath
from zarr.storage._utils import _join_paths

from virtualizarr_fill.errors import StoreReadError
from virtualizarr_fill.manifests.byte_ranges import local_descriptor, read_at, read_into
from virtualizarr_fill.manifests.byte_ranges import resolve as _resolve
from virtualizarr_fill.manifests.store import deepest_node, metadata_node
from virtualizarr_fill.manifests.upstream import NEWEST_TESTED
from virtualizarr_fill.reads import PIPELINE_PATH, manifest_reads
from virtualizarr_fill.reads.deinterleave import copy_planes, split_planes, splits_fast
from virtualizarr_fill.reads.manifest_reads import (
    _fetch_and_decode,
    _pieces,
    _Plan,
    _plan,
    _pool,
    plan_entries,
    plan_located,
    read_planned,
)
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline
from virtualizarr_fill.zarr_metadata import copy_with_attributes, json_copy

if TYPE_CHECKING:
    from zarr.abc.codec import CodecPipeline
    from zarr.core.buffer import BufferPrototype, NDArrayLikeOrScalar, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.indexing import Indexer
    from zarr.core.metadata import ArrayMetadata


#: Decoded chunk size up to which a read of many chunks is assembled from one array of
#: whole chunks (one copy into the output for all of them); larger chunks are copied
#: into the output one at a time, which saves that extra copy.
BLOCK_CHUNK_BYTES = 64 << 10
#: Fewest chunks in a read assembled from an array of whole chunks.
BLOCK_MIN_CHUNKS = 16
#: Decoded bytes up to which chunks stored as plain numbers are joined into one bytes
#: object (one call, where copying each into an array costs time per chunk); a
#: larger read copies them, keeping its peak memory at twice the array.
JOIN_BYTES = 64 << 20
#: Bytes read at a time from one run of chunks stored as plain numbers whose layout the
#: output changes (:func:`_read_span_in_pieces`): small enough to stay in the
#: processor's cache between the read and the copy, large enough that the Python around
#: each piece costs little next to it.
SPAN_PIECE_BYTES = 512 << 10

_zarr_get_selection = zarr_array._get_selection
_zarr_array_getitem = zarr_array.Array.__getitem__
_zarr_get_basic_selection = zarr_array.Array.get_basic_selection
_zarr_get_orthogonal_selection = zarr_array.Array.get_orthogonal_selection
_zarr_group_getitem = Group.__getitem__
_zarr_read_metadata_v3 = zarr_group._read_metadata_v3
_zarr_get_node_v3 = zarr_group._get_node_v3
_zarr_open_group = zarr_sync_api.open_group

#: How a read fetches and decodes the chunks of a plan.
_Run = Callable[[ManifestStore, "_Plan", Sequence[Any], Any], Awaitable[None]]


class _Chunks(Sequence[tuple[None, ArraySpec, tuple[Any, ...], tuple[Any, ...], bool]]):
    """The pipeline's chunk descriptions for the chunks of a basic selection, in zarr's
    order (the product of the dimensions' projections), each built when asked for."""

    def __init__(
        self,
        dims: list[list[ChunkDimProjection]],
        specs: list[list[int]] | ArraySpec,
        spec_of: Any,
    ) -> None:
        self._sizes = [len(d) for d in dims][::-1]  # innermost first, as items unravel
        self._count = math.prod(self._sizes)
        self._chunk_selections = [[p.dim_chunk_sel for p in d] for d in dims]
        # A dimension an integer selects is dropped from the output: no place in it.
        self._out_selections = [
            [p.dim_out_sel for p in d] for d in dims if d and d[0].dim_out_sel is not None
        ]
        self._out_dims = [k for k, d in enumerate(dims) if d and d[0].dim_out_sel is not None]
        self._complete = [[p.is_complete_chunk for p in d] for d in dims]
        self._specs = specs
        self._spec_of = spec_of

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, item: Any) -> Any:
        if not isinstance(item, int):
            raise TypeError("one chunk at a time")
        if not 0 <= item < self._count:
            raise IndexError(item)
        # ``map`` with ``operator.getitem``: a description costs a few C calls per
        # dimension instead of a generator each (a read of a few small chunks builds
        # one per chunk, about as long as decoding a small strip).
        picks = []
        for size in self._sizes:
            item, k = divmod(item, size)
            picks.append(k)
        picks.reverse()
        if isinstance(self._specs, ArraySpec):
            spec = self._specs
        else:
            spec = self._spec_of(tuple(map(operator.getitem, self._specs, picks)))
        out_picks = [picks[k] for k in self._out_dims]
        return (
            None,
            spec,
            tuple(map(operator.getitem, self._chunk_selections, picks)),
            tuple(map(operator.getitem, self._out_selections, out_picks)),
            all(map(operator.getitem, self._complete, picks)),
        )


def _manifest_array(store_path: StorePath) -> ManifestArray | None:
    store = store_path.store
    if not isinstance(store, ManifestStore):
        return None
    if not hasattr(store, "_group") or not hasattr(store, "_registry"):
        return None
    node, suffix = deepest_node(store._group, store_path.path)
    if not isinstance(node, ManifestArray) or suffix:
        return None
    manifest = node.manifest
    if not all(hasattr(manifest, a) for a in ("_paths", "_offsets", "_lengths", "_inlined")):
        return None  # a VirtualiZarr whose manifest layout this module does not know
    return node


def _applicable(
    store_path: StorePath,
    metadata: ArrayMetadata,
    codec_pipeline: CodecPipeline,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    out: Any,
    fields: Any,
) -> ManifestArray | None:
    """The ManifestArray a read reads, if this module reads it (else zarr does)."""
    if (
        isinstance(codec_pipeline, ManifestCodecPipeline)
        and codec_pipeline.reads_manifests
        and metadata.zarr_format == 3
        and out is None
        and not fields
        and config.read_missing_chunks
        and len(chunk_grid._dimensions) == len(metadata.shape)
    ):
        return _manifest_array(store_path)
    return None


async def get_selection(
    store_path: StorePath,
    metadata: ArrayMetadata,
    codec_pipeline: CodecPipeline,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    indexer: Indexer,
    *,
    prototype: BufferPrototype,
    out: NDBuffer | None = None,
    fields: Any = None,
) -> NDArrayLikeOrScalar:
    """zarr's ``_get_selection``, reading ManifestStores through the manifest pipeline
    without per-chunk store paths (see the module)."""
    node = _applicable(store_path, metadata, codec_pipeline, config, chunk_grid, out, fields)
    if node is not None:
        assert isinstance(codec_pipeline, ManifestCodecPipeline)
        selected = await _select(
            store_path.store, node, metadata, codec_pipeline, config, chunk_grid, indexer,
            prototype, read_planned,
        )  # fmt: skip
        if selected is not _NOT_NUMPY:
            return selected
    return await _zarr_get_selection(
        store_path,
        metadata,
        codec_pipeline,
        config,
        chunk_grid,
        indexer,
        prototype=prototype,
        out=out,
        fields=fields,
    )


#: The answer of a read this module leaves to zarr (buffers that are not NumPy arrays).
_NOT_NUMPY: Any = object()


async def _select(
    store: Any,
    node: ManifestArray,
    metadata: ArrayMetadata,
    pipeline: ManifestCodecPipeline,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    indexer: Indexer,
    prototype: BufferPrototype,
    run: _Run,
) -> Any:
    """The selected values (what zarr's ``_get_selection`` returns), or :data:`_NOT_NUMPY`."""
    out_buffer = prototype.nd_buffer.empty(
        shape=indexer.shape, dtype=metadata.dtype.to_native_dtype(), order=config.order
    )
    target = out_buffer.as_ndarray_like()
    if not isinstance(target, np.ndarray):
        return _NOT_NUMPY
    if target.size:
        await _read(
            store, node, metadata, pipeline, config, chunk_grid, indexer, prototype, target, run
        )
    if isinstance(indexer, BasicIndexer) and indexer.shape == ():
        return out_buffer.as_scalar()
    return target


async def _read_blocking(
    store: ManifestStore, plan: _Plan, batch: Sequence[Any], decode: Any
) -> None:
    """:func:`read_planned` without the event loop (it never suspends): the calling
    thread reads a small read from one file itself; the pieces of a large one, or the
    files of one spanning several, are shared between it and worker threads (it would
    otherwise only wait: a read of one piece handed to a worker took longer than
    reading it here)."""
    if not manifest_reads.threaded(plan) and len(plan.by_file) <= 1:
        _fetch_and_decode(store, plan, batch, decode)
        return
    pieces = list(_pieces(plan, manifest_reads.sharing_workers(plan)))
    if not pieces:
        return
    pool = _pool()
    waiting = [pool.submit(_fetch_and_decode, store, piece, batch, decode) for piece in pieces[1:]]
    try:
        _fetch_and_decode(store, pieces[0], batch, decode)
    finally:
        # No worker may still write into the output once the read has returned or failed.
        concurrent.futures.wait(waiting)
    for future in waiting:
        future.result()


def _blocking_select(array: Any, indexer: Indexer, out: Any, fields: Any, prototype: Any) -> Any:
    """What zarr's synchronous ``Array`` methods return for ``indexer``, read in the
    calling thread when this module reads it (:data:`_NOT_NUMPY` otherwise): zarr's own
    way hands the read to its event loop thread and waits, at every read."""
    async_array = array.async_array
    node = _applicable(
        async_array.store_path, async_array.metadata, async_array.codec_pipeline,
        async_array.config, async_array._chunk_grid, out, fields,
    )  # fmt: skip
    if node is None:
        return _NOT_NUMPY
    coroutine = _select(
        async_array.store_path.store, node, async_array.metadata, async_array.codec_pipeline,
        async_array.config, async_array._chunk_grid, indexer,
        prototype or default_buffer_prototype(), _read_blocking,
    )  # fmt: skip
    selected = _run_here(coroutine)
    # Nothing here waits on a loop; should something, zarr reads it again its own way.
    return _NOT_NUMPY if selected is _WAITS else selected


def _selected_here(
    array: Any, indexer_type: Any, selection: Any, out: Any, fields: Any, prototype: Any
) -> Any:
    """The selection read in the calling thread, or :data:`_NOT_NUMPY` where zarr's own
    method must read it."""
    if not _applicable_array(array, out, fields):
        return _NOT_NUMPY
    indexer = indexer_type(selection, array.shape, array._chunk_grid)
    return _blocking_select(array, indexer, out, fields, prototype)


def _slices_integers_ellipsis(selection: Any) -> bool:
    """Whether ``selection`` is a slice, an integer or an ellipsis, or a tuple of them:
    a basic selection, and an orthogonal one with the same values. Python's own types
    only (a NumPy integer, a bool and every other kind of selection are zarr's to sort
    out)."""
    parts = selection if type(selection) is tuple else (selection,)
    for part in parts:
        kind = type(part)
        if kind is not slice and kind is not int and part is not Ellipsis:
            return False
    return True


def array_getitem(self: Any, selection: Any) -> Any:
    """zarr's ``Array.__getitem__``, a selection of slices, integers and an ellipsis
    read as the basic selection it is (:func:`get_basic_selection`) where this module
    reads it.

    zarr tests each such selection for fancy, then orthogonal, indexing, reads a tuple
    as an orthogonal selection (xarray's reads among them) and builds an orthogonal
    indexer for it, which takes about as long as the rest of planning the read of one
    small tile. The values are the same either way."""
    if _slices_integers_ellipsis(selection):
        selected = _selected_here(self, BasicIndexer, selection, None, None, None)
        if selected is not _NOT_NUMPY:
            return selected
    return _zarr_array_getitem(self, selection)


def get_basic_selection(
    self: Any,
    selection: Any = Ellipsis,
    *,
    out: Any = None,
    prototype: Any = None,
    fields: Any = None,
) -> Any:
    """zarr's ``Array.get_basic_selection``, read in the calling thread where this
    module reads it (:func:`_blocking_select`)."""
    selected = _selected_here(self, BasicIndexer, selection, out, fields, prototype)
    if selected is not _NOT_NUMPY:
        return selected
    return _zarr_get_basic_selection(self, selection, out=out, prototype=prototype, fields=fields)


def get_orthogonal_selection(
    self: Any,
    selection: Any,
    *,
    out: Any = None,
    fields: Any = None,
    prototype: Any = None,
) -> Any:
    """zarr's ``Array.get_orthogonal_selection``, read in the calling thread where this
    module reads it (:func:`_blocking_select`)."""
    selected = _selected_here(self, OrthogonalIndexer, selection, out, fields, prototype)
    if selected is not _NOT_NUMPY:
        return selected
    return _zarr_get_orthogonal_selection(
        self, selection, out=out, fields=fields, prototype=prototype
    )


def group_getitem(self: Any, path: str) -> Any:
    """zarr's ``Group.__getitem__``, opened in the calling thread for a group of a
    ManifestStore read with the manifest pipeline.

    zarr hands every open to its event loop thread and waits (most of the cost of
    opening one array of a file with a thousand); opening from a ManifestStore never
    waits on anything (its ``zarr.json`` documents are in memory, see
    :class:`~virtualizarr_fill.manifests.FileManifestStore`), so the same coroutine runs to
    its end here.
    Anything that would wait goes to zarr's own ``__getitem__``."""
    async_group = self._async_group
    if (
        isinstance(async_group.store_path.store, ManifestStore)
        and async_group.metadata.zarr_format == 3
        and _reads_with_manifest_pipeline()
    ):
        opened = _run_here(async_group.getitem(path))
        if opened is not _WAITS:
            return zarr_array.Array(opened) if isinstance(opened, AsyncArray) else Group(opened)
    return _zarr_group_getitem(self, path)


#: :func:`_run_here`'s answer for a coroutine that would wait on an event loop.
_WAITS: Any = object()


def _run_here(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``coroutine``'s result, run in the calling thread, or :data:`_WAITS` (and the
    coroutine closed) when it would wait on an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    except RuntimeError as error:
        # asyncio's words for "no running loop" and for "no current loop" (gather)
        if "event loop" not in str(error):
            raise
        return _WAITS
    coroutine.close()
    return _WAITS


# zarr's ``open_group``, run in the calling thread for a ManifestStore opened read-only
# and read with the manifest pipeline. zarr hands the open to its event-loop thread and
# waits, most of what the open costs (a good part of reading a small TIFF whole);
# nothing in opening a ManifestStore waits (see :func:`group_getitem`), so zarr's own
# coroutine runs to its end here. Any other open, or one that would wait, is zarr's own.
# It keeps zarr's name, docstring and signature: it replaces zarr's public function.
@functools.wraps(_zarr_open_group)
def open_group(store: Any = None, **kwargs: Any) -> Any:
    if (
        isinstance(store, ManifestStore)
        and kwargs.get("mode") == "r"
        and _reads_with_manifest_pipeline()
    ):
        if kwargs.get("zarr_format") is None:
            # A ManifestStore holds zarr format 3 only; zarr would look for both formats
            # at once, which takes an event loop.
            kwargs = {**kwargs, "zarr_format": 3}
        kept = _kept_group(store, kwargs)
        if kept is not None:
            return kept
        opened = _run_here(zarr_async_api.open_group(store, **kwargs))
        if opened is not _WAITS:
            return Group(opened)
    return _zarr_open_group(store, **kwargs)


#: The arguments of a plain read-only open of a group (:func:`_kept_group`).
_PLAIN_OPEN = frozenset({"mode", "zarr_format", "path", "use_consolidated", "storage_options"})


def _kept_group(store: ManifestStore, kwargs: dict[str, Any]) -> Any:
    """A plain read-only open of the group at the store's root: the group with a copy of
    its kept parse (:func:`read_metadata_v3`), which is what zarr's open parses from the
    same ``zarr.json`` (half the time of opening it); None for anything else."""
    if (
        not (store.read_only and store._is_open)  # zarr would open it or copy it
        or not _PLAIN_OPEN.issuperset(kwargs)
        or kwargs.get("path") not in (None, "")
        or kwargs.get("use_consolidated") not in (None, False)
        or kwargs.get("storage_options")
    ):
        return None
    parsed = _run_here(_parsed_node(store, ""))
    if parsed is _WAITS or parsed is None:
        return None
    metadata = parsed.fresh_metadata()
    if not isinstance(metadata, GroupMetadata) or metadata.consolidated_metadata is not None:
        return None
    return Group(AsyncGroup(metadata=metadata, store_path=StorePath(store, "")))


async def read_metadata_v3(store: Any, path: str) -> Any:
    """zarr's ``_read_metadata_v3`` (the metadata object of the node at ``path``), for a
    ManifestStore read with the manifest pipeline parsed once per node and path.

    zarr parses a node's ``zarr.json`` into a metadata object at every open, most of
    the cost of opening a small array. A ManifestStore's documents do not change
    (``FileManifestStore`` encodes each once), so the first parse is
    kept with the node's metadata and each open gets a copy of it whose attributes are
    its own (zarr updates them in place), equal to a fresh parse."""
    parsed = await _parsed_node(store, path)
    if parsed is None:
        return await _zarr_read_metadata_v3(store, path)
    return parsed.fresh_metadata()


async def get_node_v3(store: Any, path: str) -> Any:
    """zarr's ``_get_node_v3`` (the array or group at ``path``), for an array of a
    ManifestStore read with the manifest pipeline built once per node and configuration.

    zarr's ``AsyncArray`` parses its runtime configuration from ``zarr.config``, derives
    its chunk grid and builds a codec pipeline at every open: most of the cost of
    opening an array whose metadata is already parsed (:func:`read_metadata_v3`). All three
    depend only on that metadata, the store and the configuration, so the first open's
    array is kept and each later open is a copy of it with its own metadata copy."""
    parsed = await _parsed_node(store, path)
    if parsed is None:
        return await _zarr_get_node_v3(store, path)
    metadata = parsed.fresh_metadata()
    if not isinstance(metadata, ArrayV3Metadata):
        return zarr_group._build_node(store=store, path=path, metadata=metadata)
    config = _array_config()
    kept = parsed.array
    if kept is None or kept.config is not config or kept.store_path.store is not store:
        # Built on a copy of its own, never handed out: opens may change theirs.
        kept = parsed.array = AsyncArray(
            parsed.fresh_metadata(), store_path=StorePath(store, path), config=config
        )
    opened = copy.copy(kept)
    object.__setattr__(opened, "metadata", metadata)
    return opened


class _ParsedNode:
    """A ManifestStore node's parsed metadata, and the array first opened from it."""

    __slots__ = ("array", "metadata")

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self.array: AsyncArray[Any] | None = None

    def fresh_metadata(self) -> Any:
        """A copy of the parsed metadata with attributes of its own."""
        attributes = json_copy(self.metadata.attributes)
        if isinstance(self.metadata, ArrayV3Metadata):
            return copy_with_attributes(self.metadata, attributes)
        fresh = copy.copy(self.metadata)
        object.__setattr__(fresh, "attributes", attributes)
        return fresh


async def _parsed_node(store: Any, path: str) -> _ParsedNode | None:
    """The kept parse of the node at ``path``, parsed now if it is the first open; None
    for any other store or pipeline, or a path with no node."""
    if not (isinstance(store, ManifestStore) and _reads_with_manifest_pipeline()):
        return None
    node = metadata_node(store._group, _join_paths([path, "zarr.json"]))
    if node is None:
        return None
    parsed = _parsed_metadata(node.metadata)
    found = parsed.get(path)
    if found is None:
        found = parsed[path] = _ParsedNode(await _zarr_read_metadata_v3(store, path))
    return found


#: The names of zarr's runtime array configuration, each read from ``zarr.config``.
_ARRAY_CONFIG_NAMES = tuple(f.name for f in dataclasses.fields(ArrayConfig))
#: zarr's array configuration, by the configuration values it was parsed from.
_array_configs: dict[tuple[Any, ...], ArrayConfig] = {}


def _array_config() -> ArrayConfig:
    """The ``ArrayConfig`` zarr derives from ``zarr.config`` for an array opened without
    one, the same object while those values stay the same (parsing it anew costs more
    than reading the values)."""
    # One lookup of the section: a ``zarr.config.get`` per name costs one each open.
    section = zarr.config.get("array", None)
    if isinstance(section, dict):
        values = tuple(section.get(name) for name in _ARRAY_CONFIG_NAMES)
    else:
        values = tuple(zarr.config.get(f"array.{name}") for name in _ARRAY_CONFIG_NAMES)
    try:
        found = _array_configs.get(values)
    except TypeError:  # a value that does not hash
        return ArrayConfig.from_dict({})
    if found is None:
        if len(_array_configs) >= 16:
            _array_configs.clear()
        found = _array_configs[values] = ArrayConfig.from_dict({})
    return found


def _kept_with[T](table: dict[int, T], owner: Any, make: Callable[[Any], T]) -> T:
    """``make(owner)``, made once and kept in ``table`` by ``owner``'s id (hashing the
    objects kept this way costs more than what is kept saves), dropped with ``owner``:
    the id may be reused once the object is gone."""
    key = id(owner)
    if key in table:
        return table[key]
    found = table[key] = make(owner)
    weakref.finalize(owner, table.pop, key, None)
    return found


# The parsed metadata of each ManifestStore node (by path), by the node's own metadata
# object (hashing one costs a conversion to a dict).
_parsed: dict[int, dict[str, _ParsedNode]] = {}


def _parsed_metadata(metadata: Any) -> dict[str, _ParsedNode]:
    return _kept_with(_parsed, metadata, lambda _: {})


def _reads_with_manifest_pipeline() -> bool:
    return zarr.config.get("codec_pipeline.path", None) == PIPELINE_PATH


def _applicable_array(array: Any, out: Any, fields: Any) -> bool:
    """A cheap first test: the array reads with the manifest pipeline."""
    return (
        out is None
        and not fields
        and isinstance(array.async_array.codec_pipeline, ManifestCodecPipeline)
    )


async def _read(
    store: ManifestStore,
    node: ManifestArray,
    metadata: ArrayMetadata,
    pipeline: ManifestCodecPipeline,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    indexer: Indexer,
    prototype: BufferPrototype,
    target: np.ndarray[Any, Any],
    run: _Run,
) -> None:
    def spec_of(shape: tuple[int, ...]) -> ArraySpec:
        return _array_spec(shape, metadata.dtype, metadata.fill_value, config, prototype)

    manifest: Any = node.manifest
    ndim = len(metadata.shape)
    batch: Sequence[Any]
    if isinstance(indexer, BasicIndexer) or _slices_and_integers(indexer):
        grids = chunk_grid._dimensions
        ranges = _step_one_ranges(indexer)
        count = math.prod(len(r) for r in ranges) if ranges is not None else 0
        many = count >= BLOCK_MIN_CHUNKS
        # Pixel-interleaved chunks, enough bytes together for OpenCV to split them into
        # bands at once (see SPLIT_AT_ONCE_BYTES).
        split = count > 1 and _interleaved(pipeline) and splits_fast(target.nbytes)
        if ranges is not None and (many or split or _plain_numbers(pipeline)):
            layout = _block_layout(grids, ranges, spec_of)
            if layout is not None:
                lattice = _Lattice(store, manifest, pipeline, layout, indexer, ranges, target, run)
                if await _read_in_place(lattice):
                    return
                chunk_nbytes = math.prod(layout[0].shape) * target.itemsize
                if (many and chunk_nbytes <= BLOCK_CHUNK_BYTES) or (
                    split and _split_at_once(layout[0].shape, count * chunk_nbytes, target)
                ):
                    await _read_blocks(lattice)
                    return
        if ranges is not None:
            dims = _step_one_projections(indexer, ranges)
            plan = _plan_ranges(manifest, ranges)
        else:
            dims = [list(d) for d in indexer.dim_indexers]
            plan = _plan_indices(manifest, [[p.dim_chunk_ix for p in d] for d in dims])
        per_dim = [
            [g.chunk_size(p.dim_chunk_ix) for p in dim] for g, dim in zip(grids, dims, strict=True)
        ]
        regular = all(isinstance(g, FixedDimension) for g in grids)
        batch = _Chunks(dims, spec_of(chunk_grid.chunk_shape) if regular else per_dim, spec_of)
        drop_axes: tuple[int, ...] = ()
    else:
        projections = list(indexer)
        batch = [
            (
                None,
                spec_of(
                    tuple(
                        g.chunk_size(i)
                        for g, i in zip(chunk_grid._dimensions, p.chunk_coords, strict=True)
                    )
                ),
                p.chunk_selection,
                p.out_selection,
                p.is_complete_chunk,
            )
            for p in projections
        ]
        coords = [tuple(p.chunk_coords) for p in projections]
        if len(coords) <= manifest_reads.FEW_CHUNKS:
            plan = plan_entries(manifest, coords)
        else:
            plan = _plan(manifest, np.array(coords, dtype=np.intp).reshape(len(coords), ndim))
        drop_axes = indexer.drop_axes
    plan.decoded_nbytes = target.nbytes
    await run(store, plan, batch, pipeline.decoder(drop_axes, target))
    for i in plan.missing:
        _, spec, _, out_selection, _ = batch[i]
        target[out_selection] = fill_value_or_default(spec)


#: zarr's chunk specs (:func:`_array_spec`), by chunk shape, buffer prototype and the
#: ids of the other arguments, each kept with those arguments (so that the ids are not
#: reused).
_specs: dict[tuple[Any, ...], tuple[Any, ...]] = {}
#: Chunk specs kept.
SPECS_KEPT = 256


def _array_spec(
    shape: tuple[int, ...], dtype: Any, fill_value: Any, config: ArrayConfig, prototype: Any
) -> ArraySpec:
    """zarr's ``ArraySpec`` of a chunk: the same object for the same arguments (an
    ``ArraySpec`` is immutable, and zarr's parse of its shape and fill value costs as
    much as planning the rest of the read of a small file). Every open of an array
    shares its metadata's data type and fill value objects (:func:`read_metadata_v3`)."""
    # A buffer prototype is a new tuple at every read: compared by value (two classes).
    key = (shape, id(dtype), id(fill_value), id(config), prototype)
    kept = _specs.get(key)
    if kept is not None:
        return kept[-1]  # type: ignore[no-any-return]
    spec = ArraySpec(
        shape=shape, dtype=dtype, fill_value=fill_value, config=config, prototype=prototype
    )
    if len(_specs) >= SPECS_KEPT:
        _specs.clear()
    _specs[key] = (dtype, fill_value, config, prototype, spec)
    return spec


def _plan_product(manifest: Any, indices: Sequence[Sequence[int]]) -> _Plan:
    """Where the chunks of the product of per-dimension grid indices are (zarr's order)."""
    count = math.prod(len(ix) for ix in indices)
    if count <= manifest_reads.FEW_CHUNKS:
        return plan_entries(manifest, list(itertools.product(*indices)))
    if not indices:
        return _plan(manifest, np.zeros((1, 0), dtype=np.intp))
    ix = [np.asarray(i, dtype=np.intp) for i in indices]
    return _plan(manifest, np.stack(np.meshgrid(*ix, indexing="ij"), axis=-1).reshape(-1, len(ix)))


def _plan_indices(manifest: Any, indices: list[list[int]]) -> _Plan:
    """:func:`_plan_product`, by :func:`_plan_ranges` where each dimension's indices
    are consecutive."""
    ranges = [range(ix[0], ix[-1] + 1) if ix else range(0) for ix in indices]
    if all(len(r) == len(ix) and list(r) == ix for r, ix in zip(ranges, indices, strict=True)):
        return _plan_ranges(manifest, ranges)
    return _plan_product(manifest, indices)


def _plan_ranges(manifest: Any, ranges: list[range]) -> _Plan:
    """:func:`_plan_product` of step-1 ranges: the manifest's arrays sliced, which costs
    far less than indexing them with the grid indices of every chunk."""
    count = math.prod(len(r) for r in ranges)
    if count <= manifest_reads.FEW_CHUNKS or manifest._inlined or not manifest._paths.ndim:
        return _plan_product(manifest, ranges)
    where = tuple(slice(r.start, r.stop) for r in ranges)
    return plan_located(
        manifest._paths[where].reshape(-1),
        manifest._offsets[where].reshape(-1),
        manifest._lengths[where].reshape(-1),
        {},
    )


def _slices_and_integers(indexer: Indexer) -> TypeGuard[OrthogonalIndexer]:
    """An orthogonal selection of slices and integers only: a basic one (zarr's
    ``Array.__getitem__`` reads every tuple of slices and integers, xarray's reads
    among them, as an orthogonal selection)."""
    return isinstance(indexer, OrthogonalIndexer) and all(
        isinstance(dim, (IntDimIndexer, SliceDimIndexer)) for dim in indexer.dim_indexers
    )


def _step_one_ranges(indexer: BasicIndexer | OrthogonalIndexer) -> list[range] | None:
    """The grid indices of the chunks a basic selection of step-1 slices and integers
    reads, per dimension (every chunk in each range holds selected items); None for
    other selections."""
    ranges = []
    for dim in indexer.dim_indexers:
        grid = dim.dim_grid
        if isinstance(dim, IntDimIndexer):
            index = grid.index_to_chunk(dim.dim_sel)
            ranges.append(range(index, index + 1))
        elif isinstance(dim, SliceDimIndexer) and dim.step == 1 and dim.start < dim.stop:
            first, last = grid.index_to_chunk(dim.start), grid.index_to_chunk(dim.stop - 1)
            ranges.append(range(first, last + 1))
        else:
            return None
    return ranges


def _step_one_projections(
    indexer: BasicIndexer | OrthogonalIndexer, ranges: list[range]
) -> list[list[ChunkDimProjection]]:
    """What zarr's dimension indexers yield (``list(dim_indexer)`` per dimension) for a
    selection of step-1 slices and integers whose chunks are ``ranges``
    (:func:`_step_one_ranges`): the same projections, from each chunk's offset and size
    in zarr's grid. zarr's iterators handle any step, at a cost per chunk as large as
    the rest of planning the read of a few small chunks."""
    dims = []
    for dim, indices in zip(indexer.dim_indexers, ranges, strict=True):
        grid = dim.dim_grid
        projections = []
        if isinstance(dim, IntDimIndexer):
            index = indices.start
            offset = grid.chunk_offset(index)
            projections.append(
                ChunkDimProjection(index, dim.dim_sel - offset, None, grid.data_size(index) == 1)
            )
        else:
            assert isinstance(dim, SliceDimIndexer)  # _step_one_ranges checked
            start, stop = dim.start, dim.stop
            for index in indices:
                offset = grid.chunk_offset(index)
                limit = offset + grid.data_size(index)
                first = max(start, offset)
                last = min(stop, limit)
                projections.append(
                    ChunkDimProjection(
                        index,
                        slice(first - offset, last - offset, 1),
                        slice(first - start, last - start),
                        first == offset and stop >= limit,
                    )
                )
        dims.append(projections)
    return dims


def _block_layout(
    grids: Sequence[Any],
    ranges: list[range],
    spec_of: Callable[[tuple[int, ...]], ArraySpec],
) -> tuple[ArraySpec, dict[int, ArraySpec]] | None:
    """The spec of a whole chunk when the chunks of ``ranges`` lie on a regular lattice,
    and the specs of the chunks that are shorter (by item, in their product's order).

    Regular grids are such a lattice; so are rectilinear dimensions whose chunks all have
    one size but the grid's last, which may be shorter (a TIFF's last strip, a file
    concatenated last): that chunk fills the start of its place in the lattice. None for
    other rectilinear grids."""
    sizes = []
    shorts: dict[int, int] = {}  # axis -> short size, for dimensions reading a short last chunk
    for axis, (grid, indices) in enumerate(zip(grids, ranges, strict=True)):
        if isinstance(grid, FixedDimension):
            sizes.append(grid.size)
            continue
        edges = getattr(grid, "edges", None)
        if not edges:
            return None
        size = edges[0]
        uniform = edges.count(size)  # a C loop: rectilinear grids may have many edges
        if uniform != len(edges) and not (uniform == len(edges) - 1 and edges[-1] < size):
            return None
        sizes.append(size)
        if edges[-1] < size and indices[-1] == len(edges) - 1:
            shorts[axis] = edges[-1]
    short: dict[int, ArraySpec] = {}
    if shorts:
        # The chunks at the last index of a short axis, each with its shape: their
        # product indices picked directly (a lattice may hold many chunks, few short).
        counts = [len(r) for r in ranges]
        strides = [math.prod(counts[axis + 1 :]) for axis in range(len(counts))]
        for axis in shorts:
            picks = [range(n) if other != axis else (n - 1,) for other, n in enumerate(counts)]
            for pick in itertools.product(*picks):
                item = sum(k * stride for k, stride in zip(pick, strides, strict=True))
                if item not in short:
                    short[item] = spec_of(
                        tuple(
                            shorts[a] if a in shorts and k == counts[a] - 1 else size
                            for a, (k, size) in enumerate(zip(pick, sizes, strict=True))
                        )
                    )
    return spec_of(tuple(sizes)), short


@dataclasses.dataclass(frozen=True)
class _Lattice:
    """A step-1 selection of chunks on a lattice (:func:`_block_layout`) to read into
    ``target``: what :func:`_read_in_place` and :func:`_read_blocks` take."""

    store: ManifestStore
    manifest: Any
    pipeline: ManifestCodecPipeline
    layout: tuple[ArraySpec, dict[int, ArraySpec]]
    indexer: BasicIndexer | OrthogonalIndexer
    ranges: list[range]
    target: np.ndarray[Any, Any]
    run: _Run

    @functools.cached_property
    def plan(self) -> _Plan:
        """Where the chunks are (located once for both ways of reading them)."""
        return _plan_ranges(self.manifest, self.ranges)

    @functools.cached_property
    def selection(self) -> tuple[list[slice], np.ndarray[Any, Any]]:
        """The selection within the whole chunks, and ``target`` with the axes it drops
        put back (size 1), so that the two have the same dimensions."""
        selection, dropped = _block_selection(self.indexer, self.ranges, self.layout[0].shape)
        view = np.expand_dims(self.target, tuple(dropped)) if dropped else self.target
        return selection, view


async def _read_blocks(lattice: _Lattice) -> None:
    """A step-1 basic selection of chunks on a lattice (:func:`_block_layout`): every
    chunk decoded into one array of whole chunks (in the order of the product of
    ``ranges``), its selected part copied into ``target`` at once. zarr's per-chunk
    projections are not needed, nor built."""
    store, pipeline, target = lattice.store, lattice.pipeline, lattice.target
    spec, short = lattice.layout
    chunk_shape = spec.shape
    counts = [len(r) for r in lattice.ranges]
    selection, view = lattice.selection
    items: list[Any] = [None] * math.prod(counts)  # the decoders need only the count
    if pipeline.raw is not None and pipeline.raw.rows_whole(spec, short):
        if await _read_span_in_pieces(lattice):
            return
        blocks = await _stored_blocks(lattice, items)
    else:
        plan = lattice.plan
        blocks = np.empty((len(items), *chunk_shape), dtype=target.dtype)
        plan.decoded_nbytes = blocks.nbytes
        await lattice.run(store, plan, items, pipeline.block_decoder(blocks, spec, short))
        if plan.missing:
            blocks[plan.missing] = fill_value_or_default(spec)
    _copy_lattice(view, blocks, counts, chunk_shape, selection)


def _copy_lattice(
    view: np.ndarray[Any, Any],
    blocks: np.ndarray[Any, Any],
    counts: list[int],
    chunk_shape: tuple[int, ...],
    selection: list[slice],
) -> None:
    """``view[...] = _lattice_array(blocks, counts, chunk_shape)[selection]``, copied
    once: the chunks are not joined into one array first (a copy of its own).

    Along each axis the selection is cut into its whole chunks and the parts of chunks
    at either end (:func:`_axis_boxes`); each box of the product of those cuts is one
    copy, from the chunks into the output viewed with the same axes split in two
    (chunk, within the chunk), which splitting an axis of any view gives as a view.
    Pixel-interleaved chunks are split into bands all at once first
    (:func:`_band_planes`). NumPy's assignment converts a stored byte order."""
    blocks = _band_planes(blocks)
    lattice = blocks.reshape(*counts, *chunk_shape)
    ndim = len(chunk_shape)
    chunk_axes_first = [*range(0, 2 * ndim, 2), *range(1, 2 * ndim, 2)]
    if all(
        part.start == 0 and part.stop == n * length
        for part, n, length in zip(selection, counts, chunk_shape, strict=True)
    ):  # the whole lattice, the read of a whole array: one box
        split = [size for pair in zip(counts, chunk_shape, strict=True) for size in pair]
        view.reshape(split).transpose(chunk_axes_first)[...] = lattice
        return
    for boxes in itertools.product(*map(_axis_boxes, selection, chunk_shape)):
        out = view[tuple(box.out for box in boxes)]
        split = [size for box in boxes for size in box.split]
        source = lattice[tuple(box.chunks for box in boxes) + tuple(box.within for box in boxes)]
        out.reshape(split).transpose(chunk_axes_first)[...] = source


class _AxisBox(NamedTuple):
    """A run of chunks along one axis, and the same part of each: where it is in the
    output, which chunks (of the lattice's), and which items of each."""

    out: slice
    chunks: slice
    within: slice
    split: tuple[int, int]  # how many chunks, how many items of each


def _axis_boxes(selected: slice, chunk_length: int) -> list[_AxisBox]:
    """The step-1 ``selected`` items of chunks of ``chunk_length`` laid one after the
    other, as the whole chunks it holds and the parts of chunks at either end."""
    start, stop = selected.start, selected.stop

    def box(chunk_from: int, chunk_to: int, low: int, high: int) -> _AxisBox:
        out_from = chunk_from * chunk_length + low - start
        out_to = (chunk_to - 1) * chunk_length + high - start
        return _AxisBox(
            slice(out_from, out_to),
            slice(chunk_from, chunk_to),
            slice(low, high),
            (chunk_to - chunk_from, high - low),
        )

    first, last = start // chunk_length, (stop - 1) // chunk_length
    head, tail = start - first * chunk_length, stop - last * chunk_length
    if first == last:
        return [box(first, first + 1, head, tail)]
    boxes = []
    if head:
        boxes.append(box(first, first + 1, head, chunk_length))
    whole_from, whole_to = first + (head > 0), last + (tail == chunk_length)
    if whole_from < whole_to:
        boxes.append(box(whole_from, whole_to, 0, chunk_length))
    if tail < chunk_length:
        boxes.append(box(last, last + 1, 0, tail))
    return boxes


def _band_planes(blocks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``blocks`` (chunk, band, y, x) viewing pixel-interleaved chunks laid one after
    the other: the same values as a new array of contiguous band planes, split by
    OpenCV (:func:`~virtualizarr_fill.reads.deinterleave.split_planes`), whose rows the
    boxes of :func:`_copy_lattice` then copy whole, where its rows are long enough
    (:data:`SPLIT_MIN_WIDTH`); ``blocks`` itself otherwise."""
    if blocks.ndim != 4 or blocks.shape[-1] < SPLIT_MIN_WIDTH:
        return blocks
    count, bands, rows, width = blocks.shape
    if blocks.strides[0] != rows * blocks.strides[2]:
        return blocks  # the chunks' rows are not one run of rows: no one split
    # (band, every chunk's rows, x): a view, rows following one another
    source = blocks.transpose(1, 0, 2, 3).reshape(bands, count * rows, width)
    planes = np.empty((bands, count, rows, width), dtype=blocks.dtype)
    if not split_planes(planes.reshape(bands, count * rows, width), source):
        return blocks
    return planes.transpose(1, 0, 2, 3)


def _lattice_array(
    blocks: np.ndarray[Any, Any], counts: list[int], chunk_shape: tuple[int, ...]
) -> np.ndarray[Any, Any]:
    """Whole chunks (one per item, in the order of the product of ``counts`` chunks per
    dimension) as the one array they tile."""
    ndim = len(chunk_shape)
    whole = blocks.reshape(*counts, *chunk_shape)
    whole = whole.transpose([k for d in range(ndim) for k in (d, ndim + d)])
    return whole.reshape([n * c for n, c in zip(counts, chunk_shape, strict=True)])


async def _read_span_in_pieces(lattice: _Lattice) -> bool:
    """Read chunks stored as plain numbers that lie one after the other in one local
    file (:func:`_one_span`) a piece of :data:`SPAN_PIECE_BYTES` at a time, each piece
    copied into the output (predictor undone, transposes undone) while it is still in
    the processor's cache; False, nothing read, for other reads, small ones, or where a
    piece cannot be read (the caller then reads the usual way, which reports why).

    That is a large pixel-interleaved uncompressed TIFF, whose bands are separated by a
    copy (:func:`~virtualizarr_fill.reads.deinterleave.copy_planes`): read whole into a new
    buffer first, the buffer's fresh pages and the cache misses of copying out of it
    cost twice the copy. The file is opened once for all pieces. Reads of
    :data:`~virtualizarr_fill.reads.manifest_reads.THREADED_BYTES` or more split the pieces
    among worker threads (NumPy's strided copies release the GIL), unless OpenCV split
    the first piece: its copy is then quicker than the hand-off."""
    pipeline, (spec, short) = lattice.pipeline, lattice.layout
    raw = pipeline.raw
    if raw is None or pipeline.inner.bytes_bytes_codecs:
        return False
    counts = [len(r) for r in lattice.ranges]
    count = math.prod(counts)
    stored_shape = raw.stored_shape(spec)
    nbytes = math.prod(stored_shape) * raw.view_dtype.itemsize
    split = next((axis for axis, n in enumerate(counts) if n > 1), None)
    if split is None or count * nbytes < 2 * SPAN_PIECE_BYTES:
        return False
    short_last = _short_prefix(raw, stored_shape, short, count)
    span = _one_span(lattice.manifest, lattice.ranges, nbytes, short_last)
    if span is None:
        return False
    url, start, end = span
    obj_store, path = _resolve(lattice.store._registry, url)
    if not isinstance(obj_store, LocalStore):
        return False  # one request for the span: pieces would each be one
    # Axes before ``split`` hold one chunk each, so a range of indices along it is one
    # run of items, and of the span's bytes.
    per_index = math.prod(counts[split + 1 :]) * nbytes
    step = max(1, SPAN_PIECE_BYTES // per_index)
    selection, view = lattice.selection
    chunk_length = spec.shape[split]
    first_selected, last_selected = selection[split].start, selection[split].stop
    # Every chunk of the lattice holds selected items.
    pieces = [(a, min(a + step, counts[split])) for a in range(0, counts[split], step)]

    # The selection along every axis but ``split`` (along it, per piece).
    across = list(selection)
    across[split] = slice(None)

    def piece_values(scratch: np.ndarray[Any, Any], chunks: int) -> np.ndarray[Any, Any]:
        """The values of ``chunks`` chunks along ``split`` read to the start of
        ``scratch``, selected along every other axis: a view of ``scratch`` without a
        predictor. Chunks follow one another along ``split`` in the piece (axes before it
        have one each), so a shorter piece is a prefix of a longer one."""
        blocks = scratch[: chunks * per_index].view(raw.view_dtype).reshape(-1, *stored_shape)
        blocks = raw.untransposed(raw.undo_predictor(blocks))
        piece_counts = [*counts[:split], chunks, *counts[split + 1 :]]
        return _lattice_array(blocks, piece_counts, spec.shape)[tuple(across)]

    def scratch_and_values() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]:
        """A buffer for one piece, and the view of it every piece's values are; None
        where the values are a new array, made after each read (a predictor undone,
        or tiles side by side, which a view cannot join into rows)."""
        scratch = np.empty(step * per_index, dtype=np.uint8)
        if raw.predictor is not None:
            return scratch, None
        values = piece_values(scratch, step)
        # NumPy collapses a chain of views to the array owning the memory.
        return scratch, values if values.base is scratch else None

    def copy_pieces(
        descriptor: int,
        mine: list[tuple[int, int]],
        buffers: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None] | None = None,
    ) -> bool | None:
        """Read and copy the pieces ``mine``: None if one cannot be read, else whether
        the last was split by OpenCV (:func:`~virtualizarr_fill.reads.deinterleave.copy_planes`)."""
        scratch, values = buffers or scratch_and_values()
        # Along ``split`` only: ``values`` is selected along the other axes.
        source_at: list[slice] = [slice(None)] * view.ndim
        dest_at: list[slice] = [slice(None)] * view.ndim
        split_fast = False
        for a, b in mine:
            wanted = (b - a) * per_index
            size = min(wanted, end - start - a * per_index)
            if not read_at(descriptor, start + a * per_index, scratch[:size]):
                return None
            if size < wanted:
                scratch[size:wanted] = 0  # the short last chunk's missing end: never selected
            lo = max(first_selected, a * chunk_length)
            hi = min(last_selected, b * chunk_length)
            source_at[split] = slice(lo - a * chunk_length, hi - a * chunk_length)
            dest_at[split] = slice(lo - first_selected, hi - first_selected)
            source = values if values is not None else piece_values(scratch, b - a)
            split_fast = copy_planes(view[tuple(dest_at)], source[tuple(source_at)])
        return split_fast

    with local_descriptor(obj_store, path) as descriptor:
        if descriptor is None:
            return False
        # pread takes its own offset: threads share the descriptor.
        if count * nbytes < manifest_reads.THREADED_BYTES:
            return copy_pieces(descriptor, pieces) is not None
        mine = scratch_and_values()
        split_fast = copy_pieces(descriptor, pieces[:1], mine)
        if split_fast is None:
            return False
        rest = pieces[1:]
        # OpenCV's split is quicker than handing pieces to other threads.
        workers = 1 if split_fast else min(manifest_reads._max_workers(), len(rest))
        if workers < 2:
            return copy_pieces(descriptor, rest, mine) is not None
        share = -(-len(rest) // workers)
        parts = [rest[k : k + share] for k in range(0, len(rest), share)]
        pool = manifest_reads._pool()
        if lattice.run is _read_blocking:
            others = [pool.submit(copy_pieces, descriptor, part) for part in parts[1:]]
            done = copy_pieces(descriptor, parts[0], mine) is not None
            return all([future.result() is not None for future in others]) and done
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(pool, copy_pieces, descriptor, part) for part in parts)
        )
        return all(result is not None for result in results)


def _block_selection(
    indexer: BasicIndexer | OrthogonalIndexer, ranges: list[range], chunk_shape: tuple[int, ...]
) -> tuple[list[slice], list[int]]:
    """The selection within the whole chunks of ``ranges``, and the axes it drops."""
    selection = []
    dropped = []
    for axis, (dim_indexer, indices) in enumerate(zip(indexer.dim_indexers, ranges, strict=True)):
        first = indices.start * chunk_shape[axis]
        if isinstance(dim_indexer, IntDimIndexer):
            start, stop = dim_indexer.dim_sel - first, dim_indexer.dim_sel - first + 1
            dropped.append(axis)
        else:
            assert isinstance(dim_indexer, SliceDimIndexer)  # _step_one_ranges checked
            start, stop = dim_indexer.start - first, dim_indexer.stop - first
        selection.append(slice(start, stop))
    return selection, dropped


#: Most decoded bytes of a read of several pixel-interleaved chunks that are decoded
#: side by side and split into bands at once (:func:`_read_blocks`, where OpenCV splits
#: them); larger reads split each chunk on its own, keeping the memory they take near
#: the output's. Split one at a time into their places, each plane's rows apart, the
#: 128x128 tiles of a 512x384 RGB image took twice as long to copy.
SPLIT_AT_ONCE_BYTES = 16 << 20


#: Fewest samples in a row of a chunk for its bands to be split by OpenCV into planes
#: of their own before they are copied into place (:func:`_band_planes`). Shorter
#: rows are quicker copied into place by NumPy straight from the interleaved samples
#: (measured on 64x64 and 128x128 RGB tiles: the crossover lies between them).
SPLIT_MIN_WIDTH = 128


def _split_at_once(chunk_shape: tuple[int, ...], nbytes: int, target: np.ndarray[Any, Any]) -> bool:
    """Whether pixel-interleaved chunks of ``chunk_shape`` (band, y, x), ``nbytes``
    together, are split into bands at once for a read of every band into ``target``."""
    return (
        chunk_shape[-1] >= SPLIT_MIN_WIDTH
        and nbytes <= SPLIT_AT_ONCE_BYTES
        and target.ndim == 3
        and target.shape[0] == chunk_shape[0]
    )


def _interleaved(pipeline: ManifestCodecPipeline) -> bool:
    """Whether the chunks are stored as plain numbers (possibly compressed) whose
    (band, y, x) chunks are stored pixel-interleaved: (y, x, band)."""
    raw = pipeline.raw
    return raw is not None and raw.inverse_orders == ((2, 0, 1),)


def _plain_numbers(pipeline: ManifestCodecPipeline) -> bool:
    """Whether the chunks are stored as plain numbers in the array's own order (no
    compression, no transposes): candidates for :func:`_read_in_place`."""
    raw = pipeline.raw
    return (
        raw is not None
        and not raw.inverse_orders
        and raw.predictor is None
        and not pipeline.inner.bytes_bytes_codecs
    )


async def _read_in_place(lattice: _Lattice) -> bool:
    """Read a step-1 selection of chunks on a lattice (:func:`_block_layout`) straight
    into ``target`` when it is one run of the chunks' bytes (:func:`_contiguous_offset`),
    laid one after the other in one local file (:func:`_one_span`); False, nothing read,
    otherwise.

    That is reading an uncompressed strip TIFF, or an HDF5 contiguous dataset, whole
    or by rows: one read, no buffer, no copy (a large buffer's fresh pages cost as
    much as the read)."""
    pipeline = lattice.pipeline
    raw = pipeline.raw
    if raw is None or not _plain_numbers(pipeline):
        return False
    spec, short = lattice.layout
    selection, view = lattice.selection
    counts = [len(r) for r in lattice.ranges]
    if not view.flags.c_contiguous or raw.view_dtype.newbyteorder("=") != view.dtype:
        return False
    offset = _contiguous_offset(counts, spec.shape, selection)
    if offset is None:
        return False
    count = math.prod(counts)
    nbytes = math.prod(spec.shape) * raw.view_dtype.itemsize
    short_last = _short_prefix(raw, spec.shape, short, count)
    span = _one_span(lattice.manifest, lattice.ranges, nbytes, short_last)
    if span is None:
        return False
    url, start, end = span
    out = view.reshape(-1).view(np.uint8)
    start += offset * raw.view_dtype.itemsize
    if start + out.nbytes > end:
        return False
    obj_store, path = _resolve(lattice.store._registry, url)
    if lattice.run is _read_blocking or out.nbytes < manifest_reads.THREADED_BYTES:
        done = read_into(obj_store, path, start, out)
    else:  # a large read, on zarr's event loop: not there
        loop = asyncio.get_running_loop()
        done = await loop.run_in_executor(_pool(), read_into, obj_store, path, start, out)
    if done and raw.view_dtype != view.dtype:
        view.byteswap(inplace=True)
    return done


def _contiguous_offset(
    counts: list[int], chunk_shape: tuple[int, ...], selection: list[slice]
) -> int | None:
    """Where ``selection`` starts (in items) in the whole chunks laid one after the
    other (``counts`` of ``chunk_shape`` per dimension, each in C order), when those
    are the combined array in C order and the selection is one run of it; None
    otherwise.

    The chunks are the combined array when they split one dimension, every dimension
    before it of size 1; a selection is one run when every dimension after its last
    partly selected one is selected whole, and every one before it is one item."""
    split = [axis for axis, n in enumerate(counts) if n > 1]
    if len(split) > 1 or any(size != 1 for size in chunk_shape[: split[0] if split else 0]):
        return None
    extents = [n * size for n, size in zip(counts, chunk_shape, strict=True)]
    partial = [
        axis
        for axis, (part, extent) in enumerate(zip(selection, extents, strict=True))
        if part.start != 0 or part.stop != extent
    ]
    before = selection[: partial[-1]] if partial else []
    if any(part.stop - part.start != 1 for part in before):
        return None
    offset, stride = 0, 1
    for part, extent in zip(reversed(selection), reversed(extents), strict=True):
        offset += part.start * stride
        stride *= extent
    return offset


async def _stored_blocks(lattice: _Lattice, batch: list[Any]) -> np.ndarray[Any, Any]:
    """Whole chunks stored as plain numbers, as one array: each chunk's bytes with the
    bytes->bytes codecs undone, joined (or copied, for large reads) and viewed as an
    array of the ``bytes`` codec's order, a TIFF predictor undone over all of them at
    once, then the transposes undone as views."""
    store, pipeline, (spec, short) = lattice.store, lattice.pipeline, lattice.layout
    raw = pipeline.raw
    assert raw is not None
    stored_shape = raw.stored_shape(spec)
    nbytes = math.prod(stored_shape) * raw.view_dtype.itemsize
    count = len(batch)
    span = None
    if not pipeline.inner.bytes_bytes_codecs:
        short_last = _short_prefix(raw, stored_shape, short, count)
        span = _one_span(lattice.manifest, lattice.ranges, nbytes, short_last)
    plan = None
    if span is not None:
        data = await _read_span(store, span, count * nbytes, lattice.run)
    else:
        plan = lattice.plan
        parts: list[Any] | np.ndarray[Any, Any]
        parts = (
            [None] * count if count * nbytes <= JOIN_BYTES else np.empty((count, nbytes), np.uint8)
        )
        plan.decoded_nbytes = count * nbytes
        await lattice.run(store, plan, batch, pipeline.stored_bytes_decoder(parts, spec, short))
        if plan.missing:
            fill = np.full(stored_shape, fill_value_or_default(spec), dtype=raw.view_dtype)
            for i in plan.missing:
                parts[i] = fill.reshape(-1).view(np.uint8)
        data = b"".join(parts) if isinstance(parts, list) else parts
    blocks = np.frombuffer(data, dtype=raw.view_dtype).reshape(count, *stored_shape)
    if raw.predictor is not None:
        # one pass over every chunk (rows are independent); the fill value is not
        # differenced, so missing chunks take it afterwards
        # an array ``data`` is this read's own buffer (bytes joined are read-only)
        blocks = raw.undo_predictor(blocks, overwrite=isinstance(data, np.ndarray))
        if plan is not None and plan.missing:
            blocks[plan.missing] = fill_value_or_default(spec)
    return raw.untransposed(blocks)


def _short_prefix(
    raw: Any, stored_shape: tuple[int, ...], short: dict[int, ArraySpec], count: int
) -> bool | None:
    """For :func:`_one_span`: False without short chunks; True when the only one is the
    last and its stored bytes are the start of a whole chunk's (it is shorter in one
    stored dimension, all before it of size 1, as a TIFF's short last strip is); None
    otherwise."""
    if not short:
        return False
    own = short.get(count - 1)
    if own is None or len(short) > 1:
        return None
    own_shape = raw.stored_shape(own)
    # C order: rows of a shorter outer dimension are a prefix (dimensions of size 1
    # before it change nothing).
    differ = [a for a, (o, w) in enumerate(zip(own_shape, stored_shape, strict=True)) if o != w]
    prefix = len(differ) == 1 and all(n == 1 for n in stored_shape[: differ[0]])
    return True if prefix else None


def _one_span(
    manifest: Any, ranges: list[range], nbytes: int, short_last: bool | None
) -> tuple[str, int, int] | None:
    """The one byte range of one file holding every chunk of the product of ``ranges``
    one after the other (in that product's order), each of ``nbytes``, but the last,
    which is shorter when ``short_last`` (:func:`_short_prefix`); None otherwise.

    Uncompressed strips and tiles written one after the other (most uncompressed
    TIFFs) are then read as one range and viewed as the whole chunks at once, instead
    of each range handled on its own (most of the time of reading one such file)."""
    if short_last is None or manifest._inlined or not manifest._paths.ndim:
        return None
    run = _kept_with(_runs, manifest, _find_run)
    if run is None or run.chunk_bytes != nbytes:
        return _scanned_span(manifest, ranges, nbytes, short_last)
    # The chunks of the product of ranges are one run of the manifest's C order when
    # they are as many as the items from the first to the last.
    shape = manifest._paths.shape
    first = last = 0
    for r, n in zip(ranges, shape, strict=True):
        first, last = first * n + r.start, last * n + r.stop - 1
    if last - first + 1 != math.prod(len(r) for r in ranges):
        return None
    at_end = last == math.prod(shape) - 1
    if (at_end and run.last_bytes < nbytes) != short_last:
        return None
    end = run.start + last * nbytes + (run.last_bytes if at_end else nbytes)
    return run.url, run.start + first * nbytes, end


def _scanned_span(
    manifest: Any, ranges: list[range], nbytes: int, short_last: bool
) -> tuple[str, int, int] | None:
    """:func:`_one_span` for a manifest that is not one run (:func:`_find_run`), from
    the entries of the chunks of ``ranges``: each file of a concatenation may be."""
    where = tuple(slice(r.start, r.stop) for r in ranges)
    run = _run_of(
        manifest._paths[where], manifest._offsets[where], manifest._lengths[where], nbytes
    )
    if run is None or (run.last_bytes < nbytes) != short_last:
        return None
    count = math.prod(len(r) for r in ranges)
    return run.url, run.start, run.start + (count - 1) * nbytes + run.last_bytes


@dataclasses.dataclass(frozen=True)
class _ManifestRun:
    """Chunks that are one run of one file: in the C order of the grid, each of
    ``chunk_bytes`` but the last (``last_bytes``, no more), each starting where the one
    before ends (an uncompressed TIFF's strips, an HDF5 contiguous dataset)."""

    url: str
    start: int
    chunk_bytes: int
    last_bytes: int


#: Each manifest's run (:func:`_find_run`; None: not one), kept with the manifest
#: (:func:`_kept_with`). A manifest's entries do not change (VirtualiZarr's operations
#: make new manifests), and comparing every chunk's entry costs more than reading a
#: small file: each later read of any part of it finds its span by arithmetic.
_runs: dict[int, _ManifestRun | None] = {}


def _find_run(manifest: Any) -> _ManifestRun | None:
    """``manifest``'s chunks as one run of one file, or None."""
    if manifest._inlined or not manifest._lengths.size:
        return None
    lengths = manifest._lengths
    return _run_of(manifest._paths, manifest._offsets, lengths, int(lengths.flat[0]))


def _run_of(
    paths: np.ndarray[Any, Any],
    starts: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    chunk_bytes: int,
) -> _ManifestRun | None:
    """The manifest entries ``paths``, ``starts``, ``lengths`` (any shape, C order) as
    one run of chunks of ``chunk_bytes``, or None."""
    paths, starts, lengths = paths.reshape(-1), starts.reshape(-1), lengths.reshape(-1)
    if not len(paths) or paths[0] == "" or not (paths == paths[0]).all():
        return None
    last = int(lengths[-1])
    if not 0 < last <= chunk_bytes or not (lengths[:-1] == chunk_bytes).all():
        return None
    if not (starts[1:] == starts[:-1] + chunk_bytes).all():
        return None
    return _ManifestRun(str(paths[0]), int(starts[0]), chunk_bytes, last)


async def _read_span(store: ManifestStore, span: tuple[str, int, int], size: int, run: _Run) -> Any:
    """The bytes of ``span`` (one file's range) followed by zeros up to ``size``."""
    url, start, end = span
    buffer = np.empty(size, dtype=np.uint8)
    buffer[end - start :] = 0
    obj_store, path = _resolve(store._registry, url)
    if read_into(obj_store, path, start, buffer[: end - start]):
        return buffer
    got: list[Any] = []

    def keep(batch: Sequence[Any], chunks: Any, items: list[int]) -> None:
        got.append(chunks[0])

    await run(store, _Plan({url: ([0], [start], [end])}, {}, [], end - start), [None], keep)
    if memoryview(got[0]).nbytes != end - start:
        raise StoreReadError(
            f"{url}: bytes {start} to {end} of the manifest's chunks could not be read "
            f"({memoryview(got[0]).nbytes} returned): the object is shorter than when it "
            "was parsed"
        )
    if end - start == size:
        return got[0]
    buffer[: end - start] = np.frombuffer(got[0], dtype=np.uint8)
    return buffer


def supported() -> bool:
    """Whether this module was written against the installed zarr's read path: the
    functions it replaces exist, and zarr's release is no newer than the newest tested
    (its replacements copy what those functions do)."""
    version = Version(Version(zarr.__version__).base_version)
    newest = NEWEST_TESTED["zarr"]
    return (version.major, version.minor) <= (newest.major, newest.minor) and all(
        hasattr(owner, name)
        for owner, name in (
            (zarr_array, "_get_selection"),
            (zarr_group, "_read_metadata_v3"),
            (zarr_group, "_get_node_v3"),
            (zarr_sync_api, "open_group"),
        )
    )


def install() -> None:
    """Route zarr's array reads through this module (see :func:`supported`)."""
    zarr_array._get_selection = get_selection  # type: ignore[assignment]
    zarr_array.Array.__getitem__ = array_getitem  # type: ignore[method-assign]
    zarr_array.Array.get_basic_selection = get_basic_selection  # type: ignore[method-assign]
    zarr_array.Array.get_orthogonal_selection = get_orthogonal_selection  # type: ignore[method-assign]
    Group.__getitem__ = group_getitem  # type: ignore[method-assign]
    zarr_group._read_metadata_v3 = read_metadata_v3
    zarr_group._get_node_v3 = get_node_v3
    zarr_sync_api.open_group = zarr.open_group = open_group


def uninstall() -> None:
    """Give zarr back its own functions."""
    zarr_array._get_selection = _zarr_get_selection
    zarr_array.Array.__getitem__ = _zarr_array_getitem  # type: ignore[method-assign]
    zarr_array.Array.get_basic_selection = _zarr_get_basic_selection  # type: ignore[method-assign]
    zarr_array.Array.get_orthogonal_selection = _zarr_get_orthogonal_selection  # type: ignore[method-assign]
    Group.__getitem__ = _zarr_group_getitem  # type: ignore[method-assign]
    zarr_group._read_metadata_v3 = _zarr_read_metadata_v3
    zarr_group._get_node_v3 = _zarr_get_node_v3
    zarr_sync_api.open_group = zarr.open_group = _zarr_open_group


__all__ = ["get_selection", "install", "supported", "uninstall"]
