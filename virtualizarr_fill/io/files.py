"""Object-store-backed file objects for header parsers.

tifffile and h5py parse headers through a Python file object. :class:`StoreFile` gives
them one over any obstore store (local, S3, GCS, Azure, HTTP) while keeping round trips
few: the first request fetches the object's head *and* learns its size (no HEAD
request), later reads fetch whole blocks, and adjacent missing blocks are fetched in a
single ranged request. Every request and byte is counted, so benchmarks and the CLI can
report them.

obspec-utils' readers cover similar ground but spend a HEAD request on every file;
header parsing of small files is dominated by round trips, hence this reader.

Every request is bounded by the parse's deadline (:mod:`virtualizarr_fill.io.deadlines`),
and every failure, obstore's panics included (a ``BaseException``: reading ranges of a
file that shrank after its size was read), becomes a
:class:`~virtualizarr_fill.errors.StoreReadError` naming the file.
"""

from __future__ import annotations

import io
import re
from collections.abc import Awaitable, Buffer, Callable
from dataclasses import dataclass
from typing import Any

from virtualizarr_fill.errors import StoreReadError
from virtualizarr_fill.io.deadlines import (
    DEFAULT_PARSE_DEADLINE,
    Deadline,
    DeadlineExceeded,
    as_deadline,
    call_within,
    is_local,
)

DEFAULT_FIRST_REQUEST = 64 * 1024
DEFAULT_BLOCK_SIZE = 64 * 1024
_EMPTY = memoryview(b"")


@dataclass
class RequestStats:
    """Requests made and bytes received by one :class:`StoreFile`."""

    requests: int = 0
    bytes_read: int = 0


