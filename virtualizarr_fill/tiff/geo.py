"""GeoTIFF georeferencing mapped to rioxarray-style coordinates and a ``spatial_ref`` variable.

* The affine transform comes from ModelPixelScale (33550) + one ModelTiepoint (33922), or
  from ModelTransformation (34264). With ``GTRasterTypeGeoKey = PixelIsPoint`` the
  tiepoint locates a pixel centre, so the corner-based transform is shifted by half a
  pixel, as GDAL does.
* An axis-aligned transform gives 1-d ``x``/``y`` coordinates of pixel centres, computed
  as rasterio/rioxarray compute them (``transform * (i + 0.5, 0.5)``). A rotated or sheared
  transform, or ground control points (several tiepoints), give no ``x``/``y``: the tags
  are kept as attributes of ``spatial_ref``.
* The GeoKeys are attributes of ``spatial_ref``. When pyproj is installed and the keys
  name an EPSG coordinate reference system, ``crs_wkt`` (and ``spatial_ref``, as GDAL and
  rioxarray write it) hold its WKT; user-defined systems keep only the GeoKeys.
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill.tiff import caches
from virtualizarr_fill.tiff.stored_tags import CachedRange, raw_tags_key
from virtualizarr_fill.zarr_model.json_values import Uncacheable, exact_key

if TYPE_CHECKING:
    from tifffile import TiffPage

MODEL_PIXEL_SCALE = 33550
MODEL_TIEPOINT = 33922
MODEL_TRANSFORMATION = 34264
GEO_KEY_DIRECTORY = 34735

PIXEL_IS_POINT = 2
USER_DEFINED = 32767

Affine = tuple[float, float, float, float, float, float]  # a, b, c, d, e, f (rasterio order)


@dataclass
class Georeference:
    """What one IFD's geo tags say, in the forms the dataset needs."""

    transform: Affine | None = None
    geokeys: dict[str, Any] = field(default_factory=dict)
    tag_attributes: dict[str, Any] = field(default_factory=dict)
    crs_wkt: str | None = None

    @property
    def axis_aligned(self) -> bool:
        return self.transform is not None and self.transform[1] == 0 and self.transform[3] == 0

    @property
    def is_georeferenced(self) -> bool:
        return bool(self.geokeys) or self.transform is not None

    @functools.cached_property
    def content_key(self) -> tuple[Any, ...] | None:
        """A hashable form equal only for georeferences that give the same coordinates
        and attributes (None when a value has no such form)."""
        try:
            return (
                None if self.transform is None else struct.pack("<6d", *self.transform),
                exact_key(self.geokeys),
                exact_key(self.tag_attributes),
                self.crs_wkt,
            )
        except (Uncacheable, struct.error, TypeError):
            return None


def _json_value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def _float_list(page: TiffPage, code: int) -> list[float] | None:
    tag = page.tags.get(code)
    if tag is None or tag.value is None:
        return None
    values: list[float] = np.asarray(tag.value, dtype=np.float64).ravel().tolist()
    return values


_SKIPPED_GEOTIFF_TAGS = frozenset(
    {"ModelPixelScale", "ModelTiepoint", "ModelTransformation", "IntergraphMatrix"}
)


def geokeys_of(page: TiffPage) -> dict[str, Any]:
    """GeoKeyDirectory entries by name (enums as their integer codes)."""
    if GEO_KEY_DIRECTORY not in page.tags:
        return {}
    fast = _plain_geokeys(page)
    if fast is not None:
        return fast
    return _tifffile_geokeys(page)


def _tifffile_geokeys(page: TiffPage) -> dict[str, Any]:
    keys = page.geotiff_tags or {}
    return {name: _json_value(v) for name, v in keys.items() if name not in _SKIPPED_GEOTIFF_TAGS}


GEO_DOUBLE_PARAMS = 34736
GEO_ASCII_PARAMS = 34737
_RPC_COEFFICIENTS = 50844


@functools.cache
def _geokey_tables() -> tuple[dict[int, str], dict[int, dict[Any, int]]]:
    """tifffile's GeoKey names by code, and per coded key its enum values (as ints)."""
    from tifffile import TIFF

    names = {int(key.value): key.name for key in TIFF.GEO_KEYS}
    codes = {int(key): {m.value: int(m.value) for m in cls} for key, cls in TIFF.GEO_CODES.items()}
    return names, codes


