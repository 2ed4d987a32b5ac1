"""Build ManifestArrays for real TIFF and HDF5 files (test utility).

These stand in for the project's parsers in the concatenation tests: they read byte
ranges with tifffile (``page.dataoffsets``/``page.databytecounts``) and h5py
(``dsid.get_chunk_info``) and describe each file the way a parser must:

* a strip TIFF whose last strip is stored short gets a rectilinear grid along y
  (``[rps, ..., rps, last]``); one whose last strip is stored padded keeps a regular
  grid (the padded strip is the regular grid's boundary chunk);
* an HDF5 chunked dataset keeps its regular grid (HDF5 stores edge chunks padded).

Also: a picklable parser for ``open_virtual_mfdataset``, readers that go through
ManifestStore, Icechunk and kerchunk references, and the native reads to compare with.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

import h5py
import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from zarr.codecs import BytesCodec
from zarr.codecs.numcodecs import Shuffle, Zlib
from zarr.core.chunk_grids import FixedDimension, VaryingDimension
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.dtype import parse_data_type

import virtualizarr_fill
from fixtures import make_concat_fixtures
from virtualizarr_fill.manifests import FileManifestStore, FillManifestArray
from virtualizarr_fill.zarr_model.chunk_grids import grid_metadata
from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, insert_edge_codec

ZLIB_LEVEL = 6
STRING = np.dtypes.StringDType()


def file_url(path: Path) -> str:
    """``file://`` URL of a local file as VirtualiZarr's ManifestStore expects it.

    The path is not percent-encoded: ManifestStore hands the URL's path to the object
    store verbatim (``Path.as_uri()`` would turn the corpus' ``+`` into ``%2B``).
    """
    return "file://" + str(path.resolve())


def concatenate(arrays: Sequence[ManifestArray], axis: int = 0) -> ManifestArray:
    """``np.concatenate`` of ManifestArrays (FillManifestArray's array-function dispatch)."""
    return cast(ManifestArray, np.concatenate(arrays, axis=axis))  # type: ignore[arg-type]


def stack(arrays: Sequence[ManifestArray], axis: int = 0) -> ManifestArray:
    """``np.stack`` of ManifestArrays (FillManifestArray's array-function dispatch)."""
    return cast(ManifestArray, np.stack(arrays, axis=axis))  # type: ignore[arg-type]


def local_registry() -> ObjectStoreRegistry:
    """A registry that resolves ``file://`` URLs on the local filesystem."""
    return ObjectStoreRegistry({"file://": LocalStore()})


def _metadata(
    shape: Sequence[int],
    dtype: np.dtype,
    dims: Sequence[FixedDimension | VaryingDimension],
    codecs: Sequence[Any],
    dimension_names: Sequence[str] | None,
    fill_value: Any = None,
) -> ArrayV3Metadata:
    zdtype = parse_data_type(dtype.newbyteorder("="), zarr_format=3)
    return ArrayV3Metadata(
        shape=tuple(shape),
        data_type=zdtype,
        chunk_grid=grid_metadata(dims),
        chunk_key_encoding={"name": "default", "configuration": {"separator": "."}},
        fill_value=zdtype.default_scalar() if fill_value is None else fill_value,
        codecs=list(codecs),
        attributes={},
        dimension_names=None if dimension_names is None else tuple(dimension_names),
    )


def _endian(dtype: np.dtype) -> Literal["little", "big"]:
    order = dtype.byteorder
    if order == "=":
        return "little" if np.little_endian else "big"
    return "big" if order == ">" else "little"


# --------------------------------------------------------------------------- TIFF


def tiff_manifest_array(
    path: Path, dimension_names: Sequence[str] | None = ("y", "x")
) -> ManifestArray:
    """A ManifestArray for a single-sample strip or tile TIFF (uncompressed or deflate)."""
    uri = file_url(path)
    with tifffile.TiffFile(path) as tif:
        page = cast(tifffile.TiffPage, tif.pages[0])
        if page.samplesperpixel != 1 or page.predictor != 1:
            raise ValueError(f"{path}: only single-sample TIFFs without predictor")
        dtype = cast(np.dtype, page.dtype).newbyteorder(tif.byteorder)
        height, width = page.shape
        codecs: list[Any] = [BytesCodec(endian=_endian(dtype))]
        if page.compression == 8:
            codecs.append(Zlib(level=ZLIB_LEVEL))
        elif page.compression != 1:
            raise ValueError(f"{path}: unsupported compression {page.compression}")
        offsets = np.asarray(page.dataoffsets, dtype=np.uint64)
        counts = np.asarray(page.databytecounts, dtype=np.uint64)
        if page.is_tiled:
            tile_y, tile_x = page.tilelength, page.tilewidth
            dims: list[FixedDimension | VaryingDimension] = [
                FixedDimension(size=tile_y, extent=height),
                FixedDimension(size=tile_x, extent=width),
            ]
            grid = (-(-height // tile_y), -(-width // tile_x))
        else:
            rps = min(page.rowsperstrip, height)
            nstrips = len(offsets)
            last_rows = height - rps * (nstrips - 1)
            row_bytes = width * dtype.itemsize
            tif.filehandle.seek(int(offsets[-1]))
            raw = tif.filehandle.read(int(counts[-1]))
            stored_rows = len(zlib.decompress(raw) if page.compression == 8 else raw) // row_bytes
            if stored_rows == rps:  # padded: the regular grid's boundary chunk
                y_dim: FixedDimension | VaryingDimension = FixedDimension(size=rps, extent=height)
            elif stored_rows == last_rows:  # short: an explicit last edge
                y_dim = VaryingDimension([rps] * (nstrips - 1) + [last_rows], extent=height)
            else:
                raise ValueError(f"{path}: last strip stores {stored_rows} rows")
            dims = [y_dim, FixedDimension(size=width, extent=width)]
            grid = (nstrips, 1)
    paths = np.full(grid, uri, dtype=STRING)
    manifest = ChunkManifest.from_arrays(
        paths=paths,
        offsets=offsets.reshape(grid),
        lengths=counts.reshape(grid),
        validate_paths=False,
    )
    metadata = _metadata((height, width), dtype, dims, codecs, dimension_names)
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest)


def native_tiff(path: Path) -> np.ndarray:
    """The image as GDAL reads it (tifffile refuses padded deflate strips)."""
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path) as src:
            return np.asarray(src.read(1))


# --------------------------------------------------------------------------- HDF5


def hdf5_manifest_array(
    path: Path,
    name: str = "data",
    dimension_names: Sequence[str] | None = ("t", "y", "x"),
) -> ManifestArray:
    """A ManifestArray for a chunked HDF5 dataset (no filters, or shuffle and/or deflate)."""
    uri = file_url(path)
    with h5py.File(path, "r") as f:
        ds = f[name]
        chunks, shape = ds.chunks, ds.shape
        dtype = ds.dtype
        plist = ds.id.get_create_plist()
        filters = [plist.get_filter(i) for i in range(plist.get_nfilters())]
        codecs: list[Any] = [BytesCodec(endian=_endian(dtype))]
        for code, _flags, values, _name in filters:
            if code == h5py.h5z.FILTER_SHUFFLE:
                codecs.append(Shuffle(elementsize=dtype.itemsize))
            elif code == h5py.h5z.FILTER_DEFLATE:
                codecs.append(Zlib(level=int(values[0]) if values else ZLIB_LEVEL))
            else:
                raise ValueError(f"{path}: unsupported HDF5 filter {code}")
        grid = tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))
        paths = np.full(grid, "", dtype=STRING)
        offsets = np.zeros(grid, dtype=np.uint64)
        lengths = np.zeros(grid, dtype=np.uint64)
        for i in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(i)
            index = tuple(o // c for o, c in zip(info.chunk_offset, chunks, strict=True))
            paths[index] = uri
            offsets[index] = info.byte_offset
            lengths[index] = info.size
        fill = ds.fillvalue
    manifest = ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=lengths, validate_paths=False
    )
    dims = [FixedDimension(size=c, extent=s) for s, c in zip(shape, chunks, strict=True)]
    metadata = _metadata(shape, dtype, dims, codecs, dimension_names, fill_value=fill)
    return FillManifestArray(metadata=metadata, chunkmanifest=manifest)


