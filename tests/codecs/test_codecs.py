"""TruncateCodec and CropCodec read through real zarr arrays on disk.

Each test writes chunks the way an archival format stores them (edge chunks padded
to the physical chunk shape, padding filled with junk), puts the raw bytes into a zarr
LocalStore under the chunk keys of an array whose grid describes the *logical* chunks,
and reads the array back with zarr. The expected values are the numpy array the chunks
were cut from.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, GzipCodec, TransposeCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import LocalStore

from virtualizarr_fill import ChunkSizeMismatchError, CropCodec, TruncateCodec
from virtualizarr_fill.zarr_model.edge_codecs import (
    EdgeHandling,
    check_edge_codec_placement,
    decide_edge_handling,
    insert_edge_codec,
)

PIPELINES = {
    "batched-async": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "fused-sync": "zarr.core.codec_pipeline.FusedCodecPipeline",
}

COMPRESSORS: dict[str, tuple[Any, Any]] = {
    # name -> (zarr v3 codec, numcodecs codec that writes the same stream)
    "none": (None, None),
    "gzip": (GzipCodec(level=5), numcodecs.GZip(level=5)),
    "zstd": (ZstdCodec(level=3), numcodecs.Zstd(level=3)),
}


@pytest.fixture(autouse=True)
def rectilinear_chunks() -> Iterator[None]:
    """zarr's rectilinear flag on for each test here, which writes and reads such arrays
    with zarr alone (otherwise each test depended on an earlier one having turned it on)."""
    with zarr.config.set({"array.rectilinear_chunks": True}):
        yield


@pytest.fixture(params=list(PIPELINES), ids=list(PIPELINES))
def codec_pipeline(request: pytest.FixtureRequest) -> Iterator[str]:
    with zarr.config.set({"codec_pipeline.path": PIPELINES[request.param]}):
        yield request.param


def _chunk_regions(
    edges: Sequence[Sequence[int]],
) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    starts = [np.concatenate([[0], np.cumsum(e)[:-1]]).astype(int) for e in edges]
    for coords in itertools.product(*(range(len(e)) for e in edges)):
        yield (
            coords,
            tuple(
                slice(int(starts[d][i]), int(starts[d][i]) + edges[d][i])
                for d, i in enumerate(coords)
            ),
        )


def _stored_chunk(
    data: np.ndarray,
    region: tuple[slice, ...],
    stored_shape: Sequence[int],
    *,
    pad: bool,
    order: Sequence[int] | None,
    endian: str,
    compressor: Any,
) -> bytes:
    """The bytes an archival writer would store for one chunk."""
    logical = data[region]
    if pad:
        rng = np.random.default_rng(99)
        junk = rng.integers(1, 120, size=tuple(stored_shape)).astype(data.dtype)
        junk[tuple(slice(0, n) for n in logical.shape)] = logical
        logical = junk
    if order is not None:
        logical = np.transpose(logical, order)
    raw = np.ascontiguousarray(logical).astype(logical.dtype.newbyteorder(endian)).tobytes()
    return raw if compressor is None else bytes(compressor.encode(raw))


def _write_virtual_like_array(
    path: Path,
    data: np.ndarray,
    *,
    edges: Sequence[Sequence[int]],
    stored_shape: Sequence[int],
    pad_edge_chunks: bool,
    codecs: list[Any],
    order: Sequence[int] | None,
    endian: str,
    compressor: Any,
    rectilinear: bool = True,
) -> zarr.Array:
    store = LocalStore(path)
    serializer_index = next(i for i, c in enumerate(codecs) if isinstance(c, BytesCodec))
    chunks: Any = [list(e) for e in edges] if rectilinear else tuple(stored_shape)
    array = zarr.create_array(
        store,
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        filters=codecs[:serializer_index],
        serializer=codecs[serializer_index],
        compressors=codecs[serializer_index + 1 :],
        fill_value=0,
    )
    proto = default_buffer_prototype()
    for coords, grid_region in _chunk_regions(edges):
        # On a regular grid the last chunk's region runs past the array's end.
        region = tuple(
            slice(r.start, min(r.stop, n)) for r, n in zip(grid_region, data.shape, strict=True)
        )
        is_edge = any((r.stop - r.start) != s for r, s in zip(region, stored_shape, strict=True))
        payload = _stored_chunk(
            data,
            region,
            stored_shape,
            pad=pad_edge_chunks and is_edge,
            order=order,
            endian=endian,
            compressor=compressor,
        )
        key = "c/" + "/".join(str(c) for c in coords)
        zarr.core.sync.sync(store.set(key, proto.buffer.from_bytes(payload)))
    return array


DTYPES = ["<i2", ">i4", "<u8", "<f4", ">f8", "<c8", ">c16", "|u1"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("compression", list(COMPRESSORS))
@pytest.mark.parametrize("transposed", [False, True], ids=["no-transpose", "transpose"])
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
def test_truncate_round_trip_rectilinear_last_strip(
    tmp_path: Path,
    codec_pipeline: str,
    dtype: str,
    compression: str,
    transposed: bool,
    padded: bool,
) -> None:
    """A (band, y, x) image whose last strip of rows is short (6 of 12 rows).

    Pixel-interleaved strips store (y, x, band) and hold every band (a transpose);
    planar strips hold one band each, in (band, y, x) order.
    """
    rng = np.random.default_rng(0)
    shape = (3, 30, 7)
    data = (rng.standard_normal(shape) * 100).astype(dtype)
    bands = 3 if transposed else 1
    stored_shape = (bands, 12, 7)
    edges = [[bands] * (3 // bands), [12, 12, 6], [7]]
    order = (1, 2, 0) if transposed else None
    endian = ">" if dtype.startswith(">") else "<"
    v3_compressor, writer = COMPRESSORS[compression]
    base = [BytesCodec(endian="big" if endian == ">" else "little")]
    if order is not None:
        base.insert(0, TransposeCodec(order=order))
    if v3_compressor is not None:
        base.append(v3_compressor)
    handling = decide_edge_handling(base, (bands, 6, 7), stored_shape)
    # The padded axis (y) is the slowest non-singleton axis in both storage orders.
    assert handling is EdgeHandling.TRUNCATE
    codecs = insert_edge_codec(base, handling, stored_shape)
    check_edge_codec_placement(codecs)
    array = _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=edges,
        stored_shape=stored_shape,
        pad_edge_chunks=padded,
        codecs=codecs,
        order=order,
        endian=endian,
        compressor=writer,
    )
    reopened = zarr.open_array(LocalStore(tmp_path / "a.zarr"), mode="r")
    np.testing.assert_array_equal(reopened[...], data)
    np.testing.assert_array_equal(array[1:, 20:28, 2:], data[1:, 20:28, 2:])


def test_without_truncate_padded_edge_fails(tmp_path: Path, codec_pipeline: str) -> None:
    """The failure the codec exists for: zarr cannot reshape a padded edge chunk."""
    data = np.arange(30 * 7, dtype="<i4").reshape(30, 7)
    array = _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=[[12, 12, 6], [7]],
        stored_shape=(12, 7),
        pad_edge_chunks=True,
        codecs=[BytesCodec()],
        order=None,
        endian="<",
        compressor=None,
    )
    with pytest.raises(ValueError, match=r"reshape|size"):
        array[...]


def test_truncate_after_compressor_is_refused_and_fails(
    tmp_path: Path, codec_pipeline: str
) -> None:
    """Placed after the compressor it only sees compressed bytes: zarr then fails to reshape."""
    wrong = [BytesCodec(), GzipCodec(), TruncateCodec()]
    with pytest.raises(ValueError, match="immediately after the 'bytes' codec"):
        check_edge_codec_placement(wrong)
    data = np.arange(30 * 7, dtype="<i4").reshape(30, 7)
    array = _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=[[12, 12, 6], [7]],
        stored_shape=(12, 7),
        pad_edge_chunks=True,
        codecs=wrong,
        order=None,
        endian="<",
        compressor=numcodecs.GZip(level=5),
    )
    # Depending on the compressed length it cuts the gzip stream or leaves the padded
    # buffer for the bytes codec: either way zarr fails, never a wrong value.
    with pytest.raises((ValueError, EOFError)):
        array[...]


def test_truncate_before_array_bytes_codec_is_rejected_by_zarr(tmp_path: Path) -> None:
    with pytest.raises((TypeError, ValueError)):
        zarr.create_array(
            LocalStore(tmp_path / "a.zarr"),
            shape=(4,),
            chunks=(4,),
            dtype="i4",
            filters=[TruncateCodec()],  # type: ignore[list-item]
        )


@pytest.mark.parametrize("dtype", ["<u2", ">f4", "<c16"])
@pytest.mark.parametrize("compression", list(COMPRESSORS))
def test_padding_along_x_truncate_wrong_crop_right(
    tmp_path: Path, codec_pipeline: str, dtype: str, compression: str
) -> None:
    """An edge tile padded in x: prefix truncation reads wrong values, crop reads right ones."""
    rng = np.random.default_rng(1)
    data = (rng.standard_normal((8, 10)) * 50).astype(dtype)
    stored_shape = (8, 6)  # tiles 8 x 6 over 10 columns: second tile holds 4 real columns
    edges = [[8], [6, 4]]
    endian = ">" if dtype.startswith(">") else "<"
    v3_compressor, writer = COMPRESSORS[compression]
    base: list[Any] = [BytesCodec(endian="big" if endian == ">" else "little")]
    if v3_compressor is not None:
        base.append(v3_compressor)
    assert decide_edge_handling(base, (8, 4), stored_shape) is EdgeHandling.CROP

    kwargs: dict[str, Any] = dict(
        edges=edges,
        stored_shape=stored_shape,
        pad_edge_chunks=True,
        order=None,
        endian=endian,
        compressor=writer,
    )
    truncated = _write_virtual_like_array(
        tmp_path / "t.zarr",
        data,
        codecs=insert_edge_codec(base, EdgeHandling.TRUNCATE),
        **kwargs,
    )
    wrong = truncated[...]
    # The interior tile is fine; the edge tile silently comes back scrambled.
    np.testing.assert_array_equal(wrong[:, :6], data[:, :6])
    assert not np.array_equal(wrong[:, 6:], data[:, 6:])

    cropped = _write_virtual_like_array(
        tmp_path / "c.zarr",
        data,
        codecs=insert_edge_codec(base, EdgeHandling.CROP, stored_shape),
        **kwargs,
    )
    np.testing.assert_array_equal(cropped[...], data)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
def test_crop_with_transpose_inner_axis(tmp_path: Path, codec_pipeline: str, padded: bool) -> None:
    """Crop accepts padded and unpadded buffers of the same array, in storage order."""
    rng = np.random.default_rng(2)
    data = rng.integers(-1000, 1000, size=(2, 9, 5)).astype("<i8")
    stored_shape = (2, 4, 5)
    edges = [[2], [4, 4, 1], [5]]
    order = (1, 2, 0)
    base = [TransposeCodec(order=order), BytesCodec(), GzipCodec()]
    # Stored order (y, x, band): padding along y is a prefix, so truncate would do,
    # but crop must also be right when chosen (e.g. by a concatenation).
    codecs = insert_edge_codec(base, EdgeHandling.CROP, stored_shape)
    crop = next(c for c in codecs if isinstance(c, CropCodec))
    assert crop.stored_shape == (4, 5, 2)
    array = _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=edges,
        stored_shape=stored_shape,
        pad_edge_chunks=padded,
        codecs=codecs,
        order=order,
        endian="<",
        compressor=numcodecs.GZip(level=5),
    )
    np.testing.assert_array_equal(array[...], data)


def test_crop_rejects_buffer_of_neither_size(tmp_path: Path, codec_pipeline: str) -> None:
    data = np.arange(40, dtype="<i2").reshape(8, 5)
    array = _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=[[8], [3, 2]],
        stored_shape=(8, 3),
        pad_edge_chunks=False,
        codecs=[BytesCodec(), CropCodec(stored_shape=(8, 3))],
        order=None,
        endian="<",
        compressor=None,
    )
    # Overwrite the edge chunk with a buffer of an impossible size.
    store = LocalStore(tmp_path / "a.zarr")
    bad = default_buffer_prototype().buffer.from_bytes(b"\x00" * 22)
    zarr.core.sync.sync(store.set("c/0/1", bad))
    with pytest.raises(
        ChunkSizeMismatchError, match=r"neither its logical size 32 bytes .* stored size 48 bytes"
    ):
        array[...]


def test_regular_grid_padded_last_chunk_needs_nothing(tmp_path: Path, codec_pipeline: str) -> None:
    """A single file whose padded chunk is the array's last keeps a regular grid."""
    data = np.arange(30 * 7, dtype=">u2").reshape(30, 7)
    base = [BytesCodec(endian="big")]
    # On a regular grid zarr hands the codecs the full chunk shape for edge chunks.
    assert decide_edge_handling(base, (12, 7), (12, 7)) is EdgeHandling.NONE
    array = _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=[[12, 12, 12], [7]],
        stored_shape=(12, 7),
        pad_edge_chunks=True,
        codecs=base,
        order=None,
        endian=">",
        compressor=None,
        rectilinear=False,
    )
    assert array.metadata.chunk_grid.to_dict()["name"] == "regular"  # type: ignore[union-attr]
    # The last stored chunk holds rows 24..35 of which 24..29 are data.
    np.testing.assert_array_equal(array[...], data)


