"""Writers for virtual datasets whose arrays VirtualiZarr's own writers cannot write:
rectilinear chunk grids, padded edges (truncate/crop codecs), appends that merge them.

Use :func:`to_icechunk` and :func:`to_kerchunk` where you would use
``vds.vz.to_icechunk`` and ``vds.vz.to_kerchunk``; datasets VirtualiZarr can write go to
its writers unchanged.
"""

from virtualizarr_fill.writers.icechunk import to_icechunk
from virtualizarr_fill.writers.kerchunk import to_kerchunk

__all__ = ["to_icechunk", "to_kerchunk"]
