"""Running the command line in the test process, as the CLI tests do."""

from __future__ import annotations

from pathlib import Path

import pytest

from virtualizarr_fill.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """``virtualizarr-fill ARGV``: its exit code, stdout and stderr."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The error line of stderr (after any progress lines), checked to be one line and
    never an internal error or a traceback."""
    lines = [line for line in err.splitlines() if line.startswith("virtualizarr-fill: error:")]
    assert len(lines) == 1, err
    assert "internal error" not in lines[0] and "Traceback" not in err, err
    return lines[0]


def snapshot_count(repo: Path) -> int:
    """How many snapshots the repository's main branch holds."""
    from virtualizarr_fill.writers.repository import open_repository

    return len(list(open_repository(repo).ancestry(branch="main")))
