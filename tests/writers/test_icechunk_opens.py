"""``open_icechunk`` and ``verify`` on Icechunk repositories that cannot be read as asked:
a referenced file modified since the build, a path with no repository, a multiscale
repository asked for as one Dataset.

Repositories are real (built by ``virtualizarr-fill build`` on disk and in a bucket of an
S3 server on loopback); files are written with netCDF4 (netCDF-C) and GDAL, and values
read back are compared with those readers'.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from virtualizarr_fill.cli import EXIT_IO, EXIT_MISMATCH, EXIT_OK, main
from virtualizarr_fill.writers.icechunk_reads import SourceFileChangedError
from virtualizarr_fill.writers.repository import (
    MultiscaleGroupError,
    RepositoryNotFoundError,
)

netCDF4 = pytest.importorskip("netCDF4")
rasterio = pytest.importorskip("rasterio")


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def _days(directory: Path, count: int = 2) -> list[Path]:
    """netCDF-4 files of 4 days each, chunks of 2 days."""
    paths = []
    for k in range(count):
        path = directory / f"day_{k}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", 4)
            nc.createDimension("lat", 3)
            time_ = nc.createVariable("time", "f8", ("time",))
            time_.units = "days since 2000-01-01"
            time_[:] = np.arange(4) + 4 * k
            temp = nc.createVariable("temp", "f4", ("time", "lat"), chunksizes=(2, 3))
            temp[:] = np.arange(12, dtype="f4").reshape(4, 3) + 100 * k
        paths.append(path)
    return paths


def _native_temp(paths: list[Path]) -> np.ndarray:
    parts = []
    for path in paths:
        with netCDF4.Dataset(path) as nc:
            parts.append(np.ma.filled(nc["temp"][:], np.nan))
    return np.concatenate(parts)


def _copy_over(path: Path) -> None:
    """``cp`` of an identical copy over ``path``: same bytes, a later modification time
    (later than the build's time, which VirtualiZarr records a second ahead)."""
    copy = path.with_suffix(".copy")
    shutil.copyfile(path, copy)
    time.sleep(2.1)
    before = path.stat().st_mtime
    shutil.copyfile(copy, path)
    copy.unlink()
    assert path.stat().st_mtime > before + 2


def _built(capsys: pytest.CaptureFixture[str], *argv: str) -> None:
    code, out = _cli(capsys, "build", *argv, "--workers", "0")
    assert code == EXIT_OK, out


# --------------------------------------------------------------------------- changed files


def test_a_file_copied_over_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import virtualizarr_fill

    paths = _days(tmp_path)
    repo = tmp_path / "days.icechunk"
    _built(capsys, *map(str, paths), "--concat-dim", "time", "--out", str(repo))
    ds = virtualizarr_fill.open_icechunk(repo)
    np.testing.assert_array_equal(ds["temp"].values, _native_temp(paths))

    _copy_over(paths[1])
    for chunks in (None, {}):  # lazily indexed, and dask arrays
        ds = virtualizarr_fill.open_icechunk(repo, chunks=chunks)
        np.testing.assert_array_equal(ds["temp"].isel(time=slice(0, 4)).values,
                                      _native_temp(paths[:1]))  # fmt: skip
        with pytest.raises(SourceFileChangedError) as raised:
            _ = ds["temp"].values
        message = str(raised.value)
        assert "\n" not in message
        assert message.startswith(f"{paths[1]}: modified after the Icechunk repository {repo}")
        assert "rebuild the repository" in message
        assert raised.value.url == paths[1].as_uri()

    # plain Icechunk reads say the same through Icechunk's own error, as the guide says
    import icechunk

    from virtualizarr_fill.writers.repository import open_repository

    plain = xr.open_zarr(
        open_repository(repo).readonly_session("main").store, consolidated=False, chunks=None
    )
    with pytest.raises(icechunk.IcechunkError, match="checksum of the object owning the "
                       "virtual chunk has changed"):  # fmt: skip
        _ = plain["temp"].values


def test_rebuilding_reads_the_copied_file_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the message says to do works: the rebuilt repository reads the file."""
    import virtualizarr_fill

    paths = _days(tmp_path)
    repo = tmp_path / "days.icechunk"
    _built(capsys, *map(str, paths), "--concat-dim", "time", "--out", str(repo))
    _copy_over(paths[0])
    shutil.rmtree(repo)
    _built(capsys, *map(str, paths), "--concat-dim", "time", "--out", str(repo))
    ds = virtualizarr_fill.open_icechunk(repo)
    np.testing.assert_array_equal(ds["temp"].values, _native_temp(paths))


def test_verify_names_the_changed_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _days(tmp_path)
    repo = tmp_path / "days.icechunk"
    _built(capsys, *map(str, paths), "--concat-dim", "time", "--out", str(repo))
    _copy_over(paths[1])
    code, out = _cli(capsys, "verify", str(repo), "--against", *map(str, paths))
    assert code == EXIT_MISMATCH
    unverified = [line for line in out.splitlines() if line.startswith("UNVERIFIED")]
    assert len(unverified) == 1, out
    assert unverified[0].startswith(f"UNVERIFIED {paths[1]}: temp: ")
    assert f"SourceFileChangedError: {paths[1]}: modified after" in unverified[0]
    assert "context:" not in out and "icechunk::" not in out


def test_a_changed_file_on_s3_is_named(
    tmp_path: Path,
    s3_environment: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Files in a bucket: an identical object uploaded again has a new modification
    time (and the same ETag), and Icechunk refuses it the same way."""
    import virtualizarr_fill

    bucket = "changed-objects"
    s3_environment.create_bucket(bucket)
    paths = _days(tmp_path)
    for path in paths:
        s3_environment.upload(bucket, f"days/{path.name}", path)
    urls = [f"s3://{bucket}/days/{path.name}" for path in paths]
    repo = tmp_path / "days.icechunk"
    _built(capsys, *urls, "--concat-dim", "time", "--out", str(repo))
    np.testing.assert_array_equal(
        virtualizarr_fill.open_icechunk(repo)["temp"].values, _native_temp(paths)
    )
    time.sleep(2)  # S3 modification times are whole seconds
    s3_environment.upload(bucket, "days/day_1.nc", paths[1])
    with pytest.raises(SourceFileChangedError, match=f"^{urls[1]}: modified after"):
        _ = virtualizarr_fill.open_icechunk(repo)["temp"].values


# --------------------------------------------------------------------------- missing repository


def test_a_missing_repository_is_one_line(tmp_path: Path) -> None:
    import virtualizarr_fill

    missing = tmp_path / "nothing.icechunk"
    with pytest.raises(RepositoryNotFoundError) as raised:
        virtualizarr_fill.open_icechunk(missing)
    assert str(raised.value) == f"{missing}: no such Icechunk repository (no such directory)"
    assert isinstance(raised.value, FileNotFoundError)

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError) as raised:
        virtualizarr_fill.open_icechunk_datatree(empty)
    assert str(raised.value) == f"{empty}: not an Icechunk repository (none was created there)"


