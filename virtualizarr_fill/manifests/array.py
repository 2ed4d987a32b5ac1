"""``FillManifestArray``: the ManifestArray virtualizarr-fill's parsers build.

VirtualiZarr's ``ManifestArray`` holds arrays on regular chunk grids only, refuses to
concatenate arrays whose lengths are not chunk multiples, and forgets an array's CF
fill attributes when it becomes an xarray variable. This subclass

* accepts regular and rectilinear chunk grids (and turns on zarr's
  ``array.rectilinear_chunks`` flag the first time it holds a rectilinear one: zarr
  refuses to read or write such metadata otherwise);
* answers ``np.concatenate``, ``np.stack``, ``np.expand_dims``, ``np.broadcast_to`` and
  ``np.where`` from its own table (:meth:`__array_function__`), building rectilinear
  grids and the truncate/crop codecs padded chunks need
  (:mod:`virtualizarr_fill.manifests.operations`), and refusing inputs whose fill values
  differ (the project's fill-value merge rule);
* keeps ``_FillValue``/``missing_value`` and the other attributes that change decoded
  values (``scale_factor``, ``add_offset``, ``units``...) in its metadata's attributes
  when it becomes an xarray variable, so that concatenation can compare them (xarray
  hands only the wrapped arrays to ``np.concatenate``) and refuse inputs packed
  differently, naming the variable where a virtual dataset named its array;
* indexes chunk-aligned selections of rectilinear grids.

Everything it returns is again a ``FillManifestArray``; VirtualiZarr's own arrays are
never touched. A plain ``ManifestArray`` combined with one of ours is taken over by
ours (``np.concatenate`` calls the subclass first, as NumPy does for subclasses).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any, Literal, cast

import numpy as np
import xarray as xr
from virtualizarr.manifests.array import ManifestArray
from virtualizarr.manifests.manifest import ChunkManifest
from zarr.core.chunk_grids import FixedDimension
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill import upstream
from virtualizarr_fill.fill.conflicts import FILL_ATTRIBUTES, combining_variable
from virtualizarr_fill.fill.encoding import DECODING_ATTRIBUTES
from virtualizarr_fill.manifests import operations
from virtualizarr_fill.zarr_model.chunk_grids import (
    chunk_grid,
    codec_edges,
    format_edges,
    is_rectilinear,
    is_sharded,
)
from virtualizarr_fill.zarr_model.concat_inputs import check_encodings
from virtualizarr_fill.zarr_model.metadata_copies import copy_without_dimension_names
from virtualizarr_fill.zarr_model.rectilinear_flag import enable_rectilinear_chunks

#: The attributes an array keeps when it becomes an xarray variable: those that
#: arrays combined into one must agree on.
_KEPT_ATTRIBUTES = (*FILL_ATTRIBUTES, *DECODING_ATTRIBUTES)


def _metadata_from(metadata: ArrayV3Metadata | dict[str, Any]) -> ArrayV3Metadata:
    if isinstance(metadata, ArrayV3Metadata):
        return metadata
    if "zarr_format" in metadata:  # a zarr.json document
        return ArrayV3Metadata.from_dict(metadata)
    return ArrayV3Metadata(**metadata)


class FillManifestArray(ManifestArray):
    """A ManifestArray on any chunk grid, with edge codecs and CF fill attributes that
    survive concatenation.

    Parameters
    ----------
    metadata
        Zarr v3 array metadata (or its dict), on a regular or rectilinear chunk grid.
    chunkmanifest
        The chunk references, as a ``ChunkManifest`` or its dict; its chunk-grid shape
        must be the metadata's.
    """

    #: The variable this array is the data of, where a virtual dataset named it
    #: (:meth:`named`): concatenation names it in its refusals.
    variable_name: str | None = None

    def __init__(
        self, metadata: ArrayV3Metadata | dict[str, Any], chunkmanifest: dict | ChunkManifest
    ) -> None:
        parsed = _metadata_from(metadata)
        if isinstance(chunkmanifest, ChunkManifest):
            manifest = chunkmanifest
        elif isinstance(chunkmanifest, dict):
            separator = cast(
                Literal[".", "/"], getattr(parsed.chunk_key_encoding, "separator", ".")
            )
            manifest = ChunkManifest(
                entries=chunkmanifest,
                shape=chunk_grid(parsed).grid_shape,
                separator=separator,
            )
        else:
            raise TypeError(
                "chunkmanifest arg must be of type ChunkManifest or dict, but got type "
                f"{type(chunkmanifest)}"
            )
        operations.check_manifest_matches_grid(parsed, manifest)
        if is_rectilinear(parsed):
            enable_rectilinear_chunks()
        upstream.set_array_state(self, parsed, manifest)

    @classmethod
    def wrap(cls, array: ManifestArray) -> FillManifestArray:
        """``array`` as a FillManifestArray sharing its metadata and manifest."""
        if isinstance(array, cls):
            return array
        return upstream.manifest_array(cls, array.metadata, array.manifest)

    def named(self, name: str) -> FillManifestArray:
        """This array, as the data of variable ``name`` (set in place: call it on an
        array just built for one variable, as :meth:`variable_data` builds)."""
        self.variable_name = name
        return self

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled in another process (a dask worker): that process reads it too.
        self.__dict__.update(state)
        if is_rectilinear(self.metadata):
            enable_rectilinear_chunks()

    def __repr__(self) -> str:
        if not is_rectilinear(self.metadata):
            return super().__repr__()
        sizes = ", ".join(
            str(d.size) if isinstance(d, FixedDimension) else format_edges(codec_edges(d))
            for d in chunk_grid(self.metadata).dimensions
        )
        return f"ManifestArray<shape={self.shape}, dtype={self.dtype}, chunks=({sizes})>"

    # ----------------------------------------------------------------- numpy protocol

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if not all(issubclass(t, (ManifestArray, np.ndarray)) for t in types):
            return NotImplemented
        handler = _HANDLED.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        # Functions that build no array (result_type, isnan, full_like): VirtualiZarr's.
        upstream_handler = upstream.handled_functions().get(func)
        if upstream_handler is None:
            return NotImplemented
        return upstream_handler(*args, **kwargs)

    # ----------------------------------------------------------------- indexing

    def __getitem__(self, key: Any, /) -> FillManifestArray:
        """Chunk-aligned basic indexing (see ``ManifestArray.__getitem__``), on any grid."""
        if not is_rectilinear(self.metadata):
            return FillManifestArray.wrap(upstream.index_regular(self, key))
        indexer = operations.normalized_indexer(self, key)
        metadata, manifest = operations.indexed(self, indexer)
        result = self if metadata is self.metadata else _built(metadata, manifest)
        for position in operations.new_axis_positions(indexer):
            result = _expand_dims(result, axis=position)
        return result

    # ----------------------------------------------------------------- copies

    def rename_paths(self, new: str | Callable[[str], str]) -> FillManifestArray:
        """See ``ManifestArray.rename_paths``."""
        return _built(self.metadata, self.manifest.rename_paths(new))

    def with_fill_value_only(self, fill_value: Any) -> FillManifestArray:
        """See ``ManifestArray.with_fill_value_only`` (any chunk grid)."""
        metadata = dataclasses.replace(self.metadata, fill_value=fill_value)
        empty = ChunkManifest(entries={}, shape=chunk_grid(self.metadata).grid_shape)
        return _built(metadata, empty)

    def to_virtual_variable(self) -> xr.Variable:
        """An xarray variable wrapping this array, as ``ManifestArray.to_virtual_variable``
        makes it, except that the wrapped array keeps the CF fill attributes
        (``_FillValue``, ``missing_value``) in its metadata, so that concatenation can
        refuse inputs whose sentinels differ."""
        if self.metadata.dimension_names is not None:
            dims: tuple[Any, ...] = tuple(self.metadata.dimension_names)
        elif self.ndim == 0:
            dims = ()
        else:
            raise ValueError(
                f"Cannot create virtual variable from {self.ndim}-dimensional array without "
                "dimension names."
            )
        return xr.Variable(data=self.variable_data(), dims=dims, attrs=self.metadata.attributes)

    def variable_data(self) -> FillManifestArray:
        """The array :meth:`to_virtual_variable` wraps: no dimension names, and of the
        attributes only the CF fill attributes and those that change decoded values
        (:data:`~virtualizarr_fill.fill.encoding.DECODING_ATTRIBUTES`), which a
        concatenation compares."""
        attrs = self.metadata.attributes
        kept = {k: attrs[k] for k in _KEPT_ATTRIBUTES if k in attrs}
        stripped = copy_without_dimension_names(self.metadata, kept)
        # The manifest already matches the metadata's grid (checked when this was built).
        return upstream.manifest_array(FillManifestArray, stripped, self.manifest)


def _built(metadata: ArrayV3Metadata, manifest: ChunkManifest) -> FillManifestArray:
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest)


# --------------------------------------------------------------------------- array functions


def _upstream(func: Any) -> Callable[..., Any]:
    return upstream.handled_functions()[func]


def _combined(func: Any, arrays: Any, axis: Any, new_axis: bool) -> FillManifestArray:
    arrays = list(arrays)
    if not isinstance(axis, int | np.integer):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    upstream.warn_if_untested()
    name = next((a.variable_name for a in arrays if getattr(a, "variable_name", None)), None)
    with combining_variable(name) if name else contextlib.nullcontext():
        if any(is_sharded(a.metadata) for a in arrays) and not any(
            is_rectilinear(a.metadata) for a in arrays
        ):
            check_encodings([a.metadata for a in arrays], operations.describer(arrays))
            return FillManifestArray.wrap(_upstream(func)(arrays, axis=axis))
        combine = operations.stacked if new_axis else operations.concatenated
        return _built(*combine(arrays, int(axis)))


def _concatenate(arrays: Any, /, *, axis: int | None = 0) -> FillManifestArray:
    if axis is None:
        raise NotImplementedError(
            "concatenating with axis=None flattens the arrays, a reshape a ManifestArray cannot do"
        )
    return _combined(np.concatenate, arrays, axis, new_axis=False)


def _stack(arrays: Any, /, *, axis: int = 0) -> FillManifestArray:
    return _combined(np.stack, arrays, axis, new_axis=True)


def _expand_dims(x: ManifestArray, /, *, axis: int = 0) -> FillManifestArray:
    return _stack([x], axis=axis)


def _broadcast_to(x: ManifestArray, /, shape: tuple[int, ...]) -> FillManifestArray:
    if is_sharded(x.metadata) and not is_rectilinear(x.metadata):
        return FillManifestArray.wrap(_upstream(np.broadcast_to)(x, shape=shape))
    return _built(*operations.broadcast(x, shape))


def _where(condition: Any, x: Any, y: Any, /) -> Any:
    if _takes_every_element_of(condition, x, y):
        return x
    if isinstance(x, ManifestArray) and is_rectilinear(x.metadata) and np.isscalar(y):
        cond = np.asarray(condition, dtype=bool)
        if cond.shape == x.shape and np.array_equal(~cond, operations.missing_element_mask(x)):
            return x
        raise NotImplementedError(
            "np.where on a ManifestArray only supports xarray's fill of the array's own "
            "missing chunks; general masking would require loading values"
        )
    result = _upstream(np.where)(condition, x, y)
    return FillManifestArray.wrap(result) if isinstance(result, ManifestArray) else result


def _takes_every_element_of(condition: Any, x: Any, y: Any) -> bool:
    """Whether ``np.where(condition, x, y)`` is ``x`` itself: ``condition`` true
    everywhere, and neither it nor ``y`` widening ``x``'s shape or type. xarray's default
    merge of a variable that is not concatenated (``compat="no_conflicts"``, a GeoTIFF's
    ``spatial_ref``) fills one file's array from the next file's, once found equal, so."""
    if not isinstance(x, ManifestArray):
        return False
    cond = np.asarray(condition)
    if cond.dtype != bool or not cond.all():
        return False
    y_shape = getattr(y, "shape", ())
    try:
        if np.broadcast_shapes(cond.shape, x.shape, y_shape) != x.shape:
            return False
    except ValueError:
        return False
    return isinstance(y, ManifestArray) and y.dtype == x.dtype


_HANDLED: dict[Any, Callable[..., Any]] = {
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.expand_dims: _expand_dims,
    np.broadcast_to: _broadcast_to,
    np.where: _where,
}


__all__ = ["FillManifestArray"]
