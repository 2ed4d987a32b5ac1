"""HDF5Parser on synthetic fixtures: each layout, filter, datatype, link and option.

The fixtures are written by ``fixtures/make_hdf5_fixtures.py`` into a temporary
directory. Values are always compared with h5py (raw) and h5netcdf (decoded); the
expected refusals are listed exactly, so a dataset refused by mistake fails too.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import virtualizarr
import xarray as xr

from tests._hdf5_checks import (
    Report,
    check_netcdf,
    check_raw,
    find_array,
    iter_arrays,
    parse,
    quiet,
    read_array,
    registry,
    url_of,
)
from virtualizarr_fill.errors import CorruptFileError, NotHDF5Error, UnsupportedFeatureError
from virtualizarr_fill.hdf5 import HDF5Parser
from virtualizarr_fill.hdf5.array_context import ArrayContext, DatasetRefused, Target
from virtualizarr_fill.hdf5.arrays import build_array
from virtualizarr_fill.reads import use_manifest_pipeline

REPO = Path(__file__).resolve().parents[2]


def _load_fixture_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_hdf5_fixtures", REPO / "fixtures" / "make_hdf5_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("hdf5_fixtures")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _load_fixture_module().make_all(directory)


def _full_check(path: Path, expected_refusals: dict[str, str]) -> Report:
    """check_raw + check_netcdf, and the refusals must be exactly the expected ones."""
    parsed = parse(path)
    report = Report()
    report.merge(check_raw(path, parsed))
    report.merge(check_netcdf(path, parsed))
    assert not report.problems, "\n".join(report.problems)
    refused = {name: warning.kind for name, warning in parsed.skipped.items()}
    assert refused == expected_refusals
    return report


def _codec_names(array: Any) -> list[str]:
    return [codec.to_dict()["name"] for codec in array.metadata.codecs]


# ------------------------------------------------------------------------------ filters

SUPPORTED = {
    "gzip": ["numcodecs.zlib"],
    "shuffle_gzip": ["numcodecs.shuffle", "numcodecs.zlib"],
    "fletcher32": ["numcodecs.fletcher32"],
    "shuffle_gzip_fletcher32": ["numcodecs.shuffle", "numcodecs.zlib", "numcodecs.fletcher32"],
    "lzf": ["virtualizarr_fill.hdf5_lzf"],
    "shuffle_lzf": ["numcodecs.shuffle", "virtualizarr_fill.hdf5_lzf"],
    "szip_nn": ["imagecodecs_szip"],
    "szip_ec": ["imagecodecs_szip"],
    "lz4": ["imagecodecs_lz4h5"],
    "bzip2": ["numcodecs.bz2"],
    "blosc_lz4_shuffle": ["numcodecs.blosc"],
    "blosc_zstd_bitshuffle": ["numcodecs.blosc"],
    "blosc_blosclz": ["numcodecs.blosc"],
    "blosc_zlib": ["numcodecs.blosc"],
    "zstd": ["zstd"],
    "bitshuffle": ["virtualizarr_fill.hdf5_bitshuffle"],
    "bitshuffle_lz4": ["virtualizarr_fill.hdf5_bitshuffle"],
    "bitshuffle_zstd": ["virtualizarr_fill.hdf5_bitshuffle"],
    "bitshuffle_lz4_block16": ["virtualizarr_fill.hdf5_bitshuffle"],
}
GROUPS = {"le_i2": 2, "be_f4": 4, "le_f8": 8}


def test_filters_read_back_and_refusals_name_the_filter(fixtures: dict[str, Path]) -> None:
    refused = {
        f"/{group}/{name}": "filter" for group in GROUPS for name in ("scaleoffset", "zfp", "nbit")
    }
    _full_check(fixtures["filters.h5"], refused)
    parsed = parse(fixtures["filters.h5"])
    for group, itemsize in GROUPS.items():
        for name, codecs in SUPPORTED.items():
            if name.startswith("szip") and itemsize > 4:
                continue
            array = find_array(parsed.store, f"/{group}/{name}")
            assert array is not None, f"/{group}/{name}"
            assert _codec_names(array)[1:] == codecs, f"/{group}/{name}"
            assert array.metadata.chunks == (10, 8)  # HDF5's chunks: a regular grid
        for name, filter_name in (("scaleoffset", "scaleoffset"), ("zfp", "zfp"), ("nbit", "nbit")):
            assert f"'{filter_name}'" in parsed.skipped[f"/{group}/{name}"].reason


def test_shuffle_after_deflate_uses_hdf5_remainder_rule(fixtures: dict[str, Path]) -> None:
    parsed = parse(fixtures["filters.h5"])
    array = find_array(parsed.store, "/deflate_then_shuffle")
    assert array is not None
    assert _codec_names(array)[1:] == ["numcodecs.zlib", "virtualizarr_fill.hdf5_shuffle"]
    with h5py.File(fixtures["filters.h5"], "r") as f:
        np.testing.assert_array_equal(read_array(array), f["deflate_then_shuffle"][()])


def _flip_chunk_byte(source: Path, target: Path, chunk: tuple[int, ...]) -> None:
    array = find_array(parse(source).store, "/le_i2/fletcher32")
    assert array is not None
    offset = int(array.manifest._offsets[chunk])
    data = bytearray(source.read_bytes())
    data[offset + 3] ^= 0xFF
    target.write_bytes(bytes(data))


def test_fletcher32_checksum_is_verified(fixtures: dict[str, Path], tmp_path: Path) -> None:
    """A flipped byte in a fletcher32-protected chunk fails to decode; never a wrong value.

    (All chunks have the same stored size, so chunk (0, 0) is the one the parser decodes
    at parse time: refused there; another chunk fails when read.)
    """
    source = fixtures["filters.h5"]
    broken = tmp_path / "broken.h5"
    _flip_chunk_byte(source, broken, (1, 1))
    broken_array = find_array(parse(broken).store, "/le_i2/fletcher32")
    assert broken_array is not None
    with pytest.raises(Exception, match=r"(?i)checksum"):
        read_array(broken_array)
    # the manifest read pipeline calls the checksum codec directly: it verifies too
    with use_manifest_pipeline(), pytest.raises(Exception, match=r"(?i)checksum"):
        read_array(broken_array)

    first = tmp_path / "broken_first.h5"
    _flip_chunk_byte(source, first, (0, 0))
    refusal = parse(first).skipped["/le_i2/fletcher32"]
    assert refusal.kind == "corrupt"
    assert "chunk (0, 0)" in refusal.reason and "checksum" in refusal.reason.lower()
    assert first.name in str(refusal)


# -------------------------------------------------------------------------------- masks


def test_chunks_with_skipped_filters_read_correctly(fixtures: dict[str, Path]) -> None:
    path = fixtures["masks.h5"]
    masks: dict[str, list[int]] = {}
    with h5py.File(path, "r") as f:
        for name in ("lzf_masked", "gzip_direct"):
            infos: list[Any] = []
            f[name].id.chunk_iter(infos.append)
            masks[name] = [info.filter_mask for info in infos]
    assert any(masks["lzf_masked"]) and any(masks["gzip_direct"])  # the fixture is what we think
    _full_check(path, {})
    parsed = parse(path)
    for name, inlined in (("lzf_masked", 1), ("gzip_direct", 1)):
        array = find_array(parsed.store, f"/{name}")
        assert array is not None
        assert len(array.manifest._inlined) == inlined
    # "don't filter partial chunks": every partial edge chunk is re-encoded, the rest referenced
    for name in ("dont_filter_partial_gzip", "dont_filter_partial_shuffle_gzip"):
        array = find_array(parsed.store, f"/{name}")
        assert array is not None
        grid = array.manifest.shape_chunk_grid
        edges = {
            index
            for index in np.ndindex(grid)
            if index[0] == grid[0] - 1 or index[1] == grid[1] - 1
        }
        assert set(array.manifest._inlined) == edges


# ------------------------------------------------------------------------------ layouts


@pytest.mark.parametrize("name", ["layouts.h5", "layouts_v1.h5"])
def test_layouts_read_back(fixtures: dict[str, Path], name: str) -> None:
    _full_check(fixtures[name], {})


def test_layout_manifests(fixtures: dict[str, Path]) -> None:
    parsed = parse(fixtures["layouts.h5"])

    def array(name: str) -> Any:
        found = find_array(parsed.store, f"/{name}")
        assert found is not None, name
        return found

    paged = array("fixed_array_paged")
    assert paged.manifest.shape_chunk_grid == (64, 32)
    assert int(np.count_nonzero(paged.manifest._lengths)) == 2048
    # never written: no chunk at all, reads as the fill value
    never = array("contiguous_never_written_fill")
    assert int(np.count_nonzero(never.manifest._lengths)) == 0
    assert (read_array(never) == -7).all()
    # compact: the bytes are inlined
    assert set(array("compact").manifest._inlined) == {(0, 0)}
    assert array("compact_scalar").manifest._inlined
    # unallocated chunks are absent and read as the header fill value
    sparse = array("sparse")
    assert int(np.count_nonzero(sparse.manifest._lengths)) == 2
    values = read_array(sparse)
    assert (values[:10, :10] == 5).all() and (values[10:20] == -1).all()
    # a chunk larger than the array keeps HDF5's chunk shape
    assert array("chunk_larger_than_array").metadata.chunks == (512,)


# ------------------------------------------------------------------------------- dtypes


def test_dtypes_read_back_and_unrepresentable_ones_are_refused(fixtures: dict[str, Path]) -> None:
    _full_check(
        fixtures["dtypes.h5"],
        {
            "/object_refs": "datatype",
            "/region_refs": "datatype",
            "/vlen_sequences": "datatype",
            "/array_type": "datatype",
            "/compound_with_vlen": "datatype",
        },
    )
    parsed = parse(fixtures["dtypes.h5"])
    reasons = {name: w.reason for name, w in parsed.skipped.items()}
    assert "object references" in reasons["/object_refs"]
    assert "variable-length sequences" in reasons["/vlen_sequences"]
    assert "array" in reasons["/array_type"]

    def dtype_of(name: str) -> np.dtype:
        array = find_array(parsed.store, f"/{name}")
        assert array is not None
        return read_array(array).dtype

    assert dtype_of("f4_be") == np.dtype(">f4") or dtype_of("f4_be") == np.dtype("<f4")
    assert dtype_of("complex64").kind == "c"
    assert dtype_of("bool") == np.dtype(bool)
    assert dtype_of("vlen_utf8").kind == "T"
    # values h5py converts on read are materialised: spaces stripped, 12-bit masked
    for name in ("spacepad_strings", "uint12", "compound_padded", "compound_mixed_order"):
        array = find_array(parsed.store, f"/{name}")
        assert array is not None and array.manifest._inlined, name


# -------------------------------------------------------------------- external storage


def test_external_raw_storage_is_referenced(
    fixtures: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fixtures["external.h5"]
    monkeypatch.chdir(path.parent)  # HDF5 resolves external file names against the cwd
    parsed = parse(path)
    assert set(parsed.skipped) == {
        "/external_missing",
        "/external_uneven",
        "/virtual_partial_source",
        "/virtual_unaligned",
    }
    assert "not found" in parsed.skipped["/external_missing"].reason
    # Virtual datasets that cannot be references are refused, never read as fill values
    assert "only part of the source" in parsed.skipped["/virtual_partial_source"].reason
    assert "not aligned" in parsed.skipped["/virtual_unaligned"].reason
    single = find_array(parsed.store, "/external_single")
    segments = find_array(parsed.store, "/external_segments")
    assert single is not None and segments is not None
    assert str(single.manifest._paths[(0, 0)]).endswith("external_one.bin")
    assert segments.metadata.chunks == (2, 4)
    assert [str(p).rsplit("/", 1)[1] for p in segments.manifest._paths[:, 0]] == [
        "external_part0.bin",
        "external_part1.bin",
        "external_part2.bin",
    ]
    report = check_raw(path, parsed)
    assert not report.problems, report.problems
    assert report.counts["equal"] == 6  # 2 external, 3 virtual, plain


def test_virtual_datasets_reference_their_sources(fixtures: dict[str, Path]) -> None:
    parsed = parse(fixtures["external.h5"])
    stacked = find_array(parsed.store, "/virtual_stacked")
    assert stacked is not None
    assert stacked.metadata.chunks == (2, 4)
    sources = [str(p).rsplit("/", 1)[-1] for p in stacked.manifest._paths[:, 0]]
    assert sources == ["vds_part0.h5"] * 2 + ["vds_part1.h5"] * 2 + [""]  # tail unmapped
    values = read_array(stacked)
    with h5py.File(fixtures["external.h5"], "r") as f:
        np.testing.assert_array_equal(values, f["virtual_stacked"][()])
    assert (values[8:] == -1).all()
    same = find_array(parsed.store, "/virtual_same_file")
    assert same is not None
    assert str(same.manifest._paths[0]).endswith("external.h5")


# -------------------------------------------------------------------------------- links


def test_links(fixtures: dict[str, Path]) -> None:
    path = fixtures["links.h5"]
    parsed = parse(path)
    assert parsed.skipped == {}
    messages = "\n".join(parsed.link_warnings)
    assert "/soft_dangling: dangling soft link to '/nowhere'" in messages
    assert "/external_missing_file" in messages and "no_such_file.h5" in messages
    assert "/external_missing_object" in messages
    assert "/group/cycle: link cycle" in messages
    soft = find_array(parsed.store, "/soft_to_data")
    external = find_array(parsed.store, "/external_values")
    assert soft is not None and external is not None
    np.testing.assert_array_equal(read_array(soft), np.arange(10))
    assert str(external.manifest._paths[0]).endswith("link_target.h5")
    np.testing.assert_array_equal(read_array(external), np.arange(8))
    report = check_raw(path, parsed)
    assert not report.problems, report.problems


# --------------------------------------------------------------------------- attributes


def test_attributes_of_every_type(fixtures: dict[str, Path]) -> None:
    parsed = parse(fixtures["attributes.h5"])
    for owner in ("/", "/data"):
        reported = parsed.skipped_attributes(owner)
        assert {"complex", "opaque", "compound", "object_reference", "non_utf8_bytes"} <= reported
    array = find_array(parsed.store, "/data")
    assert array is not None
    for attrs in (parsed.store._group.metadata.attributes, array.metadata.attributes):
        assert attrs["int"] == -3
        assert attrs["float_array"][0] == 1.5 and np.isnan(attrs["float_array"][1])
        assert attrs["single_element"] == 7
        assert attrs["vlen_string"] == "hello"
        assert attrs["fixed_string"] == "fixed value"
        assert attrs["fixed_string_array"] == ["ab", "cde"]
        assert attrs["empty_string"] == ""
        assert attrs["compound"] == {"a": 1, "b": 2.5}
        assert attrs["object_reference"] == "/data"
        assert attrs["non_utf8_bytes"] == "\ufffd\ufffd"
        assert "complex" not in attrs and "opaque" not in attrs


# ------------------------------------------------------------------------ netCDF-4 files


def test_netcdf4_matches_h5netcdf(fixtures: dict[str, Path]) -> None:
    report = _full_check(fixtures["netcdf4.nc"], {})
    assert report.counts["decoded equal"] >= 12
    tree = xr.open_datatree(
        quiet(parse(fixtures["netcdf4.nc"]).store), engine="zarr", consolidated=False
    )
    root = tree.to_dataset()
    assert "nv" not in root.variables  # a dimension-only scale is not a variable
    assert root["lat_bnds"].dims == ("lat", "nv")
    assert np.isnan(root["never_written"].values).all()  # kept, reads as fill (masked)
    short = root["short_record"]
    assert short.shape == (4,) and np.isnan(short.values[2:]).all()  # padded like h5netcdf
    assert tree["sub/deeper"].to_dataset()["flag"].dims == ("lon",)


def test_phony_dimensions_match_h5netcdf(fixtures: dict[str, Path]) -> None:
    _full_check(fixtures["phony.h5"], {})
    parsed = parse(fixtures["phony.h5"])
    names = {
        path: array.metadata.dimension_names for path, array in iter_arrays(parsed.store._group)
    }
    # per group, as many phony dims of each length as one dataset needs, numbered by length
    # of first appearance: a(3, 4) b(3, 3) c(4) -> 3: dims 0, 1; 4: dim 2
    assert names["/a"] == ("phony_dim_0", "phony_dim_2")
    assert names["/b"] == ("phony_dim_0", "phony_dim_1")
    assert names["/c"] == ("phony_dim_2",)
    # every dimension name in a group has one length
    sizes: dict[str, int] = {}
    for path, array in iter_arrays(parsed.store._group):
        for dim, size in zip(array.metadata.dimension_names, array.metadata.shape, strict=True):
            assert sizes.setdefault(f"{path.rsplit('/', 1)[0]}:{dim}", size) == size


def test_group_selection_and_drop_variables(fixtures: dict[str, Path]) -> None:
    path = fixtures["netcdf4.nc"]
    sub = HDF5Parser(group="sub")(url_of(path), registry())
    assert set(sub._group.arrays) == {"level", "humidity"}
    assert set(sub._group.groups) == {"deeper"}
    expected = xr.open_dataset(path, engine="h5netcdf", phony_dims="sort", group="sub")
    got = xr.open_dataset(quiet(sub), engine="zarr", consolidated=False)
    xr.testing.assert_identical(got.drop_encoding(), expected.drop_encoding())
    dropped = HDF5Parser(drop_variables=["temp", "flag", "humidity"])(url_of(path), registry())
    assert "temp" not in dropped._group.arrays
    assert "humidity" not in dropped._group.groups["sub"].arrays
    assert "flag" not in dropped._group.groups["sub"].groups["deeper"].arrays
    with pytest.raises(ValueError, match="no group"):
        HDF5Parser(group="nope")(url_of(path), registry())


def test_open_virtual_dataset_and_datatree(fixtures: dict[str, Path]) -> None:
    path = fixtures["netcdf4.nc"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vds = virtualizarr.open_virtual_dataset(
            url_of(path), registry=registry(), parser=HDF5Parser()
        )
        vdt = virtualizarr.open_virtual_datatree(
            url_of(path), registry=registry(), parser=HDF5Parser()
        )
    # virtual variables are not CF-decoded (no character concatenation): compare undecoded
    expected = xr.open_dataset(path, engine="h5netcdf", phony_dims="sort", decode_cf=False)
    assert set(vds.variables) == set(expected.variables)
    for name, variable in expected.variables.items():
        assert vds[name].dims == variable.dims
    assert set(vdt.children) == {"sub"}


# ---------------------------------------------------------------------- file formats


@pytest.mark.parametrize(
    "name",
    [
        "userblock.h5",
        "superblock_v0.h5",
        "superblock_v1.h5",
        "superblock_v2.h5",
        "superblock_v3.h5",
    ],
)
def test_userblock_and_superblock_versions(fixtures: dict[str, Path], name: str) -> None:
    path = fixtures[name]
    if name.startswith("superblock"):
        assert path.read_bytes()[8] == int(name[len("superblock_v")])
    _full_check(path, {})


def test_not_hdf5(fixtures: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(NotHDF5Error, match="netCDF-3"):
        HDF5Parser()(url_of(fixtures["netcdf3.nc"]), registry())
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"this is not an HDF5 file" * 100)
    with pytest.raises(NotHDF5Error, match=r"junk\.h5"):
        HDF5Parser()(url_of(junk), registry())


def test_truncated_file_is_an_error_not_fill(fixtures: dict[str, Path], tmp_path: Path) -> None:
    data = fixtures["layouts.h5"].read_bytes()
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(CorruptFileError, match=r"truncated\.h5.*truncated file"):
        HDF5Parser()(url_of(truncated), registry())


def test_chunks_past_the_end_of_the_file_are_refused(
    fixtures: dict[str, Path], tmp_path: Path
) -> None:
    """A file cut after its metadata but before its data: refused, never read as fill."""
    source = fixtures["layouts.h5"]
    parsed = parse(source)
    array = find_array(parsed.store, "/btree_v2_gzip")
    assert array is not None
    last_byte = int((array.manifest._offsets + array.manifest._lengths).max())
    size = source.stat().st_size
    with h5py.File(source, "r") as f:
        context = ArrayContext(
            url=url_of(source),
            file_size=last_byte - 1,  # as if the object ended before the last chunk
            on_fill_out_of_range="warn",
            max_inline_bytes=1 << 20,
            exists=lambda url: True,
            open_file=lambda url: (f, size),
        )
        dataset = f["btree_v2_gzip"]
        with pytest.raises(DatasetRefused, match="past the end of the file"):
            build_array(dataset, Target(dataset.shape, ("y", "x")), context)


# --------------------------------------------------------------------------- options


def test_on_unsupported_raise(fixtures: dict[str, Path]) -> None:
    with pytest.raises(
        UnsupportedFeatureError, match=r"'/\w+/(scaleoffset|zfp|nbit)': unsupported HDF5 filter"
    ):
        HDF5Parser(on_unsupported="raise")(url_of(fixtures["filters.h5"]), registry())


def test_parser_pickles(fixtures: dict[str, Path]) -> None:
    parser = HDF5Parser(group="sub", drop_variables=["level"], max_inline_bytes=1000)
    clone = pickle.loads(pickle.dumps(parser))
    store = clone(url_of(fixtures["netcdf4.nc"]), registry())
    assert set(store._group.arrays) == {"humidity"}


def test_max_inline_bytes_refuses_large_materialisation(fixtures: dict[str, Path]) -> None:
    parsed = parse(fixtures["dtypes.h5"], max_inline_bytes=8)
    assert parsed.skipped["/vlen_utf8"].kind == "size"


def test_codecs_resolve_in_a_fresh_zarr_process(fixtures: dict[str, Path]) -> None:
    """Every codec written is found through entry points by a process importing only zarr."""
    names: set[str] = set()
    for name in ("filters.h5", "masks.h5", "layouts.h5", "dtypes.h5"):
        for _, array in iter_arrays(parse(fixtures[name]).store._group):
            names.update(_codec_names(array))
    script = (
        "import sys, zarr.registry as r\n"
        "assert 'virtualizarr_fill' not in sys.modules\n"
        "missing = []\n"
        "for n in sys.argv[1:]:\n"
        "    try:\n"
        "        r.get_codec_class(n)\n"
        "    except Exception as e:\n"
        "        missing.append(f'{n}: {e}')\n"
        "print('\\n'.join(missing))\n"
        "sys.exit(1 if missing else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *sorted(names)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_parse_leaves_no_h5py_objects_to_the_cyclic_collector(tmp_path: Path) -> None:
    """The walked tree links parents and children; left as garbage, the h5py objects it
    holds stay registered until the cyclic collector runs, and h5py visits every
    registered object whenever a file closes, so each later parse of a long-running
    process got slower (2-3x after a hundred files). The parse unlinks the tree."""
    import gc

    path = tmp_path / "nested.h5"
    with h5py.File(path, "w") as file:
        for outer in range(3):
            group = file.create_group(f"g{outer}")
            for inner in range(3):
                group.create_group(f"h{inner}").create_dataset("x", data=np.arange(4))
    parser = HDF5Parser()
    parser(url_of(path), registry())  # imports and one-time caches
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = parser(url_of(path), registry())
        gc.collect()
        left = [type(obj).__name__ for obj in gc.garbage if type(obj).__module__.startswith("h5py")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert store is not None
    assert left == []
