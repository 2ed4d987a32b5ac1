"""The documentation cannot drift from the code.

* Every ```python and ```bash block of the getting-started and user-guide pages (the
  pages under those headings of ``mkdocs.yml``'s ``nav``) runs, page by page: the python
  blocks in one namespace per page, the bash blocks in a shell, all in a fresh
  directory where the page's first block writes the sample files the rest use. The S3
  page runs against an S3 server on loopback (the AWS environment variables point at
  it), the dask page against a ``LocalCluster`` on loopback. A block marked
  ``{.no-run}`` is skipped: kept for what cannot run here (installing packages, a real
  cluster's address).
* Every public name has an entry in the API reference and a numpydoc docstring that
  documents its parameters (the check ``mkdocs build --strict`` also runs).
* Every option of every ``virtualizarr-fill`` command's ``--help`` is in docs/cli.md.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TUTORIAL_SECTIONS = ("Getting started", "User guide")
S3_BUCKET = "my-bucket"  # the bucket the S3 page uses; a user's exists already

_FENCE = re.compile(
    r"^```(?P<lang>[\w-]+)(?P<attrs>[^\n]*)\n(?P<code>.*?)^```\s*$", re.MULTILINE | re.DOTALL
)


def _nav_pages(entries: Any) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def tutorial_pages() -> list[str]:
    """The pages under the getting-started and user-guide headings of the site's nav."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = []
    for entry in nav:
        for title, value in entry.items():
            if title in TUTORIAL_SECTIONS:
                pages += _nav_pages(value)
    return pages


class Block:
    """A fenced code block of a page."""

    def __init__(self, page: str, number: int, match: re.Match[str], text: str) -> None:
        self.page = page
        self.number = number
        self.lang = match["lang"]
        self.runs = ".no-run" not in match["attrs"]
        self.code = match["code"]
        self.line = text.count("\n", 0, match.start()) + 2  # first line of code

    @property
    def where(self) -> str:
        return f"docs/{self.page}, block {self.number} (line {self.line})"


def page_blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text()
    blocks = [m for m in _FENCE.finditer(text) if m["lang"] in ("python", "bash")]
    return [Block(page, i, m, text) for i, m in enumerate(blocks, start=1)]


def _s3_environment(request: pytest.FixtureRequest) -> dict[str, str]:
    server = request.getfixturevalue("s3_server")
    if S3_BUCKET not in {b["Name"] for b in server.client().list_buckets()["Buckets"]}:
        server.create_bucket(S3_BUCKET)
    return server.aws_environment()


def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    code = compile(block.code, f"<{block.where}>", "exec")
    try:
        exec(code, namespace)
    except BaseException as error:
        detail = "".join(traceback.format_exception(error)[-6:])
        pytest.fail(f"{block.where} failed:\n{detail}", pytrace=False)


def _run_bash(block: Block, cwd: Path) -> None:
    # The virtualizarr-fill command of this interpreter's environment comes first.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    environment = {**os.environ, "PATH": path}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{block.where} exited with {result.returncode}:\n{block.code}\n"
            f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}",
            pytrace=False,
        )


@pytest.mark.slow  # over 10 s on two cores: CI runs it, the default local run does not
@pytest.mark.parametrize("page", tutorial_pages())
def test_tutorial_page_runs(
    page: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    blocks = [b for b in page_blocks(page) if b.runs]
    assert blocks, f"docs/{page} has no code block to run"
    if "s3://" in (DOCS / page).read_text():
        for name, value in _s3_environment(request).items():
            monkeypatch.setenv(name, value)
    # netCDF4 (imported by other test modules) points HDF5_PLUGIN_PATH at filter plugins
    # built against its own libhdf5; dask workers must not inherit it.
    monkeypatch.delenv("HDF5_PLUGIN_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        for block in blocks:
            if block.lang == "python":
                _run_python(block, namespace)
            else:
                _run_bash(block, tmp_path)
    finally:
        # A page that failed half-way leaves its dask client and cluster open.
        for value in namespace.values():
            if type(value).__name__ in ("Client", "LocalCluster"):
                value.close()


def test_skipped_blocks_are_few() -> None:
    """``{.no-run}`` is for what cannot run here, not for examples that fail."""
    skipped = [b.where for page in tutorial_pages() for b in page_blocks(page) if not b.runs]
    assert len(skipped) <= 4, skipped


# --------------------------------------------------------------------------- API reference


def _docs_api() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_api", ROOT / "scripts" / "docs_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_is_in_the_api_reference() -> None:
    docs_api = _docs_api()
    names = docs_api.public_names()
    assert "virtualizarr_fill.TIFFParser" in names
    assert "virtualizarr_fill.formats.AutoParser" in names
    assert "virtualizarr_fill.codecs.tiff_predictor.TiffPredictorCodec" in names
    assert "virtualizarr_fill.errors.StoreReadError" in names
    problems = docs_api.check_api()
    assert not problems, "\n".join(map(str, problems))


def test_the_api_check_finds_a_missing_entry_and_parameter(tmp_path: Path) -> None:
    """The check fails where it should: an API page left out, a parameter undocumented."""
    docs_api = _docs_api()
    api = tmp_path / "api"
    api.mkdir()
    for page in (DOCS / "api").glob("*.md"):
        text = page.read_text().replace("::: virtualizarr_fill.TIFFParser\n", "")
        (api / page.name).write_text(text)
    problems = [str(p) for p in docs_api.check_api(api)]
    assert problems == [
        "virtualizarr_fill.TIFFParser: no '::: virtualizarr_fill.TIFFParser' entry on a page "
        "under docs/api/"
    ]

    (tmp_path / "sample_module.py").write_text(
        'def documented_in_part(first, second=2):\n'
        '    """A function.\n\n    Parameters\n    ----------\n    first\n        Documented.\n'
        '    """\n'
    )
    module = docs_api.griffe.load("sample_module", search_paths=[str(tmp_path)])
    assert docs_api.undocumented_parameters(module["documented_in_part"]) == ["second"]


def test_sphinx_roles_become_cross_references() -> None:
    docs_api = _docs_api()
    text = "See :class:`~virtualizarr_fill.errors.FillValueError` and :mod:`.series`::\n\n    x\n"
    assert docs_api.markdown_docstring(text) == (
        'See <autoref identifier="virtualizarr_fill.errors.FillValueError" optional>'
        "<code>FillValueError</code></autoref> and "
        '<autoref identifier="series" optional><code>series</code></autoref>:\n\n    x\n'
    )


# --------------------------------------------------------------------------- CLI reference


@pytest.mark.parametrize("command", ["inspect", "build", "verify"])
def test_cli_reference_has_every_option(command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "virtualizarr_fill.cli", command, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout)) - {"--help"}
    assert options
    reference = (DOCS / "cli.md").read_text()
    missing = sorted(o for o in options if o not in reference)
    assert not missing, f"docs/cli.md does not mention {missing} of '{command} --help'"
