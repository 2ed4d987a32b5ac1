"""HDF5 virtual datasets (VDS) as references into their source files.

A virtual dataset stores no data: its mappings place selections of source datasets
(in other files, or ``"."`` for its own) into its extent, and unmapped elements read as
its fill value. The common use, stacking whole source datasets side by side, is
expressible as chunk references when

* every mapping copies a whole source dataset (selection "all", or a hyperslab
  covering it) into one rectangular block of the virtual dataset;
* all sources share one chunk shape, codec chain and data type (the virtual one);
* every block starts on that chunk grid and spans whole chunks, except at the far
  edge of the virtual dataset;
* blocks do not overlap, and sources with unallocated chunks have the virtual
  dataset's fill value (those chunks stay absent and must read the same).

Each source is virtualised with the same machinery as any dataset (so its filters,
masks and inlined chunks carry over), and its manifest is placed at the block's chunk
offset. Anything else is refused naming the reason: never fill values in its place.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np
from virtualizarr.manifests import ChunkManifest, ManifestArray

from virtualizarr_fill.hdf5.array_context import ArrayContext, DatasetRefused, Target
from virtualizarr_fill.io.urls import join_url

#: Makes one source dataset an array: ``(dataset, target, context) -> array``.
SourceBuilder = Callable[[h5py.Dataset, Target, ArrayContext], ManifestArray]


@dataclass(frozen=True)
class Mapping:
    """One VDS mapping: a whole source dataset placed at ``start`` with ``shape``."""

    filename: str
    dataset: str
    start: tuple[int, ...]
    shape: tuple[int, ...]


def _block(space: h5py.h5s.SpaceID, extent: tuple[int, ...] | None) -> tuple[tuple[int, ...], ...]:
    """(start, shape) of a selection that is one rectangular block."""
    kind = space.get_select_type()
    if kind == h5py.h5s.SEL_ALL:
        if extent is None:
            raise DatasetRefused("layout", "virtual dataset mapping selects an unknown extent")
        return (tuple(0 for _ in extent), tuple(extent))
    if kind != h5py.h5s.SEL_HYPERSLABS or not space.is_regular_hyperslab():
        raise DatasetRefused(
            "layout", "virtual dataset (VDS) mapping with an irregular selection (points or unions)"
        )
    start, _stride, count, block = space.get_regular_hyperslab()
    if any(int(c) != 1 for c in count):
        raise DatasetRefused(
            "layout", "virtual dataset (VDS) mapping with a repeating (strided) selection"
        )
    return (tuple(int(s) for s in start), tuple(int(b) for b in block))


def read_mappings(dcpl: h5py.h5p.PropDCID, shape: tuple[int, ...]) -> list[Mapping]:
    mappings = []
    for index in range(dcpl.get_virtual_count()):
        start, block = _block(dcpl.get_virtual_vspace(index), shape)
        filename = dcpl.get_virtual_filename(index)
        dsetname = dcpl.get_virtual_dsetname(index)
        if "%b" in filename or "%b" in dsetname:
            raise DatasetRefused(
                "layout", "virtual dataset (VDS) with printf-style (unlimited) source names"
            )
        mappings.append(Mapping(filename, dsetname, start, block))
    return mappings


def _describe(mappings: list[Mapping], limit: int = 3) -> str:
    names = [f"{m.filename}:{m.dataset}" for m in mappings[:limit]]
    more = f" and {len(mappings) - limit} more" if len(mappings) > limit else ""
    return ", ".join(names) + more


def build_virtual_array(
    dataset: h5py.Dataset,
    dcpl: h5py.h5p.PropDCID,
    target: Target,
    context: ArrayContext,
    finish: Callable[[tuple[int, ...], list[dict[str, Any]], ChunkManifest], ManifestArray],
    *,
    build_source: SourceBuilder,
) -> ManifestArray:
    """The virtual dataset as one array of references into its sources.

    ``finish(chunks, codecs, manifest)`` builds the array (metadata from the virtual
    dataset's own type, attributes, fill value and dimension names);
    ``build_source(dataset, target, context)`` makes each source dataset an array
    (:func:`~virtualizarr_fill.hdf5.arrays.build_array`, which calls this module: passed
    in, so that neither module imports the other both ways).
    """
    shape = tuple(int(s) for s in dataset.shape)
    if tuple(target.shape) != shape:
        raise DatasetRefused("layout", "virtual dataset padded along an unlimited dimension")
    try:
        mappings = read_mappings(dcpl, shape)
    except DatasetRefused as refusal:
        raise DatasetRefused("layout", refusal.reason) from None
    if not mappings:
        raise DatasetRefused("layout", "virtual dataset (VDS) without mappings")
    sources = [_source_array(mapping, dataset, context, build_source) for mapping in mappings]
    first = sources[0]
    chunks = tuple(int(c) for c in first.metadata.chunks)
    codecs = [codec.to_dict() for codec in first.metadata.codecs]
    where = f"virtual dataset (VDS) from {_describe(mappings)}"
    for mapping, source in zip(mappings, sources, strict=True):
        if (
            tuple(source.metadata.chunks) != chunks
            or [c.to_dict() for c in source.metadata.codecs] != codecs
        ):
            raise DatasetRefused("layout", f"{where}: sources differ in chunking or codecs")
        if source.metadata.data_type != first.metadata.data_type:
            raise DatasetRefused("layout", f"{where}: sources differ in data type")
        for start, size, chunk, total in zip(
            mapping.start, mapping.shape, chunks, shape, strict=True
        ):
            if start % chunk or (size % chunk and start + size != total):
                raise DatasetRefused(
                    "layout", f"{where}: a source block is not aligned with the source chunks"
                )
    if np.dtype(dataset.dtype) != np.dtype(first.metadata.data_type.to_native_dtype()):
        raise DatasetRefused("layout", f"{where}: the sources' type differs from the VDS type")
    manifest = _merge(mappings, sources, shape, chunks, where, context.max_chunks)
    virtual_fill = dataset.fillvalue
    for source in sources:
        complete = not any(path == "" for path in np.asarray(source.manifest._paths).ravel())
        if not complete and not _same_fill(source.metadata.fill_value, virtual_fill):
            raise DatasetRefused(
                "layout",
                f"{where}: a source has unallocated chunks whose fill value "
                f"{source.metadata.fill_value!r} differs from the VDS fill {virtual_fill!r}",
            )
    return finish(chunks, codecs, manifest)


def _same_fill(a: Any, b: Any) -> bool:
    left, right = np.asarray(a), np.asarray(b)
    if left.dtype.kind in "fc" or right.dtype.kind in "fc":
        return bool(np.array_equal(left, right, equal_nan=True))
    return bool(np.array_equal(left, right))


def _source_array(
    mapping: Mapping, dataset: h5py.Dataset, context: ArrayContext, build_source: SourceBuilder
) -> ManifestArray:
    url = context.url if mapping.filename == "." else join_url(context.url, mapping.filename)
    where = f"virtual dataset (VDS) source {mapping.filename}:{mapping.dataset}"
    policy = context.refusal(context.url, url, where)
    if policy is not None:
        raise DatasetRefused("external", policy)
    try:
        file, size = context.open_file(url)
        if context.open_path is None:
            source = file[mapping.dataset]
        else:
            source = context.open_path(url, mapping.dataset)
    except Exception as exc:  # missing file or dataset
        raise DatasetRefused("layout", f"{where} cannot be opened ({exc})") from None
    if not isinstance(source, h5py.Dataset):
        raise DatasetRefused("layout", f"{where} is not a dataset")
    if tuple(int(s) for s in source.shape) != mapping.shape:
        raise DatasetRefused(
            "layout",
            f"{where}: only part of the source is mapped ({source.shape} -> {mapping.shape})",
        )
    source_context = dataclasses.replace(context, url=url, file_size=size)
    dims = tuple(f"dim_{i}" for i in range(len(mapping.shape)))
    try:
        return build_source(source, Target(mapping.shape, dims), source_context)
    except DatasetRefused as refusal:
        raise DatasetRefused("layout", f"{where}: {refusal.reason}") from None


def _merge(
    mappings: list[Mapping],
    sources: list[ManifestArray],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    where: str,
    max_chunks: int,
) -> ChunkManifest:
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    if math.prod(grid) > max_chunks:
        raise DatasetRefused("size", f"a grid of {math.prod(grid)} chunks exceeds max_chunks")
    paths = np.full(grid, "", dtype=np.dtypes.StringDType())
    offsets = np.zeros(grid, dtype=np.uint64)
    lengths = np.zeros(grid, dtype=np.uint64)
    covered = np.zeros(grid, dtype=bool)
    inlined: dict[tuple[int, ...], bytes] = {}
    for mapping, source in zip(mappings, sources, strict=True):
        origin = tuple(s // c for s, c in zip(mapping.start, chunks, strict=True))
        manifest = source.manifest
        region = tuple(
            slice(o, o + n) for o, n in zip(origin, manifest.shape_chunk_grid, strict=True)
        )
        if covered[region].any():
            raise DatasetRefused("layout", f"{where}: overlapping mappings")
        covered[region] = True
        paths[region] = manifest._paths
        offsets[region] = manifest._offsets
        lengths[region] = manifest._lengths
        for index, data in manifest._inlined.items():
            inlined[tuple(o + i for o, i in zip(origin, index, strict=True))] = data
    return ChunkManifest.from_arrays(
        paths=paths,  # type: ignore[arg-type]  # a StringDType array
        offsets=offsets,
        lengths=lengths,
        validate_paths=False,
        inlined=inlined,
    )


__all__ = ["Mapping", "build_virtual_array", "read_mappings"]
