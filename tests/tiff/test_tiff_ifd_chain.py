"""IFD chains that loop, overlap or exceed the budget, under every way of walking them.

A next-IFD pointer that points back into the chain made ``layout="tree"`` and
``layout="pages"`` hang with growing memory: tifffile's own loop check never runs
while pages are stepped through one by one. Each such parse runs in a worker process
with a timeout and an address-space cap (``conformance.fuzz.worker.run_once``), reads every
array back and compares it with tifffile's decode of the same IFD: the IFDs before the
loop are read exactly, an ``IFDChainWarning`` names the file, and an IFD past the loop
asked for by index is refused naming the file.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

from conformance.fuzz.mutations import Mutation, tiff_structure
from conformance.fuzz.worker import OK, REFUSED, run_once
from virtualizarr_fill.io.files import StoreFile
from virtualizarr_fill.tiff import TIFFParser, chain

REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})
#: Seconds a parse and read-back may take in its worker (a loop used to run forever).
TIMEOUT = 60.0

#: Corpus files: a COG with overviews and masks (6 IFDs), and a two-IFD COG.
CORPUS_FILES = (
    "cogeotiff+rio-tiler/cog_uint8_rgb_mask.tif",
    "cogeotiff+rio-tiler-pds/AOT.tif",
)
OPTIONS = ({"layout": "tree"}, {"layout": "pages"}, {})


def _point_next(path: Path, ifd: int, target: int) -> None:
    """Make the next-IFD pointer of main IFD ``ifd`` point at main IFD ``target``."""
    with tifffile.TiffFile(path) as tif:
        offsets = [int(page.offset) for page in tif.pages]
        tiff = tif.tiff
    data = bytearray(path.read_bytes())
    offset = offsets[ifd]
    (count,) = struct.unpack_from(tiff.tagnoformat, data, offset)
    pointer = offset + tiff.tagnosize + count * tiff.tagsize
    struct.pack_into(tiff.offsetformat, data, pointer, offsets[target])
    path.write_bytes(bytes(data))


def _chain_warnings(result: dict[str, Any], path: Path) -> list[str]:
    return [
        text
        for text in result.get("warnings", ())
        if text.startswith("IFDChainWarning") and str(path) in text
    ]


def _judge(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    result = run_once(str(path), "tiff", options=options, timeout=TIMEOUT)
    assert result["outcome"] in (OK, REFUSED), result
    return result


@pytest.mark.corpus
@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "first-image"
)
@pytest.mark.parametrize("name", CORPUS_FILES)
def test_ifd_pointing_at_itself(
    name: str, options: dict[str, Any], corpus_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / Path(name).name
    path.write_bytes((corpus_dir / name).read_bytes())
    last = len(tiff_structure(str(corpus_dir / name)).ifds) - 1
    loop_at = min(1, last)
    _point_next(path, loop_at, loop_at)
    result = _judge(path, options)
    assert result["outcome"] == OK, result
    if options.get("tree"):
        assert len(result["arrays"]) == loop_at + 1
    if options:  # the first image alone never walks past IFD 0
        assert _chain_warnings(result, path), result


@pytest.mark.corpus
@pytest.mark.parametrize("name", CORPUS_FILES)
def test_ifd_past_a_loop_is_refused(name: str, corpus_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / Path(name).name
    path.write_bytes((corpus_dir / name).read_bytes())
    _point_next(path, 0, 0)
    result = _judge(path, {"ifd": 1})
    assert result["outcome"] == REFUSED and result["error_class"] == "CorruptFileError"
    assert result["names_file"] and "points back to IFD 0" in result["error"], result


def _pages(path: Path, count: int, *, size: tuple[int, int] = (3, 4)) -> None:
    """``count`` one-band pages, page ``i`` filled with ``i``."""
    with tifffile.TiffWriter(path) as writer:
        for number in range(count):
            writer.write(
                np.full(size, number, dtype=np.uint8),
                photometric="minisblack",
                metadata=None,
            )


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "first-image"
)
def test_loop_longer_than_tifffiles_own_check(tmp_path: Path, options: dict[str, Any]) -> None:
    """150 pages whose last points back to page 120: tifffile's check looks at the
    first hundred IFDs only."""
    path = tmp_path / "pages.tif"
    _pages(path, 150)
    _point_next(path, 149, 120)
    result = _judge(path, options)
    assert result["outcome"] == OK, result
    if options.get("layout") == "tree":
        assert len(result["arrays"]) == 150
    if options.get("layout") == "pages":
        assert result["arrays"][0]["shape"] == [150, 1, 3, 4]
    if options:
        assert _chain_warnings(result, path), result
    refused = _judge(path, {"ifd": 150})
    assert refused["outcome"] == REFUSED and refused["error_class"] == "CorruptFileError"
    assert refused["names_file"] and "points back to IFD 120" in refused["error"]


def _subifd_file(path: Path) -> list[int]:
    """A main image with two SubIFDs (reduced resolutions); the SubIFDs tag's values."""
    with tifffile.TiffWriter(path) as writer:
        writer.write(np.full((8, 8), 1, np.uint8), photometric="minisblack", subifds=2)
        writer.write(np.full((4, 4), 2, np.uint8), photometric="minisblack", subfiletype=1)
        writer.write(np.full((2, 2), 3, np.uint8), photometric="minisblack", subfiletype=1)
    with tifffile.TiffFile(path) as tif:
        return [int(o) for o in tif.pages[0].subifds]


