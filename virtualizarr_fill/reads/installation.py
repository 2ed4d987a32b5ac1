"""zarr's read and open functions replaced for ManifestStores, while a
:func:`virtualizarr_fill.fast_reads` block is open.

zarr's read path builds several objects per chunk before it calls the codec pipeline,
hands every synchronous read and open to its event-loop thread, and parses a node's
``zarr.json`` at every open: most of the time taken to read a file of many small chunks
or arrays. :func:`install` puts in zarr's place

* :mod:`.zarr_selections`: zarr's ``_get_selection`` and the ``Array`` read methods,
  which read a ManifestStore's selection through
  :func:`~virtualizarr_fill.reads.selections.read_selection` (in the calling thread
  for the synchronous methods);
* :mod:`.zarr_opens`: ``Group.__getitem__``, ``zarr.open_group`` and the opens of group
  and array metadata, which run in the calling thread and parse each ``zarr.json`` once.

They act only on ManifestStores read with
:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline`; every other read or
open goes to zarr's own functions (:mod:`.zarr_originals`), which :func:`uninstall`
puts back. The values are those of zarr's own read, bit for bit
(tests/reads/test_zarr_read_path.py). Installed only for the zarr releases the replacements
were written against (:func:`supported`).

Retire when zarr's read path hands codec pipelines chunk grid indices instead of
per-chunk store paths and specs, and reads stores that never wait without its event
loop (or VirtualiZarr's ManifestStore reads whole batches itself).
"""

from __future__ import annotations

import zarr
import zarr.api.synchronous as zarr_sync_api
import zarr.core.array as zarr_array
import zarr.core.group as zarr_group
from packaging.version import Version
from zarr.core.group import Group

from virtualizarr_fill.manifests.upstream import NEWEST_TESTED
from virtualizarr_fill.reads import zarr_opens, zarr_originals, zarr_selections


def supported() -> bool:
    """Whether the replacements were written against the installed zarr's read path:
    the functions they replace exist, and zarr's release is no newer than the newest
    tested (the replacements copy what those functions do)."""
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
    """Route zarr's array reads and opens through the replacements (see :func:`supported`)."""
    zarr_array._get_selection = zarr_selections.get_selection  # type: ignore[assignment]
    zarr_array.Array.__getitem__ = zarr_selections.array_getitem  # type: ignore[method-assign]
    zarr_array.Array.get_basic_selection = zarr_selections.get_basic_selection  # type: ignore[method-assign]
    zarr_array.Array.get_orthogonal_selection = zarr_selections.get_orthogonal_selection  # type: ignore[method-assign]
    Group.__getitem__ = zarr_opens.group_getitem  # type: ignore[method-assign]
    zarr_group._read_metadata_v3 = zarr_opens.read_metadata_v3
    zarr_group._get_node_v3 = zarr_opens.get_node_v3
    zarr_sync_api.open_group = zarr.open_group = zarr_opens.open_group


def uninstall() -> None:
    """Give zarr back its own functions."""
    zarr_array._get_selection = zarr_originals.get_selection
    zarr_array.Array.__getitem__ = zarr_originals.array_getitem  # type: ignore[method-assign]
    zarr_array.Array.get_basic_selection = zarr_originals.get_basic_selection  # type: ignore[method-assign]
    zarr_array.Array.get_orthogonal_selection = zarr_originals.get_orthogonal_selection  # type: ignore[method-assign]
    Group.__getitem__ = zarr_originals.group_getitem  # type: ignore[method-assign]
    zarr_group._read_metadata_v3 = zarr_originals.read_metadata_v3
    zarr_group._get_node_v3 = zarr_originals.get_node_v3
    zarr_sync_api.open_group = zarr.open_group = zarr_originals.open_group


__all__ = ["install", "supported", "uninstall"]
