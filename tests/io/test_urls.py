"""One URL normaliser and one registry lookup for both formats (io/urls.py, io/registries.py)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile
import virtualizarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore, MemoryStore

from tests._manifest_builders import local_registry, read_manifest_array
from virtualizarr_fill import HDF5Parser, TIFFParser, UnregisteredURLError
from virtualizarr_fill.io.registries import resolve
from virtualizarr_fill.io.urls import normalize_url


def _urls(vds) -> set[str]:
    return {str(u) for u in np.unique(vds["data"].data.manifest._paths) if u}


def _inputs(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    directory = tmp_path / "a+b 100%"
    directory.mkdir()
    values = np.arange(24, dtype="u2").reshape(4, 6)
    tif, h5 = directory / "x.tif", directory / "x.h5"
    tifffile.imwrite(tif, values, rowsperstrip=3)
    with h5py.File(h5, "w") as f:
        f.create_dataset("data", data=values, chunks=(3, 6))
    return tif, h5, values


@pytest.mark.parametrize("given", ["path", "as_uri"])
def test_both_parsers_write_the_same_decoded_url(tmp_path: Path, given: str) -> None:
    """A bare path (or VirtualiZarr's percent-encoded URI of it) of a file whose directory
    holds ``+``, a space and ``%``: TIFF and HDF5 manifests hold the same decoded
    ``file://`` URL, and the values read through it are the native readers'."""
    tif, h5, values = _inputs(tmp_path)
    opened = {}
    for path, parser in ((tif, TIFFParser()), (h5, HDF5Parser())):
        url = str(path) if given == "path" else path.as_uri()
        vds = virtualizarr.open_virtual_dataset(url, registry=local_registry(), parser=parser)
        if "data" not in vds:
            vds = vds.rename({next(iter(vds.data_vars)): "data"})
        assert _urls(vds) == {"file://" + str(path)}
        opened[path.suffix] = read_manifest_array(vds["data"].data)
    np.testing.assert_array_equal(opened[".tif"].squeeze(), tifffile.imread(tif))
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(opened[".h5"], f["data"][...])
    np.testing.assert_array_equal(opened[".h5"], values)


def test_normalize_url_rules(tmp_path: Path) -> None:
    assert normalize_url("/data/a+b.tif") == "file:///data/a+b.tif"
    assert normalize_url("file:///data/a%2Bb.tif") == "file:///data/a+b.tif"
    assert normalize_url("s3://bucket/a%2Bb.tif") == "s3://bucket/a%2Bb.tif"
    kept = tmp_path / "100%cotton"
    kept.mkdir()
    assert normalize_url("file://" + str(kept)) == "file://" + str(kept)
    with pytest.raises(ValueError, match=r"^relative/a\.tif: a relative path; the parsers take"):
        normalize_url("relative/a.tif")


def test_resolve_names_the_registered_prefixes() -> None:
    """The parsers and the read path share one resolve, and its one error."""
    registry = ObjectStoreRegistry({"s3://bucket": MemoryStore()})
    with pytest.raises(UnregisteredURLError, match=r"s3://other/a\.tif: .*registered: s3://bucket"):
        resolve(registry, "s3://other/a.tif")


def test_resolve_strips_the_store_prefix(tmp_path: Path) -> None:
    """A store with its own prefix: the path inside it, as VirtualiZarr's ManifestStore
    reads chunks (the file is parsed from the object its chunks are read from)."""
    store = LocalStore(tmp_path)
    registry = ObjectStoreRegistry({"file://" + str(tmp_path): store})
    found, path = resolve(registry, "file://" + str(tmp_path / "sub" / "x.tif"))
    assert found is store and path == "sub/x.tif"
