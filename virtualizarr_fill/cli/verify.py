"""``virtualizarr-fill verify``: read every value of a store back and compare it with what
the native readers (tifffile, h5py) return from the original files."""

from __future__ import annotations

import argparse
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from virtualizarr_fill.cli._destinations import open_store_group
from virtualizarr_fill.cli._errors import (
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    FileError,
    classify_error,
)
from virtualizarr_fill.cli._inputs import display, expand_inputs, registry_for
from virtualizarr_fill.cli._native import Block, hdf5_blocks, tiff_blocks
from virtualizarr_fill.cli._parse import file_error_message, make_parser
from virtualizarr_fill.cli.progress import Progress
from virtualizarr_fill.formats import AutoParser, FileFormat, detect_format

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["command_verify", "verify"]


@dataclass
class _Check:
    """Outcome of comparing one variable of one file."""

    name: str
    url: str
    values: int = 0
    mismatched: int = 0
    first: str = ""
    problem: str | None = None  # a reason the comparison could not be made

    @property
    def ok(self) -> bool:
        return self.problem is None and self.mismatched == 0


def _array_dims(array: Any) -> tuple[str, ...] | None:
    names = getattr(array.metadata, "dimension_names", None)
    if names:
        return tuple(str(n) for n in names)
    stored = array.attrs.get("_ARRAY_DIMENSIONS")
    return tuple(stored) if stored else None


