"""zarr's ``array.rectilinear_chunks`` flag.

zarr refuses to read or write array metadata that declares a rectilinear chunk grid
unless this flag is on. Importing :mod:`virtualizarr_fill` never sets it; the package's
own code turns it on for the process the first time it builds an array on a
rectilinear grid (a parser, a concatenation, an unpickled array), since the process
will read or write that array. A process that only *reads* stores with such arrays sets
the environment variable ``ZARR_ARRAY__RECTILINEAR_CHUNKS=True`` (or calls
:func:`enable_rectilinear_chunks`).
"""

from __future__ import annotations

import zarr

RECTILINEAR_FLAG = "array.rectilinear_chunks"
RECTILINEAR_ENV_VAR = "ZARR_ARRAY__RECTILINEAR_CHUNKS"


def enable_rectilinear_chunks() -> None:
    """Turn on zarr's rectilinear chunk grid support for this process.

    Needed to read stores whose arrays have rectilinear chunk grids (zarr refuses their
    metadata otherwise); setting ``ZARR_ARRAY__RECTILINEAR_CHUNKS=True`` in the
    environment does the same.
    """
    if not zarr.config.get(RECTILINEAR_FLAG, False):
        zarr.config.set({RECTILINEAR_FLAG: True})
