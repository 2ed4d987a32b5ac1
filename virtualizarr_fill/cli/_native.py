"""The native readers ``verify`` compares the store with, each reading a file the way the
field reads it, block by block, locally or through obstore:

* TIFF/GeoTIFF: rioxarray (GDAL): the image decoded by xarray's CF rules from the
  nodata value, scale and offset GDAL reports, as xarray decodes the store's
  ``_FillValue``, ``scale_factor`` and ``add_offset``; the image's ``x``, ``y`` and
  ``band`` coordinates; GDAL's mask band (``read_masks``) for a multiscale level's
  ``mask``. An overview is GDAL's overview of that level, an IFD other than the first
  GDAL's ``GTIFF_DIR`` (local files only).
* netCDF-4: xarray's h5netcdf backend, CF-decoded.
* other HDF5 files, and netCDF-4 files h5netcdf cannot open: h5py, raw values (the store
  is then read raw as well).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from virtualizarr_fill.cli._destinations import import_optional
from virtualizarr_fill.cli._inputs import local_path
from virtualizarr_fill.io.registries import registry_for

__all__ = [
    "TIFF_NATIVE",
    "NativeFile",
    "NativeVariable",
    "open_native",
]

#: The variables of a TIFF dataset a native reader has a counterpart of.
TIFF_NATIVE = frozenset({"band_data", "band", "x", "y", "mask"})


@dataclass(frozen=True)
class NativeVariable:
    """One variable as a native reader returns it."""

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    itemsize: int
    #: The reader's own block (strip, tile, HDF5 chunk): reads are aligned to it.
    block: tuple[int, ...]
    read: Callable[[tuple[slice, ...]], np.ndarray]
    #: How the file encodes it (``scale_factor``, ``units``, ...), for decoded values.
    encoding: Mapping[str, Any] = field(default_factory=dict)


class NativeFile:
    """A file opened by its native reader; ``decoded`` says whether its values are
    CF-decoded (compare with the store decoded) or raw."""

    def __init__(self, reader: str, decoded: bool) -> None:
        self.reader = reader
        self.decoded = decoded
        self._variables: dict[str, NativeVariable] = {}
        self._raw: dict[str, NativeVariable] = {}

    def add(self, name: str, variable: NativeVariable) -> None:
        self._variables[name] = variable

    def add_raw(self, name: str, variable: NativeVariable) -> None:
        self._raw[name] = variable

    def variable(self, name: str) -> NativeVariable | None:
        """The variable as the reader returns it (decoded when ``decoded``)."""
        return self._variables.get(name)

    def raw_variable(self, name: str) -> NativeVariable | None:
        """The variable's raw values, where the reader of decoded values has them."""
        return self._raw.get(name)


class _ObjectFile(io.RawIOBase):
    """A seekable file over obstore's buffered object reader, returning ``bytes``.

    h5py, h5netcdf and GDAL's Python opener need ``bytes`` from ``read``; obstore's
    reader returns its own buffer type. Unlike :class:`~virtualizarr_fill.io.files.StoreFile`
    it keeps no cache, so reading a whole large file stays within the reader's buffer.
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


def _object_file(url: str) -> io.BufferedReader:
    import obstore

    store, path = registry_for([url]).resolve(url)
    return io.BufferedReader(_ObjectFile(obstore.open_reader(store, str(path))))


def _values_of(array: Any) -> Callable[[tuple[slice, ...]], np.ndarray]:
    """A reader of selections of an xarray Variable, an h5py Dataset or an array."""

    def read(selection: tuple[slice, ...]) -> np.ndarray:
        return np.asarray(getattr(array[selection], "values", array[selection]))

    return read


def _source(url: str, stack: contextlib.ExitStack) -> Any:
    """What a native reader opens: the path of a local file, else a file object."""
    local = local_path(url)
    if local is not None:
        return str(local)
    return stack.enter_context(_object_file(url))


# --------------------------------------------------------------------------- TIFF


def _raster_name(url: str, ifd: int, overview: int | None) -> tuple[str, dict[str, Any]]:
    """The name GDAL opens the image by, and the options of ``rasterio.open``."""
    options: dict[str, Any] = {}
    if overview is not None:
        options["overview_level"] = overview
    local = local_path(url)
    if local is not None:
        # GTIFF_DIR counts the main IFD chain from 1.
        return (f"GTIFF_DIR:{ifd + 1}:{local}" if ifd else str(local)), options
    if ifd:
        raise OSError(f"GDAL opens IFD {ifd} of local files only")

    def opener(path: str, mode: str = "rb") -> io.BufferedReader:
        # GDAL asks for side-car files (.msk, .aux.xml) too; the object has none.
        if path != url:
            raise FileNotFoundError(path)
        return _object_file(url)

    options["opener"] = opener
    return url, options


def _decoded_image(image: Any) -> Any:
    """The image's variable decoded by xarray's CF rules from the nodata value, scale and
    offset GDAL reports (rioxarray's ``mask_and_scale=True`` would also apply GDAL's
    mask band, which the store holds as its own ``mask`` variable, not as a fill)."""
    import xarray as xr

    variable = image.variable.copy(deep=False)
    attrs = dict(variable.attrs)
    # GDAL reports scale 1 and offset 0 for bands without them: no scaling.
    if attrs.get("scale_factor") == 1.0:
        attrs.pop("scale_factor")
    if attrs.get("add_offset") == 0.0:
        attrs.pop("add_offset")
    variable.attrs = attrs
    return xr.conventions.decode_cf_variable("band_data", variable)


def _tiff(url: str, ifd: int, overview: int | None, stack: contextlib.ExitStack) -> NativeFile:
    import_optional("rioxarray", "geo")
    import rasterio
    import rioxarray
    import xarray as xr
    from rasterio.windows import Window

    name, options = _raster_name(url, ifd, overview)
    # No directory listing: a file's side-cars are not what the store references.
    stack.enter_context(rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR"))
    raster = stack.enter_context(rasterio.open(name, **options))
    image = rioxarray.open_rasterio(name, mask_and_scale=False, cache=False, lock=False, **options)
    assert isinstance(image, xr.DataArray)  # one image, not subdatasets
    stack.callback(image.close)
    native = NativeFile("rioxarray", True)
    height, width = raster.block_shapes[0]
    variable = _decoded_image(image)
    native.add(
        "band_data",
        NativeVariable(
            tuple(str(d) for d in variable.dims),
            variable.shape,
            variable.dtype.itemsize,
            (1, height, width),
            _values_of(variable),
        ),
    )
    for coordinate in ("band", "x", "y"):
        if coordinate in image.coords:
            values = np.asarray(image.coords[coordinate].values)
            native.add(
                coordinate,
                NativeVariable(
                    (coordinate,),
                    values.shape,
                    values.dtype.itemsize,
                    values.shape,
                    _values_of(values),
                ),
            )

    def mask(selection: tuple[slice, ...]) -> np.ndarray:
        rows, cols = selection
        # GDAL: 0 where no data, 255 where valid; the store's mask: 0 where no data.
        window = Window.from_slices(rows, cols, height=raster.height, width=raster.width)
        return (raster.read_masks(1, window=window) != 0).astype(np.uint8)

    native.add(
        "mask",
        NativeVariable(("y", "x"), (raster.height, raster.width), 1, (height, width), mask),
    )
    return native


# --------------------------------------------------------------------------- HDF5


def _is_netcdf(group: Any) -> bool:
    """Whether an HDF5 file is netCDF-4: netCDF-C (4.4 on) and h5netcdf write
    ``_NCProperties``; older files have netCDF's dimension attributes."""
    if "_NCProperties" in group.file.attrs:
        return True
    for name in group:
        item = group.get(name)  # None for a dangling link
        if item is not None and ("_Netcdf4Dimid" in item.attrs or "DIMENSION_LIST" in item.attrs):
            return True
    return False


