"""Input files: paths, glob patterns and URLs expanded into URLs, and the object stores
that read them."""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from virtualizarr_fill.cli._errors import EXIT_IO, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from obspec_utils.registry import ObjectStoreRegistry

__all__ = [
    "display",
    "expand_inputs",
    "file_url",
    "is_url",
    "local_path",
    "registry_for",
    "store_prefix",
    "user_path",
]

_GLOB_CHARS = "*?["


def is_url(text: str) -> bool:
    """Whether a command-line argument is a URL rather than a local path."""
    return "://" in text


def _has_glob(text: str) -> bool:
    return any(c in text for c in _GLOB_CHARS)


#: Characters a file URL cannot carry in a path: a URL parser reads what follows ``?``
#: and ``#`` as a query or a fragment, and ``%`` as the start of an escape (Icechunk
#: matches its virtual chunk containers on the decoded URL).
_URL_RESERVED = "#?%"


def file_url(path: Path) -> str:
    """The ``file://`` URL of an absolute path, written raw (``file:///data/a+b/x.tif``).

    Not :meth:`pathlib.Path.as_uri`: its percent-encoding (``%2B`` for ``+``, ``%20`` for
    a space) is not decoded by obstore's local store nor matched by Icechunk's virtual
    chunk containers, which take the URL's path as the file's path.
    """
    text = str(path)
    bad = [c for c in _URL_RESERVED if c in text]
    if bad:
        raise CliError(
            f"{text}: a path containing {' or '.join(map(repr, bad))} cannot be referenced "
            "by URL; rename the file or its directory",
            EXIT_USAGE,
        )
    return "file://" + text


def _file_url_path(item: str) -> str:
    """The path a ``file://`` URL given on the command line names (percent-decoded)."""
    parts = urlsplit(item)
    if parts.netloc not in ("", "localhost"):
        raise CliError(
            f"{item}: a file URL names an absolute path after three slashes "
            f"(file:///{parts.netloc}{parts.path})",
            EXIT_USAGE,
        )
    if parts.query or parts.fragment:
        raise CliError(f"{item}: a file URL cannot have a query or a fragment", EXIT_USAGE)
    return unquote(parts.path)


def _local_inputs(item: str) -> list[str]:
    if _has_glob(item):
        matches = sorted(p for p in glob.glob(os.path.expanduser(item), recursive=True))
        files = [p for p in matches if os.path.isfile(p)]
        if not files:
            raise CliError(f"no files match {item!r}", EXIT_USAGE)
        return [file_url(Path(p).resolve()) for p in files]
    path = Path(item).expanduser()
    if path.is_dir():
        raise CliError(
            f"{item}: is a directory; pass the files or a pattern such as '{item}/*.tif'",
            EXIT_USAGE,
        )
    if not path.exists():
        raise CliError(f"{item}: no such file", EXIT_IO)
    return [file_url(path.resolve())]


def _remote_inputs(item: str) -> list[str]:
    if urlsplit(item).scheme == "file":
        return _local_inputs(_file_url_path(item))
    if not _has_glob(item):
        return [item]
    import obstore

    prefix = store_prefix(item)
    pattern = item[len(prefix) :].lstrip("/")
    literal = pattern[: min(pattern.index(c) for c in _GLOB_CHARS if c in pattern)]
    listing_prefix = literal.rsplit("/", 1)[0] + "/" if "/" in literal else ""
    store = _store_for(prefix)
    paths: list[str] = []
    try:
        for batch in obstore.list(store, prefix=listing_prefix or None):
            paths.extend(str(entry["path"]) for entry in batch)
    except Exception as error:
        raise CliError(f"listing {prefix}/{listing_prefix} failed: {error}", EXIT_IO) from None
    matches = sorted(p for p in paths if fnmatch.fnmatchcase(p, pattern))
    if not matches:
        raise CliError(f"no objects match {item!r}", EXIT_USAGE)
    return [f"{prefix}/{p}" for p in matches]


def expand_inputs(items: Iterable[str]) -> list[str]:
    """URLs of the files named by paths, glob patterns and URLs, in order, without repeats.

    Local paths become ``file://`` URLs; patterns expand in sorted order (``**`` recurses).
    """
    urls: list[str] = []
    for item in items:
        urls.extend(_remote_inputs(item) if is_url(item) else _local_inputs(item))
    return list(dict.fromkeys(urls))


def local_path(url: str) -> Path | None:
    """The local path of a ``file://`` URL as :func:`file_url` writes it (``None`` for
    other schemes)."""
    if not url.startswith("file://"):
        return None
    return Path(url.removeprefix("file://"))


def user_path(text: str) -> Path | None:
    """The local path a command-line argument names: a path (``~`` expanded) or a
    ``file://`` URL; ``None`` for other URLs."""
    if not is_url(text):
        return Path(text).expanduser()
    return Path(_file_url_path(text)) if urlsplit(text).scheme == "file" else None


def display(url: str) -> str:
    """How messages name a file: its local path, else its URL."""
    path = local_path(url)
    return str(path) if path is not None else url


# --------------------------------------------------------------------------- object stores


def store_prefix(url: str) -> str:
    """``scheme://netloc`` of a URL: the key of its store in a registry."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


_STORES: dict[str, Any] = {}


def _store_for(prefix: str) -> Any:
    """The obstore store for ``scheme://netloc`` (cached per process).

    Local files use one ``LocalStore``; other schemes are configured by obstore from the
    environment (``AWS_*`` for S3, ...), as every obstore user's code would be, with
    bounded retries (:data:`virtualizarr_fill.deadlines.RETRY_CONFIG`) instead of
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

            from virtualizarr_fill.deadlines import RETRY_CONFIG

            store = from_url(prefix, retry_config=RETRY_CONFIG)
        _STORES[prefix] = store
    return store


def registry_for(urls: Iterable[str]) -> ObjectStoreRegistry:
    """A registry resolving every URL in ``urls`` (one store per scheme and bucket/host)."""
    from obspec_utils.registry import ObjectStoreRegistry

    prefixes = dict.fromkeys(store_prefix(url) for url in urls)
    return ObjectStoreRegistry({prefix: _store_for(prefix) for prefix in prefixes})
