"""Opt-in fast reads of ManifestStores: a codec pipeline, and zarr's read path replaced
for the duration of a ``with`` block.

Reading a parsed file's ``ManifestStore`` directly (to check a file, or in a pipeline
that never writes a store) goes through zarr's general read path, which builds several
objects and schedules a coroutine per chunk. Two opt-ins make it faster:

* :func:`use_manifest_pipeline` selects
  :class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`, a zarr codec
  pipeline (zarr's own extension point: its ``codec_pipeline.path`` setting) that reads
  a whole batch of chunks of a ManifestStore at once. Any other store read inside the
  block goes to zarr's own pipeline.
* :func:`fast_reads` does that and, inside its block, also replaces the zarr functions
  around the pipeline (array selection, group and array opens) with versions that plan
  reads of ManifestStores without zarr's per-chunk objects
  (:mod:`virtualizarr_fill.reads.installation`). The replacements are process-wide
  while any ``fast_reads`` block is open (nested and concurrent blocks share one
  installation) and act only on ManifestStores read with the manifest pipeline; every
  other read runs zarr's own code. zarr's functions are back when the last block closes.

Nothing here runs on import. Reads of Icechunk or kerchunk stores are unaffected (and do
not need either).

The modules, in the order a read passes through them:

* zarr's side: :mod:`.pipeline` (the zarr codec pipeline, found by zarr through an
  entry point; imports nothing but zarr), :mod:`.batch_reads` (its ``read``: a batch of
  zarr's chunk requests located in the manifest); inside ``fast_reads()`` only,
  :mod:`.installation` (installs :mod:`.zarr_selections` and :mod:`.zarr_opens` in
  place of :mod:`.zarr_originals`), :mod:`.selections` (a selection's chunks and
  their plan), :mod:`.lattice`, :mod:`.block_reads` and :mod:`.spans` (many chunks on a
  lattice read as one block, chunks laid one after the other in a file read as one
  range), :mod:`.calling_thread`;
* :mod:`.planning`: manifest entries and chunk grid indices -> byte ranges per file
  (no zarr, no I/O);
* :mod:`.fetching`: byte ranges -> stored bytes; :mod:`.scheduling`: where fetching and
  decoding run (event loop, calling thread, worker threads);
* :mod:`.decoders`, :mod:`.raw_layout`, :mod:`.bytes_decoders`: stored bytes -> arrays
  with the codec chain; :mod:`.deinterleave`: pixel-interleaved bands split into a
  band-first array;
* :mod:`.object_cache`: results kept per live object.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

import zarr

from virtualizarr_fill.reads.pipeline import PIPELINE_PATH

_lock = threading.Lock()
_open_blocks = 0
_installed = False


@contextlib.contextmanager
def use_manifest_pipeline() -> Iterator[None]:
    """Read with :class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline` inside
    the ``with`` block (zarr's ``codec_pipeline.path`` setting).

    The pipeline reads a whole batch of a ManifestStore's chunks at once; reads of any
    other store inside the block go to zarr's own pipeline. Nothing of zarr is replaced
    (:func:`fast_reads` goes further).

    Examples
    --------
    >>> with virtualizarr_fill.use_manifest_pipeline():
    ...     values = zarr.open_array(store, path="band_data", mode="r")[...]
    """
    with zarr.config.set({"codec_pipeline.path": PIPELINE_PATH}):
        yield


@contextlib.contextmanager
def fast_reads() -> Iterator[None]:
    """Read ManifestStores through the fast read path inside the ``with`` block.

    Selects the manifest pipeline (:func:`use_manifest_pipeline`) and, while any such
    block is open in the process, replaces zarr's array selection and its group and
    array opens with versions that plan reads of ManifestStores without zarr's
    per-chunk objects. The replacements act only on ManifestStores read with the
    manifest pipeline (every other read runs zarr's own code) and are removed when the
    last open block closes; nested and concurrent blocks share one installation. Values
    are the same as zarr's own read path returns. On a zarr release newer than the
    replacements were written against, only the pipeline is used, with a warning.

    Examples
    --------
    >>> import zarr
    >>> import virtualizarr_fill
    >>> with virtualizarr_fill.fast_reads():
    ...     values = zarr.open_group(store, mode="r")["band_data"][...]
    """
    global _open_blocks, _installed
    from virtualizarr_fill.reads import installation

    with _lock:
        if _open_blocks == 0:
            _installed = installation.supported()
            if _installed:
                installation.install()
            else:
                warnings.warn(
                    f"virtualizarr_fill.fast_reads: zarr {zarr.__version__} is newer than the "
                    "releases its read path was written against; reading with the manifest "
                    "codec pipeline only",
                    RuntimeWarning,
                    stacklevel=3,
                )
        _open_blocks += 1
    try:
        with use_manifest_pipeline():
            yield
    finally:
        with _lock:
            _open_blocks -= 1
            if _open_blocks == 0 and _installed:
                installation.uninstall()
                _installed = False


__all__ = ["PIPELINE_PATH", "fast_reads", "use_manifest_pipeline"]
