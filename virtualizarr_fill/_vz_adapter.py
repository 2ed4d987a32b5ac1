"""Every adaptation of VirtualiZarr internals virtualizarr-fill needs, in one place.

VirtualiZarr's ``ManifestArray`` supports only regular chunk grids, refuses to
concatenate arrays whose lengths are not chunk multiples, and its writers read
``metadata.chunks`` (which raises for rectilinear grids). This module teaches it:

* ``ManifestArray(...)`` with rectilinear metadata builds a
  :class:`RectilinearManifestArray` (a subclass: chunk-aligned indexing, ``repr``,
  placeholders on rectilinear grids). Pickles of such arrays name this module, so a
  worker process that unpickles one imports :mod:`virtualizarr_fill`, which turns on
  zarr's ``array.rectilinear_chunks`` flag and installs this adapter.
* ``np.concatenate`` / ``np.stack`` / ``np.expand_dims`` / ``np.broadcast_to`` /
  ``np.where`` on ManifestArrays, registered in VirtualiZarr's own array-function
  dispatch table, with chunk grids and codec chains from :mod:`virtualizarr_fill.concat`.
* :class:`FileManifestStore`, the ManifestStore our parsers return, whose ``str`` is
  one line (zarr formats it into every array and group it opens).
* the few module functions that have no extension point (listed in :func:`install`).

:func:`install` applies all of it once per process (importing this module calls it)
and refuses VirtualiZarr or zarr versions outside the range it was written against.
Each adapted function carries a one-line ``Retire when`` comment naming the upstream
change that makes it unnecessary.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import virtualizarr
import xarray as xr
import zarr
from packaging.version import Version
from virtualizarr.manifests import array_api as vz_array_api
from virtualizarr.manifests import indexing as vz_indexing
from virtualizarr.manifests import store as vz_store
from virtualizarr.manifests.array import ManifestArray
from virtualizarr.manifests.group import ManifestGroup
from virtualizarr.manifests.manifest import ChunkManifest
from virtualizarr.manifests.utils import copy_and_replace_metadata
from zarr.core.chunk_grids import DimensionGrid, FixedDimension
from zarr.core.metadata.v3 import ArrayV3Metadata, RectilinearChunkGridMetadata

from virtualizarr_fill._zarr_config import enable_rectilinear_chunks
from virtualizarr_fill.concat import (
    FILL_ATTRIBUTES,
    chunk_grid,
    codec_edges,
    codecs_with_new_axis,
    codecs_without_axis,
    concatenation_metadata,
    data_edges,
    dimension_from_edges,
    format_edges,
    grid_metadata,
    is_rectilinear,
    is_sharded,
    stack_metadata,
)
from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.grid import edge_handling_of

if TYPE_CHECKING:
    from virtualizarr.manifests.indexing import T_Indexer

#: VirtualiZarr versions whose internals this module adapts (min inclusive, max exclusive).
VIRTUALIZARR_RANGE = (Version("2.8"), Version("2.9"))
#: zarr versions whose chunk-grid classes and rectilinear flag this module relies on.
ZARR_RANGE = (Version("3.4.2"), Version("3.5"))

_installed = False
_originals: dict[str, Any] = {}


def check_versions(virtualizarr_version: str, zarr_version: str) -> None:
    """Raise ``ImportError`` unless both versions are in the adapted ranges."""
    for name, found, (low, high) in (
        ("virtualizarr", virtualizarr_version, VIRTUALIZARR_RANGE),
        ("zarr", zarr_version, ZARR_RANGE),
    ):
        version = Version(found)
        if not low <= Version(version.base_version) < high:
            raise ImportError(
                f"virtualizarr-fill adapts {name} internals and supports {name}>={low},<{high}; "
                f"found {name} {found}. Install a supported version."
            )


# --------------------------------------------------------------------------- helpers


def _first_path(manifest: ChunkManifest) -> str | None:
    paths = manifest._paths
    if paths.size == 0:
        return None
    flat = paths.reshape(-1)
    nonempty = np.flatnonzero(flat != "")
    return str(flat[nonempty[0]]) if nonempty.size else None


def _describer(arrays: Sequence[ManifestArray]) -> Callable[[int], str]:
    """Names input ``i`` by position and the file its first chunk comes from."""

    def describe(index: int) -> str:
        path = _first_path(arrays[index].manifest)
        return f"input {index} ({path})" if path else f"input {index}"

    return describe


def _check_manifest_matches_grid(marr: ManifestArray) -> None:
    grid_shape = chunk_grid(marr.metadata).grid_shape
    if marr.manifest.shape_chunk_grid != grid_shape:
        raise ValueError(
            f"chunk manifest of shape {marr.manifest.shape_chunk_grid} does not match the "
            f"chunk grid of shape {grid_shape} of an array of shape {marr.shape}"
        )


def _dims_of(metadata: ArrayV3Metadata) -> tuple[DimensionGrid, ...]:
    return chunk_grid(metadata).dimensions


def _insert_name(names: tuple[str | None, ...] | None, axis: int) -> tuple[str | None, ...] | None:
    return None if names is None else (*names[:axis], None, *names[axis:])


def _is_sharded(marr: ManifestArray) -> bool:
    return is_sharded(marr.metadata)


def _upstream(name: str) -> Callable[..., Any]:
    return cast(Callable[..., Any], _originals[name])


# --------------------------------------------------------------------------- the store


class FileManifestStore(vz_store.ManifestStore):
    """VirtualiZarr's ``ManifestStore`` for one parsed file, with a one-line ``str``.

    zarr formats ``str(store)`` into every group and array it opens (three times per
    array read), and VirtualiZarr's ``__str__`` renders every array of the store's
    group with its manifest: opening one array of a file with a thousand datasets cost
    tens of milliseconds, and reading all of them grew with the square of their count.
    Here ``str`` names the parsed file instead.

    Retire when VirtualiZarr's ``ManifestStore.__str__`` no longer renders the group.
    """

    def __init__(self, group: ManifestGroup, *, registry: Any, url: str) -> None:
        super().__init__(group, registry=registry)
        self.url = url

    def __str__(self) -> str:
        return f"ManifestStore({self.url!r})"

    def __repr__(self) -> str:
        return str(self)


# --------------------------------------------------------------------------- the subclass


class RectilinearManifestArray(ManifestArray):
    """A ManifestArray whose metadata declares a rectilinear chunk grid.

    ``ManifestArray(metadata, manifest)`` returns one of these when ``metadata`` is
    rectilinear (once :func:`install` has run), so code that builds ManifestArrays,
    including VirtualiZarr's own, needs no change.
    """

    # Retire when VirtualiZarr's ManifestArray accepts RectilinearChunkGridMetadata.
    def __init__(
        self, metadata: ArrayV3Metadata | dict[str, Any], chunkmanifest: dict | ChunkManifest
    ) -> None:
        parsed = metadata if isinstance(metadata, ArrayV3Metadata) else _metadata_from(metadata)
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
        self._metadata = parsed
        self._manifest = manifest
        _check_manifest_matches_grid(self)

    # Retire when ManifestArray.__repr__ stops reading metadata.chunks.
    def __repr__(self) -> str:
        sizes = ", ".join(
            str(d.size) if isinstance(d, FixedDimension) else format_edges(codec_edges(d))
            for d in _dims_of(self.metadata)
        )
        return f"ManifestArray<shape={self.shape}, dtype={self.dtype}, chunks=({sizes})>"

    # Retire when VirtualiZarr's chunk-aligned indexing reads edges from zarr's ChunkGrid.
    def __getitem__(self, key: T_Indexer, /) -> ManifestArray:
        return _index_rectilinear(self, key)

    # Retire when ManifestArray.with_fill_value_only sizes its manifest from the ChunkGrid.
    def with_fill_value_only(self, fill_value: Any) -> ManifestArray:
        new_metadata = dataclasses.replace(self.metadata, fill_value=fill_value)
        empty = ChunkManifest(entries={}, shape=chunk_grid(self.metadata).grid_shape)
        return ManifestArray(metadata=new_metadata, chunkmanifest=empty)


def _metadata_from(metadata: dict[str, Any]) -> ArrayV3Metadata:
    if "zarr_format" in metadata:  # a zarr.json document
        return ArrayV3Metadata.from_dict(metadata)
    return ArrayV3Metadata(**metadata)


def _declares_rectilinear(metadata: object) -> bool:
    if isinstance(metadata, ArrayV3Metadata):
        return isinstance(metadata.chunk_grid, RectilinearChunkGridMetadata)
    if isinstance(metadata, Mapping):
        grid = metadata.get("chunk_grid")
        if isinstance(grid, RectilinearChunkGridMetadata):
            return True
        return isinstance(grid, Mapping) and grid.get("name") == "rectilinear"
    return False


# Retire when VirtualiZarr's ManifestArray accepts RectilinearChunkGridMetadata.
def _manifest_array_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    if cls is ManifestArray:
        metadata = args[0] if args else kwargs.get("metadata")
        if _declares_rectilinear(metadata):
            cls = RectilinearManifestArray
    return object.__new__(cls)


# --------------------------------------------------------------------------- indexing


def _select_1d(
    dim: DimensionGrid, indexer: int | slice, axis: int
) -> tuple[int | slice, DimensionGrid | None]:
    """Chunk-grid selector and resulting dimension (None when the axis is dropped)."""
    extent = dim.extent
    boundaries_message = (
        f"a slice along axis {axis} must start and stop on chunk boundaries (chunk edges "
        f"{format_edges(data_edges(dim))}); a ManifestArray cannot split a stored chunk"
    )
    if isinstance(indexer, int | np.integer):
        i = int(indexer)
        if i < 0:
            i += extent
        if not 0 <= i < extent:
            raise IndexError(f"index {indexer} is out of bounds for axis {axis} with size {extent}")
        chunk = dim.index_to_chunk(i)
        if dim.chunk_offset(chunk) != i or dim.chunk_size(chunk) != 1:
            raise vz_indexing.SubChunkIndexingError(
                f"an integer index along axis {axis} needs chunks of length 1 there; "
                + boundaries_message
            )
        return chunk, None
    start, stop, step = indexer.indices(extent)
    if step != 1:
        raise vz_indexing.SubChunkIndexingError(
            f"a slice with step {step} along axis {axis} would split stored chunks"
        )
    stop = max(stop, start)
    if start == stop:
        raise NotImplementedError(
            f"an empty selection along axis {axis} of a rectilinear ManifestArray is not supported"
        )
    first = dim.index_to_chunk(start)
    if dim.chunk_offset(first) != start:
        raise vz_indexing.SubChunkIndexingError(boundaries_message)
    if stop == extent:
        end = dim.nchunks
    else:
        end = dim.index_to_chunk(stop)
        if dim.chunk_offset(end) != stop:
            raise vz_indexing.SubChunkIndexingError(boundaries_message)
    edges = codec_edges(dim)[first:end]
    return slice(first, end, 1), dimension_from_edges(edges, stop - start)


def _index_rectilinear(marr: ManifestArray, key: T_Indexer) -> ManifestArray:
    """Chunk-aligned basic indexing of an array on any chunk grid."""
    indexer = vz_indexing.check_shape_and_maybe_replace_ellipsis(
        vz_indexing.check_and_sanitize_indexer_type(key), marr.ndim
    )
    basic = [i for i in indexer if i is not None]
    dims = _dims_of(marr.metadata)
    selectors: list[int | slice] = []
    new_dims: list[DimensionGrid] = []
    dropped: list[int] = []
    for axis, (dim, ind) in enumerate(zip(dims, basic, strict=True)):
        if isinstance(ind, np.ndarray):
            raise NotImplementedError(
                "reindexing or fancy indexing a rectilinear ManifestArray is not supported "
                "(xarray alignment along a rectilinear axis needs labels on chunk boundaries); "
                "align the inputs before virtualizing or load the variable"
            )
        selector, new_dim = _select_1d(dim, cast(int | slice, ind), axis)
        selectors.append(selector)
        if new_dim is None:
            dropped.append(axis)
        else:
            new_dims.append(new_dim)

    result: ManifestArray = marr
    full = all(
        isinstance(s, slice) and s == slice(0, d.nchunks, 1)
        for s, d in zip(selectors, dims, strict=True)
    )
    if not full:
        manifest = vz_indexing._subset_manifest(marr.manifest, tuple(selectors))
        codecs: list[Any] = list(marr.metadata.codecs)
        for axis in reversed(dropped):
            codecs = codecs_without_axis(codecs, axis)
        names = marr.metadata.dimension_names
        if names is not None:
            names = tuple(n for a, n in enumerate(names) if a not in dropped)
        metadata = dataclasses.replace(
            marr.metadata,
            shape=tuple(d.extent for d in new_dims),
            chunk_grid=grid_metadata(new_dims),
            codecs=tuple(codecs),
            dimension_names=names,
        )
        result = ManifestArray(metadata=metadata, chunkmanifest=manifest)
    # New axes go where numpy puts them: after the output axes of earlier entries
    # (integer entries have none).
    position = 0
    for item in indexer:
        if item is None:
            result = _expand_dims(result, axis=position)
        if not isinstance(item, int | np.integer):
            position += 1
    return result


# --------------------------------------------------------------------------- array functions


def _any_sharded(arrays: Sequence[ManifestArray]) -> bool:
    return any(_is_sharded(a) for a in arrays)


def _combined(
    name: str,
    arrays: Sequence[ManifestArray],
    axis: Any,
    new_axis: bool,
) -> ManifestArray:
    """Concatenate (``new_axis=False``) or stack ``arrays`` along ``axis``: rectilinear
    grids and edge codecs merged by our metadata functions, manifests by VirtualiZarr's."""
    arrays = list(arrays)
    if not isinstance(axis, int | np.integer):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if _any_sharded(arrays) and not any(is_rectilinear(a.metadata) for a in arrays):
        return cast(ManifestArray, _upstream(name)(arrays, axis=axis))
    combine_metadata = stack_metadata if new_axis else concatenation_metadata
    metadata = combine_metadata(
        [a.metadata for a in arrays],
        int(axis),
        _describer(arrays),
        grid_shapes=[a.manifest.shape_chunk_grid for a in arrays],
    )
    axis = int(axis) % (arrays[0].ndim + int(new_axis))
    combine_manifests = (
        vz_array_api._stack_manifests if new_axis else vz_array_api._concat_manifests
    )
    manifest = combine_manifests([a.manifest for a in arrays], axis=axis)
    return ManifestArray(metadata=metadata, chunkmanifest=manifest)