class StoreFile(io.RawIOBase):
    """Read-only, seekable file object over ``path`` in an obstore ``store``.

    Parameters
    ----------
    store
        An obstore store (what ``ObjectStoreRegistry.resolve`` returns) or anything with
        the same obspec methods (``get``, ``get_range``, ``get_ranges``), such as
        obspec-utils' ``TracingReadableStore`` used to count requests.
    path
        The object's path within the store.
    first_request
        Bytes fetched by the first read: TIFF IFDs and HDF5 superblocks and object
        headers usually lie at the start of the file.
    block_size
        Granularity of later reads and of the cache.
    deadline
        The parse's :class:`~virtualizarr_fill.io.deadlines.Deadline`, or seconds from now
        (``None``: no deadline). A request still unanswered when it passes is cancelled
        and raises :class:`~virtualizarr_fill.errors.StoreReadError`.
    url
        How errors name the file (default: ``path``).
    """

    def __init__(
        self,
        store: Any,
        path: str,
        *,
        first_request: int = DEFAULT_FIRST_REQUEST,
        block_size: int = DEFAULT_BLOCK_SIZE,
        deadline: Deadline | float | None = DEFAULT_PARSE_DEADLINE,
        url: str | None = None,
    ) -> None:
        super().__init__()
        if block_size < 1 or first_request < 1:
            raise ValueError("block_size and first_request must be positive")
        self.store = store
        self.path = path
        self.url = url
        self.deadline = as_deadline(deadline)
        # Local reads cannot stall on a network: called directly, not through the loop.
        self._bounded = self.deadline.seconds is not None and not is_local(store)
        self.block_size = block_size
        self.first_request = first_request
        self.stats = RequestStats()
        self._size: int | None = None
        self._blocks: dict[int, memoryview] = {}
        self._position = 0

    # -- size and fetching ---------------------------------------------------

    def _request[T](
        self, call: Callable[[], T], call_async: Callable[[], Awaitable[T]], start: int, length: int
    ) -> T:
        """``call()``, or for a remote store ``call_async()`` bounded by the deadline; any
        failure as a :class:`StoreReadError` naming the file."""
        try:
            if self._bounded and hasattr(self.store, "get_async"):
                return call_within(call_async, self.deadline)
            return call()
        except DeadlineExceeded:
            raise self._deadline_error(start, length) from None
        except BaseException as error:
            failure = store_read_error(error, self._name(), start, length, self.store)
            if failure is None:
                raise
            raise failure from error

    def _fetch_head(self) -> None:
        # Round the head up to whole blocks so it also serves as cache blocks.
        length = -(-self.first_request // self.block_size) * self.block_size
        options = {"range": (0, length)}
        try:
            result = self._request(
                lambda: self.store.get(self.path, options=options),
                lambda: self.store.get_async(self.path, options=options),
                0,
                length,
            )
            # A view of obstore's buffer: no copy of the head.
            data = memoryview(result.bytes())
        except StoreReadError as error:
            # Stores refuse any ranged read of an empty object; that is a size, not a
            # fault. Asked only after such a refusal: after a timeout, a HEAD request
            # would go through the store's retries a second time.
            if _is_range_refusal(error) and self._is_empty_object():
                self._size = 0
                self.stats.requests += 2
                return
            raise
        self.stats.requests += 1
        self.stats.bytes_read += len(data)
        self._size = int(result.meta["size"])
        for index in range(0, len(data), self.block_size):
            self._blocks[index // self.block_size] = data[index : index + self.block_size]

    def _is_empty_object(self) -> bool:
        try:
            meta = self._request(
                lambda: self.store.head(self.path), lambda: self.store.head_async(self.path), 0, 0
            )
            return int(meta["size"]) == 0
        except StoreReadError:  # missing or unreadable: the original error says more
            return False

    @property
    def size(self) -> int:
        """The object's size in bytes (known after the first request)."""
        if self._size is None:
            self._fetch_head()
        assert self._size is not None
        return self._size

    def _fetch_blocks(self, first: int, last: int) -> None:
        """Make blocks ``first..last`` (inclusive) resident, one request per missing run."""
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if not missing:
            return
        runs: list[tuple[int, int]] = []
        for block in missing:
            if runs and runs[-1][1] == block - 1:
                runs[-1] = (runs[-1][0], block)
            else:
                runs.append((block, block))
        starts = [start * self.block_size for start, _ in runs]
        ends = [min((end + 1) * self.block_size, self.size) for _, end in runs]
        store, path = self.store, self.path
        if len(runs) == 1:
            payloads = [
                self._request(
                    lambda: store.get_range(path, start=starts[0], end=ends[0]),
                    lambda: store.get_range_async(path, start=starts[0], end=ends[0]),
                    starts[0],
                    ends[0] - starts[0],
                )
            ]
        else:
            payloads = list(
                self._request(
                    lambda: store.get_ranges(path, starts=starts, ends=ends),
                    lambda: store.get_ranges_async(path, starts=starts, ends=ends),
                    starts[0],
                    ends[-1] - starts[0],
                )
            )
        self.stats.requests += len(runs)
        for (start, _), payload, first, end in zip(runs, payloads, starts, ends, strict=True):
            data = memoryview(payload)
            if len(data) != end - first:
                raise StoreReadError(
                    f"{self._name()}: {len(data)} bytes at offset {first} where "
                    f"{end - first} were asked, within the {self.size} bytes the object "
                    "held when reading began (it changed while being read?)"
                )
            self.stats.bytes_read += len(data)
            for offset in range(0, len(data), self.block_size):
                self._blocks[start + offset // self.block_size] = data[
                    offset : offset + self.block_size
                ]

    def _name(self) -> str:
        return self.url or self.path

    def _deadline_error(self, start: int, length: int) -> StoreReadError:
        return StoreReadError(
            f"{self._name()}: no answer from {self.store!r} within the parse deadline of "
            f"{self.deadline.seconds:g} s (reading {length} bytes at offset {start}); the "
            "store may be stalled or unreachable"
        )

    def read_range(self, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object)."""
        end = min(start + length, self.size)
        if end <= start:
            return b""
        first, last = start // self.block_size, (end - 1) // self.block_size
        self._fetch_blocks(first, last)
        offset = start - first * self.block_size
        if first == last:
            return bytes(self._blocks[first][offset : offset + (end - start)])
        data = b"".join(self._blocks.get(b, memoryview(b"")) for b in range(first, last + 1))
        return data[offset : offset + (end - start)]

    def cached_range(self, start: int, length: int) -> bytes | None:
        """``length`` bytes from ``start`` if every block is already fetched, else None
        (never a request: for checks that are only worth the bytes already at hand)."""
        resident = self._resident(start, length)
        if resident is not None and len(resident) == length:
            return bytes(resident)
        end = start + length
        if length <= 0 or end > self.size:
            return None
        first, last = start // self.block_size, (end - 1) // self.block_size
        if any(block not in self._blocks for block in range(first, last + 1)):
            return None
        return self.read_range(start, length)

    # -- io.RawIOBase ----------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET and offset >= 0:  # header parsers seek before every read
            self._position = offset
            return offset
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def first_block(self) -> memoryview:
        """The object's first block as fetched (empty before the first request), for
        callers that slice many small values out of a header without a call each."""
        return self._blocks.get(0, _EMPTY)

    def _resident(self, start: int, length: int) -> memoryview | None:
        """The bytes ``start..start+length`` (clipped to the object) when they lie in
        one block already fetched, else None. Header parsers make hundreds of small
        reads, nearly all inside the first block: this is their path, without the
        block arithmetic and joins of :meth:`read_range`."""
        size = self._size
        if size is None or length <= 0:
            return None
        end = min(start + length, size)
        block = start // self.block_size
        if end <= start or (end - 1) // self.block_size != block:
            return None
        data = self._blocks.get(block)
        if data is None:
            return None
        offset = start - block * self.block_size
        return data[offset : offset + (end - start)]

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = max(self.size - self._position, 0)
        resident = self._resident(self._position, size)
        data = bytes(resident) if resident is not None else self.read_range(self._position, size)
        self._position += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Buffer) -> int:
        view = memoryview(buffer).cast("B")
        resident = self._resident(self._position, len(view))
        if resident is not None:  # straight from the block, no intermediate bytes
            view[: len(resident)] = resident
            self._position += len(resident)
            return len(resident)
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def __repr__(self) -> str:
        return f"StoreFile({self.store!r}, {self.path!r})"


def store_read_error(
    error: BaseException, name: str, start: int, length: int, store: Any = None
) -> StoreReadError | None:
    """``error``, raised reading ``length`` bytes at ``start`` of the file ``name``, as a
    :class:`StoreReadError` naming the file; None when it is not a store's failure but
    the interpreter's (``KeyboardInterrupt``, ``SystemExit``...), to re-raise as it is.

    obstore raises its own exceptions, and on a Rust panic (e.g. ranges past the end of
    a local file that shrank) a ``PanicException``, which is a ``BaseException``.
    """
    if not (isinstance(error, Exception) or type(error).__name__ == "PanicException"):
        return None
    source = "" if store is None else f" from {store!r}"
    if isinstance(error, FileNotFoundError):
        return StoreReadError(f"{name}: not found{source}")
    return StoreReadError(
        f"{name}: reading {length} bytes at offset {start}{source} failed: "
        f"{type(error).__name__}: {_brief(str(error))}"
    )


def _brief(text: str) -> str:
    """An object store's error message without its debug dump or the XML body of the
    server's response (its error code kept)."""
    text = " ".join(text.strip().split("\n\nDebug source:", 1)[0].split())
    if "<?xml" in text:
        head, body = text.split("<?xml", 1)
        code = re.search(r"<Code>([^<]*)</Code>", body)
        text = head.rstrip(": ") + (f" ({code.group(1)})" if code else "")
    return text


def _is_range_refusal(error: StoreReadError) -> bool:
    """Whether a failed ranged read was refused for its range (HTTP 416 from S3, GCS,
    Azure and HTTP stores; "invalid range" from local ones), as for an empty object."""
    text = str(error).lower()
    return "416" in text or "invalidrange" in text or "range was invalid" in text


__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_FIRST_REQUEST",
    "DEFAULT_PARSE_DEADLINE",
    "RequestStats",
    "StoreFile",
    "store_read_error",
]