def _plain_geokeys(page: TiffPage) -> dict[str, Any] | None:
    """The GeoKeys of a well-formed GeoKeyDirectory, or None for any other.

    Hand-written: the same result as tifffile's ``TiffPage.geotiff_tags`` after the
    conversions of :func:`geokeys_of` (tests compare the two on every corpus file), for
    the directories GDAL and libgeotiff write: every key within the directory, values
    inline or in GeoDoubleParams/GeoAsciiParams within range, no RPC coefficients, and
    tiepoints/transformation of the sizes tifffile reshapes. tifffile's general decoding
    (building enums per key, converting tags this parser skips) costs several times more;
    anything else is left to it, with its warnings and errors.
    """
    tags = page.tags
    # valueof, as tifffile reads these tags: None for a tag whose value cannot be read.
    directory = tags.valueof(GEO_KEY_DIRECTORY)
    if type(directory) is not tuple or len(directory) < 4 or directory[0] != 1:
        return None
    count = directory[3]
    if type(count) is not int or len(directory) != 4 + 4 * count:
        return None
    if _RPC_COEFFICIENTS in tags or not _reshapable_model_tags(page):
        return None
    names, codes = _geokey_tables()
    doubles = _param_values(page, GEO_DOUBLE_PARAMS, tuple)
    ascii_params = _param_values(page, GEO_ASCII_PARAMS, str)
    result: dict[str, Any] = {
        "KeyDirectoryVersion": directory[0],
        "KeyRevision": directory[1],
        "KeyRevisionMinor": directory[2],
    }
    for start in range(4, len(directory), 4):
        key, location, number, offset = directory[start : start + 4]
        value: Any
        if location == 0:
            value = offset
        else:
            source = (
                doubles
                if location == GEO_DOUBLE_PARAMS
                else ascii_params
                if location == GEO_ASCII_PARAMS
                else None
            )
            if source is None or number < 1 or offset + number > len(source):
                return None
            if number == 1:
                value = source[offset]
            else:
                value = source[offset : offset + number]
                if location == GEO_ASCII_PARAMS and value[-1] == "|":
                    value = value[:-1]
        if type(value) is tuple:
            value = list(value)  # of floats, as _json_value lists them
        else:
            coded = codes.get(key)
            if coded is not None:
                value = coded.get(value, value)
        result[names.get(key, key)] = value  # type: ignore[index]
    return result


def _param_values(page: TiffPage, code: int, kind: type) -> Any:
    """GeoDoubleParams (a tuple of floats) or GeoAsciiParams (a string), else None."""
    value = page.tags.valueof(code)
    if type(value) is not kind:
        return None
    if isinstance(value, tuple) and not all(type(v) is float for v in value):
        return None
    return value


def _reshapable_model_tags(page: TiffPage) -> bool:
    """Whether tifffile would reshape ModelTiepoint and ModelTransformation without error."""
    for code, size in ((MODEL_TIEPOINT, 6), (MODEL_TRANSFORMATION, 16)):
        value = page.tags.valueof(code)
        if value is None:
            continue
        if isinstance(value, np.ndarray):  # long arrays (ground control points)
            if value.dtype.kind != "f":
                return False
            length = int(value.size)
        elif type(value) is tuple and all(type(v) is float for v in value):
            length = len(value)
        else:
            return False
        if length % size if code == MODEL_TIEPOINT else length != size:
            return False
    return True


def _transform(
    matrix: list[float] | None,
    scale: list[float] | None,
    tiepoints: list[float] | None,
    pixel_is_point: bool,
) -> Affine | None:
    if matrix is not None and len(matrix) >= 8:
        a, b, c, d, e, f = matrix[0], matrix[1], matrix[3], matrix[4], matrix[5], matrix[7]
    else:
        if scale is None or tiepoints is None or len(tiepoints) != 6 or len(scale) < 2:
            return None
        i, j, _, x, y, _ = tiepoints
        a, b, d, e = scale[0], 0.0, 0.0, -scale[1]
        c, f = x - i * a, y - j * e
    if pixel_is_point:
        c, f = c - (a + b) / 2, f - (d + e) / 2
    return (a, b, c, d, e, f)


