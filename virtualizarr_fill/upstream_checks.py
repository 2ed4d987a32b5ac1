"""What virtualizarr-fill knows of the releases of zarr, VirtualiZarr, xarray and Icechunk
it relies on, for :mod:`virtualizarr_fill.upstream` (the door to their internals): the
newest releases tested, a presence check asked once per feature and process, the
:class:`~virtualizarr_fill.errors.UpstreamFeatureError` of a missing feature, and a warning
once per process when an installed zarr or VirtualiZarr is newer than those tested.
Nothing here touches an internal.
"""

from __future__ import annotations

import importlib.metadata
import threading
import warnings
from collections.abc import Callable

from packaging.version import Version

from virtualizarr_fill.errors import UntestedVersionWarning, UpstreamFeatureError

#: Newest releases the adaptations were tested with (CI runs them and the oldest
#: supported ones; ``pyproject.toml`` states the lower bounds).
NEWEST_TESTED = {
    "virtualizarr": Version("2.8.0"),
    "zarr": Version("3.4.2"),
    "xarray": Version("2026.9.0"),
    "icechunk": Version("2.3.0"),
}


def missing_feature(package: str, feature: str, purpose: str) -> UpstreamFeatureError:
    """The error for ``package``'s missing ``feature`` (what it is used for: ``purpose``)."""
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    tested = NEWEST_TESTED.get(package)
    return UpstreamFeatureError(
        f"{package} {version} has no {feature}, which virtualizarr-fill uses {purpose}; "
        f"install a {package} release that has it" + (f" (tested up to {tested})" if tested else "")
    )


_checked: dict[str, bool] = {}


def has_feature(feature: str, probe: Callable[[], object]) -> bool:
    """Whether ``probe()`` is true (an exception counts as false), asked once per
    ``feature`` and process."""
    found = _checked.get(feature)
    if found is None:
        try:
            found = bool(probe())
        except Exception:
            found = False
        _checked[feature] = found
    return found


def clear_feature_checks() -> None:
    """Forget every answer of :func:`has_feature` (for tests that change an upstream)."""
    _checked.clear()



_warned = False
_warn_lock = threading.Lock()


def warn_if_untested() -> None:
    """Warn once per process if zarr or VirtualiZarr is newer than the newest release
    the adaptations were tested with (they may still work: nothing is refused)."""
    global _warned
    if _warned:
        return
    with _warn_lock:
        if _warned:
            return
        _warned = True
        import virtualizarr
        import zarr

        for name, found in (("virtualizarr", virtualizarr.__version__), ("zarr", zarr.__version__)):
            version = Version(Version(found).base_version)
            newest = NEWEST_TESTED[name]
            if (version.major, version.minor) > (newest.major, newest.minor):
                warnings.warn(
                    f"virtualizarr-fill was tested with {name} up to {newest}; found {found}. "
                    "It adapts a few of its internals (virtualizarr_fill.upstream): "
                    "if something fails, please report it with this version.",
                    UntestedVersionWarning,
                    stacklevel=3,
                )
