"""Metadata of virtually concatenated and stacked arrays.

Concatenating virtual arrays never moves bytes: the result's chunk manifest points at
the inputs' stored chunks. What has to be worked out is the Zarr metadata that makes
those chunks decode correctly:

* the **chunk grid**. Along the concatenation axis every input keeps its own chunk
  edges, and an input's last chunk is cut to its logical length when more data follows
  it. The grid stays regular when the edges allow it and becomes rectilinear only when
  they do not.
* the **codec chain**. An input whose edge chunk is stored padded (a TIFF strip padded
  to RowsPerStrip rows, an HDF5 edge chunk) decodes as a regular-grid boundary chunk
  while it is the array's last chunk. Once another input follows, that chunk becomes
  an interior chunk of its logical length and its extra bytes must be trimmed:
  :class:`~virtualizarr_fill.codecs.TruncateCodec` when the logical chunk is a prefix of
  the stored bytes, :class:`~virtualizarr_fill.codecs.CropCodec` when it is not. Inputs
  with and without padding share one chain, because both codecs pass unpadded chunks
  through. Where no single chain can decode every input, the merge refuses.

Fill values follow the project's merge rule
(:func:`virtualizarr_fill.fill.combine_fill_values`): inputs must agree on the Zarr
``fill_value``, ``_FillValue`` and ``missing_value``, unless the user opts in to a
combination with :func:`fill_conflicts`.

Chunk edges come from zarr's own :class:`zarr.core.chunk_grids.ChunkGrid`: the *codec
edge* of a chunk (``chunk_size``, the shape the codecs see) and its *data edge*
(``data_size``, the part inside the array) differ for a padded boundary chunk.

Everything here works on :class:`~zarr.core.metadata.v3.ArrayV3Metadata`; the chunk
manifests are merged by the array-function implementations in
:mod:`virtualizarr_fill.manifests.operations`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from zarr.codecs import ShardingCodec, TransposeCodec
from zarr.core.chunk_grids import ChunkGrid, DimensionGrid, FixedDimension, VaryingDimension
from zarr.core.metadata.v3 import (
    ArrayV3Metadata,
    ChunkGridMetadata,
    RectilinearChunkGridMetadata,
    create_chunk_grid_metadata,
)

from virtualizarr_fill.codecs.crop import CROP_CODEC_NAME, CropCodec
from virtualizarr_fill.errors import IncompatibleArraysError, UnsupportedFeatureError
from virtualizarr_fill.fill.combine import OnConflict, combine_fill_values
from virtualizarr_fill.grid import (
    EdgeHandling,
    decide_edge_handling,
    edge_handling_of,
    insert_edge_codec,
    storage_order_shape,
    without_edge_codecs,
)

#: CF attributes that carry a missing-data sentinel; inputs must agree on them.
FILL_ATTRIBUTES = ("_FillValue", "missing_value")

Describe = Callable[[int], str]


def _default_describe(index: int) -> str:
    return f"input {index}"


# --------------------------------------------------------------------------- grids


@functools.lru_cache(maxsize=256)
def _cached_grid(grid: ChunkGridMetadata, shape: tuple[int, ...]) -> ChunkGrid:
    if isinstance(grid, RectilinearChunkGridMetadata):
        return ChunkGrid.from_sizes(shape, grid.chunk_shapes)
    return ChunkGrid.from_sizes(shape, tuple(grid.chunk_shape))


@functools.lru_cache(maxsize=256)
def _cached_grid_shape(grid: ChunkGridMetadata, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_cached_grid(grid, shape).grid_shape)


def grid_shape(metadata: ArrayV3Metadata) -> tuple[int, ...]:
    """The number of chunks along each axis (cached: zarr computes it at every call)."""
    return _cached_grid_shape(metadata.chunk_grid, metadata.shape)


def chunk_grid(metadata: ArrayV3Metadata) -> ChunkGrid:
    """The array's chunk grid (the shard grid for a sharded array) with its extents.

    Grids are immutable and many combined arrays share one, so they are cached.
    """
    return _cached_grid(metadata.chunk_grid, metadata.shape)


def is_sharded(metadata: ArrayV3Metadata) -> bool:
    """Whether the array's chunks are shards (its codec chain is one sharding codec)."""
    codecs = metadata.codecs
    return len(codecs) == 1 and isinstance(codecs[0], ShardingCodec)


