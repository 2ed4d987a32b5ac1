"""Native readers' decodes that tests compare the virtual stores' reads with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile

__all__ = ["rasterio_merge", "tifffile_reference"]


def tifffile_reference(path: Path, ifd: int | list[int] = 0) -> np.ndarray:
    """tifffile's decode of one IFD (or SubIFD path), arranged as (band, y, x)."""
    with tifffile.TiffFile(path) as tif:
        indices = [ifd] if isinstance(ifd, int) else list(ifd)
        page = tif.pages[indices[0]]
        for sub in indices[1:]:
            page = page.pages[sub]
        data = page.asarray()
        separate = page.shaped[0]
        data = data.reshape(page.shaped)
        if data.dtype == np.bool_:  # 1-bit samples read as uint8 0/1, as GDAL reads them
            data = data.astype(np.uint8)
        return data[:, 0, :, :, 0] if separate > 1 else np.moveaxis(data[0, 0], -1, 0)


def rasterio_merge(paths: list[Path]) -> tuple[np.ndarray, object]:
    """``rasterio.merge.merge`` of the tiles: the mosaic's values and its transform."""
    import rasterio
    from rasterio.merge import merge

    sources = [rasterio.open(p) for p in paths]
    try:
        return merge(sources)  # type: ignore[no-any-return]
    finally:
        for source in sources:
            source.close()