def test_truncate_passes_variable_length_strings(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s.zarr")
    array = zarr.create_array(
        store, shape=(5,), chunks=(2,), dtype=str, compressors=[TruncateCodec()]
    )
    values = np.array(["a", "bb", "", "dddd", "e"], dtype=object)
    array[...] = values
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], values)


def test_json_forms_round_trip() -> None:
    assert TruncateCodec().to_dict() == {"name": "virtualizarr_fill.truncate", "configuration": {}}
    assert TruncateCodec.from_dict(TruncateCodec().to_dict()) == TruncateCodec()
    assert TruncateCodec.from_dict({"name": "virtualizarr_fill.truncate"}) == TruncateCodec()
    crop = CropCodec(stored_shape=(4, 5, 2))
    assert crop.to_dict() == {
        "name": "virtualizarr_fill.crop",
        "configuration": {"stored_shape": [4, 5, 2]},
    }
    assert CropCodec.from_dict(json.loads(json.dumps(crop.to_dict()))) == crop
    with pytest.raises(ValueError):
        TruncateCodec.from_dict({"name": "virtualizarr_fill.truncate", "configuration": {"x": 1}})
    with pytest.raises(ValueError):
        CropCodec.from_dict(
            {"name": "virtualizarr_fill.crop", "configuration": {"stored_shape": []}}
        )


