"""Parse-time verification of one stored chunk per filtered dataset.

Chunk dimensions or a filter pipeline that do not match the stored chunks (a corrupt
layout or filter message) fail here, when the smallest chunk's bytes are already
fetched, instead of in every read.
"""

from __future__ import annotations

import math

import numpy as np
from zarr.abc.codec import BytesBytesCodec, SupportsSyncCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync

from virtualizarr_fill import upstream
from virtualizarr_fill.codecs.inflate import inflate, inflates_to_chunk
from virtualizarr_fill.hdf5.array_context import (
    DatasetRefused,
    StoredDataset,
    chunk_spec,
)

#: Parse-time verification of one chunk per filtered dataset (only when its bytes are
#: already fetched): largest chunk it decodes (decoding is paid once per dataset), and
#: largest stored chunk it picks (a corrupt chunk can decode to far more than its chunk
#: dimensions say; deflate expands at most ~1000-fold).
VERIFY_CHUNK_MAX_BYTES = 1 << 20
VERIFY_STORED_MAX_BYTES = 64 << 10


def decoded_size(
    metadata: ArrayV3Metadata, chunks: tuple[int, ...], data: bytes, expected: int
) -> int:
    """Length of one stored chunk after the array's bytes->bytes codecs.

    Decoded codec by codec, synchronously where the codec allows it (all but one of the
    codecs the parser writes): a trip through zarr's event loop would cost more than
    decoding a small chunk. A deflate stream, alone or under size-preserving shuffles,
    is first inflated by libdeflate into ``expected`` bytes (about twice zlib's speed);
    a stream that does not fit, or that libdeflate refuses, goes the general way, which
    names the problem.
    """
    bb_codecs = [c for c in metadata.codecs if isinstance(c, BytesBytesCodec)]
    if bb_codecs and inflates_to_chunk(bb_codecs, len(bb_codecs) - 1):
        inflated = inflate(data, expected)
        if inflated is not None:  # else the general path decodes again and reports it
            return len(inflated)
    spec = chunk_spec(metadata, chunks)
    buffer = default_buffer_prototype().buffer.from_bytes(data)
    for codec in reversed(metadata.codecs):
        if not isinstance(codec, BytesBytesCodec):
            break
        if isinstance(codec, SupportsSyncCodec):
            buffer = upstream.decode_sync(codec, buffer, spec)
        else:
            decoded = next(iter(sync(codec.decode([(buffer, spec)]))))
            if decoded is None:
                raise ValueError(f"codec {codec.to_dict()['name']} decoded nothing")
            buffer = decoded
    return len(buffer)


def verify_one_chunk(
    ds: StoredDataset,
    metadata: ArrayV3Metadata,
    chunks: tuple[int, ...],
    offsets: np.ndarray,
    lengths: np.ndarray,
) -> None:
    """Decode the smallest referenced chunk with the array's codecs, when its bytes
    are already fetched (no request; decoding costs little for chunks up to
    :data:`VERIFY_CHUNK_MAX_BYTES`, stored in up to :data:`VERIFY_STORED_MAX_BYTES`).

    Chunk dimensions or a filter pipeline that do not match the stored chunks (a
    corrupt layout or filter message) then fail here, at parse time, instead of in
    every read: libhdf5 silently uses the first bytes of a decoded chunk larger than
    the chunk dimensions say, so such references could never read back what h5py
    shows. A corrupt or checksum-failing chunk is refused the same way.
    """
    expected = math.prod(chunks) * ds.dtype.itemsize
    if expected > VERIFY_CHUNK_MAX_BYTES or not lengths.size:
        return
    candidates = np.where(lengths > 0, lengths, np.iinfo(np.uint64).max)
    flat = int(np.argmin(candidates))
    length = int(lengths.flat[flat])
    if length == 0 or length > VERIFY_STORED_MAX_BYTES:
        return
    offset = int(offsets.flat[flat])
    reader = ds.context.reader(ds.context.url)
    data = None if reader is None else reader.cached_range(offset, length)
    if data is None:
        return
    try:
        size = decoded_size(metadata, chunks, data, expected)
    except Exception as exc:  # the codecs' own complaint is the detail
        problem = f"does not decode ({type(exc).__name__}: {exc})"
    else:
        if size == expected:
            return
        problem = f"decodes to {size} bytes, not the {expected} bytes of a {chunks} chunk"
    index = tuple(int(i) for i in np.unravel_index(flat, lengths.shape))
    raise DatasetRefused(
        "corrupt",
        f"chunk {index} ({length} bytes at byte {offset}) {problem}: the chunk is "
        "corrupt, or the chunk dimensions or filters do not match the stored chunks",
    )


__all__ = ["VERIFY_CHUNK_MAX_BYTES", "VERIFY_STORED_MAX_BYTES", "decoded_size", "verify_one_chunk"]
