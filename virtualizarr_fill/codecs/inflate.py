"""zlib chunks inflated by libdeflate when their decoded size is known.

libdeflate (through imagecodecs) inflates about twice as fast as zlib, but needs the
output size up front. It is known when the zlib codec decodes straight into the chunk's
bytes, with nothing after it in decoding but shuffles, which keep the size. Inflating is
deterministic, so the bytes are zlib's; a stream libdeflate refuses, or one that does not
fit the size, is left to the codec itself, which reads or reports it as before. Below
about a kilobyte a call into imagecodecs costs more than inflating; such chunks are
inflated by the ``zlib.decompress`` the codec itself calls (numcodecs' ``Zlib``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import imagecodecs
import numpy as np
from virtualizarr_fill_codecs.hdf5_shuffle import HDF5ShuffleCodec
from virtualizarr_fill_codecs.truncate import TruncateCodec
from zarr.codecs.numcodecs import Shuffle as NumcodecsShuffle
from zarr.codecs.numcodecs import Zlib as NumcodecsZlib

#: bytes->bytes codecs whose output is as long as their input.
SIZE_PRESERVING = (NumcodecsShuffle, HDF5ShuffleCodec)


def inflates_to_chunk(bb_codecs: Sequence[Any], k: int) -> bool:
    """Does bytes->bytes codec ``k`` (in chain order) inflate zlib to the chunk's own
    size, i.e. is it zlib with only size-preserving codecs before it in the chain?"""
    if type(bb_codecs[k]) is not NumcodecsZlib:
        return False
    return all(type(c) in SIZE_PRESERVING for c in bb_codecs[:k])


def inflates_into_chunk(bb_codecs: Sequence[Any], k: int) -> bool:
    """Is bytes->bytes codec ``k`` (in chain order) zlib whose stream, where it fits the
    chunk's size, is what the codecs after it in decoding take: shuffles, or the
    truncate codec (whose input may be longer than the chunk: such a stream does not
    fit, :func:`inflate` refuses it and the codec inflates it)?"""
    if type(bb_codecs[k]) is not NumcodecsZlib:
        return False
    return all(type(c) in (*SIZE_PRESERVING, TruncateCodec) for c in bb_codecs[:k])


#: Decoded size from which libdeflate inflates faster than zlib.
LIBDEFLATE_MIN_BYTES = 1024


def inflate(data: Any, nbytes: int) -> Any:
    """``data`` inflated into at most ``nbytes`` (a bytes-like object); None when the
    stream is refused (including one that inflates to more)."""
    try:
        if nbytes < LIBDEFLATE_MIN_BYTES:
            inflated = zlib.decompress(data)
            return inflated if len(inflated) <= nbytes else None
        # Into an array's memory, of which imagecodecs returns the part written: given
        # a size, it copies the bytes it made to shrink them to a shorter stream's.
        out = memoryview(np.empty(nbytes, dtype=np.uint8))
        return imagecodecs.deflate_decode(data, out=out)
    except Exception:
        return None


__all__ = [
    "LIBDEFLATE_MIN_BYTES",
    "SIZE_PRESERVING",
    "inflate",
    "inflates_into_chunk",
    "inflates_to_chunk",
]
