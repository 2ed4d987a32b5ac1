"""Writing virtual datasets to Icechunk, for arrays VirtualiZarr's writer cannot write.

Icechunk (format 2) stores rectilinear chunk grids with explicit edges on every axis.
VirtualiZarr's writer (``vds.vz.to_icechunk``) sizes arrays from
``metadata.chunks``, which zarr defines for regular grids only, and appends by counting
whole chunks. :func:`to_icechunk` writes every variable VirtualiZarr can write with
VirtualiZarr's own writer and the others here:

* a rectilinear array is created with explicit edges;
* appending along a dimension merges the stored array's metadata with the new data's
  exactly as a concatenation does: a stored last chunk that overhangs the array (a
  padded boundary chunk) is cut to its logical length and gets the truncate or crop
  codec it now needs, instead of having its padding read as data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import xarray as xr
from virtualizarr.manifests import ChunkManifest, ManifestArray
from xarray.backends.zarr import encode_zarr_attr_value
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import IncompatibleArraysError, UnsupportedFeatureError
from virtualizarr_fill.fill.conflicts import FILL_ATTRIBUTES
from virtualizarr_fill.fill.encoding import (
    EncodingConflictError,
    encoding_conflict_message,
    encoding_difference,
)
from virtualizarr_fill.manifests.fill_attributes import with_array_fill_attributes
from virtualizarr_fill.writers.attributes import without_non_finite_attributes
from virtualizarr_fill.writers.icechunk_arrays import (
    array_key,
    check_matches_stored,
    explicit_edges,
    stored_attributes,
    write_array_metadata,
)
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, is_rectilinear
from virtualizarr_fill.zarr_model.merges import concatenation_metadata

if TYPE_CHECKING:
    from icechunk import IcechunkStore
    from zarr import Array, Group


def create_virtual_variable_in_icechunk(
    store: Any, group: Group, name: str, var: xr.Variable, last_updated_at: datetime | None
) -> None:
    """Create (or reuse an identical) array and write its virtual references: a
    rectilinear array, or a scalar written again when files are appended."""
    update_attributes = upstream.icechunk_writer("update_attributes")
    write_manifest_to_icechunk = upstream.icechunk_writer("write_manifest_to_icechunk")
    ma = cast(ManifestArray, var.data)
    dims = [str(d) for d in var.dims]
    metadata = explicit_edges(
        dataclasses.replace(
            ma.metadata,
            attributes={},
            dimension_names=tuple(dims),
            # Icechunk parses chunk keys as ``c/i/j``: the default encoding.
            chunk_key_encoding=DefaultChunkKeyEncoding(separator="/"),
        )
    )
    existing = group.get(name)
    if existing is not None:
        check_matches_stored(cast("Array", existing), metadata, name)
        update_attributes(cast("Array", existing), var.attrs, encoding=var.encoding)
    else:
        # One document with its attributes: setting them through zarr would parse the
        # document back (a tuple of every edge) and write it again, indented.
        attributes = stored_attributes(var)
        write_array_metadata(
            store, array_key(group, name), dataclasses.replace(metadata, attributes=attributes)
        )
    del existing, metadata
    for manifest, offsets in manifest_slabs(ma.manifest):
        write_manifest_to_icechunk(
            store=store,
            group=group,
            arr_name=name,
            manifest=manifest,
            chunk_index_offsets=offsets,
            last_updated_at=last_updated_at,
        )


#: Chunk references handed to Icechunk in one call. VirtualiZarr's writer makes a Python
#: list of the paths it passes: for a whole array of millions of references that list
#: (a string object per reference) would outweigh the manifest itself.
REFERENCES_PER_CALL = 2**16


def manifest_slabs(
    manifest: ChunkManifest, limit: int | None = None
) -> Iterator[tuple[ChunkManifest, tuple[int, ...]]]:
    """``manifest`` cut along its longest chunk-grid axis into pieces of at most
    ``limit`` chunks (:data:`REFERENCES_PER_CALL` by default; one index of that axis
    per piece where it alone holds more), each with the chunk index of its first
    chunk."""
    limit = REFERENCES_PER_CALL if limit is None else limit
    shape = tuple(manifest.shape_chunk_grid)
    total = math.prod(shape)
    if total <= limit or not shape:
        yield manifest, (0,) * len(shape)
        return
    axis = max(range(len(shape)), key=shape.__getitem__)
    step = max(1, limit // (total // shape[axis]))
    for start in range(0, shape[axis], step):
        selectors = [slice(0, n, 1) for n in shape]
        selectors[axis] = slice(start, min(start + step, shape[axis]), 1)
        offsets = [0] * len(shape)
        offsets[axis] = start
        yield upstream.subset_manifest(manifest, tuple(selectors)), tuple(offsets)


def _same_attribute(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def append_virtual_variable_to_icechunk(
    store: Any,
    group: Group,
    name: str,
    var: xr.Variable,
    append_dim: str,
    last_updated_at: datetime | None,
) -> None:
    """Append a virtual variable to an existing array along ``append_dim``.

    The stored array and the new data combine as a concatenation
    (:func:`virtualizarr_fill.zarr_model.merges.concatenation_metadata`): the result may become
    rectilinear and gain a truncate/crop codec; incompatible data is refused before
    anything is written.
    """
    check_compatible_encodings = upstream.icechunk_writer("check_compatible_encodings")
    write_manifest_to_icechunk = upstream.icechunk_writer("write_manifest_to_icechunk")

    ma = cast(ManifestArray, var.data)
    existing = group[name]
    dims = [str(d) for d in var.dims]
    axis = dims.index(append_dim)
    stored = cast(ArrayV3Metadata, existing.metadata)
    if not isinstance(stored, ArrayV3Metadata):
        raise IncompatibleArraysError(
            f"cannot append to {name!r}: the stored array is not Zarr format 3"
        )
    check_compatible_encodings(var.encoding, existing.attrs)
    for attr in FILL_ATTRIBUTES:
        if attr in var.attrs or attr in existing.attrs:
            new = encode_zarr_attr_value(var.attrs[attr]) if attr in var.attrs else None
            old = existing.attrs.get(attr)
            if not _same_attribute(new, old):
                raise IncompatibleArraysError(
                    f"cannot append to {name!r}: the stored array has {attr}={old!r} but the "
                    f"appended data has {attr}={new!r}"
                )
    stored_attrs = dict(existing.attrs)
    new_attrs = {k: encode_zarr_attr_value(v) for k, v in var.attrs.items()}
    difference = encoding_difference(ma.dtype, stored_attrs, new_attrs)
    if difference is not None:  # the stored files' numbers would be decoded with the new
        attribute, old_value, new_value = difference
        raise EncodingConflictError(
            encoding_conflict_message(
                name, attribute, "the stored array", old_value, "the appended files", new_value
            )
        )

    def describe(index: int) -> str:
        return f"the stored array {name!r}" if index == 0 else f"the data appended to {name!r}"

    merged = concatenation_metadata(
        [
            dataclasses.replace(stored, attributes={}, dimension_names=None),
            dataclasses.replace(ma.metadata, attributes={}, dimension_names=None),
        ],
        axis,
        describe,
    )
    final = explicit_edges(
        dataclasses.replace(
            merged, attributes=stored.attributes, dimension_names=stored.dimension_names
        )
    )
    stored_chunks = chunk_grid(stored).dimensions[axis].nchunks
    write_array_metadata(store, array_key(group, name), final)
    for manifest, offsets in manifest_slabs(ma.manifest):
        write_manifest_to_icechunk(
            store=store,
            group=group,
            arr_name=name,
            manifest=manifest,
            chunk_index_offsets=tuple(
                start + stored_chunks if i == axis else start for i, start in enumerate(offsets)
            ),
            last_updated_at=last_updated_at,
        )


# --------------------------------------------------------------------------- datasets


def _ours_needed(vds: xr.Dataset, append_dim: str | None) -> bool:
    """Whether any virtual variable needs this module's writer rather than VirtualiZarr's."""
    for var in vds.variables.values():
        data = var.data
        if not isinstance(data, ManifestArray):
            continue
        if append_dim is not None and append_dim in var.dims:
            return True
        if is_rectilinear(data.metadata) and not upstream.supports_rectilinear():
            return True
    return False


def _write_variable(
    store: IcechunkStore,
    group: Group,
    name: str,
    var: xr.Variable,
    append_dim: str | None,
    region: Mapping[str, slice] | None,
    last_updated_at: datetime | None,
) -> None:
    ma = cast(ManifestArray, var.data)
    if region is not None and is_rectilinear(ma.metadata):
        raise UnsupportedFeatureError(
            f"variable {name!r}: region writes of rectilinear arrays are not supported; "
            "append along the dimension with append_dim instead"
        )
    if append_dim is not None and append_dim in var.dims:
        append_virtual_variable_to_icechunk(store, group, name, var, append_dim, last_updated_at)
    elif region is None and (
        (is_rectilinear(ma.metadata) and not upstream.supports_rectilinear())
        or (append_dim is not None and var.ndim == 0 and name in group)
    ):
        create_virtual_variable_in_icechunk(store, group, name, var, last_updated_at)
    else:
        upstream.icechunk_writer("write_virtual_variable_to_icechunk")(
            store=store,
            group=group,
            name=name,
            var=var,
            append_dim=append_dim,
            region=region,
            last_updated_at=last_updated_at,
        )


def _write_dataset(
    vds: xr.Dataset,
    store: IcechunkStore,
    group: Group,
    append_dim: str | None,
    region: Any,
    last_updated_at: datetime | None,
) -> None:
    """VirtualiZarr's ``write_virtual_dataset_to_icechunk_group``, each virtual variable
    written by :func:`_write_variable`."""
    if region is not None:
        vds, region = upstream.icechunk_writer("validate_and_autodetect_region")(group, vds, region)
    virtual = {n: v for n, v in vds.variables.items() if isinstance(v.data, ManifestArray)}
    loadable = {n: v for n, v in vds.variables.items() if n not in virtual}
    if loadable:
        mode: Literal["a", "r+"] | None = "a" if append_dim is None and region is None else None
        xr.Dataset(loadable).to_zarr(  # type: ignore[call-overload]
            store,
            group=group.name,
            zarr_format=3,
            consolidated=False,
            mode=mode,
            append_dim=append_dim,
            region=region,
        )
    for name, var in virtual.items():
        _write_variable(store, group, str(name), var, append_dim, region, last_updated_at)
    upstream.icechunk_writer("update_attributes")(group, vds.attrs, coords=vds.coords)


#: A loaded 1-D coordinate up to this size is written as one chunk.
WHOLE_COORDINATE_BYTES = 64 * 2**20


def with_whole_coordinates(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each loaded 1-D dimension coordinate of a new write encoded as one
    chunk: xarray keeps the first file's chunk length for a combined coordinate, and
    a coordinate of a thousand files would be written as a thousand chunks, each read
    at every open (``open_virtual_series`` writes them whole as well)."""
    whole = {}
    for name, variable in ds.coords.items():
        chunks = variable.encoding.get("chunks")
        if (
            variable.ndim != 1
            or name != variable.dims[0]
            or isinstance(variable.data, ManifestArray)
            or not chunks
            or chunks[0] >= variable.size
            or variable.nbytes > WHOLE_COORDINATE_BYTES
        ):
            continue
        copy = variable.variable.copy(deep=False)
        copy.encoding = {
            **variable.encoding,
            "chunks": (variable.size,),
            "preferred_chunks": {name: variable.size},
        }
        whole[name] = copy
    return ds.assign_coords(whole) if whole else ds


