"""zarr's own read and open functions, as found before :mod:`.installation` replaces them.

Every replacement hands what it does not read itself to these (looked up here at each
call), and :func:`~virtualizarr_fill.reads.installation.uninstall` puts them back.
"""

from __future__ import annotations

import zarr.api.synchronous as zarr_sync_api
import zarr.core.array as zarr_array
import zarr.core.group as zarr_group
from zarr.core.group import Group

get_selection = zarr_array._get_selection
array_getitem = zarr_array.Array.__getitem__
get_basic_selection = zarr_array.Array.get_basic_selection
get_orthogonal_selection = zarr_array.Array.get_orthogonal_selection
group_getitem = Group.__getitem__
read_metadata_v3 = zarr_group._read_metadata_v3
get_node_v3 = zarr_group._get_node_v3
open_group = zarr_sync_api.open_group

__all__ = [
    "array_getitem",
    "get_basic_selection",
    "get_node_v3",
    "get_orthogonal_selection",
    "get_selection",
    "group_getitem",
    "open_group",
    "read_metadata_v3",
]
