"""Which packages a reader of a store needs besides zarr, from the codecs its arrays name.

A store of virtual references holds each array's codec chain by name. zarr reads its own
codecs (``bytes``, ``transpose``, ``zstd``, ``numcodecs.*``, ...); a name of
virtualizarr-fill (``virtualizarr_fill.crop``, ...) needs the ``virtualizarr-fill-codecs``
distribution, an ``imagecodecs_*`` name (TIFF LZW, PackBits, JPEG, ...) the
``imagecodecs-zarr`` one. Installed, each registers its codecs with zarr by entry point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from virtualizarr_fill_codecs import CODEC_NAMES

#: The distribution a reader installs for codec names outside zarr's own, by name prefix.
CODECS_DISTRIBUTION = "virtualizarr-fill-codecs"
IMAGECODECS_DISTRIBUTION = "imagecodecs-zarr"


def distribution_of(codec_name: str) -> str | None:
    """The distribution that registers ``codec_name`` with zarr, or None for zarr's own."""
    if codec_name in CODEC_NAMES:
        return CODECS_DISTRIBUTION
    if codec_name.startswith("imagecodecs_"):
        return IMAGECODECS_DISTRIBUTION
    return None


def codec_names(codecs: Iterable[object]) -> list[str]:
    """The names of a codec chain: codec objects or their JSON form, sharding's inner
    codecs included."""
    names: list[str] = []
    for codec in codecs:
        if isinstance(codec, str):  # a codec named without configuration
            names.append(codec)
            continue
        as_dict = codec if isinstance(codec, Mapping) else codec.to_dict()  # type: ignore[attr-defined]
        name = as_dict["name"] if isinstance(as_dict, Mapping) else str(as_dict)
        names.append(str(name))
        configuration = as_dict.get("configuration") if isinstance(as_dict, Mapping) else None
        if isinstance(configuration, Mapping):
            for key in ("codecs", "index_codecs"):
                inner = configuration.get(key)
                if isinstance(inner, list):
                    names.extend(codec_names(inner))
    return names


def reader_packages(arrays: Mapping[str, Iterable[object]]) -> dict[str, dict[str, list[str]]]:
    """Distribution -> {array name -> the codec names it needs that distribution for},
    for the arrays (name -> codec chain) that need one besides zarr; empty where zarr
    alone reads every array."""
    needed: dict[str, dict[str, list[str]]] = {}
    for array, codecs in arrays.items():
        for name in codec_names(codecs):
            distribution = distribution_of(name)
            if distribution is None:
                continue
            names = needed.setdefault(distribution, {}).setdefault(array, [])
            if name not in names:
                names.append(name)
    return needed


def reader_requirement(arrays: Mapping[str, Iterable[object]]) -> str:
    """One line saying what a reader needs besides zarr (and icechunk or fsspec):
    ``reads with zarr alone``, or each distribution to install with the arrays that need
    it, e.g. ``needs virtualizarr-fill-codecs (pip install virtualizarr-fill-codecs) for
    band_data``."""
    needed = reader_packages(arrays)
    if not needed:
        return "reads with zarr alone"
    parts = []
    for distribution in sorted(needed):
        listed = ", ".join(sorted(needed[distribution]))
        parts.append(f"needs {distribution} (pip install {distribution}) for {listed}")
    return "; ".join(parts)


__all__ = [
    "CODECS_DISTRIBUTION",
    "IMAGECODECS_DISTRIBUTION",
    "codec_names",
    "distribution_of",
    "reader_packages",
    "reader_requirement",
]
