"""Installing or importing virtualizarr-fill changes nothing for code that does not use it.

* zarr used alone (creating, writing, reading arrays) imports no module of it: its
  codecs load by entry point only when an array names them, and it declares no codec
  pipeline entry point (zarr would import every one at its first array);
* importing it (or having zarr load its codecs by entry point) replaces no object of any
  zarr, VirtualiZarr, xarray or h5py module, changes no zarr setting, and loads none of
  the heavy libraries;
* using it (parsing, combining, writing, reading, inside every context manager it
  exports) replaces nothing either;
* VirtualiZarr's own arrays (HDFParser's) combine exactly as where the package is not
  installed;
* stores built from files that need no edge codec read back in an environment where the
  package is not installed.

Processes "without" the package use this virtual environment's site-packages minus this
project (``tests/_environments.py``): the same zarr, VirtualiZarr and xarray.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile

from tests._environments import run_python, site_with_checkout, site_without_project

# --------------------------------------------------------------------------- snapshots

#: Collects every function, class and descriptor reachable as an attribute of a module of
#: these packages, or of a class defined in one, keyed by where it is found, as ``id``s
#: (run in a subprocess). Other module state (locks, event loops, caches) is the
#: libraries' own to change.
_SNAPSHOT = r"""
import importlib, pkgutil, sys, warnings, json
warnings.simplefilter("ignore")
PACKAGES = ("zarr", "virtualizarr", "xarray", "h5py", "numcodecs")

def import_all():
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            if ".tests" in info.name or ".testing" in info.name or "conftest" in info.name:
                continue
            try:
                importlib.import_module(info.name)
            except Exception:
                pass

import types
KINDS = (types.FunctionType, types.BuiltinFunctionType, type, property, staticmethod,
         classmethod, types.MethodType)

def snapshot():
    found = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith(PACKAGES):
            continue
        if module_name.split(".")[0] not in PACKAGES:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, KINDS) or callable(value):
                found[f"{module_name}:{attr}"] = id(value)
            if isinstance(value, type) and value.__module__ == module_name:
                for name, member in list(vars(value).items()):
                    if isinstance(member, KINDS) or callable(member):
                        found[f"{module_name}:{attr}.{name}"] = id(member)
    return found

def config():
    import zarr
    return json.loads(json.dumps(zarr.config.config, default=str))

def compare(before, after, when):
    replaced = sorted(k for k in before if k in after and before[k] != after[k])
    return {"when": when, "replaced": replaced}
