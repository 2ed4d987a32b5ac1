"""The public surface frozen for 1.0: every error and warning in ``errors.py`` and
exported from the root, one warning base class, ``TIFFParser(layout=...)``, one name for
the fill-range policy, frozen parsers, and the deprecated names of earlier releases
(each still working, with a warning whose suggested call is made here)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pickle
import re
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
import virtualizarr
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from fixtures import make_tiff_fixtures
from tests._cli import run_cli
from tests._manifest_builders import icechunk_repo
from virtualizarr_fill import (
    AttributeWarning,
    FillValueError,
    FillValueWarning,
    HDF5Parser,
    IFDChainWarning,
    NonFiniteAttributeWarning,
    OversizedChunkWarning,
    SkippedDatasetWarning,
    SkippedLinkWarning,
    TIFFParser,
    VirtualizarrFillDeprecationWarning,
    VirtualizarrFillWarning,
    errors,
    to_icechunk,
)
from virtualizarr_fill.cli._errors import EXIT_OK, EXIT_USAGE
from virtualizarr_fill.cli._record import BuildRecord

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "virtualizarr_fill"
REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def _public_classes() -> dict[str, type]:
    """The error and warning classes ``errors.py`` defines or re-exports."""
    found = {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and name[0] != "_"
    }
    assert len(found) > 30  # the module was read
    return found


def _url(path: Path) -> str:
    return "file://" + str(path.resolve())


# -- every error and warning in errors.py, exported and documented -------------------------


def test_every_public_class_is_exported_from_the_root() -> None:
    classes = _public_classes()
    assert sorted(classes) == sorted(errors.__all__)
    missing = sorted(set(classes) - set(virtualizarr_fill.__all__))
    assert missing == []
    for name, cls in classes.items():
        assert getattr(virtualizarr_fill, name) is cls


def test_every_warning_shares_the_base_class() -> None:
    warning_classes = [c for c in _public_classes().values() if issubclass(c, Warning)]
    assert len(warning_classes) >= 11
    for cls in warning_classes:
        assert issubclass(cls, VirtualizarrFillWarning), cls
        assert issubclass(cls, UserWarning), cls


def test_no_error_or_warning_class_is_defined_outside_errors_py() -> None:
    """A public class subclassing a package error, or any warning, lives in errors.py
    (the modules raising it import it from there)."""
    known = set(_public_classes())
    bases_public = known | {
        "Warning",
        "UserWarning",
        "RuntimeWarning",
        "DeprecationWarning",
        "FutureWarning",
    }
    misplaced = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            if bases & bases_public:
                misplaced.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert misplaced == []


def test_the_api_reference_lists_every_error_and_warning() -> None:
    page = (ROOT / "docs" / "api" / "errors.md").read_text()
    documented = set(re.findall(r"^::: virtualizarr_fill\.(\w+)$", page, re.M))
    assert documented == set(errors.__all__)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("virtualizarr_fill.hdf5.parser", "SkippedDatasetWarning"),
        ("virtualizarr_fill.hdf5", "SkippedLinkWarning"),
        ("virtualizarr_fill.hdf5.walk", "SkippedLinkWarning"),
        ("virtualizarr_fill.hdf5.attrs", "AttributeWarning"),
        ("virtualizarr_fill.fill", "FillValueWarning"),
        ("virtualizarr_fill.fill.combine", "FillConflictError"),
        ("virtualizarr_fill.fill.encoding", "EncodingConflictError"),
        ("virtualizarr_fill.tiff.chain", "IFDChainWarning"),
        ("virtualizarr_fill.assemble.time_stack", "TimeCoordinateError"),
        ("virtualizarr_fill.stac.items", "StacItemError"),
        ("virtualizarr_fill.writers.attributes", "NonFiniteAttributeWarning"),
        ("virtualizarr_fill.writers.kerchunk", "ZarrFormat2Error"),
        ("virtualizarr_fill.writers.icechunk_reads", "SourceFileChangedError"),
        ("virtualizarr_fill.writers.repository", "RepositoryNotFoundError"),
        ("virtualizarr_fill.writers.repository", "MultiscaleGroupError"),
    ],
)
def test_old_import_locations_still_work(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_a_moved_error_keeps_its_message_and_pickles() -> None:
    error = errors.SourceFileChangedError("file:///data/a%20b.tif", "/repo")
    assert str(error).startswith("/data/a b.tif: modified after the Icechunk repository /repo")
    clone = pickle.loads(pickle.dumps(error))
    assert str(clone) == str(error) and clone.url == error.url
    assert isinstance(error, virtualizarr_fill.StoreReadError)


# -- the warning base class catches what the package issues --------------------------------


def _as_errors(call: Any, expected: type[Warning]) -> None:
    """``call`` issues ``expected`` as a warning, and raises it once
    ``VirtualizarrFillWarning`` is turned into errors."""
    with pytest.warns(expected):
        call()
    with warnings.catch_warnings():
        warnings.simplefilter("error", VirtualizarrFillWarning)
        with pytest.raises(expected):
            call()


def test_base_class_turns_a_tiff_nodata_warning_into_an_error(tmp_path: Path) -> None:
    path = make_tiff_fixtures.write_fixtures(tmp_path, ["gdal_uint8_nodata_out_of_range"])[
        "gdal_uint8_nodata_out_of_range"
    ]
    parser = TIFFParser(on_fill_out_of_range="warn")
    _as_errors(lambda: parser(_url(path), REGISTRY), FillValueWarning)


def test_base_class_turns_an_ifd_chain_warning_into_an_error(tmp_path: Path) -> None:
    path = tmp_path / "loop.tif"
    with tifffile.TiffWriter(path) as writer:
        for number in range(4):
            writer.write(np.full((3, 4), number, np.uint8), photometric="minisblack")
    with tifffile.TiffFile(path) as tif:
        offsets = [int(page.offset) for page in tif.pages]
    data = bytearray(path.read_bytes())
    (count,) = np.frombuffer(data, "<u2", 1, offsets[3])
    pointer = offsets[3] + 2 + int(count) * 12
    data[pointer : pointer + 4] = np.uint32(offsets[1]).tobytes()  # IFD 3 -> IFD 1
    path.write_bytes(bytes(data))
    parser = TIFFParser(layout="tree")
    _as_errors(lambda: parser(_url(path), REGISTRY), IFDChainWarning)


@pytest.fixture
def odd_hdf5(tmp_path: Path) -> dict[str, Path]:
    """HDF5 files that each need one warning (checked against h5py's view)."""
    paths = {name: tmp_path / f"{name}.h5" for name in ("fill", "link", "oversized", "attr")}
    with h5py.File(paths["fill"], "w") as f:
        f.create_dataset("v", data=np.arange(3, dtype="u1")).attrs["_FillValue"] = np.int16(-127)
    with h5py.File(paths["link"], "w") as f:
        f.create_dataset("v", data=np.arange(3, dtype="u1"))
        f["dangling"] = h5py.SoftLink("/nowhere")
    with h5py.File(paths["oversized"], "w") as f:
        f.create_dataset("v", data=np.arange(3, dtype="u1"), maxshape=(None,), chunks=(10,))
    with h5py.File(paths["attr"], "w") as f:
        f.create_dataset("v", data=np.arange(3, dtype="u1"))
        f["v"].attrs["odd"] = np.zeros((2, 2, 2), dtype=[("a", "i4"), ("b", "f8")])
    with h5py.File(paths["link"], "r") as f:
        assert f.get("dangling") is None  # h5py cannot follow it either
    return paths


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("fill", FillValueWarning),
        ("link", SkippedLinkWarning),
        ("oversized", OversizedChunkWarning),
        ("attr", AttributeWarning),
    ],
)
def test_base_class_turns_hdf5_warnings_into_errors(
    odd_hdf5: dict[str, Path], name: str, expected: type[Warning]
) -> None:
    def call() -> None:
        virtualizarr.open_virtual_dataset(
            _url(odd_hdf5[name]), registry=REGISTRY, parser=HDF5Parser()
        )

    _as_errors(call, expected)