def is_rectilinear(metadata: ArrayV3Metadata) -> bool:
    """Whether the metadata declares a rectilinear chunk grid."""
    return isinstance(metadata.chunk_grid, RectilinearChunkGridMetadata)


def codec_edges(dim: DimensionGrid) -> tuple[int, ...]:
    """Per-chunk lengths the codecs decode (a padded boundary chunk counts in full)."""
    if isinstance(dim, FixedDimension):
        return (dim.size,) * dim.nchunks
    if isinstance(dim, VaryingDimension):
        return dim.edges[: dim.nchunks]
    return tuple(dim.chunk_size(i) for i in range(dim.nchunks))


def data_edges(dim: DimensionGrid) -> tuple[int, ...]:
    """Per-chunk lengths inside the array (a boundary chunk clipped at the extent)."""
    if isinstance(dim, FixedDimension):
        if dim.nchunks == 0:
            return ()
        return (dim.size,) * (dim.nchunks - 1) + (dim.data_size(dim.nchunks - 1),)
    return tuple(dim.data_size(i) for i in range(dim.nchunks))


def dimension_from_edges(edges: Sequence[int], extent: int) -> DimensionGrid:
    """A dimension grid with these codec edges: regular when they allow it.

    Uniform edges that just cover the extent are a regular dimension (a short data
    edge at the end is the regular grid's boundary chunk); anything else is explicit.
    """
    edges = tuple(edges)
    if not edges:
        raise ValueError("a dimension needs at least one chunk edge")
    first = edges[0]
    if all(e == first for e in edges) and len(edges) == max(1, math.ceil(extent / first)):
        return FixedDimension(size=first, extent=extent)
    return VaryingDimension(edges, extent=extent)


def grid_metadata(dimensions: Sequence[DimensionGrid]) -> ChunkGridMetadata:
    """Regular chunk grid metadata when every dimension is regular, else rectilinear."""
    if all(isinstance(d, FixedDimension) for d in dimensions):
        return create_chunk_grid_metadata(ChunkGrid(dimensions=tuple(dimensions)))
    shapes: list[int | tuple[int, ...]] = []
    for dim in dimensions:
        if isinstance(dim, FixedDimension):
            shapes.append(dim.size)
        else:
            shapes.append(codec_edges(dim))
    return _rectilinear_metadata(tuple(shapes))


def _rectilinear_metadata(shapes: tuple[int | tuple[int, ...], ...]) -> ChunkGridMetadata:
    """RectilinearChunkGridMetadata for edges taken from zarr dimension grids.

    The edges were validated when those grids were built; zarr's constructor would parse
    each one again (about a third of the time of a 10,000-file concatenation), so a
    vectorized positivity check stands in for it.
    """
    for edges in shapes:
        values = np.fromiter(edges, dtype=np.int64) if isinstance(edges, tuple) else edges
        if np.any(np.asarray(values) < 1):
            listed = [int(v) for v in np.ravel(values)]
            raise ValueError(f"chunk edges must be >= 1, got {format_edges(listed)}")
    metadata = object.__new__(RectilinearChunkGridMetadata)
    object.__setattr__(metadata, "chunk_shapes", shapes)
    return metadata


def format_edges(edges: Sequence[int], max_groups: int = 8) -> str:
    """Compact, run-length form of a list of chunk edges for messages and reprs.

    ``[12x12, 6]`` is twelve 12s then a 6; long lists keep their first and last runs.
    """
    parts = []
    for value, group in itertools.groupby(edges):
        count = len(list(group))
        parts.append(f"{value}x{count}" if count > 1 else str(value))
    if len(parts) > max_groups:
        parts = [*parts[: max_groups - 2], "...", parts[-1], f"{len(edges)} chunks"]
    return "[" + ", ".join(parts) + "]"


# --------------------------------------------------------------------------- codecs


def _codec_json(codecs: Sequence[Any]) -> list[Any]:
    return [c if isinstance(c, dict) else c.to_dict() for c in codecs]


