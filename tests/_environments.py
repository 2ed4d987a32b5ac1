"""Python processes with and without virtualizarr-fill installed (test utility).

"Without" is this virtual environment's own site-packages minus virtualizarr-fill: a
folder of links to every installed distribution except this project's (its
``dist-info``, whose entry points zarr would load, and its editable-install finder), so
both environments hold exactly the same zarr, VirtualiZarr, xarray, icechunk and h5py.
The interpreter starts without its own site-packages (``-S``), adds the folder with
``site.addsitedir`` (which runs the ``.pth`` files there) and runs outside the checkout,
so ``import virtualizarr_fill`` fails there as it would where the package is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

PROJECT_ENTRIES = (
    "virtualizarr_fill",
    "__editable__.virtualizarr_fill",
    "__editable___virtualizarr_fill",
)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def site_without_project(folder: Path) -> Path:
    """A folder holding links to every entry of site-packages except this project's."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in site_packages().iterdir():
        if entry.name.startswith(PROJECT_ENTRIES) or (folder / entry.name).exists():
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


CHECKOUT = Path(__file__).resolve().parent.parent


def site_with_checkout(folder: Path) -> Path:
    """A folder like :func:`site_without_project`'s, with this checkout installed as its
    ``pyproject.toml`` files declare it (the project, and the codec distribution built from
    ``codecs/``): a ``dist-info`` each holding its entry points (what zarr discovers) and a
    ``.pth`` each putting its sources on the path. The shared environment's own install may
    declare entry points the checkout no longer does."""
    site_without_project(folder)
    for root, sources in ((CHECKOUT, CHECKOUT), (CHECKOUT / "codecs", CHECKOUT / "codecs" / "src")):
        _install_declared(folder, root / "pyproject.toml", sources)
    return folder


def _install_declared(folder: Path, pyproject: Path, sources: Path) -> None:
    project = tomllib.loads(pyproject.read_text())["project"]
    name = project["name"].replace("-", "_")
    dist_info = folder / f"{name}-{project['version']}.dist-info"
    dist_info.mkdir(exist_ok=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups["console_scripts"] = project["scripts"]
    lines = []
    for group, entries in groups.items():
        lines += [f"[{group}]", *(f"{key} = {value}" for key, value in entries.items()), ""]
    (dist_info / "entry_points.txt").write_text("\n".join(lines))
    (folder / f"{name}_checkout.pth").write_text(f"{sources}\n")


def run_python(
    code: str,
    *,
    cwd: Path,
    without_project: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter in ``cwd``; without this project installed when
    ``without_project`` is a folder made by :func:`site_without_project`."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    environment.update(env or {})
    if without_project is None:
        args = [sys.executable, "-c", code]
    else:
        prelude = f"import site; site.addsitedir({str(without_project)!r})\n"
        args = [sys.executable, "-S", "-c", prelude + code]
    return subprocess.run(
        args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def run_pytest(
    args: list[str],
    *,
    cwd: Path,
    without_project: Path | None = None,
    timeout: float = 1800,
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest args`` in ``cwd``, with or without this project installed."""
    code = f"import sys, pytest; sys.exit(pytest.main({args!r}))"
    return run_python(code, cwd=cwd, without_project=without_project, timeout=timeout)
