"""Kerchunk references of a virtual multiscale tree (Zarr format 3, one group per level).

VirtualiZarr writes kerchunk references of datasets only: each level's references are
written under its group name, and the root group holds the tree's multiscale
attributes (:mod:`virtualizarr_fill.multiscales.conventions`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from virtualizarr_fill.multiscales.conventions import levels_of
from virtualizarr_fill.writers.kerchunk import write_kerchunk_parquet_v3_groups

if TYPE_CHECKING:
    import xarray as xr


def multiscales_to_kerchunk(
    tree: xr.DataTree,
    target: str | Path | None = None,
    *,
    format: Literal["dict", "json", "parquet"] = "dict",
) -> dict[str, Any] | None:
    """Kerchunk references (Zarr format 3) of a virtual multiscale tree: each level's
    references under its group name, the root group with the tree's attributes.

    ``format="dict"`` returns the references; ``"json"`` and ``"parquet"`` write them to
    ``target`` (a file, or a directory for parquet).
    """
    if format == "parquet":
        if target is None:
            raise ValueError("format='parquet' needs a target path")
        levels: dict[str, xr.Dataset] = {}
        for name in levels_of(tree.attrs):  # type: ignore[arg-type]
            levels[name] = tree[name].to_dataset()
            levels[name].attrs = dict(tree[name].attrs)
        # fsspec's parquet reader needs format 3 references laid out as that module does
        write_kerchunk_parquet_v3_groups(
            {str(k): v for k, v in tree.attrs.items()}, levels, str(target)
        )
        return None
    refs: dict[str, Any] = {
        "zarr.json": json.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": dict(tree.attrs)}
        )
    }
    for name in levels_of(tree.attrs):  # type: ignore[arg-type]
        level = tree[name].to_dataset()
        level.attrs = dict(tree[name].attrs)
        level_refs = level.vz.to_kerchunk(format="dict", zarr_format=3)["refs"]  # type: ignore[call-overload]
        refs.update({f"{name}/{key}": value for key, value in level_refs.items()})
    document = {"version": 1, "refs": refs}
    if format == "dict":
        return document
    if target is None:
        raise ValueError(f"format={format!r} needs a target path")
    Path(target).write_text(json.dumps(document))
    return None


__all__ = ["multiscales_to_kerchunk"]