def _describe_codecs(codecs: Sequence[Any]) -> str:
    return json.dumps(_codec_json(codecs), separators=(",", ":"), default=str)


def _array_order(codecs: Sequence[Any], storage_shape: Sequence[int]) -> tuple[int, ...]:
    """Invert :func:`storage_order_shape`: a storage-order shape back in array order."""
    permutation = storage_order_shape(codecs, range(len(storage_shape)))
    array_shape = [0] * len(storage_shape)
    for position, axis in enumerate(permutation):
        array_shape[axis] = storage_shape[position]
    return tuple(array_shape)


def crop_stored_shape(codecs: Sequence[Any]) -> tuple[int, ...] | None:
    """The stored chunk shape (array order) of the chain's crop codec, if it has one."""
    for codec in codecs:
        if isinstance(codec, CropCodec):
            return _array_order(codecs, codec.stored_shape)
        if isinstance(codec, dict) and codec.get("name") == CROP_CODEC_NAME:
            stored = codec["configuration"]["stored_shape"]
            return _array_order(codecs, stored)
    return None


def _transpose_axes_after_insert(codecs: Sequence[Any], axis: int) -> tuple[list[Any], int]:
    """Codecs for an array with a new length-one axis at ``axis``.

    Each transpose puts the new axis first in storage order (a length-one axis can sit
    anywhere without changing the stored bytes). Returns the codecs and the position
    of the new axis in storage order.
    """
    position = axis
    new_codecs: list[Any] = []
    for codec in codecs:
        if isinstance(codec, TransposeCodec):
            order = [position] + [o if o < position else o + 1 for o in codec.order]
            # After this transpose the new axis (input position ``position``) is first.
            new_codecs.append(TransposeCodec(order=order))
            position = 0
        else:
            new_codecs.append(codec)
    return new_codecs, position


def codecs_with_new_axis(codecs: Sequence[Any], axis: int) -> list[Any]:
    """The codec chain of an array that gained a length-one axis at ``axis``."""
    new_codecs, storage_position = _transpose_axes_after_insert(codecs, axis)
    result: list[Any] = []
    for codec in new_codecs:
        if isinstance(codec, CropCodec):
            stored = list(codec.stored_shape)
            stored.insert(storage_position, 1)
            result.append(CropCodec(stored_shape=stored))
        else:
            result.append(codec)
    return result


def codecs_without_axis(codecs: Sequence[Any], axis: int) -> list[Any]:
    """The codec chain of an array that lost its length-one axis ``axis``.

    Raises :class:`UnsupportedFeatureError` when the crop codec stores more than one
    element along that axis (the stored chunk is not length one there).
    """
    position = axis
    result: list[Any] = []
    for codec in codecs:
        if isinstance(codec, TransposeCodec):
            order = list(codec.order)
            new_position = order.index(position)
            reduced = [o if o < position else o - 1 for o in order if o != position]
            if reduced:
                result.append(TransposeCodec(order=reduced))
            position = new_position
        else:
            result.append(codec)
    final: list[Any] = []
    for codec in result:
        if isinstance(codec, CropCodec):
            stored = list(codec.stored_shape)
            if stored[position] != 1:
                raise UnsupportedFeatureError(
                    f"cannot drop axis {axis}: its chunks are stored {stored[position]} "
                    "long (padded), so an integer index would split a stored chunk; "
                    "select it with a slice instead"
                )
            del stored[position]
            final.append(CropCodec(stored_shape=stored))
        else:
            final.append(codec)
    return final


# --------------------------------------------------------------------------- checks


def _first_difference(values: Sequence[Any], key: Callable[[Any], Any] = lambda v: v) -> int | None:
    if not values:
        return None
    reference = key(values[0])
    for i, value in enumerate(values[1:], start=1):
        if key(value) != reference:
            return i
    return None


def _fill_json(metadata: ArrayV3Metadata) -> Any:
    return metadata.data_type.to_json_scalar(metadata.fill_value, zarr_format=3)


def _fill_key(metadata: ArrayV3Metadata) -> tuple[Any, ...]:
    attrs = metadata.attributes
    return (
        json.dumps(_fill_json(metadata)),
        *(json.dumps(attrs.get(name), sort_keys=True, default=str) for name in FILL_ATTRIBUTES),
    )


