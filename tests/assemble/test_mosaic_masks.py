"""Tiles with an internal mask (GDAL's per-dataset mask IFD) or an alpha band, which
``rasterio.merge.merge`` applies (it writes nodata where the mask hides a pixel): a
mosaic equal to ``rasterio.merge.merge`` where each mask hides only nodata pixels,
refused naming the tile where it hides data, plain, with gaps and with overlaps.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.assemble.test_mosaic_overlaps import assert_equals_rasterio_merge, merged, mosaic
from virtualizarr_fill import IncompatibleArraysError

rasterio = pytest.importorskip("rasterio")

SIZE, BLOCK, RES = 64, 32, 0.001
ORIGIN = (10.0, 20.0)
#: The window each tile's mask hides, clear of the 9-pixel overlaps.
HIDDEN = (slice(20, 34), slice(22, 40))


def masked_tiles(
    directory: Path,
    *,
    step: int = SIZE,
    hidden_data: bool = True,
    masked: tuple[int, ...] = (0, 1, 2, 3),
    hidden: tuple[slice, slice] = HIDDEN,
) -> list[Path]:
    """2 x 2 uint8 tiles (nodata 255) of random values, ``step`` pixels apart (less than
    SIZE: overlaps; more: gaps), the ``masked`` ones (by row-major index) with an
    internal mask hiding ``hidden``, where they hold data (``hidden_data``) or nodata."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    paths = []
    for index in range(4):
        r, c = divmod(index, 2)
        values = rng.integers(0, 250, (1, SIZE, SIZE)).astype("uint8")
        if not hidden_data:
            values[(slice(None), *hidden)] = 255
        path = directory / f"tile_{r}_{c}.tif"
        with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(
            path, "w", driver="GTiff", width=SIZE, height=SIZE, count=1, dtype="uint8",
            crs="EPSG:4326", nodata=255, tiled=True, blockxsize=BLOCK, blockysize=BLOCK,
            transform=from_origin(ORIGIN[0] + c * step * RES, ORIGIN[1] - r * step * RES,
                                  RES, RES),
        ) as dst:  # fmt: skip
            dst.write(values)
            if index in masked:
                mask = np.full((SIZE, SIZE), 255, dtype="uint8")
                mask[hidden] = 0
                dst.write_mask(mask)
        paths.append(path)
    return paths


def rgba_tiles(
    directory: Path, *, hidden: bool, step: int = SIZE, zero: bool = False
) -> list[Path]:
    """2 x 1 RGBA tiles (PHOTOMETRIC=RGB with an alpha band, no nodata), ``step`` pixels
    apart; alpha 0 over HIDDEN of the first when ``hidden``, its colours there 0 when
    ``zero`` (what rasterio.merge fills tiles without nodata with)."""
    from rasterio.transform import from_origin

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    paths = []
    for c in range(2):
        values = rng.integers(1, 255, (4, SIZE, SIZE)).astype("uint8")
        values[3] = 255
        if hidden and c == 0:
            values[(3, *HIDDEN)] = 0
            if zero:
                values[(slice(0, 3), *HIDDEN)] = 0
        path = directory / f"rgba_{c}.tif"
        with rasterio.open(
            path, "w", driver="GTiff", width=SIZE, height=SIZE, count=4, dtype="uint8",
            crs="EPSG:4326", photometric="RGB", alpha="YES",
            transform=from_origin(ORIGIN[0] + c * step * RES, ORIGIN[1], RES, RES),
        ) as dst:  # fmt: skip
            dst.write(values)
        paths.append(path)
    return paths


def _refused(paths: list[Path], kind: str, **kwargs: Any) -> str:
    with pytest.raises(IncompatibleArraysError) as caught:
        mosaic(paths, **kwargs)
    message = str(caught.value)
    assert "\n" not in message
    assert f"has {kind}, which rasterio.merge applies and a virtual mosaic cannot" in message
    return message


#: Tiles side by side, with a gap, and overlapping under either rule.
EVERY_PLACEMENT = pytest.mark.parametrize(
    ("step", "kwargs"),
    [(SIZE, {}), (SIZE + 10, {"allow_gaps": True}), (SIZE - 9, {"overlap": "first"}),
     (SIZE - 9, {"overlap": "last"})],
    ids=["plain", "gaps", "overlap-first", "overlap-last"],
)  # fmt: skip


@EVERY_PLACEMENT
def test_masks_hiding_data_are_refused_naming_the_tile(
    tmp_path: Path, step: int, kwargs: dict[str, Any]
) -> None:
    paths = masked_tiles(tmp_path, step=step, masked=(2,))
    expected, transform, nodata = merged(paths, kwargs.get("overlap", "first"))
    # rasterio writes nodata where the mask hides data the tile stores
    with rasterio.open(paths[2]) as src:
        stored = src.read(1)[HIDDEN]
        x, y = src.xy(HIDDEN[0].start, HIDDEN[1].start)
    col, row = (int(v) for v in ~transform @ (x, y))
    assert (stored != nodata).all()
    assert (expected[0, row : row + stored.shape[0], col : col + stored.shape[1]] == nodata).all()
    message = _refused(paths, "an internal mask", **kwargs)
    assert message.startswith(f"file://{paths[2]} has an internal mask")


