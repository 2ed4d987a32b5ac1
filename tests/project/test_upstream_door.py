"""One door to upstream internals.

Every private name, private field and constructor bypass of zarr, VirtualiZarr, xarray
and Icechunk is used in ``virtualizarr_fill/upstream.py`` only, and h5py's in
``virtualizarr_fill/hdf5/_libhdf5.py`` only; counted from the code (``ast``): imports of a
private module or name of those packages, attribute access to (or ``getattr`` of) a name
private to one of their classes, and ``object.__new__``. Then each door's feature
detection is met for real: an upstream that lacks the feature, simulated by removing or
changing it, gets one clear error naming the package, its version and the feature, or
the public route where one exists.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
import virtualizarr
import zarr
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from zarr.codecs import Crc32cCodec
from zarr.core.buffer import default_buffer_prototype

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import UpstreamFeatureError, VirtualizarrFillError
from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.manifests import FillManifestArray
from virtualizarr_fill.tiff.arrays import _inlined_template

PACKAGE = Path(__file__).resolve().parents[2] / "virtualizarr_fill"
UPSTREAMS = ("zarr", "virtualizarr", "xarray", "icechunk", "h5py")
DOORS = {"upstream.py", "hdf5/_libhdf5.py"}

#: Names private to classes of the upstream packages that the package has used (found
#: by grepping it for ``._name`` and ``"_name"`` and keeping those defined upstream).
UPSTREAM_PRIVATE_NAMES = frozenset(
    {
        # VirtualiZarr: ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
        "_paths",
        "_offsets",
        "_lengths",
        "_inlined",
        "_metadata",
        "_manifest",
        "_members",
        "_group",
        "_registry",
        "_get_deepest_group_or_array",
        # zarr: arrays, chunk grids, codecs, stores
        "_chunk_grid",
        "_dimensions",
        "_is_regular",
        "_unique_edge_lengths",
        "_decode_sync",
        "_encode_sync",
        "_codec",
        "_store",
        "_get_many",
        # xarray: Variable
        "_attrs",
        "_encoding",
        "_data",
        # h5py: high-level objects
        "_d",
        "_dcpl",
        "_id",
    }
)


def _is_upstream_private_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] in UPSTREAMS and any(part.startswith("_") for part in parts[1:])


def _uses(tree: ast.AST) -> Iterator[str]:
    """What in ``tree`` touches upstream internals, described."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in UPSTREAMS:
                continue
            if _is_upstream_private_module(node.module):
                yield f"line {node.lineno}: from {node.module} import"
            for alias in node.names:
                if alias.name.startswith("_"):
                    yield f"line {node.lineno}: imports {node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_upstream_private_module(alias.name):
                    yield f"line {node.lineno}: import {alias.name}"
        elif isinstance(node, ast.Attribute) and node.attr in UPSTREAM_PRIVATE_NAMES:
            yield f"line {node.lineno}: .{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if (
                node.func.id in ("getattr", "hasattr", "setattr", "delattr")
                and len(args) > 1
                and isinstance(args[1], ast.Constant)
                and args[1].value in UPSTREAM_PRIVATE_NAMES
            ):
                yield f"line {node.lineno}: {node.func.id}(..., {args[1].value!r})"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__new__"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "object"
        ):
            yield f"line {node.lineno}: object.__new__"


