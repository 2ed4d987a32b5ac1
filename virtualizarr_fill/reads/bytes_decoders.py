"""A chunk's bytes->bytes codecs undone on its bytes, without zarr's buffer objects.

zarr's codecs take and return ``Buffer`` objects, whose creation costs about as much as
undoing a checksum of a small chunk. For the codecs whose decoding is known exactly
(this package's HDF5 filters, zarr's wrappers of numcodecs codecs, imagecodecs' LZW and
PackBits, the truncate codec next to the ``bytes`` codec), :func:`bytes_decoder` calls
the function the codec itself calls, on the bytes themselves, and zlib streams that
decode into the chunk are inflated by libdeflate; any other codec decodes its own way.
The bytes are the same as the codecs' (tests/reads/test_decoding.py compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import imagecodecs
import numcodecs
import numpy as np
from zarr.core.array_spec import ArraySpec

from virtualizarr_fill import upstream
from virtualizarr_fill.codecs._common import expected_nbytes
from virtualizarr_fill.codecs.hdf5_bitshuffle import HDF5BitshuffleCodec
from virtualizarr_fill.codecs.hdf5_lzf import HDF5LZFCodec
from virtualizarr_fill.codecs.hdf5_shuffle import HDF5ShuffleCodec, unshuffle
from virtualizarr_fill.codecs.inflate import inflate, inflates_into_chunk
from virtualizarr_fill.codecs.truncate import TruncateCodec, truncator


def bytes_decoder(
    bb_codecs: tuple[Any, ...], *, sized: bool = True
) -> Callable[[Any, ArraySpec, int], Any]:
    """A function undoing ``bb_codecs`` for one chunk of ``nbytes`` decoded bytes
    (``sized``: the codecs' output is the ``bytes`` codec's input, whose size that is;
    otherwise ``nbytes`` is not used), for the chunks of one array (one data type).

    A zlib stream that decodes into the chunk's bytes (nothing but shuffles or the
    truncate codec after it) is inflated by :func:`~virtualizarr_fill.codecs.inflate.inflate`
    (libdeflate, or zlib itself for small chunks): its size is bounded, which libdeflate
    needs, and inflating is deterministic, so the bytes are the same. Anything it
    refuses goes to the codec itself.

    Each codec's direct decode (:func:`direct_decode`) is bound to a chunk shape once:
    a read of many small chunks would otherwise work out each one's sizes again, which
    costs as much as decoding a strip of a few hundred bytes."""
    inflating = frozenset(
        k for k in range(len(bb_codecs)) if sized and inflates_into_chunk(bb_codecs, k)
    )
    direct = [direct_decode(bb_codecs, k, sized=sized) for k in range(len(bb_codecs))]
    order = range(len(bb_codecs) - 1, -1, -1)  # last codec first
    bound: dict[tuple[tuple[int, ...], int], _BoundSteps] = {}
    # The spec and size of the chunk before and their steps, one tuple replaced whole
    # (threads may share a decoder): most chunks of a read have the spec object of the
    # one before, for which even the lookup by shape costs noticeably per chunk.
    last: list[tuple[Any, int, _BoundSteps]] = [(None, -1, ((), False))]

    def bind(ab_spec: ArraySpec, nbytes: int) -> _BoundSteps:
        steps: list[Callable[[Any], Any] | None] = []
        for k in order:
            decoder = direct[k]
            step = None if decoder is None else decoder(ab_spec, nbytes)
            if step is not None and k in inflating:
                step = _inflated_or(step, nbytes)
            steps.append(step)
        return tuple(steps), None not in steps

    def decode(data: Any, ab_spec: ArraySpec, nbytes: int) -> Any:
        spec, size, (steps, direct_only) = last[0]
        if spec is not ab_spec or size != nbytes:
            key = (ab_spec.shape, nbytes)
            found = bound.get(key)
            if found is None:
                found = bound[key] = bind(ab_spec, nbytes)
            last[0] = (ab_spec, nbytes, found)
            steps, direct_only = found
        if direct_only:
            for step in steps:
                data = step(data)  # type: ignore[misc]  # direct_only: none is None
            return data
        buffer = None
        for k, step in zip(order, steps, strict=True):
            if buffer is None:
                if step is not None:
                    data = step(data)
                    continue
                if k in inflating:
                    inflated = inflate(data, nbytes)
                    if inflated is not None:
                        data = inflated
                        continue
                buffer = ab_spec.prototype.buffer.from_bytes(data)
            buffer = upstream.decode_sync(bb_codecs[k], buffer, ab_spec)
        return data if buffer is None else buffer.as_numpy_array()

    return decode


#: A chunk shape's steps undoing the bytes->bytes codecs, last codec first (None: the
#: codec's own decode), and whether every step is a direct one.
_BoundSteps = tuple[tuple[Callable[[Any], Any] | None, ...], bool]


def _inflated_or(step: Callable[[Any], Any], nbytes: int) -> Callable[[Any], Any]:
    """``step`` after :func:`~virtualizarr_fill.codecs.inflate.inflate` refuses a stream."""

    def inflated(data: Any) -> Any:
        out = inflate(data, nbytes)
        return step(data) if out is None else out

    return inflated


#: What :func:`direct_decode` returns: given a chunk's spec and decoded size, the
#: function decoding such a chunk's bytes.
_DirectDecode = Callable[[ArraySpec, int], Callable[[Any], Any]]


def _uint8(data: Any) -> np.ndarray[Any, Any]:
    return np.frombuffer(data, dtype=np.uint8)


def direct_decode(bb_codecs: Sequence[Any], k: int, *, sized: bool = True) -> _DirectDecode | None:
    """What bytes->bytes codec ``k`` (in chain order) does to a chunk's bytes, where it
    is known exactly: a function of (the chunk's spec, its decoded size) returning the
    function from the stored bytes-like to the decoded bytes-like; None otherwise.
    Without ``sized`` the chunk's decoded size is not the size of the codecs' output and
    is not used.

    zarr's codecs take and return ``Buffer`` objects, whose creation costs about as much
    as undoing a checksum: these call the same function the codec calls, on the bytes
    themselves."""
    codec = bb_codecs[k]
    if type(codec) in _DECODE_BYTES:
        decode_bytes = codec.decode_bytes
        return lambda spec, nbytes: decode_bytes
    numcodec = _numcodec(codec)
    if type(numcodec) is numcodecs.Shuffle and numcodec.elementsize > 1:
        # numcodecs' argument checks cost more than unshuffling a small chunk (HDF5
        # files of tiny chunks); its loop is faster on large ones.
        elementsize = numcodec.elementsize

        def unshuffled(data: Any) -> Any:
            if memoryview(data).nbytes <= SMALL_SHUFFLE_BYTES:
                return unshuffle(data, elementsize)
            return numcodec.decode(_uint8(data))

        return lambda spec, nbytes: unshuffled
    if type(numcodec) is numcodecs.Fletcher32:
        # libhdf5's own checksum, called on the stored bytes, costs half of numcodecs'
        # decode with its argument checks; anything it does not confirm goes to
        # numcodecs, which decides (and names a mismatch) as before.
        from virtualizarr_fill.hdf5 import checksum  # lazily: the HDF5 package loads h5py

        def verified(data: Any) -> Any:
            if type(data) is not bytes and memoryview(data).nbytes <= SMALL_CHECKSUM_BYTES:
                data = bytes(data)  # obstore's buffers: a copy costs less than a pointer
            if type(data) is bytes and checksum.fletcher32_verified(data):
                return memoryview(data)[:-4]
            return numcodec.decode(_uint8(data))

        return lambda spec, nbytes: verified
    if numcodec is not None:
        numcodec_decode = numcodec.decode
        return lambda spec, nbytes: lambda data: numcodec_decode(_uint8(data))
    decode = _imagecodecs_function(codec)
    lzw_sized = sized and all(type(c) is TruncateCodec for c in bb_codecs[:k])
    if decode is imagecodecs.lzw_decode and lzw_sized:
        # Decoding LZW into a buffer of known size takes much less time than letting it
        # find the size. imagecodecs stops at the buffer's end: that is the truncate
        # codec's cut when it follows; else one byte more, so that a stream decoding
        # to more than the chunk still fails the size check, as through the codecs.
        # The buffer is an array's memory, of which imagecodecs returns the part
        # written: given a size instead, it shrinks the bytes it made to what was
        # written, a copy of the whole chunk that costs several times the decoding.
        # imagecodecs reads any bytes-like object.
        extra = 0 if k else 1

        def lzw(spec: ArraySpec, nbytes: int) -> Callable[[Any], Any]:
            if expected_nbytes(spec) is None:  # variable-length items: no size to trust
                return decode
            size = nbytes + extra
            return lambda data: decode(data, out=memoryview(np.empty(size, dtype=np.uint8)))

        return lzw
    if decode is not None:
        return lambda spec, nbytes: decode
    if k == 0 and type(codec) is TruncateCodec:
        # Next to the ``bytes`` codec: its length limit is the chunk's decoded size.
        return lambda spec, nbytes: truncator(spec)
    return None


#: Chunk size up to which a byte shuffle is undone by NumPy rather than numcodecs.
SMALL_SHUFFLE_BYTES = 2048
#: Stored chunk size up to which a Fletcher-32 checksum not in a ``bytes`` object is
#: copied into one for libhdf5's function; larger ones go to numcodecs.
SMALL_CHECKSUM_BYTES = 64 << 10

#: This package's bytes->bytes codecs whose ``decode_bytes`` is what their
#: ``_decode_sync`` does to the chunk's bytes.
_DECODE_BYTES = (HDF5LZFCodec, HDF5ShuffleCodec, HDF5BitshuffleCodec)


def _imagecodecs_function(codec: Any) -> Callable[[Any], Any] | None:
    """imagecodecs' decode function that the imagecodecs-zarr codec ``codec`` calls on the
    chunk's bytes as a ``uint8`` array, for the codecs without configuration (LZW,
    PackBits); None for others, subclasses, or another implementation."""
    module = type(codec).__module__
    if module != "imagecodecs.zarr":
        return None
    name = type(codec).__name__
    function = {"Lzw": "lzw_decode", "Packbits": "packbits_decode"}.get(name)
    if function is None or not upstream.defines_sync_decode(type(codec)):
        return None
    return cast("Callable[[Any], Any] | None", getattr(imagecodecs, function, None))


def _numcodec(codec: Any) -> Any:
    """The numcodecs codec zarr's wrapper of a bytes->bytes numcodecs codec (checksums,
    compressors) decodes with, or None for other codecs: calling it directly skips a
    ``Buffer`` on either side (most of the time of undoing a checksum of a small chunk)."""
    return upstream.numcodecs_codec(codec)


__all__ = ["SMALL_CHECKSUM_BYTES", "SMALL_SHUFFLE_BYTES", "bytes_decoder", "direct_decode"]