@EVERY_PLACEMENT
def test_masks_hiding_only_nodata_equal_rasterio_merge(
    tmp_path: Path, step: int, kwargs: dict[str, Any]
) -> None:
    paths = masked_tiles(tmp_path, step=step, hidden_data=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = mosaic(paths, **kwargs)
    assert_equals_rasterio_merge(result, paths, kwargs.get("overlap", "first"))


def test_a_mask_inside_an_overlap_is_refused(tmp_path: Path) -> None:
    """The winning tile's mask hides data inside the overlap: rasterio.merge takes
    those pixels from the other tile."""
    paths = masked_tiles(tmp_path, step=SIZE - 9, masked=(0,), hidden=(slice(57, 62), slice(5, 15)))
    expected, _, _ = merged(paths, "first")
    with rasterio.open(paths[0]) as first, rasterio.open(paths[2]) as below:
        assert (expected[0, 57:62, 5:15] == below.read(1)[2:7, 5:15]).all()
        assert (expected[0, 57:62, 5:15] != first.read(1)[57:62, 5:15]).any()
    message = _refused(paths, "an internal mask", overlap="first")
    assert message.startswith(f"file://{paths[0]} has an internal mask")
    assert "it masks 50 pixels that do not hold its nodata (255)" in message


def test_the_suggested_rewrite_builds_a_mosaic_equal_to_rasterio_merge(tmp_path: Path) -> None:
    paths = masked_tiles(tmp_path / "masked", step=SIZE - 9)
    message = _refused(paths, "an internal mask", overlap="first")
    assert "src.read(masked=True).filled(src.nodata)" in message and "write_mask" in message
    expected, _, _ = merged(paths, "first")
    rewritten = []
    for path in paths:
        out = tmp_path / "rewritten" / path.name
        out.parent.mkdir(exist_ok=True)
        with rasterio.open(path) as src:
            profile = src.profile
            filled = src.read(masked=True).filled(src.nodata)
        with rasterio.open(out, "w", **profile) as dst:
            dst.write(filled)
        rewritten.append(out)
    result = mosaic(rewritten, overlap="first")
    # equal to rasterio.merge of the masked originals, not only of the rewrites
    from tests._manifest_builders import read_manifest_array

    np.testing.assert_array_equal(read_manifest_array(result.band_data.data), expected)
    assert_equals_rasterio_merge(result, rewritten, "first")


def test_an_alpha_band_hiding_data_is_refused(tmp_path: Path) -> None:
    paths = rgba_tiles(tmp_path, hidden=True)
    with rasterio.open(paths[0]) as src:
        assert rasterio.enums.MaskFlags.alpha in src.mask_flag_enums[0]
    message = _refused(paths, "an alpha band")
    assert message.startswith(f"file://{paths[0]} has an alpha band")


def test_an_alpha_band_hiding_zeros_equals_rasterio_merge_without_overlaps(
    tmp_path: Path,
) -> None:
    """rasterio.merge writes 0 where the alpha band hides a pixel of tiles without
    nodata: a hidden 0 is no difference, unless tiles overlap."""
    from tests._manifest_builders import read_manifest_array

    paths = rgba_tiles(tmp_path / "abut", hidden=True, zero=True)
    expected, _, _ = merged(paths, "first")
    result = mosaic(paths)
    np.testing.assert_array_equal(read_manifest_array(result.band_data.data), expected)

    paths = rgba_tiles(tmp_path / "overlap", hidden=True, zero=True, step=SIZE - 30)
    expected, _, _ = merged(paths, "first")
    # the first tile wins the overlap, but where its alpha hides a pixel, the next shows
    with rasterio.open(paths[1]) as other:
        shown = other.read(1)[HIDDEN[0], 0 : HIDDEN[1].stop - (SIZE - 30)]
    np.testing.assert_array_equal(expected[0, HIDDEN[0], SIZE - 30 : HIDDEN[1].stop], shown)
    assert (shown != 0).all()
    message = _refused(paths, "an alpha band", overlap="first")
    assert "(none: rasterio.merge writes 0)" in message


def test_an_opaque_alpha_band_equals_rasterio_merge(tmp_path: Path) -> None:
    paths = rgba_tiles(tmp_path, hidden=False)
    from tests._manifest_builders import read_manifest_array

    expected, transform, _ = merged(paths, "first")
    result = mosaic(paths)
    np.testing.assert_array_equal(read_manifest_array(result.band_data.data), expected)
    import rioxarray  # noqa: F401  (the .rio accessor)

    assert result.rio.transform() == transform


@pytest.mark.parametrize(
    "name",
    ["cogeotiff+rio-tiler/cog_uint8_rgb_mask.tif", "cogeotiff+rio-tiler/cog_uint8_rgba.tif",
     "rasterio+rasterio/RGBA.uint16.tif"],
)  # fmt: skip
def test_masked_corpus_files_equal_rasterio_merge_or_are_refused(
    corpus_dir: Path, name: str
) -> None:
    """Real files with a mask IFD or an alpha band: a one-tile mosaic equals
    rasterio.merge.merge where the mask hides only nodata, and is refused exactly where
    rasterio.merge differs from the stored values."""
    from tests._manifest_builders import read_manifest_array

    path = corpus_dir / name
    with rasterio.open(path) as src:
        flags = src.mask_flag_enums[0]
        stored = src.read()
    assert {rasterio.enums.MaskFlags.per_dataset, rasterio.enums.MaskFlags.alpha} & set(flags)
    expected, _, _ = merged([path], "first")
    if (expected == stored).all():
        result = mosaic([path])
        np.testing.assert_array_equal(read_manifest_array(result.band_data.data), expected)
    else:
        kind = "an alpha band" if rasterio.enums.MaskFlags.alpha in flags else "an internal mask"
        message = _refused([path], kind)
        assert message.startswith(f"file://{path} has {kind}")


@pytest.mark.parametrize("hidden_data", [True, False])
def test_an_external_mask_file_is_compared_as_an_internal_one(
    tmp_path: Path, hidden_data: bool
) -> None:
    """GDAL writes the mask to ``<tile>.msk`` without GDAL_TIFF_INTERNAL_MASK;
    rasterio.merge applies it the same way."""
    from rasterio.transform import from_origin

    from tests._manifest_builders import read_manifest_array

    paths = masked_tiles(tmp_path, masked=())
    values = np.random.default_rng(9).integers(0, 250, (1, SIZE, SIZE)).astype("uint8")
    if not hidden_data:
        values[(slice(None), *HIDDEN)] = 255
    mask = np.full((SIZE, SIZE), 255, dtype="uint8")
    mask[HIDDEN] = 0
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False), rasterio.open(
        paths[3], "w", driver="GTiff", width=SIZE, height=SIZE, count=1, dtype="uint8",
        crs="EPSG:4326", nodata=255, tiled=True, blockxsize=BLOCK, blockysize=BLOCK,
        transform=from_origin(ORIGIN[0] + SIZE * RES, ORIGIN[1] - SIZE * RES, RES, RES),
    ) as dst:  # fmt: skip
        dst.write(values)
        dst.write_mask(mask)
    assert Path(f"{paths[3]}.msk").exists()
    with rasterio.open(paths[3]) as src:
        assert rasterio.enums.MaskFlags.per_dataset in src.mask_flag_enums[0]
    if hidden_data:
        message = _refused(paths, f"an external mask ({paths[3].name}.msk)")
        assert message.startswith(f"file://{paths[3]} has an external mask")
    else:
        expected, _, _ = merged(paths, "first")
        result = mosaic(paths)
        np.testing.assert_array_equal(read_manifest_array(result.band_data.data), expected)


