"""The parsers' shared option values, and the deprecated TIFF option names they replace:
the fill-range policy of both parsers, the layouts of
:class:`~virtualizarr_fill.tiff.TIFFParser`.

Earlier releases chose the layout of the store with three options that excluded each other
(``tree=True``, ``stack_pages=True``, ``overviews="multiscales"``), and the fill-range
policy was called ``on_out_of_range`` (``on_fill_out_of_range`` for HDF5). One
``layout=`` and one ``on_fill_out_of_range`` replace them; the old names keep working
for one release with a :class:`~virtualizarr_fill.errors.VirtualizarrFillDeprecationWarning`.
:func:`upgrade_options` maps them to the new names, for the parser and for option
mappings such as the command line's ``--tiff-option`` and the build records stored by
earlier versions.

The module imports nothing of the package, so that the command line reads options
without importing the parsing stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

#: What a fill value the data type cannot hold does (``on_fill_out_of_range`` of both
#: parsers): ``"raise"`` a :class:`~virtualizarr_fill.errors.FillValueError`, or
#: ``"warn"`` with a :class:`~virtualizarr_fill.errors.FillValueWarning` and leave that
#: value out.
OnFillOutOfRange = Literal["raise", "warn"]
FILL_OUT_OF_RANGE_POLICIES: tuple[OnFillOutOfRange, ...] = ("raise", "warn")

#: How a TIFF's images become groups: ``"image"`` one image (``ifd``, default the first
#: full-resolution one), ``"tree"`` one sibling group per image, ``"pages"`` the
#: full-resolution pages stacked along a leading ``page`` dimension, ``"multiscales"``
#: the image and its overviews as a multiscale group.
TIFFLayout = Literal["image", "tree", "pages", "multiscales"]
LAYOUTS: tuple[TIFFLayout, ...] = ("image", "tree", "pages", "multiscales")

#: Deprecated layout options -> (the value that asks for the layout, the layout).
_LAYOUT_OPTIONS: dict[str, tuple[object, TIFFLayout]] = {
    "tree": (True, "tree"),
    "stack_pages": (True, "pages"),
    "overviews": ("multiscales", "multiscales"),
}
#: Every deprecated option name.
DEPRECATED_OPTIONS = (*_LAYOUT_OPTIONS, "on_out_of_range")


class Renamed(NamedTuple):
    """One deprecated option met: its name and value, and the option replacing it."""

    name: str
    value: Any
    new_name: str
    new_value: Any


def upgrade_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], list[Renamed]]:
    """``options`` with the deprecated names replaced by ``layout`` and
    ``on_fill_out_of_range``, and what was replaced.

    A deprecated option that asks for nothing (``tree=False``, ``overviews=None``) is
    dropped. Raises ``ValueError`` for deprecated options asking for two layouts, or
    for one that contradicts the new option given with it.
    """
    upgraded = {k: v for k, v in options.items() if k not in DEPRECATED_OPTIONS}
    renamed: list[Renamed] = []
    asked: list[tuple[str, TIFFLayout]] = []
    for name, (wanted, layout) in _LAYOUT_OPTIONS.items():
        if name not in options:
            continue
        value = options[name]
        if name == "overviews" and value not in (None, "multiscales"):
            raise ValueError(f"overviews must be None or 'multiscales', got {value!r}")
        if value not in (None, False) and value != wanted:
            raise ValueError(f"{name} must be True or False, got {value!r}")
        renamed.append(Renamed(name, value, "layout", layout if value == wanted else "image"))
        if value == wanted:
            asked.append((f"{name}={value!r}", layout))
    if asked:
        given = upgraded.get("layout", "image")
        layouts = {layout for _, layout in asked}
        if len(layouts) > 1 or given not in ("image", *layouts):
            named = [text for text, _ in asked]
            if given != "image":
                named.append(f"layout={given!r}")
            raise ValueError(f"{' and '.join(named)} exclude each other: give one layout=")
        upgraded["layout"] = asked[0][1]
    if "on_out_of_range" in options:
        value = options["on_out_of_range"]
        given = upgraded.get("on_fill_out_of_range", value)
        if given != value:
            raise ValueError(
                f"on_out_of_range={value!r} contradicts on_fill_out_of_range={given!r}: "
                "give on_fill_out_of_range alone"
            )
        upgraded["on_fill_out_of_range"] = value
        renamed.append(Renamed("on_out_of_range", value, "on_fill_out_of_range", value))
    return upgraded, renamed


def deprecation_message(renamed: Renamed) -> str:
    """The deprecation warning of one renamed option, naming the call to make instead."""
    return (
        f"TIFFParser({renamed.name}={renamed.value!r}) is deprecated and will be removed in "
        f"the next release; use TIFFParser({renamed.new_name}={renamed.new_value!r})"
    )


__all__ = [
    "DEPRECATED_OPTIONS",
    "FILL_OUT_OF_RANGE_POLICIES",
    "LAYOUTS",
    "OnFillOutOfRange",
    "Renamed",
    "TIFFLayout",
    "deprecation_message",
    "upgrade_options",
]