# Retire when VirtualiZarr's concatenate builds rectilinear grids and merges edge codecs.
def _concatenate(arrays: Sequence[ManifestArray], /, *, axis: int | None = 0) -> ManifestArray:
    if axis is None:
        raise NotImplementedError(
            "concatenating with axis=None flattens the arrays, a reshape a ManifestArray cannot do"
        )
    return _combined("concatenate", arrays, axis, new_axis=False)


# Retire when VirtualiZarr's stack handles rectilinear grids, transposes and edge codecs.
def _stack(arrays: Sequence[ManifestArray], /, *, axis: int = 0) -> ManifestArray:
    return _combined("stack", arrays, axis, new_axis=True)


# Retire with _stack (expand_dims is a stack of one array).
def _expand_dims(x: ManifestArray, /, *, axis: int = 0) -> ManifestArray:
    return _stack([x], axis=axis)


# Retire when VirtualiZarr's broadcast_to handles rectilinear grids and codec axes.
def _broadcast_to(x: ManifestArray, /, shape: tuple[int, ...]) -> ManifestArray:
    if _is_sharded(x) and not is_rectilinear(x.metadata):
        return cast(ManifestArray, _upstream("broadcast_to")(x, shape=shape))
    new_shape = tuple(int(s) for s in shape)
    if np.broadcast_shapes(x.shape, new_shape) != new_shape:
        raise ValueError(f"array of shape {x.shape} cannot be broadcast to shape {new_shape}")
    n_new = len(new_shape) - x.ndim
    dims: list[DimensionGrid] = [FixedDimension(size=1, extent=new_shape[a]) for a in range(n_new)]
    for a, dim in enumerate(_dims_of(x.metadata)):
        target = new_shape[n_new + a]
        if target == dim.extent:
            dims.append(dim)
        elif codec_edges(dim) == (1,):
            dims.append(FixedDimension(size=1, extent=target))
        else:
            raise UnsupportedFeatureError(
                f"cannot broadcast axis {a} of length 1 to {target}: its one chunk is "
                f"{codec_edges(dim)[0]} long (padded), so repeating it would repeat padding"
            )
    codecs: list[Any] = list(x.metadata.codecs)
    names = x.metadata.dimension_names
    for _ in range(n_new):
        codecs = codecs_with_new_axis(codecs, 0)
        names = _insert_name(names, 0)
    grid_shape = tuple(d.nchunks for d in dims)
    manifest = vz_array_api._broadcast_manifest(x.manifest, shape=grid_shape)
    metadata = dataclasses.replace(
        x.metadata,
        shape=new_shape,
        chunk_grid=grid_metadata(dims),
        codecs=tuple(codecs),
        dimension_names=names,
    )
    return ManifestArray(metadata=metadata, chunkmanifest=manifest)


