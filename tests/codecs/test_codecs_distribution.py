"""The codec distribution (``codecs/``, ``virtualizarr-fill-codecs``) stands on its own.

* its modules import nothing of virtualizarr-fill, only numpy, zarr and imagecodecs;
* it alone registers every codec name a store of ours may hold, under the names the
  codec classes write;
* in a bare virtual environment holding its wheel, zarr, icechunk, xarray and numpy from
  the package index (and neither virtualizarr-fill nor VirtualiZarr), the stores the
  command line writes (a GeoTIFF mosaic of padded tiles: ``crop``; a netCDF-4 series of
  padded chunks: ``truncate``; a complex SAR file: ``complex_int``) read through Icechunk
  and kerchunk JSON equal to the native readers.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import h5py
import numpy as np
import pytest

from tests._native_references import rasterio_merge
from tests._padded_inputs import padded_series, padded_tiles
from virtualizarr_fill.cli import EXIT_OK, main

ROOT = Path(__file__).resolve().parents[2]
CODECS = ROOT / "codecs"
CODEC_SOURCES = CODECS / "src" / "virtualizarr_fill_codecs"
ALLOWED_ROOTS = {"numpy", "zarr", "imagecodecs", "virtualizarr_fill_codecs"}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_codec_distribution_imports_only_numpy_zarr_and_imagecodecs() -> None:
    sources = sorted(CODEC_SOURCES.glob("*.py"))
    assert len(sources) >= 10, sources
    outside = {
        f"{path.name}: {root}"
        for path in sources
        for root in _imported_roots(path)
        if root not in ALLOWED_ROOTS and root not in sys.stdlib_module_names
    }
    assert outside == set()
    # The scan sees the imports it must refuse (the shims re-exporting the codecs).
    assert "virtualizarr_fill_codecs" in _imported_roots(ROOT / "virtualizarr_fill/errors.py")


def _entry_points(pyproject: Path) -> dict[str, str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    return dict(project.get("entry-points", {}).get("zarr.codecs", {}))


def test_the_codec_distribution_alone_registers_every_codec_name() -> None:
    from virtualizarr_fill_codecs import CODEC_NAMES

    registered = _entry_points(CODECS / "pyproject.toml")
    assert set(registered) == CODEC_NAMES
    assert _entry_points(ROOT / "pyproject.toml") == {}
    for name, target in registered.items():
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        assert module_name.startswith("virtualizarr_fill_codecs.")
        constants = [v for k, v in vars(module).items() if k.endswith("_CODEC_NAME")]
        assert constants == [name], (target, constants)
        codec_class = getattr(module, attribute)
        # The class users import from virtualizarr-fill is the registered one.
        shim = importlib.import_module(module_name.replace("virtualizarr_fill_codecs",
                                                           "virtualizarr_fill.codecs"))
        assert getattr(shim, attribute) is codec_class


def test_virtualizarr_fill_depends_on_the_codec_distribution() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    codecs_project = tomllib.loads((CODECS / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("virtualizarr-fill-codecs") for d in project["dependencies"])
    roots = {d.split(">")[0].split("=")[0].split("<")[0] for d in codecs_project["dependencies"]}
    assert roots == {"numpy", "zarr", "imagecodecs"}


# --------------------------------------------------------------------------- bare environment


def _build(inputs: list[Path], out: Path, *extra: str) -> str:
    """``virtualizarr-fill build``; its standard output (the summary)."""
    import contextlib
    import io

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["build", *map(str, inputs), "--out", str(out), *extra])
    assert code == EXIT_OK, stdout.getvalue()
    return stdout.getvalue()


def _clean_environment(home: Path) -> dict[str, str]:
    """No PYTHONPATH (nor other PYTHON* settings) of this process: the bare environment
    must see only its own site-packages."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    environment["HOME"] = environment.get("HOME", str(home))
    return environment


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment holding the codec distribution's wheel and zarr, icechunk,
    xarray, numpy and fsspec (the releases this process runs) from the package index."""
    where = tmp_path_factory.mktemp("bare")
    environment = _clean_environment(where)
    # Built from a copy: the build leaves an egg-info directory next to its sources.
    source = shutil.copytree(CODECS, where / "source", ignore=shutil.ignore_patterns("*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(where / "wheel"),
         str(source)],
        check=True, capture_output=True, text=True, env=environment,
    )  # fmt: skip
    (wheel,) = (where / "wheel").glob("virtualizarr_fill_codecs-*.whl")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=environment)
    python = venv / "bin" / "python"
    readers = [f"{name}=={version(name)}" for name in ("zarr", "icechunk", "xarray", "numpy")]
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel), *readers, "fsspec"],
        capture_output=True, text=True, env=environment,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return python


_READ = r"""
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
assert importlib.util.find_spec("virtualizarr_fill") is None
assert importlib.util.find_spec("virtualizarr") is None
import numpy as np, xarray as xr, zarr, icechunk, fsspec
from zarr.storage import FsspecStore
zarr.config.set({"array.rectilinear_chunks": True})
for case in json.loads(sys.argv[1]):
    if case["kind"] == "icechunk":
        prefix = case["prefix"]
        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(case["store"]),
            authorize_virtual_chunk_access=icechunk.containers_credentials(
                {prefix: icechunk.credentials.LocalFileSystemAccess}))
        store = repo.readonly_session("main").store
    else:
        fs = fsspec.filesystem("reference", fo=case["store"], remote_protocol="file",
                               asynchronous=True)
        store = FsspecStore(fs, read_only=True, path="")
    ds = xr.open_zarr(store, consolidated=False, zarr_format=3, mask_and_scale=False,
                      decode_times=False)
    variable = ds[case["name"]]
    np.save(case["out"], variable.values)
