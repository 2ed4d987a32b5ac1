"""A scene's time, for the TIFF parser's ``time_from`` option.

Most GeoTIFF archives hold one scene per date. With ``TIFFParser(time_from=...)`` each
file's dataset gets a leading ``time`` dimension of length one and a ``time``
coordinate taken from

* ``"datetime"``: the TIFF DateTime tag (306, ``YYYY:MM:DD HH:MM:SS``, as GDAL writes
  ``TIFFTAG_DATETIME``);
* ``"metadata:NAME"``: the GDAL metadata item ``NAME`` (for example
  ``metadata:ACQUISITIONDATETIME``; items of another domain as ``DOMAIN:NAME``);
* anything else: a regular expression searched in the file name (the last part of the
  URL), whose first group, or whole match without groups, holds the date: ``S2_(\\d{8})``
  on ``S2_20240117_B04.tif``.

Dates are read as ISO 8601 (``2024-01-17``, ``2024-01-17T10:30:00Z``), TIFF's
``2024:01:17 10:30:00``, or digits ``YYYYMMDD``, ``YYYYMMDDhhmm``, ``YYYYMMDDhhmmss``; a
date without time zone is UTC. The coordinate is CF-encoded (integer seconds since
1970-01-01, proleptic Gregorian calendar), which xarray decodes to ``datetime64``.
Scenes are stacked by :func:`virtualizarr_fill.assemble.time_stack.stack_by_time`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from virtualizarr_fill.errors import VirtualizarrFillError

TIME = "time"
#: The CF attributes of the time coordinate.
TIME_ATTRIBUTES: dict[str, str] = {
    "standard_name": "time",
    "units": "seconds since 1970-01-01 00:00:00",
    "calendar": "proleptic_gregorian",
}
DATETIME_TAG = 306
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DIGIT_FORMATS = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}


class TimeCoordinateError(VirtualizarrFillError, ValueError):
    """A scene's time is missing or unreadable, or two scenes have the same time."""


@dataclass(frozen=True)
class TimeSource:
    """Where a scene's time comes from (see the module docstring)."""

    kind: str  # "datetime", "metadata" or "filename"
    detail: str = ""  # the metadata item, or the pattern

    @classmethod
    def parse(cls, spec: str) -> TimeSource:
        """The source a ``time_from`` text names; raises ValueError for a bad pattern."""
        if spec == "datetime":
            return cls("datetime")
        if spec.startswith("metadata:") and len(spec) > len("metadata:"):
            return cls("metadata", spec.removeprefix("metadata:"))
        try:
            pattern = re.compile(spec)
        except re.error as error:
            raise ValueError(f"time_from {spec!r} is not a regular expression ({error})") from None
        if pattern.groups > 1:  # which group holds the date would be left open
            raise ValueError(
                f"time_from {spec!r} has {pattern.groups} groups; use one, and (?:...) "
                "for the others"
            )
        return cls("filename", spec)

    def describe(self) -> str:
        if self.kind == "datetime":
            return "the TIFF DateTime tag"
        if self.kind == "metadata":
            return f"the GDAL metadata item {self.detail!r}"
        return f"the file name pattern {self.detail!r}"


def parse_time(text: str) -> dt.datetime:
    """A date or date-time as the module docstring lists the forms (UTC when no zone)."""
    text = text.strip().rstrip("\x00").strip()
    value: dt.datetime | None = None
    if text.isdigit() and len(text) in _DIGIT_FORMATS:
        value = dt.datetime.strptime(text, _DIGIT_FORMATS[len(text)])
    elif re.fullmatch(r"\d{4}:\d\d:\d\d \d\d:\d\d:\d\d", text):
        value = dt.datetime.strptime(text, "%Y:%m:%d %H:%M:%S")
    else:
        try:
            value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            value = None
    if value is None:
        raise ValueError(f"{text!r} is not a date")
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def scene_time(source: TimeSource, url: str, tags: Any, metadata: Mapping[str, Any]) -> dt.datetime:
    """The time of the scene ``url`` from ``source``: ``tags`` maps TIFF tag codes to
    tags or values (``.get(code)``, as tifffile's ``TiffTags``), ``metadata`` the GDAL
    metadata items (as ``band_data`` attributes name them)."""
    name = url.rstrip("/").rsplit("/", 1)[-1]
    text: str | None = None
    if source.kind == "datetime":
        value = tags.get(DATETIME_TAG)
        text = None if value is None else str(getattr(value, "value", value))
    elif source.kind == "metadata":
        value = metadata.get(source.detail)
        text = None if value is None else str(value)
    else:
        match = re.search(source.detail, name)
        if match is not None:
            text = match.group(1) if match.re.groups else match.group(0)
    if text is None:
        raise TimeCoordinateError(f"{url}: no time found in {source.describe()}")
    try:
        return parse_time(text)
    except ValueError as error:
        raise TimeCoordinateError(f"{url}: {source.describe()} holds {error}") from None


def time_value(when: dt.datetime) -> int:
    """``when`` in the coordinate's units (whole seconds since the epoch)."""
    return int((when - EPOCH) // dt.timedelta(seconds=1))



__all__ = [
    "DATETIME_TAG",
    "EPOCH",
    "TIME",
    "TIME_ATTRIBUTES",
    "TimeCoordinateError",
    "TimeSource",
    "parse_time",
    "scene_time",
    "time_value",
]
