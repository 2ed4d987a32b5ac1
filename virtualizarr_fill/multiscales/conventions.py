"""Group attributes describing a pyramid of resolution levels, after the Zarr
``multiscales`` convention composed with the ``spatial`` convention.

Followed versions (the conventions are drafts developed for GeoZarr):

* multiscales **v0.1** — https://github.com/zarr-conventions/multiscales/blob/v0.1/README.md
  (schema ``refs/tags/v0.1/schema.json``);
* spatial **v0.1** — https://github.com/zarr-conventions/spatial/blob/v0.1/README.md.

A multiscale group holds one child group per level, named ``"0"`` (full resolution),
``"1"``, ... and its attributes::

    {
      "zarr_conventions": [<multiscales v0.1>, <spatial v0.1>],
      "multiscales": {
        "layout": [
          {"asset": "0", "transform": {"scale": [1.0, 1.0], "translation": [0.0, 0.0]},
           "spatial:shape": [H0, W0], "spatial:transform": [a, b, c, d, e, f]},
          {"asset": "1", "derived_from": "0",
           "transform": {"scale": [H0 / H1, W0 / W1], "translation": [0.0, 0.0]},
           "spatial:shape": [H1, W1], "spatial:transform": [...]},
          ...
        ],
        "resampling_method": "average"
      },
      "spatial:dimensions": ["y", "x"],
      "spatial:bbox": [xmin, ymin, xmax, ymax]
    }

Every level is derived from level ``"0"``, so each ``scale`` is the level's decimation
factor per axis, in the order of ``spatial:dimensions`` (y, x): the full-resolution
extent over the level's, as GDAL georeferences overviews (the pixel size grows by it,
the origin stays, so ``translation`` is zero). ``spatial:transform`` is the level's
affine transform (rasterio's coefficient order) where the image is georeferenced, and
``resampling_method`` is recorded where the writer said which it used.

:func:`check_description` verifies these rules, for tests and for stores built by others.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MULTISCALES_CONVENTION: dict[str, str] = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v0.1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v0.1/README.md",
    "uuid": "d35379db-88df-4056-af3a-620245f8e347",
    "name": "multiscales",
    "description": "Multiscale layout of zarr datasets",
}
SPATIAL_CONVENTION: dict[str, str] = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/spatial/refs/tags/v0.1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/spatial/blob/v0.1/README.md",
    "uuid": "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4",
    "name": "spatial",
    "description": "Spatial coordinate information",
}
#: The dimensions ``scale``, ``spatial:shape`` and ``spatial:dimensions`` refer to.
SPATIAL_DIMENSIONS = ("y", "x")

# An asset path: relative, no empty segment, no "..".
_ASSET = re.compile(r"^(?!/)(?!.*\.\.)[^/]+(/[^/]+)*$")

#: The name of each level's mask variable.
MASK_VARIABLE = "mask"


@dataclass(frozen=True)
class Level:
    """One resolution level: its group name, size and affine transform (rasterio order
    ``(a, b, c, d, e, f)``; None for an image without georeference)."""

    name: str
    height: int
    width: int
    transform: tuple[float, ...] | None = None


def level_scale(base: Level, level: Level) -> tuple[float, float]:
    """The level's decimation factor per axis (y, x) relative to ``base``."""
    return (base.height / level.height, base.width / level.width)


def describe(levels: Sequence[Level], resampling_method: str | None = None) -> dict[str, Any]:
    """Group attributes describing ``levels`` (full resolution first)."""
    if not levels:
        raise ValueError("a multiscale group needs at least one level")
    base = levels[0]
    layout: list[dict[str, Any]] = []
    for level in levels:
        entry: dict[str, Any] = {"asset": level.name}
        if level is not base:
            entry["derived_from"] = base.name
        entry["transform"] = {
            "scale": [float(s) for s in level_scale(base, level)],
            "translation": [0.0, 0.0],
        }
        entry["spatial:shape"] = [int(level.height), int(level.width)]
        if level.transform is not None:
            entry["spatial:transform"] = [float(v) for v in level.transform[:6]]
        layout.append(entry)
    description: dict[str, Any] = {"layout": layout}
    if resampling_method:
        description["resampling_method"] = resampling_method.lower()
    attributes: dict[str, Any] = {
        "zarr_conventions": [dict(MULTISCALES_CONVENTION), dict(SPATIAL_CONVENTION)],
        "multiscales": description,
        "spatial:dimensions": list(SPATIAL_DIMENSIONS),
    }
    if base.transform is not None:
        attributes["spatial:bbox"] = _bbox(base)
    return attributes


def _bbox(level: Level) -> list[float]:
    assert level.transform is not None
    a, b, c, d, e, f = level.transform[:6]
    xs, ys = [], []
    for col, row in ((0, 0), (level.width, 0), (0, level.height), (level.width, level.height)):
        xs.append(a * col + b * row + c)
        ys.append(d * col + e * row + f)
    return [float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys))]


def levels_of(attributes: Mapping[str, Any]) -> list[str]:
    """The level group names a multiscale group's attributes list, in layout order."""
    return [str(entry["asset"]) for entry in attributes["multiscales"]["layout"]]