def _missing_element_mask(marr: ManifestArray) -> np.ndarray:
    mask = marr.manifest._paths == ""
    for axis, dim in enumerate(_dims_of(marr.metadata)):
        mask = np.repeat(mask, data_edges(dim), axis=axis)
    return np.asarray(mask)


# Retire when VirtualiZarr's where() computes its missing-chunk mask from the ChunkGrid.
def _where(condition: Any, x: Any, y: Any, /) -> Any:
    if isinstance(x, ManifestArray) and is_rectilinear(x.metadata) and np.isscalar(y):
        cond = np.asarray(condition, dtype=bool)
        if cond.shape == x.shape and np.array_equal(~cond, _missing_element_mask(x)):
            return x
        raise NotImplementedError(
            "np.where on a ManifestArray only supports xarray's fill of the array's own "
            "missing chunks; general masking would require loading values"
        )
    return _upstream("where")(condition, x, y)


# --------------------------------------------------------------------------- xarray / store


# Retire when ManifestArray.to_virtual_variable keeps CF fill attributes for combining.
def _to_virtual_variable(self: ManifestArray) -> xr.Variable:
    """Like upstream, but the stripped metadata keeps ``_FillValue``/``missing_value``.

    Concatenation must refuse inputs whose sentinels differ; xarray passes only the
    wrapped arrays to ``np.concatenate``, so the sentinels travel with them.
    """
    if self.metadata.dimension_names is not None:
        dims: tuple[Any, ...] = tuple(self.metadata.dimension_names)
    elif self.ndim == 0:
        dims = ()
    else:
        raise ValueError(
            f"Cannot create virtual variable from {self.ndim}-dimensional array without "
            "dimension names."
        )
    attrs = self.metadata.attributes
    kept = {k: attrs[k] for k in FILL_ATTRIBUTES if k in attrs}
    stripped = copy_and_replace_metadata(
        self.metadata, new_dimension_names=None, new_attributes=kept
    )
    return xr.Variable(
        data=ManifestArray(metadata=stripped, chunkmanifest=self.manifest),
        dims=dims,
        attrs=attrs,
    )


