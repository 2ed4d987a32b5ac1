"""The README's demo command runs the real job and it succeeds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def test_demo_reads_back_what_native_readers_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("virtualizarr_fill_demo", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert module.main(tmp_path / "out") == 0
    out = capsys.readouterr().out
    assert "4/4 comparisons equal the native readers" in out
    assert "rectilinear grid, codecs ['bytes', 'virtualizarr_fill.truncate']" in out
    assert (tmp_path / "out" / "icechunk-band_data").is_dir()
