"""zarr's array reads for ManifestStores read with the manifest pipeline, installed only
inside :func:`virtualizarr_fill.fast_reads`.

When an array's pipeline is a
:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline` and its store a
ManifestStore, these replacements of zarr's ``_get_selection`` (:func:`get_selection`)
and of the ``Array`` methods :func:`array_getitem`, :func:`get_basic_selection` and
:func:`get_orthogonal_selection` read the selection through
:func:`~virtualizarr_fill.reads.selections.read_selection`; the synchronous methods read
it in the calling thread (:mod:`.calling_thread`): it never waits on anything there
(local files are read directly, larger and remote reads in worker threads), so zarr's
event loop is not involved.

Every other read (other pipelines or stores, zarr format 2, structured-field or ``out=``
reads, ``array.read_missing_chunks=False``, non-NumPy buffers) goes to zarr's own
functions (:mod:`.zarr_originals`) unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from virtualizarr.manifests import ManifestArray
from virtualizarr.manifests.store import ManifestStore
from zarr.core.buffer import default_buffer_prototype
from zarr.core.indexing import BasicIndexer, OrthogonalIndexer
from zarr.storage._common import StorePath

from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.manifests.store import deepest_node
from virtualizarr_fill.reads import zarr_originals
from virtualizarr_fill.reads.calling_thread import WAITS, run_here
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline
from virtualizarr_fill.reads.scheduling import read_planned, read_planned_here
from virtualizarr_fill.reads.selections import read_selection

if TYPE_CHECKING:
    from virtualizarr.manifests.manifest import ChunkManifest
    from zarr.abc.codec import CodecPipeline
    from zarr.core.array_spec import ArrayConfig
    from zarr.core.buffer import BufferPrototype, NDArrayLikeOrScalar, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.indexing import Indexer
    from zarr.core.metadata import ArrayMetadata

    from virtualizarr_fill.manifests.upstream import ManifestEntries
    from virtualizarr_fill.reads.scheduling import Runner

#: A read's array: its ChunkManifest, and the manifest's entries.
_Located = tuple["ChunkManifest", "ManifestEntries"]


def _manifest_array(store_path: StorePath) -> _Located | None:
    """The manifest of the ManifestArray at ``store_path`` and its entries, or None."""
    store = store_path.store
    if not isinstance(store, ManifestStore):
        return None
    group = upstream.store_group(store)
    if group is None or upstream.store_registry(store) is None:
        return None
    node, suffix = deepest_node(group, store_path.path)
    if not isinstance(node, ManifestArray) or suffix:
        return None
    manifest = node.manifest
    entries = upstream.manifest_entries(manifest)
    if entries is None:
        return None  # a VirtualiZarr whose manifest layout this module does not know
    return manifest, entries


def _applicable(
    store_path: StorePath,
    metadata: ArrayMetadata,
    codec_pipeline: CodecPipeline,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    out: Any,
    fields: Any,
) -> _Located | None:
    """The manifest of the ManifestArray a read reads, and its entries, if this module
    reads it (else zarr does)."""
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
    located = _applicable(store_path, metadata, codec_pipeline, config, chunk_grid, out, fields)
    if located is not None:
        assert isinstance(codec_pipeline, ManifestCodecPipeline)
        selected = await _select(
            store_path.store, located, metadata, codec_pipeline, config, chunk_grid, indexer,
            prototype, read_planned,
        )  # fmt: skip
        if selected is not _NOT_NUMPY:
            return selected
    return await zarr_originals.get_selection(
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
    located: _Located,
    metadata: ArrayMetadata,
    pipeline: ManifestCodecPipeline,
    config: ArrayConfig,
    chunk_grid: ChunkGrid,
    indexer: Indexer,
    prototype: BufferPrototype,
    run: Runner,
) -> Any:
    """The selected values (what zarr's ``_get_selection`` returns), or :data:`_NOT_NUMPY`."""
    out_buffer = prototype.nd_buffer.empty(
        shape=indexer.shape, dtype=metadata.dtype.to_native_dtype(), order=config.order
    )
    target = out_buffer.as_ndarray_like()
    if not isinstance(target, np.ndarray):
        return _NOT_NUMPY
    if target.size:
        manifest, entries = located
        await read_selection(
            store, manifest, entries, metadata, pipeline, config, chunk_grid, indexer,
            prototype, target, run,
        )  # fmt: skip
    if isinstance(indexer, BasicIndexer) and indexer.shape == ():
        return out_buffer.as_scalar()
    return target


def _blocking_select(array: Any, indexer: Indexer, out: Any, fields: Any, prototype: Any) -> Any:
    """What zarr's synchronous ``Array`` methods return for ``indexer``, read in the
    calling thread when this module reads it (:data:`_NOT_NUMPY` otherwise): zarr's own
    way hands the read to its event loop thread and waits, at every read."""
    async_array = array.async_array
    located = _applicable(
        async_array.store_path, async_array.metadata, async_array.codec_pipeline,
        async_array.config, async_array._chunk_grid, out, fields,
    )  # fmt: skip
    if located is None:
        return _NOT_NUMPY
    coroutine = _select(
        async_array.store_path.store, located, async_array.metadata, async_array.codec_pipeline,
        async_array.config, async_array._chunk_grid, indexer,
        prototype or default_buffer_prototype(), read_planned_here,
    )  # fmt: skip
    selected = run_here(coroutine)
    # Nothing here waits on a loop; should something, zarr reads it again its own way.
    return _NOT_NUMPY if selected is WAITS else selected


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
    return zarr_originals.array_getitem(self, selection)


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
    return zarr_originals.get_basic_selection(
        self, selection, out=out, prototype=prototype, fields=fields
    )


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
    return zarr_originals.get_orthogonal_selection(
        self, selection, out=out, fields=fields, prototype=prototype
    )


def _applicable_array(array: Any, out: Any, fields: Any) -> bool:
    """A cheap first test: the array reads with the manifest pipeline."""
    return (
        out is None
        and not fields
        and isinstance(array.async_array.codec_pipeline, ManifestCodecPipeline)
    )


__all__ = [
    "array_getitem",
    "get_basic_selection",
    "get_orthogonal_selection",
    "get_selection",
]
