"""``virtualizarr-fill inspect``: how each file becomes virtual arrays (chunk grids,
codecs, edge chunks, padding and fill values), as a table or JSON."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from virtualizarr_fill.cli._errors import EXIT_OK, CliError
from virtualizarr_fill.cli._inputs import display, expand_inputs
from virtualizarr_fill.cli._parse import describe_failure, make_parser, recording, warning_texts
from virtualizarr_fill.errors import IncompatibleArraysError
from virtualizarr_fill.formats import detect_format
from virtualizarr_fill.io.registries import registry_for
from virtualizarr_fill.report import ParseReport

__all__ = [
    "abbreviate_edges",
    "command_inspect",
    "describe_array",
    "inspect_file",
    "render_inspection",
]


def _codec_name(codec: dict[str, Any]) -> str:
    """A codec's name; ``bytes(big)`` for big-endian data (the byte order matters)."""
    name = str(codec.get("name"))
    if name == "bytes" and (codec.get("configuration") or {}).get("endian") == "big":
        return "bytes(big)"
    return name


def _codec_label(codec: dict[str, Any]) -> str:
    """A codec's name with its settings, when they are short enough to read."""
    name = str(codec.get("name"))
    config = codec.get("configuration") or {}
    if name == "bytes":
        return _codec_name(codec)
    shown = {k: v for k, v in config.items() if v is not None}
    if not shown:
        return name
    text = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in shown.items())
    return f"{name}({text})" if len(text) <= 40 else name