def native_hdf5(path: Path, name: str = "data") -> np.ndarray:
    with h5py.File(path, "r") as f:
        return np.asarray(f[name][...])


# --------------------------------------------------------------------------- parsers / readers


@dataclasses.dataclass(frozen=True)
class StripTiffParser:
    """A VirtualiZarr parser for the fixture TIFFs (picklable, for parallel opens)."""

    variable: str = "band"

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        path = Path(url.removeprefix("file://"))
        marr = tiff_manifest_array(path)
        group = ManifestGroup(arrays={self.variable: marr}, attributes={})
        return FileManifestStore(group, registry=registry, url=url)


def with_codecs(marr: ManifestArray, codecs: Sequence[Any]) -> ManifestArray:
    """The same references decoded with another codec chain."""
    metadata = dataclasses.replace(marr.metadata, codecs=tuple(codecs))
    return FillManifestArray(metadata=metadata, chunkmanifest=marr.manifest)


def with_edge_codec(marr: ManifestArray, handling: EdgeHandling) -> ManifestArray:
    """The same references with the edge codec ``handling`` (replacing any present)."""
    return with_codecs(marr, insert_edge_codec(marr.metadata.codecs, handling))


def with_attributes(marr: ManifestArray, **attributes: Any) -> ManifestArray:
    """The same array with extra metadata attributes (e.g. ``_FillValue``)."""
    merged = {**marr.metadata.attributes, **attributes}
    metadata = dataclasses.replace(marr.metadata, attributes=merged)
    return FillManifestArray(metadata=metadata, chunkmanifest=marr.manifest)


def manifest_store(arrays: dict[str, ManifestArray]) -> ManifestStore:
    """The store a parser would return for a file holding these arrays."""
    return FileManifestStore(
        ManifestGroup(arrays=arrays, attributes={}), registry=local_registry(), url="file:///test"
    )