def check_description(
    attributes: Mapping[str, Any], shapes: Mapping[str, tuple[int, int]] | None = None
) -> list[str]:
    """The ways ``attributes`` break the conventions as followed here (empty: none).

    Checks the convention registration (multiscales v0.1 and, where ``spatial:``
    properties are used, spatial v0.1), the layout objects (asset paths, ``transform``
    where a level is ``derived_from`` another, numeric ``scale``/``translation`` of one
    value per spatial dimension), each level's ``spatial:transform`` against its
    ``scale`` (pixel size grown by it, origin kept) and, given ``shapes`` (the y/x size
    of each level's arrays by asset), each ``spatial:shape`` and that every asset exists.
    """
    problems: list[str] = []
    conventions = attributes.get("zarr_conventions")
    if not isinstance(conventions, list):
        return ["zarr_conventions is missing or not a list"]
    if not any(_is_convention(c, MULTISCALES_CONVENTION) for c in conventions):
        problems.append("zarr_conventions does not register multiscales v0.1")
    uses_spatial = any(k.startswith("spatial:") for k in attributes) or any(
        k.startswith("spatial:")
        for entry in attributes.get("multiscales", {}).get("layout", [])
        if isinstance(entry, Mapping)
        for k in entry
    )
    if uses_spatial and not any(_is_convention(c, SPATIAL_CONVENTION) for c in conventions):
        problems.append("spatial: properties are used but spatial v0.1 is not registered")
    description = attributes.get("multiscales")
    if not isinstance(description, Mapping):
        return [*problems, "multiscales is missing or not an object"]
    layout = description.get("layout")
    if not isinstance(layout, list) or not layout:
        return [*problems, "multiscales.layout is missing, not a list, or empty"]
    if "resampling_method" in description and not isinstance(description["resampling_method"], str):
        problems.append("multiscales.resampling_method is not a string")
    dimensions = attributes.get("spatial:dimensions", list(SPATIAL_DIMENSIONS))
    if not (isinstance(dimensions, list) and len(dimensions) == 2):
        problems.append("spatial:dimensions is not a list of two names")
    entries = {str(e.get("asset")): e for e in layout if isinstance(e, Mapping)}
    for position, entry in enumerate(layout):
        problems.extend(_check_entry(position, entry, entries, shapes))
    return problems


def _is_convention(candidate: Any, expected: Mapping[str, str]) -> bool:
    """A registration naming the convention by uuid, schema or spec URL, with no field
    that contradicts ``expected``."""
    if not isinstance(candidate, Mapping):
        return False
    identifying = ("uuid", "schema_url", "spec_url")
    if not any(key in candidate for key in identifying):
        return False
    return all(candidate[key] == value for key, value in expected.items() if key in candidate)


def _numbers(value: Any, count: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == count
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )


def _check_entry(
    position: int,
    entry: Any,
    entries: Mapping[str, Any],
    shapes: Mapping[str, tuple[int, int]] | None,
) -> list[str]:
    where = f"multiscales.layout[{position}]"
    if not isinstance(entry, Mapping):
        return [f"{where} is not an object"]
    problems: list[str] = []
    asset = entry.get("asset")
    if not isinstance(asset, str) or not _ASSET.match(asset):
        return [f"{where}.asset {asset!r} is not a relative path"]
    source = entry.get("derived_from")
    transform = entry.get("transform")
    if source is not None:
        if not isinstance(source, str) or not _ASSET.match(source):
            problems.append(f"{where}.derived_from {source!r} is not a relative path")
        elif source not in entries:
            problems.append(f"{where}.derived_from {source!r} is no level of the layout")
        if transform is None:
            problems.append(f"{where} is derived_from another level but has no transform")
    if transform is not None:
        if not isinstance(transform, Mapping):
            problems.append(f"{where}.transform is not an object")
            transform = {}
        for key in ("scale", "translation"):
            if key in transform and not _numbers(transform[key], 2):
                problems.append(f"{where}.transform.{key} is not two numbers (y, x)")
    shape = entry.get("spatial:shape")
    if shape is not None and not (
        _numbers(shape, 2) and all(isinstance(v, int) and v > 0 for v in shape)
    ):
        problems.append(f"{where}.spatial:shape is not two positive integers")
        shape = None
    if shapes is not None:
        if asset not in shapes:
            problems.append(f"{where}.asset {asset!r} is not a group of the hierarchy")
        elif shape is not None and tuple(shape) != tuple(shapes[asset]):
            problems.append(f"{where}.spatial:shape {shape} but the arrays are {shapes[asset]}")
    affine = entry.get("spatial:transform")
    if affine is not None:
        if not _numbers(affine, 6):
            problems.append(f"{where}.spatial:transform is not six numbers")
        elif isinstance(source, str) and source in entries and isinstance(transform, Mapping):
            problems.extend(_check_scaled(where, entries[source], affine, transform))
    return problems


def _check_scaled(
    where: str, source: Mapping[str, Any], affine: list[float], transform: Mapping[str, Any]
) -> list[str]:
    """Without translation, the level's affine transform is its source's with the pixel
    size multiplied by ``scale`` and the same origin (what the spatial convention asks of
    overviews sharing their origin)."""
    base = source.get("spatial:transform")
    scale = transform.get("scale", [1.0, 1.0])
    if transform.get("translation", [0.0, 0.0]) != [0.0, 0.0]:
        return []  # an offset level: nothing to compare without the registration
    if not (isinstance(base, list) and _numbers(base, 6) and _numbers(scale, 2)):
        return []
    sy, sx = scale
    a, b, c, d, e, f = base
    expected = [a * sx, b * sy, c, d * sx, e * sy, f]
    pairs = zip(affine, expected, strict=True)
    if all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in pairs):
        return []
    return [f"{where}.spatial:transform {affine} is not its source's scaled by {scale}"]


__all__ = [
    "MASK_VARIABLE",
    "MULTISCALES_CONVENTION",
    "SPATIAL_CONVENTION",
    "SPATIAL_DIMENSIONS",
    "Level",
    "check_description",
    "describe",
    "level_scale",
    "levels_of",
]
