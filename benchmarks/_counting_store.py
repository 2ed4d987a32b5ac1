"""A store wrapper counting the requests and bytes read through it, for benchmarks.

It measures any parser (ours or another) the same way; the package itself counts its
own reads in :class:`virtualizarr_fill.io.files.RequestStats`.
"""

from __future__ import annotations

from typing import Any

from virtualizarr_fill.io.files import RequestStats


class CountingStore:
    """Wrap an obstore/obspec store and count the requests and bytes read through it.

    Used to measure any parser (ours or another) the same way. obspec-utils'
    ``TracingReadableStore`` records a ranged ``get`` as a read of the whole object,
    which overstates bytes for header reads; this wrapper reads the served range.
    Thread-safe; picklable when the wrapped store is.
    """

    def __init__(self, store: Any) -> None:
        import threading

        self.store = store
        self.stats = RequestStats()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "stats": self.stats}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"])  # type: ignore[misc]
        self.stats = state["stats"]

    def _count(self, requests: int, nbytes: int) -> None:
        with self._lock:
            self.stats.requests += requests
            self.stats.bytes_read += nbytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    @staticmethod
    def _served(result: Any) -> int:
        start, end = result.range
        return int(end) - int(start)

    def get(self, path: str, *, options: Any = None) -> Any:
        result = self.store.get(path, options=options)
        self._count(1, self._served(result))
        return result

    async def get_async(self, path: str, *, options: Any = None) -> Any:
        result = await self.store.get_async(path, options=options)
        self._count(1, self._served(result))
        return result

    def get_range(self, path: str, **kwargs: Any) -> Any:
        data = self.store.get_range(path, **kwargs)
        self._count(1, len(memoryview(data)))
        return data

    async def get_range_async(self, path: str, **kwargs: Any) -> Any:
        data = await self.store.get_range_async(path, **kwargs)
        self._count(1, len(memoryview(data)))
        return data

    def get_ranges(self, path: str, **kwargs: Any) -> Any:
        data = self.store.get_ranges(path, **kwargs)
        self._count(len(data), sum(len(memoryview(d)) for d in data))
        return data

    async def get_ranges_async(self, path: str, **kwargs: Any) -> Any:
        data = await self.store.get_ranges_async(path, **kwargs)
        self._count(len(data), sum(len(memoryview(d)) for d in data))
        return data

    def head(self, path: str) -> Any:
        self._count(1, 0)
        return self.store.head(path)

    async def head_async(self, path: str) -> Any:
        self._count(1, 0)
        return await self.store.head_async(path)

    def __repr__(self) -> str:
        return f"CountingStore({self.store!r})"
