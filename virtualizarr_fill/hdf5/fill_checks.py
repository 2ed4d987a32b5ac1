"""Whether a dataset's fill value can be trusted where it has no stored values.

A dataset's unwritten elements read as its fill value, which libhdf5 takes from the
fill-value message as it finds it (see
:mod:`~virtualizarr_fill.hdf5.format.fill_value_message`): a corrupt message makes h5py
read garbage, and the virtual array would hold whatever the parser derived from it.
Such a dataset is refused, naming the problem. So is a dataset with no storage at all
whose values libhdf5 does not define: a fill-value write time of "never" leaves h5py's
buffer as it was (uninitialised memory), and an undefined fill value makes the read
fail ("dataset doesn't exist, no data can be read").
"""

from __future__ import annotations

import h5py

from virtualizarr_fill.hdf5._libhdf5 import object_address
from virtualizarr_fill.hdf5.array_context import ArrayContext
from virtualizarr_fill.hdf5.dtypes import has_file_form
from virtualizarr_fill.hdf5.format.fill_value_message import (
    FILL_TIME_NEVER,
    FillValueMessage,
    fill_value_problem,
)
from virtualizarr_fill.hdf5.format.object_storage import ObjectStorage


def header_messages(
    dataset: h5py.Dataset, context: ArrayContext, name: str
) -> tuple[ObjectStorage | None, int | None]:
    """The checked object header of ``dataset`` (reported as ``name``; None: not at
    hand) and its datatype's size in bytes (None: a size libhdf5 does not report)."""
    checks = context.checks(context.url)
    if checks is None:
        return None, None
    try:
        address = object_address(dataset.id)
        tid = dataset.id.get_type()
        # A variable-length or reference value is stored in its file form, whose size
        # libhdf5 does not report: only the fields are checked.
        datatype_size = None if has_file_form(tid) else int(tid.get_size())
    except Exception:  # the stages after this one report an unreadable header
        return None, None
    storage = checks.object(address, f"dataset {name!r}")
    if storage.messages is None:
        return None, None
    return storage, datatype_size


def fill_message_problem(
    dataset: h5py.Dataset, context: ArrayContext, name: str
) -> tuple[str | None, FillValueMessage | None]:
    """Why the fill-value messages of ``dataset`` (reported as ``name``) are corrupt
    (None: sound), and its decoded fill-value message (None: absent, shared, or the
    header not at hand)."""
    storage, datatype_size = header_messages(dataset, context, name)
    if storage is None or storage.messages is None:
        return None, None
    return fill_value_problem(storage.messages, datatype_size, storage.shared_types)


def undefined_values_problem(message: FillValueMessage | None, stored: bool) -> str | None:
    """Why a dataset with (``stored``) or without stored values has values libhdf5 does
    not define, or None."""
    if message is None or stored:
        return None
    if message.fill_time == FILL_TIME_NEVER:
        return (
            "no values are stored and the fill-value write time is 'never': libhdf5 "
            "leaves the values undefined"
        )
    if not message.defined:
        return "no values are stored and no fill value is defined: h5py cannot read it"
    return None


__all__ = ["fill_message_problem", "header_messages", "undefined_values_problem"]
