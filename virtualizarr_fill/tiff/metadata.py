"""GDAL_METADATA (tag 42112) and GDAL_NODATA (tag 42113) mapped to array attributes.

* Band ``SCALE``/``OFFSET`` items (roles ``scale``/``offset``) become CF
  ``scale_factor``/``add_offset`` when every band has the same value, as rioxarray does;
  when they differ per band they are kept as ``scales``/``offsets`` lists, which CF
  decoding ignores (applying one band's scale to all would be wrong).
* Fill information goes to :func:`virtualizarr_fill.fill.tiff.consolidate_tiff_fill`.
* Every other item is kept, but an item whose name a CF decoder acts on (for example
  the ``scale_factor`` that GDAL copies from HDF4-era MODIS files, where it divides) is
  renamed with the prefix :data:`RENAMED_PREFIX`, so xarray never applies it with CF's
  meaning. Items of non-default metadata domains are named ``<domain>:<name>``.
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from virtualizarr_fill.fill.tiff import GDAL_NODATA_ATTR, consolidate_tiff_fill
from virtualizarr_fill.tiff import caches
from virtualizarr_fill.tiff.stored_tags import CachedRange, raw_tags_key
from virtualizarr_fill.zarr_model.json_values import json_copy

if TYPE_CHECKING:
    from tifffile import TiffPage

    from virtualizarr_fill.fill.decision import FillDecision

GDAL_METADATA_TAG = 42112
GDAL_NODATA_TAG = 42113

#: Prefix given to metadata items whose names CF decoding would act on.
RENAMED_PREFIX = "gdal_"

# Attribute names xarray's CF decoding (or its zarr backend) interprets: an item of the
# same name written by another convention must not reach it.
CF_ACTIVE_NAMES = frozenset(
    {
        "scale_factor",
        "add_offset",
        "_Unsigned",
        "coordinates",
        "grid_mapping",
        "bounds",
        "dtype",
        "_Encoding",
        "compressor",
        "filters",
        "chunks",
        "preferred_chunks",
        "scales",
        "offsets",
    }
)
# Band items consumed by the fill consolidation (compared case-insensitively).
_FILL_ITEMS = frozenset({"_fillvalue", "missing_value", "nodata"})


@dataclass
class GdalMetadata:
    """Items of one GDAL_METADATA document, split into dataset and per-band items."""

    dataset: dict[str, str] = field(default_factory=dict)
    bands: dict[int, dict[str, str]] = field(default_factory=dict)
    band_roles: dict[int, dict[str, str]] = field(default_factory=dict)


def parse_gdal_metadata(text: str | bytes | None) -> GdalMetadata:
    """Parse the GDAL_METADATA XML (``<GDALMetadata><Item name=.. sample=.. role=..>``)."""
    result = GdalMetadata()
    if not text:
        return result
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        root = ElementTree.fromstring(text.strip().rstrip("\x00"))
    except ElementTree.ParseError:
        return result
    for item in root.iter("Item"):
        name = item.get("name")
        if not name:
            continue
        domain = item.get("domain")
        key = f"{domain}:{name}" if domain else name
        value = item.text or ""
        sample = item.get("sample")
        if sample is None:
            result.dataset[key] = value
            continue
        band = int(sample)
        result.bands.setdefault(band, {})[key] = value
        role = item.get("role")
        if role:
            result.band_roles.setdefault(band, {})[role] = value
    return result


def _safe_name(name: str) -> str:
    return f"{RENAMED_PREFIX}{name}" if name in CF_ACTIVE_NAMES else name


def _band_number(role_values: dict[int, dict[str, str]], role: str, samples: int) -> list[float]:
    values = []
    for band in range(samples):
        text = role_values.get(band, {}).get(role)
        values.append(float(text) if text not in (None, "") else math.nan)
    return values


def scale_offset_attributes(metadata: GdalMetadata, samples: int) -> dict[str, Any]:
    """CF ``scale_factor``/``add_offset`` from band SCALE/OFFSET (see module docstring)."""
    attrs: dict[str, Any] = {}
    for role, cf_name, list_name, neutral in (
        ("scale", "scale_factor", "scales", 1.0),
        ("offset", "add_offset", "offsets", 0.0),
    ):
        if not any(role in roles for roles in metadata.band_roles.values()):
            continue
        values = [
            neutral if math.isnan(v) else v
            for v in _band_number(metadata.band_roles, role, samples)
        ]
        if len(set(values)) == 1:
            attrs[cf_name] = values[0]
        else:
            attrs[list_name] = values
    return attrs


def _band_item_attributes(metadata: GdalMetadata, samples: int) -> dict[str, Any]:
    """Band items other than scale/offset/fill: one value when bands agree, else a list."""
    names: list[str] = []
    for items in metadata.bands.values():
        for name in items:
            if name not in names:
                names.append(name)
    attrs: dict[str, Any] = {}
    for name in names:
        upper = name.upper()
        if upper in ("SCALE", "OFFSET") or name.lower() in _FILL_ITEMS:
            continue
        values = [metadata.bands.get(band, {}).get(name) for band in range(samples)]
        attrs[_safe_name(name)] = values[0] if len(set(values)) == 1 else values
    return attrs


def _tag_text(page: TiffPage, code: int) -> str | None:
    tag = page.tags.get(code)
    if tag is None:
        return None
    value = tag.value
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    return str(value).strip().rstrip("\x00").strip()


@dataclass(frozen=True)
class ArrayAttributes:
    """Attributes and fill value of one image array; ``reusable`` when they follow from
    their inputs alone (reached without a warning, which each parse must issue itself)."""

    attributes: dict[str, Any]
    fill: FillDecision
    reusable: bool = True


#: Attributes kept by the texts and data type they come from.
ATTRIBUTES_CACHE_SIZE = 256
_known: caches.ResultCache[ArrayAttributes] = caches.ResultCache(ATTRIBUTES_CACHE_SIZE)


def clear_cache() -> None:
    """Forget the attributes kept by :func:`array_attributes`."""
    _known.clear()


def array_attributes(
    page: TiffPage,
    dtype: np.dtype,
    samples: int,
    source: str,
    *,
    on_out_of_range: Literal["raise", "warn"],
    cached_range: CachedRange | None = None,
) -> ArrayAttributes:
    """Attributes of ``band_data`` from GDAL_METADATA and GDAL_NODATA, fill consolidated.

    The result depends on the two tag texts, the data type, the band count and
    ``on_out_of_range`` alone; results reached without a warning are kept by these and
    copied for later images (an archive's files repeat them). With ``cached_range``
    (``StoreFile.cached_range``) the tags are recognised by their stored bytes, without
    decoding the texts again.
    """
    plain = caches.ENABLED and dtype.fields is None and not dtype.metadata
    raw_key = None
    if plain and cached_range is not None:
        raw = raw_tags_key(page, _TEXT_TAGS, cached_range)
        raw_key = None if raw is None else ("raw", dtype.str, samples, raw, on_out_of_range)
        known = _known.get(raw_key)
        if known is not None:
            return _copied(known)
    metadata_text = _tag_text(page, GDAL_METADATA_TAG)
    nodata = _tag_text(page, GDAL_NODATA_TAG)
    key = (dtype.str, samples, metadata_text, nodata, on_out_of_range) if plain else None
    known = _known.get(key)
    if known is not None:
        _known.put(raw_key, known)
        return _copied(known)
    warned: list[str] = []
    result = _array_attributes(
        metadata_text, nodata, dtype, samples, source, on_out_of_range, warned
    )
    if key is not None and not warned:
        _known.put(key, result)
        _known.put(raw_key, result)
        return _copied(result)
    return dataclasses.replace(result, reusable=False)


_TEXT_TAGS = (GDAL_METADATA_TAG, GDAL_NODATA_TAG)


def _copied(attributes: ArrayAttributes) -> ArrayAttributes:
    """A copy whose dictionaries and lists the caller may change."""
    fill = dataclasses.replace(attributes.fill, attributes=json_copy(attributes.fill.attributes))
    return ArrayAttributes(
        attributes=json_copy(attributes.attributes), fill=fill, reusable=attributes.reusable
    )


def _array_attributes(
    metadata_text: str | None,
    nodata: str | None,
    dtype: np.dtype,
    samples: int,
    source: str,
    on_out_of_range: Literal["raise", "warn"],
    warned: list[str],
) -> ArrayAttributes:
    metadata = parse_gdal_metadata(metadata_text)
    raw: dict[str, Any] = dict(metadata.dataset)
    if nodata is not None:
        raw[GDAL_NODATA_ATTR] = nodata
    band_items: list[Mapping[str, Any]] = [metadata.bands.get(b, {}) for b in range(samples)]
    decision = consolidate_tiff_fill(
        raw,
        dtype,
        source=source,
        on_out_of_range=on_out_of_range,
        band_items=band_items,
        warned=warned,
    )
    attributes = {_safe_name(k): v for k, v in decision.attributes.items()}
    for name, value in _band_item_attributes(metadata, samples).items():
        attributes.setdefault(name, value)
    attributes.update(scale_offset_attributes(metadata, samples))
    return ArrayAttributes(attributes=attributes, fill=decision)


__all__ = [
    "CF_ACTIVE_NAMES",
    "RENAMED_PREFIX",
    "ArrayAttributes",
    "GdalMetadata",
    "array_attributes",
    "clear_cache",
    "parse_gdal_metadata",
    "scale_offset_attributes",
]
