"""Whether a dataset's filter pipeline message can be trusted.

libhdf5 decodes as many filters as the message's count says (see
:mod:`~virtualizarr_fill.hdf5.format.filter_pipeline_message`): a count that does not
match the filters the message holds makes h5py read every chunk through another
pipeline than the one it was written with, and the virtual array would decode it
through that pipeline too. Such a dataset is refused, naming the problem.
"""

from __future__ import annotations

import h5py

from virtualizarr_fill.hdf5.array_context import ArrayContext
from virtualizarr_fill.hdf5.fill_checks import header_messages
from virtualizarr_fill.hdf5.format.filter_pipeline_message import filter_pipeline_problem


def pipeline_message_problem(dataset: h5py.Dataset, context: ArrayContext, name: str) -> str | None:
    """Why the filter pipeline message of ``dataset`` (reported as ``name``) is corrupt
    (None: sound, absent, shared, or the header not at hand)."""
    storage, _ = header_messages(dataset, context, name)
    if storage is None or storage.messages is None:
        return None
    return filter_pipeline_problem(storage.messages, storage.shared_types)


__all__ = ["pipeline_message_problem"]
