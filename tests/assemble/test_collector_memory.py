"""What a :class:`~virtualizarr_fill.assemble.collecting.Collector` keeps of each file
once compacted: the file's own chunk references and coordinate values, everything equal
to the first file's shared with it, so that a build of 10^5 tiles holds little more
than their chunk references."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import numpy as np
import rasterio

from tests.assemble.test_assemble import REGISTRY, _georeferenced_strips
from virtualizarr_fill import TIFFParser
from virtualizarr_fill.assemble.collecting import Collector
from virtualizarr_fill.assemble.parts import file_part


def _collected(paths: list[Path]) -> Collector:
    parser = TIFFParser()
    collector = Collector(["y", "x"], new_dim=False, decode_times=None)
    for path in paths:
        collector.add(parser(url=f"file://{path}", registry=REGISTRY))
    return collector


def test_tiles_share_what_equals_the_first_tile(tmp_path: Path) -> None:
    paths = sorted(_georeferenced_strips(tmp_path, 6, shuffle=False))
    collector = _collected(paths)
    first = collector.parts[0]
    for path, part in zip(paths[1:], collector.parts[1:], strict=True):
        with rasterio.open(path) as src:
            rows = np.arange(src.height)
            _, y = src.xy(rows, np.zeros_like(rows))
            x, _ = src.xy(np.zeros(src.width, dtype=int), np.arange(src.width))
            geotransform = " ".join(repr(float(v)) for v in src.transform.to_gdal())
        # the column's x is the first tile's; y keeps this tile's values
        assert part.coords["x"] is first.coords["x"]
        np.testing.assert_array_equal(part.coords["x"].values, np.asarray(x))
        np.testing.assert_array_equal(part.coords["y"].values, np.asarray(y))
        assert part.coords["y"].encoding is first.coords["y"].encoding
        assert part.coords["y"].attrs == first.coords["y"].attrs
        # the grid mapping differs by its tie points; its other values are the first's
        mapping, reference = part.var_attrs["spatial_ref"], first.var_attrs["spatial_ref"]
        assert mapping["GeoTransform"].split() == geotransform.split()
        assert mapping["GeoTransform"] != reference["GeoTransform"]
        for key, value in mapping.items():
            if key not in ("GeoTransform", "ModelTiepoint"):
                assert value is reference[key], key
        # compaction changed no value: the part equals the file parsed on its own
        alone = file_part(TIFFParser()(url=f"file://{path}", registry=REGISTRY))
        assert part.var_attrs == alone.var_attrs
        for name in part.coords:
            assert part.coords[name].attrs == alone.coords[name].attrs
            assert part.coords[name].encoding == alone.coords[name].encoding
            np.testing.assert_array_equal(part.coords[name].values, alone.coords[name].values)


def test_attribute_values_of_other_types_are_not_shared(tmp_path: Path) -> None:
    """``1`` and ``1.0`` compare equal, and are written differently: a tile whose
    attribute holds the other type keeps its own."""
    paths = sorted(_georeferenced_strips(tmp_path, 2, shuffle=False))
    parser = TIFFParser()
    first, second = (
        file_part(parser(url=f"file://{p}", registry=REGISTRY), decode_times=None) for p in paths
    )
    first.var_attrs["spatial_ref"]["scale"] = 1
    second.var_attrs["spatial_ref"]["scale"] = 1.0
    collector = Collector(["y", "x"], new_dim=False, decode_times=None)
    collector.add_part(first)
    collector.add_part(second)
    kept = collector.parts[1].var_attrs["spatial_ref"]["scale"]
    assert type(kept) is float


def _kept_per_tile(paths: list[Path]) -> float:
    """Bytes the collector of ``paths`` alone holds, per tile (what deleting it frees:
    the parser's bounded caches are not counted), parsed one by one, each file's store
    and part dropped once added, as the build command does."""
    parser = TIFFParser()
    gc.collect()
    tracemalloc.start()
    try:
        collector = Collector(["y", "x"], new_dim=False, decode_times=None)
        for path in paths:
            collector.add(parser(url=f"file://{path}", registry=REGISTRY))
        assert len(collector.parts) == len(paths)
        gc.collect()
        with_collector, _ = tracemalloc.get_traced_memory()
        del collector
        gc.collect()
        without, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (with_collector - without) / len(paths)


def test_a_collected_tile_costs_little_more_than_its_chunk_references(tmp_path: Path) -> None:
    """Three chunk references (path, offset, length) in the collector's columns, the
    tile's 25 ``y`` values and its tie points: under 2.5 KB, where a manifest and
    coordinate of its own (objects per tile rather than columns) take 3.2 KB, and each
    tile's own decoded coordinates (their encodings) and grid mapping attributes 1.4 KB
    more."""
    paths = sorted(_georeferenced_strips(tmp_path, 200, shuffle=False))
    per_tile = _kept_per_tile(paths)
    print(f"{per_tile:.0f} bytes per tile")
    assert per_tile < 2500
