"""STAC items into one virtual time stack (see :mod:`.items` for reading and grouping,
:mod:`.open` for the dataset); needs ``pystac`` (the ``stac`` extra)."""

from virtualizarr_fill.stac.items import GROUPINGS, GroupBy, StacItemError, solar_date
from virtualizarr_fill.stac.open import ITEM_ID, open_stac_stack, open_virtual_stac, stac_stack

__all__ = [
    "GROUPINGS",
    "ITEM_ID",
    "GroupBy",
    "StacItemError",
    "open_stac_stack",
    "open_virtual_stac",
    "solar_date",
    "stac_stack",
]
