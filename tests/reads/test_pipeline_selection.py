"""How the manifest pipeline is selected: only by whoever uses it.

zarr imports every ``zarr.codec_pipeline`` entry point at the first array any process
creates, so the package declares none; the pipeline registers itself with zarr when
``virtualizarr_fill.reads.pipeline`` is imported. These tests run fresh processes in an
environment holding this checkout as its ``pyproject.toml`` declares it
(``tests/_environments.site_with_checkout``): the shared environment's install may still
declare an older entry point.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from tests._environments import run_python, site_with_checkout
from virtualizarr_fill import TIFFParser
from virtualizarr_fill.reads import PIPELINE_PATH
from virtualizarr_fill.reads.pipeline import ManifestCodecPipeline


def _rgb_strips(path: Path) -> np.ndarray:
    """An RGB TIFF of 40 deflate strips of 2 rows, pixel-interleaved, as tifffile reads it."""
    data = np.random.default_rng(5).integers(0, 255, (80, 24, 3), dtype=np.uint8)
    tifffile.imwrite(path, data, rowsperstrip=2, compression="zlib", photometric="rgb")
    return tifffile.imread(path)


def _run(code: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    site = site_with_checkout(tmp_path / "site")
    result = run_python(textwrap.dedent(code), cwd=tmp_path, without_project=site, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_fast_reads_is_deprecated_and_reads_as_use_manifest_pipeline(tmp_path: Path) -> None:
    path = tmp_path / "rgb.tif"
    expected = _rgb_strips(path)
    store = TIFFParser()(f"file://{path}", ObjectStoreRegistry({"file://": LocalStore()}))
    selection = zarr.core.array._get_selection
    getitem = zarr.Array.__getitem__
    default = zarr.config.get("codec_pipeline.path")
    with (
        pytest.warns(DeprecationWarning, match=r"use_manifest_pipeline\(\) instead") as caught,
        virtualizarr_fill.fast_reads(),
    ):
        assert zarr.config.get("codec_pipeline.path") == PIPELINE_PATH
        assert zarr.core.array._get_selection is selection
        assert zarr.Array.__getitem__ is getitem
        array = zarr.open_group(store, mode="r")["band_data"]
        assert isinstance(array.async_array.codec_pipeline, ManifestCodecPipeline)
        values = array[...]
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert zarr.config.get("codec_pipeline.path") == default
    np.testing.assert_array_equal(values, np.moveaxis(expected, -1, 0), strict=True)


def test_a_fresh_process_finds_the_pipeline_once_it_imports_it(tmp_path: Path) -> None:
    """Naming the pipeline in the environment alone is zarr's ``BadConfigError`` (as the
    reading guide says); with the pipeline module imported first (a worker preload), the
    process reads with it."""
    path = tmp_path / "rgb.tif"
    expected = _rgb_strips(path)
    code = f"""
    import json, sys
    import numpy as np, zarr
    outcome = {{}}
    try:
        zarr.create_array(store={{}}, shape=(4,), dtype="u1")
    except Exception as error:
        outcome["error"] = f"{{type(error).__name__}}: {{error}}"
    outcome["ours_before"] = sorted(m for m in sys.modules if m.startswith("virtualizarr_fill"))
    import virtualizarr_fill.reads.pipeline  # what a worker preload does
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr_fill import TIFFParser
    store = TIFFParser()("file://{path}", ObjectStoreRegistry({{"file://": LocalStore()}}))
    array = zarr.open_array(store, path="band_data", mode="r")
    outcome["pipeline"] = type(array.async_array.codec_pipeline).__name__
    np.save({str(tmp_path / "read.npy")!r}, array[...])
    print(json.dumps(outcome))
    """
    outcome = _run(code, tmp_path, env={"ZARR_CODEC_PIPELINE__PATH": PIPELINE_PATH})
    assert outcome["error"].startswith(
        f"BadConfigError: Pipeline class '{PIPELINE_PATH}' not found in registered pipelines"
    ), outcome
    assert outcome["ours_before"] == []
    assert outcome["pipeline"] == "ManifestCodecPipeline"
    read = np.load(tmp_path / "read.npy")
    np.testing.assert_array_equal(read, np.moveaxis(expected, -1, 0), strict=True)


def test_dask_workers_preloading_the_pipeline_read_with_it(tmp_path: Path) -> None:
    """The reading guide's worker setup: a real ``LocalCluster`` whose workers preload
    ``virtualizarr_fill.reads.pipeline`` and name it in their environment open and read a
    ManifestStore with it."""
    path = tmp_path / "rgb.tif"
    expected = _rgb_strips(path)
    code = f"""
    import json
    from distributed import Client, LocalCluster

    def read(path):
        import zarr
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import LocalStore
        from virtualizarr_fill import TIFFParser
        store = TIFFParser()("file://" + path, ObjectStoreRegistry({{"file://": LocalStore()}}))
        array = zarr.open_array(store, path="band_data", mode="r")
        return type(array.async_array.codec_pipeline).__name__, array[...]

    if __name__ == "__main__":
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tcp",
                          host="127.0.0.1", dashboard_address=None,
                          preload=["virtualizarr_fill.reads.pipeline"],
                          env={{"ZARR_CODEC_PIPELINE__PATH": {PIPELINE_PATH!r}}}) as cluster:
            with Client(cluster) as client:
                name, values = client.submit(read, {str(path)!r}).result()
        import numpy as np
        np.save({str(tmp_path / "read.npy")!r}, values)
        print(json.dumps({{"pipeline": name}}))
    """
    outcome = _run(code, tmp_path)
    assert outcome["pipeline"] == "ManifestCodecPipeline"
    read = np.load(tmp_path / "read.npy")
    np.testing.assert_array_equal(read, np.moveaxis(expected, -1, 0), strict=True)


def test_arrays_opened_in_the_block_carry_the_pipeline_to_dask_workers(tmp_path: Path) -> None:
    """The reading guide's other worker setup: nothing configured on the workers. An
    array opened inside ``use_manifest_pipeline()`` and sent to a worker of a real
    ``LocalCluster`` reads there with the manifest pipeline (the worker imports it as it
    unpickles the array)."""
    path = tmp_path / "rgb.tif"
    expected = _rgb_strips(path)
    code = f"""
    import json
    from distributed import Client, LocalCluster

    def read(array):
        import sys
        return (type(array.async_array.codec_pipeline).__name__, array[...],
                "virtualizarr_fill.reads.pipeline" in sys.modules)

    if __name__ == "__main__":
        import zarr
        import virtualizarr_fill
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import LocalStore
        store = virtualizarr_fill.TIFFParser()(
            "file://{path}", ObjectStoreRegistry({{"file://": LocalStore()}}))
        with virtualizarr_fill.use_manifest_pipeline():
            array = zarr.open_array(store, path="band_data", mode="r")
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tcp",
                          host="127.0.0.1", dashboard_address=None) as cluster:
            with Client(cluster) as client:
                name, values, imported = client.submit(read, array).result()
        import numpy as np
        np.save({str(tmp_path / "read.npy")!r}, values)
        print(json.dumps({{"pipeline": name, "imported": imported}}))
    """
    outcome = _run(code, tmp_path)
    assert outcome == {"pipeline": "ManifestCodecPipeline", "imported": True}
    read = np.load(tmp_path / "read.npy")
    np.testing.assert_array_equal(read, np.moveaxis(expected, -1, 0), strict=True)
