"""What ``build`` keeps of each file while parsing many: the parts the combination
needs, and of each file's report only its refusals (its array reports, sentences
describing the parser's decisions, would outweigh the file's chunk references)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.merge

from tests._cli import run_cli
from tests._native_references import rasterio_merge
from tests.assemble.test_assemble import _georeferenced_strips
from virtualizarr_fill.cli._combine import Combination, Plan
from virtualizarr_fill.cli._inputs import expand_inputs
from virtualizarr_fill.cli._parse import parse_file, parser_from_options
from virtualizarr_fill.cli.build import _parse_into


def test_parsing_keeps_no_array_report_of_any_file(tmp_path: Path) -> None:
    paths = sorted(_georeferenced_strips(tmp_path, 4, shuffle=False))
    urls = expand_inputs([str(p) for p in paths])
    parser = parser_from_options({}, {})
    # each file's own report does describe its array: the build drops it
    assert parse_file(urls[0], parser).report.arrays
    args = argparse.Namespace(
        dask_scheduler=None,
        workers=0,
        inputs=[str(p) for p in paths],
        worker_memory=1.0,
        skip_bad=False,
    )
    combination = Combination(Plan("mosaic"), urls)
    parsed = _parse_into(combination, urls, parser, args)
    assert parsed.used == urls and combination.files == len(paths)
    assert parsed.report.arrays == [] and parsed.report.refusals == []


def test_mosaic_built_from_the_kept_parts_reads_as_rasterio_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import virtualizarr_fill

    (tmp_path / "tiles").mkdir()
    paths = sorted(_georeferenced_strips(tmp_path / "tiles", 5, shuffle=False))
    code, out, _ = run_cli(capsys, "build", *paths, "--mosaic", "--out", tmp_path / "m.icechunk")
    assert code == 0, out
    assert "files:     5 virtualized" in out
    expected, _ = rasterio_merge(paths)
    ds = virtualizarr_fill.open_icechunk(str(tmp_path / "m.icechunk"))
    np.testing.assert_array_equal(ds["band_data"].values, expected)


def test_combined_coordinates_are_one_compressed_chunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tiles store their pixel centres uncompressed; the mosaic's ``y`` (millions of
    values for a column of many tiles, read at every open) is one chunk, compressed with
    zarr's default, and holds rasterio's pixel centres."""
    import icechunk
    import zarr
    from rasterio.transform import xy

    (tmp_path / "tiles").mkdir()
    paths = sorted(_georeferenced_strips(tmp_path / "tiles", 5, shuffle=False))
    code, out, _ = run_cli(capsys, "build", *paths, "--mosaic", "--out", tmp_path / "m.icechunk")
    assert code == 0, out
    with rasterio.open(paths[0]) as first:
        assert first.profile.get("compress") == "deflate"  # (the image, not the centres)
    merged, transform = rasterio_merge(paths)
    rows = np.arange(merged.shape[1])
    _, expected_y = xy(transform, rows, np.zeros_like(rows))
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "m.icechunk")))
    y = zarr.open_array(repo.readonly_session("main").store, path="y", mode="r")
    assert y.chunks == y.shape == (merged.shape[1],)
    assert [type(c).__name__ for c in y.compressors] == ["ZstdCodec"]
    np.testing.assert_array_equal(y[:], np.asarray(expected_y))


def test_combined_dataset_is_freed_before_the_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Icechunk commit, the write's peak, runs once the combined dataset is gone:
    the writer holds the only reference and drops it once Icechunk has the references.
    The summary printed afterwards still describes the arrays written."""
    import weakref

    from virtualizarr_fill.cli import _combine, _write

    combined: list[weakref.ref[object]] = []
    alive_at_commit: list[bool] = []
    result, commit = _combine.Combination.result, _write._commit

    def recording_result(self: Combination) -> object:
        dataset = result(self)
        combined.append(weakref.ref(dataset))
        return dataset

    def observed_commit(*args: object) -> str:
        alive_at_commit.append(combined[0]() is not None)
        return commit(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_combine.Combination, "result", recording_result)
    monkeypatch.setattr(_write, "_commit", observed_commit)
    (tmp_path / "tiles").mkdir()
    paths = sorted(_georeferenced_strips(tmp_path / "tiles", 3, shuffle=False))
    code, out, _ = run_cli(capsys, "build", *paths, "--mosaic", "--out", tmp_path / "m.icechunk")
    assert code == 0, out
    assert alive_at_commit == [False]
    assert "files:     3 virtualized" in out and "band_data 1x" in out and "(loaded)" in out


def test_a_handoff_is_taken_once() -> None:
    from virtualizarr_fill.cli._memory import Handoff

    handoff = Handoff([1, 2])
    assert handoff.take() == [1, 2]
    with pytest.raises(RuntimeError, match="already taken"):
        handoff.take()


def test_build_imports_nothing_from_a_thread_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Modules that import each other cannot be imported from two threads at once
    (Python hands one thread the other's half-initialized module: an ImportError the
    build reported as an internal error): the build starts no thread of its own."""
    import threading

    started: list[str] = []
    start = threading.Thread.start

    def recording_start(self: threading.Thread) -> None:
        target = getattr(self, "_target", None)
        started.append(f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', '')}")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    (tmp_path / "tiles").mkdir()
    paths = sorted(_georeferenced_strips(tmp_path / "tiles", 2, shuffle=False))
    code, out, _ = run_cli(capsys, "build", *paths, "--mosaic", "--out", tmp_path / "m.icechunk")
    assert code == 0, out
    assert not [name for name in started if name.startswith("virtualizarr_fill.cli")]
