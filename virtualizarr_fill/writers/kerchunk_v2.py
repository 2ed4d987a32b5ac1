"""Zarr format 2 kerchunk references that read as the netCDF/HDF5 reader reads the file.

VirtualiZarr writes format 2 references by converting each array's format 3 metadata,
which reads wrong with xarray in three ways this module corrects:

* a 0-d array's chunk is keyed ``<array>/`` where zarr looks for ``<array>/0``, so the
  scalar reads as its fill value;
* the format 3 ``fill_value`` (the HDF5 header fill, what unwritten chunks hold) becomes
  the format 2 ``fill_value``, which xarray takes as the missing-data mask of a format 2
  array: valid values equal to the header fill (0 in many products, netCDF's default
  9.97e36) read as NaN, and integer arrays become float, where the netCDF readers mask
  only the CF ``_FillValue``;
* the ``_FillValue`` attribute keeps the format 3 encoding (base64 of a float64), and
  ``.zarray`` carries an ``attributes`` entry format 2 does not have.

Format 2 is written as xarray's own Zarr writer writes it: ``fill_value`` is the CF
``_FillValue`` (null when the variable has none) and ``.zattrs`` holds no
``_FillValue``. That format 2 ``fill_value`` is also what zarr returns for chunks the
references lack (zeros when null), so an array with unwritten chunks whose header fill is
not that value cannot be written as format 2: :func:`format_2_problem` says why, and
:func:`virtualizarr_fill.writers.kerchunk.to_kerchunk` then writes format 3, which keeps
the header fill and the CF sentinel apart.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray
from zarr.core.metadata.v2 import ArrayV2Metadata

from virtualizarr_fill.fill.coder import sentinel_from_attribute
from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid

__all__ = ["format_2_problem", "kerchunk_refs_v2"]

_FILL_VALUE = "_FillValue"


def _cf_fill_value(var: xr.Variable) -> Any:
    """The variable's CF ``_FillValue`` decoded to its data type, or None."""
    raw = var.encoding.get(_FILL_VALUE, var.attrs.get(_FILL_VALUE))
    if raw is None:
        return None
    return sentinel_from_attribute(raw, var.dtype)


def _written_chunks(array: ManifestArray) -> int:
    return len(array.manifest.dict())


def _same(a: Any, b: Any) -> bool:
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def format_2_problem(var: xr.Variable) -> str | None:
    """Why a virtual variable's unwritten chunks cannot read right as Zarr format 2
    references (None if they can).

    Format 2 has one ``fill_value`` for both the mask xarray applies and the value of
    chunks the references lack; the header fill such chunks hold in the file must then
    equal it (the CF ``_FillValue``, or zero when there is none).
    """
    array = var.data
    if not isinstance(array, ManifestArray):
        return None
    if _written_chunks(array) >= math.prod(chunk_grid(array.metadata).grid_shape):
        return None
    header_fill = array.metadata.fill_value
    try:
        sentinel = _cf_fill_value(var)
    except ValueError:
        return "a _FillValue attribute Zarr format 2 cannot hold"
    unwritten = np.zeros((), dtype=var.dtype) if sentinel is None else sentinel
    if _same(header_fill, unwritten):
        return None
    why = "no _FillValue" if sentinel is None else "the _FillValue"
    return (
        f"unwritten chunks, which hold the header fill value {_plain(header_fill)} in the "
        f"file but would read as {_plain(unwritten)} ({why})"
    )


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _v2_fill_value(zarray: dict[str, Any], sentinel: Any) -> Any:
    """``sentinel`` as zarr writes a format 2 ``fill_value`` ("NaN", base64 bytes, ...)."""
    metadata = ArrayV2Metadata.from_dict({**zarray, "fill_value": None})
    return dataclasses.replace(metadata, fill_value=sentinel).to_dict()["fill_value"]


def kerchunk_refs_v2(ds: xr.Dataset) -> dict[str, Any]:
    """Zarr format 2 references of ``ds`` that read as the file does (module docstring).

    VirtualiZarr's references are corrected, not rebuilt. Variables for which
    :func:`format_2_problem` answers must be written as format 3 instead.
    """
    refs: dict[str, Any] = upstream.kerchunk_writer("dataset_to_kerchunk_refs")(ds, zarr_format=2)
    store = refs["refs"]
    for key in [k for k in store if k.endswith("/.zarray")]:
        name = key.removesuffix("/.zarray")
        zarray = json.loads(store[key])
        zarray.pop("attributes", None)
        var = ds.variables.get(name)
        if var is not None and isinstance(var.data, ManifestArray):
            sentinel = _cf_fill_value(var)
            zarray["fill_value"] = None if sentinel is None else _v2_fill_value(zarray, sentinel)
            zattrs = json.loads(store[f"{name}/.zattrs"])
            zattrs.pop(_FILL_VALUE, None)
            store[f"{name}/.zattrs"] = json.dumps(zattrs, separators=(",", ":"))
        store[key] = json.dumps(zarray, separators=(",", ":"))
        if not zarray["shape"] and f"{name}/" in store:
            # zarr keys the one chunk of a 0-d format 2 array "0".
            store[f"{name}/0"] = store.pop(f"{name}/")
    return refs
