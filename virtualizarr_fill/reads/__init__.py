"""Opt-in batched reads of ManifestStores through a zarr codec pipeline.

Reading a parsed file's ``ManifestStore`` directly (to check a file, or in a pipeline
that never writes a store) goes through zarr's general read path, whose default codec
pipeline fetches and decodes each chunk on its own. :func:`use_manifest_pipeline`
selects :class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline` instead, a zarr
codec pipeline (zarr's own extension point: its ``codec_pipeline.path`` setting) that
reads a whole batch of chunks of a ManifestStore at once and names a chunk that cannot
be read or decoded. Any other store read inside the block goes to zarr's own pipeline.
Nothing of zarr is replaced: the block changes one zarr setting, and zarr's setting is
back when it closes.

Nothing here runs when the package is imported, and zarr never imports this package by
itself (there is no ``zarr.codec_pipeline`` entry point). Reads of Icechunk stores inside
the block fetch a piece of chunks per Icechunk call (:mod:`.keyed_batches`,
:func:`virtualizarr_fill.open_icechunk` opens its arrays so); reads of kerchunk stores go
to zarr's own pipeline.

The modules, in the order a read passes through them:

* zarr's side: :mod:`.pipeline` (the zarr codec pipeline, registered with zarr when it
  is imported), :mod:`.batch_reads` (its ``read``: a batch of zarr's chunk requests
  located in the manifest), :mod:`.keyed_batches` (a batch of an Icechunk store's keys);
* :mod:`.planning`: manifest entries and chunk grid indices -> byte ranges per file
  (no zarr, no I/O);
* :mod:`.fetching`: byte ranges -> stored bytes; :mod:`.scheduling`: where fetching and
  decoding run (event loop, worker threads);
* :mod:`.decoders`, :mod:`.raw_layout`, :mod:`.bytes_decoders`: stored bytes -> arrays
  with the codec chain; :mod:`.deinterleave`: pixel-interleaved bands split into a
  band-first array; :mod:`.chunk_failures`: a chunk that cannot be read or decoded named.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import zarr

from virtualizarr_fill.reads.pipeline import PIPELINE_PATH


@contextlib.contextmanager
def use_manifest_pipeline() -> Iterator[None]:
    """Read with :class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline` inside
    the ``with`` block (zarr's ``codec_pipeline.path`` setting).

    The pipeline reads a whole batch of a ManifestStore's chunks at once and names a
    chunk that cannot be read or decoded; an Icechunk store's chunks are fetched a piece
    per Icechunk call; reads of any other store inside the block go to zarr's own
    pipeline. Nothing of zarr is replaced: the block sets zarr's
    ``codec_pipeline.path`` and restores it when it closes.

    Examples
    --------
    >>> with virtualizarr_fill.use_manifest_pipeline():
    ...     values = zarr.open_array(store, path="band_data", mode="r")[...]
    """
    with zarr.config.set({"codec_pipeline.path": PIPELINE_PATH}):
        yield


@contextlib.contextmanager
def fast_reads() -> Iterator[None]:
    """Deprecated: use :func:`use_manifest_pipeline`, which this now is.

    Until this release it also replaced zarr's array selection and its group and array
    opens while the block was open; it replaces nothing now, and reads with the manifest
    pipeline as :func:`use_manifest_pipeline` does. It will be removed in the next
    release. For fast reads of many files, write them to Icechunk and read with xarray
    and dask (docs/guide/reading.md).

    Warns
    -----
    DeprecationWarning
        At every use.
    """
    warnings.warn(
        "virtualizarr_fill.fast_reads() is deprecated and will be removed in the next "
        "release; use virtualizarr_fill.use_manifest_pipeline() instead (it no longer "
        "replaces any zarr function, and reads the same way)",
        DeprecationWarning,
        stacklevel=3,
    )
    with use_manifest_pipeline():
        yield


__all__ = ["PIPELINE_PATH", "fast_reads", "use_manifest_pipeline"]
