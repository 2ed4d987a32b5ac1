"""Compacted parts kept in columns: what a :class:`~.collecting.Collector` holds of each
file until the combination, without Python objects per file.

A compacted :class:`~.parts.FilePart` still costs objects of its own: a manifest of three
small NumPy arrays per combined variable, its own coordinate values, its grid mapping's
attributes, the dictionaries and dataclass around them (several kilobytes of resident
memory for a small tile whose chunk references are a hundred bytes). A
:class:`PartTable` keeps the files in flat columns instead: every chunk's path (an index
into one table of paths, a path being shared by the chunks of a file), offset and length;
each coordinate's values, end to end; each grid mapping's values that differ from the
first file's; and, for everything the files share (what :func:`~.parts.compact` made one
object), that one object, by identity. A file read back (``table[i]``) is a
:class:`~.parts.FilePart` whose arrays, coordinates and attributes are built when read
and not kept, so that the combination, reading the files one after another, holds the
objects of the few it is reading.
"""

from __future__ import annotations

import array
import math
import pickle
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast, overload

import numpy as np
import xarray as xr
from virtualizarr.manifests import ManifestArray

from virtualizarr_fill import upstream
from virtualizarr_fill.assemble.parts import FilePart

__all__ = ["PartTable"]

_STRINGS = np.dtypes.StringDType()

#: A file's entry in a column of references: an object of the table (its index), read
#: from the kind's columns, or absent.
_COLUMNAR = -1
_ABSENT = -2

#: What a :class:`FilePart` holds by name: its arrays, attributes and coordinates.
_KINDS = ("arrays", "var_attrs", "coords")

#: Instance attributes of a manifest array that are its metadata and manifest.
_ARRAY_STATE = frozenset({"_metadata", "_manifest"})


def _refs() -> array.array[int]:
    return array.array("q")