def _set_subifds(path: Path, values: list[int]) -> None:
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages[0].tags[330]
        fmt = tif.byteorder + {4: "I", 13: "I", 16: "Q", 18: "Q"}[int(tag.dtype)]
        position = tag.valueoffset
    data = bytearray(path.read_bytes())
    for number, value in enumerate(values):
        struct.pack_into(fmt, data, position + number * struct.calcsize(fmt), value)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("target", ["main-ifd", "repeated"])
def test_subifd_seen_before_is_left_out(tmp_path: Path, target: str) -> None:
    path = tmp_path / "subifds.tif"
    first, _ = _subifd_file(path)
    clean = _judge(path, {"layout": "tree"})
    assert [a["name"] for a in clean["arrays"]] == [
        "image/band_data",
        "image_subifd_0/band_data",
        "image_subifd_1/band_data",
    ]
    with tifffile.TiffFile(path) as tif:
        main = int(tif.pages[0].offset)
    _set_subifds(path, [first, first] if target == "repeated" else [first, main])
    result = _judge(path, {"layout": "tree"})
    assert result["outcome"] == OK, result
    assert [a["name"] for a in result["arrays"]] == ["image/band_data", "image_subifd_0/band_data"]
    assert _chain_warnings(result, path), result


def test_ifd_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More IFDs than the budget: the first ones are read, with a warning."""
    path = tmp_path / "pages.tif"
    _pages(path, 12)
    monkeypatch.setattr(chain, "MAX_IFDS", 5)
    with pytest.warns(chain.IFDChainWarning, match=f"{path}.*more than 5 IFDs"):
        store = TIFFParser(layout="pages")("file://" + str(path), REGISTRY)
    import zarr

    stacked = zarr.open_group(store, mode="r", zarr_format=3)["band_data"]
    expected = np.stack([tifffile.imread(path, key=k)[None] for k in range(5)])
    np.testing.assert_array_equal(stacked[...], expected)


def test_overlapping_ifds_end_the_walk(tmp_path: Path) -> None:
    """A next-IFD pointer into the middle of the first IFD's entry table: the entry read
    as a count claims a table larger than the file."""
    path = tmp_path / "overlap.tif"
    _pages(path, 2)
    with tifffile.TiffFile(path) as tif:
        first = int(tif.pages[0].offset)
        tiff = tif.tiff
    data = bytearray(path.read_bytes())
    (count,) = struct.unpack_from(tiff.tagnoformat, data, first)
    pointer = first + tiff.tagnosize + count * tiff.tagsize
    # IFD 0 -> IFD 1 stays; IFD 1's next pointer -> the second entry of IFD 0, whose tag
    # code (257, ImageLength) then reads as an entry count.
    second = int.from_bytes(data[pointer : pointer + 4], "little")
    (count1,) = struct.unpack_from(tiff.tagnoformat, data, second)
    struct.pack_into(
        tiff.offsetformat,
        data,
        second + tiff.tagnosize + count1 * tiff.tagsize,
        first + tiff.tagnosize + tiff.tagsize,
    )
    path.write_bytes(bytes(data))
    store, key = REGISTRY.resolve("file://" + str(path))
    reader = StoreFile(store, key)
    with tifffile.TiffFile(reader) as tif:  # type: ignore[arg-type]
        walk = chain.walk_main_chain(tif, reader, chain.IFDBudget(reader.size))
    assert walk.offsets == (first, second)
    assert walk.stopped is not None and "overlapping" in walk.stopped
    result = run_once(str(path), "tiff", options={"layout": "tree"}, timeout=TIMEOUT)
    assert result["outcome"] == OK and _chain_warnings(result, path), result


def test_mutation_replays_with_its_options(tmp_path: Path) -> None:
    """Fuzz mutations carry the parser options they were judged with."""
    mutation = Mutation("a.tif", "ifd-self-cycle: x", [], {"layout": "tree"})
    assert Mutation.from_json(mutation.to_json()).options == {"layout": "tree"}
    assert Mutation.from_json(Mutation("a.tif", "clean", []).to_json()).options == {}
