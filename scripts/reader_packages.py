"""Which stores of single files read with zarr alone, and which need a codec package.

Parses every file named on the command line (or every file of a corpus's
``MANIFEST.tsv`` with ``--corpus DIR``) with :class:`virtualizarr_fill.formats.AutoParser`
(headers only), takes the codec chain of each of its arrays, and prints what a reader of
a store built from the file installs besides zarr
(``virtualizarr_fill.codecs.reader_packages``), then the counts. A directory (a local
Icechunk repository) or a ``*.json`` file (kerchunk references) on the command line is
read as a written store instead::

    python scripts/reader_packages.py --corpus ../shared/corpus
    python scripts/reader_packages.py OUT/mosaic.icechunk OUT/series.json

``docs/ecosystem.md`` gives the result. A store combining files can need a codec where
no single file does: padding cut from chunks inside the array (``truncate``, ``crop``).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import warnings
from pathlib import Path

from virtualizarr_fill.codecs.reader_packages import codec_names, reader_packages


def file_codecs(path: Path) -> dict[str, list[str]]:
    """Array path -> codec names, for every array of every group of the file."""
    from virtualizarr_fill.formats import AutoParser
    from virtualizarr_fill.io.registries import registry_for

    url = path.resolve().as_uri()
    store = AutoParser()(url, registry_for([url]))
    tree = store.to_virtual_datatree(loadable_variables=[])
    arrays: dict[str, list[str]] = {}
    for node in tree.subtree:
        for name, variable in node.to_dataset(inherit=False).variables.items():
            metadata = getattr(variable.data, "metadata", None)
            if metadata is not None:
                arrays[f"{node.path}:{name}"] = codec_names(metadata.codecs)
    return arrays


def store_codecs(path: Path) -> dict[str, list[str]]:
    """Array path -> codec names, for every array of a written store: a local Icechunk
    repository (a directory) or kerchunk JSON references (``*.json``)."""
    if path.suffix == ".json":
        refs = json.loads(path.read_text())
        refs = refs.get("refs", refs)
        return {
            key.rsplit("/", 1)[0] or "/": codec_names(json.loads(value).get("codecs", []))
            for key, value in refs.items()
            if key.endswith("zarr.json") and isinstance(value, str)
        }
    import icechunk
    import zarr

    zarr.config.set({"array.rectilinear_chunks": True})
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(path)))
    group = zarr.open_group(repo.readonly_session("main").store, mode="r")
    return {
        name: codec_names(member.metadata.to_dict().get("codecs", []))
        for name, member in group.members(max_depth=None)
        if isinstance(member, zarr.Array)
    }


def classify(path: Path) -> tuple[str, list[str]]:
    """(what a reader needs, the codec names that need a package) for one file or store."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            is_store = path.is_dir() or path.suffix == ".json"
            arrays = store_codecs(path) if is_store else file_codecs(path)
    except Exception as error:
        return "not virtualized", [type(error).__name__]
    if not arrays:
        return "no array", []
    needed = reader_packages(arrays)
    if not needed:
        return "zarr alone", []
    names = sorted({n for per_array in needed.values() for ns in per_array.values() for n in ns})
    return " + ".join(sorted(needed)), names


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("files", nargs="*", type=Path)
    options.add_argument("--corpus", type=Path, help="a directory holding MANIFEST.tsv")
    args = options.parse_args(argv)
    files = list(args.files)
    if args.corpus:
        rows = (args.corpus / "MANIFEST.tsv").read_text().splitlines()[1:]
        files += [args.corpus / row.split("\t")[0] for row in rows if row.strip()]
    verdicts: collections.Counter[str] = collections.Counter()
    by_codec: collections.Counter[str] = collections.Counter()
    for path in files:
        verdict, names = classify(path)
        verdicts[verdict] += 1
        if verdict != "not virtualized":
            by_codec.update(names)
        print(f"{verdict}\t{', '.join(names)}\t{path}", flush=True)
    print(f"\n{len(files)} files")
    for verdict, count in verdicts.most_common():
        print(f"  {count:4d}  {verdict}")
    print("files naming each codec that needs a package:")
    for name, count in by_codec.most_common():
        print(f"  {count:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