# Retire when VirtualiZarr's oversized-chunk warning reads chunk edges from the ChunkGrid.
def _warn_about_oversized_virtual_chunks(vds: xr.Dataset) -> None:
    """Upstream's warning about chunks longer than their array, on any chunk grid."""
    oversized = []
    for name, var in vds.variables.items():
        data = var.data
        if isinstance(data, ManifestArray):
            dims = _dims_of(data.metadata)
            if any(d.nchunks and max(codec_edges(d)) > d.extent for d in dims):
                oversized.append(name)
    if oversized:
        warnings.warn(
            f"Variable(s) {oversized} have a chunk shape larger than their array shape, which "
            "typically happens for variables along an unlimited dimension. They read and write "
            "as virtual references correctly, but cannot be concatenated along that axis "
            "without loading them. Pass them to loadable_variables to load them as in-memory "
            "arrays if you need to concatenate them.",
            UserWarning,
            stacklevel=3,
        )


# --------------------------------------------------------------------------- writers


def _needs_v3(marr: ManifestArray) -> str | None:
    """Why an array cannot be written as Zarr format 2 references (None if it can)."""
    if is_rectilinear(marr.metadata):
        return "a rectilinear chunk grid"
    if edge_handling_of(marr.metadata.codecs).value:
        return "padded edge chunks (a truncate/crop codec)"
    return None


