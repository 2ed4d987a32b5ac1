"""``build --overwrite`` replaces only a store this tool wrote, and only once the new one
is complete.

Stores are real Icechunk repositories and kerchunk references on disk, read back as
users read them; expected values come from rasterio reading the GeoTIFFs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import rasterio

import virtualizarr_fill
from tests._cli import error_line as _error_line
from tests._cli import run_cli as _run
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE

Tiles = Callable[..., list[Path]]


def _native(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


def _read(store: Path) -> np.ndarray:
    if store.suffix in (".json", ".parquet"):
        ds = virtualizarr_fill.open_kerchunk(str(store), mask_and_scale=False)
    else:
        ds = virtualizarr_fill.open_icechunk(store, mask_and_scale=False)
    return np.asarray(ds["band_data"].values)


@pytest.fixture
def two_tiles(tmp_path: Path, write_tiles: Tiles) -> tuple[Path, Path]:
    """Two GeoTIFFs of different content (tiled, so kerchunk format 2 can hold them)."""
    paths = sorted(write_tiles(tmp_path / "tiles", tiled=True))
    return paths[0], paths[4]


def test_a_folder_with_a_users_file_is_not_replaced(
    tmp_path: Path, two_tiles: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    mydata = tmp_path / "mydata"
    mydata.mkdir()
    (mydata / "notes.txt").write_text("important")
    code, _, err = _run(capsys, "build", two_tiles[0], "--out", mydata, "--overwrite")
    assert code == EXIT_USAGE
    line = _error_line(err)
    assert "--out" in line and "mydata" in line and "notes.txt" in line and "not replaced" in line
    assert sorted(p.name for p in mydata.iterdir()) == ["notes.txt"]
    assert (mydata / "notes.txt").read_text() == "important"
    assert not list(tmp_path.glob(".mydata.partial-*"))  # nothing left beside it


@pytest.mark.parametrize("name", ["refs.json", "refs.parquet", "repo.icechunk"])
def test_a_store_with_a_users_file_or_of_another_kind_is_not_replaced(
    tmp_path: Path, two_tiles: tuple[Path, Path], capsys: pytest.CaptureFixture[str], name: str
) -> None:
    store = tmp_path / name
    assert _run(capsys, "build", two_tiles[0], "--out", store)[0] == EXIT_OK
    before = _read(store)
    if store.is_dir():  # a user's file saved inside our store
        (store / "notes.txt").write_text("important")
        expected = "notes.txt"
    else:  # a JSON document another tool wrote
        store.write_text('{"version": 1, "refs": {".zgroup": "{\\"zarr_format\\": 2}"}}')
        expected = "build record"
    code, _, err = _run(capsys, "build", two_tiles[1], "--out", store, "--overwrite")
    assert code == EXIT_USAGE
    assert expected in _error_line(err) and "not replaced" in _error_line(err)
    if store.is_dir():
        assert (store / "notes.txt").read_text() == "important"
        np.testing.assert_array_equal(_read(store), before)


def test_an_icechunk_repository_without_the_build_record_is_not_replaced(
    tmp_path: Path, two_tiles: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    import icechunk
    import zarr

    repo_path = tmp_path / "theirs.icechunk"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_path)))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="x", shape=(3,), dtype="i4")[:] = [1, 2, 3]
    session.commit("someone else's data")
    code, _, err = _run(capsys, "build", two_tiles[0], "--out", repo_path, "--overwrite")
    assert code == EXIT_USAGE
    assert "without this tool's build record" in _error_line(err)
    reopened = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repo_path)))
    group = zarr.open_group(reopened.readonly_session("main").store, mode="r")
    assert group["x"][:].tolist() == [1, 2, 3]


@pytest.mark.parametrize("name", ["repo.icechunk", "refs.json", "refs.parquet"])
def test_our_own_store_is_replaced(
    tmp_path: Path, two_tiles: tuple[Path, Path], capsys: pytest.CaptureFixture[str], name: str
) -> None:
    first, second = two_tiles
    store = tmp_path / name
    assert _run(capsys, "build", first, "--out", store)[0] == EXIT_OK
    np.testing.assert_array_equal(_read(store), _native(first))
    code, _, err = _run(capsys, "build", second, "--out", store, "--overwrite")
    assert code == EXIT_OK, err
    np.testing.assert_array_equal(_read(store), _native(second))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "tiles"])


def test_a_build_failing_at_its_second_file_leaves_the_old_store(
    tmp_path: Path, two_tiles: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = two_tiles
    store = tmp_path / "repo.icechunk"
    assert _run(capsys, "build", first, "--out", store)[0] == EXIT_OK
    before = _read(store)
    bad = tmp_path / "bad.tif"
    bad.write_bytes(second.read_bytes()[:200])  # a truncated copy
    code, _, err = _run(capsys, "build", second, bad, "--out", store, "--overwrite")
    assert code == EXIT_BAD_INPUT
    assert "bad.tif" in _error_line(err)
    np.testing.assert_array_equal(_read(store), before)
    np.testing.assert_array_equal(before, _native(first))


def test_a_build_failing_while_writing_leaves_the_old_references(
    tmp_path: Path, write_tiles: Tiles, capsys: pytest.CaptureFixture[str]
) -> None:
    tiled = sorted(write_tiles(tmp_path / "tiled", tiled=True))[0]
    refs = tmp_path / "refs.json"
    assert _run(capsys, "build", tiled, "--out", refs)[0] == EXIT_OK
    before = refs.read_bytes()
    # pixel-interleaved strips need a transpose codec, which Zarr format 2 lacks: the
    # refusal comes from the writer, after parsing and combining
    strips = write_tiles(tmp_path / "strips")[0]
    code, _, err = _run(
        capsys, "build", strips, "--out", refs, "--overwrite", "--kerchunk-format", "2"
    )
    assert code == EXIT_BAD_INPUT
    assert "Zarr format 2" in _error_line(err)
    assert refs.read_bytes() == before
    np.testing.assert_array_equal(_read(refs), _native(tiled))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.json", "strips", "tiled"]


def test_overviews_build_refuses_a_users_folder_and_replaces_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fixtures import make_tiff_fixtures

    cog = make_tiff_fixtures.write_fixtures(tmp_path / "cog", ["gdal_cog_overviews_mask"])[
        "gdal_cog_overviews_mask"
    ]
    mydata = tmp_path / "mydata"
    mydata.mkdir()
    (mydata / "notes.txt").write_text("important")
    code, _, err = _run(capsys, "build", cog, "--overviews", "--out", mydata, "--overwrite")
    assert code == EXIT_USAGE and "notes.txt" in _error_line(err)
    assert (mydata / "notes.txt").read_text() == "important"

    repo = tmp_path / "pyramid.icechunk"
    assert _run(capsys, "build", cog, "--overviews", "--out", repo)[0] == EXIT_OK
    code, _, err = _run(capsys, "build", cog, "--overviews", "--out", repo, "--overwrite")
    assert code == EXIT_OK, err


@pytest.mark.parametrize(
    ("name", "make", "expected"),
    [
        ("repo", "file", "is a file, not an Icechunk repository"),
        ("refs.json", "directory", "is a directory, not kerchunk JSON references"),
        ("refs.parquet", "file", "is a file, not kerchunk parquet references"),
    ],
)
def test_another_kind_of_thing_at_the_destination_is_not_replaced(
    tmp_path: Path,
    two_tiles: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    name: str,
    make: str,
    expected: str,
) -> None:
    target = tmp_path / name
    if make == "file":
        target.write_text("important")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("important")
    code, _, err = _run(capsys, "build", two_tiles[0], "--out", target, "--overwrite")
    assert code == EXIT_USAGE and expected in _error_line(err)
    kept = target if make == "file" else target / "notes.txt"
    assert kept.read_text() == "important"
