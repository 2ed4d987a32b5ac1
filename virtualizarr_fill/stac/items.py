"""STAC items read, their asset resolved to a file URL, and grouped by time.

Items come as pystac objects (an ``ItemCollection``, ``Item`` objects) or as the
location of STAC JSON: an ItemCollection file (what a STAC API search returns, saved),
one Item file, a folder of Item files (``*.json``), or an ``http(s)://`` or ``s3://``
URL of such a file. Asset hrefs relative to the JSON file are resolved against it, as
the STAC specification allows.

Grouping, as odc-stac's ``groupby``:

* ``"time"``: items of the same datetime form one group (one mosaic);
* ``"solar_day"``: items of the same local solar date form one group; the date is the
  item's UTC datetime shifted by ``int(lon / 15)`` hours, ``lon`` the longitude of the
  centroid of the item's footprint (its GeoJSON geometry), which is odc-stac's rule.

The groups come back sorted by time whatever order the items were given in; a group's
time is the earliest datetime of its items.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urljoin, urlsplit

from virtualizarr_fill.errors import StacItemError as StacItemError

if TYPE_CHECKING:
    import pystac

GroupBy = Literal["time", "solar_day"]
GROUPINGS: tuple[str, ...] = ("time", "solar_day")

__all__ = [
    "GROUPINGS",
    "GroupBy",
    "Scene",
    "SceneGroup",
    "StacItemError",
    "group_scenes",
    "read_items",
    "scenes_of",
    "solar_date",
]


@dataclass(frozen=True)
class Scene:
    """One item's asset: the item id, its datetime (UTC), the file URL, the
    longitude of its footprint's centroid (``None`` without geometry) and the item's
    ``proj:`` fields (the asset's overriding the item's)."""

    item_id: str
    datetime: dt.datetime
    href: str
    longitude: float | None
    projection: dict[str, Any]

    def describe(self) -> str:
        return f"item {self.item_id!r} ({self.href})"


@dataclass(frozen=True)
class SceneGroup:
    """The scenes of one time step (one mosaic)."""

    time: dt.datetime
    scenes: tuple[Scene, ...]

    @property
    def item_ids(self) -> list[str]:
        return [s.item_id for s in self.scenes]

    @property
    def hrefs(self) -> list[str]:
        return [s.href for s in self.scenes]


# --------------------------------------------------------------------------- reading


def _is_url(text: str) -> bool:
    return "://" in text


def _read_text(location: str) -> str:
    """The text of a local path or a ``file``/``http(s)``/``s3`` URL."""
    scheme = urlsplit(location).scheme if _is_url(location) else ""
    try:
        if scheme in ("", "file"):
            return Path(_local(location)).read_text(encoding="utf-8")
        if scheme in ("http", "https"):
            import urllib.request

            with urllib.request.urlopen(location, timeout=60) as response:
                return bytes(response.read()).decode("utf-8")
        import obstore
        from obstore.store import from_url

        head, name = location.rsplit("/", 1)
        return bytes(obstore.get(from_url(head), name).bytes()).decode("utf-8")
    except (OSError, ValueError, RuntimeError) as error:
        raise StacItemError(f"{location}: cannot read STAC JSON ({error})") from None


def _local(location: str) -> str:
    return urlsplit(location).path if location.startswith("file://") else location


def _item_files(location: str) -> list[str] | None:
    """The Item JSON files of a folder (local, or an ``s3://`` prefix ending in ``/``);
    ``None`` when ``location`` is a file."""
    if not _is_url(location) or location.startswith("file://"):
        folder = Path(_local(location)).expanduser()
        if not folder.is_dir():
            return None
        return [str(p.resolve()) for p in sorted(folder.glob("*.json"))]
    if urlsplit(location).scheme == "s3" and location.endswith("/"):
        import obstore
        from obstore.store import from_url

        store = from_url(location)
        names = [
            str(entry["path"])
            for batch in obstore.list(store)
            for entry in batch
            if str(entry["path"]).endswith(".json")
        ]
        return [location + name for name in sorted(names)]
    return None


def _base_of(location: str) -> str:
    """The absolute location relative hrefs of ``location``'s JSON resolve against."""
    if _is_url(location) and not location.startswith("file://"):
        return location
    return "file://" + str(Path(_local(location)).expanduser().resolve())


def _parse_json(location: str) -> list[tuple[pystac.Item, str | None]]:
    import pystac

    text = _read_text(location)
    try:
        document = json.loads(text)
    except ValueError as error:
        raise StacItemError(f"{location}: not JSON ({error})") from None
    base = _base_of(location)
    kind = document.get("type") if isinstance(document, dict) else None
    try:
        if kind == "FeatureCollection":
            collection = pystac.ItemCollection.from_dict(document, preserve_dict=False)
            return [(item, base) for item in collection]
        if kind == "Feature":
            return [(pystac.Item.from_dict(document, preserve_dict=False), base)]
    except (KeyError, TypeError, ValueError, pystac.STACError) as error:
        raise StacItemError(f"{location}: not a STAC Item or ItemCollection ({error})") from None
    raise StacItemError(
        f"{location}: not a STAC Item or ItemCollection (its type is {kind!r}, not "
        "'Feature' or 'FeatureCollection')"
    )


def read_items(
    source: str | Path | pystac.ItemCollection | pystac.Item | Iterable[pystac.Item],
) -> list[tuple[pystac.Item, str | None]]:
    """The items of ``source`` (see the module docstring), each with the location
    relative asset hrefs resolve against (``None`` for pystac objects, whose own self
    link says it)."""
    import pystac

    if isinstance(source, pystac.Item):
        return [(source, None)]
    if isinstance(source, (str, Path)):
        location = str(source)
        files = _item_files(location)
        if files is None:
            return _parse_json(location)
        if not files:
            raise StacItemError(f"{location}: a folder without Item JSON files (*.json)")
        return [pair for file in files for pair in _parse_json(file)]
    return [(item, None) for item in source]


# --------------------------------------------------------------------------- scenes


def _resolve(href: str, base: str | None, item: pystac.Item) -> str:
    """``href`` as an absolute URL (``file://`` for local files)."""
    if _is_url(href):
        return href
    remote = base is not None and _is_url(base) and not base.startswith("file://")
    if href.startswith("/") and not remote:
        return "file://" + posixpath.normpath(href)
    if base is None:
        base = item.get_self_href()
        if base is None:
            raise StacItemError(
                f"item {item.id!r}: asset href {href!r} is relative and the item has no "
                "self link to resolve it against; pass the JSON file's path or URL instead "
                "of pystac objects"
            )
        base = _base_of(base)
    if base.startswith("file://"):
        folder = posixpath.dirname(base.removeprefix("file://"))
        return "file://" + posixpath.normpath(posixpath.join(folder, href))
    return urljoin(base, href)


def _centroid_longitude(geometry: dict[str, Any] | None) -> float | None:
    """The longitude of the area centroid of a GeoJSON Polygon or MultiPolygon (the
    exterior rings), or the mean of a point set for other geometries."""
    if not geometry:
        return None
    kind = geometry.get("type")
    coordinates = geometry.get("coordinates") or []
    rings = (
        [coordinates[0]]
        if kind == "Polygon"
        else [polygon[0] for polygon in coordinates]
        if kind == "MultiPolygon"
        else []
    )
    area = moment = 0.0
    for ring in rings:
        for (x0, y0, *_), (x1, y1, *_) in itertools.pairwise(ring):
            cross = x0 * y1 - x1 * y0
            area += cross
            moment += (x0 + x1) * cross
    if area:
        return moment / (3.0 * area)
    points = [p for ring in rings for p in ring] or (
        [coordinates] if kind == "Point" else list(coordinates) if kind == "MultiPoint" else []
    )
    return sum(float(p[0]) for p in points) / len(points) if points else None


def solar_date(when: dt.datetime, longitude: float) -> dt.date:
    """The local solar date of ``when`` (UTC) at ``longitude``: odc-stac's rule, the time
    shifted by whole hours, ``int(longitude / 15)``."""
    return (when + dt.timedelta(hours=int(longitude / 15))).date()


def _projection(item: pystac.Item, asset: pystac.Asset) -> dict[str, Any]:
    fields = {k: v for k, v in item.properties.items() if k.startswith("proj:")}
    fields.update({k: v for k, v in asset.extra_fields.items() if k.startswith("proj:")})
    return fields


def _datetime(item: pystac.Item) -> dt.datetime:
    when = item.datetime
    if when is None:
        raise StacItemError(f"item {item.id!r}: no datetime (a time stack needs one per item)")
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def scenes_of(
    items: Sequence[tuple[pystac.Item, str | None]], asset: str, *, skip_bad: bool = False
) -> tuple[list[Scene], list[str]]:
    """The asset ``asset`` of every item as a :class:`Scene`, and the reasons of the
    items left out (with ``skip_bad``; else the first bad item raises
    :class:`StacItemError`)."""
    scenes: list[Scene] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for item, base in items:
        try:
            if item.id in seen:
                raise StacItemError(f"item {item.id!r} is listed twice")
            found = item.assets.get(asset)
            if found is None:
                held = ", ".join(sorted(item.assets)) or "none"
                raise StacItemError(f"item {item.id!r}: no asset {asset!r} (its assets: {held})")
            scenes.append(
                Scene(
                    item.id,
                    _datetime(item),
                    _resolve(found.href, base, item),
                    _centroid_longitude(item.geometry),
                    _projection(item, found),
                )
            )
            seen.add(item.id)
        except StacItemError as error:
            if not skip_bad:
                raise
            skipped.append(str(error))
    return scenes, skipped


def _key(scene: Scene, groupby: GroupBy) -> Any:
    if groupby == "time":
        return scene.datetime
    if scene.longitude is None:
        raise StacItemError(
            f"item {scene.item_id!r}: no geometry, so no solar day (group by 'time' instead)"
        )
    return solar_date(scene.datetime, scene.longitude)


def group_scenes(scenes: Iterable[Scene], groupby: GroupBy = "time") -> list[SceneGroup]:
    """The scenes grouped (see the module docstring), in time order; within a group the
    scenes are in datetime, then id, order."""
    if groupby not in GROUPINGS:
        raise ValueError(f"groupby must be one of {', '.join(GROUPINGS)}, not {groupby!r}")
    groups: dict[Any, list[Scene]] = {}
    for scene in scenes:
        groups.setdefault(_key(scene, groupby), []).append(scene)
    ordered = []
    for members in groups.values():
        members.sort(key=lambda s: (s.datetime, s.item_id))
        ordered.append(SceneGroup(members[0].datetime, tuple(members)))
    ordered.sort(key=lambda g: g.time)
    return ordered
