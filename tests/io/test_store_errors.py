"""A chunk that cannot be read from its file is a StoreReadError naming the file and the
chunk, whatever obstore raises (its errors, or a panic, which is not an ``Exception``),
through the parsers' store by zarr's default read and its synchronous one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from virtualizarr_fill import StoreReadError, TIFFParser

FUSED = "zarr.core.codec_pipeline.FusedCodecPipeline"


@pytest.mark.parametrize("pipeline", [None, FUSED], ids=["default", "fused"])
def test_file_shortened_after_parsing(tmp_path: Path, pipeline: str | None) -> None:
    path = tmp_path / "scene.tif"
    tifffile.imwrite(path, np.arange(64 * 64, dtype="u2").reshape(64, 64), rowsperstrip=8)
    store = TIFFParser()(f"file://{path}", ObjectStoreRegistry({"file://": LocalStore()}))
    array = zarr.open_group(store, mode="r")["band_data"]
    path.write_bytes(path.read_bytes()[:2000])  # the last strips are gone
    settings = {"codec_pipeline.path": pipeline} if pipeline else {}
    with zarr.config.set(settings), pytest.raises(StoreReadError) as raised:
        array[...]
    assert f"file://{path} (chunk band_data/c/0/" in str(raised.value)
