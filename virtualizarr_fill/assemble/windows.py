"""A window of a tile's array, cut where overlapping tiles meet, exact to the pixel.

Along each axis the window splits into a *leading* piece, when it starts inside a stored
chunk, and the *rest*, which starts on a chunk boundary. Chunks of the rest are
referenced as stored: where the window ends inside a chunk, that chunk is its leading
part, which the mosaic's rectilinear grid and the edge codecs (``truncate``, ``crop``)
keep. A chunk's trailing part cannot be referenced (a codec is array-wide and never
learns which chunk it decodes), so the chunks of a leading piece are *materialised*:
read through zarr at build time (what the user's read gives), encoded with the tile's
codec chain at their exact shape and inlined in the manifest. A chain that does not give
back the values it encoded (a lossy codec such as JPEG) is refused rather than stored.

Along the rows of a floating-point predictor (TIFF predictor 3) a chunk's leading part
cannot be referenced either (the predictor shuffles each row into byte planes, so no
edge codec can cut it), and such a piece is materialised too. Each window is chunked at
every cut its row and column of the mosaic need (:func:`natural_cuts` of every window
there), so that the windows concatenate.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from virtualizarr.manifests import ChunkManifest, ManifestArray
from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.chunk_grids import DimensionGrid
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.sync import sync

from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.manifests import upstream
from virtualizarr_fill.manifests.array import FillManifestArray
from virtualizarr_fill.zarr_model.chunk_grids import (
    chunk_grid,
    codec_edges,
    dimension_from_edges,
    grid_metadata,
)
from virtualizarr_fill.zarr_model.edge_codecs import (
    EdgeHandling,
    crop_stored_shape,
    insert_edge_codec,
    whole_row_axes,
    without_edge_codecs,
)

#: Reads the values of a window (one slice per axis) of the tile's array.
Reader = Callable[[tuple[slice, ...]], np.ndarray]


@dataclass
class Materialised:
    """Chunks stored as values, and their encoded bytes."""

    chunks: int = 0
    nbytes: int = 0

    def add(self, other: Materialised) -> None:
        self.chunks += other.chunks
        self.nbytes += other.nbytes

    def __str__(self) -> str:
        return (
            f"{self.chunks} chunk{'s' if self.chunks != 1 else ''} "
            f"({self.nbytes / 1024:.0f} KiB) stored as values where tiles overlap inside a chunk"
        )


@dataclass(frozen=True)
class _Piece:
    start: int
    stop: int
    materialised: bool  # starts inside a stored chunk, or cannot be cut short


def _on_boundary(dim: DimensionGrid, position: int) -> bool:
    return position >= dim.extent or dim.chunk_offset(dim.index_to_chunk(position)) == position


def natural_cuts(array: ManifestArray, axis: int, start: int, stop: int) -> list[int]:
    """Where the window ``start``-``stop`` of ``array`` along ``axis`` is cut into the
    mosaic's chunks: its ends and the stored chunks' edges between them."""
    dim = chunk_grid(array.metadata).dimensions[axis]
    first, last = dim.index_to_chunk(start), dim.index_to_chunk(stop - 1)
    return [start, *(dim.chunk_offset(k) for k in range(first + 1, last + 1)), stop]


def _ends_chunk(dim: DimensionGrid, position: int) -> bool:
    chunk = dim.index_to_chunk(position - 1)
    return dim.chunk_offset(chunk) + codec_edges(dim)[chunk] == position


def _pieces(dim: DimensionGrid, cuts: Sequence[int], whole_rows: bool) -> list[_Piece]:
    """The window between the first and last of ``cuts`` (which hold every stored chunk
    edge between them) as pieces: each segment that starts inside a stored chunk on its
    own (materialised), runs of segments that start on chunk edges together. Along an
    axis whose chunks no edge codec can cut short (``whole_rows``), a segment that ends
    inside its chunk is materialised too."""
    pieces: list[_Piece] = []
    for start, stop in itertools.pairwise(cuts):
        materialised = not _on_boundary(dim, start) or (whole_rows and not _ends_chunk(dim, stop))
        if not materialised and pieces and not pieces[-1].materialised:
            pieces[-1] = _Piece(pieces[-1].start, stop, materialised=False)
        else:
            pieces.append(_Piece(start, stop, materialised))
    return pieces


def _chunk_range(dim: DimensionGrid, piece: _Piece) -> tuple[int, int]:
    return dim.index_to_chunk(piece.start), dim.index_to_chunk(piece.stop - 1) + 1


def _referenced(array: ManifestArray, pieces: Sequence[_Piece]) -> ManifestArray:
    """The block whose every axis starts on a chunk boundary: its chunks as stored."""
    dims = chunk_grid(array.metadata).dimensions
    ranges = [_chunk_range(d, p) for d, p in zip(dims, pieces, strict=True)]
    new_dims = [
        dimension_from_edges(codec_edges(d)[a:b], p.stop - p.start)
        for d, p, (a, b) in zip(dims, pieces, ranges, strict=True)
    ]
    if all(
        (a, b) == (0, d.nchunks) and p.stop - p.start == d.extent
        for d, p, (a, b) in zip(dims, pieces, ranges, strict=True)
    ):
        return array
    manifest = upstream.subset_manifest(array.manifest, tuple(slice(a, b, 1) for a, b in ranges))
    metadata = dataclasses.replace(
        array.metadata,
        shape=tuple(p.stop - p.start for p in pieces),
        chunk_grid=grid_metadata(new_dims),
    )
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest)


def _cuts(dim: DimensionGrid, piece: _Piece) -> list[int]:
    """The edges inside ``piece`` where its chunks (the stored ones it meets) start."""
    if piece.materialised:
        return [piece.start, piece.stop]
    a, b = _chunk_range(dim, piece)
    return [piece.start, *(dim.chunk_offset(k) for k in range(a + 1, b)), piece.stop]


def _encode(
    array: ManifestArray, blocks: dict[tuple[int, ...], np.ndarray]
) -> dict[tuple[int, ...], bytes]:
    codecs = without_edge_codecs(array.metadata.codecs)
    pipeline = BatchedCodecPipeline.from_codecs(codecs, batch_size=max(len(blocks), 1))  # type: ignore[arg-type]
    nd_buffer = default_buffer_prototype().nd_buffer
    batch = [
        (nd_buffer.from_numpy_array(np.ascontiguousarray(v)), _spec(array, v.shape))
        for v in blocks.values()
    ]
    try:
        encoded = sync(pipeline.encode(batch))
        decoded = sync(pipeline.decode(list(zip(encoded, [s for _, s in batch], strict=True))))
    except Exception as err:  # a codec that cannot encode such a chunk, for any reason
        raise _LossyChain(f"cannot encode it ({type(err).__name__}: {err})") from err
    result = {}
    for (index, values), data, back in zip(blocks.items(), encoded, decoded, strict=True):
        if (
            data is None
            or back is None
            or not np.array_equal(
                back.as_numpy_array(), values, equal_nan=values.dtype.kind in "fc"
            )
        ):
            raise _LossyChain(
                "do not give back the values they encode (a lossy codec such as JPEG)"
            )
        result[index] = data.to_bytes()
    return result


def _spec(array: ManifestArray, shape: tuple[int, ...]) -> ArraySpec:
    """What zarr's codecs know of one chunk of ``array`` of this shape."""
    return ArraySpec(
        shape=shape,
        dtype=array.metadata.data_type,
        fill_value=array.metadata.fill_value,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def _exact_chain(array: ManifestArray) -> tuple[Any, ...]:
    """The chain of a block of materialised chunks. They are stored at their exact
    shapes, which the crop codec passes through; a crop codec from the tile's stored
    chunk shape lets the block share one chain with the tile's referenced chunks
    wherever the mosaic's grid reads them smaller."""
    codecs = array.metadata.codecs
    stored = crop_stored_shape(codecs) or tuple(
        codec_edges(d)[0] for d in chunk_grid(array.metadata).dimensions
    )
    try:
        return tuple(insert_edge_codec(codecs, EdgeHandling.CROP, stored))
    except ValueError:  # no plain ``bytes`` codec to crop after: the chunks as they are
        return tuple(without_edge_codecs(codecs))


class _LossyChain(Exception):
    """The codec chain does not give back the values it encoded."""


def _materialised(
    array: ManifestArray, pieces: Sequence[_Piece], read: Reader, what: str
) -> tuple[ManifestArray, Materialised]:
    """The block with a leading piece along some axis: read, encoded chunk by chunk at
    the chunks' exact shapes, inlined."""
    dims = chunk_grid(array.metadata).dimensions
    cuts = [_cuts(d, p) for d, p in zip(dims, pieces, strict=True)]
    values = read(tuple(slice(p.start, p.stop) for p in pieces))
    grid = tuple(len(c) - 1 for c in cuts)
    blocks = {}
    for index in itertools.product(*(range(n) for n in grid)):
        window = tuple(
            slice(c[i] - c[0], c[i + 1] - c[0]) for c, i in zip(cuts, index, strict=True)
        )
        blocks[index] = values[window]
    try:
        inlined = _encode(array, blocks)
    except _LossyChain as err:
        raise IncompatibleArraysError(
            f"{what}: an overlap ends inside its chunks, and the codecs of its chunks {err}, "
            "so the part of a chunk the overlap leaves cannot be stored exactly as values; "
            "cut the tiles on their chunk edges, or merge them with rasterio"
        ) from None
    paths = np.empty(grid, dtype=np.dtypes.StringDType())  # all "": no chunk
    offsets = np.zeros(grid, dtype=np.uint64)
    lengths = np.zeros(grid, dtype=np.uint64)
    for index, data in inlined.items():
        paths[index] = INLINED_CHUNK_PATH
        lengths[index] = len(data)
    manifest = ChunkManifest.from_arrays(
        paths=paths,  # type: ignore[arg-type]  # a StringDType array
        offsets=offsets,
        lengths=lengths,
        validate_paths=False,
        inlined=inlined,
    )
    new_dims = [dimension_from_edges(np.diff(c).tolist(), c[-1] - c[0]) for c in cuts]
    metadata = dataclasses.replace(
        array.metadata,
        shape=tuple(p.stop - p.start for p in pieces),
        chunk_grid=grid_metadata(new_dims),
        codecs=_exact_chain(array),
    )
    count = Materialised(len(inlined), sum(len(d) for d in inlined.values()))
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest), count


