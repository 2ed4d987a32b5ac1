"""FillManifestArrays on rectilinear chunk grids: construction, repr, reads, indexing, axes."""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import xarray as xr
from virtualizarr.manifests import ChunkManifest, ManifestArray
from virtualizarr.manifests.array_api import MANIFESTARRAY_HANDLED_ARRAY_FUNCTIONS
from virtualizarr.manifests.indexing import SubChunkIndexingError
from zarr.core.metadata.v3 import RectilinearChunkGridMetadata, RegularChunkGridMetadata

from tests._manifest_builders import (
    concat_fixtures,
    concatenate,
    hdf5_manifest_array,
    manifest_store,
    native_hdf5,
    native_tiff,
    read_manifest_array,
    stack,
    tiff_manifest_array,
    virtual_dataset,
    with_attributes,
)
from virtualizarr_fill.errors import UnsupportedFeatureError
from virtualizarr_fill.manifests import FillManifestArray
from virtualizarr_fill.zarr_model.chunk_grids import chunk_grid, codec_edges, data_edges
from virtualizarr_fill.zarr_model.edge_codecs import EdgeHandling, edge_handling_of

__all__ = ["concat_fixtures"]


def _named(marr: ManifestArray, *names: str) -> ManifestArray:
    metadata = dataclasses.replace(marr.metadata, dimension_names=names)
    return FillManifestArray(metadata=metadata, chunkmanifest=marr.manifest)


# --------------------------------------------------------------------------- construction


