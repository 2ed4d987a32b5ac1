"""Object-store registries: the one way a file URL becomes a store and a path.

Parsers, the manifest read path and VirtualiZarr's ``ManifestStore`` must read the same
object for a URL. :func:`resolve` finds the store through the obspec-utils
``ObjectStoreRegistry`` and takes the object's path by ``ManifestStore.get``'s rule (the
URL's path with the store's own prefix removed), so that a file is parsed from the
object its chunks are later read from. Each URL is resolved once per registry.

:func:`registry_for` builds the registry the command-line tool and
:func:`~virtualizarr_fill.formats.open_virtual_datasets` use: one store per scheme and
bucket or host, configured by obstore from the environment.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse, urlsplit

from virtualizarr_fill.errors import UnregisteredURLError


def _path_in_store(store: Any, url: str) -> str:
    """The object's path inside ``store`` (``ManifestStore.get``'s rule, store prefix removed)."""
    path = urlparse(url).path
    if getattr(store, "prefix", None):
        prefix = str(store.prefix).lstrip("/")
    elif hasattr(store, "url"):
        prefix = urlparse(store.url).path.lstrip("/")
    else:
        prefix = ""
    return path.lstrip("/").removeprefix(prefix).lstrip("/")


# Per registry (held weakly), the resolved (store, path) of each file URL: a read resolves
# its file once, not once per chunk. The most recent ones only: a build that reads every
# tile of a large mosaic once would otherwise keep each tile's URL and path.
_KNOWN_PER_REGISTRY = 4096
_resolved: weakref.WeakKeyDictionary[Any, dict[str, tuple[Any, str]]] = weakref.WeakKeyDictionary()


def _known(registry: Any) -> dict[str, tuple[Any, str]]:
    try:
        known = _resolved.get(registry)
        if known is None:
            known = _resolved.setdefault(registry, {})
    except TypeError:  # a registry that cannot be referenced weakly: resolved every time
        return {}
    return known


def resolve(registry: Any, url: str) -> tuple[Any, str]:
    """The store of ``url`` in an obspec-utils ``ObjectStoreRegistry``, and the object's
    path in it.

    Raises :class:`UnregisteredURLError` listing the registered prefixes (the
    registry's own error names only the URL).
    """
    known = _known(registry)
    found = known.get(url)
    if found is None:
        try:
            store, _ = registry.resolve(url)
        except ValueError as error:
            if "Could not find an ObjectStore" not in str(error):
                raise
            store = None
        if not store:
            keys = getattr(registry, "map", {})
            listed = ", ".join(f"{k.scheme}://{k.netloc}" for k in keys) or "none"
            raise UnregisteredURLError(
                f"{url}: no store in the registry resolves it (registered: {listed}); "
                "register one, e.g. ObjectStoreRegistry({'s3://bucket': S3Store('bucket')})"
            ) from None
        if len(known) >= _KNOWN_PER_REGISTRY:
            del known[next(iter(known))]  # the oldest
        found = known[url] = (store, _path_in_store(store, url))
    return found


def store_prefix(url: str) -> str:
    """``scheme://netloc`` of a URL: the key of its store in a registry."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


_STORES: dict[str, Any] = {}


def store_for(prefix: str) -> Any:
    """The obstore store for ``scheme://netloc`` (cached per process).

    Local files use one ``LocalStore``; other schemes are configured by obstore from the
    environment (``AWS_*`` for S3, ...), as every obstore user's code would be, with
    bounded retries (:data:`virtualizarr_fill.io.deadlines.RETRY_CONFIG`) instead of
    obstore's three minutes of them. Client options (timeouts among them) stay the
    environment's: obstore takes explicit client options instead of, not on top of,
    those it reads from the environment.
    """
    store = _STORES.get(prefix)
    if store is None:
        if prefix == "file://":
            from obstore.store import LocalStore

            store = LocalStore()
        else:
            from obstore.store import from_url

            from virtualizarr_fill.io.deadlines import RETRY_CONFIG

            store = from_url(prefix, retry_config=RETRY_CONFIG)
        _STORES[prefix] = store
    return store


def registry_for(urls: Iterable[str]) -> Any:
    """A registry resolving every URL in ``urls`` (one store per scheme and bucket/host)."""
    from obspec_utils.registry import ObjectStoreRegistry

    prefixes = dict.fromkeys(store_prefix(url) for url in urls)
    return ObjectStoreRegistry({prefix: store_for(prefix) for prefix in prefixes})


__all__ = ["registry_for", "resolve", "store_for", "store_prefix"]
