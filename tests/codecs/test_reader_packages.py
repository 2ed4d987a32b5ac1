"""What a reader installs besides zarr, from the codecs the parsers name for real files
(``scripts/reader_packages.py`` measures the corpus with the same functions)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from virtualizarr_fill.codecs.reader_packages import codec_names, reader_requirement

ROOT = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("reader_packages_script",
                                                  ROOT / "scripts" / "reader_packages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("path", "verdict", "names"),
    [
        ("corteva+rioxarray/cint16.tif", "virtualizarr-fill-codecs",
         ["virtualizarr_fill.complex_int"]),
        ("rasterio+rasterio/rgb_lzw.tif", "imagecodecs-zarr", ["imagecodecs_lzw"]),
        ("rasterio+rasterio/rgb_deflate.tif", "zarr alone", []),
        ("fsspec+kerchunk/hdf5_compression_bitshuffle.h5", "virtualizarr-fill-codecs",
         ["virtualizarr_fill.hdf5_bitshuffle"]),
    ],
)  # fmt: skip
def test_corpus_files_need_the_package_their_codecs_come_from(
    corpus_dir: Path, path: str, verdict: str, names: list[str]
) -> None:
    assert _script().classify(corpus_dir / path) == (verdict, names)


def test_requirement_line_names_each_package_and_its_arrays() -> None:
    chains = {
        "a": [{"name": "bytes", "configuration": {}}, {"name": "virtualizarr_fill.crop",
                                                      "configuration": {"stored_shape": [4]}}],
        "b": [{"name": "bytes"}, {"name": "imagecodecs_lzw"}],
        "c": [{"name": "sharding_indexed", "configuration": {
            "codecs": [{"name": "bytes"}, {"name": "virtualizarr_fill.truncate"}],
            "index_codecs": [{"name": "bytes"}, {"name": "crc32c"}]}}],
        "d": [{"name": "bytes"}, {"name": "zstd"}],
    }  # fmt: skip
    assert codec_names(chains["c"]) == [
        "sharding_indexed", "bytes", "virtualizarr_fill.truncate", "bytes", "crc32c"
    ]
    assert reader_requirement(chains) == (
        "needs imagecodecs-zarr (pip install imagecodecs-zarr) for b; "
        "needs virtualizarr-fill-codecs (pip install virtualizarr-fill-codecs) for a, c"
    )
    assert reader_requirement({"d": chains["d"]}) == "reads with zarr alone"