def transform_from_tags(page: TiffPage, pixel_is_point: bool) -> Affine | None:
    """The pixel-corner affine transform, or None (no tags, or ground control points)."""
    matrix = _float_list(page, MODEL_TRANSFORMATION)
    if matrix is not None and len(matrix) >= 8:
        return _transform(matrix, None, None, pixel_is_point)
    return _transform(
        matrix,
        _float_list(page, MODEL_PIXEL_SCALE),
        _float_list(page, MODEL_TIEPOINT),
        pixel_is_point,
    )


@functools.lru_cache(maxsize=256)
def _epsg_wkt(code: int) -> str | None:
    try:
        from pyproj import CRS
    except ImportError:
        return None
    try:
        return str(CRS.from_epsg(code).to_wkt())
    except Exception:
        return None


def _crs_wkt(geokeys: dict[str, Any]) -> str | None:
    """WKT of an EPSG-coded CRS named by the GeoKeys (None without pyproj or code)."""
    model = geokeys.get("GTModelTypeGeoKey")
    order: tuple[str, ...] = ("ProjectedCSTypeGeoKey", "GeographicTypeGeoKey")
    if model == 2:
        order = ("GeographicTypeGeoKey",)
    for key in order:
        code = geokeys.get(key)
        if isinstance(code, int) and 0 < code < USER_DEFINED:
            return _epsg_wkt(code)
    return None


INTERGRAPH_MATRIX = 33920
#: Every tag the georeference (or tifffile's GeoKey decoding) reads, besides tags a
#: GeoKey may point at (only GeoDoubleParams and GeoAsciiParams on the cached path).
_GEO_TAGS = (
    GEO_KEY_DIRECTORY,
    GEO_DOUBLE_PARAMS,
    GEO_ASCII_PARAMS,
    MODEL_PIXEL_SCALE,
    MODEL_TIEPOINT,
    MODEL_TRANSFORMATION,
    INTERGRAPH_MATRIX,
    _RPC_COEFFICIENTS,
)
#: The tags that only georeference an image (nothing else of the IFD depends on them).
GEO_TAG_CODES = frozenset(_GEO_TAGS)
#: Georeferences kept by the bytes of their tags.
GEOREFERENCE_CACHE_SIZE = 256
_georeferences: caches.ResultCache[Georeference] = caches.ResultCache(GEOREFERENCE_CACHE_SIZE)


def _raw_tags_key(page: TiffPage, cached_range: CachedRange) -> Hashable | None:
    """The geo tags as the file stores them: two IFDs with the same key decode to the
    same georeference."""
    return raw_tags_key(page, _GEO_TAGS, cached_range)


def georeference(page: TiffPage, cached_range: CachedRange | None = None) -> Georeference:
    """Transform, GeoKeys and CRS of one IFD.

    With ``cached_range`` (``StoreFile.cached_range`` of the file), georeferences are kept
    by the bytes of their tags and shared between IFDs and files that store the same tags
    (the files of one archive usually do): treat the result as read-only.
    """
    key = None if cached_range is None or not caches.ENABLED else _raw_tags_key(page, cached_range)
    known = _georeferences.get(key)
    if known is not None:
        return known
    result, decoded_here = _decode_georeference(page)
    if decoded_here:
        _georeferences.put(key, result)
    return result


def clear_cache() -> None:
    """Forget the georeferences kept by :func:`georeference`."""
    _georeferences.clear()


def _decode_georeference(page: TiffPage) -> tuple[Georeference, bool]:
    """The georeference, and whether it was decoded from the geo tags alone (not by
    tifffile's general GeoKey decoding, which may read other tags)."""
    plain = _plain_geokeys(page) if GEO_KEY_DIRECTORY in page.tags else {}
    geokeys = plain if plain is not None else _tifffile_geokeys(page)
    pixel_is_point = geokeys.get("GTRasterTypeGeoKey") == PIXEL_IS_POINT
    matrix = _float_list(page, MODEL_TRANSFORMATION)
    scale = _float_list(page, MODEL_PIXEL_SCALE)
    tiepoints = _float_list(page, MODEL_TIEPOINT)
    result = Georeference(
        geokeys=geokeys, transform=_transform(matrix, scale, tiepoints, pixel_is_point)
    )
    for name, values in (
        ("ModelPixelScale", scale),
        ("ModelTiepoint", tiepoints),
        ("ModelTransformation", matrix),
    ):
        if values is not None:
            result.tag_attributes[name] = values
    if geokeys:
        result.crs_wkt = _crs_wkt(geokeys)
    return result, plain is not None


