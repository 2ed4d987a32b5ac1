"""Which edge codec a merge needs so that every input's chunks decode correctly.

Combining arrays changes the codec edges their stored chunks are read with: an input's
padded last chunk becomes an interior chunk of its logical length. For each input and
each distinct (stored edge, new edge) pair this module works out what is needed (truncate
from a known or unknown stored shape, or crop from a known one), each distinct case
once, resolves the needs of all inputs into one edge handling for the shared codec chain
or refuses naming the inputs that disagree, and puts the edge codec in the chain.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from zarr.core.chunk_grids import DimensionGrid

from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.zarr_model.chunk_grids import codec_edges
from virtualizarr_fill.zarr_model.concat_inputs import (
    Describe,
    InputProfile,
    describe_codecs,
    name_inputs,
)
from virtualizarr_fill.zarr_model.edge_codecs import (
    EdgeHandling,
    decide_edge_handling,
    insert_edge_codec,
    whole_row_axes,
)


@dataclasses.dataclass
class EdgeNeeds:
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


def axis_pairs(in_edges: Sequence[int], out_edges: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Distinct (input codec edge, result codec edge) pairs along one axis."""
    return tuple(dict.fromkeys(zip(in_edges, out_edges, strict=True)))


class PairCache:
    """:func:`axis_pairs` for axes every input shares, once per distinct dimension."""

    def __init__(self, out_codec: Sequence[Sequence[int]]) -> None:
        self._out = out_codec
        self._cache: dict[tuple[int, DimensionGrid], tuple[tuple[int, int], ...]] = {}

    def __call__(self, axis: int, dim: DimensionGrid) -> tuple[tuple[int, int], ...]:
        key = (axis, dim)
        pairs = self._cache.get(key)
        if pairs is None:
            pairs = axis_pairs(codec_edges(dim), self._out[axis])
            self._cache[key] = pairs
        return pairs


_Outcome = tuple[tuple[str, tuple[int, ...] | None], ...]


def _needs_of(
    profile: InputProfile,
    per_axis_pairs: tuple[tuple[tuple[int, int], ...], ...],
    describe_input: Callable[[], str],
) -> _Outcome:
    """What an input needs when its chunks are read with new codec edges.

    ``per_axis_pairs`` holds, per axis, the distinct (stored codec edge, new codec
    edge) pairs of its chunks. Returns ``("truncate", stored shape or None)`` and
    ``("crop", stored shape)`` requirements.
    """
    own, own_crop, base = profile.own, profile.own_crop, profile.base_codecs
    whole_rows = whole_row_axes(base, len(per_axis_pairs))
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
        cut = [axis for axis in whole_rows if read_as[axis] != stored_as[axis]]
        if cut:
            raise IncompatibleArraysError(
                f"cannot combine {describe_input()}: its chunks of shape {stored_as} would be "
                f"read as {read_as}, cut along axis {cut[0]}, whose rows its floating-point "
                "predictor (TIFF predictor 3) stores as shuffled byte planes: no edge codec "
                "can cut them exactly"
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


class NeedsCollector:
    """Accumulates every input's needs, computing each distinct case once."""

    def __init__(self, describe: Describe) -> None:
        self.needs = EdgeNeeds()
        self._describe = describe
        self._cache: dict[Any, _Outcome] = {}

    def add(
        self, index: int, profile: InputProfile, per_axis_pairs: Sequence[Sequence[tuple[int, int]]]
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


def _resolve_needs(
    needs: EdgeNeeds, describe: Describe
) -> tuple[EdgeHandling, tuple[int, ...] | None]:
    """One edge handling that decodes every input correctly, or a clear refusal."""
    if not needs.crop:
        return (EdgeHandling.TRUNCATE, None) if needs.truncate else (EdgeHandling.NONE, None)
    if len(needs.crop) > 1:
        (shape_a, inputs_a), (shape_b, inputs_b) = list(needs.crop.items())[:2]
        raise IncompatibleArraysError(
            f"cannot combine: {name_inputs(inputs_a, describe)} need padded chunks cropped "
            f"from stored shape {shape_a} but {name_inputs(inputs_b, describe)} from "
            f"{shape_b}; one crop codec has one stored shape"
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
                f"cannot combine: {name_inputs(truncate_inputs, describe)} need padded chunks "
                f"{detail} truncated, but {name_inputs(crop_inputs, describe)} need chunks stored "
                f"as {stored} cropped along an inner axis; no single codec chain decodes both "
                "(truncation there would return wrong values)"
            )
    return EdgeHandling.CROP, stored


def final_codecs(base_codecs: Sequence[Any], needs: EdgeNeeds, describe: Describe) -> list[Any]:
    handling, stored = _resolve_needs(needs, describe)
    try:
        return list(insert_edge_codec(base_codecs, handling, stored))
    except ValueError as err:
        raise IncompatibleArraysError(
            f"cannot combine: padded chunks would need {handling} but the codec chain "
            f"{describe_codecs(base_codecs)} does not allow it: {err}"
        ) from err


__all__ = ["EdgeNeeds", "NeedsCollector", "PairCache", "axis_pairs", "final_codecs"]