def test_decision_helper_cases() -> None:
    raw = [BytesCodec()]
    assert decide_edge_handling(raw, (12, 7), (12, 7)) is EdgeHandling.NONE
    assert decide_edge_handling(raw, (6, 7), (12, 7)) is EdgeHandling.TRUNCATE
    assert decide_edge_handling(raw, (12, 3), (12, 7)) is EdgeHandling.CROP
    assert decide_edge_handling(raw, (6, 3), (12, 7)) is EdgeHandling.CROP
    # Leading singleton axes do not break the prefix (planar TIFF strips: (1, rows, x)).
    assert decide_edge_handling(raw, (1, 1, 6, 7), (1, 1, 12, 7)) is EdgeHandling.TRUNCATE
    # ... but a leading axis of length > 1 does (HDF5 chunk concatenated along axis 1).
    assert decide_edge_handling(raw, (10, 175, 360), (10, 180, 360)) is EdgeHandling.CROP
    # A transpose moving the padded axis first makes truncation valid.
    moved = [TransposeCodec(order=(1, 0)), BytesCodec()]
    assert decide_edge_handling(moved, (10, 175), (10, 180)) is EdgeHandling.TRUNCATE
    with pytest.raises(ValueError, match="exceeds"):
        decide_edge_handling(raw, (13, 7), (12, 7))