def _runs(edges: Sequence[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for edge in edges:
        if runs and runs[-1][0] == edge:
            runs[-1] = (edge, runs[-1][1] + 1)
        else:
            runs.append((edge, 1))
    return runs


def abbreviate_edges(edges: Sequence[int], max_runs: int = 6) -> str:
    """Chunk edges as Python-style runs, e.g. ``[12]*12+[6]``; long lists elided."""
    runs = _runs(edges)
    parts = [f"[{edge}]*{count}" if count > 1 else f"[{edge}]" for edge, count in runs]
    if len(parts) > max_runs:
        parts = [*parts[:3], f"...({len(edges)} chunks)...", *parts[-2:]]
    return "+".join(parts)


def _grid_edges(grid: Any, shape: Sequence[int]) -> list[tuple[int, ...] | int]:
    """Per axis: an int (regular step) or the tuple of explicit edges."""
    from zarr.core.metadata.v3 import RegularChunkGridMetadata

    if isinstance(grid, RegularChunkGridMetadata):
        return list(grid.chunk_shape)
    return [
        tuple(int(e) for e in spec) if isinstance(spec, tuple) else int(spec)
        for spec in grid.chunk_shapes
    ]


def _edge_findings(
    shape: Sequence[int], dims: Sequence[str], axes: Sequence[tuple[int, ...] | int], handling: str
) -> list[dict[str, Any]]:
    """Chunks whose stored size differs from their logical size, per axis, and who trims them."""
    findings: list[dict[str, Any]] = []
    for axis, (extent, spec) in enumerate(zip(shape, axes, strict=True)):
        if extent == 0:
            continue
        edges = [spec] * math.ceil(extent / spec) if isinstance(spec, int) else list(spec)
        covered = sum(edges)
        full = max(edges)
        if covered > extent:
            findings.append(
                {
                    "axis": axis,
                    "dim": dims[axis],
                    "kind": "overhanging last chunk",
                    "logical": edges[-1] - (covered - extent),
                    "stored": edges[-1],
                    "count": 1,
                    "handling": "regular grid (zarr trims the boundary chunk)",
                }
            )
        short = [i for i, e in enumerate(edges) if e < full]
        if short:
            sizes = sorted({edges[i] for i in short})
            findings.append(
                {
                    "axis": axis,
                    "dim": dims[axis],
                    "kind": "short chunks",
                    "logical": sizes,
                    "stored": full,
                    "count": len(short),
                    "handling": (
                        f"{handling} codec (trims a chunk stored padded, passes one stored short)"
                        if handling != "none"
                        else "stored short (read as they are)"
                    ),
                }
            )
    return findings


def _finding_text(finding: dict[str, Any]) -> str:
    if finding["kind"] == "overhanging last chunk":
        return (
            f"{finding['dim']}: last chunk {finding['logical']} of {finding['stored']} "
            f"stored -> {finding['handling']}"
        )
    sizes = "/".join(str(s) for s in finding["logical"])
    return (
        f"{finding['dim']}: {finding['count']} short chunk(s) of {sizes} (full {finding['stored']})"
        f" -> {finding['handling']}"
    )


def _json_value(value: Any) -> Any:
    """``value`` as JSON can hold it. Also ``json.dump``'s ``default``, which must never return
    its argument unchanged (json then reports a circular reference)."""
    if isinstance(value, np.datetime64 | np.timedelta64):
        # ISO 8601 in the array's own unit (``NaT`` stays ``NaT``); ``.item()`` would give a
        # datetime object, or an int for units finer than microseconds.
        return str(value)
    if isinstance(value, np.ndarray):
        return [_json_value(item) for item in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, complex):
        return [_json_value(value.real), _json_value(value.imag)]
    if value is None or isinstance(value, str | int | float | list | dict):
        return value
    return str(value)


def _recorded_notes(report: ParseReport, path: str) -> tuple[list[str], list[str]]:
    """Padding and fill notes the parser recorded for the array at ``path`` (``group/name``);
    arrays recorded per page (``name[page=N]``) contribute all their notes. The report
    covers one parsed file, so names suffice."""
    padding: list[str] = []
    fill: list[str] = []
    for recorded in report.arrays:
        name = recorded.name.strip("/")
        if name == path or name.startswith(path + "["):
            padding.extend(recorded.padding_notes)
            fill.extend(recorded.fill_notes)
    return list(dict.fromkeys(padding)), list(dict.fromkeys(fill))


def _fill_attributes(attributes: dict[str, Any], dtype: Any) -> dict[str, Any]:
    """``_FillValue`` (decoded from its JSON encoding) and ``missing_value``, when present."""
    from virtualizarr_fill.fill import decode_fill_value

    shown: dict[str, Any] = {}
    if "_FillValue" in attributes:
        try:
            shown["_FillValue"] = _json_value(decode_fill_value(attributes["_FillValue"], dtype))
        except (ValueError, TypeError):
            shown["_FillValue"] = _json_value(attributes["_FillValue"])
    if "missing_value" in attributes:
        shown["missing_value"] = _json_value(attributes["missing_value"])
    return shown


def describe_array(
    name: str, variable: Any, report: ParseReport, group: str = "/"
) -> dict[str, Any]:
    """What ``inspect`` shows of one virtual array in ``group`` (JSON-ready)."""
    from virtualizarr.manifests.manifest import INLINED_CHUNK_PATH

    from virtualizarr_fill.zarr_model.edge_codecs import edge_handling_of

    array = variable.data
    metadata = array.metadata
    shape = [int(n) for n in array.shape]
    dims = [str(d) for d in variable.dims]
    codecs = [c if isinstance(c, dict) else c.to_dict() for c in metadata.codecs]
    axes = _grid_edges(metadata.chunk_grid, shape)
    handling = edge_handling_of(metadata.codecs).name.lower()
    manifest = array.manifest
    total = len(manifest)
    referenced = sum(1 for _ in manifest.iter_nonempty_paths())
    first = manifest.get_entry((0,) * manifest.ndim_chunk_grid) if total else None
    inline = bool(first and first["path"] == INLINED_CHUNK_PATH)
    padding_notes, fill_notes = _recorded_notes(report, f"{group.strip('/')}/{name}".lstrip("/"))
    regular = all(isinstance(a, int) for a in axes)
    attributes = dict(metadata.attributes)
    return {
        "name": name,
        "dims": dims,
        "shape": shape,
        "dtype": str(np.dtype(metadata.data_type.to_native_dtype())),
        "chunk_grid": {
            "kind": "regular" if regular else "rectilinear",
            "edges": [list(a) if isinstance(a, tuple) else a for a in axes],
        },
        "codecs": codecs,
        "chunks": {
            "total": total,
            "referenced": referenced,
            "inline": total - referenced if inline else 0,
            "missing": 0 if inline else total - referenced,
        },
        "edge_handling": handling,
        "edge_chunks": _edge_findings(shape, dims, axes, handling),
        "padding_notes": padding_notes,
        "fill_value": _json_value(metadata.fill_value),
        "fill_attributes": _fill_attributes(attributes, metadata.data_type.to_native_dtype()),
        "fill_notes": fill_notes,
    }


_NOT_ALIGNED = re.compile(r"group '([^']+)' is not aligned with its parents")


def _group_sizes(group: Any) -> dict[str, int]:
    """The dimension lengths of a manifest group's own arrays."""
    sizes: dict[str, int] = {}
    for array in group.arrays.values():
        names = array.metadata.dimension_names or ()
        for dim, length in zip(names, array.shape, strict=False):
            sizes[str(dim)] = int(length)
    return sizes


def _misalignment(root: Any, path: str) -> str:
    """Why the group at ``path`` does not align with its parents: a dimension whose length
    differs from an ancestor's, else the coordinates it inherits."""
    names = [name for name in path.strip("/").split("/") if name]
    chain = [("/", root)]
    for depth, name in enumerate(names):
        chain.append(("/" + "/".join(names[: depth + 1]), chain[-1][1].groups[name]))
    own = _group_sizes(chain[-1][1])
    for ancestor_path, ancestor in reversed(chain[:-1]):
        for dim, length in _group_sizes(ancestor).items():
            if own.get(dim, length) != length:
                return (
                    f"dimension {dim!r} has length {own[dim]} there and {length} "
                    f"in {ancestor_path!r}"
                )
    return "its coordinates differ from those it inherits"


def _virtual_tree(store: Any, url: str) -> Any:
    """The file's virtual DataTree. A group xarray cannot align with its parents
    (``xr.open_datatree`` refuses such a file too) is one line naming the group and why."""
    try:
        # Describing arrays needs no decoded times (nor cftime for model calendars).
        return store.to_virtual_datatree(loadable_variables=[], decode_times=False)
    except ValueError as error:
        found = _NOT_ALIGNED.search(str(error))
        if found is None:
            raise
        path = found.group(1)
        raise IncompatibleArraysError(
            f"{display(url)}: group {path!r} is not aligned with its parents "
            f"({_misalignment(store._group, path)}), so xarray.open_datatree refuses this "
            f"file too; inspect the group alone with --hdf5-option group={path}"
        ) from None


def inspect_file(url: str, parser: Any) -> dict[str, Any]:
    """Parse one file and describe every array of every group (JSON-ready)."""
    started = time.perf_counter()
    entry: dict[str, Any] = {
        "url": url,
        "format": None,
        "groups": [],
        "refusals": [],
        "warnings": [],
    }
    registry = registry_for([url])
    with recording() as (report, caught):
        entry["format"] = detect_format(url, registry).value
        store = parser(url, registry)
        tree = _virtual_tree(store, url)
        for node in tree.subtree:
            dataset = node.to_dataset(inherit=False)
            arrays = [
                describe_array(str(name), dataset.variables[name], report, node.path)
                for name in dataset.variables
            ]
            if arrays or node.is_root:
                entry["groups"].append({"path": node.path, "arrays": arrays})
    entry["refusals"] = [{"name": r.name, "reason": r.reason} for r in report.refusals]
    entry["warnings"] = list(warning_texts(caught, report))
    entry["seconds"] = round(time.perf_counter() - started, 4)
    return entry


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def _grid_text(array: dict[str, Any]) -> str:
    grid = array["chunk_grid"]
    if array["chunks"]["inline"]:
        return "inline"
    if grid["kind"] == "regular":
        return "regular " + "x".join(str(e) for e in grid["edges"])
    axes = [str(e) if isinstance(e, int) else abbreviate_edges(e) for e in grid["edges"]]
    return "rectilinear " + " | ".join(axes)


def render_inspection(entry: dict[str, Any]) -> list[str]:
    """The human-readable table of one inspected file."""
    lines = [f"{display(entry['url'])}  [{entry['format'].upper()}]"]
    if entry.get("error"):
        return [*lines, f"  error: {entry['error']}"]
    for group in entry["groups"]:
        if group["path"] != "/":
            lines.append(f" group {group['path']}")
        if not group["arrays"]:
            continue
        rows = [["ARRAY", "DIMS", "SHAPE", "DTYPE", "CHUNK GRID", "CODECS", "CHUNKS"]]
        for array in group["arrays"]:
            chunks = array["chunks"]
            chunk_text = f"{chunks['referenced']}/{chunks['total']}"
            if chunks["missing"]:
                chunk_text += f" ({chunks['missing']} missing)"
            rows.append(
                [
                    array["name"],
                    ",".join(array["dims"]) or "-",
                    "x".join(str(n) for n in array["shape"]) or "scalar",
                    array["dtype"],
                    _grid_text(array),
                    " > ".join(_codec_name(c) for c in array["codecs"]),
                    "inline" if chunks["inline"] else chunk_text,
                ]
            )
        lines.extend(_table(rows))
        for array in group["arrays"]:
            details = []
            labels = [_codec_label(c) for c in array["codecs"]]
            if labels != [_codec_name(c) for c in array["codecs"]]:
                details.append(f"codecs: {' > '.join(labels)}")
            details += [f"edges: {_finding_text(f)}" for f in array["edge_chunks"]]
            details += [f"padding: {note}" for note in array["padding_notes"]]
            fill = f"fill_value {array['fill_value']}"
            for key, value in array["fill_attributes"].items():
                fill += f"; {key} {value}"
            if not array["chunks"]["inline"]:
                details.append(f"fill: {fill}")
            details += [f"fill: {note}" for note in array["fill_notes"]]
            if details:
                lines.append(f"  {array['name']}:")
                lines.extend(f"    {d}" for d in details)
    for refusal in entry["refusals"]:
        lines.append(f"  refused {refusal['name']}: {refusal['reason']}")
    for text in entry["warnings"]:
        lines.append(f"  warning: {text}")
    return lines


def _format_or_unknown(url: str) -> str:
    try:
        return detect_format(url, registry_for([url])).value
    except Exception:  # the parse error already says what is wrong
        return "?"


def command_inspect(args: argparse.Namespace) -> int:
    parser = make_parser(args, tree=args.all_images)
    entries: list[dict[str, Any]] = []
    status = EXIT_OK
    urls: list[str] = []
    for item in args.inputs:  # a missing file is reported in its place, the rest inspected
        try:
            urls.extend(expand_inputs([item]))
        except CliError as error:
            status = max(status, error.exit_code)
            entry = {"url": item, "format": "unknown", "error": str(error)}
            entries.append(entry)
            if not args.json:
                print("\n".join(render_inspection(entry)), flush=True)
    for url in dict.fromkeys(urls):
        try:
            entry = inspect_file(url, parser)
        except Exception as error:
            if args.debug:
                raise
            message, code = describe_failure(url, error)
            status = max(status, code)
            entry = {"url": url, "format": _format_or_unknown(url), "error": message}
        entries.append(entry)
        if not args.json:
            print("\n".join(render_inspection(entry)), flush=True)
    if args.json:
        json.dump({"files": entries}, sys.stdout, indent=2, default=_json_value)
        sys.stdout.write("\n")
    return status
