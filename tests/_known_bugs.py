"""Bugs the fuzz suite found: a repro for each, open ones failing until fixed.

Each entry is the smallest mutation of a corpus file that shows the bug, with what the
verdict looks like while the bug is there (``outcome``, exception class and the place in
the project's code). The fuzz tests (``test_fuzz_tiff.py``, ``test_fuzz_hdf5.py``)
count verdicts that match an entry of :data:`KNOWN_BUGS` instead of failing on them, so
that they keep guarding against *new* bugs; each open bug's repro here fails until the
bug is fixed. A fixed bug's entry moves to :data:`FIXED_BUGS`: its repro then runs by
default as a regression test, and verdicts like it fail the fuzz tests again. Hand-made
malformed files live in ``test_validation.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

# Open bugs are marked ``known_bug``: excluded from the default run (see pyproject's
# addopts), run with `pytest -m known_bug`; each fails until fixed. A fixed bug's entry
# moves to FIXED_BUGS, whose repros run by default as regression tests.
pytestmark = pytest.mark.corpus


@dataclass(frozen=True)
class KnownBug:
    """A bug and the verdicts it causes."""

    id: str
    summary: str
    file: str
    kind: str
    ops: tuple[dict[str, Any], ...]
    outcome: str | tuple[str, ...]  # any of these outcomes
    error_classes: tuple[str, ...] = ()  # any of these exception classes
    #: (module path, function) pairs; the verdict's innermost project frame is one of them
    places: tuple[tuple[str, str], ...] = ()
    details: tuple[str, ...] = ()  # substrings of the verdict's error or detail (any)
    labels: tuple[str, ...] = ()  # substrings of the mutation's label (any)
    #: Parser options the repro is judged with (e.g. ``{"layout": "tree"}``).
    options: dict[str, Any] = field(default_factory=dict)

    def matches(self, result: dict[str, Any], label: str = "") -> bool:
        outcomes = (self.outcome,) if isinstance(self.outcome, str) else self.outcome
        if result.get("outcome") not in outcomes:
            return False
        if self.labels and not any(text in label for text in self.labels):
            return False
        if result.get("kind", self.kind) != self.kind:
            return False
        if self.error_classes and result.get("error_class", "") not in (*self.error_classes, ""):
            return False
        wheres = [str(result.get("where", ""))] + [
            str(a.get("where", "")) for a in result.get("arrays", ())
        ]
        if self.places and not any(
            f"{module}:" in where and where.endswith(f" {function}")
            for where in wheres
            for module, function in self.places
        ):
            return False
        text = f"{result.get('error', '')} {result.get('detail', '')}"
        return not self.details or any(detail in text for detail in self.details)


def _put(pos: int, hex_bytes: str) -> dict[str, Any]:
    return {"op": "put", "pos": pos, "hex": hex_bytes}


EXCEPTION = "BUG: non-project exception"
READ_ERROR = "BUG: read-time error"
WRONG = "BUG: wrong values"
TAG_ERRORS = ("ValueError", "TypeError", "OverflowError", "IndexError", "ZeroDivisionError")

#: Bugs found by fuzzing and fixed: their repros guard against regressions.
FIXED_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        id="tiff-tifffile-exceptions-escape",
        summary="tifffile raises TypeError/IndexError/ValueError/struct.error on malformed "
        "IFDs; TIFFParser._open_tiff only converts TiffFileError",
        file="cogeotiff+rio-tiler/cog_uint8_rgb_mask.tif",
        kind="tiff",
        ops=(_put(292, "00000000"),),  # SamplesPerPixel count 1 -> 0
        outcome=EXCEPTION,
        places=(("tiff/parser.py", "_open_tiff"),),
    ),
    KnownBug(
        id="tiff-tag-values-unchecked",
        summary="tag values of an unexpected type or count (ImageWidth as BYTE or ASCII, "
        "StripOffsets as RATIONAL, Compression with count 0, BitsPerSample 0) reach int() "
        "and numpy unchecked: ValueError/TypeError/OverflowError/ZeroDivisionError",
        file="rasterio+rasterio/byte.tif",
        kind="tiff",
        ops=(_put(412, "0100"),),  # ImageWidth type SHORT -> BYTE
        outcome=EXCEPTION,
        error_classes=TAG_ERRORS,
        places=(
            ("tiff/tags.py", "segment_layout"),
            ("tiff/tags.py", "_uniform"),
            ("tiff/tags.py", "_rows_per_strip"),
            ("tiff/tags.py", "sample_type"),
            ("tiff/tags.py", "sample_dtype"),
            ("tiff/segments.py", "chunk_manifest"),
            ("tiff/segments.py", "check_uncompressed_lengths"),
            ("tiff/segments.py", "last_strip_lengths"),
            ("tiff/codecs_map.py", "is_image_compression"),
            ("tiff/codecs_map.py", "predictor_codec"),
            ("tiff/codecs_map.py", "codec_chain"),
            ("tiff/codecs_map.py", "_jpeg_codec"),
            ("tiff/codecs_map.py", "jpeg_colorspaces"),
            ("codecs/tiff_packints.py", "__init__"),
        ),
    ),
    KnownBug(
        id="tiff-geokeys-unchecked",
        summary="a GeoKeyDirectory or ModelTiepoint/PixelScale/Transformation of the wrong "
        "type or length raises IndexError/ValueError in geo.py",
        file="OSGeo+PROJ/test_vgrid_uint16_with_scale_offset.tif",
        kind="tiff",
        ops=({"op": "flip", "pos": 499, "bit": 2},),
        outcome=EXCEPTION,
        error_classes=TAG_ERRORS,
        places=(
            ("tiff/geo.py", "geokeys_of"),
            ("tiff/geo.py", "_float_list"),
            ("tiff/geo.py", "georeference"),
        ),
    ),
    KnownBug(
        id="tiff-no-image-index-error",
        summary="a TIFF whose IFD chain yields no page makes select_page raise IndexError",
        file="OSGeo+PROJ/test_vgrid_nodata.tif",
        kind="tiff",
        ops=({"op": "flip", "pos": 5, "bit": 2},),  # first-IFD offset moved off the IFD
        outcome=EXCEPTION,
        error_classes=("IndexError",),
        places=(("tiff/file_groups.py", "select_page"),),
    ),
    KnownBug(
        id="tiff-inlined-arrays-unbounded",
        summary="x/y/band coordinates and per-band attributes are built for any image size: "
        "ImageWidth 2**32-1 makes pixel_centres allocate 32 GiB (MemoryError)",
        file="rasterio+rasterio/byte.tif",
        kind="tiff",
        ops=(_put(412, "0400"), _put(414, "01000000"), _put(418, "ffffffff")),
        outcome=EXCEPTION,
        error_classes=("MemoryError",),
        places=(
            ("tiff/geo.py", "pixel_centres"),
            ("tiff/image_groups.py", "coordinate_arrays"),
            ("tiff/image_groups.py", "inlined_array"),
        ),
    ),
    KnownBug(
        id="tiff-samples-per-pixel-unbounded",
        summary="SamplesPerPixel 2**31-1 with a single BitsPerSample value is accepted: "
        "array_attributes builds a per-band list of 2**31 items (timeout or MemoryError)",
        file="OSGeo+PROJ/test_vgrid_deflate_floatingpointpredictor.tif",
        kind="tiff",
        ops=(_put(84, "0400"), _put(86, "01000000"), _put(90, "ffffff7f")),
        outcome=(EXCEPTION, "BUG: timeout"),
        error_classes=("MemoryError",),
        labels=("tag 277",),
    ),
    KnownBug(
        id="tiff-bitspersample-unchecked",
        summary="BitsPerSample with 298231 values for 3 samples is accepted (tifffile reads "
        "garbage values past the tag); values differ from tifffile's decode. The count must "
        "equal SamplesPerPixel",
        file="rasterio+rasterio/cogeo.tif",
        kind="tiff",
        ops=(_put(38, "f78c0400"),),
        outcome=WRONG,
        labels=("tag 258",),
    ),
    KnownBug(
        id="tiff-segment-tag-type-read-as-sparse",
        summary="StripByteCounts/StripOffsets stored as UNDEFINED/FLOAT/... become 0 and the "
        "segments are treated as sparse (fill values) where tifffile reads data: a silent "
        "wrong value; such tags must be refused",
        file="image-rs+image-tiff/BigTIFFMotorola.tif",
        kind="tiff",
        ops=(_put(12454, "0007"),),  # StripByteCounts type SHORT -> UNDEFINED
        outcome=WRONG,
        labels=(
            "tag-type: IFD 0 tag 279",
            "tag-type: IFD 0 tag 273",
            "tag-type: IFD 0 tag 324",
            "tag-type: IFD 0 tag 325",
        ),
    ),
    KnownBug(
        id="tiff-uncompressed-lengths-unchecked",
        summary="uncompressed segments whose byte count is neither the logical nor the "
        "physical size are accepted (the only/last strip when RowsPerStrip divides the "
        "image, interior strips longer than their rows, counts not a multiple of the item "
        "size) and fail at read time in zarr's bytes codec",
        file="rasterio+rasterio/byte.tif",
        kind="tiff",
        # ImageWidth 20 -> 2 (as LONG): the 400-byte strip is neither 40 bytes nor padded.
        ops=(_put(412, "0400"), _put(414, "01000000"), _put(418, "02000000")),
        outcome=READ_ERROR,
        details=("cannot reshape", "When changing to a larger dtype"),
    ),
    KnownBug(
        id="tiff-ifd-chain-loop-hangs",
        summary="a next-IFD pointer back into the chain: layout='tree' and layout='pages' "
        "step through tifffile's pages, whose loop check never runs then, without end and "
        "with growing memory",
        file="cogeotiff+rio-tiler-pds/AOT.tif",
        kind="tiff",
        ops=(_put(238, "08000000"),),  # IFD 0's next pointer -> IFD 0
        outcome="BUG: timeout",
        options={"layout": "tree"},
    ),
    KnownBug(
        id="tiff-one-padded-strip-read-error",
        summary="one strip whose RowsPerStrip exceeds ImageLength, stored padded: the grid "
        "took the image's rows for the stored size, and reading failed to reshape",
        file="corteva+rioxarray/test_rpcs.tif",
        kind="tiff",
        # ImageLength 274 -> 14, StripOffsets and StripByteCounts -> the first strip alone
        # (17 rows of LZW data).
        ops=(
            *(_put(24, "0400"), _put(26, "01000000"), _put(30, "0e000000")),
            *(_put(72, "0400"), _put(74, "01000000"), _put(78, "78050000")),
            *(_put(108, "0400"), _put(110, "01000000"), _put(114, "f0050000")),
        ),
        outcome=READ_ERROR,
        details=("cannot reshape",),
    ),
    KnownBug(
        id="tiff-strip-decode-error-escapes",
        summary="deciding the grid decodes the last strip (image codecs, and compressed "
        "strips with probe_last_strip=True); a stream that does not decode raised the "
        "codec's own RuntimeError",
        file="mapnik+test-data/tiff_rgb8_stripped_band.tif",
        kind="tiff",
        ops=(_put(48, "0400"), _put(50, "01000000"), _put(54, "08000000")),  # LZW -> Deflate
        outcome=EXCEPTION,
        places=(("tiff/last_strips.py", "_decompress_with"),),
        options={"probe_last_strip": True},
    ),
    KnownBug(
        id="tiff-planar-config-out-of-range",
        summary="PlanarConfiguration neither 1 nor 2 on a multi-band image: tifffile keeps "
        "the number and decodes the page partly as either layout, the parser read it as "
        "planar (silent wrong values)",
        file="OSGeo+PROJ/test_hgrid_tiled_separate.tif",
        kind="tiff",
        ops=(_put(84, "0400"), _put(86, "01000000"), _put(90, "18000000")),  # 2 -> 24
        outcome=WRONG,
    ),
    KnownBug(
        id="hdf5-object-address-runtime-error",
        summary="h5py.h5o.get_info on a group with a corrupt local heap or checksum raises "
        "RuntimeError from HDF5Parser's link walk (_address)",
        file="NCAS-CMS+pyfive/tests/data/new_style_groups.hdf5",
        kind="hdf5",
        ops=(_put(4451, "00000000"),),  # HEAP signature smashed
        outcome=EXCEPTION,
        error_classes=("RuntimeError",),
        places=(("hdf5/walk.py", "_address"),),
    ),
    KnownBug(
        id="hdf5-attribute-name-not-text",
        summary="an attribute whose name is not valid UTF-8 (bytes) reaches ManifestGroup "
        "and fails with TypeError 'Expected dict with string keys' (or, on a dataset, "
        "when zarr serialises the metadata at read time) instead of being converted or "
        "skipped with an AttributeWarning",
        file="NCAS-CMS+pyfive/tests/data/references.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 6644, "bit": 7},),
        outcome=(EXCEPTION, READ_ERROR),
        error_classes=("TypeError",),
        details=("Expected dict with string keys", "keys must be str"),
    ),
    KnownBug(
        id="hdf5-fill-value-message-segfault",
        summary="a corrupt fill-value message of a compact dataset crashes libhdf5 "
        "(SIGSEGV) in h5py's Dataset.fillvalue, called by arrays._array_fill while "
        "materialising; plain h5py reads of the file do not touch it",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_compact_datasets_earliest.hdf5",
        kind="hdf5",
        ops=(
            {"op": "flip", "pos": 6926, "bit": 6},
            {"op": "flip", "pos": 6631, "bit": 7},
            {"op": "flip", "pos": 196, "bit": 6},
        ),
        outcome="BUG: crash",
    ),
    KnownBug(
        id="hdf5-vlen-materialise-memory",
        summary="vlen strings are materialised at parse time through libhdf5, which "
        "allocates whatever lengths corrupt global-heap references claim: a contiguous "
        "address moved by 16 bytes makes the parse peak at 1.35 GB (max_inline_bytes is "
        "checked against the dataset's storage size, not against what libhdf5 allocates)",
        file="fsspec+kerchunk/vlen.h5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 906, "bit": 4},),
        outcome="BUG: memory",
    ),
    KnownBug(
        id="hdf5-h5netcdf-test-mismatched-dim",
        summary="the clean corpus file h5netcdf_test.hdf5: variable 'mismatched_dim' (the "
        "dataset _nc4_non_coord_mismatched_dim, a scalar) was compared with the dimension "
        "scale 'mismatched_dim' of shape (1,) by the fuzz worker (IndexError: too many "
        "indices): a harness mapping error, the parser was right",
        file="NCAS-CMS+pyfive/tests/data/h5netcdf_test.hdf5",
        kind="hdf5",
        ops=(),
        outcome=READ_ERROR,
        details=("too many indices",),
    ),
    KnownBug(
        id="hdf5-attribute-read-hangs",
        summary="a corrupt attribute (attr_datatypes.hdf5, one bit flipped) makes libhdf5 "
        "spin in H5Aread forever (h5py alone too): the flip gives a global heap object a "
        "larger size, libhdf5's walk of the heap collection lands on a free-space object "
        "of size 0 and never advances (H5HG__cache_heap_deserialize)",
        file="NCAS-CMS+pyfive/tests/data/attr_datatypes.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 2377, "bit": 3},),
        outcome="BUG: timeout",
        labels=("byte 2377",),
    ),
    KnownBug(
        id="hdf5-chunk-grid-unbounded",
        summary="a dataspace of 2**32-1 elements makes HDF5Parser allocate a dense manifest "
        "of 2**32-1 entries (MemoryError) instead of refusing the dataset",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/100B_max_dimension_size.hdf5",
        kind="hdf5",
        ops=(_put(832, "ffffffff00000000"),),
        outcome=EXCEPTION,
        error_classes=("MemoryError", "ValueError"),
        places=(("hdf5/array_context.py", "empty_manifest"),),
    ),
    KnownBug(
        id="hdf5-h5py-errors-escape",
        summary="h5py errors on corrupt datatypes and layouts escape build_array: ValueError/"
        "TypeError from plan_dtype (a float type NumPy cannot represent; float128 reaching "
        "the fill-value cast), RuntimeError from "
        "get_offset/get_storage_size, OverflowError from chunk byte offsets past 2**63; "
        "they should refuse the dataset (DatasetRefused 'corrupt')",
        file="jjhelmus+pyfive/fillvalue_latest.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 784, "bit": 6}, {"op": "checksum", "start": 731, "end": 995}),
        outcome=EXCEPTION,
        error_classes=("ValueError", "TypeError", "RuntimeError", "OverflowError", "KeyError"),
        places=(
            ("hdf5/dtypes.py", "plan_dtype"),
            ("zarr_model/data_types.py", "_cached_data_type"),
            ("zarr_model/data_types.py", "zarr_data_type"),
            ("fill/cast.py", "_default_fill_value"),
            ("hdf5/contiguous_manifest.py", "contiguous_manifest"),
            ("hdf5/chunked_manifest.py", "chunked_manifest"),
            ("hdf5/arrays.py", "build_array"),
            ("hdf5/arrays.py", "_chunk_shape"),
            ("hdf5/array_context.py", "__init__"),
        ),
    ),
    KnownBug(
        id="hdf5-single-chunk-index-smaller-than-dataset",
        summary="a chunk index of type 'single chunk' whose chunk is smaller than the "
        "dataset: libhdf5 repeats the one chunk everywhere, HDF5Parser references it once "
        "and reads fill elsewhere; the header contradicts itself and should be refused",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/implicit_index_datasets.hdf5",
        kind="hdf5",
        ops=(_put(577, "01"), {"op": "checksum", "start": 479, "end": 759}),
        outcome=WRONG,
        labels=("chunk index type",),
    ),
    KnownBug(
        id="hdf5-chunk-shape-disagrees-with-stored-chunks",
        summary="stored chunks that do not decode to the chunk shape (chunk dims edited, a "
        "filter id changed): parse succeeds, reading fails in zarr/numcodecs with ValueError "
        "instead of a refusal at parse time or a ChunkSizeMismatchError naming the file",
        file="jjhelmus+pyfive/compressed_v1.hdf5",
        kind="hdf5",
        ops=(_put(22871, "00100000"),),  # chunk dim 0: 65536 -> 4096
        outcome=READ_ERROR,
        details=(
            "cannot reshape",
            "Shuffle buffer is not an integer multiple",
            "When changing to a larger dtype",
        ),
    ),
    KnownBug(
        id="hdf5-chunk-index-not-validated",
        summary="a corrupt chunk index is read differently by libhdf5 (lookup by key) and by "
        "the manifest (chunk_iter order): duplicate or out-of-order B-tree keys, unfiltered "
        "chunks whose size is not the chunk's bytes -> silent wrong values",
        file="NCAS-CMS+pyfive/tests/data/chunked.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 9792, "bit": 2},),  # B-tree key (6, 6) -> (2, 6)
        outcome=WRONG,
        details=("elements differ",),
    ),
    KnownBug(
        id="hdf5-chunk-key-extra-offset",
        summary="a version 1 B-tree chunk key whose extra (always 0) offset is set: h5py's "
        "chunk iteration does not show it, libhdf5's key search misses the chunk and reads "
        "fill values, the manifest points at the data (silent wrong values; also internal "
        "keys that no longer bound their child)",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_compressed_chunked_datasets_earliest.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 23454, "bit": 1},),
        outcome=WRONG,
    ),
    KnownBug(
        id="hdf5-vlen-string-base-size",
        summary="a variable-length string type whose base (character) size is flipped to "
        "536870913 bytes: libhdf5 allocates claimed length x base size per string (parse "
        "peak 732 MB); the descriptor bound must use the stored base size",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_string_datasets_latest.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 1523, "bit": 5}, {"op": "checksum", "start": 1440, "end": 1720}),
        outcome="BUG: memory",
    ),
)

#: Structures libhdf5 follows as it finds them (found by the structure-aware mutation
#: classes of ``conformance/fuzz/mutations.py``); fixed by checking them from their bytes first.
FIXED_BUGS += (
    KnownBug(
        id="hdf5-group-btree-child-is-its-node",
        summary="a symbol table (group) B-tree node raised to level 1 whose first child is the "
        "node itself: libhdf5 recurses into it until the stack overflows (SIGSEGV) when the "
        "group is listed",
        file="NCAS-CMS+pyfive/tests/data/dim_scales.hdf5",
        kind="hdf5",
        ops=(_put(141, "01"), _put(168, "8800000000000000")),
        outcome="BUG: crash",
    ),
    KnownBug(
        id="hdf5-chunk-btree-v2-header-type",
        summary="a version 2 B-tree chunk index header whose record type is flipped from 10 "
        "to 2 (checksum restored): libhdf5 decodes chunk records with the huge-object layout "
        "and crashes in chunk_iter (SIGSEGV)",
        file="NCAS-CMS+pyfive/tests/data/btreev2.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 468, "bit": 3}, {"op": "checksum", "start": 463, "end": 497}),
        outcome="BUG: crash",
    ),
    KnownBug(
        id="hdf5-attribute-index-record-count",
        summary="a dense attribute index (version 2 B-tree) whose header's total record count "
        "is edited (checksum restored): libhdf5 allocates a table of that many attributes "
        "(2 GB) when the attributes are listed",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_attribute_latest.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 8621, "bit": 4}, {"op": "checksum", "start": 8592, "end": 8626}),
        outcome=("BUG: memory", "BUG: crash"),
    ),
    KnownBug(
        id="hdf5-dimension-list-longer-than-rank",
        summary="a dataset whose dataspace rank is edited from 3 to 1 keeps its 3-entry "
        "DIMENSION_LIST: the dimension-scale library (h5py's dims) reads it into a buffer "
        "of one entry per axis and corrupts the heap (SIGABRT)",
        file="nasa+harmony-opendap-subsetter/f16_ssmis_20200102v7.nc",
        kind="hdf5",
        ops=(_put(7105, "01"), {"op": "checksum", "start": 7056, "end": 7892}),
        outcome="BUG: crash",
    ),
    KnownBug(
        id="hdf5-local-heap-free-list-loop",
        summary="a group's local heap whose free list points back at its own block: libhdf5 "
        "walks it forever, allocating as it goes, when the group is opened",
        file="NCAS-CMS+pyfive/tests/data/dim_scales.hdf5",
        kind="hdf5",
        ops=(_put(696, "3800000000000000"), _put(768, "38000000000000001000000000000000")),
        outcome=("BUG: timeout", "BUG: memory"),
    ),
    KnownBug(
        id="hdf5-filter-count-leaves-a-filter-out",
        summary="a filter pipeline message (shuffle, deflate) whose count is edited from 2 to "
        "1: libhdf5 decodes one filter and ignores the other, h5py reads the deflated chunks "
        "through shuffle alone (and crashes on some files); the virtual array's read failed",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/"
        "test_byteshuffle_compressed_datasets_earliest.hdf5",
        kind="hdf5",
        ops=(_put(16905, "01"),),
        outcome=(READ_ERROR, WRONG),
    ),
    KnownBug(
        id="hdf5-contiguous-size-zero-read-as-fill",
        summary="a contiguous layout of variable-length strings whose size is edited to 0: "
        "libhdf5 reads the strings at the address, the parser took the dataset for never "
        "written and read empty strings (silent wrong values)",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_string_datasets_earliest.hdf5",
        kind="hdf5",
        ops=(_put(1786, "0000000000000000"),),
        outcome=WRONG,
    ),
    KnownBug(
        id="hdf5-shuffle-element-size-not-the-datatypes",
        summary="a shuffle filter whose stored element size has a bit flipped (1 -> 16777217, "
        "checksum restored): libhdf5 unshuffles with the stored size (nothing to transpose), "
        "numcodecs' shuffle refused the buffer at read time",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/"
        "test_byteshuffle_compressed_datasets_latest.hdf5",
        kind="hdf5",
        ops=({"op": "flip", "pos": 1614, "bit": 0}, {"op": "checksum", "start": 1513, "end": 1793}),
        outcome=READ_ERROR,
    ),
    KnownBug(
        id="hdf5-native-crash-counted-as-ours",
        summary="a group's dense attribute index whose record type is edited from 8 to 1 "
        "(checksum restored): the parser leaves the group's attributes out with a warning "
        "and reads every dataset, then h5py, looking the datasets up for the comparison, "
        "crashes (SIGSEGV); the worker counted the native reader's crash as the parser's",
        file="jamesmudd+jhdf/jhdf/src/test/resources/hdf5/test_attribute_latest.hdf5",
        kind="hdf5",
        ops=(_put(963, "01"), {"op": "checksum", "start": 958, "end": 992}),
        outcome="BUG: crash",
    ),
)

#: Open bugs: fuzz verdicts matching one are counted, not failed.
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(result: dict[str, Any], label: str = "") -> str | None:
    """The id of the known bug a verdict (of a mutation labelled ``label``) shows."""
    for bug in KNOWN_BUGS:
        if bug.matches(result, label):
            return bug.id
    return None
