"""Concatenation a block at a time (``assemble.blocks``) gives what one
``np.concatenate`` of every array gives: the same chunk grid, codecs (edge codecs
included) and references, and values equal to the native reads."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tests._manifest_builders import (
    concat_fixtures,
    concatenate,
    native_tiff,
    read_manifest_array,
    tiff_manifest_array,
)
from virtualizarr_fill.assemble.blocks import concatenated

__all__ = ["concat_fixtures"]

#: Files along y: short and padded last strips, raw and deflated, in an order that puts
#: each kind at a block's start, middle and end for the block sizes below.
_STRIPS = [
    "strip_short_0",
    "strip_padded_0",
    "strip_short_1",
    "strip_padded_1",
    "strip_padded_2",
    "strip_short_2",
    "strip_short_0",
]
_ZLIB = ["strip_short_zlib_0", "strip_padded_zlib_1", "strip_short_zlib_2", "strip_padded_zlib_0"]


@pytest.mark.parametrize("names", [_STRIPS, _ZLIB], ids=["raw", "deflate"])
@pytest.mark.parametrize("block", [2, 3, 4])
def test_blocks_along_y_equal_one_concatenation(
    concat_fixtures: dict[str, Path], names: list[str], block: int
) -> None:
    arrays = [tiff_manifest_array(concat_fixtures[n]) for n in names]
    whole = concatenate(arrays, axis=0)
    blocked = concatenated(iter(arrays), 0, block)
    assert blocked.metadata == whole.metadata
    assert blocked.manifest == whole.manifest
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    np.testing.assert_array_equal(read_manifest_array(blocked), expected)


@pytest.mark.parametrize("block", [2, 3])
def test_blocks_of_tiles_along_x_then_y(concat_fixtures: dict[str, Path], block: int) -> None:
    """A mosaic's rows concatenated along x a block at a time, then the rows along y: the
    crop codec tiles need is kept through both."""
    names = [
        ["tiled_0", "tiled_1", "tiled_2", "tiled_0"],
        ["tiled_2", "tiled_0", "tiled_1", "tiled_2"],
    ]
    arrays = [[tiff_manifest_array(concat_fixtures[n]) for n in row] for row in names]
    whole = concatenate([concatenate(row, axis=1) for row in arrays], axis=0)
    blocked = concatenated((concatenated(iter(row), 1, block) for row in arrays), 0, block)
    assert blocked.metadata == whole.metadata
    assert blocked.manifest == whole.manifest
    natives = [[native_tiff(concat_fixtures[n]) for n in row] for row in names]
    expected = np.concatenate([np.concatenate(row, axis=1) for row in natives], axis=0)
    np.testing.assert_array_equal(read_manifest_array(blocked), expected)


def test_blocks_of_blocks(concat_fixtures: dict[str, Path]) -> None:
    """More blocks than a block holds: the blocks are themselves joined in blocks."""
    names = list(itertools.islice(itertools.cycle(_STRIPS), 11))
    arrays = [tiff_manifest_array(concat_fixtures[n]) for n in names]
    blocked = concatenated(iter(arrays), 0, 2)
    whole = concatenate(arrays, axis=0)
    assert blocked.metadata == whole.metadata
    assert blocked.manifest == whole.manifest


def test_one_array_is_returned_as_it_is(concat_fixtures: dict[str, Path]) -> None:
    array = tiff_manifest_array(concat_fixtures["strip_short_0"])
    assert concatenated(iter([array]), 0) is array


def test_nothing_to_concatenate_and_a_block_of_one_are_refused() -> None:
    with pytest.raises(ValueError, match="nothing to concatenate"):
        concatenated(iter([]), 0)
    with pytest.raises(ValueError, match="block must be at least 2"):
        concatenated(iter([]), 0, 1)