"""


def _run(body: str, tmp_path: Path, **kwargs: object) -> dict:
    """Run ``body`` after the snapshot helpers, with this checkout installed (not the
    shared environment's install, which may be of another checkout)."""
    code = _SNAPSHOT + textwrap.dedent(body)
    kwargs.setdefault("without_project", site_with_checkout(tmp_path / "site-checkout"))
    result = run_python(code, cwd=tmp_path, **kwargs)  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_replaces_nothing_and_loads_nothing_heavy(tmp_path: Path) -> None:
    outcome = _run(
        """
        import_all()
        before, settings = snapshot(), config()
        heavy = ("tifffile", "imagecodecs", "virtualizarr_fill.tiff", "virtualizarr_fill.hdf5")
        loaded_before = {m for m in sys.modules if m.startswith(heavy)}
        import virtualizarr_fill
        after = snapshot()
        loaded = sorted({m for m in sys.modules if m.startswith(heavy)} - loaded_before)
        print(json.dumps({**compare(before, after, "import"), "loaded": loaded,
                          "settings_changed": config() != settings}))
        """,
        tmp_path,
    )
    assert outcome["replaced"] == []
    assert outcome["loaded"] == []
    assert not outcome["settings_changed"]


def test_the_import_alone_loads_no_zarr_xarray_or_virtualizarr(tmp_path: Path) -> None:
    code = (
        "import sys, json\n"
        "import virtualizarr_fill\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('zarr', 'xarray', 'virtualizarr', 'h5py', 'tifffile', 'numpy', 'imagecodecs'))))"
    )
    result = run_python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_codec_entry_points_load_light_and_replace_nothing(tmp_path: Path) -> None:
    """zarr loads every ``zarr.codecs`` entry point at its first codec lookup, which
    imports the codec modules of virtualizarr-fill-codecs in any process where it is
    installed."""
    outcome = _run(
        """
        import_all()
        before, settings = snapshot(), config()
        heavy = ("imagecodecs", "tifffile", "cv2")
        loaded_before = {m for m in sys.modules if m.startswith(heavy)}
        import zarr
        from zarr.registry import get_codec_class
        zarr.create_array(store={}, shape=(4,), dtype="u1")
        assert get_codec_class("virtualizarr_fill.truncate").__module__ == (
            "virtualizarr_fill_codecs.truncate")
        ours = sorted(m for m in sys.modules if m.startswith("virtualizarr_fill"))
        after = snapshot()
        print(json.dumps({**compare(before, after, "entry points"), "ours": ours,
                          "settings_changed": config() != settings,
                          "heavy": sorted({m for m in sys.modules if m.startswith(heavy)}
                                          - loaded_before)}))
        """,
        tmp_path,
    )
    assert outcome["replaced"] == []
    assert not outcome["settings_changed"]
    assert "virtualizarr_fill_codecs.truncate" in outcome["ours"]
    # The codec distribution registers them: zarr loads them without virtualizarr-fill's
    # re-exports (its read pipeline, a `zarr.codec_pipeline` entry point, is loaded too).
    assert not any(m.startswith(("virtualizarr_fill.codecs", "virtualizarr_fill.tiff",
                                 "virtualizarr_fill.hdf5", "virtualizarr_fill.manifests"))
                   for m in outcome["ours"]), outcome["ours"]
    assert outcome["heavy"] == []


def _short_strip_tiffs(
    directory: Path, count: int = 3, compression: str | None = None
) -> list[Path]:
    """Strip TIFFs of 25 rows in strips of 10, the last strip stored short (as libtiff and
    GDAL write it)."""
    rng = np.random.default_rng(7)
    paths = []
    for i in range(count):
        path = directory / f"short_{i}.tif"
        tifffile.imwrite(
            path,
            rng.integers(0, 60000, (25, 16), dtype=np.uint16),
            rowsperstrip=10,
            compression=compression,
            metadata=None,
        )
        paths.append(path)
    return paths


def test_using_the_package_replaces_nothing(tmp_path: Path) -> None:
    paths = _short_strip_tiffs(tmp_path)
    files = json.dumps([str(p) for p in paths])
    outcome = _run(
        f"""
        import_all()
        before = snapshot()
        import contextlib, inspect
        import numpy as np, xarray as xr, tifffile, icechunk, zarr
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import LocalStore
        from virtualizarr import open_virtual_dataset, open_virtual_mfdataset
        import virtualizarr_fill
        from virtualizarr_fill import TIFFParser, HDF5Parser
        registry = ObjectStoreRegistry({{"file://": LocalStore()}})
        files = {files}
        vds = open_virtual_mfdataset(["file://" + f for f in files], registry=registry,
            parser=TIFFParser(), combine="nested", concat_dim="y", coords="minimal",
            compat="override", combine_attrs="drop_conflicts")
        storage = icechunk.in_memory_storage()
        config = icechunk.RepositoryConfig.default()
        prefix = "file://" + {str(tmp_path)!r} + "/"
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
            prefix, icechunk.local_filesystem_store({str(tmp_path)!r})))
        repo = icechunk.Repository.create(storage, config,
            authorize_virtual_chunk_access=icechunk.containers_credentials(
                {{prefix: icechunk.credentials.LocalFileSystemAccess}}))
        session = repo.writable_session("main")
        virtualizarr_fill.to_icechunk(vds, session.store)
        session.commit("x")
        virtualizarr_fill.to_kerchunk(vds)
        reopened = xr.open_zarr(repo.readonly_session("main").store, consolidated=False)
        read = reopened.band_data.values
        expected = np.concatenate([tifffile.imread(f) for f in files])
        assert np.array_equal(read[0], expected)
        used = snapshot()
        # Every context manager the package exports, entered around a concatenation and
        # reads of a ManifestStore and of the Icechunk store.
        managers = sorted(name for name in virtualizarr_fill.__all__
                          if inspect.isgeneratorfunction(
                              getattr(getattr(virtualizarr_fill, name), "__wrapped__", None)))
        arguments = {{"fill_conflicts": ("use_first",)}}
        inside = {{}}
        for name in managers:
            with getattr(virtualizarr_fill, name)(*arguments.get(name, ())):
                xr.concat([vds, vds], dim="y", coords="minimal", compat="override")
                store = TIFFParser()("file://" + files[0], registry)
                assert np.array_equal(zarr.open_group(store, mode="r")["band_data"][0],
                                      tifffile.imread(files[0]))
                assert np.array_equal(xr.open_zarr(repo.readonly_session("main").store,
                    consolidated=False).band_data.values[0], expected)
                inside[name] = compare(before, snapshot(), name)["replaced"]
        after = snapshot()
        print(json.dumps({{"used": compare(before, used, "use")["replaced"],
                          "managers": managers, "inside": inside,
                          "after": compare(before, after, "after")["replaced"]}}))
        """,
        tmp_path,
    )
    assert outcome["used"] == []
    assert outcome["after"] == []
    assert outcome["managers"] == ["fast_reads", "fill_conflicts", "use_manifest_pipeline"]
    assert outcome["inside"] == {name: [] for name in outcome["managers"]}


def test_zarr_alone_imports_nothing_of_the_package(tmp_path: Path) -> None:
    """With the package installed as this checkout declares it, a process that uses zarr
    and never imports the package (creates a group and arrays, writes, reopens, reads)
    finds none of its modules loaded: a zarr release that renames what the package
    imports cannot break zarr for everyone who has it installed."""
    code = textwrap.dedent(
        """
        import importlib.metadata, importlib.util, json, sys
        import numpy as np, zarr
        installed = importlib.util.find_spec("virtualizarr_fill") is not None
        codecs = [e.name for e in importlib.metadata.entry_points(group="zarr.codecs")
                  if e.value.startswith("virtualizarr_fill")]
        values = np.arange(24, dtype="i2").reshape(6, 4)
        group = zarr.open_group("data.zarr", mode="w")
        group.create_array("a", shape=(6, 4), chunks=(3, 2), dtype="i2")[...] = values
        zarr.create_array(store={}, shape=(4,), dtype="u1")[:] = 7
        reread = zarr.open_group("data.zarr", mode="r")["a"][...]
        assert np.array_equal(reread, values)
        print(json.dumps({"installed": installed, "codecs": codecs,
                          "ours": sorted(m for m in sys.modules
                                         if m.split(".")[0] == "virtualizarr_fill")}))
        """
    )
    result = run_python(code, cwd=tmp_path, without_project=site_with_checkout(tmp_path / "s"))
    assert result.returncode == 0, result.stderr[-4000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["installed"]
    assert "virtualizarr_fill.truncate" in outcome["codecs"]
    assert outcome["ours"] == []


# --------------------------------------------------------------------------- peers


def _netcdf_pair(directory: Path) -> list[Path]:
    """Two netCDF-4 files whose variables differ in their _FillValue."""
    paths = []
    for i, fill in enumerate([-9999.0, -1.0]):
        path = directory / f"fill_{i}.nc"
        with h5py.File(path, "w") as f:
            data = f.create_dataset(
                "v", data=np.arange(12, dtype="f4").reshape(4, 3) + i, chunks=(2, 3), fillvalue=fill
            )
            data.attrs["_FillValue"] = np.float32(fill)
        paths.append(path)
    return paths


_CONCAT_PEER = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset
from virtualizarr.parsers import HDFParser
if USE_OURS:
    import virtualizarr_fill
    from virtualizarr_fill import HDF5Parser, TIFFParser
registry = ObjectStoreRegistry({"file://": LocalStore()})
datasets = [open_virtual_dataset("file://" + p, registry=registry, parser=HDFParser())
            for p in PATHS]
if USE_OURS:  # our parser used in the same process
    open_virtual_dataset("file://" + PATHS[0], registry=registry, parser=HDF5Parser())
outcome = {}
try:
    combined = xr.concat(datasets, dim="phony_dim_0", coords="minimal", compat="override")
    data = combined["v"].data
    outcome = {"type": type(data).__name__, "metadata": data.metadata.to_dict(),
               "manifest": {k: dict(v) for k, v in data.manifest.dict().items()},
               "attrs": {k: str(v) for k, v in combined["v"].attrs.items()}}
except Exception as error:
    outcome = {"error": type(error).__name__, "message": str(error)}
print(json.dumps(outcome, default=str))
"""


def test_virtualizarr_arrays_concatenate_as_without_the_package(tmp_path: Path) -> None:
    paths = json.dumps([str(p) for p in _netcdf_pair(tmp_path)])
    without = site_without_project(tmp_path / "site")
    outcomes = []
    for use_ours, folder in [(False, without), (True, None)]:
        code = f"USE_OURS = {use_ours}\nPATHS = {paths}\n" + _CONCAT_PEER
        result = run_python(code, cwd=tmp_path, without_project=folder)
        assert result.returncode == 0, result.stderr[-4000:]
        outcomes.append(json.loads(result.stdout.strip().splitlines()[-1]))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0].get("type") == "ManifestArray", outcomes[0]


# --------------------------------------------------------------------------- portable stores

_READ_WITHOUT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
try:
    import virtualizarr_fill  # noqa: F401
    sys.exit("virtualizarr_fill is importable")
except ImportError:
    pass
import numpy as np, xarray as xr, icechunk
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(REPO),
    authorize_virtual_chunk_access=icechunk.containers_credentials(
        {PREFIX: icechunk.credentials.LocalFileSystemAccess}))
ds = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3)
values = ds[NAME].values
np.save(OUT, values)
print(json.dumps({"codecs": [c.to_dict()["name"] for c in ds[NAME].encoding.get("codecs", [])]}))
"""


def _write_icechunk(vds: object, repo_dir: Path, data_dir: Path) -> str:
    import icechunk

    import virtualizarr_fill

    prefix = f"file://{data_dir}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data_dir)))
    )
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(repo_dir)),
        config,
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    session = repo.writable_session("main")
    virtualizarr_fill.to_icechunk(vds, session.store)  # type: ignore[arg-type]
    session.commit("build")
    return prefix


