"""Reading an Icechunk repository of virtual references, what goes wrong said in one line.

Each virtual reference records when its file was last modified as the repository saw it
(VirtualiZarr's writers pin the time of the write, ``last_updated_at``). Icechunk
refuses to read a chunk of a file modified later, even when its bytes are the same (a
``cp`` over it, a ``touch``), with a ``StorageError`` of several lines naming the store
key it was reading, which is often not the chunk a user asked for.
:class:`ChangedFilesNamingStore` wraps the store of a session so that this refusal
becomes a :class:`SourceFileChangedError` naming the file and what to do.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from zarr.storage import WrapperStore

from virtualizarr_fill import upstream
from virtualizarr_fill.errors import SourceFileChangedError as SourceFileChangedError

if TYPE_CHECKING:
    from zarr.abc.store import ByteRequest
    from zarr.core.buffer import Buffer, BufferPrototype

__all__ = ["ChangedFilesNamingStore", "SourceFileChangedError", "changed_file_error"]

#: Icechunk's words for a virtual chunk whose file's modification time (or ETag) is not
#: the one its reference recorded.
_CHANGED = re.compile(r"checksum of the object owning the virtual chunk has changed \(([^)\s]+)\)")


def changed_file_error(
    error: BaseException, repository: str | None = None
) -> SourceFileChangedError | None:
    """The :class:`SourceFileChangedError` an Icechunk error stands for, or ``None``
    when it is about something else."""
    found = _CHANGED.search(str(error))
    return SourceFileChangedError(found.group(1), repository) if found else None


class ChangedFilesNamingStore(WrapperStore[Any]):
    """An Icechunk store whose reads raise :class:`SourceFileChangedError` where
    Icechunk refuses a chunk of a file modified since the repository recorded it.

    Parameters
    ----------
    store
        The store of an Icechunk session (``repo.readonly_session("main").store``).
    repository
        Where the repository is, for messages.
    """

    #: Its ``get_partial_values`` is Icechunk's: many keys fetched in one call
    #: (:mod:`virtualizarr_fill.reads.keyed_batches`).
    batches_keys = True

    def __init__(self, store: Any, repository: str | None = None) -> None:
        super().__init__(store)
        self.repository = repository

    def _with_store(self, store: Any) -> ChangedFilesNamingStore:
        return type(self)(store, self.repository)

    def _translated(self, error: Exception) -> Exception:
        return changed_file_error(error, self.repository) or error

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        try:
            return await super().get(key, prototype, byte_range)
        except Exception as error:
            raise self._translated(error) from None

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        try:
            return await super().get_partial_values(prototype, key_ranges)
        except Exception as error:
            raise self._translated(error) from None

    async def get_ranges(  # type: ignore[override]
        self, key: str, byte_ranges: Sequence[ByteRequest | None], **options: Any
    ) -> AsyncIterator[Sequence[tuple[int, Buffer | None]]]:
        try:
            async for group in super().get_ranges(key, byte_ranges, **options):
                yield group
        except Exception as error:
            raise self._translated(error) from None

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        try:
            return super().get_sync(key, prototype=prototype, byte_range=byte_range)
        except Exception as error:
            raise self._translated(error) from None

    async def _get_many(
        self, requests: Iterable[tuple[str, BufferPrototype, ByteRequest | None]]
    ) -> AsyncGenerator[tuple[str, Buffer | None], None]:
        try:
            async for found in upstream.get_many(upstream.wrapped_store(self), requests):
                yield found
        except Exception as error:
            raise self._translated(error) from None

    def __repr__(self) -> str:
        return f"ChangedFilesNamingStore({self.repository or upstream.wrapped_store(self)!r})"

    def __str__(self) -> str:
        # Messages that name a chunk "of <store>" name the Icechunk store, as unwrapped.
        return str(upstream.wrapped_store(self))
