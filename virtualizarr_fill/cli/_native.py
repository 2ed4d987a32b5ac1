"""The native readers ``verify`` compares with: tifffile and h5py, reading a file block by
block (a strip, tile or chunk at a time), locally or through obstore."""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from virtualizarr_fill.cli._inputs import local_path, registry_for

__all__ = ["VERIFY_BLOCK_BYTES", "Block", "hdf5_blocks", "tiff_blocks"]

#: Largest native block ``verify`` reads at once from a contiguous (unchunked) dataset.
VERIFY_BLOCK_BYTES = 32 * 1024 * 1024

#: Where a block lies in the file's array, and its values.
type Block = tuple[tuple[slice, ...], np.ndarray]


class _ObjectFile(io.RawIOBase):
    """A seekable file over obstore's buffered object reader, returning ``bytes``.

    tifffile and h5py need ``bytes`` from ``read``; obstore's reader returns its own
    buffer type. Unlike :class:`~virtualizarr_fill.io.StoreFile` it keeps no cache, so
    reading a whole large file stays within the reader's buffer.
    """

    def __init__(self, reader: Any) -> None:
        super().__init__()
        self._reader = reader

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def readinto(self, buffer: Any) -> int:
        data = memoryview(self._reader.read(len(buffer)))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
        super().close()


@contextlib.contextmanager
def _open_native(url: str) -> Iterator[Any]:
    """What a native reader opens: the path of a local file, else a file object."""
    local = local_path(url)
    if local is not None:
        yield str(local)
        return
    import obstore

    store, path = registry_for([url]).resolve(url)
    with io.BufferedReader(_ObjectFile(obstore.open_reader(store, str(path)))) as handle:
        yield handle


def tiff_blocks(url: str, ifd: int) -> Iterator[Block]:
    """``(band, y, x)`` blocks of one IFD, one decoded strip or tile at a time (tifffile)."""
    import tifffile

    with _open_native(url) as source, tifffile.TiffFile(source) as tif:
        page = tif.pages[ifd]
        if isinstance(page, tifffile.TiffFrame):
            page = page.aspage()
        assert isinstance(page, tifffile.TiffPage)
        separate, _, length, width, contig = page.shaped
        nodata = page.nodata
        # sort=True: tifffile's unsorted read path mishandles sparse segments.
        for data, index, shape in page.segments(sort=True, maxworkers=1):
            band, _, row, col, _ = index
            rows = min(shape[1], length - row)
            cols = min(shape[2], width - col)
            bands = contig if separate == 1 else 1
            if data is None:
                block = np.full((bands, rows, cols), nodata, dtype=page.dtype)
            else:
                block = np.moveaxis(np.asarray(data)[0, :rows, :cols, :], -1, 0)
            first_band = band if separate > 1 else 0
            yield (
                (
                    slice(first_band, first_band + bands),
                    slice(row, row + rows),
                    slice(col, col + cols),
                ),
                block,
            )


def hdf5_blocks(url: str, name: str) -> Iterator[Block]:
    """Blocks of one dataset: its chunks, or row blocks of a contiguous dataset (h5py)."""
    import h5py

    with _open_native(url) as source, h5py.File(source, "r") as file:
        dataset = file[name]
        if dataset.shape is None:
            return
        if dataset.ndim == 0:
            yield (), np.asarray(dataset[()])
            return
        if dataset.chunks:
            for selection in dataset.iter_chunks():
                yield tuple(selection), dataset[selection]
            return
        row_bytes = max(1, dataset.dtype.itemsize * math.prod(dataset.shape[1:]))
        step = max(1, VERIFY_BLOCK_BYTES // row_bytes)
        for start in range(0, dataset.shape[0], step):
            stop = min(start + step, dataset.shape[0])
            rest = tuple(slice(0, n) for n in dataset.shape[1:])
            yield (slice(start, stop), *rest), dataset[start:stop]