class PartTable(Sequence[FilePart]):
    """Compacted file parts in columns (see the module's description); ``append`` keeps
    one, ``table[i]`` reads it back."""

    def __init__(self) -> None:
        self._urls: list[str] = []
        #: The objects files share (and the few a file cannot keep in columns).
        self._objects: list[Any] = []
        self._ids: dict[int, int] = {}
        self._templates: dict[tuple[Any, ...], int] = {}
        #: Per file: its names (arrays, attributes, coordinates), dimensions, coordinate
        #: names and dataset attributes, as objects of the table.
        self._names = _refs()
        self._dims = _refs()
        self._coord_names = _refs()
        self._attributes = _refs()
        #: Per kind and name, per file: an object of the table, _COLUMNAR or _ABSENT.
        self._entries: dict[tuple[str, str], array.array[int]] = {}
        #: Per kind and name, per file (where _COLUMNAR): its template and its start.
        self._template_of: dict[tuple[str, str], array.array[int]] = {}
        self._start_of: dict[tuple[str, str], array.array[int]] = {}
        # chunk references of the manifests, end to end
        self._path_table: list[str] = []
        self._chunk_paths = _refs()
        self._chunk_offsets: array.array[int] = array.array("Q")
        self._chunk_lengths: array.array[int] = array.array("Q")
        # coordinate values, end to end, by name
        self._values: dict[str, bytearray] = {}
        # each file's own attribute values (pickled, each after its length)
        self._own_values = bytearray()
        #: The URL of the file being kept (its chunks' path, usually: one string for both).
        self._url = ""

    # -- Sequence --------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._urls)

    @overload
    def __getitem__(self, index: int) -> FilePart: ...

    @overload
    def __getitem__(self, index: slice) -> list[FilePart]: ...

    def __getitem__(self, index: int | slice) -> FilePart | list[FilePart]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return FilePart(
            url=self._urls[index],
            arrays=cast(dict[str, ManifestArray], _Entries(self, index, "arrays")),
            dims=self._objects[self._dims[index]],
            var_attrs=cast(dict[str, dict[str, Any]], _Entries(self, index, "var_attrs")),
            attributes=self._objects[self._attributes[index]],
            coords=cast(dict[str, xr.Variable], _Entries(self, index, "coords")),
            coord_names=self._objects[self._coord_names[index]],
        )

    def __iter__(self) -> Iterator[FilePart]:
        return (self[i] for i in range(len(self)))

    # -- keeping ---------------------------------------------------------------------

    def _intern(self, value: Any) -> int:
        """The index of ``value`` (by identity) among the table's objects."""
        found = self._ids.get(id(value))
        if found is None:
            found = self._ids[id(value)] = len(self._objects)
            self._objects.append(value)
        return found

    def _template(self, key: tuple[Any, ...], value: Any) -> int:
        found = self._templates.get(key)
        if found is None:
            found = self._templates[key] = self._intern(value)
        return found

    def append(self, part: FilePart) -> None:
        """Keep a compacted part (its objects shared with the table's where they are the
        same objects)."""
        row = len(self._urls)
        self._url = part.url
        names = (tuple(part.arrays), tuple(part.var_attrs), tuple(part.coords))
        self._names.append(self._template(("names", names), names))
        self._dims.append(self._intern(part.dims))
        self._coord_names.append(self._intern(part.coord_names))
        self._attributes.append(self._intern(part.attributes))
        keepers = {
            "arrays": self._keep_array,
            "var_attrs": self._keep_attributes,
            "coords": self._keep_coordinate,
        }
        kinds: tuple[Mapping[str, Any], ...] = (part.arrays, part.var_attrs, part.coords)
        for kind, values in zip(_KINDS, kinds, strict=True):
            for name, value in values.items():
                key = (kind, name)
                entries = self._entries.get(key)
                if entries is None:
                    entries = self._entries[key] = array.array("q", [_ABSENT] * row)
                    self._template_of[key] = array.array("q", [0] * row)
                    self._start_of[key] = array.array("q", [0] * row)
                # the first file's (the collector's first, which the others share
                # with) and what is shared are kept as objects
                template, start = (-1, 0)
                if row and id(value) not in self._ids:
                    template, start = keepers[kind](name, value)
                entries.append(_COLUMNAR if template >= 0 else self._intern(value))
                if not row and kind == "var_attrs":
                    self._templates[("attrs", name)] = entries[-1]
                self._template_of[key].append(max(template, 0))
                self._start_of[key].append(start)
        self._urls.append(part.url)
        for key, entries in self._entries.items():
            if len(entries) <= row:  # a name this file does not have
                entries.append(_ABSENT)
                self._template_of[key].append(0)
                self._start_of[key].append(0)

    def extend(self, parts: Iterator[FilePart] | Sequence[FilePart]) -> None:
        """Keep compacted parts, in order."""
        for part in parts:
            self.append(part)

    def _keep_array(self, name: str, value: Any) -> tuple[int, int]:
        """Keep a manifest array's chunk references in the columns: its template (type,
        metadata and other state) and where its references start; (-1, 0) for an array
        the columns cannot hold (one the table holds already, inlined chunks)."""
        if not isinstance(value, ManifestArray):
            return -1, 0
        extra = {k: v for k, v in vars(value).items() if k not in _ARRAY_STATE}
        try:
            key = ("array", type(value), id(value.metadata), tuple(sorted(extra.items())))
            hash(key)
        except TypeError:
            return -1, 0
        entries = upstream.manifest_entries(value.manifest)
        if entries.inlined:
            return -1, 0
        template = self._template(key, value)
        shape = entries.paths.shape
        record = len(self._chunk_paths)
        self._chunk_paths.append(self._template(("shape", shape), shape))
        self._chunk_paths.append(len(self._chunk_offsets))
        last = self._path_table[-1] if self._path_table else None
        for path in entries.paths.ravel().tolist():
            if path != last:  # the chunks of a file share its path
                self._path_table.append(self._url if path == self._url else path)
                last = path
            self._chunk_paths.append(len(self._path_table) - 1)
        self._chunk_offsets.extend(entries.offsets.ravel().tolist())
        self._chunk_lengths.extend(entries.lengths.ravel().tolist())
        return template, record

    def _keep_attributes(self, name: str, value: Any) -> tuple[int, int]:
        """Keep a variable's attributes as the values that differ from the first file's
        (the tie points of a tile's grid mapping), where they have the same keys."""
        base_index = self._templates.get(("attrs", name))
        if base_index is None or not isinstance(value, dict):
            return -1, 0
        base = self._objects[base_index]
        if list(base) != list(value):
            return -1, 0
        own = tuple((k, v) for k, v in value.items() if v is not base[k])
        # this file's own values, as bytes: kept as objects they would be a dozen small
        # ones a tile, spread among what parsing frees, which keeps its memory from
        # being given back
        record = pickle.dumps(own, protocol=pickle.HIGHEST_PROTOCOL)
        start = len(self._own_values)
        self._own_values += struct.pack("<I", len(record))
        self._own_values += record
        return base_index, start

    def _keep_coordinate(self, name: str, value: Any) -> tuple[int, int]:
        """Keep a 1-D coordinate's values end to end, its dimensions, attributes and
        encoding as objects shared by the files."""
        if (
            not isinstance(value, xr.Variable)
            or value.ndim != 1
            or not isinstance(value.data, np.ndarray)
            or value.dtype.hasobject
        ):
            return -1, 0
        dims, attrs, encoding, dtype = value.dims, value.attrs, value.encoding, value.dtype
        size = value.shape[0]
        # (xarray gives a variable without attributes a new empty dictionary on each
        # read of ``attrs``: every empty one is the same template's)
        key = ("coord", name, dims, _identity(attrs), _identity(encoding), dtype.str, size)
        template = self._template(key, (dims, attrs, encoding, dtype, size))
        values = self._values.setdefault(name, bytearray())
        start = len(values)
        values.extend(np.ascontiguousarray(value.data).tobytes())
        return template, start

    # -- reading ---------------------------------------------------------------------

    def _names_of(self, index: int, kind: str) -> tuple[str, ...]:
        names: tuple[tuple[str, ...], ...] = self._objects[self._names[index]]
        return names[_KINDS.index(kind)]

    def _read(self, index: int, kind: str, name: str) -> Any:
        key = (kind, name)
        entry = self._entries[key][index]
        if entry >= 0:
            return self._objects[entry]
        if entry == _ABSENT:
            raise KeyError(name)
        template = self._objects[self._template_of[key][index]]
        start = self._start_of[key][index]
        if kind == "arrays":
            return self._read_array(template, start)
        if kind == "var_attrs":
            (size,) = struct.unpack_from("<I", self._own_values, start)
            attributes = dict(template)
            attributes.update(pickle.loads(self._own_values[start + 4 : start + 4 + size]))
            return attributes
        dims, attrs, encoding, dtype, size = template
        values = np.frombuffer(self._values[name][start : start + size * dtype.itemsize], dtype)
        return upstream.variable_sharing(dims, values, attrs, encoding)

    def _read_array(self, template: ManifestArray, start: int) -> ManifestArray:
        shape: tuple[int, ...] = self._objects[self._chunk_paths[start]]
        first = self._chunk_paths[start + 1]
        count = math.prod(shape)
        indices = self._chunk_paths[start + 2 : start + 2 + count]
        paths = np.array([self._path_table[i] for i in indices], dtype=_STRINGS).reshape(shape)
        offsets = np.array(self._chunk_offsets[first : first + count], dtype=np.uint64)
        lengths = np.array(self._chunk_lengths[first : first + count], dtype=np.uint64)
        manifest = upstream.chunk_manifest(paths, offsets.reshape(shape), lengths.reshape(shape))
        return upstream.manifest_array(type(template), template.metadata, manifest, like=template)

    # -- pickling (a collector travels back from a worker process or dask task) -------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(vars(self))
        del state["_ids"], state["_templates"]  # by id: rebuilt where unpickled
        state["_template_keys"] = [
            (key, index) for key, index in self._templates.items() if key[0] in ("names", "shape")
        ]
        attrs_bases = [(key, i) for key, i in self._templates.items() if key[0] == "attrs"]
        state["_template_keys"] += attrs_bases
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        keys = state.pop("_template_keys")
        self.__dict__.update(state)
        self._ids = {id(value): i for i, value in enumerate(self._objects)}
        # (a file's own attribute values are found by identity too: never another's)
        # templates keyed by identity are found again by identity: a later file sharing
        # their objects is compacted against the collector's first file anyway
        self._templates = dict(keys)


def _identity(mapping: Mapping[Any, Any]) -> int | None:
    """A mapping's identity, the same (None) for every empty one."""
    return id(mapping) if mapping else None


class _Entries(Mapping[str, Any]):
    """One kind of a file's entries (its arrays, attributes or coordinates), each read
    from its table when looked up."""

    __slots__ = ("_index", "_kind", "_table")

    def __init__(self, table: PartTable, index: int, kind: str):
        self._table, self._index, self._kind = table, index, kind

    def __getitem__(self, name: str) -> Any:
        if name not in self._table._names_of(self._index, self._kind):
            raise KeyError(name)
        return self._table._read(self._index, self._kind, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table._names_of(self._index, self._kind))

    def __len__(self) -> int:
        return len(self._table._names_of(self._index, self._kind))

    def __contains__(self, name: object) -> bool:
        return name in self._table._names_of(self._index, self._kind)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled on its own (a part sent to a worker): its entries, not its table
        return (dict, (dict(self.items()),))

    def __repr__(self) -> str:
        return repr(dict(self.items()))
