""":class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`'s ``read``: a batch
of chunks of a ManifestStore read at once.

zarr hands a codec pipeline every chunk of one read (``array[...]``) in one ``read``
call. Its own pipelines then treat each chunk alone: one store lookup, one ranged GET
and one scheduled decode per chunk, which dominates reading the many small strips and
chunks of typical TIFF and HDF5 files. For a read from a ManifestStore, this module

1. parses every chunk's key into its grid indices at once and plans the read from the
   array's manifest (:mod:`~virtualizarr_fill.reads.planning`);
2. fetches the byte ranges with one ``get_ranges`` call per file, on zarr's event loop
   (:mod:`~virtualizarr_fill.reads.fetching`); large reads are cut into pieces that
   worker threads fetch and decode, so reading overlaps decoding
   (:mod:`~virtualizarr_fill.reads.scheduling`);
3. decodes each chunk with the array's own codecs and copies it into the output
   (:mod:`~virtualizarr_fill.reads.decoders`).

A batch of an Icechunk store is fetched a piece of keys per call and decoded the same
way (:mod:`~virtualizarr_fill.reads.keyed_batches`).

The values are those zarr's own pipelines read, bit for bit (tests/reads/test_read_pipeline.py
compares them with tifffile and h5py). Any other read goes to zarr's pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from virtualizarr.manifests import ManifestArray
from virtualizarr.manifests.store import ManifestStore
from zarr.abc.codec import ArrayBytesCodecPartialDecodeMixin, GetResult
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding
from zarr.core.chunk_utils import fill_value_or_default
from zarr.storage import StorePath

from virtualizarr_fill import upstream
from virtualizarr_fill.manifests.store import deepest_node
from virtualizarr_fill.reads import keyed_batches, planning
from virtualizarr_fill.reads.chunk_failures import naming_failures, read_naming_failures
from virtualizarr_fill.reads.decoders import output_decoder
from virtualizarr_fill.reads.scheduling import read_planned

if TYPE_CHECKING:
    from zarr.core.buffer import NDBuffer

    from virtualizarr_fill.reads.decoders import ChunkInfo, CodecChain
    from virtualizarr_fill.reads.planning import ReadPlan
    from virtualizarr_fill.upstream import ManifestEntries

#: Whether VirtualiZarr's ManifestStore finds nodes as this module does (tested with
#: VirtualiZarr 2.8); without that every read goes to zarr's own pipeline.
_KNOWS_VIRTUALIZARR = upstream.store_walk_known()


def reads_manifests(pipeline: CodecChain) -> bool:
    """Whether the pipeline can read chunks from a manifest itself (else zarr's does)."""
    if pipeline.transform is None or not _KNOWS_VIRTUALIZARR:
        return False
    return not (
        pipeline.inner.supports_partial_decode
        and isinstance(pipeline.inner.array_bytes_codec, ArrayBytesCodecPartialDecodeMixin)
    )


async def read(
    pipeline: CodecChain,
    batch_info: Iterable[ChunkInfo],
    out: NDBuffer,
    drop_axes: tuple[int, ...] = (),
) -> tuple[GetResult, ...]:
    """What the pipeline's ``read`` returns: every chunk of the batch read into ``out``."""
    batch = batch_info if isinstance(batch_info, list) else list(batch_info)
    located = locate(pipeline, batch, out)
    if located is None:
        if reads_manifests(pipeline) and keyed_batches.reads_keys(batch, out):
            return await keyed_batches.read(pipeline, batch, out, drop_axes)
        return await read_naming_failures(pipeline.inner, batch, out, drop_axes)
    store, entries, plan = located
    target: Any = out.as_ndarray_like()
    decode = output_decoder(pipeline, drop_axes, target)
    await read_planned(store, plan, batch, naming_failures(decode, store, entries, plan))
    for i in plan.missing:
        _, spec, _, out_selection, _ = batch[i]
        target[out_selection] = fill_value_or_default(spec)
    missing = set(plan.missing)
    return tuple(
        GetResult(status="missing" if i in missing else "present") for i in range(len(batch))
    )


def locate(
    pipeline: CodecChain, batch: Sequence[ChunkInfo], out: NDBuffer
) -> tuple[ManifestStore, ManifestEntries, ReadPlan] | None:
    """The array's manifest entries and the chunks' places in them, or None where this
    pipeline does not apply."""
    if not batch or not reads_manifests(pipeline):
        return None  # e.g. sharding: the codec fetches inner chunks itself
    first = batch[0][0]
    if not isinstance(first, StorePath) or not isinstance(first.store, ManifestStore):
        return None
    if not isinstance(out.as_ndarray_like(), np.ndarray):
        return None
    store = first.store
    group = upstream.store_group(store)
    if group is None or upstream.store_registry(store) is None:
        return None
    node, suffix = deepest_node(group, first.path)
    if not isinstance(node, ManifestArray) or suffix.endswith("zarr.json"):
        return None
    entries = upstream.manifest_entries(node.manifest)
    if entries is None:
        return None  # a VirtualiZarr whose manifest layout this module does not know
    prefix = first.path[: len(first.path) - len(suffix)]
    keys = []
    for getter, *_ in batch:
        if not isinstance(getter, StorePath) or getter.store is not store:
            return None
        keys.append(getter.path)
    if not all(key.startswith(prefix) for key in keys):
        return None
    keys = [key[len(prefix) :] for key in keys]
    if len(keys) <= planning.FEW_CHUNKS:
        return store, entries, _plan_keys(node, entries, keys)
    return (
        store,
        entries,
        planning.plan_rows(entries, _grid_indices(node, keys, entries.paths.ndim)),
    )


def _grid_indices(node: ManifestArray, keys: list[str], ndim: int) -> np.ndarray[Any, Any]:
    """Chunk keys (inside the array) -> their grid indices, one row per key.

    Parsed all at once (one split of the joined keys) because a read of a small-chunked
    array has tens of thousands of keys; the result is checked against what the array's
    chunk key encoding writes for those indices."""
    if ndim == 0 or not keys:
        return np.zeros((len(keys), ndim), dtype=np.intp)
    encoding = node.metadata.chunk_key_encoding
    separator: str = getattr(encoding, "separator", ".")
    if isinstance(encoding, DefaultChunkKeyEncoding):
        head = 1  # "c<sep>i<sep>j..."
    elif isinstance(encoding, V2ChunkKeyEncoding):
        head = 0  # "i<sep>j..."
    else:
        rows = [encoding.decode_chunk_key(key) for key in keys]
        return np.array(rows, dtype=np.intp).reshape(len(keys), ndim)
    tokens = separator.join(keys).split(separator)
    if len(tokens) != len(keys) * (head + ndim):
        raise ValueError(f"chunk keys of a {ndim}-d grid expected: {keys[:3]}")
    if head:
        if set(tokens[:: head + ndim]) != {"c"}:
            raise ValueError(f"chunk keys without the 'c' prefix: {keys[:3]}")
        del tokens[:: head + ndim]
    indices = np.fromiter(map(int, tokens), dtype=np.intp, count=len(tokens)).reshape(
        len(keys), ndim
    )
    if encoding.encode_chunk_key(tuple(indices[-1].tolist())) != keys[-1]:
        raise ValueError(f"chunk key {keys[-1]!r} does not round-trip")
    return indices


def _plan_keys(node: ManifestArray, entries: ManifestEntries, keys: list[str]) -> ReadPlan:
    """The plan of a few chunks named by their keys, entry by entry."""
    encoding = node.metadata.chunk_key_encoding
    ndim = entries.paths.ndim
    indices = []
    for key in keys:
        index = encoding.decode_chunk_key(key) if ndim else ()
        if len(index) != ndim or encoding.encode_chunk_key(index) != key:
            raise ValueError(f"chunk key {key!r} does not name a chunk of a {ndim}-d grid")
        indices.append(tuple(index))
    return planning.plan_entries(entries, indices)


__all__ = ["locate", "read", "reads_manifests"]
