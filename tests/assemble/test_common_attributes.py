"""``common_attributes`` against xarray's own ``combine_attrs="drop_conflicts"``, for
attribute dictionaries given as a list and as an iterator that builds each one anew
(what a collector's columns give back)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import xarray as xr

from virtualizarr_fill.assemble.attributes import common_attributes


def _xarray_drop_conflicts(attribute_sets: list[dict[str, Any]]) -> dict[Any, Any]:
    datasets = [xr.Dataset(attrs=a) for a in attribute_sets]
    return dict(xr.merge(datasets, combine_attrs="drop_conflicts").attrs)


def _tiles(count: int, odd: int) -> list[dict[str, Any]]:
    """Tile attributes: a tie point of each tile's own, a CRS they share, and tile
    ``odd`` with another CRS."""
    return [
        {
            "ModelTiepoint": [0.0, 0.0, 0.0, 500000.0, 4100000.0 - 1800.0 * k, 0.0],
            "crs": "EPSG:32633" if k != odd else "EPSG:32634",
            "scale": np.float64(30.0),
        }
        for k in range(count)
    ]


def test_a_list_agrees_with_xarray() -> None:
    tiles = _tiles(50, odd=37)
    dropped: set[Any] = set()
    assert common_attributes(tiles, dropped) == _xarray_drop_conflicts(tiles)
    assert dropped == {"ModelTiepoint", "crs"}


def test_dictionaries_built_one_at_a_time_are_each_compared() -> None:
    """Each dictionary is dropped before the next is built, so that a new one may take a
    freed one's identity: none may be taken for one already seen."""
    tiles = _tiles(3000, odd=2500)

    def one_at_a_time() -> Iterator[dict[str, Any]]:
        for tile in tiles:
            yield dict(tile)  # a new dictionary, unreferenced once compared

    dropped: set[Any] = set()
    assert common_attributes(one_at_a_time(), dropped) == _xarray_drop_conflicts(tiles)
    assert "crs" in dropped


def test_a_shared_dictionary_is_read_once_and_agrees() -> None:
    shared = {"units": "K", "long_name": "temperature"}
    assert common_attributes([shared] * 1000) == shared