def test_short_last_strip_builds_a_rectilinear_array(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_0"])
    assert type(marr) is FillManifestArray
    assert isinstance(marr, ManifestArray)
    assert isinstance(marr.metadata.chunk_grid, RectilinearChunkGridMetadata)
    assert codec_edges(chunk_grid(marr.metadata).dimensions[0]) == (12,) * 12 + (6,)
    assert repr(marr) == "ManifestArray<shape=(150, 21), dtype=uint16, chunks=([12x12, 6], 21)>"
    np.testing.assert_array_equal(
        read_manifest_array(marr), native_tiff(concat_fixtures["strip_short_0"])
    )


def test_padded_last_strip_stays_regular(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_padded_0"])
    assert type(marr) is FillManifestArray
    assert isinstance(marr.metadata.chunk_grid, RegularChunkGridMetadata)
    assert edge_handling_of(marr.metadata.codecs) is EdgeHandling.NONE
    np.testing.assert_array_equal(
        read_manifest_array(marr), native_tiff(concat_fixtures["strip_padded_0"])
    )


def test_construction_from_a_dict_manifest_and_a_mismatched_grid(
    concat_fixtures: dict[str, Path],
) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_1"])
    entries = marr.manifest.dict()
    rebuilt = FillManifestArray(metadata=marr.metadata, chunkmanifest=entries)
    assert type(rebuilt) is FillManifestArray
    np.testing.assert_array_equal(read_manifest_array(rebuilt), read_manifest_array(marr))
    as_dict = FillManifestArray(metadata=marr.metadata.to_dict(), chunkmanifest=marr.manifest)
    assert type(as_dict) is FillManifestArray

    short = ChunkManifest.from_arrays(
        paths=marr.manifest._paths[:12],
        offsets=marr.manifest._offsets[:12],
        lengths=marr.manifest._lengths[:12],
        validate_paths=False,
    )
    with pytest.raises(ValueError, match=r"manifest of shape \(12, 1\).*grid of shape \(13, 1\)"):
        FillManifestArray(metadata=marr.metadata, chunkmanifest=short)


def test_pickling_keeps_the_class_and_the_values(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_2"])
    again = pickle.loads(pickle.dumps(marr))
    assert type(again) is FillManifestArray
    assert again.metadata == marr.metadata
    np.testing.assert_array_equal(read_manifest_array(again), read_manifest_array(marr))


# --------------------------------------------------------------------------- xarray reads


def test_manifest_store_to_xarray_lazy_and_dask(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_padded_0", "strip_short_1", "strip_padded_2"]
    combined = concatenate([tiff_manifest_array(concat_fixtures[n]) for n in names], axis=0)
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    store = manifest_store({"band": _named(combined, "y", "x")})

    lazy = xr.open_zarr(store, consolidated=False, zarr_format=3, chunks=None)
    assert not hasattr(lazy.band.variable._data, "dask")
    np.testing.assert_array_equal(lazy.band.isel(y=slice(140, 170)).values, expected[140:170])
    np.testing.assert_array_equal(lazy.band.values, expected)

    chunked = xr.open_zarr(store, consolidated=False, zarr_format=3, chunks={})
    assert chunked.band.chunks[0] == data_edges(chunk_grid(combined.metadata).dimensions[0])
    np.testing.assert_array_equal(chunked.band.compute().values, expected)


def test_to_virtual_dataset_keeps_rectilinear_arrays(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_0"])
    vds = virtual_dataset(
        {"band": with_attributes(marr, _FillValue=0, units="K", long_name="band 1")}
    )
    data = vds["band"].data
    assert type(data) is FillManifestArray
    assert vds["band"].dims == ("y", "x")
    assert vds["band"].attrs == {"_FillValue": 0, "units": "K", "long_name": "band 1"}
    # the sentinel and the attributes that change decoded values travel with the array
    # (so concatenation can compare them), nothing else
    assert data.metadata.attributes == {"_FillValue": 0, "units": "K"}
    assert data.metadata.dimension_names is None


def test_oversized_chunk_warning_handles_rectilinear_arrays(
    concat_fixtures: dict[str, Path],
) -> None:
    short = tiff_manifest_array(concat_fixtures["strip_short_0"])
    first = short[0:12, :]
    overhanging = dataclasses.replace(
        first.metadata,
        chunk_grid=RectilinearChunkGridMetadata(chunk_shapes=((12,), (30,))),
    )
    marr = FillManifestArray(metadata=overhanging, chunkmanifest=first.manifest)
    with pytest.warns(UserWarning, match=r"\['band'\] have a chunk shape larger"):
        virtual_dataset({"band": marr})
    padded = tiff_manifest_array(concat_fixtures["strip_padded_0"])
    wide = dataclasses.replace(
        padded.metadata,
        chunk_grid=RegularChunkGridMetadata(chunk_shape=(12, 30)),
    )
    regular = FillManifestArray(metadata=wide, chunkmanifest=padded.manifest)
    with pytest.warns(UserWarning, match=r"\['wide'\] have a chunk shape larger"):
        virtual_dataset({"wide": regular, "band": short})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        virtual_dataset({"band": short, "padded": padded})


# --------------------------------------------------------------------------- indexing


def test_chunk_aligned_selection(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_padded_0", "strip_short_1"]
    combined = concatenate([tiff_manifest_array(concat_fixtures[n]) for n in names], axis=0)
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    for sel in [slice(150, 300), slice(144, 162), slice(0, 150), slice(12, None), slice(None)]:
        part = combined[sel, :]
        np.testing.assert_array_equal(read_manifest_array(part), expected[sel])
    assert isinstance(combined[0:144, :].metadata.chunk_grid, RegularChunkGridMetadata)
    assert combined[:, :] is combined
    with pytest.raises(SubChunkIndexingError, match="chunk boundaries"):
        combined[0:10, :]
    with pytest.raises(SubChunkIndexingError, match="chunk boundaries"):
        combined[150:155, :]
    with pytest.raises(SubChunkIndexingError):
        combined[::2, :]
    with pytest.raises(NotImplementedError, match="fancy indexing"):
        combined[np.array([0, 1]), :]


def test_isel_through_xarray(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_short_0", "strip_short_1", "strip_short_2"]
    vds = xr.concat(
        [virtual_dataset({"band": tiff_manifest_array(concat_fixtures[n])}) for n in names], "y"
    )
    expected = np.concatenate([native_tiff(concat_fixtures[n]) for n in names])
    part = vds.isel(y=slice(150, 300))
    np.testing.assert_array_equal(read_manifest_array(part.band.data), expected[150:300])


def test_integer_index_needs_length_one_chunks(concat_fixtures: dict[str, Path]) -> None:
    names = ["strip_short_0", "strip_padded_1"]
    stacked = stack([tiff_manifest_array(concat_fixtures[n]) for n in names], axis=0)
    natives = [native_tiff(concat_fixtures[n]) for n in names]
    np.testing.assert_array_equal(read_manifest_array(stacked[1, :, :]), natives[1])
    np.testing.assert_array_equal(read_manifest_array(stacked[-2, :, :]), natives[0])
    as_numpy = np.stack(natives)
    for key in [
        (0, None, slice(None), slice(None)),
        (slice(None), None, slice(None), slice(None), None),
    ]:
        selected = stacked[key]
        assert selected.shape == as_numpy[key].shape
        np.testing.assert_array_equal(read_manifest_array(selected), as_numpy[key])
    with pytest.raises(SubChunkIndexingError, match="chunks of length 1"):
        stacked[:, 0, :]
    with pytest.raises(IndexError):
        stacked[2, :, :]


def test_integer_index_drops_axis_from_codecs(concat_fixtures: dict[str, Path]) -> None:
    # crop codecs and transposes carry one entry per axis
    paths = [concat_fixtures[f"chunked_{k}"] for k in range(2)]
    cropped = concatenate([hdf5_manifest_array(p) for p in paths], axis=1)
    stacked = stack([cropped, cropped], axis=1)
    assert any(getattr(c, "stored_shape", None) == (10, 1, 4, 4) for c in stacked.metadata.codecs)
    picked = stacked[:, 1, :, :]
    expected = np.concatenate([native_hdf5(p) for p in paths], axis=1)
    np.testing.assert_array_equal(read_manifest_array(picked), expected)


# --------------------------------------------------------------------------- axes


def test_expand_dims_and_broadcast(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_0"])
    native = native_tiff(concat_fixtures["strip_short_0"])
    expanded = cast(ManifestArray, np.expand_dims(marr, axis=1))  # type: ignore[call-overload]
    assert expanded.shape == (150, 1, 21)
    np.testing.assert_array_equal(read_manifest_array(expanded), native[:, None, :])

    broadcast = cast(ManifestArray, np.broadcast_to(marr, (3, 150, 21)))
    assert type(broadcast) is FillManifestArray
    np.testing.assert_array_equal(
        read_manifest_array(broadcast), np.broadcast_to(native, (3, 150, 21))
    )
    twice = cast(ManifestArray, np.broadcast_to(expanded, (2, 150, 4, 21)))
    np.testing.assert_array_equal(
        read_manifest_array(twice), np.broadcast_to(native[:, None, :], (2, 150, 4, 21))
    )
    with pytest.raises(ValueError, match="cannot be broadcast"):
        np.broadcast_to(marr, (150, 22))
    single = marr[144:150, :]  # one 6-row chunk, broadcasting along y would repeat it whole
    assert single.shape == (6, 21)
    with pytest.raises(ValueError):
        np.broadcast_to(single, (3, 12, 21))


def test_broadcast_refuses_padded_length_one_axis() -> None:
    from zarr.codecs import BytesCodec
    from zarr.core.metadata.v3 import ArrayV3Metadata
    from zarr.dtype import parse_data_type

    metadata = ArrayV3Metadata(
        shape=(1, 5),
        data_type=parse_data_type(np.dtype("u1"), zarr_format=3),
        chunk_grid=RectilinearChunkGridMetadata(chunk_shapes=((4,), (5,))),
        chunk_key_encoding={"name": "default"},
        fill_value=0,
        codecs=[BytesCodec()],
        attributes={},
        dimension_names=None,
    )
    manifest = ChunkManifest(entries={"0.0": {"path": "file:///x", "offset": 0, "length": 20}})
    marr = FillManifestArray(metadata=metadata, chunkmanifest=manifest)
    with pytest.raises(UnsupportedFeatureError, match="padded"):
        np.broadcast_to(marr, (3, 5))


def test_xarray_expand_dims_and_broadcasting(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_1"])
    native = native_tiff(concat_fixtures["strip_short_1"])
    vds = virtual_dataset({"band": marr})
    expanded = vds.expand_dims("t")
    np.testing.assert_array_equal(read_manifest_array(expanded.band.data), native[None])
    other = xr.DataArray(np.zeros(3), dims="t")
    _, broadcast = xr.broadcast(other, vds.band)
    assert broadcast.dims == ("t", "y", "x")
    np.testing.assert_array_equal(
        read_manifest_array(broadcast.data), np.broadcast_to(native, (3, 150, 21))
    )


def test_placeholder_and_missing_chunk_fill(concat_fixtures: dict[str, Path]) -> None:
    marr = tiff_manifest_array(concat_fixtures["strip_short_0"])
    placeholder = marr.with_fill_value_only(7)
    assert type(placeholder) is FillManifestArray
    np.testing.assert_array_equal(read_manifest_array(placeholder), np.full((150, 21), 7))

    # np.where as xarray's alignment fill uses it: identity where chunks are missing
    paths = [concat_fixtures[f"chunked_fill_{k}"] for k in range(2)]
    combined = concatenate([hdf5_manifest_array(p) for p in paths], axis=1)
    missing = np.zeros(combined.shape, dtype=bool)
    missing[:10, 0:4, 0:4] = True  # chunk (0, 0, 0) of each file is unwritten
    missing[:10, 7:11, 0:4] = True
    assert np.where(~missing, combined, -9999.0) is combined
    with pytest.raises(NotImplementedError, match="missing chunks"):
        np.where(missing, combined, -9999.0)


# --------------------------------------------------------------------------- VirtualiZarr's own


def test_plain_manifest_arrays_keep_virtualizarrs_behaviour(
    concat_fixtures: dict[str, Path],
) -> None:
    """VirtualiZarr's own arrays are not ours: its rules apply to them, unchanged."""
    marr = tiff_manifest_array(concat_fixtures["strip_padded_0"])
    plain = ManifestArray(metadata=marr.metadata, chunkmanifest=marr.manifest)
    assert type(np.concatenate([plain, plain], axis=1)) is ManifestArray
    # a rectilinear grid is still VirtualiZarr's to refuse
    short = tiff_manifest_array(concat_fixtures["strip_short_0"])
    with pytest.raises(NotImplementedError, match="RegularChunkGrid"):
        ManifestArray(metadata=short.metadata, chunkmanifest=short.manifest)
    # VirtualiZarr's table is not ours
    table = cast(dict[Any, Any], MANIFESTARRAY_HANDLED_ARRAY_FUNCTIONS)
    assert table[np.concatenate].__module__ == "virtualizarr.manifests.array_api"


def test_a_plain_array_combined_with_ours_is_taken_over(concat_fixtures: dict[str, Path]) -> None:
    ours = tiff_manifest_array(concat_fixtures["strip_short_0"])
    padded = tiff_manifest_array(concat_fixtures["strip_padded_1"])
    plain = ManifestArray(metadata=padded.metadata, chunkmanifest=padded.manifest)
    combined = np.concatenate([ours, plain], axis=0)
    assert type(combined) is FillManifestArray
    np.testing.assert_array_equal(
        read_manifest_array(combined),
        np.concatenate(
            [
                native_tiff(concat_fixtures["strip_short_0"]),
                native_tiff(concat_fixtures["strip_padded_1"]),
            ]
        ),
    )
