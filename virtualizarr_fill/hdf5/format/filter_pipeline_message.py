"""A dataset's filter pipeline message, checked against its own length.

libhdf5 decodes the filter pipeline message (0x0B, versions 1 and 2) filter by filter,
as many as its count field says, and ignores whatever bytes of the message are left.
A count lowered by one leaves the last filter out: h5py then reads every chunk
through the remaining filters, from bytes that were written through all of them, and
returns whatever comes out (a deflated chunk "unshuffled" and cut or padded to the
chunk's size). A count raised reads the next filter from past the message. This
module decodes the message from the header's bytes (HDF5 file format specification,
"Data Storage - Filter Pipeline Message") and says what is wrong with it:

* a version other than 1 or 2, or more than 32 filters (libhdf5's ``H5Z_MAX_NFILTERS``);
* (version 1) a name length that is not a multiple of eight;
* fields that do not fill the message (its stored length, less the padding to 8
  bytes that version 1 object headers add): the count does not match the filters
  the message holds.

Messages stored as references to shared messages are not decoded here.
"""

from __future__ import annotations

from collections.abc import Iterable

from virtualizarr_fill.hdf5.format.structures import uint

FILTER_PIPELINE = 0x0B
#: libhdf5's ``H5Z_MAX_NFILTERS``.
MAX_FILTERS = 32
#: Filter identifiers from here on store their name length in version 2 messages too.
_FIRST_NAMED_ID = 256
#: Padding a version 1 object header adds to every message (to a multiple of 8 bytes).
_PADDING = 8


class CorruptFilterPipelineMessage(Exception):
    """A filter pipeline message that is not what any writer stores."""


def check_filter_pipeline_message(data: bytes) -> int:
    """Check a filter pipeline message; return its filter count. Raises
    :class:`CorruptFilterPipelineMessage`."""
    if len(data) < 2:
        raise CorruptFilterPipelineMessage("too short for its version")
    version, count = data[0], data[1]
    if version not in (1, 2):
        raise CorruptFilterPipelineMessage(f"unknown version {version}")
    if count > MAX_FILTERS:
        raise CorruptFilterPipelineMessage(f"{count} filters, more than libhdf5's {MAX_FILTERS}")
    at = 8 if version == 1 else 2
    for index in range(count):
        if at + 2 > len(data):
            raise CorruptFilterPipelineMessage(_cut_off(count, index, len(data)))
        filter_id = uint(data, at, 2)
        at += 2
        name_length = 0
        if version == 1 or filter_id >= _FIRST_NAMED_ID:
            if at + 2 > len(data):
                raise CorruptFilterPipelineMessage(_cut_off(count, index, len(data)))
            name_length = uint(data, at, 2)
            at += 2
            if version == 1 and name_length % 8:
                raise CorruptFilterPipelineMessage(
                    f"filter {index}: name length {name_length}, not a multiple of eight"
                )
        if at + 4 > len(data):
            raise CorruptFilterPipelineMessage(_cut_off(count, index, len(data)))
        values = uint(data, at + 2, 2)
        at += 4 + name_length + 4 * values
        if version == 1 and values % 2:
            at += 4
        if at > len(data):
            raise CorruptFilterPipelineMessage(_cut_off(count, index, len(data)))
    if len(data) - at >= _PADDING:
        raise CorruptFilterPipelineMessage(
            f"version {version}: a filter count of {count} covers {at} of its {len(data)} "
            "bytes; the count does not match the filters stored"
        )
    return count


def _cut_off(count: int, index: int, stored: int) -> str:
    return (
        f"a filter count of {count}, but the message's {stored} bytes end inside filter "
        f"{index}; the count does not match the filters stored"
    )


def filter_pipeline_problem(
    messages: Iterable[tuple[int, bytes]], shared: Iterable[int] = ()
) -> str | None:
    """Why the filter pipeline message among an object header's ``messages`` is corrupt
    (None: sound, absent or shared)."""
    if FILTER_PIPELINE in set(shared):
        return None
    for kind, data in messages:
        if kind != FILTER_PIPELINE:
            continue
        try:
            check_filter_pipeline_message(data)
        except CorruptFilterPipelineMessage as exc:
            return f"corrupt filter pipeline message ({exc})"
    return None


__all__ = [
    "FILTER_PIPELINE",
    "CorruptFilterPipelineMessage",
    "check_filter_pipeline_message",
    "filter_pipeline_problem",
]
