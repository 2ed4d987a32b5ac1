"""``virtualizarr-fill build --overlap first|last`` of overlapping tiles: the store
equals ``rasterio.merge.merge(method=...)`` read back through Icechunk and kerchunk with
xarray; without the flag, one line naming both tiles and the flag."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import virtualizarr_fill
from tests.assemble.test_mosaic_overlaps import merged, overlapping_tiles
from tests.cli.test_cli_build import _error_line, _run
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, EXIT_USAGE


@pytest.mark.parametrize(("suffix", "method"), [("icechunk", "first"), ("json", "last")])
def test_overlapping_tiles_build_with_overlap_equal_rasterio_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, method: str
) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    paths = overlapping_tiles(tmp_path / "tiles", 13)
    out = tmp_path / f"mosaic.{suffix}"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--workers", "0")
    assert code == EXIT_BAD_INPUT
    line = _error_line(err)
    assert "overlap by" in line and "--overlap first|last" in line
    assert not out.exists()

    code, summary, err = _run(
        capsys, "build", *paths, "--out", out, "--overlap", method, "--workers", "0"
    )
    assert code == EXIT_OK, err
    assert "stored as values where tiles overlap inside a chunk" in summary
    if suffix == "icechunk":
        ds = virtualizarr_fill.open_icechunk(out, mask_and_scale=False)
    else:
        from tests._manifest_builders import kerchunk_read

        ds = kerchunk_read(str(out))
    expected, transform, _ = merged(paths, method)
    np.testing.assert_array_equal(ds["band_data"].values, expected)  # no nodata pixels
    assert ds.rio.transform() == transform


def test_overlap_with_concat_dim_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = overlapping_tiles(tmp_path / "tiles", 5)
    code, _, err = _run(
        capsys, "build", *paths, "--out", tmp_path / "m.icechunk", "--overlap", "first",
        "--concat-dim", "x",
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert "--overlap" in _error_line(err)


def test_overlap_with_append_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = overlapping_tiles(tmp_path / "tiles", 5)
    code, _, err = _run(
        capsys, "build", *paths, "--out", tmp_path / "m.icechunk", "--overlap", "first",
        "--append",
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert "drop --overlap" in _error_line(err)


# --------------------------------------------------------------------------- verify


def _verify(capsys: pytest.CaptureFixture[str], dest: Path, files: list[Path]) -> tuple[int, str]:
    code, out, err = _run(capsys, "verify", dest, "--against", *files)
    return code, out + err


def _covered_by_winners(paths: list[Path], tile: Path, method: str) -> np.ndarray:
    """The pixels of ``tile`` that a tile rasterio.merge prefers (given before it with
    "first", after it with "last") also covers, from rasterio's transforms."""
    import rasterio

    index = paths.index(tile)
    winners = paths[:index] if method == "first" else paths[index + 1 :]
    with rasterio.open(tile) as src:
        rows, cols = np.mgrid[0 : src.height, 0 : src.width]
        x, y = src.xy(rows.ravel(), cols.ravel())
        x, y = np.asarray(x).reshape(rows.shape), np.asarray(y).reshape(rows.shape)
    covered = np.zeros(rows.shape, dtype=bool)
    for other in winners:
        with rasterio.open(other) as src:
            b = src.bounds
        covered |= (x > b.left) & (x < b.right) & (y > b.bottom) & (y < b.top)
    return covered


@pytest.mark.parametrize(("suffix", "method"), [("icechunk", "first"), ("json", "last")])
def test_verify_compares_each_tile_where_it_wins_an_overlap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, method: str
) -> None:
    import rasterio

    paths = overlapping_tiles(tmp_path / "tiles", 13)
    out = tmp_path / f"mosaic.{suffix}"
    code, _, err = _run(
        capsys, "build", *paths, "--out", out, "--overlap", method, "--workers", "0"
    )
    assert code == EXIT_OK, err
    code, report = _verify(capsys, out, paths)
    assert code == EXIT_OK, report
    assert "verified 16 arrays of 4 files: all equal" in report, report

    # Copies of the tiles, one changed after the build: the store still reads the
    # originals, so the copy differs from it wherever the store reads that tile.
    loser = paths[-1] if method == "first" else paths[0]  # it loses every overlap
    lost = _covered_by_winners(paths, loser, method)
    assert lost.any() and not lost.all()
    copies = tmp_path / "copies"
    copies.mkdir()
    copied = [copies / p.name for p in paths]
    for path, copy in zip(paths, copied, strict=True):
        copy.write_bytes(path.read_bytes())
    changed = copies / loser.name
    (lost_row, lost_col), (won_row, won_col) = np.argwhere(lost)[0], np.argwhere(~lost)[-1]
    with rasterio.open(changed, "r+") as dst:
        data = dst.read()
        data[0, lost_row, lost_col] += 1
        dst.write(data)
    code, report = _verify(capsys, out, copied)
    assert code == EXIT_OK, report  # the store does not read the pixel that changed
    assert "verified 16 arrays of 4 files: all equal" in report, report

    with rasterio.open(changed, "r+") as dst:
        data = dst.read()
        data[1, won_row, won_col] += 1
        dst.write(data)
    code, report = _verify(capsys, out, copied)
    assert code == EXIT_MISMATCH, report
    mismatches = [line for line in report.splitlines() if line.startswith("MISMATCH")]
    assert len(mismatches) == 1, report
    assert mismatches[0].startswith(f"MISMATCH {changed}: band_data: 1 of "), mismatches


def test_verify_of_an_overlap_mosaic_needs_the_build_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = overlapping_tiles(tmp_path / "tiles", 13)
    out = tmp_path / "mosaic.json"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--overlap", "first",
                        "--workers", "0")  # fmt: skip
    assert code == EXIT_OK, err
    code, report = _verify(capsys, out, paths[::-1])
    assert code == EXIT_USAGE
    assert "in the order they were built" in report and "Traceback" not in report
    code, report = _verify(capsys, out, paths[:3])
    assert code == EXIT_USAGE
    assert "from 4 tiles" in report and "(3 given)" in report


def test_verify_of_an_overlap_repository_needs_every_tile_it_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Icechunk repository records the order, so a subset of the tiles verifies, but
    a tile it lists that is gone leaves its overlaps unresolved: one line naming it."""
    paths = overlapping_tiles(tmp_path / "tiles", 13)
    out = tmp_path / "mosaic.icechunk"
    code, _, err = _run(capsys, "build", *paths, "--out", out, "--overlap", "last",
                        "--workers", "0")  # fmt: skip
    assert code == EXIT_OK, err
    code, report = _verify(capsys, out, paths[1:])
    assert code == EXIT_OK, report
    assert "verified 12 arrays of 3 files: all equal" in report, report
    paths[0].unlink()
    code, report = _verify(capsys, out, paths[1:])
    assert code == EXIT_USAGE, report
    line = report.strip().splitlines()[-1]
    assert str(paths[0]) in line and "neither given nor readable" in line, report


@pytest.mark.parametrize("flags", [["--overlap", "first"], ["--allow-gaps"], ["--mosaic"]])
def test_overviews_with_concat_dim_refuse_the_mosaic_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    paths = overlapping_tiles(tmp_path / "tiles", 13)
    out = tmp_path / "mosaic.icechunk"
    code, _, err = _run(
        capsys, "build", *paths, "--out", out, "--overviews", "--concat-dim", "x", *flags
    )
    assert code == EXIT_USAGE, err
    line = _error_line(err)
    assert f"drop {flags[0]}, or drop --concat-dim" in line and "--overviews" in line, line
    assert not out.exists()