print("read", len(json.loads(sys.argv[1])))
"""


@pytest.mark.slow
@pytest.mark.corpus
def test_stores_read_in_a_bare_environment_with_the_codec_wheel_alone(
    bare_python: Path, tmp_path: Path, corpus_dir: Path
) -> None:
    import rasterio

    listed = subprocess.run(
        [str(bare_python), "-m", "pip", "list", "--format", "json"],
        check=True, capture_output=True, text=True, env=_clean_environment(tmp_path),
    ).stdout  # fmt: skip
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed)}
    assert "virtualizarr-fill-codecs" in installed
    assert not installed & {"virtualizarr-fill", "virtualizarr"}

    tiles = padded_tiles(tmp_path / "tiles")
    series = padded_series(tmp_path / "series")
    sar_dir = tmp_path / "sar"
    sar_dir.mkdir()
    sar = Path(shutil.copy(corpus_dir / "corteva+rioxarray" / "cint16.tif", sar_dir))

    merged, _ = rasterio_merge(tiles)
    parts = []
    for path in series:
        with h5py.File(path, "r") as f:
            parts.append(f["v"][...])
    with rasterio.open(sar) as src:
        sar_values = src.read()
    cases = {
        # name: (inputs, build options, variable, native values, codec it needs)
        "mosaic": (tiles, [], "band_data", merged, "virtualizarr_fill.crop"),
        "series": (series, ["--concat-dim", "time"], "v", np.concatenate(parts),
                   "virtualizarr_fill.truncate"),
        "sar": ([sar], [], "band_data", sar_values, "virtualizarr_fill.complex_int"),
    }  # fmt: skip
    reads = []
    for label, (inputs, options, name, _, codec) in cases.items():
        for suffix in ("icechunk", "json"):
            store = tmp_path / f"{label}.{suffix}"
            summary = _build(inputs, store, *options)
            assert "readers:   needs virtualizarr-fill-codecs (pip install " in summary, summary
            if suffix == "json":
                assert codec in store.read_text(), codec
            reads.append({
                "kind": "icechunk" if suffix == "icechunk" else "kerchunk",
                "store": str(store), "name": name, "prefix": inputs[0].parent.as_uri() + "/",
                "out": str(tmp_path / f"{label}-{suffix}.npy"), "label": label,
            })  # fmt: skip
    result = subprocess.run(
        [str(bare_python), "-c", _READ, json.dumps(reads)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=_clean_environment(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    for read in reads:
        expected = cases[read["label"]][3]
        np.testing.assert_array_equal(np.load(read["out"]), expected, strict=True)