def test_base_class_turns_a_skipped_dataset_into_an_error(tmp_path: Path) -> None:
    path = tmp_path / "vlen.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("ok", data=np.arange(3, dtype="u1"))
        f.create_dataset("ragged", (2,), dtype=h5py.vlen_dtype(np.dtype("i4")))
    parser = HDF5Parser()  # variable-length sequences: no Zarr data type holds them
    _as_errors(lambda: parser(_url(path), REGISTRY), SkippedDatasetWarning)


def test_base_class_turns_a_non_finite_attribute_into_an_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = data_dir / "nan.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(3, dtype="u1")).attrs["valid_max"] = np.nan
    vds = virtualizarr.open_virtual_dataset(_url(path), registry=REGISTRY, parser=HDF5Parser())
    repo = icechunk_repo(tmp_path / "repo", data_dir)

    def call() -> None:
        to_icechunk(vds, repo.writable_session("main").store)

    _as_errors(call, NonFiniteAttributeWarning)


def test_base_class_catches_the_deprecations() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", VirtualizarrFillWarning)
        with pytest.raises(VirtualizarrFillDeprecationWarning):
            TIFFParser(tree=True)  # type: ignore[call-arg]
    assert issubclass(VirtualizarrFillDeprecationWarning, DeprecationWarning)