# Retire when VirtualiZarr's kerchunk writer refuses format 2 for rectilinear grids itself.
def _variable_to_kerchunk_arr_refs(var: xr.Variable, var_name: str, zarr_format: int = 2) -> Any:
    data = var.data
    if isinstance(data, ManifestArray):
        reason = _needs_v3(data)
        if zarr_format == 2 and reason is not None:
            raise UnsupportedFeatureError(
                f"variable {var_name!r} has {reason}, which Zarr format 2 references cannot "
                "describe. Write Zarr format 3 references instead: "
                "vds.vz.to_kerchunk(..., zarr_format=3) (format 'dict', 'json' or 'parquet'), "
                "or write to Icechunk with vds.vz.to_icechunk(store)."
            )
        if data.metadata.attributes:
            # The fill attributes kept for combining are on the variable already.
            clean = dataclasses.replace(data.metadata, attributes={})
            clean_array = ManifestArray(metadata=clean, chunkmanifest=data.manifest)
            var = var.copy(data=cast(Any, clean_array))
    return _upstream("variable_to_kerchunk_arr_refs")(var, var_name, zarr_format=zarr_format)


# Retire when VirtualiZarr writes Zarr format 3 kerchunk references as parquet.
def _accessor_to_kerchunk(
    self: Any, filepath: Any = None, format: str = "dict", *args: Any, **kwargs: Any
) -> Any:
    if format == "parquet" and kwargs.get("zarr_format") == 3:
        from virtualizarr_fill.writers import write_kerchunk_parquet_v3

        record_size = args[0] if args else kwargs.get("record_size", 100_000)
        threshold = args[1] if len(args) > 1 else kwargs.get("categorical_threshold", 10)
        if filepath is None:
            raise ValueError("Filepath must be provided when format is 'parquet'")
        write_kerchunk_parquet_v3(
            self.ds, str(filepath), record_size=record_size, categorical_threshold=threshold
        )
        return None
    return _upstream("to_kerchunk")(self, filepath, format, *args, **kwargs)