def test_insert_refuses_impossible_chains() -> None:
    from zarr.codecs import ShardingCodec

    with pytest.raises(ValueError, match="does not expose the raw stored bytes"):
        insert_edge_codec([ShardingCodec(chunk_shape=(2,))], EdgeHandling.TRUNCATE)
    with pytest.raises(ValueError, match="no array->bytes codec"):
        insert_edge_codec([GzipCodec()], EdgeHandling.TRUNCATE)
    with pytest.raises(ValueError, match="stored chunk shape"):
        insert_edge_codec([BytesCodec()], EdgeHandling.CROP)
    # Replacing an existing edge codec, and NONE removing it.
    chain = insert_edge_codec([BytesCodec(), TruncateCodec(), GzipCodec()], EdgeHandling.CROP, (4,))
    assert [type(c).__name__ for c in chain] == ["BytesCodec", "CropCodec", "GzipCodec"]
    assert insert_edge_codec(chain, EdgeHandling.NONE) == [BytesCodec(), GzipCodec()]


_FRESH_READER = """
import sys, zarr, numpy as np
path, expected = sys.argv[1], sys.argv[2]
array = zarr.open_array(path, mode="r")
values = array[...]
assert "virtualizarr_fill_codecs" in sys.modules, "the codec should load by entry point"
assert "virtualizarr_fill" not in sys.modules, "a reader needs the codec distribution alone"
np.testing.assert_array_equal(values, np.load(expected))
print("ok", [c["name"] for c in array.metadata.to_dict()["codecs"]])
"""