def touching_modules(package: Path) -> dict[str, list[str]]:
    """Each module of ``package`` that touches upstream internals, with what it does."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        uses = list(_uses(ast.parse(path.read_text(encoding="utf-8"))))
        if uses:
            found[path.relative_to(package).as_posix()] = uses
    return found


def test_only_the_doors_touch_upstream_internals() -> None:
    found = touching_modules(PACKAGE)
    outside = {module: uses for module, uses in found.items() if module not in DOORS}
    assert not outside, "upstream internals outside the doors:\n" + "\n".join(
        f"{module}: {'; '.join(uses)}" for module, uses in outside.items()
    )
    assert set(found) == DOORS  # and the doors are where they are


def test_the_count_sees_each_kind_of_use(tmp_path: Path) -> None:
    (tmp_path / "uses.py").write_text(
        "from zarr.storage._common import StorePath\n"
        "from zarr.codecs.numcodecs import _codecs\n"
        "import h5py._objects\n"
        "x = manifest._paths\n"
        "y = getattr(store, '_group', None)\n"
        "z = object.__new__(ChunkManifest)\n"
        "own = self._cache  # a name no upstream class has: not counted\n"
    )
    (tmp_path / "clean.py").write_text("from zarr.storage import StorePath\nx = self._own\n")
    assert touching_modules(tmp_path) == {
        "uses.py": [
            "line 1: from zarr.storage._common import",
            "line 2: imports zarr.codecs.numcodecs._codecs",
            "line 3: import h5py._objects",
            "line 4: ._paths",
            "line 5: getattr(..., '_group')",
            "line 6: object.__new__",
        ]
    }


# -- feature detection ------------------------------------------------------------------------


@pytest.fixture
def fresh_checks() -> Iterator[None]:
    """Feature checks asked afresh, and forgotten again after the upstream is restored."""
    upstream.clear_feature_checks()
    yield
    upstream.clear_feature_checks()


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message
    assert isinstance(error, ImportError) and isinstance(error, VirtualizarrFillError)
    return message


def _manifest() -> ChunkManifest:
    return ChunkManifest(
        {
            "0": {"path": "s3://bucket/a.tif", "offset": 8, "length": 100},
            "1": {"path": "", "offset": 0, "length": 1, "data": b"\x07"},
        },
        shape=(3,),
    )


def test_with_the_tested_releases_every_feature_is_found(fresh_checks: None) -> None:
    """Each probe recognises the installed releases (a probe that errs would silently
    send every call to the slower public route)."""
    from zarr.core.group import GroupMetadata

    from virtualizarr_fill.tiff.arrays import manifest_group
    from virtualizarr_fill.zarr_model.chunk_grids import _rectilinear_metadata

    metadata = _inlined_template(np.dtype("uint8"), 1)
    manifest = ChunkManifest({}, shape=(1,))
    upstream.manifest_entries(_manifest())
    upstream.manifest_array(ManifestArray, metadata, manifest)
    manifest_group(arrays={}, attributes={"a": 1})
    upstream.replaced(metadata, attributes={})
    upstream.replaced(GroupMetadata(attributes={}), attributes={})
    _rectilinear_metadata(((1, 2),))
    upstream.variable_sharing(("x",), np.zeros(1), {"a": 1}, {})
    assert upstream._checked == {
        "ChunkManifest state": True,
        "ManifestArray state": True,
        "ManifestGroup state": True,
        "ArrayV3Metadata state": True,
        "GroupMetadata state": True,
        "RectilinearChunkGridMetadata state": True,
        "Variable attrs": True,
    }


def test_a_missing_private_function_names_package_version_and_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from virtualizarr.manifests import array_api

    monkeypatch.delattr(array_api, "_concat_manifests")
    concat = upstream._private(
        "virtualizarr.manifests.array_api", "_concat_manifests", "to concatenate chunk manifests"
    )
    with pytest.raises(UpstreamFeatureError) as raised:
        concat([_manifest(), _manifest()], axis=0)
    assert _one_line(raised.value) == (
        f"virtualizarr {virtualizarr.__version__} has no "
        "virtualizarr.manifests.array_api._concat_manifests, which virtualizarr-fill uses "
        "to concatenate chunk manifests; install a virtualizarr release that has it "
        f"(tested up to {upstream.NEWEST_TESTED['virtualizarr']})"
    )


def test_a_store_without_its_group_field_is_refused_clearly() -> None:
    store = ManifestStore(ManifestGroup(arrays={}, attributes={}))
    assert isinstance(upstream.group_of(store), ManifestGroup)
    del store._group  # a VirtualiZarr that keeps the group under another name
    with pytest.raises(UpstreamFeatureError) as raised:
        upstream.group_of(store)
    assert _one_line(raised.value).startswith(
        f"virtualizarr {virtualizarr.__version__} has no ManifestStore._group, "
    )


def test_arrays_with_more_state_take_the_constructor_or_are_refused(
    monkeypatch: pytest.MonkeyPatch, fresh_checks: None
) -> None:
    original = ManifestArray.__init__

    def init_with_more_state(self: ManifestArray, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.cache = {}  # type: ignore[attr-defined]

    monkeypatch.setattr(ManifestArray, "__init__", init_with_more_state)
    metadata = _inlined_template(np.dtype("uint8"), 1)
    manifest = ChunkManifest({}, shape=(1,))
    # A copy goes through the constructor, which then sets up all the state.
    copy = upstream.manifest_array(ManifestArray, metadata, manifest)
    assert copy.cache == {}  # type: ignore[attr-defined]
    assert copy.metadata is metadata and copy.manifest is manifest
    # Setting the state directly has no public fallback: refused by name.
    with pytest.raises(UpstreamFeatureError) as raised:
        FillManifestArray(metadata=metadata, chunkmanifest=manifest)
    assert _one_line(raised.value).startswith(
        f"virtualizarr {virtualizarr.__version__} has no ManifestArray state of exactly "
        "_metadata and _manifest, which virtualizarr-fill uses to build manifest arrays"
    )


def test_manifests_with_other_state_are_read_and_built_through_public_methods(
    monkeypatch: pytest.MonkeyPatch, fresh_checks: None
) -> None:
    direct = upstream.manifest_entries(_manifest())
    original = ChunkManifest.from_arrays.__func__  # type: ignore[attr-defined]

    def from_arrays_with_more_state(cls: type[ChunkManifest], **kwargs: object) -> ChunkManifest:
        manifest = original(cls, **kwargs)
        manifest.index = None
        return manifest

    monkeypatch.setattr(ChunkManifest, "from_arrays", classmethod(from_arrays_with_more_state))
    upstream.clear_feature_checks()  # as in a process started with that VirtualiZarr
    public = upstream.manifest_entries(_manifest())
    paths = ["s3://bucket/a.tif", "__inlined__", ""]
    assert public.paths.tolist() == direct.paths.tolist() == paths
    # (a missing chunk's offset and length are whatever the manifest holds)
    assert public.offsets.tolist()[:2] == direct.offsets.tolist()[:2] == [8, 0]
    assert public.lengths.tolist()[:2] == direct.lengths.tolist()[:2] == [100, 1]
    assert public.inlined == direct.inlined == {(1,): b"\x07"}
    built = upstream.chunk_manifest(
        direct.paths[:1].copy(), direct.offsets[:1].copy(), direct.lengths[:1].copy()
    )
    assert built.index is None  # type: ignore[attr-defined]  (from_arrays built it)
    assert built.dict() == {"0": {"path": "s3://bucket/a.tif", "offset": 8, "length": 100}}


def test_a_codec_without_its_synchronous_decode_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = Crc32cCodec()
    data = default_buffer_prototype().buffer.from_bytes(b"abc")
    monkeypatch.delattr(Crc32cCodec, "_decode_sync")
    with pytest.raises(UpstreamFeatureError) as raised:
        upstream.decode_sync(codec, data, None)
    assert _one_line(raised.value).startswith(
        f"zarr {zarr.__version__} has no Crc32cCodec._decode_sync, "
    )


def test_h5py_names_decode_as_h5py_decodes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "names.h5"
    with h5py.File(path, "w") as f:
        f.create_group("température")
    with h5py.File(path, "r") as f:
        raw = "température".encode()
        assert [_libhdf5.decoded_name(f, raw)] == list(f) == ["température"]
        owner = next(cls for cls in type(f).__mro__ if "_d" in vars(cls))
        monkeypatch.delattr(owner, "_d")  # an h5py without the private decoder
        assert _libhdf5.decoded_name(f, raw) == "température"
        assert _libhdf5.decoded_name(f, b"\xff") == b"\xff"
        assert _libhdf5.decoded_name(f, None) is None
