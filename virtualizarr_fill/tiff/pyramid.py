"""A COG's full-resolution image and its overviews as a multiscale group
(``TIFFParser(overviews="multiscales")``).

The group holds one child group per resolution level, ``"0"`` (the full-resolution
image) to ``"n"`` (the smallest overview), and attributes describing them after the
multiscales convention (:mod:`virtualizarr_fill.multiscales.conventions`). Each level is a dataset
like the parser's single-image one: ``band_data`` with its own ``x``/``y`` pixel
centres (the full-resolution transform scaled to the level's size, as GDAL georeferences
overviews), ``band`` and ``spatial_ref`` (the same CRS in every level, with the level's
GeoTransform). A mask IFD goes next to the image of its size, as a ``mask`` variable of
dimensions ``(y, x)`` holding the stored mask samples (0: no data; 1-bit masks read as
0/1, which GDAL reports as 0/255).

Only the first pyramid of the file (its first full-resolution image, with the overviews
and masks that follow it) becomes the group; further pages and SubIFDs are left to
``tree=True``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zarr.codecs import TransposeCodec

from virtualizarr_fill.codecs.crop import CropCodec
from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.multiscales.conventions import MASK_VARIABLE, Level, describe
from virtualizarr_fill.tiff.arrays import manifest_group

if TYPE_CHECKING:
    from virtualizarr.manifests import ManifestArray, ManifestGroup

#: The GDAL metadata item (IMAGE_STRUCTURE domain) naming the overviews' resampling.
RESAMPLING_ITEM = "IMAGE_STRUCTURE:OVERVIEW_RESAMPLING"


@dataclass(frozen=True)
class PyramidImage:
    """One image of the pyramid as the parser built it: its role name in ``tree=True``
    terms (``image``, ``overview_1``, ``mask``, ``mask_overview_1``, ...), size and
    group (``band_data`` and its coordinates)."""

    role: str
    height: int
    width: int
    group: ManifestGroup


def level_names(images: Sequence[tuple[str, int, int]]) -> dict[str, str]:
    """The level each image goes to, by role: ``(role, height, width)`` of the images of
    the pyramid in, ``{role: level name}`` out. Images (not masks) are ordered by size,
    the full-resolution image first; a mask goes to the level of its size (none when no
    level has it)."""
    levels = sorted(
        (i for i in images if not i[0].startswith("mask")),
        key=lambda i: (-i[1] * i[2], i[0] != "image"),
    )
    names = {role: str(number) for number, (role, _, _) in enumerate(levels)}
    sizes = {(height, width): names[role] for role, height, width in levels}
    for role, height, width in images:
        if role.startswith("mask") and (height, width) in sizes:
            names[role] = sizes[(height, width)]
    return names


def multiscale_group(
    images: Sequence[PyramidImage], source: str, transform: tuple[float, ...] | None
) -> ManifestGroup:
    """The multiscale group of ``images`` (``transform``: the full-resolution image's,
    None without georeference); ``source`` names the file in errors."""
    names = level_names([(i.role, i.height, i.width) for i in images])
    levels = sorted(
        (i for i in images if not i.role.startswith("mask")), key=lambda i: int(names[i.role])
    )
    if not levels or levels[0].role != "image":
        raise UnsupportedFeatureError(f"{source}: no full-resolution image to build levels on")
    masks = {names[m.role]: m for m in images if m.role.startswith("mask") and m.role in names}
    base = levels[0]
    groups: dict[str, ManifestGroup] = {}
    described: list[Level] = []
    for image in levels:
        name = names[image.role]
        arrays = dict(image.group.arrays)
        mask = masks.get(name)
        if mask is not None:
            arrays[MASK_VARIABLE] = _mask_array(mask, source)
        groups[name] = manifest_group(
            arrays=arrays, attributes=dict(image.group.metadata.attributes)
        )
        described.append(
            Level(name, image.height, image.width, _level_transform(transform, base, image))
        )
    band_attributes = base.group.arrays["band_data"].metadata.attributes
    resampling = band_attributes.get(RESAMPLING_ITEM)
    attributes = describe(described, resampling if isinstance(resampling, str) else None)
    return manifest_group(groups=groups, attributes=attributes)


def _level_transform(
    transform: tuple[float, ...] | None, base: PyramidImage, image: PyramidImage
) -> tuple[float, ...] | None:
    if transform is None:
        return None
    a, b, c, d, e, f = transform[:6]
    x_ratio, y_ratio = base.width / image.width, base.height / image.height
    return (a * x_ratio, b * y_ratio, c, d * x_ratio, e * y_ratio, f)


def _mask_array(mask: PyramidImage, source: str) -> ManifestArray:
    """The mask's ``band_data`` without its band axis (one sample per pixel), as a
    ``(y, x)`` array with attributes saying what its values mean."""
    array = mask.group.arrays["band_data"]
    if array.shape[0] != 1 or any(
        isinstance(c, TransposeCodec | CropCodec) for c in array.metadata.codecs
    ):
        raise UnsupportedFeatureError(
            f"{source}: the mask of the {mask.height}x{mask.width} level has "
            f"{array.shape[0]} samples per pixel or a layout whose band axis cannot be dropped"
        )
    try:
        squeezed: ManifestArray = array[0, :, :]
    except (ValueError, NotImplementedError, IndexError) as error:
        raise UnsupportedFeatureError(
            f"{source}: the mask of the {mask.height}x{mask.width} level cannot be exposed "
            f"without its band axis ({error})"
        ) from None
    metadata = squeezed.metadata.update_attributes(_mask_attributes(squeezed.metadata.attributes))
    return type(squeezed)(metadata=metadata, chunkmanifest=squeezed.manifest)


def _mask_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in attributes.items() if k not in ("grid_mapping", "coordinates")}
    kept["long_name"] = "mask (0: no data)"
    return kept


__all__ = ["MASK_VARIABLE", "PyramidImage", "level_names", "multiscale_group"]