@pytest.mark.parametrize(
    ("edge_codec", "rectilinear"),
    [("truncate", True), ("crop", True), ("truncate", False)],
    ids=["truncate-rectilinear", "crop-rectilinear", "truncate-regular"],
)
def test_fresh_interpreter_resolves_codecs_by_entry_point(
    tmp_path: Path, edge_codec: str, rectilinear: bool
) -> None:
    rng = np.random.default_rng(3)
    width = 5 if edge_codec == "crop" else 3
    data = rng.integers(0, 60000, size=(9, width)).astype("<u2")
    stored_shape = (4, 3)
    x_edges = [3, 2] if edge_codec == "crop" else [3]
    edges = [[4, 4, 1], x_edges] if rectilinear else [[4, 4, 4], [3] * len(x_edges)]
    handling = EdgeHandling.CROP if edge_codec == "crop" else EdgeHandling.TRUNCATE
    codecs = insert_edge_codec([BytesCodec(), GzipCodec()], handling, stored_shape)
    _write_virtual_like_array(
        tmp_path / "a.zarr",
        data,
        edges=edges,
        stored_shape=stored_shape,
        pad_edge_chunks=True,
        codecs=codecs,
        order=None,
        endian="<",
        compressor=numcodecs.GZip(level=5),
        rectilinear=rectilinear,
    )
    np.save(tmp_path / "expected.npy", data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZARR_")}
    if rectilinear:
        # A reader-only process opts into rectilinear grids through the environment.
        env["ZARR_ARRAY__RECTILINEAR_CHUNKS"] = "True"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _FRESH_READER,
            str(tmp_path / "a.zarr"),
            str(tmp_path / "expected.npy"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"virtualizarr_fill.{edge_codec}" in result.stdout


def test_importing_package_leaves_the_rectilinear_flag_alone() -> None:
    """Importing the package (or its codecs) changes no zarr setting; building an array on
    a rectilinear grid turns the flag on, since the process will read it."""
    code = (
        "import zarr, virtualizarr_fill, virtualizarr_fill.codecs.truncate\n"
        "print(zarr.config.get('array.rectilinear_chunks'))\n"
        "from virtualizarr_fill import FillManifestArray\n"
        "print(zarr.config.get('array.rectilinear_chunks'))\n"
        "from virtualizarr.manifests import ChunkManifest\n"
        "from zarr.core.metadata.v3 import ArrayV3Metadata, RectilinearChunkGridMetadata\n"
        "from zarr.codecs import BytesCodec\n"
        "from zarr.dtype import UInt8\n"
        "metadata = ArrayV3Metadata(shape=(3,), data_type=UInt8(),\n"
        "    chunk_grid=RectilinearChunkGridMetadata(chunk_shapes=((1, 2),)),\n"
        "    chunk_key_encoding={'name': 'default'}, fill_value=0, codecs=(BytesCodec(),),\n"
        "    attributes={}, dimension_names=None)\n"
        "FillManifestArray(metadata, ChunkManifest(entries={}, shape=(2,)))\n"
        "print(zarr.config.get('array.rectilinear_chunks'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZARR_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.stdout.split() == ["False", "False", "True"], out.stderr
