"""Metadata of virtually concatenated and stacked arrays.

Concatenating virtual arrays never moves bytes: the result's chunk manifest points at
the inputs' stored chunks. What has to be worked out is the Zarr metadata that makes
those chunks decode correctly:

* the **chunk grid**. Along the concatenation axis every input keeps its own chunk
  edges, and an input's last chunk is cut to its logical length when more data follows
  it. The grid stays regular when the edges allow it and becomes rectilinear only when
  they do not (:mod:`virtualizarr_fill.chunk_grids`).
* the **codec chain**. An input whose edge chunk is stored padded (a TIFF strip padded
  to RowsPerStrip rows, an HDF5 edge chunk) decodes as a regular-grid boundary chunk
  while it is the array's last chunk. Once another input follows, that chunk becomes
  an interior chunk of its logical length and its extra bytes must be trimmed:
  :class:`~virtualizarr_fill.codecs.TruncateCodec` when the logical chunk is a prefix of
  the stored bytes, :class:`~virtualizarr_fill.codecs.CropCodec` when it is not. Inputs
  with and without padding share one chain, because both codecs pass unpadded chunks
  through. Where no single chain can decode every input, the merge refuses
  (:mod:`.edge_decisions`, :mod:`virtualizarr_fill.codec_chains`).

Fill values follow the project's merge rule
(:func:`virtualizarr_fill.fill.combine_fill_values`): inputs must agree on the Zarr
``fill_value``, ``_FillValue`` and ``missing_value``, unless the user opts in to a
combination with :func:`virtualizarr_fill.fill_conflicts`
(:mod:`virtualizarr_fill.fill.conflicts`).

The package's modules, in the order a merge uses them: :mod:`.inputs` (what each input
brings and what all must share), :mod:`.edge_decisions` (the edge codec the result
needs), :mod:`.merges` (:func:`concatenation_metadata`, :func:`stack_metadata`).
Everything here works on :class:`~zarr.core.metadata.v3.ArrayV3Metadata`; the chunk
manifests are merged by the array-function implementations in
:mod:`virtualizarr_fill.manifests.operations`.
"""

from __future__ import annotations

from virtualizarr_fill.concat.inputs import Describe
from virtualizarr_fill.concat.merges import concatenation_metadata, stack_metadata

__all__ = ["Describe", "concatenation_metadata", "stack_metadata"]
