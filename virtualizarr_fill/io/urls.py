"""File URLs: the one normaliser both parsers apply to the URL they are given, and file
names stored inside HDF5 files resolved against the URL of the file holding them.

:func:`normalize_url` makes every URL the parsers open, and write into manifests, the
same for a TIFF and an HDF5 file: a bare absolute path becomes a ``file://`` URL (as
VirtualiZarr makes it), and a ``file://`` URL's percent-encoded path is decoded.

External links, external raw storage and virtual-dataset mappings name other files,
usually relative to the file itself. HDF5 resolves them against the working directory
or a prefix setting; for virtual references the only meaningful base is the linking
file's own location, so relative names are resolved against its URL (any scheme).
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import unquote, urlparse


def normalize_url(url: str) -> str:
    """``url`` as the parsers open it and write it into manifests.

    A bare absolute path becomes a ``file://`` URL; a relative one is refused (as
    VirtualiZarr refuses it: a manifest holds absolute URLs). A ``file://`` URL's
    percent-encoded path is decoded: ``Path.as_uri()`` (which VirtualiZarr applies to
    bare paths) encodes characters such as ``+`` as ``%2B``, but local stores look paths
    up literally. A raw path that exists as written (a directory named ``100%cotton``)
    is kept. Other URLs are unchanged.
    """
    if not urlparse(url).scheme:
        if not os.path.isabs(url):
            raise ValueError(
                f"{url}: a relative path; the parsers take an absolute path or a URL "
                "(open_virtual_dataset makes a relative path absolute)"
            )
        url = "file://" + os.path.normpath(url)
    if url.startswith("file://") and "%" in url:
        raw = url[len("file://") :]
        if not os.path.exists(raw):
            return "file://" + unquote(raw)
    return url


def join_url(base_url: str, name: str) -> str:
    """The URL of ``name`` (absolute path, URL, or path relative to ``base_url``'s directory)."""
    if "://" in name:
        return name
    if name.startswith("/"):
        return "file://" + posixpath.normpath(name)
    scheme, _, rest = base_url.partition("://")
    root, _, path = rest.partition("/")
    directory = posixpath.dirname("/" + path)
    return f"{scheme}://{root}" + posixpath.normpath(posixpath.join(directory, name))


__all__ = ["join_url", "normalize_url"]