def pixel_centres(transform: Affine, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """x and y of pixel centres, with rasterio/rioxarray's floating-point operations.

    rioxarray composes the transform with a half-pixel translation and applies it to the
    pixel indices (``x = i * a + 0 * b + c'``, ``y = 0 * d + j * e + f'``); the same
    operations in the same order give bit-identical coordinates. The zero terms are one
    value for every pixel, so they are added as scalars, and indices below 2**53 are
    exact in float64, so the products are computed in place on float64 indices.
    """
    a, b, c, d, e, f = transform
    centre_c = a * 0.5 + b * 0.5 + c
    centre_f = d * 0.5 + e * 0.5 + f
    x = np.arange(width, dtype=np.float64)
    x *= a
    x += 0.0 * b
    x += centre_c
    y = np.arange(height, dtype=np.float64)
    y *= e
    y += 0.0 * d
    y += centre_f
    return x, y


def scaled_transform(
    transform: Affine, full_size: tuple[int, int], reduced_size: tuple[int, int]
) -> Affine:
    """The transform of a reduced-resolution image covering the same extent (GDAL's rule:
    pixel size times the ratio of the image sizes)."""
    a, b, c, d, e, f = transform
    x_ratio = full_size[1] / reduced_size[1]
    y_ratio = full_size[0] / reduced_size[0]
    return (a * x_ratio, b * y_ratio, c, d * x_ratio, e * y_ratio, f)


def inherited_georeference(
    parent: Georeference, full_size: tuple[int, int], reduced_size: tuple[int, int]
) -> Georeference:
    """The georeference an overview or mask without geo tags takes from its full-resolution
    image: the same GeoKeys and CRS, the transform scaled to its size (as GDAL does), and
    none of the parent's tag attributes."""
    transform = parent.transform
    if transform is not None:
        transform = scaled_transform(transform, full_size, reduced_size)
    result = Georeference(
        transform=transform, geokeys=parent.geokeys, tag_attributes={}, crs_wkt=parent.crs_wkt
    )
    parent_key = parent.content_key
    if parent_key is not None:
        # The parent's key with this transform and no tag attributes, without walking
        # the shared GeoKeys again.
        try:
            own = None if transform is None else struct.pack("<6d", *transform)
        except (struct.error, TypeError):
            return result
        result.__dict__["content_key"] = (own, parent_key[1], exact_key({}), parent_key[3])
    return result


def gdal_geotransform(transform: Affine) -> str:
    """GDAL's GeoTransform string ``"c a b f d e"`` (as rioxarray writes it)."""
    a, b, c, d, e, f = transform
    return " ".join(repr(float(v)) for v in (c, a, b, f, d, e))


def _copied(value: Any) -> Any:
    return list(value) if type(value) is list else value


def spatial_ref_attributes(geo: Georeference) -> dict[str, Any]:
    """Attributes of the ``spatial_ref`` variable (lists copied: georeferences are shared)."""
    attrs: dict[str, Any] = {name: _copied(value) for name, value in geo.geokeys.items()}
    for name, value in geo.tag_attributes.items():
        attrs[name] = _copied(value)
    if geo.crs_wkt is not None:
        attrs["crs_wkt"] = geo.crs_wkt
        attrs["spatial_ref"] = geo.crs_wkt
    if geo.transform is not None:
        attrs["GeoTransform"] = gdal_geotransform(geo.transform)
    return attrs


__all__ = [
    "GEO_TAG_CODES",
    "Affine",
    "Georeference",
    "clear_cache",
    "gdal_geotransform",
    "geokeys_of",
    "georeference",
    "inherited_georeference",
    "pixel_centres",
    "scaled_transform",
    "spatial_ref_attributes",
    "transform_from_tags",
]