def _xarray_variables(native: NativeFile, dataset: Any) -> None:
    for name, variable in dataset.variables.items():
        chunks = variable.encoding.get("chunksizes") or variable.shape
        native.add(
            str(name),
            NativeVariable(
                tuple(str(d) for d in variable.dims),
                variable.shape,
                variable.dtype.itemsize,
                tuple(chunks),
                _values_of(variable),
                dict(variable.encoding),
            ),
        )


def _h5py_variables(
    add: Callable[[str, NativeVariable], None], group: Any, dims: dict[str, tuple[str, ...]]
) -> None:
    import h5py

    for name, file_dims in dims.items():
        dataset = group.get(name)
        if not isinstance(dataset, h5py.Dataset) or dataset.shape is None:
            continue
        if len(file_dims) != dataset.ndim:
            continue
        add(
            name,
            NativeVariable(
                file_dims,
                dataset.shape,
                dataset.dtype.itemsize,
                dataset.chunks or dataset.shape,
                _values_of(dataset),
            ),
        )


def _hdf5(
    url: str, group_path: str | None, dims: dict[str, tuple[str, ...]], stack: contextlib.ExitStack
) -> NativeFile:
    import h5py

    source = _source(url, stack)
    file = stack.enter_context(h5py.File(source, "r"))
    group = file[group_path] if group_path else file
    if _is_netcdf(group):
        import xarray as xr

        if not isinstance(source, str):
            source.seek(0)
        try:
            dataset = xr.open_dataset(
                source, engine="h5netcdf", group=group_path, cache=False, chunks=None
            )
        except Exception:  # a netCDF-4 file h5netcdf cannot read: compare raw values
            dataset = None
        if dataset is not None:
            stack.callback(dataset.close)
            native = NativeFile("xarray (h5netcdf)", True)
            _xarray_variables(native, dataset)
            raw_dims = {str(n): tuple(map(str, v.dims)) for n, v in dataset.variables.items()}
            _h5py_variables(native.add_raw, group, raw_dims)
            return native
    native = NativeFile("h5py", False)
    _h5py_variables(native.add, group, dims)
    return native


# --------------------------------------------------------------------------- opening


@contextlib.contextmanager
def open_native(
    url: str,
    is_tiff: bool,
    *,
    tiff_ifd: int = 0,
    overview: int | None = None,
    hdf5_group: str | None = None,
    dims: dict[str, tuple[str, ...]] | None = None,
) -> Iterator[NativeFile]:
    """The file opened by its native reader (see the module docstring).

    Parameters
    ----------
    url
        The file.
    is_tiff
        A TIFF file (else HDF5).
    tiff_ifd, overview
        TIFF: the IFD the store holds, or the overview level (0: the first overview).
    hdf5_group
        HDF5: the group the store holds (default: the root).
    dims
        HDF5: the parser's dimensions of each variable, for h5py's unnamed axes.
    """
    with contextlib.ExitStack() as stack:
        if is_tiff:
            native = _tiff(url, tiff_ifd, overview, stack)
        else:
            native = _hdf5(url, hdf5_group, dims or {}, stack)
        yield native