def window(
    array: ManifestArray,
    cuts: Sequence[Sequence[int]],
    read: Reader,
    what: str,
) -> tuple[ManifestArray, Materialised]:
    """The window of ``array`` between the first and last of ``cuts`` along each axis,
    chunked at every one of them (:func:`natural_cuts` and those the neighbouring cells
    need): its stored chunks where a chunk of the window starts on their edges, the
    others materialised (see the module)."""
    dims = chunk_grid(array.metadata).dimensions
    whole_rows = whole_row_axes(array.metadata.codecs, array.ndim)
    per_axis = [
        _pieces(d, c, axis in whole_rows)
        for axis, (d, c) in enumerate(zip(dims, cuts, strict=True))
    ]
    count = Materialised()
    blocks: dict[tuple[int, ...], ManifestArray] = {}
    for index in itertools.product(*(range(len(p)) for p in per_axis)):
        pieces = [p[i] for p, i in zip(per_axis, index, strict=True)]
        if any(p.materialised for p in pieces):
            blocks[index], counted = _materialised(array, pieces, read, what)
            count.add(counted)
        else:
            blocks[index] = _referenced(array, pieces)
    return _joined(blocks, [len(p) for p in per_axis]), count


def _joined(blocks: dict[tuple[int, ...], ManifestArray], shape: list[int]) -> ManifestArray:
    """The blocks concatenated, the last axis first."""
    current: dict[tuple[int, ...], ManifestArray] = blocks
    for axis in reversed(range(len(shape))):
        joined: dict[tuple[int, ...], ManifestArray] = {}
        for key in {k[:axis] for k in current}:
            parts = [current[(*key, i)] for i in range(shape[axis])]
            joined[key] = (
                parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)  # type: ignore[arg-type,assignment]
            )
        current = joined
    return current[()]


def materialised_in(dataset: xr.Dataset) -> Materialised:
    """The chunks a mosaic stores as values, from its variables' ``encoding``."""
    total = Materialised()
    for variable in dataset.variables.values():
        total.add(
            Materialised(
                int(variable.encoding.get("materialised_chunks", 0)),
                int(variable.encoding.get("materialised_bytes", 0)),
            )
        )
    return total


__all__ = ["Materialised", "Reader", "materialised_in", "natural_cuts", "window"]
