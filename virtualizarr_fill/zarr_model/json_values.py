"""JSON-like values kept between files: their exact keys and their copies.

Caches keyed by metadata (validated array metadata, georeferences) need a key that two
values share only when they serialize identically: values that compare equal but
serialize differently (``0.0`` and ``-0.0``, ``1`` and ``True``, NaN payloads) get
different keys, and a value without such a form (records, objects) gets none
(:class:`Uncacheable`), so that its result is built afresh. A kept value handed out
again is copied (:func:`json_copy`) so that the caller may change it.
"""

from __future__ import annotations

import struct
from collections.abc import Hashable
from typing import Any

import numpy as np


class Uncacheable(Exception):
    """A value has no exact hashable form: build what it keys afresh."""


_PLAIN_TYPES = frozenset({str, bytes, int, bool, type(None)})
_NUMPY_VALUES = (np.generic, np.ndarray)


def exact_key(value: Any) -> Hashable:
    """A hashable form of a JSON-like ``value`` (dicts, lists, numbers, strings, NumPy
    scalars and arrays) equal only for values that serialize identically; raises
    :class:`Uncacheable` for anything else."""
    kind = type(value)
    if kind in _PLAIN_TYPES:  # exact types: ``1`` and ``True`` stay apart
        return (kind, value)
    if kind is dict:
        return (dict, tuple((exact_key(k), exact_key(v)) for k, v in value.items()))
    if kind is list or kind is tuple:
        if value and all(type(v) is float for v in value):
            # Long lists of floats (GCP tiepoints): their IEEE bytes, in one call.
            return (kind, float, struct.pack(f"<{len(value)}d", *value))
        return (kind, tuple(exact_key(v) for v in value))
    if isinstance(value, _NUMPY_VALUES):
        if value.dtype.hasobject:
            raise Uncacheable
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float | complex):
        # repr tells -0.0 from 0.0, the bytes NaN payloads apart.
        return (kind, repr(value), np.asarray(value).tobytes())
    raise Uncacheable


_CONTAINERS = frozenset({dict, list})


def json_copy(value: Any) -> Any:
    """A copy of the dicts and lists in a JSON value (its scalars are immutable), for
    handing out a kept value the caller may change: many times faster than
    ``copy.deepcopy``, and the same for JSON."""
    if type(value) is dict:
        return {k: json_copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) if type(v) in _CONTAINERS else v for v in value]
    return value


__all__ = ["Uncacheable", "exact_key", "json_copy"]
