"""VirtualiZarr's own test suite passes as well with virtualizarr-fill as without it.

The tests VirtualiZarr ships in its wheel run three times, on the same libraries:

* where virtualizarr-fill is not installed (``tests/_environments.py``): the baseline;
* where it is installed (zarr may load its codecs by entry point), as this checkout's
  ``pyproject.toml`` declares it;
* where it is installed and imported (``-p virtualizarr_fill``).

Any test that passes in the baseline must pass in the other two. Tests that fail
everywhere (network fixtures, drift between the wheel and the repository's conftest
``../shared/peer-suites/virtualizarr/`` provides) say nothing about this package.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests._environments import (
    run_pytest,
    site_packages,
    site_with_checkout,
    site_without_project,
)

PEER_SUITE = Path(__file__).resolve().parents[3] / "shared" / "peer-suites" / "virtualizarr"

#: What ../shared/peer-suites/virtualizarr/README.md says to run.
TEST_PATHS = [
    "vzt_tests/test_manifests",
    "vzt_tests/test_xarray.py",
    "vzt_tests/test_writers",
    "vzt_tests/test_parsers/test_hdf",
    "vzt_tests/test_integration.py",
    "vzt_tests/test_codecs.py",
    "vzt_tests/test_parsers/test_tiff.py",
]
ARGS = ["-p", "no:cacheprovider", "-q", "-rA", "-m", "not network and not minio", *TEST_PATHS]

_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")


def _suite_dir(tmp_path: Path) -> Path:
    if not (PEER_SUITE / "conftest.py").is_file():
        message = f"VirtualiZarr's peer suite not found at {PEER_SUITE}"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message)
        pytest.skip(message)
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(PEER_SUITE / "conftest.py", suite / "conftest.py")
    shutil.copytree(site_packages() / "virtualizarr" / "tests", suite / "vzt_tests")
    return suite


def _passed(output: str) -> set[str]:
    passed = set()
    for line in output.splitlines():
        match = _OUTCOME.match(line)
        if match and match.group(1) in {"PASSED", "XPASS"}:
            passed.add(match.group(2))
    return passed


@pytest.mark.slow  # over 10 s on two cores: CI runs it, the default local run does not
def test_virtualizarr_suite_passes_with_virtualizarr_fill(tmp_path: Path) -> None:
    suite = _suite_dir(tmp_path)
    without = site_without_project(tmp_path / "site")
    # This checkout, not the shared environment's install (which may be of another).
    ours = site_with_checkout(tmp_path / "site-checkout")
    runs = {
        "not installed": run_pytest(ARGS, cwd=suite, without_project=without),
        "installed": run_pytest(ARGS, cwd=suite, without_project=ours),
        "imported": run_pytest(["-p", "virtualizarr_fill", *ARGS], cwd=suite, without_project=ours),
    }
    passed = {name: _passed(run.stdout) for name, run in runs.items()}
    baseline = passed["not installed"]
    assert len(baseline) > 300, runs["not installed"].stdout[-3000:]
    for name in ("installed", "imported"):
        lost = sorted(baseline - passed[name])
        assert not lost, f"{len(lost)} VirtualiZarr tests pass only without it ({name}): {lost}"
