"""``ManifestCodecPipeline``: a zarr codec pipeline that reads ManifestStores a whole batch
at a time.

Importing this module registers the pipeline with zarr (``zarr.registry.register_pipeline``),
after which zarr's ``codec_pipeline.path`` setting (or ``ZARR_CODEC_PIPELINE__PATH``)
can name it. The package declares no ``zarr.codec_pipeline`` entry point: zarr imports
every such entry point at the first array any process creates or opens, so one would load
this module into every zarr user's process. A process that names the pipeline without
importing the package (a dask worker) imports this module first, for example as a worker
preload (docs/guide/reading.md).

At load it imports only what zarr documents for pipeline authors (the ``CodecPipeline``
base class and the types of its methods, the default ``BatchedCodecPipeline`` it wraps,
the registry); the rest of zarr it uses, and the reading machinery
(:mod:`virtualizarr_fill.reads.batch_reads`, which imports VirtualiZarr and the
decompressors), is imported when an array is read with it.

Everything other than reads of ManifestStores (writes, other stores, sharding, codecs
without a synchronous implementation, non-CPU buffers) goes to zarr's
``BatchedCodecPipeline``, which this pipeline wraps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from zarr.abc.codec import Codec, CodecPipeline
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer, NDBuffer
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.registry import register_pipeline

if TYPE_CHECKING:
    from zarr.abc.codec import GetResult
    from zarr.abc.store import ByteSetter
    from zarr.core.chunk_utils import ChunkTransform
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.indexing import SelectorTuple
    from zarr.core.metadata.v3 import ChunkGridMetadata

    from virtualizarr_fill.reads.decoders import ChunkInfo
    from virtualizarr_fill.reads.raw_layout import RawLayout

PIPELINE_PATH = "virtualizarr_fill.reads.pipeline.ManifestCodecPipeline"
"""zarr's ``codec_pipeline.path`` setting that selects
:class:`~virtualizarr_fill.reads.pipeline.ManifestCodecPipeline` in a process that has
imported this module: for the whole process (``ZARR_CODEC_PIPELINE__PATH`` in a dask
worker's environment, with this module as a worker preload) or with
``zarr.config.set({"codec_pipeline.path": PIPELINE_PATH})``."""

@dataclass(frozen=True)
class ManifestCodecPipeline(CodecPipeline):
    """zarr's batched pipeline, with whole-batch reads from ManifestStores.

    For a read from a ``ManifestStore`` it looks every chunk up in the array's manifest
    at once, fetches the byte ranges with one ``get_ranges`` call per file, and decodes
    with the array's own codecs (see :mod:`virtualizarr_fill.reads.batch_reads`).
    Select it with :func:`virtualizarr_fill.use_manifest_pipeline`, or with zarr's
    ``codec_pipeline.path`` setting (:data:`PIPELINE_PATH`) once this module is imported.
    """

    inner: BatchedCodecPipeline
    transform: ChunkTransform | None  # None: a codec has no synchronous decode
    raw: RawLayout | None = None  # chunks stored as plain numbers: how to view them

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        inner = BatchedCodecPipeline.from_codecs(codecs, batch_size=batch_size)
        return cls(inner=inner, transform=None)

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        inner = self.inner.evolve_from_array_spec(array_spec)
        transform: ChunkTransform | None = None  # zarr's pipeline reads (see reads_manifests)
        try:
            from zarr.core.chunk_utils import ChunkTransform

            transform = ChunkTransform(codecs=tuple(inner))
        except (ImportError, TypeError):  # a zarr without it, or a codec without sync decode
            pass
        from virtualizarr_fill.reads.raw_layout import RawLayout

        raw = RawLayout.of_chain(inner, array_spec)
        return type(self)(inner=inner, transform=transform, raw=raw)

    def __iter__(self) -> Iterator[Codec]:
        return iter(self.inner)

    @property
    def supports_partial_decode(self) -> bool:
        return self.inner.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self.inner.supports_partial_encode

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGridMetadata,
    ) -> None:
        self.inner.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self.inner.compute_encoded_size(byte_length, array_spec)

    async def decode(
        self, chunk_bytes_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        return await self.inner.decode(chunk_bytes_and_specs)

    async def encode(
        self, chunk_arrays_and_specs: Iterable[tuple[NDBuffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        return await self.inner.encode(chunk_arrays_and_specs)

    async def write(
        self,
        batch_info: Iterable[tuple[ByteSetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        await self.inner.write(batch_info, value, drop_axes)

    async def read(
        self,
        batch_info: Iterable[ChunkInfo],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> tuple[GetResult, ...]:
        from virtualizarr_fill.reads import batch_reads

        return await batch_reads.read(self, batch_info, out, drop_axes)

    @property
    def reads_manifests(self) -> bool:
        """Can this pipeline read chunks from a manifest itself (else zarr's pipeline does)?"""
        from virtualizarr_fill.reads import batch_reads

        return batch_reads.reads_manifests(self)


# zarr finds a pipeline named by ``codec_pipeline.path`` among the registered ones.
register_pipeline(ManifestCodecPipeline)

__all__ = ["PIPELINE_PATH", "ManifestCodecPipeline"]
