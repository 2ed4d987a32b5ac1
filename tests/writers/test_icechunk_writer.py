"""virtualizarr_fill.to_icechunk for rectilinear arrays, and appends that keep padded edges out.

A real Icechunk repository on local disk, with a virtual chunk container authorised for
the fixture directory; values are read back with ``xr.open_zarr(session.store)`` and
compared with the native readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.core.metadata.v3 import (
    ArrayV3Metadata,
    RectilinearChunkGridMetadata,
    RegularChunkGridMetadata,
)

from tests._manifest_builders import (
    ROUND_TRIP_CASES,
    concat_fixtures,
    hdf5_manifest_array,
    icechunk_read,
    icechunk_repo,
    icechunk_write,
    native_hdf5,
    native_tiff,
    round_trip_case,
    tiff_manifest_array,
    virtual_dataset,
    with_attributes,
)
from virtualizarr_fill.codecs import CropCodec, TruncateCodec
from virtualizarr_fill.errors import IncompatibleArraysError, UnsupportedFeatureError

__all__ = ["concat_fixtures"]


def _fixture_dir(fx: dict[str, Path]) -> Path:
    return next(iter(fx.values())).parent


def _tiff_vds(fx: dict[str, Path], name: str) -> xr.Dataset:
    return virtual_dataset({"band": tiff_manifest_array(fx[name])})


def _stored(repo: Any, name: str) -> ArrayV3Metadata:
    """The metadata of the array ``name`` as stored in the repository."""
    session = repo.readonly_session("main")
    metadata = zarr.open_array(session.store, path=name, mode="r", zarr_format=3).metadata
    assert isinstance(metadata, ArrayV3Metadata)
    return metadata


def test_rectilinear_array_round_trip(concat_fixtures: dict[str, Path], tmp_path: Path) -> None:
    names = ["strip_padded_zlib_0", "strip_short_zlib_1", "strip_padded_zlib_2"]
    vds = xr.concat([_tiff_vds(concat_fixtures, n) for n in names], dim="y")
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, vds)

    stored = _stored(repo, "band")
    grid = stored.chunk_grid
    assert isinstance(grid, RectilinearChunkGridMetadata)
    # every axis as explicit edges (Icechunk format 2 refuses the bare-integer form)
    assert all(isinstance(edges, tuple) for edges in grid.chunk_shapes)
    assert grid.chunk_shapes[0][:14] == (12,) * 12 + (6, 12)  # type: ignore[index]
    assert TruncateCodec() in stored.codecs
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    np.testing.assert_array_equal(icechunk_read(repo).band.values, expected)


def _described(vds: xr.Dataset) -> xr.Dataset:
    """``vds`` with attributes and a CF encoding on its band."""
    band = vds.band.assign_attrs(units="K", long_name="brightness", valid_range=[0, 250])
    band.encoding = {"scale_factor": 0.5, "add_offset": -10.0, "dtype": "uint8"}
    return vds.assign(band=band)


def test_rectilinear_document_is_compact_and_described_as_virtualizarr_does(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    """A rectilinear array's document is written once, without indentation (its edges
    are a number each), and carries the attributes VirtualiZarr's own writer gives a
    regular array of the same variable."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype

    names = ["strip_padded_zlib_0", "strip_short_zlib_1", "strip_padded_zlib_2"]
    rectilinear = xr.concat([_tiff_vds(concat_fixtures, n) for n in names], dim="y")
    ours = icechunk_repo(tmp_path / "ours", _fixture_dir(concat_fixtures))
    icechunk_write(ours, _described(rectilinear))
    theirs = icechunk_repo(tmp_path / "theirs", _fixture_dir(concat_fixtures))
    icechunk_write(theirs, _described(_tiff_vds(concat_fixtures, "strip_padded_1")))

    assert isinstance(_stored(ours, "band").chunk_grid, RectilinearChunkGridMetadata)
    assert isinstance(_stored(theirs, "band").chunk_grid, RegularChunkGridMetadata)
    assert _stored(ours, "band").attributes == _stored(theirs, "band").attributes
    assert _stored(ours, "band").attributes["scale_factor"] == 0.5
    store = ours.readonly_session("main").store
    document = asyncio.run(store.get("band/zarr.json", default_buffer_prototype()))
    assert b"\n" not in document.to_bytes() and b", " not in document.to_bytes()
    read = icechunk_read(ours).band
    assert read.attrs["units"] == "K" and read.encoding["scale_factor"] == 0.5


