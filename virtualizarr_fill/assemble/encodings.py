"""A check of virtual datasets before they are combined with xarray: the virtual
variables of every dataset must store their numbers with the same data type and CF
encoding (:mod:`virtualizarr_fill.fill.encoding`).

This package's arrays refuse such a combination themselves (``np.concatenate``, which
``xr.concat``, ``xr.combine_nested`` and ``virtualizarr.open_virtual_mfdataset`` call);
:func:`check_encoding` gives the same refusal for datasets whose arrays are not this
package's (VirtualiZarr's own parsers), or before anything is combined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import xarray as xr
from virtualizarr.manifests import ManifestArray

from virtualizarr_fill.fill.encoding import (
    EncodingConflictError,
    encoding_conflict_message,
    encoding_difference,
)
from virtualizarr_fill.manifests.operations import first_path

__all__ = ["check_encoding"]


def _source(ds: xr.Dataset, index: int, names: Sequence[str] | None) -> str:
    if names is not None:
        return str(names[index])
    for variable in ds.variables.values():
        if isinstance(variable.data, ManifestArray):
            path = first_path(variable.data.manifest)
            if path:
                return path
    return f"dataset {index}"


def check_encoding(datasets: Sequence[xr.Dataset], names: Sequence[str] | None = None) -> None:
    """Refuse virtual datasets whose virtual variables differ in data type or in an
    attribute that changes decoded values (``scale_factor``, ``add_offset``,
    ``_Unsigned``, ``valid_min``/``valid_max``/``valid_range``, ``units``,
    ``calendar``, ``flag_values``, ``flag_masks``).

    A virtual variable combined from several files has one set of attributes, so the
    other files' numbers would be decoded with the first file's (or, once xarray drops
    the attributes that differ, not decoded at all). Loaded variables are not compared:
    xarray decoded each file's already.

    Parameters
    ----------
    datasets
        The virtual datasets to combine (from ``open_virtual_dataset``, any parser).
    names
        A name for each dataset in messages (default: the file of its first chunk).

    Raises
    ------
    virtualizarr_fill.IncompatibleArraysError
        One line naming the variable, the attribute, two datasets and their values.

    Examples
    --------
    >>> vdss = [open_virtual_dataset(url, registry=registry, parser=parser) for url in urls]
    >>> virtualizarr_fill.check_encoding(vdss, names=urls)
    >>> combined = xr.concat(vdss, dim="time")
    """
    datasets = list(datasets)
    if names is not None and len(names) != len(datasets):
        raise ValueError(f"{len(names)} names for {len(datasets)} datasets")
    if len(datasets) < 2:
        return
    first = datasets[0]
    for name, variable in first.variables.items():
        if not isinstance(variable.data, ManifestArray):
            continue
        for index, ds in enumerate(datasets[1:], start=1):
            other = ds.variables.get(name)
            if other is None or not isinstance(other.data, ManifestArray):
                continue
            difference: tuple[str, Any, Any] | None
            if other.dtype != variable.dtype:
                difference = ("data type", str(variable.dtype), str(other.dtype))
            else:
                difference = encoding_difference(variable.dtype, variable.attrs, other.attrs)
            if difference is not None:
                attribute, expected, found = difference
                raise EncodingConflictError(
                    encoding_conflict_message(
                        str(name),
                        attribute,
                        _source(first, 0, names),
                        expected,
                        _source(ds, index, names),
                        found,
                    )
                )