# Retire when VirtualiZarr's Icechunk writer creates and appends rectilinear arrays.
def _write_virtual_variable_to_icechunk(
    store: Any,
    group: Any,
    name: str,
    var: xr.Variable,
    append_dim: str | None = None,
    region: Mapping[str, slice] | None = None,
    last_updated_at: Any = None,
) -> None:
    from virtualizarr_fill import writers

    ma = cast(ManifestArray, var.data)
    appending = bool(append_dim) and append_dim in var.dims
    if region is not None:
        if is_rectilinear(ma.metadata):
            raise UnsupportedFeatureError(
                f"variable {name!r}: region writes of rectilinear arrays are not supported; "
                "append along the dimension with append_dim instead"
            )
        _upstream("write_virtual_variable_to_icechunk")(
            store,
            group,
            name,
            var,
            append_dim=append_dim,
            region=region,
            last_updated_at=last_updated_at,
        )
        return
    if appending:
        writers.append_virtual_variable_to_icechunk(
            store, group, name, var, cast(str, append_dim), last_updated_at
        )
    elif is_rectilinear(ma.metadata):
        writers.create_virtual_variable_in_icechunk(store, group, name, var, last_updated_at)
    else:
        _upstream("write_virtual_variable_to_icechunk")(
            store,
            group,
            name,
            var,
            append_dim=append_dim,
            region=region,
            last_updated_at=last_updated_at,
        )


