"""The manifest of a contiguous dataset: one chunk covering the array, or, for external
raw storage, one chunk per segment of the external files when the segments tile the
array along its first axis (and the path policy admits the files)."""

from __future__ import annotations

import math

import h5py
import numpy as np

from virtualizarr_fill.hdf5.array_context import (
    DatasetRefused,
    StoredDataset,
    empty_manifest,
)
from virtualizarr_fill.io.urls import join_url


def contiguous_manifest(
    ds: StoredDataset, chunks: tuple[int, ...], grid: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    paths, offsets, lengths = empty_manifest(grid)
    pending: list[tuple[int, ...]] = []
    if ds.dcpl.get_external_count() > 0:
        _external_manifest(ds, chunks, paths, offsets, lengths)
        return paths, offsets, lengths, pending
    offset = ds.dataset.id.get_offset()
    nbytes = math.prod(ds.stored_shape) * ds.dtype.itemsize
    if offset is None or nbytes == 0:
        return paths, offsets, lengths, pending  # never written: reads as fill
    size = ds.dataset.id.get_storage_size()
    if size < nbytes:
        raise DatasetRefused(
            "corrupt", f"contiguous storage of {size} bytes holds less than {nbytes} bytes"
        )
    if offset + nbytes > ds.context.file_size:
        raise DatasetRefused(
            "corrupt",
            f"data ends at byte {offset + nbytes}, past the end of the file "
            f"({ds.context.file_size} bytes): the file is truncated",
        )
    index = (0,) * len(grid)
    paths[index] = ds.context.url
    offsets[index] = offset
    lengths[index] = nbytes
    return paths, offsets, lengths, pending


def external_segments(ds: StoredDataset) -> tuple[int, list[tuple[str, int, int]]]:
    """External raw storage as (rows per segment, [(url, offset), ...]).

    The segments of other files are concatenated in order; they are expressible as
    references when one segment holds the whole array, or when every segment holds
    the same whole number of rows (the last may hold more than the rest needs).
    """
    segments = [ds.dcpl.get_external(i) for i in range(ds.dcpl.get_external_count())]
    itemsize = ds.dtype.itemsize
    nbytes = math.prod(ds.stored_shape) * itemsize
    rows_total = ds.stored_shape[0] if ds.stored_shape else 1
    if len(segments) == 1 or not ds.stored_shape:
        name, offset, size = segments[0]
        if size != h5py.h5f.UNLIMITED and size < nbytes:
            raise DatasetRefused(
                "external",
                f"external raw segment of {size} bytes is shorter than the {nbytes}-byte array",
            )
        return max(rows_total, 1), [(_external_url(ds, name), int(offset), int(size))]
    row_bytes = math.prod(ds.stored_shape[1:]) * itemsize
    sizes = [int(size) for _, _, size in segments]
    first = sizes[0]
    if row_bytes == 0 or first % row_bytes or any(s != first for s in sizes[:-1]):
        raise DatasetRefused(
            "external",
            f"external raw storage segments of {sizes} bytes do not tile rows of {row_bytes} bytes",
        )
    rows = first // row_bytes
    needed = math.ceil(rows_total / rows) if rows else 0
    if rows == 0 or needed > len(segments):
        raise DatasetRefused("external", "external raw storage segments are too short")
    last_needed = (rows_total - rows * (needed - 1)) * row_bytes
    if needed and sizes[needed - 1] != h5py.h5f.UNLIMITED and sizes[needed - 1] < last_needed:
        raise DatasetRefused("external", "the last external raw segment is too short")
    return rows, [(_external_url(ds, n), int(o), int(z)) for n, o, z in segments[:needed]]


def _external_manifest(
    ds: StoredDataset,
    chunks: tuple[int, ...],
    paths: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
) -> None:
    if math.prod(ds.stored_shape) == 0:
        return
    rows, segments = ds.external
    itemsize = ds.dtype.itemsize
    row_bytes = math.prod(ds.stored_shape[1:]) * itemsize if ds.stored_shape else itemsize
    total_rows = ds.stored_shape[0] if ds.stored_shape else 1
    for number, (url, offset, size) in enumerate(segments):
        index = (number,) + (0,) * (paths.ndim - 1) if paths.ndim else ()
        rows_here = min(rows, total_rows - number * rows)
        if rows_here < rows and (size == h5py.h5f.UNLIMITED or size < rows * row_bytes):
            # The codec chain decodes whole chunks; a short last one would not reshape.
            raise DatasetRefused(
                "external", "the last external raw segment holds only part of a chunk"
            )
        paths[index] = url
        offsets[index] = offset
        lengths[index] = rows * row_bytes if paths.ndim else row_bytes


def _external_url(ds: StoredDataset, name: bytes | str) -> str:
    text = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
    url = join_url(ds.context.url, text)
    refusal = ds.context.refusal(ds.context.url, url, f"external raw storage {text!r}")
    if refusal is not None:
        raise DatasetRefused("external", refusal)
    if not ds.context.exists(url):
        raise DatasetRefused(
            "external", f"external raw storage file {text!r} not found (looked for {url})"
        )
    return url


__all__ = ["contiguous_manifest", "external_segments"]