# -- TIFFParser(layout=...) and the deprecated options -------------------------------------


@pytest.fixture(scope="module")
def tiffs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_tiff_fixtures.write_fixtures(
        tmp_path_factory.mktemp("public-api"),
        ["gdal_cog_overviews_mask", "multipage_stack", "gdal_uint8_nodata_out_of_range"],
    )


def _contents(store: Any) -> dict[str, Any]:
    """Every array of the store (any depth): its metadata and its values as zarr reads
    them through the references."""
    root = zarr.open_group(store=store, mode="r", zarr_format=3)
    found: dict[str, Any] = {"": root.attrs.asdict()}
    for path, array in _walk(root):
        found[path] = (array.metadata.to_dict(), array[...])
    return found


def _walk(group: zarr.Group, prefix: str = "") -> list[tuple[str, zarr.Array]]:
    out: list[tuple[str, zarr.Array]] = []
    for name, member in group.members():
        path = f"{prefix}{name}"
        if isinstance(member, zarr.Group):
            out.extend(_walk(member, path + "/"))
        else:
            out.append((path, member))
    return out


def _assert_same(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert left.keys() == right.keys()
    for key, value in left.items():
        if key == "":
            assert value == right[key]
            continue
        assert value[0] == right[key][0], key
        np.testing.assert_array_equal(value[1], right[key][1], err_msg=key)


def _suggested_parser(caught: list[warnings.WarningMessage]) -> TIFFParser:
    """The call the deprecation warning suggests, made."""
    (message,) = [
        str(w.message) for w in caught if w.category is VirtualizarrFillDeprecationWarning
    ]
    found = re.search(r"; use (TIFFParser\(.*\))$", message)
    assert found, message
    parser = eval(found.group(1), {"TIFFParser": TIFFParser})
    assert isinstance(parser, TIFFParser)
    return parser


@pytest.mark.parametrize(
    ("old", "layout", "fixture"),
    [
        ({"tree": True}, "tree", "gdal_cog_overviews_mask"),
        ({"stack_pages": True}, "pages", "multipage_stack"),
        ({"overviews": "multiscales"}, "multiscales", "gdal_cog_overviews_mask"),
    ],
)
def test_each_layout_equals_its_old_option(
    tiffs: dict[str, Path], old: dict[str, Any], layout: str, fixture: str
) -> None:
    url = _url(tiffs[fixture])
    new = _contents(TIFFParser(layout=layout)(url, REGISTRY))  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old_parser = TIFFParser(**old)
    assert old_parser == TIFFParser(layout=layout)  # type: ignore[arg-type]
    _assert_same(_contents(old_parser(url, REGISTRY)), new)
    suggested = _suggested_parser(caught)
    assert suggested == TIFFParser(layout=layout)  # type: ignore[arg-type]
    _assert_same(_contents(suggested(url, REGISTRY)), new)


def test_layouts_hold_what_tifffile_reads(tiffs: dict[str, Path]) -> None:
    """Each layout against tifffile: the pages stacked, every image a group."""
    with tifffile.TiffFile(tiffs["multipage_stack"]) as tif:
        pages = np.stack([page.asarray() for page in tif.pages])
    stacked = _contents(TIFFParser(layout="pages")(_url(tiffs["multipage_stack"]), REGISTRY))
    values = stacked["band_data"][1]
    np.testing.assert_array_equal(values.reshape(pages.shape), pages)
    with tifffile.TiffFile(tiffs["gdal_cog_overviews_mask"]) as tif:
        images = len(tif.pages) + sum(len(p.pages) for p in tif.pages if p.pages)  # type: ignore[union-attr]
    tree = _contents(TIFFParser(layout="tree")(_url(tiffs["gdal_cog_overviews_mask"]), REGISTRY))
    assert len([k for k in tree if k.endswith("/band_data")]) == images
    default = _contents(TIFFParser()(_url(tiffs["gdal_cog_overviews_mask"]), REGISTRY))
    with tifffile.TiffFile(tiffs["gdal_cog_overviews_mask"]) as tif:
        first = tif.pages[0].asarray()  # type: ignore[union-attr]
    np.testing.assert_array_equal(np.moveaxis(default["band_data"][1], 0, -1), first)


def test_old_fill_keyword_warns_and_gives_the_same_result(tiffs: dict[str, Path]) -> None:
    url = _url(tiffs["gdal_uint8_nodata_out_of_range"])
    with pytest.raises(FillValueError, match="'-10000' cannot be represented as uint8"):
        TIFFParser()(url, REGISTRY)
    with pytest.warns(FillValueWarning):
        new = _contents(TIFFParser(on_fill_out_of_range="warn")(url, REGISTRY))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old_parser = TIFFParser(on_out_of_range="warn")  # type: ignore[call-arg]
        old = _contents(old_parser(url, REGISTRY))
    _assert_same(old, new)
    suggested = _suggested_parser(caught)
    assert suggested == TIFFParser(on_fill_out_of_range="warn")
    with pytest.warns(FillValueWarning):
        _assert_same(_contents(suggested(url, REGISTRY)), new)
    with pytest.warns(VirtualizarrFillDeprecationWarning), pytest.raises(FillValueError):
        TIFFParser(on_out_of_range="raise")(url, REGISTRY)  # type: ignore[call-arg]
    with tifffile.TiffFile(tiffs["gdal_uint8_nodata_out_of_range"]) as tif:
        np.testing.assert_array_equal(new["band_data"][1][0], tif.pages[0].asarray())  # type: ignore[union-attr]


def test_old_options_read_back_with_a_warning() -> None:
    parser = TIFFParser(layout="pages", on_fill_out_of_range="warn")
    expected = {"tree": False, "stack_pages": True, "overviews": None, "on_out_of_range": "warn"}
    for name, value in expected.items():
        with pytest.warns(VirtualizarrFillDeprecationWarning, match=f"TIFFParser.{name} is"):
            assert getattr(parser, name) == value
    assert TIFFParser(layout="multiscales").layout == "multiscales"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tree": True, "stack_pages": True}, "tree=True and stack_pages=True exclude each other"),
        ({"tree": True, "layout": "pages"}, "tree=True and layout='pages' exclude each other"),
        ({"layout": "pyramid"}, "layout must be one of 'image', 'tree', 'pages', 'multiscales'"),
        ({"ifd": 1, "layout": "tree"}, "ifd selects the image of layout='image'"),
        ({"time_from": "datetime", "layout": "pages"}, "time_from needs layout='image'"),
        ({"on_fill_out_of_range": "drop"}, "on_fill_out_of_range must be 'raise' or 'warn'"),
        (
            {"on_out_of_range": "raise", "on_fill_out_of_range": "warn"},
            "contradicts on_fill_out_of_range='warn'",
        ),
        ({"overviews": "pyramid"}, "overviews must be None or 'multiscales'"),
    ],
)
def test_contradicting_options_are_refused(options: dict[str, Any], message: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match=re.escape(message)):
            TIFFParser(**options)


