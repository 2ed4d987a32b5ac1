"""The ``virtualizarr-fill`` command line: inspect, build, verify, errors and exit codes.

Commands run in-process through :func:`virtualizarr_fill.cli.main` (and once through
the installed console script). Expected values come from the native readers (tifffile,
h5py) and from files written for the test; stores are real (Icechunk on disk, kerchunk
JSON/parquet, an S3 server on loopback).
"""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import h5py
import numpy as np
import pytest
import tifffile
import xarray as xr

from tests._cli import run_cli as _run
from tests._manifest_builders import concat_fixtures, kerchunk_read
from virtualizarr_fill.cli import (
    EXIT_BAD_INPUT,
    EXIT_IO,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    Progress,
    abbreviate_edges,
    main,
)

__all__ = ["concat_fixtures"]

SHORT = ["strip_short_0", "strip_short_1", "strip_short_2"]
MIXED = ["strip_short_0", "strip_padded_1", "strip_short_2"]


# --------------------------------------------------------------------------- helpers


def _files(fx: dict[str, Path], names: list[str]) -> list[str]:
    return [str(fx[n]) for n in names]


def _tiff_layout(path: Path) -> dict[str, Any]:
    """What tifffile says about the strips of a file's first page."""
    with tifffile.TiffFile(path) as tif:
        page = cast(tifffile.TiffPage, tif.pages[0])
        rows = int(page.rowsperstrip)
        assert page.dtype is not None
        height, width = int(page.imagelength), int(page.imagewidth)
        row_bytes = width * page.dtype.itemsize * int(page.samplesperpixel)
        last_stored = int(page.databytecounts[-1]) // row_bytes if page.compression == 1 else None
        return {
            "rows": rows,
            "height": height,
            "width": width,
            "strips": len(page.dataoffsets),
            "last": height - (len(page.dataoffsets) - 1) * rows,
            "last_stored_rows": last_stored,
            "dtype": str(page.dtype),
            "nodata": page.nodata,
        }


def _native_tiffs(paths: list[Path]) -> np.ndarray:
    return np.concatenate([tifffile.imread(p) for p in paths])[np.newaxis]


def _open_icechunk(path: Path, data_dir: Path) -> xr.Dataset:
    import icechunk

    prefix = data_dir.resolve().as_uri() + "/"
    repo = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(path)),
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {prefix: icechunk.credentials.LocalFileSystemAccess}
        ),
    )
    store = repo.readonly_session("main").store
    return xr.open_zarr(store, consolidated=False, zarr_format=3, mask_and_scale=False).load()


@pytest.fixture(scope="module")
def bad_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bad") / "not_an_image.tif"
    path.write_bytes(b"PK\x03\x04 this is a zip archive, not a TIFF")
    return path


@pytest.fixture(scope="module")
def gdal_tiffs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures import make_tiff_fixtures

    return make_tiff_fixtures.write_fixtures(
        tmp_path_factory.mktemp("gdal-tiffs"),
        ["gdal_nodata_scale_offset", "gdal_cog_overviews_mask", "multipage_stack"],
    )


# --------------------------------------------------------------------------- inspect


def test_edge_abbreviation() -> None:
    assert abbreviate_edges([12] * 12 + [6]) == "[12]*12+[6]"
    long = ([12] * 12 + [6]) * 10
    text = abbreviate_edges(long)
    assert text.startswith("[12]*12+[6]+[12]*12+...(130 chunks)...") and text.endswith("[6]")


