"""Multiscale groups of many files and their stores: a mosaic (or stack) of COGs keeps
its levels, and a multiscale tree becomes kerchunk references.

``TIFFParser(overviews="multiscales")`` turns one COG into a multiscale group (levels
``"0"``..``"n"``, see :mod:`virtualizarr_fill.tiff.pyramid`). :func:`combine_multiscales`
combines the trees of many files level by level, along the dimension their full
resolution images are combined along; a level is kept where every file has it with the
same decimation factors (the leading levels common to all; the others are left out with
a warning naming the files that lack them). The combined tree is described again after
the multiscales convention (:mod:`virtualizarr_fill.multiscales.conventions`).

Icechunk stores take the tree as it is (``virtualizarr_fill.to_icechunk(tree, store)``;
read it back with ``virtualizarr_fill.open_icechunk_datatree``, or one level with
``open_icechunk(location, group="0")``);
kerchunk references are written by
:func:`virtualizarr_fill.writers.kerchunk_multiscales.multiscales_to_kerchunk`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.errors import (
    IncompatibleArraysError,
    UnsupportedFeatureError,
    VirtualizarrFillError,
)
from virtualizarr_fill.multiscales.conventions import MASK_VARIABLE, Level, describe, levels_of

if TYPE_CHECKING:
    import xarray as xr

#: Combines the datasets of one level (in file order) along a dimension.
Combine = Callable[[Sequence["xr.Dataset"], Sequence[str], str], "xr.Dataset"]


def _layout(tree: xr.DataTree, url: str) -> list[dict[str, Any]]:
    try:
        layout = tree.attrs["multiscales"]["layout"]
        levels_of(tree.attrs)  # type: ignore[arg-type]
    except (KeyError, TypeError) as error:
        raise UnsupportedFeatureError(
            f"{url}: not a multiscale group (no multiscales layout: {error})"
        ) from None
    return list(layout)


def _scale(entry: dict[str, Any]) -> tuple[float, ...]:
    return tuple(float(s) for s in entry.get("transform", {}).get("scale", (1.0, 1.0)))


def common_levels(trees: Sequence[xr.DataTree], urls: Sequence[str]) -> list[str]:
    """The leading levels every tree has with the same decimation factors (as the first
    tree names them); warns naming the files whose further levels are left out."""
    layouts = [_layout(tree, url) for tree, url in zip(trees, urls, strict=True)]
    kept: list[str] = []
    for position, entry in enumerate(layouts[0]):
        scale = _scale(entry)
        if not all(
            position < len(other)
            and len(_scale(other[position])) == len(scale)
            and all(
                math.isclose(a, b, rel_tol=1e-9)
                for a, b in zip(_scale(other[position]), scale, strict=True)
            )
            for other in layouts[1:]
        ):
            break
        kept.append(str(entry["asset"]))
    longer = [url for url, layout in zip(urls, layouts, strict=True) if len(layout) > len(kept)]
    if longer:
        warnings.warn(
            f"only the {len(kept)} levels with the same decimation factors in every file are "
            f"kept; left out: further levels of {', '.join(longer[:5])}"
            + (f" and {len(longer) - 5} more files" if len(longer) > 5 else ""),
            UserWarning,
            stacklevel=2,
        )
    return kept


def combine_level(
    datasets: Sequence[xr.Dataset],
    urls: Sequence[str],
    dim: str,
    *,
    new_dim: bool | None = None,
) -> xr.Dataset:
    """One level's datasets concatenated along ``dim`` in the order given (stacked along
    a new dimension when ``new_dim``, by default when no dataset has ``dim``), as
    ``xr.combine_nested`` does with the arguments that keep the files' attributes."""
    import xarray as xr

    if new_dim is None:
        new_dim = all(dim not in ds.dims for ds in datasets)
    return xr.combine_nested(
        list(datasets),
        concat_dim=dim,
        data_vars="all" if new_dim else "minimal",
        coords="minimal",
        compat="override",
        join="exact",
        combine_attrs="drop_conflicts",
    )


def combine_multiscales(
    trees: Sequence[xr.DataTree],
    urls: Sequence[str],
    dim: str,
    *,
    combine: Combine | None = None,
) -> xr.DataTree:
    """The multiscale trees of many files combined level by level along ``dim``.

    Parameters
    ----------
    trees
        One multiscale tree per file (``open_virtual_datatree(url, registry,
        parser=TIFFParser(overviews="multiscales"))``), in the order to combine them.
    urls
        The files, for messages.
    dim
        The dimension to combine along: an existing one (``"x"``, ``"y"``: a mosaic) or a
        new one (a stack).
    combine
        How the datasets of one level are combined (default: ``xr.combine_nested`` with
        exact alignment of the other dimensions).

    Returns
    -------
    xarray.DataTree
        Levels ``"0"``.. with the levels common to every file, described after the
        multiscales convention.
    """
    import xarray as xr

    if not trees:
        raise ValueError("no multiscale trees to combine")
    combine = combine or combine_level
    names = common_levels(trees, urls)
    first_layout = {str(e["asset"]): e for e in _layout(trees[0], urls[0])}
    children: dict[str, xr.DataTree] = {}
    levels: list[Level] = []
    for name in names:
        datasets = [tree[name].to_dataset() for tree in trees]
        combined = _combined_level(name, datasets, urls, dim, combine)
        children[name] = xr.DataTree(combined)
        height, width = int(combined.sizes["y"]), int(combined.sizes["x"])
        affine = first_layout[name].get("spatial:transform")
        # The first file starts every combined axis, so its level's transform (pixel
        # size and origin) is the combined level's.
        levels.append(Level(name, height, width, None if affine is None else tuple(affine)))
    resampling = trees[0].attrs["multiscales"].get("resampling_method")
    attributes = describe(levels, resampling if isinstance(resampling, str) else None)
    return xr.DataTree.from_dict({"/": xr.Dataset(attrs=attributes), **children})


def _combined_level(
    name: str, datasets: Sequence[xr.Dataset], urls: Sequence[str], dim: str, combine: Combine
) -> xr.Dataset:
    """One level combined; its masks are left out (with a warning) where they alone
    cannot be: a bit-packed mask tile cut short at a file's edge cannot be cropped
    inside the mosaic, as its image can."""
    try:
        return combine(datasets, urls, dim)
    except (ValueError, NotImplementedError, VirtualizarrFillError) as error:
        failure = error
    if any(MASK_VARIABLE in ds.variables for ds in datasets):
        without = [ds.drop_vars(MASK_VARIABLE, errors="ignore") for ds in datasets]
        try:
            combined = combine(without, urls, dim)
        except (ValueError, NotImplementedError, VirtualizarrFillError):
            pass
        else:
            warnings.warn(
                f"level {name}: the masks cannot be combined along {dim!r} and are left "
                f"out ({failure})",
                UserWarning,
                stacklevel=3,
            )
            return combined
    raise IncompatibleArraysError(
        f"level {name} of the files cannot be combined along {dim!r}: {failure}"
    ) from None


def multiscale_levels(store: Any, group: str | None = None) -> list[str] | None:
    """The level names of the multiscale group at ``group`` (the root by default) of a
    Zarr format 3 store, or ``None`` when it is not one (or not a group)."""
    import zarr

    try:
        node = zarr.open_group(store, path=group or "", mode="r", zarr_format=3)
    except (FileNotFoundError, KeyError, ValueError, TypeError):
        return None  # not a group: whoever opens it says why
    try:
        return levels_of(node.attrs)
    except (KeyError, TypeError):
        return None


__all__ = ["combine_multiscales", "common_levels", "multiscale_levels"]