def test_hdf5_parser_takes_the_same_fill_option_name(odd_hdf5: dict[str, Path]) -> None:
    url = _url(odd_hdf5["fill"])
    with pytest.raises(FillValueError, match="-127"):
        HDF5Parser(on_fill_out_of_range="raise")(url, REGISTRY)
    with pytest.warns(FillValueWarning):
        HDF5Parser()(url, REGISTRY)
    tiff_options = set(inspect.signature(TIFFParser).parameters)
    hdf5_options = set(inspect.signature(HDF5Parser).parameters)
    assert "on_fill_out_of_range" in tiff_options & hdf5_options
    with pytest.raises(ValueError, match="on_fill_out_of_range must be"):
        HDF5Parser(on_fill_out_of_range="drop")  # type: ignore[arg-type]


# -- frozen parsers -----------------------------------------------------------------------


@pytest.mark.parametrize("parser", [TIFFParser(layout="tree"), HDF5Parser(drop_variables=["x"])])
def test_parsers_are_frozen_dataclasses(parser: Any) -> None:
    fields = dataclasses.fields(parser)
    assert fields
    for field in fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(parser, field.name, getattr(parser, field.name))
    clone = pickle.loads(pickle.dumps(parser))
    assert clone == parser and hash(clone) == hash(parser)
    assert dataclasses.replace(parser) == parser


