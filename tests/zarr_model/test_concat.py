"""np.concatenate / np.stack of FillManifestArrays for real files.

Every result is read back through ManifestStore and compared value for value with
numpy's concatenation of the native reads (tifffile / GDAL for TIFF, h5py for HDF5).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from virtualizarr.manifests import ManifestArray
from zarr.codecs import BytesCodec, TransposeCodec
from zarr.codecs.numcodecs import Zlib
from zarr.core.metadata.v3 import (
    ArrayV3Metadata,
    RectilinearChunkGridMetadata,
    RegularChunkGridMetadata,
)
from zarr.dtype import parse_data_type

from tests._manifest_builders import (
    concat_fixtures,
    concatenate,
    hdf5_manifest_array,
    native_hdf5,
    native_tiff,
    read_manifest_array,
    stack,
    tiff_manifest_array,
    with_attributes,
    with_codecs,
    with_edge_codec,
)
from virtualizarr_fill.codecs import CropCodec, TruncateCodec
from virtualizarr_fill.errors import ChunkSizeMismatchError, IncompatibleArraysError
from virtualizarr_fill.fill import FillValueWarning
from virtualizarr_fill.fill.conflicts import fill_conflicts
from virtualizarr_fill.manifests import FillManifestArray
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, codec_edges
from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, edge_handling_of
from virtualizarr_fill.zarr_model.merges import concatenation_metadata, stack_metadata

__all__ = ["concat_fixtures"]


def _edge_codec(marr: ManifestArray) -> EdgeHandling:
    return edge_handling_of(marr.metadata.codecs)


def _edges(marr: ManifestArray, axis: int) -> tuple[int, ...]:
    return codec_edges(chunk_grid(marr.metadata).dimensions[axis])


def _tiffs(fx: dict[str, Path], names: list[str]) -> tuple[list[ManifestArray], list[np.ndarray]]:
    return [tiff_manifest_array(fx[n]) for n in names], [native_tiff(fx[n]) for n in names]


# --------------------------------------------------------------------------- TIFF strips


@pytest.mark.parametrize(
    ("names", "edge"),
    [
        (["strip_short_0", "strip_short_1"], EdgeHandling.NONE),
        (["strip_padded_0", "strip_padded_1"], EdgeHandling.TRUNCATE),
        (["strip_padded_0", "strip_short_1", "strip_padded_2"], EdgeHandling.TRUNCATE),
        (["strip_short_0", "strip_padded_1"], EdgeHandling.NONE),
        (
            ["strip_short_zlib_0", "strip_padded_zlib_1", "strip_short_zlib_2"],
            EdgeHandling.TRUNCATE,
        ),
        (["strip_padded_zlib_0", "strip_padded_zlib_1"], EdgeHandling.TRUNCATE),
    ],
)
def test_concatenate_strip_tiffs_along_y(
    concat_fixtures: dict[str, Path], names: list[str], edge: EdgeHandling
) -> None:
    arrays, natives = _tiffs(concat_fixtures, names)
    result = concatenate(arrays, axis=0)
    assert isinstance(result.metadata.chunk_grid, RectilinearChunkGridMetadata)
    # every input keeps its strips: 12 x 12 rows then its 6-row last strip
    assert _edges(result, 0)[:13] == (12,) * 12 + (6,)
    assert len(_edges(result, 0)) == 13 * len(names)
    assert _edge_codec(result) is edge
    np.testing.assert_array_equal(read_manifest_array(result), np.concatenate(natives))


def test_padded_last_input_needs_no_codec_and_overhangs(concat_fixtures: dict[str, Path]) -> None:
    arrays, natives = _tiffs(concat_fixtures, ["strip_short_0", "strip_padded_1"])
    result = concatenate(arrays, axis=0)
    # the final padded strip stays a 12-row chunk overhanging the array: nothing to trim
    assert _edges(result, 0)[-1] == 12
    assert result.metadata.codecs == arrays[0].metadata.codecs
    np.testing.assert_array_equal(read_manifest_array(result), np.concatenate(natives))


def test_truncation_is_what_makes_padded_interior_strips_correct(
    concat_fixtures: dict[str, Path],
) -> None:
    arrays, natives = _tiffs(concat_fixtures, ["strip_padded_0", "strip_padded_1"])
    result = concatenate(arrays, axis=0)
    broken = with_edge_codec(result, EdgeHandling.NONE)
    with pytest.raises(ValueError):  # the padded 12-row strip cannot be read as 6 rows
        read_manifest_array(broken)
    np.testing.assert_array_equal(read_manifest_array(result), np.concatenate(natives))


def test_chunk_multiple_lengths_stay_regular(concat_fixtures: dict[str, Path]) -> None:
    arrays, natives = _tiffs(concat_fixtures, ["strip_padded_0", "strip_short_1", "strip_padded_2"])
    pieces = [arrays[0][:144, :], arrays[1][:144, :], arrays[2]]
    result = concatenate(pieces, axis=0)
    assert isinstance(result.metadata.chunk_grid, RegularChunkGridMetadata)
    assert result.metadata.chunk_grid.chunk_shape == (12, 21)
    assert _edge_codec(result) is EdgeHandling.NONE
    expected = np.concatenate([natives[0][:144], natives[1][:144], natives[2]])
    np.testing.assert_array_equal(read_manifest_array(result), expected)


def test_regular_concatenation_matches_virtualizarr(concat_fixtures: dict[str, Path]) -> None:
    arrays, _ = _tiffs(concat_fixtures, ["strip_padded_0", "strip_padded_1"])
    pieces = [arrays[0][:144, :], arrays[1]]
    ours = concatenate(pieces, axis=0)
    # VirtualiZarr's own concatenation, of its own arrays
    plain = [ManifestArray(metadata=p.metadata, chunkmanifest=p.manifest) for p in pieces]
    upstream = np.concatenate(plain, axis=0)  # type: ignore[call-overload]
    assert type(upstream) is ManifestArray
    assert ours.metadata == upstream.metadata
    assert ours.manifest == upstream.manifest


def test_stack_strip_tiffs(concat_fixtures: dict[str, Path]) -> None:
    arrays, natives = _tiffs(concat_fixtures, ["strip_padded_0", "strip_padded_1"])
    regular = stack(arrays, axis=0)
    assert isinstance(regular.metadata.chunk_grid, RegularChunkGridMetadata)
    assert _edge_codec(regular) is EdgeHandling.NONE
    np.testing.assert_array_equal(read_manifest_array(regular), np.stack(natives))

    arrays, natives = _tiffs(concat_fixtures, ["strip_short_0", "strip_padded_1", "strip_short_2"])
    mixed = stack(arrays, axis=1)
    assert mixed.shape == (150, 3, 21)
    assert _edges(mixed, 0)[-1] == 6 and _edges(mixed, 1) == (1, 1, 1)
    assert _edge_codec(mixed) is EdgeHandling.TRUNCATE
    np.testing.assert_array_equal(read_manifest_array(mixed), np.stack(natives, axis=1))


# --------------------------------------------------------------------------- TIFF tiles


def test_tiles_along_y_truncate_and_along_x_crop(concat_fixtures: dict[str, Path]) -> None:
    arrays, natives = _tiffs(concat_fixtures, ["tiled_0", "tiled_1"])
    along_y = concatenate(arrays, axis=0)
    assert _edge_codec(along_y) is EdgeHandling.TRUNCATE
    np.testing.assert_array_equal(read_manifest_array(along_y), np.concatenate(natives, axis=0))

    along_x = concatenate(arrays, axis=1)
    assert _edge_codec(along_x) is EdgeHandling.CROP
    assert CropCodec(stored_shape=(16, 16)) in along_x.metadata.codecs
    np.testing.assert_array_equal(read_manifest_array(along_x), np.concatenate(natives, axis=1))

    # truncation here would read padding as data: the values differ
    wrong = read_manifest_array(with_edge_codec(along_x, EdgeHandling.TRUNCATE))
    assert not np.array_equal(wrong, np.concatenate(natives, axis=1))


def test_tile_mosaic_inner_axis_first(concat_fixtures: dict[str, Path]) -> None:
    arrays, natives = _tiffs(concat_fixtures, ["tiled_0", "tiled_1", "tiled_2"])
    rows = [
        concatenate([arrays[0], arrays[1]], axis=1),
        concatenate([arrays[2], arrays[0]], axis=1),
    ]
    mosaic = concatenate(rows, axis=0)
    expected = np.concatenate(
        [np.concatenate(natives[:2], axis=1), np.concatenate([natives[2], natives[0]], axis=1)]
    )
    assert _edge_codec(mosaic) is EdgeHandling.CROP
    np.testing.assert_array_equal(read_manifest_array(mosaic), expected)


def test_truncated_then_inner_axis_is_refused(concat_fixtures: dict[str, Path]) -> None:
    arrays, _ = _tiffs(concat_fixtures, ["tiled_0", "tiled_1"])
    columns = concatenate(arrays, axis=0)  # truncate: stored sizes no longer known
    with pytest.raises(IncompatibleArraysError, match="unknown stored size"):
        concatenate([columns, columns], axis=1)


# --------------------------------------------------------------------------- HDF5


@pytest.mark.parametrize("family", ["chunked", "chunked_gzip"])
@pytest.mark.parametrize(
    ("axis", "edge"), [(0, EdgeHandling.TRUNCATE), (1, EdgeHandling.CROP), (2, EdgeHandling.CROP)]
)
def test_concatenate_hdf5(
    concat_fixtures: dict[str, Path], family: str, axis: int, edge: EdgeHandling
) -> None:
    paths = [concat_fixtures[f"{family}_{k}"] for k in range(3)]
    result = concatenate([hdf5_manifest_array(p) for p in paths], axis=axis)
    assert _edge_codec(result) is edge
    if edge is EdgeHandling.CROP:
        assert CropCodec(stored_shape=(10, 4, 4)) in result.metadata.codecs
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=axis)
    np.testing.assert_array_equal(read_manifest_array(result), expected)


def test_stack_hdf5_and_unwritten_chunks(concat_fixtures: dict[str, Path]) -> None:
    paths = [concat_fixtures[f"chunked_fill_{k}"] for k in range(2)]
    arrays = [hdf5_manifest_array(p) for p in paths]
    natives = [native_hdf5(p) for p in paths]
    assert (natives[0][:10, :4, :4] == -9999.0).all()  # the unwritten chunk reads as fill
    stacked = stack(arrays, axis=2)
    assert stacked.metadata.fill_value == -9999.0
    np.testing.assert_array_equal(read_manifest_array(stacked), np.stack(natives, axis=2))
    inner = concatenate(arrays, axis=1)
    np.testing.assert_array_equal(read_manifest_array(inner), np.concatenate(natives, axis=1))


def test_hdf5_mosaic_inner_axis_first(concat_fixtures: dict[str, Path]) -> None:
    paths = [concat_fixtures[f"chunked_gzip_{k}"] for k in range(3)]
    arrays = [hdf5_manifest_array(p) for p in paths]
    natives = [native_hdf5(p) for p in paths]
    rows = [concatenate(arrays[:2], axis=2), concatenate(arrays[1:], axis=2)]
    result = concatenate([concatenate(rows, axis=1), concatenate(rows, axis=1)], axis=0)
    expected_rows = [np.concatenate(natives[:2], axis=2), np.concatenate(natives[1:], axis=2)]
    expected_plane = np.concatenate(expected_rows, axis=1)
    expected = np.concatenate([expected_plane, expected_plane], axis=0)
    np.testing.assert_array_equal(read_manifest_array(result), expected)


# --------------------------------------------------------------------------- corpus


@pytest.mark.corpus
def test_corpus_padded_and_short_strip_tiffs(corpus_dir: Path) -> None:
    pds = corpus_dir / "cogeotiff+rio-tiler-pds"
    padded = pds / "LC08_L2SP_001062_20201031_20201106_02_T2_QA_RADSAT.TIF"
    short = pds / "CBERS_4_MUX_20171121_057_094_L2_BAND5.tif"

    landsat = tiff_manifest_array(padded)
    assert isinstance(landsat.metadata.chunk_grid, RegularChunkGridMetadata)  # padded: regular
    result = concatenate([landsat, landsat, landsat], axis=0)
    assert _edge_codec(result) is EdgeHandling.TRUNCATE
    native = native_tiff(padded)
    np.testing.assert_array_equal(read_manifest_array(result), np.concatenate([native] * 3))
    np.testing.assert_array_equal(
        read_manifest_array(stack([landsat, landsat])), np.stack([native, native])
    )

    cbers = tiff_manifest_array(short)
    assert isinstance(cbers.metadata.chunk_grid, RectilinearChunkGridMetadata)  # short: explicit
    result = concatenate([cbers, cbers], axis=0)
    assert _edge_codec(result) is EdgeHandling.NONE
    native = native_tiff(short)
    np.testing.assert_array_equal(read_manifest_array(result), np.concatenate([native] * 2))


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("relative", "name"),
    [
        ("jjhelmus+pyfive/compressed_v1.hdf5", "temperature"),
        ("nasa+harmony-trajectory-subsetter/ATL03_indexbegin_start_end_FVs.h5", "ph_index_beg"),
    ],
)
def test_corpus_hdf5_partial_edge(corpus_dir: Path, relative: str, name: str) -> None:
    path = corpus_dir / relative
    marr = hdf5_manifest_array(path, name, dimension_names=("n",))
    result = concatenate([marr, marr], axis=0)
    assert _edge_codec(result) is EdgeHandling.TRUNCATE
    native = native_hdf5(path, name)
    np.testing.assert_array_equal(read_manifest_array(result), np.concatenate([native, native]))


# --------------------------------------------------------------------------- refusals


def test_different_codecs_are_named(concat_fixtures: dict[str, Path]) -> None:
    arrays, _ = _tiffs(concat_fixtures, ["strip_short_0", "strip_short_zlib_1"])
    with pytest.raises(IncompatibleArraysError, match=r"different codecs") as info:
        concatenate(arrays, axis=0)
    assert "strip_short_0.tif" in str(info.value) and "strip_short_zlib_1.tif" in str(info.value)
    assert "numcodecs.zlib" in str(info.value)


def test_different_codec_settings_are_named(concat_fixtures: dict[str, Path]) -> None:
    a = hdf5_manifest_array(concat_fixtures["chunked_gzip_0"])
    b = hdf5_manifest_array(concat_fixtures["chunked_gzip_1"])
    b = with_codecs(b, [Zlib(level=9) if isinstance(c, Zlib) else c for c in b.metadata.codecs])
    with pytest.raises(IncompatibleArraysError, match=r'"level":4.*"level":9'):
        concatenate([a, b], axis=0)


def test_different_edges_on_other_axis() -> None:
    a = _md((150, 21), (12, 21), [BytesCodec()])
    b = _md((150, 21), (10, 21), [BytesCodec()])
    with pytest.raises(
        IncompatibleArraysError, match=r"chunk edges on axis 0.*\[12x12, 6\] vs \[10x15\]"
    ):
        concatenation_metadata([a, b], axis=1)
    with pytest.raises(IncompatibleArraysError, match=r"chunk edges on axis 0"):
        stack_metadata([a, b], axis=0)


def test_different_dtypes_fill_values_and_fill_attributes(concat_fixtures: dict[str, Path]) -> None:
    a = hdf5_manifest_array(concat_fixtures["chunked_0"])
    fill = hdf5_manifest_array(concat_fixtures["chunked_fill_0"])
    with pytest.raises(IncompatibleArraysError, match=r"fill_value differs") as info:
        concatenate([a, fill], axis=0)
    assert "chunked_0.h5" in str(info.value) and "chunked_fill_0.h5" in str(info.value)
    assert "-9999" in str(info.value)

    tiff = tiff_manifest_array(concat_fixtures["strip_short_0"])
    other = tiff_manifest_array(concat_fixtures["strip_short_1"])
    with pytest.raises(
        IncompatibleArraysError, match=r"different data types \(uint16 vs float32\)"
    ):
        concatenate([tiff, _as_float32(other)], axis=0)

    marked = with_attributes(other, _FillValue=7)
    with pytest.raises(IncompatibleArraysError, match=r"_FillValue differs") as info:
        concatenate([tiff, marked], axis=0)
    assert "strip_short_1.tif" in str(info.value)
    with pytest.raises(IncompatibleArraysError, match=r"missing_value differs"):
        stack([with_attributes(tiff, missing_value=1), with_attributes(other, missing_value=2)])
    # the user can opt in to a combination; it warns about what is no longer masked
    with fill_conflicts("use_first"), pytest.warns(FillValueWarning):
        combined = concatenate([with_attributes(tiff, _FillValue=3), marked], axis=0)
    assert "_FillValue" in combined.metadata.attributes
    agreed = concatenate([with_attributes(tiff, _FillValue=7), marked], axis=0)
    assert agreed.metadata.attributes["_FillValue"] == 7


def _as_float32(marr: ManifestArray) -> ManifestArray:
    metadata = dataclasses.replace(
        marr.metadata, data_type=parse_data_type(np.dtype("f4"), zarr_format=3), fill_value=0.0
    )
    return FillManifestArray(metadata=metadata, chunkmanifest=marr.manifest)


def _md(
    shape: tuple[int, ...], chunks: tuple[int | tuple[int, ...], ...], codecs: list[Any]
) -> ArrayV3Metadata:
    grid: Any
    if all(isinstance(c, int) for c in chunks):
        grid = {"name": "regular", "configuration": {"chunk_shape": chunks}}
    else:
        grid = RectilinearChunkGridMetadata(chunk_shapes=chunks)
    return ArrayV3Metadata(
        shape=shape,
        data_type=parse_data_type(np.dtype("u2"), zarr_format=3),
        chunk_grid=grid,
        chunk_key_encoding={"name": "default"},
        fill_value=0,
        codecs=codecs,
        attributes={},
        dimension_names=None,
    )


def test_truncate_and_crop_of_one_stored_shape_merge_into_crop() -> None:
    # A: regular (4, 4) chunks of a (6, 6) array, stored padded on both axes.
    # B: explicit y edges [4, 2] (its last row of chunks stored short).
    a = _md((6, 6), (4, 4), [BytesCodec()])
    b = _md((6, 6), ((4, 2), 4), [BytesCodec()])
    merged = concatenation_metadata([a, b], axis=1)
    # A's y-boundary chunks need truncation, its x-boundary chunks a crop, both from (4, 4)
    assert CropCodec(stored_shape=(4, 4)) in merged.codecs
    assert codec_edges(chunk_grid(merged).dimensions[0]) == (4, 2)
    assert codec_edges(chunk_grid(merged).dimensions[1]) == (4, 2, 4, 4)


def test_truncate_and_crop_of_different_stored_shapes_conflict() -> None:
    padded = _md((5, 8), (4, 8), [BytesCodec()])  # last chunk stored (4, 8): truncate
    cropping = _md((5, 8), (4, 8), [BytesCodec(), CropCodec(stored_shape=(4, 10))])
    with pytest.raises(IncompatibleArraysError, match=r"truncat.*\(4, 10\).*wrong values") as info:
        concatenation_metadata([padded, cropping], axis=0)
    assert "input 0" in str(info.value) and "input 1" in str(info.value)


def test_truncating_input_needing_crop_is_refused() -> None:
    truncating = _md((5, 6), (4, 4), [BytesCodec(), TruncateCodec()])
    with pytest.raises(IncompatibleArraysError, match="unknown stored size"):
        concatenation_metadata([truncating, truncating], axis=1)


def test_edge_codec_needs_the_bytes_codec() -> None:
    sharded_free_but_opaque = _md((5, 8), (4, 8), [TransposeCodec(order=(1, 0)), BytesCodec()])
    merged = concatenation_metadata([sharded_free_but_opaque] * 2, axis=0)
    # padding along y is along the *fastest* storage axis after the transpose: crop
    assert CropCodec(stored_shape=(8, 4)) in merged.codecs


def test_crop_codecs_with_different_stored_shapes(concat_fixtures: dict[str, Path]) -> None:
    h5 = [hdf5_manifest_array(concat_fixtures[f"chunked_{k}"]) for k in range(2)]
    cropped = concatenate(h5, axis=1)
    shifted = dataclasses.replace(
        cropped.metadata,
        codecs=tuple(
            CropCodec(stored_shape=(10, 5, 4)) if isinstance(c, CropCodec) else c
            for c in cropped.metadata.codecs
        ),
    )
    other = FillManifestArray(metadata=shifted, chunkmanifest=cropped.manifest)
    with pytest.raises(IncompatibleArraysError, match=r"\(10, 4, 4\).*\(10, 5, 4\)"):
        concatenate([cropped, other], axis=0)


def test_unpadded_chunk_under_crop_fails_loudly_when_read(concat_fixtures: dict[str, Path]) -> None:
    # An input whose crop codec sees a chunk stored at neither size refuses to decode it.
    h5 = [hdf5_manifest_array(concat_fixtures[f"chunked_{k}"]) for k in range(2)]
    cropped = concatenate(h5, axis=1)
    lengths = cropped.manifest._lengths.copy()
    lengths[0, 1, 0] -= 4  # one element short
    from virtualizarr.manifests import ChunkManifest

    manifest = ChunkManifest.from_arrays(
        paths=cropped.manifest._paths,
        offsets=cropped.manifest._offsets,
        lengths=lengths,
        validate_paths=False,
    )
    with pytest.raises(ChunkSizeMismatchError):
        read_manifest_array(FillManifestArray(metadata=cropped.metadata, chunkmanifest=manifest))


def test_truncate_codec_position(concat_fixtures: dict[str, Path]) -> None:
    h5 = [hdf5_manifest_array(concat_fixtures[f"chunked_gzip_{k}"]) for k in range(2)]
    names = [c.to_dict()["name"] for c in concatenate(h5, axis=0).metadata.codecs]
    # right after the bytes codec: it trims unshuffled, decompressed bytes
    assert names == [
        "bytes",
        TruncateCodec().to_dict()["name"],
        "numcodecs.shuffle",
        "numcodecs.zlib",
    ]