# --------------------------------------------------------------------------- multiscale


def test_a_multiscale_repository_says_how_to_open_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import virtualizarr_fill
    from fixtures import make_gdal_features

    cog = tmp_path / "cog.tif"
    make_gdal_features.write_cog(cog, height=128, width=96, block=32, overview_factors=(2, 4),
                                 mask=False)  # fmt: skip
    repo = tmp_path / "pyramid.icechunk"
    _built(capsys, str(cog), "--overviews", "--out", str(repo))

    with pytest.raises(MultiscaleGroupError) as raised:
        virtualizarr_fill.open_icechunk(repo)
    message = str(raised.value)
    assert message == (
        f"{repo}: the root group is a multiscale group of levels 0, 1, 2; open every level "
        f"with virtualizarr_fill.open_icechunk_datatree({str(repo)!r}), or the full "
        f"resolution as a Dataset with virtualizarr_fill.open_icechunk({str(repo)!r}, "
        "group='0')"
    )

    # both suggestions, called as the message spells them
    tree = virtualizarr_fill.open_icechunk_datatree(str(repo))
    full = virtualizarr_fill.open_icechunk(str(repo), group="0")
    with rasterio.open(cog) as src:
        expected = [src.read()] + [
            src.read(out_shape=(src.count, src.height // f, src.width // f))
            for f in src.overviews(1)
        ]
    np.testing.assert_array_equal(full["band_data"].values, expected[0])
    assert sorted(tree.children) == ["0", "1", "2"]
    for level, values in enumerate(expected):
        np.testing.assert_array_equal(tree[str(level)]["band_data"].values, values)

    code, out = _cli(capsys, "verify", str(repo), "--against", str(cog))
    assert code == EXIT_OK, out


def test_verify_of_a_missing_repository_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _days(tmp_path)
    code, out = _cli(capsys, "verify", str(tmp_path / "none.icechunk"), "--against", str(paths[0]))
    assert code == EXIT_IO
    assert out.strip().splitlines()[-1].startswith("virtualizarr-fill: error: ")


def test_multiscale_kerchunk_references_say_how_to_open_a_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same refusal for kerchunk references of a multiscale group, whose suggestion
    opens the full resolution."""
    import virtualizarr_fill
    from fixtures import make_gdal_features

    cog = tmp_path / "cog.tif"
    make_gdal_features.write_cog(
        cog, height=96, width=64, block=32, overview_factors=(2,), mask=False
    )
    # JSON (parquet references of a multiscale group: tests/cli/test_cli_corpus.py)
    refs = tmp_path / "pyramid.json"
    _built(capsys, str(cog), "--overviews", "--out", str(refs))
    with pytest.raises(MultiscaleGroupError) as raised:
        virtualizarr_fill.open_kerchunk(refs)
    assert str(raised.value) == (
        f"{refs}: the root group is a multiscale group of levels 0, 1; open the full "
        f"resolution with virtualizarr_fill.open_kerchunk({str(refs)!r}, group='0') "
        "(and each other level by its name)"
    )
    full = virtualizarr_fill.open_kerchunk(str(refs), group="0")
    half = virtualizarr_fill.open_kerchunk(str(refs), group="1")
    with rasterio.open(cog) as src:
        np.testing.assert_array_equal(full["band_data"].values, src.read())
        np.testing.assert_array_equal(
            half["band_data"].values,
            src.read(out_shape=(src.count, src.height // 2, src.width // 2)),
        )