def _same_fill(a: ArrayV3Metadata, b: ArrayV3Metadata) -> bool:
    """Whether two arrays have the same fill information (fast path, then JSON)."""
    try:
        if (
            a.data_type == b.data_type
            and bool(a.fill_value == b.fill_value)
            and all(a.attributes.get(n) == b.attributes.get(n) for n in FILL_ATTRIBUTES)
        ):
            return True
    except (TypeError, ValueError):  # array-valued attributes
        pass
    return _fill_key(a) == _fill_key(b)


_ON_CONFLICT: contextvars.ContextVar[OnConflict] = contextvars.ContextVar(
    "virtualizarr_fill_on_conflict", default="error"
)


@contextlib.contextmanager
def fill_conflicts(on_conflict: OnConflict) -> Iterator[None]:
    """Combine arrays whose fill values differ, the way ``on_conflict`` says.

    By default concatenation refuses inputs whose Zarr ``fill_value``, ``_FillValue``
    or ``missing_value`` differ (a virtual array has one of each, so one file's
    missing data would be misread). Inside this context ``np.concatenate``,
    ``xr.concat`` and friends combine them with
    :func:`virtualizarr_fill.fill.combine_fill_values` ``on_conflict`` rule, which
    warns about what is no longer masked.

    Parameters
    ----------
    on_conflict
        ``"use_first"``: the first input's value of each field that differs;
        ``"drop"``: the data type's default ``fill_value`` and no ``_FillValue`` or
        ``missing_value`` for the fields that differ; ``"error"``: refuse, as outside
        the context.

    Examples
    --------
    >>> with virtualizarr_fill.fill_conflicts("use_first"):
    ...     combined = xr.concat([vds_2020, vds_2021], dim="time")
    """
    token = _ON_CONFLICT.set(on_conflict)
    try:
        yield
    finally:
        _ON_CONFLICT.reset(token)


def combine_fills(
    metadatas: Sequence[ArrayV3Metadata], describe: Describe
) -> tuple[Any, dict[str, Any]]:
    """The fill value and attributes of the combination (the fill-value merge rule).

    Inputs that agree keep their values; otherwise
    :func:`virtualizarr_fill.fill.combine_fill_values` decides, refusing by default
    (:func:`fill_conflicts` opts in to a combination).
    """
    first = metadatas[0]
    if all(m is first or _same_fill(first, m) for m in metadatas):
        return first.fill_value, dict(first.attributes)
    combined = combine_fill_values(
        [m.fill_value for m in metadatas],
        [m.attributes for m in metadatas],
        [describe(i) for i in range(len(metadatas))],
        first.data_type.to_native_dtype(),
        on_conflict=_ON_CONFLICT.get(),
    )
    return combined.fill_value, combined.attributes


@dataclasses.dataclass(frozen=True)
class _Profile:
    """What combining needs to know about one input's codecs and grid."""

    grid: ChunkGrid
    grid_shape: tuple[int, ...]
    base_codecs: tuple[Any, ...]
    own: EdgeHandling
    own_crop: tuple[int, ...] | None


def _codecs_key(codecs: tuple[Any, ...]) -> Any:
    try:
        hash(codecs)
    except TypeError:  # numcodecs wrappers hold their configuration in a dict
        return _describe_codecs(codecs)
    return codecs


class _Profiles:
    """Per-input profiles, computed once per distinct (codecs, grid, shape)."""

    def __init__(self) -> None:
        self._cache: dict[Any, _Profile] = {}

    def __call__(self, metadata: ArrayV3Metadata) -> _Profile:
        key = (_codecs_key(metadata.codecs), metadata.chunk_grid, metadata.shape)
        profile = self._cache.get(key)
        if profile is None:
            own = edge_handling_of(metadata.codecs)
            grid = chunk_grid(metadata)
            profile = _Profile(
                grid=grid,
                grid_shape=grid.grid_shape,
                base_codecs=tuple(without_edge_codecs(metadata.codecs)),
                own=own,
                own_crop=crop_stored_shape(metadata.codecs) if own is EdgeHandling.CROP else None,
            )
            self._cache[key] = profile
        return profile