def test_inspect_table(
    concat_fixtures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    short, padded = concat_fixtures["strip_short_0"], concat_fixtures["strip_padded_zlib_1"]
    code, out, _ = _run(capsys, "inspect", str(short), str(padded))
    assert code == EXIT_OK
    blocks = out.split(f"{padded}  [TIFF]")
    assert blocks[0].startswith(f"{short}  [TIFF]")

    s = _tiff_layout(short)
    assert s["last_stored_rows"] == s["last"]  # tifffile: the last strip is stored short
    edges = f"[{s['rows']}]*{s['strips'] - 1}+[{s['last']}]"
    assert f"rectilinear 1 | {edges} | {s['width']}" in blocks[0]
    assert f"{s['strips']}/{s['strips']}" in blocks[0]
    assert f"1 short chunk(s) of {s['last']} (full {s['rows']}) -> stored short" in blocks[0]
    assert f"strips of {s['rows']} rows over {s['height']} rows, the last holding" in blocks[0]

    # Deflate strips: the last strip is decompressed, found padded -> a regular grid
    p = _tiff_layout(padded)
    assert f"regular 1x{p['rows']}x{p['width']}" in blocks[1]
    assert "bytes > numcodecs.zlib" in blocks[1]
    assert "last strip padded (decoded)" in blocks[1]


def test_inspect_json_tiff(
    concat_fixtures: dict[str, Path],
    gdal_tiffs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = ["strip_short_0", "strip_padded_0", "tiled_0"]
    paths = [concat_fixtures[n] for n in names] + [gdal_tiffs["gdal_nodata_scale_offset"]]
    code, out, _ = _run(capsys, "inspect", "--json", *map(str, paths))
    assert code == EXIT_OK
    files = json.loads(out)["files"]
    assert [f["url"] for f in files] == [p.resolve().as_uri() for p in paths]
    by_name = {}
    for path, entry in zip(paths, files, strict=True):
        assert entry["format"] == "tiff"
        (group,) = entry["groups"]
        by_name[path.stem] = {a["name"]: a for a in group["arrays"]}

    for stem in ("strip_short_0", "strip_padded_0"):
        band = by_name[stem]["band_data"]
        t = _tiff_layout(concat_fixtures[stem])
        assert band["shape"] == [1, t["height"], t["width"]]
        assert band["dtype"] == t["dtype"]
        assert band["chunks"]["referenced"] == t["strips"]
        if stem == "strip_short_0":  # stored short: the grid's last edge is short
            assert t["last_stored_rows"] == t["last"]
            assert band["chunk_grid"]["kind"] == "rectilinear"
            assert band["chunk_grid"]["edges"][1] == [t["rows"]] * (t["strips"] - 1) + [t["last"]]
            assert band["edge_chunks"][0]["kind"] == "short chunks"
            assert "last strip short" in band["padding_notes"][0]
        else:  # stored padded: a regular grid whose last chunk overhangs
            assert t["last_stored_rows"] == t["rows"]
            assert band["chunk_grid"] == {"kind": "regular", "edges": [1, t["rows"], t["width"]]}
            (edge,) = band["edge_chunks"]
            assert (edge["dim"], edge["logical"], edge["stored"]) == ("y", t["last"], t["rows"])
            assert "last strip padded" in band["padding_notes"][0]
        assert band["edge_handling"] == "none"

    with tifffile.TiffFile(concat_fixtures["tiled_0"]) as tif:
        page = cast(tifffile.TiffPage, tif.pages[0])
        tile = (int(page.tilelength), int(page.tilewidth))
        tiles = len(page.dataoffsets)
    tiled = by_name["tiled_0"]["band_data"]
    assert tiled["chunk_grid"]["edges"] == [1, *tile]
    assert tiled["chunks"]["referenced"] == tiles
    assert {e["dim"] for e in tiled["edge_chunks"]} == {"y", "x"}  # 150 is not a multiple of 16

    gdal = by_name["gdal_nodata_scale_offset"]["band_data"]
    nodata = _tiff_layout(gdal_tiffs["gdal_nodata_scale_offset"])["nodata"]
    assert gdal["fill_value"] == nodata == -9999
    assert gdal["fill_attributes"]["_FillValue"] == nodata
    assert any("GDAL_NODATA" in note for note in gdal["fill_notes"])
    assert {"x", "y", "band", "spatial_ref"} <= set(by_name["gdal_nodata_scale_offset"])
    assert by_name["gdal_nodata_scale_offset"]["x"]["chunks"]["inline"] == 1


def test_inspect_json_hdf5(
    concat_fixtures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = concat_fixtures["chunked_fill_0"]
    code, out, _ = _run(capsys, "inspect", "--json", str(path))
    assert code == EXIT_OK
    (entry,) = json.loads(out)["files"]
    assert entry["format"] == "hdf5"
    data = {a["name"]: a for a in entry["groups"][0]["arrays"]}["data"]
    with h5py.File(path) as f:
        dataset = f["data"]
        allocated = dataset.id.get_num_chunks()
        total = math.prod(-(-n // c) for n, c in zip(dataset.shape, dataset.chunks, strict=True))
        assert data["shape"] == list(dataset.shape)
        assert data["chunk_grid"] == {"kind": "regular", "edges": list(dataset.chunks)}
        assert data["fill_value"] == float(dataset.fillvalue)
        overhanging = {
            i for i, (n, c) in enumerate(zip(dataset.shape, dataset.chunks, strict=True)) if n % c
        }
    assert data["chunks"] == {
        "total": total,
        "referenced": allocated,
        "inline": 0,
        "missing": total - allocated,
    }
    assert {e["axis"] for e in data["edge_chunks"]} == overhanging


def test_inspect_bad_file(
    concat_fixtures: dict[str, Path], bad_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "inspect", str(concat_fixtures["strip_short_0"]), str(bad_file))
    assert code == EXIT_BAD_INPUT
    assert "band_data" in out  # the good file is still shown
    assert f"error: {bad_file.as_uri()}: unrecognised file format" in out
    code, out, _ = _run(capsys, "inspect", "--json", str(bad_file))
    assert code == EXIT_BAD_INPUT
    assert "unrecognised file format" in json.loads(out)["files"][0]["error"]


# --------------------------------------------------------------------------- build + verify


def test_build_icechunk_and_verify(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(concat_fixtures, MIXED)
    repo = tmp_path / "mosaic.icechunk"
    code, out, err = _run(capsys, "build", *files, "--concat-dim", "y", "--out", str(repo))
    assert code == EXIT_OK, err
    strips = sum(_tiff_layout(Path(f))["strips"] for f in files)
    assert "files:     3 virtualized, 0 skipped" in out
    assert f"chunks:    {strips} referenced" in out
    assert "band_data 1x450x21 uint16 (rectilinear grid, truncate)" in out
    assert "parse" in err and "write" in err  # progress lines
    assert not list(tmp_path.glob(".*partial*"))  # the staging directory is gone

    stored = _open_icechunk(repo, concat_fixtures["strip_short_0"].parent)
    np.testing.assert_array_equal(stored["band_data"].values, _native_tiffs(list(map(Path, files))))

    code, out, _ = _run(capsys, "verify", str(repo), "--against", *files)
    assert code == EXIT_OK
    assert "verified 6 arrays of 3 files: all equal" in out and "MISMATCH" not in out


def test_verify_detects_a_store_of_other_files(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    built = _files(concat_fixtures, SHORT)
    assert main(["build", *built, "--concat-dim", "y", "--out", str(repo)]) == EXIT_OK
    others = _files(concat_fixtures, ["strip_short_0", "strip_short_zlib_1", "strip_short_2"])
    capsys.readouterr()
    code, out, _ = _run(capsys, "verify", str(repo), "--against", *others)
    assert code == EXIT_MISMATCH
    mismatches = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(mismatches) == 1
    # The store's files carry no coordinates along y: the build's record places them,
    # and a file the store was not built from is named as such.
    assert mismatches[0] == (
        f"MISMATCH {others[1]}: not among the files the store was built from (along 'y')"
    )
    assert out.splitlines()[-1].startswith("verified ") and "1 mismatch" in out


def test_build_kerchunk_json_and_parquet(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["strip_short_zlib_0", "strip_padded_zlib_1", "strip_short_zlib_2"]
    files = _files(concat_fixtures, names)
    expected = np.concatenate(
        [
            tifffile.imread(concat_fixtures["strip_short_zlib_0"]),
            _padded_zlib_values(concat_fixtures["strip_padded_zlib_1"]),
            tifffile.imread(concat_fixtures["strip_short_zlib_2"]),
        ]
    )[np.newaxis]
    for suffix in ("json", "parquet"):
        refs = tmp_path / f"refs.{suffix}"
        code, out, err = _run(capsys, "build", *files, "--concat-dim", "y", "--out", str(refs))
        assert code == EXIT_OK, err
        assert f"kerchunk {suffix} references" in out and "(Zarr format 3)" in out
        values = kerchunk_read(str(refs))["band_data"].values
        np.testing.assert_array_equal(values, expected)


def _padded_zlib_values(path: Path) -> np.ndarray:
    """A deflate strip TIFF whose last strip is padded, decoded strip by strip with zlib.

    tifffile refuses to decompress a strip that holds more rows than the image needs, so
    the strips are inflated here and the padding rows cut off.
    """
    import zlib

    with tifffile.TiffFile(path) as tif:
        page = cast(tifffile.TiffPage, tif.pages[0])
        rows = []
        for offset, count in zip(page.dataoffsets, page.databytecounts, strict=True):
            tif.filehandle.seek(offset)
            raw = zlib.decompress(tif.filehandle.read(count))
            rows.append(np.frombuffer(raw, dtype=page.dtype).reshape(-1, page.imagewidth))
        return np.concatenate(rows)[: page.imagelength]


def test_build_new_dimension(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(concat_fixtures, ["tiled_0", "tiled_1", "tiled_2"])
    repo = tmp_path / "stack"
    code, _, err = _run(
        capsys, "build", *files, "--concat-dim", "file", "--new-dim", "--out", str(repo)
    )
    assert code == EXIT_OK, err
    stored = _open_icechunk(repo, concat_fixtures["tiled_0"].parent)
    expected = np.stack([tifffile.imread(f)[np.newaxis] for f in files])
    assert stored["band_data"].dims == ("file", "band", "y", "x")
    np.testing.assert_array_equal(stored["band_data"].values, expected)
    code, out, _ = _run(capsys, "verify", str(repo), "--against", *files)
    assert code == EXIT_OK, out


def test_build_hdf5_along_first_axis(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [concat_fixtures[f"chunked_{k}"] for k in range(3)]
    with h5py.File(paths[0]) as f:
        dim = "phony_dim_0"
        expected = np.concatenate([h5py.File(p)["data"][...] for p in paths])
        assert f["data"].shape[0] % f["data"].chunks[0]  # padded edge chunks in every file
    repo = tmp_path / "hdf5.icechunk"
    code, _, err = _run(capsys, "build", *map(str, paths), "--concat-dim", dim, "--out", str(repo))
    assert code == EXIT_OK, err
    np.testing.assert_array_equal(_open_icechunk(repo, paths[0].parent)["data"].values, expected)
    code, out, _ = _run(capsys, "verify", str(repo), "--against", *map(str, paths))
    assert code == EXIT_OK, out


def test_build_names_the_groups_it_leaves_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build combines one group of each file: the others are listed in the summary,
    and one of them can be built with --hdf5-option group=NAME."""
    path = tmp_path / "granule.h5"
    rng = np.random.default_rng(9)
    with h5py.File(path, "w") as f:
        for beam in ("gt1l", "gt2l"):
            f.create_group(beam).create_dataset(
                "height", data=rng.standard_normal(100).astype("f4"), chunks=(30,)
            )
    repo = tmp_path / "root.icechunk"
    code, out, err = _run(capsys, "build", str(path), "--out", str(repo), "--workers", "0")
    assert code == EXIT_OK, err
    assert f"{path}: its groups /gt1l, /gt2l are left out" in out
    assert "--hdf5-option group=NAME" in out
    beam = tmp_path / "gt2l.icechunk"
    argv = ["build", str(path), "--out", str(beam), "--hdf5-option", "group=gt2l", "--workers", "0"]
    code, out, err = _run(capsys, *argv)
    assert code == EXIT_OK, err
    assert "left out" not in out
    with h5py.File(path) as f:
        expected = f["gt2l/height"][...]
    np.testing.assert_array_equal(_open_icechunk(beam, tmp_path)["height"].values, expected)


def test_glob_input_and_worker_processes(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = concat_fixtures["strip_short_0"].parent
    pattern = str(directory / "strip_short_[0-9].tif")
    refs = tmp_path / "refs.json"
    code, out, err = _run(
        capsys, "build", pattern, "--concat-dim", "y", "--out", str(refs), "--workers", "2"
    )
    assert code == EXIT_OK, err
    assert "files:     3 virtualized" in out
    ordered = sorted(directory.glob("strip_short_[0-9].tif"))
    np.testing.assert_array_equal(
        kerchunk_read(str(refs))["band_data"].values, _native_tiffs(ordered)
    )


def test_dask_scheduler(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from distributed import LocalCluster

    files = _files(concat_fixtures, SHORT)
    refs = tmp_path / "refs.json"
    with LocalCluster(
        n_workers=1, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        code, _, err = _run(
            capsys,
            "build",
            *files,
            "--concat-dim",
            "y",
            "--out",
            str(refs),
            "--dask-scheduler",
            cluster.scheduler_address,
        )
    assert code == EXIT_OK, err
    np.testing.assert_array_equal(
        kerchunk_read(str(refs))["band_data"].values, _native_tiffs(list(map(Path, files)))
    )


# --------------------------------------------------------------------------- bad inputs


def test_bad_input_stops_the_build(
    concat_fixtures: dict[str, Path],
    bad_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [*_files(concat_fixtures, SHORT[:2]), str(bad_file)]
    repo = tmp_path / "repo"
    code, out, err = _run(capsys, "build", *files, "--concat-dim", "y", "--out", str(repo))
    assert code == EXIT_BAD_INPUT
    errors = [line for line in err.splitlines() if line.startswith("virtualizarr-fill: error")]
    assert len(errors) == 1 and "Traceback" not in err
    assert f"{bad_file.as_uri()}: unrecognised file format" in errors[0]
    assert "--skip-bad" in errors[0]
    assert not repo.exists() and out == ""


def test_skip_bad_lists_skipped_files(
    concat_fixtures: dict[str, Path],
    bad_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = _files(concat_fixtures, SHORT[:2])
    repo = tmp_path / "repo"
    code, out, err = _run(
        capsys, "build", good[0], str(bad_file), good[1], "--concat-dim", "y",
        "--out", str(repo), "--skip-bad",
    )  # fmt: skip
    assert code == EXIT_OK, err
    assert "files:     2 virtualized, 1 skipped" in out
    assert f"skipped files (1):\n    {bad_file.as_uri()}: unrecognised file format" in out
    stored = _open_icechunk(repo, concat_fixtures["strip_short_0"].parent)
    np.testing.assert_array_equal(stored["band_data"].values, _native_tiffs(list(map(Path, good))))


def test_debug_shows_the_traceback(
    bad_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", str(bad_file), "--concat-dim", "y", "--out", str(tmp_path / "r")]
    code, _, err = _run(capsys, "--debug", *argv)
    assert code == EXIT_BAD_INPUT
    assert "Traceback" in err and "UnknownFormatError" in err


def test_incompatible_files(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(concat_fixtures, ["strip_short_0", "strip_short_zlib_1"])
    code, _, err = _run(capsys, "build", *files, "--concat-dim", "y", "--out", str(tmp_path / "r"))
    assert code == EXIT_BAD_INPUT
    assert "different codecs" in err and "strip_short_zlib_1.tif" in err
    paths = [str(concat_fixtures[n]) for n in ("chunked_0", "chunked_fill_1")]
    code, _, err = _run(
        capsys, "build", *paths, "--concat-dim", "phony_dim_0", "--out", str(tmp_path / "h")
    )
    assert code == EXIT_BAD_INPUT
    assert "fill_value differs" in err and "--on-fill-conflict" in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "h").exists()


def test_usage_and_io_errors(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = str(concat_fixtures["strip_short_0"])
    out = str(tmp_path / "r")
    two = str(concat_fixtures["strip_short_1"])
    code, _, err = _run(capsys, "build", one, two, "--out", out)  # not georeferenced
    assert code == EXIT_USAGE and "--concat-dim" in err and "mosaic" in err
    code, _, err = _run(
        capsys, "build", str(tmp_path / "none*.tif"), "--concat-dim", "y", "--out", out
    )
    assert code == EXIT_USAGE and "no files match" in err
    code, _, err = _run(
        capsys, "build", str(tmp_path / "gone.tif"), "--concat-dim", "y", "--out", out
    )
    assert code == EXIT_IO and "gone.tif: no such file" in err
    code, _, err = _run(capsys, "build", one, "--concat-dim", "time", "--out", out)
    assert code == EXIT_USAGE and "no dimension 'time'" in err and "--new-dim" in err
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    code, _, err = _run(capsys, "build", one, "--concat-dim", "y", "--out", str(tmp_path / "taken"))
    assert code == EXIT_USAGE and "already exists" in err
    assert (tmp_path / "taken" / "file").read_text() == "x"
    code, _, err = _run(capsys, "verify", str(tmp_path / "missing"), "--against", one)
    assert code == EXIT_IO and "no such Icechunk repository" in err


def test_overwrite_replaces_only_after_success(
    concat_fixtures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    files = _files(concat_fixtures, SHORT)
    assert main(["build", files[0], "--concat-dim", "y", "--out", str(repo)]) == EXIT_OK
    bad = main(["build", files[0], "--concat-dim", "nope", "--out", str(repo), "--overwrite"])
    assert bad == EXIT_USAGE
    assert (
        _open_icechunk(repo, concat_fixtures["strip_short_0"].parent)["band_data"].shape[1] == 150
    )
    assert main(["build", *files, "--concat-dim", "y", "--out", str(repo), "--overwrite"]) == 0
    assert (
        _open_icechunk(repo, concat_fixtures["strip_short_0"].parent)["band_data"].shape[1] == 450
    )


# --------------------------------------------------------------------------- S3 inputs


def test_build_from_s3(
    concat_fixtures: dict[str, Path],
    s3_environment: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    s3_server = s3_environment
    s3_server.create_bucket("cli-inputs")
    for name in SHORT:
        s3_server.upload("cli-inputs", f"tiles/{name}.tif", concat_fixtures[name])

    repo = tmp_path / "from-s3.icechunk"
    pattern = "s3://cli-inputs/tiles/strip_short_*.tif"
    code, out, err = _run(capsys, "build", pattern, "--concat-dim", "y", "--out", str(repo))
    assert code == EXIT_OK, err
    assert "files:     3 virtualized" in out
    code, out, err = _run(capsys, "verify", str(repo), "--against", pattern)
    assert code == EXIT_OK, out + err
    assert "of 3 files: all equal" in out

    # an Icechunk repository on S3 as well, from local files
    s3_server.create_bucket("cli-repos")
    local = _files(concat_fixtures, MIXED)
    destination = "s3://cli-repos/mosaic"
    code, out, err = _run(capsys, "build", *local, "--concat-dim", "y", "--out", destination)
    assert code == EXIT_OK, err
    assert f"wrote Icechunk repository {destination}" in out
    code, out, err = _run(capsys, "verify", destination, "--against", *local)
    assert code == EXIT_OK, out + err
    code, _, err = _run(capsys, "build", *local, "--concat-dim", "y", "--out", destination)
    assert code == EXIT_USAGE and "already exists" in err


# --------------------------------------------------------------------------- progress, script


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar() -> None:
    log = io.StringIO()
    with Progress("parse", 3, "files", stream=log) as progress:
        for _ in range(3):
            progress.advance()
    # a log gets a line at the first step, then at most one a second, and the last
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "1/3 files" in lines[0] and "3/3 files" in lines[1]

    terminal = _Terminal()
    with Progress("parse", 100_000, "files", stream=terminal, interval=3600) as progress:
        for _ in range(100_000):
            progress.advance()
    drawn = terminal.getvalue()
    assert drawn.count("\r") == 2  # the first draw, then the final line only
    assert drawn.endswith("\n") and "100000/100000 files" in drawn.rsplit("\r", 1)[1]


def test_console_script(concat_fixtures: dict[str, Path], bad_file: Path) -> None:
    script = shutil.which("virtualizarr-fill") or str(
        Path(sys.executable).parent / "virtualizarr-fill"
    )
    path = concat_fixtures["strip_short_1"]
    result = subprocess.run(
        [script, "inspect", "--json", str(path), str(bad_file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    good, bad = json.loads(result.stdout)["files"]
    band = {a["name"]: a for a in good["groups"][0]["arrays"]}["band_data"]
    assert band["shape"] == [1, *tifffile.imread(path).shape]
    assert bad["url"] == bad_file.as_uri() and "unrecognised file format" in bad["error"]


# --------------------------------------------------------------------------- parse report


def test_tiff_parser_records_every_array(
    gdal_tiffs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The TIFF parser reports each image it builds; inspect --all-images shows them all."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    from virtualizarr_fill import TIFFParser
    from virtualizarr_fill.report import collect
    from virtualizarr_fill.zarr_model.edge_codecs import edge_handling_of

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    cog = gdal_tiffs["gdal_cog_overviews_mask"].resolve().as_uri()
    with collect() as report:
        store = TIFFParser(layout="tree")(cog, registry)
    tree = store.to_virtual_datatree(loadable_variables=[])
    groups = [node.name for node in tree.subtree if "band_data" in node.ds.variables]
    assert [a.name for a in report.arrays] == [f"{g}/band_data" for g in groups]
    with tifffile.TiffFile(gdal_tiffs["gdal_cog_overviews_mask"]) as tif:
        assert len(groups) == len(tif.pages)  # image, mask, 2 overviews, 2 mask overviews
    for recorded in report.arrays:
        codecs = tree[recorded.name].data.metadata.codecs
        assert recorded.edge_handling == edge_handling_of(codecs).name.lower()
        assert recorded.padding_notes and recorded.fill_notes

    pages = gdal_tiffs["multipage_stack"].resolve().as_uri()
    with collect() as report:
        TIFFParser(layout="pages")(pages, registry)
    with tifffile.TiffFile(gdal_tiffs["multipage_stack"]) as tif:
        count = len(tif.pages)
    assert [a.name for a in report.arrays] == [f"band_data[page={k}]" for k in range(count)]

    code, out, _ = _run(
        capsys, "inspect", "--json", "--all-images", str(gdal_tiffs["gdal_cog_overviews_mask"])
    )
    assert code == EXIT_OK
    shown = [g["path"].strip("/") for g in json.loads(out)["files"][0]["groups"] if g["arrays"]]
    assert shown == groups


def test_parser_options(
    gdal_tiffs: dict[str, Path],
    concat_fixtures: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--tiff-option / --hdf5-option reach the parsers."""
    from fixtures import make_tiff_fixtures

    bad_nodata = make_tiff_fixtures.write_fixtures(
        gdal_tiffs["gdal_nodata_scale_offset"].parent, ["gdal_uint8_nodata_out_of_range"]
    )["gdal_uint8_nodata_out_of_range"]
    with tifffile.TiffFile(bad_nodata) as tif:
        assert (
            cast(tifffile.TiffPage, tif.pages[0]).tags["GDAL_NODATA"].value.strip("\x00")
            == "-10000"
        )
    code, out, _ = _run(capsys, "inspect", str(bad_nodata))
    assert code == EXIT_BAD_INPUT and "'-10000' cannot be represented as uint8" in out
    code, out, _ = _run(
        capsys, "inspect", str(bad_nodata), "--tiff-option", "on_fill_out_of_range=warn"
    )
    assert code == EXIT_OK and "'-10000' ignored" in out

    h5 = concat_fixtures["chunked_0"]
    code, out, _ = _run(
        capsys, "inspect", "--json", str(h5), "--hdf5-option", 'drop_variables=["data"]'
    )
    assert code == EXIT_OK
    assert json.loads(out)["files"][0]["groups"][0]["arrays"] == []
    code, _, err = _run(capsys, "inspect", str(h5), "--tiff-option", "no_such_option=1")
    assert code == EXIT_USAGE and "no_such_option" in err


def test_build_refuses_files_whose_data_types_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Combining needs a cast that virtual references cannot do: a clear error, exit 3."""
    paths = []
    for index, dtype in enumerate(["<f4", "<f8"]):
        path = tmp_path / f"part{index}.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("v", data=np.arange(6, dtype=dtype), chunks=(4,))
        paths.append(str(path))
    code, _, err = _run(
        capsys, "build", *paths, "--concat-dim", "phony_dim_0", "--out", str(tmp_path / "o.json")
    )
    assert code == EXIT_BAD_INPUT, err
    assert "cannot be combined along 'phony_dim_0'" in err
    assert "internal error" not in err
    assert not (tmp_path / "o.json").exists()
