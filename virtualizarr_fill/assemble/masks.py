"""Tiles whose validity rasterio takes from a mask rather than nodata, refused in a mosaic
unless the mask says no more than the nodata does.

``rasterio.merge.merge`` reads each tile as a masked array: where the tile has an
internal mask (GDAL's per-dataset mask IFD, written under ``GDAL_TIFF_INTERNAL_MASK``)
or an alpha band (ExtraSamples associated or unassociated alpha), a pixel the mask
marks as no data is never copied into the mosaic, which keeps its nodata there, whatever
value the tile stores. A virtual mosaic reads the stored values: it equals rasterio's
only where every masked pixel already holds the tile's nodata (for tiles without
nodata: 0, what rasterio.merge fills with, as long as no tiles overlap). The mask is
found from the TIFF header (the mask IFD, the ExtraSamples tag), else GDAL's external
``<tile>.msk`` is looked for; it is then read once at build time, with the tile's data,
to compare.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import tifffile

from virtualizarr_fill.assemble.overlaps import read_window
from virtualizarr_fill.assemble.placement import Placed
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.io.registries import resolve
from virtualizarr_fill.io.urls import normalize_url

#: The TIFF parser's image variable, the one a mask applies to (the parser's
#: ``DATA_VARIABLE``; importing the TIFF package when the assembly loads is circular).
DATA_VARIABLE = "band_data"
#: ExtraSamples values GDAL takes as an alpha band (associated, unassociated alpha).
_ALPHA_SAMPLES = (1, 2)
#: What the refusal suggests instead.
MASK_ADVICE = (
    "rewrite the tile with its masked pixels as nodata and no mask (rasterio: "
    "src.read(masked=True).filled(src.nodata), or filled(0) for a tile without nodata, "
    "written without write_mask)"
)


def _mask_kind(url: str, registry: Any) -> str | None:
    """What masks the tile's first image, read from its header: ``"mask"`` (a mask IFD
    of its size before the next full-resolution image), ``"alpha"`` (an alpha band) or
    None. The IFD chain is walked as the parser walks it (bounded, loops cut)."""
    from virtualizarr_fill.tiff import chain
    from virtualizarr_fill.tiff.parser import _quiet_tifffile

    store, path = resolve(registry, url)
    reader = StoreFile(store, path, url=url)
    # tifffile logs tags it cannot parse, which the mosaic's own parse has reported
    with _quiet_tifffile(), tifffile.TiffFile(reader) as tif:  # type: ignore[arg-type]
        first = tif.pages.first
        if any(int(s) in _ALPHA_SAMPLES for s in (first.extrasamples or ())):
            return "alpha"
        size = (first.imagelength, first.imagewidth)
        walk = chain.walk_main_chain(tif, reader, chain.IFDBudget(reader.size))
        for page in itertools.islice(chain.main_pages(tif, walk), 1, None):
            if page.is_mask and (page.imagelength, page.imagewidth) == size:
                return "mask"
            if not (page.is_mask or page.is_reduced):
                break  # the next image: its masks are not the first's
    return None


def _exists(url: str, registry: Any) -> bool:
    """Whether an object is stored at ``url``."""
    store, path = resolve(registry, url)
    try:
        store.head(path)
    except FileNotFoundError:
        return False
    return True


def _mask_of(tile: Placed, registry: Any) -> tuple[str, np.ndarray] | None:
    """What masks the tile and its mask (True: no data), or None."""
    from virtualizarr_fill.tiff import TIFFParser

    url = normalize_url(tile.part.url)
    kind = _mask_kind(url, registry)
    if kind == "mask":
        groups = TIFFParser(tree=True)(url, registry)._group.groups
        array = groups["mask"].arrays[DATA_VARIABLE]
        values = read_window(array, registry, tuple(slice(None) for _ in array.shape))
        return "an internal mask", values.reshape(values.shape[-2:]) == 0
    if kind is None and _exists(f"{url}.msk", registry):
        # GDAL's external mask: a TIFF whose first image is the tile's mask
        mask = TIFFParser()(f"{url}.msk", registry)._group.arrays[DATA_VARIABLE]
        values = read_window(mask, registry, (slice(0, 1), slice(None), slice(None)))
        return f"an external mask ({url.rsplit('/', 1)[-1]}.msk)", values[0] == 0
    if kind == "alpha":
        data = tile.part.arrays[DATA_VARIABLE]
        alpha = read_window(
            data, registry, (slice(data.shape[0] - 1, None), slice(None), slice(None))
        )
        return "an alpha band", alpha[0] == 0
    return None


def check_masks(placed: list[Placed], name: str, registry: Any, *, overlaps: bool) -> None:
    """Refuse the first tile whose mask hides a pixel that does not hold its nodata (see
    the module). For tiles without nodata, rasterio.merge writes 0 where a mask hides
    a pixel, so a hidden 0 is no difference, unless tiles overlap (``overlaps``): there a
    hidden pixel lets the other tile through, a stored 0 may not."""
    if name != DATA_VARIABLE:
        return
    for tile in placed:
        found = _mask_of(tile, registry)
        if found is None:
            continue
        kind, masked = found
        if masked.shape != tile.part.arrays[name].shape[-2:]:
            continue  # a pyramid level of the file: not the mask's image
        nodata = tile.part.var_attrs.get(name, {}).get("gdal_no_data")
        array = tile.part.arrays[name]
        # The alpha band itself is valid everywhere (rasterio's mask flags say all_valid).
        bands = array.shape[0] - 1 if kind == "an alpha band" else array.shape[0]
        hidden = 0
        if masked.any():
            values = read_window(array, registry, (slice(0, bands), slice(None), slice(None)))
            if nodata is None and overlaps:
                hidden = int(masked.sum())
            else:
                value = 0.0 if nodata is None else float(nodata)
                is_nodata = np.isnan(values) if np.isnan(value) else values == value
                hidden = int((masked & ~is_nodata.all(axis=0)).sum())
        if hidden:
            text = "none: rasterio.merge writes 0" if nodata is None else nodata
            raise IncompatibleArraysError(
                f"{tile.part.url} has {kind}, which rasterio.merge applies and a virtual "
                f"mosaic cannot: it masks {hidden} pixels that do not hold its nodata "
                f"({text}), where rasterio.merge writes nodata or takes another tile's "
                f"pixel; {MASK_ADVICE}"
            )


__all__ = ["MASK_ADVICE", "check_masks"]