def to_icechunk(
    data: xr.Dataset | xr.DataTree,
    store: IcechunkStore,
    *,
    group: str | None = None,
    mode: Literal["w", "w-", "a"] | None = None,
    append_dim: str | None = None,
    region: Literal["auto"] | Mapping[str, Literal["auto"] | slice] | None = None,
    validate_containers: bool = True,
    last_updated_at: datetime | None = None,
) -> None:
    """Write a virtual dataset (or datatree) to an Icechunk store.

    Takes the arguments of VirtualiZarr's ``vds.vz.to_icechunk`` and writes what it
    writes; in addition it writes arrays on rectilinear chunk grids (which
    VirtualiZarr's writer cannot size) and appends along ``append_dim`` by merging the
    stored array's chunk grid and codecs with the new data's, as a concatenation does.
    Datasets with neither go to VirtualiZarr's writer unchanged.

    Parameters
    ----------
    data
        The virtual dataset or datatree (variables wrapping ManifestArrays are written as
        references, other variables as data).
    store
        A writable Icechunk store whose repository has a virtual chunk container for
        every referenced file's location.
    group
        Path of the group to write into (the root by default). Datasets only.
    mode
        ``"w-"`` (the default) creates the group, ``"w"`` overwrites it, ``"a"`` adds to it.
    append_dim
        Append along this dimension of the existing arrays.
    region
        Write into this region of existing arrays (regular grids only).
    validate_containers
        Refuse references no virtual chunk container covers, before writing anything.
    last_updated_at
        Icechunk refuses to read chunks of files modified after this time.

    Raises
    ------
    virtualizarr_fill.IncompatibleArraysError
        When appended data cannot continue the stored array (codecs, data type, other
        axes, fill values), before anything is written.

    Notes
    -----
    Attributes holding NaN or ±infinity are left out, each with a
    ``NonFiniteAttributeWarning`` naming it and its file: Icechunk stores cannot hold
    them (see ``virtualizarr_fill.writers.attributes``).
    """
    writer = upstream.icechunk_writer
    data = with_array_fill_attributes(data)
    # Icechunk refuses the whole write over one attribute holding NaN or infinity.
    if isinstance(data, xr.DataTree):
        data = data.copy(deep=False)
        for node in data.subtree:
            node.dataset = without_non_finite_attributes(node.to_dataset(inherit=False), node.path)
    else:
        data = without_non_finite_attributes(data, group or "")
        if append_dim is None and region is None:
            data = with_whole_coordinates(data)
    if isinstance(data, xr.DataTree):
        if group is not None:
            raise ValueError("group applies to datasets; write a subtree instead")
        trees = [node for node in data.subtree]
        datasets = [node.to_dataset(node is data) for node in trees]
        if not any(_ours_needed(ds, append_dim) for ds in datasets):
            writer("virtual_datatree_to_icechunk")(
                data,
                store,
                mode=mode,
                validate_containers=validate_containers,
                last_updated_at=last_updated_at,
                append_dim=append_dim,
                region=region,
            )
            return
        paths = ["" if node is data else node.relative_to(data) for node in trees]
    else:
        if not _ours_needed(data, append_dim):
            writer("virtual_dataset_to_icechunk")(
                data,
                store,
                group=group,
                mode=mode,
                append_dim=append_dim,
                region=region,
                validate_containers=validate_containers,
                last_updated_at=last_updated_at,
            )
            return
        datasets, paths = [data], [group or ""]
    if store.read_only:
        raise ValueError("supplied store is read-only")
    if append_dim is not None and not any(append_dim in ds.dims for ds in datasets):
        raise ValueError(
            f"append_dim {append_dim!r} does not match any existing dataset dimensions"
        )
    open_mode = writer("_resolve_mode")(mode, append_dim=append_dim, region=region)
    if validate_containers:
        writer("validate_virtual_chunk_containers")(store.session.config, datasets)
    from zarr import open_group
    from zarr.storage import StorePath

    for path, ds in zip(paths, datasets, strict=True):
        target = open_group(
            StorePath(store, path=path), mode=open_mode, zarr_format=3, use_consolidated=False
        )
        _write_dataset(ds, store, target, append_dim, region, last_updated_at)


__all__ = [
    "append_virtual_variable_to_icechunk",
    "create_virtual_variable_in_icechunk",
    "explicit_edges",
    "to_icechunk",
]
