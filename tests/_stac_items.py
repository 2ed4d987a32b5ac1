"""Scenes written with rasterio and described by STAC 1.0 Items written by hand (plain
dicts), for the STAC tests: each date a row of tiles side by side."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Origin (EPSG:32633) and pixel size of the scenes.
ORIGIN = (500_000.0, 4_000_000.0)
RES = 10.0
WIDTH, HEIGHT = 24, 20


@dataclass
class Scene:
    """One tile file of one date and the Item describing it."""

    item_id: str
    when: str  # the item's datetime, as written in its JSON
    path: Path
    column: int

    @property
    def datetime64(self) -> np.datetime64:
        parsed = dt.datetime.fromisoformat(self.when.replace("Z", "+00:00"))
        return np.datetime64(parsed.astimezone(dt.UTC).replace(tzinfo=None), "us")


def write_scene(
    path: Path,
    column: int,
    seed: int,
    *,
    crs: str = "EPSG:32633",
    res: float = RES,
    row: int = 0,
) -> Path:
    """A one-band uint8 GeoTIFF (deflate, nodata 0, strips of 10 rows) at ``column``,
    ``row`` of the scene grid."""
    import rasterio
    from rasterio.transform import from_origin

    values = np.random.default_rng(seed).integers(1, 250, (1, HEIGHT, WIDTH)).astype("uint8")
    path.parent.mkdir(parents=True, exist_ok=True)
    transform = from_origin(
        ORIGIN[0] + column * WIDTH * RES, ORIGIN[1] - row * HEIGHT * RES, res, res
    )
    with rasterio.open(
        path, "w", driver="GTiff", width=WIDTH, height=HEIGHT, count=1, dtype="uint8",
        crs=crs, transform=transform, nodata=0, compress="deflate", blockysize=10,
    ) as dst:  # fmt: skip
        dst.write(values)
    return path


def item(
    scene: Scene,
    href: str,
    *,
    asset: str = "B04",
    lon: float = 15.0,
    properties: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A STAC 1.0 Item (a plain dict) whose asset ``asset`` is ``href``; its footprint a
    small square centred on longitude ``lon``."""
    square = [[lon - 0.05, 45.0], [lon + 0.05, 45.0], [lon + 0.05, 45.1], [lon - 0.05, 45.1]]
    return {
        "type": "Feature",
        "stac_version": "1.0.0",
        "id": scene.item_id,
        "geometry": {"type": "Polygon", "coordinates": [[*square, square[0]]]},
        "bbox": [lon - 0.05, 45.0, lon + 0.05, 45.1],
        "properties": {"datetime": scene.when, **(properties or {})},
        "links": [],
        "assets": {asset: {"href": href, "type": "image/tiff; application=geotiff"}},
    }


def collection(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "FeatureCollection", "features": items}


def write_json(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def write_dates(
    directory: Path, dates: list[str], tiles: int = 2, first_seed: int = 0
) -> list[Scene]:
    """``tiles`` side-by-side tiles for each date under ``directory/data``; the scenes in
    date order, tiles left to right."""
    scenes = []
    for d, when in enumerate(dates):
        for c in range(tiles):
            path = write_scene(directory / "data" / f"d{d}_{c}.tif", c, first_seed + 10 * d + c)
            scenes.append(Scene(f"S{first_seed + d}_{c}", when, path, c))
    return scenes


def merged_by_date(scenes: list[Scene]) -> dict[np.datetime64, np.ndarray]:
    """``rasterio.merge.merge`` of each date's tiles, by date."""
    from tests._native_references import rasterio_merge

    dates: dict[np.datetime64, list[Path]] = {}
    for scene in scenes:
        dates.setdefault(scene.datetime64, []).append(scene.path)
    return {when: rasterio_merge(paths)[0] for when, paths in dates.items()}