def _check_common(
    metadatas: Sequence[ArrayV3Metadata],
    describe: Describe,
    grid_shapes: Sequence[tuple[int, ...]] | None,
) -> tuple[list[_Profile], tuple[Any, dict[str, Any]]]:
    """Checks shared by concatenation and stacking.

    Returns each input's profile, and the combined fill value and attributes.
    """
    if not metadatas:
        raise ValueError("need at least one array to combine")
    ndims = [m.ndim for m in metadatas]
    index = _first_difference(ndims)
    if index is not None:
        raise IncompatibleArraysError(
            f"cannot combine {describe(0)} and {describe(index)}: different number of "
            f"dimensions ({ndims[0]} vs {ndims[index]})"
        )
    index = _first_difference(metadatas, lambda m: m.data_type)
    if index is not None:
        raise IncompatibleArraysError(
            f"cannot combine {describe(0)} and {describe(index)}: different data types "
            f"({metadatas[0].data_type.to_native_dtype()} vs "
            f"{metadatas[index].data_type.to_native_dtype()})"
        )
    for i, m in enumerate(metadatas):
        if is_sharded(m):
            raise UnsupportedFeatureError(
                f"cannot combine {describe(i)}: sharded arrays are only combined on regular "
                "chunk grids without padded edges"
            )
    profile_of = _Profiles()
    profiles = [profile_of(m) for m in metadatas]
    if grid_shapes is not None:
        for i, (profile, shape) in enumerate(zip(profiles, grid_shapes, strict=True)):
            if profile.grid_shape != tuple(shape):
                raise ValueError(
                    f"{describe(i)}: its chunk manifest of shape {tuple(shape)} does not match "
                    f"its chunk grid of shape {profile.grid_shape}"
                )
    first = profiles[0]
    for i, profile in enumerate(profiles):
        if profile is not first and profile.base_codecs != first.base_codecs:
            raise IncompatibleArraysError(
                f"cannot combine {describe(0)} and {describe(i)}: different codecs or codec "
                f"settings ({_describe_codecs(first.base_codecs)} vs "
                f"{_describe_codecs(profile.base_codecs)})"
            )
    return profiles, combine_fills(metadatas, describe)


# --------------------------------------------------------------------------- edge needs


@dataclasses.dataclass
class _EdgeNeeds:
    """Which chunks need trimming, and what is known about how they are stored."""

    # stored shape (array order), or None when unknown (input already truncates)
    truncate: dict[tuple[int, ...] | None, list[int]] = dataclasses.field(default_factory=dict)
    crop: dict[tuple[int, ...], list[int]] = dataclasses.field(default_factory=dict)

    def add_truncate(self, stored: tuple[int, ...] | None, index: int) -> None:
        inputs = self.truncate.setdefault(stored, [])
        if not inputs or inputs[-1] != index:
            inputs.append(index)

    def add_crop(self, stored: tuple[int, ...], index: int) -> None:
        inputs = self.crop.setdefault(stored, [])
        if not inputs or inputs[-1] != index:
            inputs.append(index)