# --------------------------------------------------------------------------- install


def install() -> None:
    """Apply every adaptation (idempotent). Raises ``ImportError`` for unsupported versions."""
    global _installed
    if _installed:
        return
    check_versions(virtualizarr.__version__, zarr.__version__)
    enable_rectilinear_chunks()

    from virtualizarr import accessor as vz_accessor
    from virtualizarr.writers import icechunk as vz_icechunk
    from virtualizarr.writers import kerchunk as vz_kerchunk

    table = cast(dict[Any, Callable[..., Any]], vz_array_api.MANIFESTARRAY_HANDLED_ARRAY_FUNCTIONS)
    _originals.update(
        concatenate=table[np.concatenate],
        stack=table[np.stack],
        expand_dims=table[np.expand_dims],
        broadcast_to=table[np.broadcast_to],
        where=table[np.where],
        to_virtual_variable=ManifestArray.to_virtual_variable,
        variable_to_kerchunk_arr_refs=vz_kerchunk.variable_to_kerchunk_arr_refs,
        to_kerchunk=vz_accessor.VirtualiZarrDatasetAccessor.to_kerchunk,
        write_virtual_variable_to_icechunk=vz_icechunk.write_virtual_variable_to_icechunk,
    )
    # VirtualiZarr's own extension point: its array-function dispatch table.
    table[np.concatenate] = _concatenate
    table[np.stack] = _stack
    table[np.expand_dims] = _expand_dims
    table[np.broadcast_to] = _broadcast_to
    table[np.where] = _where
    # No extension point for these: replace the functions VirtualiZarr calls by name.
    ManifestArray.__new__ = staticmethod(_manifest_array_new)  # type: ignore[method-assign,assignment]
    ManifestArray.to_virtual_variable = _to_virtual_variable  # type: ignore[method-assign]
    vz_store._warn_about_oversized_virtual_chunks = _warn_about_oversized_virtual_chunks
    vz_kerchunk.variable_to_kerchunk_arr_refs = _variable_to_kerchunk_arr_refs
    vz_accessor.VirtualiZarrDatasetAccessor.to_kerchunk = _accessor_to_kerchunk  # type: ignore[method-assign]
    vz_icechunk.write_virtual_variable_to_icechunk = _write_virtual_variable_to_icechunk
    _installed = True


def installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return _installed


__all__ = [
    "VIRTUALIZARR_RANGE",
    "ZARR_RANGE",
    "FileManifestStore",
    "RectilinearManifestArray",
    "check_versions",
    "install",
    "installed",
]

# Importing this module (as ``import virtualizarr_fill`` does, and as unpickling a
# RectilinearManifestArray in a worker process does) applies the adaptations.
install()
