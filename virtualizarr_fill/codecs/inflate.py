"""zlib chunks inflated by libdeflate when their decoded size is known.

libdeflate (through imagecodecs) inflates about twice as fast as zlib, but needs the
output size up front. It is known when the zlib codec decodes straight into the chunk's
bytes, with nothing after it in decoding but shuffles, which keep the size. Inflating is
deterministic, so the bytes are zlib's; a stream libdeflate refuses, or one that does not
fit the size, is left to the codec itself, which reads or reports it as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import imagecodecs
from zarr.codecs.numcodecs import Shuffle as NumcodecsShuffle
from zarr.codecs.numcodecs import Zlib as NumcodecsZlib

from virtualizarr_fill.codecs.hdf5_shuffle import HDF5ShuffleCodec

#: bytes->bytes codecs whose output is as long as their input.
SIZE_PRESERVING = (NumcodecsShuffle, HDF5ShuffleCodec)


def inflates_to_chunk(bb_codecs: Sequence[Any], k: int) -> bool:
    """Does bytes->bytes codec ``k`` (in chain order) inflate zlib to the chunk's own
    size, i.e. is it zlib with only size-preserving codecs before it in the chain?"""
    if type(bb_codecs[k]) is not NumcodecsZlib:
        return False
    return all(type(c) in SIZE_PRESERVING for c in bb_codecs[:k])


def inflate(data: Any, nbytes: int) -> Any:
    """``data`` inflated into at most ``nbytes`` by libdeflate (a bytes-like object);
    None when it refuses (including a stream that inflates to more)."""
    with contextlib.suppress(Exception):
        return imagecodecs.deflate_decode(data, out=nbytes)
    return None


__all__ = ["SIZE_PRESERVING", "inflate", "inflates_to_chunk"]