def _axis_pairs(in_edges: Sequence[int], out_edges: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Distinct (input codec edge, result codec edge) pairs along one axis."""
    return tuple(dict.fromkeys(zip(in_edges, out_edges, strict=True)))


class _PairCache:
    """:func:`_axis_pairs` for axes every input shares, once per distinct dimension."""

    def __init__(self, out_codec: Sequence[Sequence[int]]) -> None:
        self._out = out_codec
        self._cache: dict[tuple[int, DimensionGrid], tuple[tuple[int, int], ...]] = {}

    def __call__(self, axis: int, dim: DimensionGrid) -> tuple[tuple[int, int], ...]:
        key = (axis, dim)
        pairs = self._cache.get(key)
        if pairs is None:
            pairs = _axis_pairs(codec_edges(dim), self._out[axis])
            self._cache[key] = pairs
        return pairs


_Outcome = tuple[tuple[str, tuple[int, ...] | None], ...]


def _needs_of(
    profile: _Profile,
    per_axis_pairs: tuple[tuple[tuple[int, int], ...], ...],
    describe_input: Callable[[], str],
) -> _Outcome:
    """What an input needs when its chunks are read with new codec edges.

    ``per_axis_pairs`` holds, per axis, the distinct (stored codec edge, new codec
    edge) pairs of its chunks. Returns ``("truncate", stored shape or None)`` and
    ``("crop", stored shape)`` requirements.
    """
    own, own_crop, base = profile.own, profile.own_crop, profile.base_codecs
    outcome: list[tuple[str, tuple[int, ...] | None]] = []
    if own is EdgeHandling.TRUNCATE:
        outcome.append(("truncate", None))
    elif own_crop is not None:
        outcome.append(("crop", own_crop))
    if all(a == b for pairs in per_axis_pairs for a, b in pairs):
        return tuple(outcome)
    for combo in itertools.product(*per_axis_pairs):
        stored_as = tuple(a for a, _ in combo)
        read_as = tuple(b for _, b in combo)
        if stored_as == read_as:
            continue
        if any(b > a for a, b in combo):
            raise IncompatibleArraysError(
                f"cannot combine {describe_input()}: its chunks of shape {stored_as} would be "
                f"read as {read_as}, larger than stored"
            )
        if own is EdgeHandling.NONE:
            handling = decide_edge_handling(base, read_as, stored_as)
            kind = "truncate" if handling is EdgeHandling.TRUNCATE else "crop"
            outcome.append((kind, stored_as))
        elif own is EdgeHandling.TRUNCATE:
            handling = decide_edge_handling(base, read_as, stored_as)
            if handling is not EdgeHandling.TRUNCATE:
                raise IncompatibleArraysError(
                    f"cannot combine {describe_input()}: it already truncates padded chunks "
                    f"of unknown stored size, and its chunks of shape {stored_as} would now "
                    f"have to be cropped to {read_as} along an inner axis, which needs the "
                    "stored shape"
                )
        # An input with a crop codec stores each chunk either at its logical shape or
        # padded to ``own_crop``: cropping from ``own_crop`` to the new, smaller shape is
        # right for the padded ones, and an unpadded one matches neither size, which the
        # crop codec reports when read. Nothing can be misread, so nothing to refuse.
    return tuple(dict.fromkeys(outcome))


class _NeedsCollector:
    """Accumulates every input's needs, computing each distinct case once."""

    def __init__(self, describe: Describe) -> None:
        self.needs = _EdgeNeeds()
        self._describe = describe
        self._cache: dict[Any, _Outcome] = {}

    def add(
        self, index: int, profile: _Profile, per_axis_pairs: Sequence[Sequence[tuple[int, int]]]
    ) -> None:
        pairs = tuple(tuple(p) for p in per_axis_pairs)
        key = (id(profile), pairs)
        outcome = self._cache.get(key)
        if outcome is None:
            outcome = _needs_of(profile, pairs, lambda: self._describe(index))
            self._cache[key] = outcome
        for kind, stored in outcome:
            if kind == "truncate":
                self.needs.add_truncate(stored, index)
            else:
                assert stored is not None
                self.needs.add_crop(stored, index)


def _names(indices: Sequence[int], describe: Describe, limit: int = 3) -> str:
    shown = ", ".join(describe(i) for i in indices[:limit])
    more = len(indices) - limit
    return shown + (f" and {more} more" if more > 0 else "")


def _resolve_needs(
    needs: _EdgeNeeds, describe: Describe
) -> tuple[EdgeHandling, tuple[int, ...] | None]:
    """One edge handling that decodes every input correctly, or a clear refusal."""
    if not needs.crop:
        return (EdgeHandling.TRUNCATE, None) if needs.truncate else (EdgeHandling.NONE, None)
    if len(needs.crop) > 1:
        (shape_a, inputs_a), (shape_b, inputs_b) = list(needs.crop.items())[:2]
        raise IncompatibleArraysError(
            f"cannot combine: {_names(inputs_a, describe)} need padded chunks cropped from "
            f"stored shape {shape_a} but {_names(inputs_b, describe)} from {shape_b}; one crop "
            "codec has one stored shape"
        )
    ((stored, crop_inputs),) = needs.crop.items()
    for truncate_stored, truncate_inputs in needs.truncate.items():
        if truncate_stored != stored:
            detail = (
                "of unknown stored size"
                if truncate_stored is None
                else f"stored as {truncate_stored}"
            )
            raise IncompatibleArraysError(
                f"cannot combine: {_names(truncate_inputs, describe)} need padded chunks "
                f"{detail} truncated, but {_names(crop_inputs, describe)} need chunks stored "
                f"as {stored} cropped along an inner axis; no single codec chain decodes both "
                "(truncation there would return wrong values)"
            )
    return EdgeHandling.CROP, stored


def _final_codecs(base_codecs: Sequence[Any], needs: _EdgeNeeds, describe: Describe) -> list[Any]:
    handling, stored = _resolve_needs(needs, describe)
    try:
        return list(insert_edge_codec(base_codecs, handling, stored))
    except ValueError as err:
        raise IncompatibleArraysError(
            f"cannot combine: padded chunks would need {handling} but the codec chain "
            f"{_describe_codecs(base_codecs)} does not allow it: {err}"
        ) from err


# --------------------------------------------------------------------------- merges


def _non_concat_dimension(
    grids: Sequence[ChunkGrid],
    axis: int,
    describe: Describe,
    what: str,
) -> DimensionGrid:
    """The result's dimension along an axis every input shares."""
    first_dim = grids[0].dimensions[axis]
    first_data = data_edges(first_dim)
    last_codec_edges: set[int] = set()
    same_dims = True
    for i, grid in enumerate(grids):
        dim = grid.dimensions[axis]
        if dim is first_dim or dim == first_dim:
            continue
        same_dims = False
        edges = data_edges(dim)
        if edges != first_data:
            raise IncompatibleArraysError(
                f"cannot {what} {describe(0)} and {describe(i)}: different chunk edges on "
                f"axis {axis}, which is not the {what} axis ({format_edges(first_data)} vs "
                f"{format_edges(edges)})"
            )
        if edges:
            last_codec_edges.add(codec_edges(dim)[-1])
    if same_dims or not first_data:
        return first_dim
    last_codec_edges.add(codec_edges(first_dim)[-1])
    edges = (*first_data[:-1], min(last_codec_edges))
    return dimension_from_edges(edges, first_dim.extent)


def _check_shapes_except(
    metadatas: Sequence[ArrayV3Metadata], axis: int | None, describe: Describe, what: str
) -> None:
    def key(m: ArrayV3Metadata) -> tuple[int, ...]:
        return tuple(s for a, s in enumerate(m.shape) if a != axis)

    index = _first_difference(metadatas, key)
    if index is not None:
        where = "except along the concatenation axis" if axis is not None else ""
        raise IncompatibleArraysError(
            f"cannot {what} {describe(0)} and {describe(index)}: shapes {metadatas[0].shape} "
            f"and {metadatas[index].shape} differ {where}".rstrip()
        )


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise IndexError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def concatenation_metadata(
    metadatas: Sequence[ArrayV3Metadata],
    axis: int,
    describe: Describe | None = None,
    grid_shapes: Sequence[tuple[int, ...]] | None = None,
) -> ArrayV3Metadata:
    """Metadata of the concatenation of arrays with these metadata along ``axis``.

    The chunk grid along ``axis`` lists every input's chunk edges, each input's last
    chunk cut to its logical length except the final input's; other axes must have the
    same data edges in every input. The codec chain is the inputs' common chain with
    the truncate or crop codec their padded chunks need.

    ``describe(i)`` names input ``i`` in messages; ``grid_shapes``, when given, are the
    chunk-grid shapes of the inputs' chunk manifests, checked against their metadata.

    Raises :class:`~virtualizarr_fill.errors.IncompatibleArraysError` naming the inputs
    and the difference when no single array can describe them.
    """
    describe = describe or _default_describe
    profiles, (fill_value, attributes) = _check_common(metadatas, describe, grid_shapes)
    ndim = metadatas[0].ndim
    axis = _normalize_axis(axis, ndim)
    _check_shapes_except(metadatas, axis, describe, "concatenate")
    grids = [p.grid for p in profiles]

    # Along the concatenation axis: every input's data edges, the final input's last
    # edge as its codec edge (an overhanging final chunk needs no trimming).
    concat_edges: list[int] = []
    extent = 0
    last_nonempty = max(
        (i for i, g in enumerate(grids) if g.dimensions[axis].nchunks), default=None
    )
    for i, grid in enumerate(grids):
        dim = grid.dimensions[axis]
        extent += dim.extent
        if i == last_nonempty:
            concat_edges.extend(data_edges(dim)[:-1])
            concat_edges.append(codec_edges(dim)[-1])
        else:
            concat_edges.extend(data_edges(dim))

    dims: list[DimensionGrid] = []
    for a in range(ndim):
        if a == axis:
            if concat_edges:
                dims.append(dimension_from_edges(concat_edges, extent))
            else:
                dims.append(grids[0].dimensions[a])
        else:
            dims.append(_non_concat_dimension(grids, a, describe, "concatenate"))

    collector = _NeedsCollector(describe)
    out_codec = [codec_edges(d) for d in dims]
    pairs_of = _PairCache(out_codec)
    offset = 0
    for i, profile in enumerate(profiles):
        per_axis = []
        for a, dim in enumerate(profile.grid.dimensions):
            if a == axis:
                in_edges = codec_edges(dim)
                out = out_codec[a][offset : offset + len(in_edges)]
                offset += len(in_edges)
                per_axis.append(_axis_pairs(in_edges, out))
            else:
                per_axis.append(pairs_of(a, dim))
        collector.add(i, profile, per_axis)

    codecs = _final_codecs(profiles[0].base_codecs, collector.needs, describe)
    shape = list(metadatas[0].shape)
    shape[axis] = extent
    return dataclasses.replace(
        metadatas[0],
        shape=tuple(shape),
        chunk_grid=grid_metadata(dims),
        codecs=tuple(codecs),
        fill_value=fill_value,
        attributes=attributes,
    )


def stack_metadata(
    metadatas: Sequence[ArrayV3Metadata],
    axis: int,
    describe: Describe | None = None,
    grid_shapes: Sequence[tuple[int, ...]] | None = None,
) -> ArrayV3Metadata:
    """Metadata of stacking arrays with these metadata along a new axis ``axis``.

    The new axis has chunks of length one; every other axis must have the same data
    edges in every input (padded and unpadded edge chunks combine as for
    :func:`concatenation_metadata`).
    """
    describe = describe or _default_describe
    profiles, (fill_value, attributes) = _check_common(metadatas, describe, grid_shapes)
    ndim = metadatas[0].ndim
    axis = _normalize_axis(axis, ndim + 1)
    _check_shapes_except(metadatas, None, describe, "stack")
    grids = [p.grid for p in profiles]
    dims = [_non_concat_dimension(grids, a, describe, "stack") for a in range(ndim)]
    out_codec = [codec_edges(d) for d in dims]
    pairs_of = _PairCache(out_codec)
    collector = _NeedsCollector(describe)
    for i, profile in enumerate(profiles):
        per_axis = [pairs_of(a, dim) for a, dim in enumerate(profile.grid.dimensions)]
        collector.add(i, profile, per_axis)
    codecs = _final_codecs(profiles[0].base_codecs, collector.needs, describe)
    dims.insert(axis, FixedDimension(size=1, extent=len(metadatas)))
    shape = list(metadatas[0].shape)
    shape.insert(axis, len(metadatas))
    names = metadatas[0].dimension_names
    return dataclasses.replace(
        metadatas[0],
        shape=tuple(shape),
        chunk_grid=grid_metadata(dims),
        codecs=tuple(codecs_with_new_axis(codecs, axis)),
        fill_value=fill_value,
        attributes=attributes,
        dimension_names=None if names is None else (*names[:axis], None, *names[axis:]),
    )


__all__ = [
    "FILL_ATTRIBUTES",
    "combine_fills",
    "chunk_grid",
    "codec_edges",
    "codecs_with_new_axis",
    "codecs_without_axis",
    "concatenation_metadata",
    "crop_stored_shape",
    "data_edges",
    "fill_conflicts",
    "dimension_from_edges",
    "format_edges",
    "grid_metadata",
    "grid_shape",
    "is_rectilinear",
    "is_sharded",
    "stack_metadata",
]