def _comparable(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype.kind == "S":
        return np.char.decode(values, "utf-8", "replace")
    if values.dtype.kind == "O":
        return (
            np.vectorize(
                lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else v,
                otypes=[object],
            )(values)
            if values.size
            else values
        )
    return values


def _differences(stored: np.ndarray, native: np.ndarray) -> np.ndarray:
    """Boolean mask of differing elements (NaN equals NaN)."""
    stored, native = _comparable(stored), _comparable(native)
    different = np.asarray(stored != native)
    if stored.dtype.kind in "fc" and native.dtype.kind in "fc":
        different &= ~(np.isnan(stored) & np.isnan(native))
    return different


@dataclass(frozen=True)
class _Placement:
    """Where one file's variable lies in the stored array."""

    file_dims: tuple[str, ...]
    store_dims: tuple[str, ...]
    concat_dim: str | None
    offset: int
    new_dim_index: int | None

    def store_selection(self, selection: tuple[slice, ...]) -> tuple[Any, ...]:
        by_dim = dict(zip(self.file_dims, selection, strict=True))
        result: list[Any] = []
        for dim in self.store_dims:
            if self.new_dim_index is not None and dim == self.concat_dim:
                result.append(self.new_dim_index)
                continue
            part = by_dim[dim]
            if dim == self.concat_dim:
                part = slice(part.start + self.offset, part.stop + self.offset)
            result.append(part)
        return tuple(result)


def _compare(
    check: _Check,
    array: Any,
    placement: _Placement,
    blocks: Iterator[Block],
) -> None:
    for selection, native in blocks:
        where = placement.store_selection(selection)
        stored = np.asarray(array[where])
        native = np.asarray(native)
        check.values += native.size
        if stored.shape != native.shape:
            check.problem = f"block {where}: store shape {stored.shape}, native {native.shape}"
            return
        different = _differences(stored, native)
        count = int(np.count_nonzero(different))
        if count and not check.first:
            local = tuple(int(i) for i in np.argwhere(different)[0])
            position = [
                (w.start + i) if isinstance(w, slice) else w
                for w, i in zip(where, _expand(local, where), strict=True)
            ]
            check.first = (
                f"first at {tuple(position)}: store {_scalar(stored[local])}, "
                f"native {_scalar(native[local])}"
            )
        check.mismatched += count


def _scalar(value: Any) -> str:
    return repr(np.asarray(value).tolist())


def _expand(local: tuple[int, ...], where: tuple[Any, ...]) -> tuple[int, ...]:
    """Block indices aligned with a selection whose integer entries removed an axis."""
    values = iter(local)
    return tuple(0 if not isinstance(w, slice) else next(values) for w in where)


@dataclass
class _FileLayout:
    url: str
    file_format: FileFormat
    dataset: xr.Dataset


def _verify_layouts(urls: Sequence[str], parser: AutoParser) -> list[_FileLayout]:
    from virtualizarr import open_virtual_dataset

    layouts: list[_FileLayout] = []
    with Progress("parse", len(urls), "files") as progress, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for url in urls:
            registry = registry_for([url])
            try:
                file_format = detect_format(url, registry)
                dataset = open_virtual_dataset(
                    url, registry=registry, parser=parser, loadable_variables=[]
                )
            except Exception as error:
                raise FileError(
                    file_error_message(url, error), classify_error(error), traceback.format_exc()
                ) from None
            layouts.append(_FileLayout(url, file_format, dataset))
            progress.advance()
    return layouts


def _native_blocks(layout: _FileLayout, name: str) -> Callable[[], Iterator[Block]] | None:
    """Block reader of the native counterpart of variable ``name``, or ``None``."""
    if layout.file_format is FileFormat.TIFF:
        if name != "band_data":
            return None
        ifd = layout.dataset.attrs.get("tiff_ifd", 0)
        if not isinstance(ifd, int):
            return None
        return lambda: tiff_blocks(layout.url, ifd)
    return lambda: hdf5_blocks(layout.url, name)


def _expected_length(layouts: Sequence[_FileLayout], name: str, dim: str) -> int:
    return sum(
        int(layout.dataset.variables[name].sizes[dim])
        for layout in layouts
        if name in layout.dataset.variables and dim in layout.dataset.variables[name].dims
    )


def verify(
    group: Any, layouts: Sequence[_FileLayout], concat_dim: str | None, new_dim: bool
) -> tuple[list[_Check], list[str]]:
    """Compare every variable of every file with the store; returns checks and skipped names."""
    checks: list[_Check] = []
    unchecked: list[str] = []
    offsets: dict[str, int] = {}
    stored_names = {str(name) for name in group.array_keys()}
    tasks = sum(len(layout.dataset.variables) for layout in layouts)
    with Progress("verify", tasks, "arrays") as progress:
        for index, layout in enumerate(layouts):
            for name in (str(n) for n in layout.dataset.variables):
                progress.advance()
                variable = layout.dataset.variables[name]
                file_dims = tuple(str(d) for d in variable.dims)
                check = _Check(name=name, url=layout.url)
                if name not in stored_names:
                    check.problem = "missing from the store"
                    checks.append(check)
                    continue
                array = group[name]
                store_dims = _array_dims(array) or file_dims
                along = concat_dim is not None and concat_dim in store_dims
                if not along and index > 0:
                    continue  # not concatenated: the store holds the first file's values
                reader = _native_blocks(layout, name)
                if reader is None:
                    if index == 0:
                        unchecked.append(name)
                    continue
                offset = offsets.get(name, 0) if along and not new_dim else 0
                placement = _Placement(
                    file_dims=file_dims,
                    store_dims=store_dims,
                    concat_dim=concat_dim if along else None,
                    offset=offset,
                    new_dim_index=index if along and new_dim else None,
                )
                if along and not new_dim and concat_dim is not None:
                    offsets[name] = offset + int(variable.sizes[concat_dim])
                    expected = _expected_length(layouts, name, concat_dim)
                    actual = int(array.shape[store_dims.index(concat_dim)])
                    if actual != expected:
                        check.problem = (
                            f"store has {actual} along {concat_dim!r}, the files {expected}"
                        )
                        checks.append(check)
                        continue
                try:
                    _compare(check, array, placement, reader())
                except Exception as error:
                    check.problem = f"could not compare: {type(error).__name__}: {error}"
                checks.append(check)
    return checks, unchecked


def command_verify(args: argparse.Namespace) -> int:
    urls = expand_inputs(args.against)
    if len(urls) > 1 and not args.concat_dim:
        raise CliError("--concat-dim is needed to verify against several files", EXIT_USAGE)
    if args.new_dim and not args.concat_dim:
        raise CliError("--new-dim needs --concat-dim", EXIT_USAGE)
    group = open_store_group(args.dest, urls)
    layouts = _verify_layouts(urls, make_parser(args))
    checks, unchecked = verify(group, layouts, args.concat_dim, args.new_dim)
    bad = [c for c in checks if not c.ok]
    for check in bad:
        where = display(check.url)
        if check.problem is not None:
            print(f"UNVERIFIED {check.name} from {where}: {check.problem}")
        else:
            print(
                f"MISMATCH {check.name} from {where}: {check.mismatched} of {check.values} "
                f"values differ; {check.first}"
            )
    values = sum(c.values for c in checks)
    summary = (
        f"verified {len(checks)} array(s) from {len(layouts)} file(s), {values} values: "
        f"{len(checks) - len(bad)} matched, {len(bad)} did not"
    )
    if unchecked:
        summary += f"; not compared (no native counterpart): {', '.join(sorted(set(unchecked)))}"
    print(summary)
    return EXIT_OK if not bad else EXIT_MISMATCH
