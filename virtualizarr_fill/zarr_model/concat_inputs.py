"""The inputs of a merge: how messages name them, what each brings, what all must share.

Every input is reduced to an :class:`InputProfile` (its chunk grid, its codec chain
without edge codecs, the edge codec it already has), computed once per distinct codec
chain, grid and shape: the files of an archive share them. :func:`check_inputs` refuses
inputs that no single array can describe (rank, data type, sharding, codec chain, a
manifest that does not match its grid) and combines their fill information under the
fill-conflict policy (:mod:`virtualizarr_fill.fill.conflicts`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from zarr.core.chunk_grids import ChunkGrid
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualizarr_fill.errors import IncompatibleArraysError, UnsupportedFeatureError
from virtualizarr_fill.fill.conflicts import combine_fills, combined_variable
from virtualizarr_fill.fill.encoding import (
    EncodingConflictError,
    encoding_conflict_message,
    encoding_difference,
)
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, is_sharded
from virtualizarr_fill.zarr_model.edge_codecs import (
    EdgeHandling,
    crop_stored_shape,
    edge_handling_of,
    without_edge_codecs,
)

#: Names input ``i`` in messages.
Describe = Callable[[int], str]


def default_describe(index: int) -> str:
    return f"input {index}"


def name_inputs(indices: Sequence[int], describe: Describe, limit: int = 3) -> str:
    shown = ", ".join(describe(i) for i in indices[:limit])
    more = len(indices) - limit
    return shown + (f" and {more} more" if more > 0 else "")


def _codec_json(codecs: Sequence[Any]) -> list[Any]:
    return [c if isinstance(c, dict) else c.to_dict() for c in codecs]


def describe_codecs(codecs: Sequence[Any]) -> str:
    return json.dumps(_codec_json(codecs), separators=(",", ":"), default=str)


def first_difference(values: Sequence[Any], key: Callable[[Any], Any] = lambda v: v) -> int | None:
    if not values:
        return None
    reference = key(values[0])
    for i, value in enumerate(values[1:], start=1):
        if key(value) != reference:
            return i
    return None


@dataclasses.dataclass(frozen=True)
class InputProfile:
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
        return describe_codecs(codecs)
    return codecs


class _Profiles:
    """Per-input profiles, computed once per distinct (codecs, grid, shape)."""

    def __init__(self) -> None:
        self._cache: dict[Any, InputProfile] = {}

    def __call__(self, metadata: ArrayV3Metadata) -> InputProfile:
        key = (_codecs_key(metadata.codecs), metadata.chunk_grid, metadata.shape)
        profile = self._cache.get(key)
        if profile is None:
            own = edge_handling_of(metadata.codecs)
            grid = chunk_grid(metadata)
            profile = InputProfile(
                grid=grid,
                grid_shape=grid.grid_shape,
                base_codecs=tuple(without_edge_codecs(metadata.codecs)),
                own=own,
                own_crop=crop_stored_shape(metadata.codecs) if own is EdgeHandling.CROP else None,
            )
            self._cache[key] = profile
        return profile


def check_encodings(metadatas: Sequence[ArrayV3Metadata], describe: Describe) -> None:
    """Refuse inputs whose CF decoding attributes differ from the first's
    (:mod:`virtualizarr_fill.fill.encoding`): the combined array keeps one set."""
    first = metadatas[0]
    dtype = first.data_type.to_native_dtype()
    for i, m in enumerate(metadatas):
        if m is first or m.attributes is first.attributes:
            continue
        difference = encoding_difference(dtype, first.attributes, m.attributes)
        if difference is not None:
            attribute, expected, found = difference
            raise EncodingConflictError(
                encoding_conflict_message(
                    combined_variable(), attribute, describe(0), expected, describe(i), found
                )
            )


def check_inputs(
    metadatas: Sequence[ArrayV3Metadata],
    describe: Describe,
    grid_shapes: Sequence[tuple[int, ...]] | None,
) -> tuple[list[InputProfile], tuple[Any, dict[str, Any]]]:
    """Checks shared by concatenation and stacking.

    Returns each input's profile, and the combined fill value and attributes.
    """
    if not metadatas:
        raise ValueError("need at least one array to combine")
    ndims = [m.ndim for m in metadatas]
    index = first_difference(ndims)
    if index is not None:
        raise IncompatibleArraysError(
            f"cannot combine {describe(0)} and {describe(index)}: different number of "
            f"dimensions ({ndims[0]} vs {ndims[index]})"
        )
    index = first_difference(metadatas, lambda m: m.data_type)
    if index is not None:
        raise IncompatibleArraysError(
            f"cannot combine {describe(0)} and {describe(index)}: different data types "
            f"({metadatas[0].data_type.to_native_dtype()} vs "
            f"{metadatas[index].data_type.to_native_dtype()})"
        )
    check_encodings(metadatas, describe)
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
                f"settings ({describe_codecs(first.base_codecs)} vs "
                f"{describe_codecs(profile.base_codecs)})"
            )
    return profiles, combine_fills(metadatas, describe)


__all__ = [
    "Describe",
    "InputProfile",
    "check_encodings",
    "check_inputs",
    "default_describe",
    "describe_codecs",
    "first_difference",
    "name_inputs",
]