# -- the command line ----------------------------------------------------------------------


def _untimed(text: str) -> str:
    """``inspect`` output without the parse times (they differ from run to run)."""
    return re.sub(r'"(\w*seconds)": [0-9.e-]+', r'"\1": 0', text)


def test_cli_old_tiff_option_warns_and_suggests_one_that_works(
    tiffs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tiffs["gdal_uint8_nodata_out_of_range"]
    code, out, err = run_cli(capsys, "inspect", path, "--tiff-option", "on_out_of_range=warn")
    assert code == EXIT_OK and "'-10000' ignored" in out
    (line,) = [x for x in err.splitlines() if "deprecated" in x]
    found = re.fullmatch(
        r"virtualizarr-fill: warning: --tiff-option on_out_of_range=warn is deprecated and "
        r"will be removed in the next release; use --tiff-option (\S+)",
        line,
    )
    assert found, line
    code, suggested_out, err = run_cli(capsys, "inspect", path, "--tiff-option", found.group(1))
    assert code == EXIT_OK and suggested_out == out and "deprecated" not in err


def test_cli_old_layout_option_warns_and_suggests_one_that_works(
    tiffs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tiffs["gdal_cog_overviews_mask"]
    code, out, err = run_cli(capsys, "inspect", path, "--json", "--tiff-option", "tree=true")
    assert code == EXIT_OK, err
    found = re.search(r"--tiff-option tree=true is deprecated .*; use --tiff-option (\S+)$", err)
    assert found and found.group(1) == "layout=tree", err
    code, suggested_out, _ = run_cli(
        capsys, "inspect", path, "--json", "--tiff-option", found.group(1)
    )
    assert code == EXIT_OK and _untimed(suggested_out) == _untimed(out)
    code, all_images, _ = run_cli(capsys, "inspect", path, "--json", "--all-images")
    assert code == EXIT_OK and _untimed(all_images) == _untimed(out)
    code, _, err = run_cli(
        capsys, "inspect", path, "--tiff-option", "tree=true", "--tiff-option", "layout=pages"
    )
    assert code == EXIT_USAGE and "exclude each other" in err


def test_build_records_of_earlier_releases_read_with_the_new_names() -> None:
    old = (
        '{"mode": "multiscales", '
        '"tiff_options": {"overviews": "multiscales", "on_out_of_range": "warn"}}'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = BuildRecord.from_attributes({"virtualizarr_fill_build": old}, "store")
    assert record is not None
    assert record.tiff_options == {"layout": "multiscales", "on_fill_out_of_range": "warn"}
    assert TIFFParser(**record.tiff_options) == TIFFParser(
        layout="multiscales", on_fill_out_of_range="warn"
    )


def test_the_old_name_of_the_upstream_feature_error_warns_and_answers_the_new_class() -> None:
    with pytest.warns(VirtualizarrFillDeprecationWarning, match="use virtualizarr_fill.Upstream"):
        old = virtualizarr_fill.MissingUpstreamFeatureError
    assert old is virtualizarr_fill.UpstreamFeatureError
    assert issubclass(old, ImportError)
