"""Every flag and keyword the package's messages suggest exists.

The messages (every string literal of the package outside docstrings) are read with
``ast``: each ``--flag`` they name must be an option of the command-line parser, and
each ``keyword=`` a parameter of the function the message calls (``HDF5Parser(...=``)
or else of a public function of the package or of the few xarray/numpy functions the
messages refer users to. The main refusals are then met for real and their advice
followed, word for word: the command or call they suggest must succeed.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import rasterio.merge
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

import virtualizarr_fill
from virtualizarr_fill import HDF5Parser, IncompatibleArraysError, TIFFParser
from virtualizarr_fill.cli import EXIT_BAD_INPUT, EXIT_OK, main
from virtualizarr_fill.cli._main import build_parser
from virtualizarr_fill.fill import FillValueWarning, combine_fill_decisions, combine_fill_values

PACKAGE = Path(virtualizarr_fill.__file__).parent
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
_KEYWORD = re.compile(r"(?<![\w.])([a-z_][a-z0-9_]*)=(?!=)")
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\(")

#: ``name=`` in strings that describe a value rather than suggest a call, with why.
_NOT_SUGGESTIONS = {
    ("manifests/array.py", "shape"): "ManifestArray repr",
    ("manifests/array.py", "dtype"): "ManifestArray repr",
    ("manifests/array.py", "chunks"): "ManifestArray repr",
    ("tiff/file_groups.py", "page"): "a variable label, band_data[page=N]",
    ("manifests/array.py", "axis"): "np.concatenate's axis, which the message refuses",
    ("stac/open.py", "join"): "matches xarray's alignment error, not a message of ours",
    ("assemble/collecting.py", "band"): "a dimension name for xarray's .isel(band=...)",
}

#: Functions outside this package whose keywords messages suggest.
_EXTERNAL: list[Callable[..., Any]] = [
    xr.open_dataset,
    xr.Dataset.to_netcdf,
    np.concatenate,
    rasterio.merge.merge,
]


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            yield node.lineno, node.value


def _suggestions(pattern: re.Pattern[str]) -> list[tuple[str, int, str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for line, text in _strings(path):
            found.extend((module, line, name, text) for name in pattern.findall(text))
    return found


def _parameters(function: Callable[..., Any]) -> set[str]:
    target = function.__init__ if inspect.isclass(function) else function  # type: ignore[misc]
    return set(inspect.signature(target).parameters)


def _public_callables() -> dict[str, Callable[..., Any]]:
    import virtualizarr_fill.fill as fill

    named: dict[str, Callable[..., Any]] = {}
    for module in (virtualizarr_fill, fill):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value) and not (inspect.isclass(value) and issubclass(value, Exception)):
                named[name] = value
    return named


def _options(parser: argparse.ArgumentParser) -> set[str]:
    options = {o for action in parser._actions for o in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                options |= _options(sub)
    return options


# --------------------------------------------------------------------------- every message


def test_the_collector_finds_the_known_suggestions() -> None:
    """The scan sees f-string pieces and help texts (else the checks below prove little)."""
    flags = {name for _, _, name, _ in _suggestions(_FLAG)}
    keywords = {name for _, _, name, _ in _suggestions(_KEYWORD)}
    assert {"on-fill-conflict", "overwrite", "skip-bad", "hdf5-option"} <= flags
    assert {"on_fill_conflict", "on_conflict", "max_chunks", "zarr_format"} <= keywords


def test_every_suggested_flag_is_a_command_line_option() -> None:
    options = _options(build_parser())
    missing = [
        f"{module}:{line}: --{flag}"
        for module, line, flag, _ in _suggestions(_FLAG)
        if f"--{flag}" not in options
    ]
    assert not missing, missing


def test_every_suggested_keyword_is_a_parameter_of_what_the_message_names() -> None:
    public = _public_callables()
    everything = set().union(*map(_parameters, [*public.values(), *_EXTERNAL]))
    wrong = []
    for module, line, keyword, text in _suggestions(_KEYWORD):
        if (module, keyword) in _NOT_SUGGESTIONS:
            continue
        # "HDF5Parser(max_chunks=...)": a parameter of that one
        named = [public[n] for n in _CALLED.findall(text) if n in public]
        accepted = set().union(*map(_parameters, named)) if named else everything
        if keyword not in accepted:
            wrong.append(f"{module}:{line}: {keyword}= in {text!r}")
    assert not wrong, wrong


def test_parser_options_in_help_texts_are_parser_parameters() -> None:
    """``--tiff-option NAME=VALUE`` and ``--hdf5-option`` pass NAME to the parsers."""
    for flag, parser in (("--tiff-option", TIFFParser), ("--hdf5-option", HDF5Parser)):
        for _, _, _, text in _suggestions(_KEYWORD):
            if text.startswith(f"{parser.__name__} option"):
                for keyword in _KEYWORD.findall(text):
                    assert keyword in _parameters(parser), (flag, keyword)


# --------------------------------------------------------------------------- followed for real


def _write(path: Path, t0: int, fill: float) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 2001-01-01"
        time[:] = t0 + np.arange(4)
        v = ds.createVariable("v", "f4", ("time", "x"), fill_value=fill, chunksizes=(2, 3))
        v[:] = np.arange(12, dtype="f4").reshape(4, 3) + t0
    return path


@pytest.fixture
def differing_fills(tmp_path: Path) -> list[Path]:
    """Two netCDF-4 files whose ``_FillValue`` differs."""
    return [_write(tmp_path / "a.nc", 0, -999.0), _write(tmp_path / "b.nc", 4, -1.0)]


def _urls(paths: list[Path]) -> list[str]:
    return [p.resolve().as_uri() for p in paths]


REGISTRY = ObjectStoreRegistry({"file://": LocalStore()})


def _advised_keyword(message: str) -> str:
    """The ``keyword='use_first'`` a refusal advises."""
    found = re.search(r"\b([a-z_]+)='use_first'", message)
    assert found, message
    return found.group(1)


def test_series_refusal_advises_a_keyword_open_virtual_series_accepts(
    differing_fills: list[Path],
) -> None:
    urls = _urls(differing_fills)
    with pytest.raises(IncompatibleArraysError) as refused:
        virtualizarr_fill.open_virtual_series(urls, REGISTRY, HDF5Parser(), "time")
    keyword = _advised_keyword(str(refused.value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        series = virtualizarr_fill.open_virtual_series(
            urls, REGISTRY, HDF5Parser(), "time", **{keyword: "use_first"}
        )
    assert series["v"].shape == (8, 3)


def test_concat_refusal_advises_a_context_that_runs(differing_fills: list[Path]) -> None:
    datasets = [
        open_virtual_dataset(url, registry=REGISTRY, parser=HDF5Parser())
        for url in _urls(differing_fills)
    ]
    with pytest.raises(IncompatibleArraysError) as refused:
        xr.concat(datasets, dim="time", data_vars="minimal", coords="minimal", compat="override")
    advice = re.search(r"'with (virtualizarr_fill\.fill_conflicts\([^)]*\)):'", str(refused.value))
    assert advice, refused.value
    context = eval(advice.group(1), {"virtualizarr_fill": virtualizarr_fill})
    with context, warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        combined = xr.concat(
            datasets, dim="time", data_vars="minimal", coords="minimal", compat="override"
        )
    assert combined["v"].shape == (8, 3)


def test_combine_fill_values_refusal_advises_its_own_keyword() -> None:
    arguments = ([0.0, 0.0], [{"_FillValue": -1.0}, {"_FillValue": -2.0}], ["a", "b"], "f4")
    with pytest.raises(IncompatibleArraysError) as refused:
        combine_fill_values(*arguments)
    keyword = _advised_keyword(str(refused.value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FillValueWarning)
        combined = combine_fill_values(*arguments, **{keyword: "use_first"})
    assert [float(v) for v in combined.unmasked_sentinels] == [-2.0]  # the second file's
    assert keyword in _parameters(combine_fill_decisions)


def test_build_refusal_advises_a_flag_that_builds(
    differing_fills: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", *map(str, differing_fills), "--concat-dim", "time", "--out"]
    assert main([*argv, str(tmp_path / "r.icechunk")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    advice = re.search(r"(--on-fill-conflict) (use_first)", err)
    assert advice, err
    assert "on_conflict" not in err and "on_fill_conflict" not in err  # no Python keyword
    assert main([*argv, str(tmp_path / "r.icechunk"), *advice.groups()]) == EXIT_OK
    ds = virtualizarr_fill.open_icechunk(tmp_path / "r.icechunk", mask_and_scale=False)
    assert ds["v"].shape == (8, 3)
