"""File names stored inside HDF5 files, resolved against the URL of the file holding them.

External links, external raw storage and virtual-dataset mappings name other files,
usually relative to the file itself. HDF5 resolves them against the working directory
or a prefix setting; for virtual references the only meaningful base is the linking
file's own location, so relative names are resolved against its URL (any scheme).
"""

from __future__ import annotations

import posixpath


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


__all__ = ["join_url"]