def _read_in_a_process_without_the_package(
    tmp_path: Path, repo_dir: Path, prefix: str, name: str
) -> np.ndarray:
    out = tmp_path / "read.npy"
    code = f"REPO = {str(repo_dir)!r}\nPREFIX = {prefix!r}\nNAME = {name!r}\nOUT = {str(out)!r}\n"
    result = run_python(
        code + _READ_WITHOUT,
        cwd=tmp_path,
        without_project=site_without_project(tmp_path / "site"),
        env={"ZARR_ARRAY__RECTILINEAR_CHUNKS": "True"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return np.load(out)


@pytest.mark.parametrize("compression", [None, "zlib", "lzw"])
def test_short_strip_mosaic_reads_without_the_package(
    tmp_path: Path, compression: str | None
) -> None:
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_mfdataset

    from virtualizarr_fill import TIFFParser

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    paths = _short_strip_tiffs(data_dir, compression=compression)
    vds = open_virtual_mfdataset(
        [f"file://{p}" for p in paths],
        registry=ObjectStoreRegistry({"file://": LocalStore()}),
        parser=TIFFParser(),
        combine="nested",
        concat_dim="y",
        coords="minimal",
        compat="override",
        combine_attrs="drop_conflicts",
    )
    codecs = [c.to_dict()["name"] for c in vds.band_data.data.metadata.codecs]
    assert not any(name.startswith("virtualizarr_fill") for name in codecs), codecs
    prefix = _write_icechunk(vds, tmp_path / "repo", data_dir)
    read = _read_in_a_process_without_the_package(tmp_path, tmp_path / "repo", prefix, "band_data")
    expected = np.concatenate([tifffile.imread(p) for p in paths])
    np.testing.assert_array_equal(read[0], expected, strict=True)
    assert isinstance(vds, xr.Dataset)


def test_chunk_multiple_hdf5_series_reads_without_the_package(tmp_path: Path) -> None:
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_mfdataset

    from virtualizarr_fill import HDF5Parser

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rng = np.random.default_rng(11)
    paths, parts = [], []
    for i in range(3):
        path = data_dir / f"t{i}.nc"
        part = rng.normal(size=(8, 5, 6)).astype("f4")
        with h5py.File(path, "w") as f:
            f.create_dataset("v", data=part, chunks=(4, 5, 6), compression="gzip", shuffle=True)
        paths.append(path)
        parts.append(part)
    vds = open_virtual_mfdataset(
        [f"file://{p}" for p in paths],
        registry=ObjectStoreRegistry({"file://": LocalStore()}),
        parser=HDF5Parser(),
        combine="nested",
        concat_dim="phony_dim_0",
        coords="minimal",
        compat="override",
    )
    assert isinstance(vds, xr.Dataset)
    codecs = [c.to_dict()["name"] for c in vds.v.data.metadata.codecs]
    assert not any(name.startswith("virtualizarr_fill") for name in codecs), codecs
    prefix = _write_icechunk(vds, tmp_path / "repo", data_dir)
    read = _read_in_a_process_without_the_package(tmp_path, tmp_path / "repo", prefix, "v")
    np.testing.assert_array_equal(read, np.concatenate(parts), strict=True)


def test_environment_without_the_package_is_what_it_says(tmp_path: Path) -> None:
    """The "without" environment has the same libraries, and no trace of this package."""
    code = (
        "import importlib.metadata as md, json, zarr, virtualizarr, xarray\n"
        "eps = [e.value for g in ('zarr.codecs', 'zarr.codec_pipeline') "
        "for e in md.entry_points(group=g)]\n"
        "try:\n    import virtualizarr_fill\n    found = True\nexcept ImportError:\n"
        "    found = False\n"
        "print(json.dumps({'ours': [e for e in eps if 'virtualizarr_fill' in e], 'found': found,"
        "'versions': [zarr.__version__, virtualizarr.__version__, xarray.__version__]}))"
    )
    result = run_python(code, cwd=tmp_path, without_project=site_without_project(tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    import virtualizarr
    import xarray
    import zarr

    assert outcome == {
        "ours": [],
        "found": False,
        "versions": [zarr.__version__, virtualizarr.__version__, xarray.__version__],
    }
    assert os.environ.get("PYTHONPATH", "") == "" or "virtualizarr" not in os.environ["PYTHONPATH"]
