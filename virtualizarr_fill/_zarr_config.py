"""Process-wide zarr settings virtualizarr-fill needs.

Rectilinear chunk grids are gated behind zarr's ``array.rectilinear_chunks`` flag.
Importing :mod:`virtualizarr_fill` turns it on; a process that only *reads* stores we
wrote (and never imports this package) can set the environment variable
``ZARR_ARRAY__RECTILINEAR_CHUNKS=True`` instead.
"""

from __future__ import annotations

import zarr

RECTILINEAR_FLAG = "array.rectilinear_chunks"
RECTILINEAR_ENV_VAR = "ZARR_ARRAY__RECTILINEAR_CHUNKS"


def enable_rectilinear_chunks() -> None:
    """Turn on zarr's rectilinear chunk grid support for this process."""
    if not zarr.config.get(RECTILINEAR_FLAG, False):
        zarr.config.set({RECTILINEAR_FLAG: True})