def test_the_mask_lookup_ends_on_an_ifd_chain_that_loops(tmp_path: Path) -> None:
    """A tile whose overview IFDs loop back (the last points at the 120th): the lookup
    walks the chain as the parser does, so it ends (tifffile's own loop check looks at
    the first hundred IFDs only). Run in a process of its own, with a timeout."""
    import subprocess
    import sys

    import tifffile

    from tests.tiff.test_tiff_ifd_chain import _point_next

    path = tmp_path / "looping.tif"
    with tifffile.TiffWriter(path) as writer:
        writer.write(np.zeros((4, 4), dtype=np.uint8), photometric="minisblack", metadata=None)
        for _ in range(149):
            writer.write(
                np.zeros((2, 2), dtype=np.uint8), photometric="minisblack", metadata=None,
                subfiletype=1,
            )  # fmt: skip
    _point_next(path, 149, 120)
    code = (
        "from tests.assemble.test_assemble import REGISTRY\n"
        "from virtualizarr_fill.assemble.masks import _mask_kind\n"
        f"print(_mask_kind('file://{path}', REGISTRY))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "None"


def test_the_suggested_rewrite_of_a_tile_without_nodata(tmp_path: Path) -> None:
    """``filled(0)`` for an RGBA tile (no nodata): the mosaic of the rewrites equals
    rasterio.merge.merge of the originals."""
    from tests._manifest_builders import read_manifest_array

    paths = rgba_tiles(tmp_path / "rgba", hidden=True)
    message = _refused(paths, "an alpha band")
    assert "filled(0) for a tile without nodata" in message
    expected, _, _ = merged(paths, "first")
    rewritten = []
    for path in paths:
        out = tmp_path / "rewritten" / path.name
        out.parent.mkdir(exist_ok=True)
        with rasterio.open(path) as src:
            assert src.nodata is None
            profile, filled = src.profile, src.read(masked=True).filled(0)
        with rasterio.open(out, "w", **profile) as dst:
            dst.write(filled)
        rewritten.append(out)
    result = mosaic(rewritten)
    np.testing.assert_array_equal(read_manifest_array(result.band_data.data), expected)