def virtual_dataset(arrays: dict[str, ManifestArray]) -> xr.Dataset:
    """A fully virtual dataset of these arrays, built through ManifestStore."""
    return manifest_store(arrays).to_virtual_dataset(loadable_variables=[])


def read_manifest_array(marr: ManifestArray) -> np.ndarray:
    """Every value of ``marr``, read through ManifestStore by zarr."""
    store = manifest_store({"a": marr})
    return np.asarray(zarr.open_array(store, path="a", mode="r", zarr_format=3)[...])


def icechunk_repo(repo_dir: Path, data_dir: Path) -> Any:
    """A local Icechunk repository whose virtual chunk container covers ``data_dir``."""
    import icechunk

    prefix = file_url(data_dir) + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data_dir)))
    )
    credentials = icechunk.containers_credentials(
        {prefix: icechunk.credentials.LocalFileSystemAccess}
    )
    return icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(repo_dir)),
        config,
        authorize_virtual_chunk_access=credentials,
    )


def icechunk_write(repo: Any, vds: xr.Dataset, **kwargs: Any) -> None:
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(
        vds,
        session.store,
        last_updated_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5),
        **kwargs,
    )
    session.commit("write")


def icechunk_read(repo: Any) -> xr.Dataset:
    session = repo.readonly_session("main")
    return xr.open_zarr(session.store, consolidated=False, zarr_format=3).load()


def kerchunk_read(refs_location: Any) -> xr.Dataset:
    """Open kerchunk references (dict, JSON path or parquet directory) with fsspec."""
    import fsspec
    from zarr.storage import FsspecStore

    fs = fsspec.filesystem("reference", fo=refs_location, remote_protocol="file", asynchronous=True)
    store = FsspecStore(fs, read_only=True, path="")
    return xr.open_zarr(store, consolidated=False, zarr_format=3).load()


# --------------------------------------------------------------------------- pytest fixture



@pytest.fixture(scope="session")
def concat_fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files of ``fixtures/make_concat_fixtures.py``, written once per session."""
    return make_concat_fixtures.make_concat_fixtures(tmp_path_factory.mktemp("concat-fixtures"))


def worker_state(ds: xr.Dataset) -> xr.Dataset:
    """``preprocess`` hook recording, in the dataset, the process that opened it."""
    import os

    return ds.assign_attrs(
        opened_in_pid=os.getpid(),
        rectilinear_flag=bool(zarr.config.get("array.rectilinear_chunks", False)),
        array_type=type(ds[next(iter(ds.data_vars))].data).__name__,
    )


# --------------------------------------------------------------------------- round-trip cases

#: Combinations written to Icechunk and kerchunk and read back.
ROUND_TRIP_CASES = [
    "tiff-strips-along-y",
    "tiff-zlib-stacked",
    "tiff-tiles-along-x",
    "hdf5-first-axis",
    "hdf5-inner-axis",
    "hdf5-stacked-with-fill",
]


def round_trip_case(fx: dict[str, Path], case: str) -> tuple[xr.Dataset, str, np.ndarray]:
    """A combined virtual dataset, its variable, and the native reads combined by numpy."""

    def tiffs(names: list[str]) -> tuple[list[xr.Dataset], list[np.ndarray]]:
        vds = [virtual_dataset({"band": tiff_manifest_array(fx[n])}) for n in names]
        return vds, [native_tiff(fx[n]) for n in names]

    def h5(names: list[str]) -> tuple[list[xr.Dataset], list[np.ndarray]]:
        vds = [virtual_dataset({"data": hdf5_manifest_array(fx[n])}) for n in names]
        return vds, [native_hdf5(fx[n]) for n in names]

    if case == "tiff-strips-along-y":
        vds, natives = tiffs(["strip_padded_0", "strip_short_1", "strip_padded_2"])
        return xr.concat(vds, dim="y"), "band", np.concatenate(natives)
    if case == "tiff-zlib-stacked":
        vds, natives = tiffs(["strip_short_zlib_0", "strip_padded_zlib_1", "strip_short_zlib_2"])
        return xr.concat(vds, dim="t"), "band", np.stack(natives)
    if case == "tiff-tiles-along-x":
        vds, natives = tiffs(["tiled_0", "tiled_1"])
        return xr.concat(vds, dim="x"), "band", np.concatenate(natives, axis=1)
    if case == "hdf5-first-axis":
        vds, natives = h5([f"chunked_gzip_{k}" for k in range(3)])
        return xr.concat(vds, dim="t"), "data", np.concatenate(natives)
    if case == "hdf5-inner-axis":
        vds, natives = h5([f"chunked_{k}" for k in range(3)])
        return xr.concat(vds, dim="y"), "data", np.concatenate(natives, axis=1)
    if case == "hdf5-stacked-with-fill":
        vds, natives = h5([f"chunked_fill_{k}" for k in range(2)])
        return xr.concat(vds, dim="s"), "data", np.stack(natives)
    raise ValueError(f"unknown case {case!r}")
