"""Input files: paths, glob patterns and URLs expanded into URLs, and the object stores
that read them."""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from virtualizarr_fill.cli._errors import EXIT_IO, EXIT_USAGE, CliError
from virtualizarr_fill.io.registries import store_for, store_prefix

__all__ = [
    "display",
    "expand_inputs",
    "file_url",
    "is_url",
    "local_path",
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


def _matches(parts: list[str], patterns: list[str]) -> bool:
    """Whether path components match pattern components (``**``: any number of them)."""
    if not patterns:
        return not parts
    if patterns[0] == "**":
        return any(_matches(parts[k:], patterns[1:]) for k in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], patterns[0])
        and _matches(parts[1:], patterns[1:])
    )


def _recursive_glob(pattern: str) -> list[str]:
    """The files a ``**`` pattern matches, each real directory visited once.

    :func:`glob.glob` follows directory symlinks without remembering where it has been:
    a symlink back to a parent makes it recurse until the path is too long, and two
    such loops make that exponential. This walk follows symlinks (a linked directory
    is searched) but enters each directory, by device and inode, only once; hidden
    names are skipped, as glob skips them.
    """
    components = pattern.split(os.sep)
    first = next(i for i, c in enumerate(components) if _has_glob(c))
    root = os.sep.join(components[:first]) or ("." if first == 0 else os.sep)
    patterns = components[first:]
    seen: set[tuple[int, int]] = set()
    found: list[str] = []
    for directory, subdirectories, names in os.walk(root, followlinks=True):
        status = os.stat(directory)
        if (status.st_dev, status.st_ino) in seen:
            subdirectories[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]
        relative = os.path.relpath(directory, root)
        prefix = [] if relative == "." else relative.split(os.sep)
        for name in names:
            if not name.startswith(".") and _matches([*prefix, name], patterns):
                found.append(os.path.join(directory, name))
    return sorted(found)


def _glob_files(pattern: str) -> list[str]:
    if "**" in pattern:
        return _recursive_glob(pattern)
    return sorted(p for p in glob.glob(pattern) if os.path.isfile(p))


def _local_inputs(item: str) -> list[str]:
    # A name that exists is that file, even when it reads as a pattern (a?b.tif, a[1].tif).
    if _has_glob(item) and not os.path.lexists(os.path.expanduser(item)):
        files = _glob_files(os.path.expanduser(item))
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
    store = store_for(prefix)
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