def test_hdf5_crop_round_trip(concat_fixtures: dict[str, Path], tmp_path: Path) -> None:
    paths = [concat_fixtures[f"chunked_gzip_{k}"] for k in range(3)]
    vds = xr.concat([virtual_dataset({"data": hdf5_manifest_array(p)}) for p in paths], dim="x")
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, vds)
    assert CropCodec(stored_shape=(10, 4, 4)) in _stored(repo, "data").codecs
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=2)
    np.testing.assert_array_equal(icechunk_read(repo).data.values, expected)


def test_regular_arrays_stay_regular(concat_fixtures: dict[str, Path], tmp_path: Path) -> None:
    vds = _tiff_vds(concat_fixtures, "strip_padded_1")
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, vds)
    assert isinstance(_stored(repo, "band").chunk_grid, RegularChunkGridMetadata)
    np.testing.assert_array_equal(
        icechunk_read(repo).band.values, native_tiff(concat_fixtures["strip_padded_1"])
    )


def test_references_written_in_slabs(
    concat_fixtures: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large array's references go to Icechunk a slab at a time (bounding the list of
    paths the writer makes): each slab lands at its own chunk index, new and appended."""
    from virtualizarr_fill.writers import icechunk as writer

    monkeypatch.setattr(writer, "REFERENCES_PER_CALL", 5)
    names = ["strip_padded_zlib_0", "strip_short_zlib_1", "strip_padded_zlib_2"]
    vds = xr.concat([_tiff_vds(concat_fixtures, n) for n in names], dim="y")
    pieces = list(writer.manifest_slabs(vds.band.data.manifest))
    assert len(pieces) > 3 and [p[1][0] for p in pieces] == list(range(0, 5 * len(pieces), 5))
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, vds)
    icechunk_write(repo, _tiff_vds(concat_fixtures, names[0]), append_dim="y")
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in [*names, names[0]]])
    np.testing.assert_array_equal(icechunk_read(repo).band.values, expected)


def test_append_cuts_the_overhanging_edge(concat_fixtures: dict[str, Path], tmp_path: Path) -> None:
    names = ["strip_padded_0", "strip_short_1", "strip_padded_2", "strip_padded_1"]
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, _tiff_vds(concat_fixtures, names[0]))
    for name in names[1:]:
        icechunk_write(repo, _tiff_vds(concat_fixtures, name), append_dim="y")

    stored = _stored(repo, "band")
    assert isinstance(stored.chunk_grid, RectilinearChunkGridMetadata)
    edges = stored.chunk_grid.chunk_shapes[0]
    # each file's 6-row last strip is its own edge; only the very last chunk overhangs
    assert edges == ((12,) * 12 + (6,)) * 3 + (12,) * 13
    assert TruncateCodec() in stored.codecs
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    values = icechunk_read(repo).band.values
    np.testing.assert_array_equal(values, expected)
    assert values.shape == (600, 21)


def test_append_of_chunk_multiples_stays_regular(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    first = _tiff_vds(concat_fixtures, "strip_short_0").isel(y=slice(0, 144))
    icechunk_write(repo, first)
    icechunk_write(repo, _tiff_vds(concat_fixtures, "strip_padded_1"), append_dim="y")
    stored = _stored(repo, "band")
    assert isinstance(stored.chunk_grid, RegularChunkGridMetadata)
    assert stored.codecs == (stored.codecs[0],)  # bytes only
    expected = np.concatenate(
        [
            native_tiff(concat_fixtures["strip_short_0"])[:144],
            native_tiff(concat_fixtures["strip_padded_1"]),
        ]
    )
    np.testing.assert_array_equal(icechunk_read(repo).band.values, expected)


def test_append_along_a_new_stack_dimension(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    names = ["strip_short_0", "strip_padded_1", "strip_short_2"]
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, _tiff_vds(concat_fixtures, names[0]).expand_dims("t"))
    for name in names[1:]:
        icechunk_write(repo, _tiff_vds(concat_fixtures, name).expand_dims("t"), append_dim="t")
    expected = np.stack([native_tiff(concat_fixtures[n]) for n in names])
    np.testing.assert_array_equal(icechunk_read(repo).band.values, expected)


def test_incompatible_appends_are_refused_before_writing(
    concat_fixtures: dict[str, Path], tmp_path: Path
) -> None:
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, _tiff_vds(concat_fixtures, "strip_short_0"))
    with pytest.raises(IncompatibleArraysError, match="different codecs"):
        icechunk_write(repo, _tiff_vds(concat_fixtures, "strip_short_zlib_1"), append_dim="y")
    marked = virtual_dataset(
        {
            "band": with_attributes(
                tiff_manifest_array(concat_fixtures["strip_short_1"]), _FillValue=5
            )
        }
    )
    with pytest.raises(IncompatibleArraysError, match="_FillValue"):
        icechunk_write(repo, marked, append_dim="y")
    with pytest.raises(UnsupportedFeatureError, match="region"):
        icechunk_write(repo, _tiff_vds(concat_fixtures, "strip_short_1"), region="auto")
    np.testing.assert_array_equal(
        icechunk_read(repo).band.values, native_tiff(concat_fixtures["strip_short_0"])
    )


@pytest.mark.corpus
def test_corpus_landsat_appends(corpus_dir: Path, tmp_path: Path) -> None:
    path = (
        corpus_dir
        / "cogeotiff+rio-tiler-pds"
        / "LC08_L2SP_001062_20201031_20201106_02_T2_QA_RADSAT.TIF"
    )
    vds = virtual_dataset({"qa": tiff_manifest_array(path)})
    repo = icechunk_repo(tmp_path / "repo", path.parent)
    icechunk_write(repo, vds)
    icechunk_write(repo, vds, append_dim="y")
    native = native_tiff(path)
    np.testing.assert_array_equal(icechunk_read(repo).qa.values, np.concatenate([native, native]))


@pytest.mark.parametrize("case", ROUND_TRIP_CASES)
def test_round_trips(concat_fixtures: dict[str, Path], tmp_path: Path, case: str) -> None:
    vds, name, expected = round_trip_case(concat_fixtures, case)
    repo = icechunk_repo(tmp_path / "repo", _fixture_dir(concat_fixtures))
    icechunk_write(repo, vds)
    read = icechunk_read(repo)[name]
    assert read.dims == vds[name].dims
    np.testing.assert_array_equal(read.values, expected)


def test_repository_manifests_split(
    concat_fixtures: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository made by ``create_repository`` splits each array's references over
    several manifest files (bounding a large commit's memory); the values read back are
    the files' own."""
    from virtualizarr_fill.writers import repository

    monkeypatch.setattr(repository, "MANIFEST_SPLIT_SIZE", 4)
    names = ["strip_padded_zlib_0", "strip_short_zlib_1", "strip_padded_zlib_2"]
    paths = [concat_fixtures[n] for n in names]
    repo = repository.create_repository(tmp_path / "repo", [p.as_uri() for p in paths])
    vds = xr.concat([_tiff_vds(concat_fixtures, n) for n in names], dim="y")
    chunks = vds.band.data.manifest.shape_chunk_grid[0]
    icechunk_write(repo, vds)
    manifests = list((tmp_path / "repo" / "manifests").iterdir())
    assert len(manifests) >= -(-chunks // 4)
    expected = np.concatenate([native_tiff(p) for p in paths])
    read = repository.open_repository(tmp_path / "repo")
    np.testing.assert_array_equal(icechunk_read(read).band.values, expected)


def test_repository_containers_name_each_bucket_and_the_common_directory_once(
    tmp_path: Path,
) -> None:
    """The virtual chunk containers of a new repository: the directory every local file
    lies under, and each S3 bucket, once, however many files name them."""
    from virtualizarr_fill.writers import repository

    data = tmp_path / "data"
    local = [f"{(data / '2020' / f'a{i}.tif').as_uri()}" for i in range(3)]
    local.append((data / "2021" / "b.tif").as_uri())
    buckets = ["s3://bucket-b/x.tif", "s3://bucket-a/y.tif", "s3://bucket-b/z/w.tif"]
    repo = repository.create_repository(tmp_path / "repo", [*local, *buckets])
    containers = set(repo.config.virtual_chunk_containers)
    assert containers == {f"file://{data}/", "s3://bucket-a/", "s3://bucket-b/"}
