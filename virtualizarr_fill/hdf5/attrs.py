"""HDF5 attributes as Zarr (JSON) attributes, read the way h5netcdf reads them.

The values follow h5netcdf (and so ``xr.open_dataset(engine="h5netcdf")``): the
netCDF-4/HDF5 dimension bookkeeping attributes are hidden, fixed-length strings longer
than one character are decoded, single-element arrays become scalars, and empty
(null-dataspace) string attributes become empty strings. JSON then needs plain Python
values.

Attributes JSON cannot hold in that form are converted or skipped, each with a
warning, never failing the file: compounds become objects (dicts), object references
become the referenced object's path, bytes that are not UTF-8 become U+FFFD, and
region references, complex numbers, opaque blobs and unreadable types are skipped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from virtualizarr_fill.errors import AttributeWarning as AttributeWarning
from virtualizarr_fill.hdf5 import _libhdf5
from virtualizarr_fill.hdf5.format.global_heap import vlen_payload_bytes
from virtualizarr_fill.hdf5.format.vlen_descriptors import VlenDescriptors

#: The stored descriptors of a variable-length attribute: (owner, the open attribute, its
#: name, number of elements) -> descriptors, or None when they cannot be read from the
#: file's bytes.
VlenReader = Callable[[Any, Any, bytes, int], VlenDescriptors | None]

#: Attributes netCDF-4 and the HDF5 dimension-scale API use for their own bookkeeping.
HIDDEN_ATTRIBUTES = frozenset(
    {
        "REFERENCE_LIST",
        "CLASS",
        "DIMENSION_LIST",
        "NAME",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_nc3_strict",
        "_NCProperties",
    }
)

#: Attributes whose values the fill-value policy consumes as typed NumPy values.
FILL_ATTRIBUTES = frozenset({"_FillValue", "missing_value"})


class _Skip(Exception):
    """Internal: the attribute cannot be represented."""


def _warn(source: str, owner: str, name: str, message: str) -> None:
    warnings.warn(
        AttributeWarning(f"{source}: attribute {name!r} of {owner}: {message}"),
        stacklevel=4,
    )


def _json_scalar(value: Any, resolve: Callable[[Any], str]) -> Any:
    """A NumPy/h5py scalar as a JSON value."""
    if isinstance(value, h5py.RegionReference):
        raise _Skip("region references have no JSON form")
    if isinstance(value, h5py.Reference):
        return resolve(value)
    if isinstance(value, bytes):
        # undecodable bytes survive as surrogates until _valid_unicode replaces them
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return value
    if isinstance(value, np.void):
        if value.dtype.names is None:
            raise _Skip("opaque data has no JSON form")
        return {name: _json_value(value[name], resolve) for name in value.dtype.names}
    if isinstance(value, np.ndarray):
        return _json_value(value, resolve)
    if isinstance(value, (np.complexfloating, complex)):
        raise _Skip("complex numbers have no JSON form")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    raise _Skip(f"values of type {type(value).__name__} have no JSON form")


def _json_value(value: Any, resolve: Callable[[Any], str]) -> Any:
    """Any attribute value (scalar, list or array, possibly nested) as JSON."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _json_scalar(value[()], resolve)
        if value.dtype.names is None and value.dtype.kind in "biuf":
            return value.tolist()
        return [_json_value(item, resolve) for item in value]
    if isinstance(value, list):
        return [_json_value(item, resolve) for item in value]
    return _json_scalar(value, resolve)


def _decode_fixed_strings(value: Any, encoding: str) -> Any:
    """h5netcdf decodes fixed-length strings (longer than one char) with surrogateescape."""
    if isinstance(value, bytes):
        return value.decode(encoding, "surrogateescape")
    if isinstance(value, np.ndarray):
        return [item.decode(encoding, "surrogateescape") for item in value.flat]
    return value


class UnreadableAttribute:
    """Marks an attribute h5py failed to read, with the reason."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"UnreadableAttribute({type(self.error).__name__}: {self.error})"


#: Attributes larger than this (in memory, variable-length data included) are not read:
#: a corrupt dataspace or heap can otherwise make libhdf5 allocate without bound.
MAX_ATTRIBUTE_BYTES = 64 * 1024 * 1024


def _read_bounded(obj: h5py.HLObject, name: str, vlen: VlenReader | None = None) -> Any:
    """One attribute, read the way h5py's ``AttributeManager.__getitem__`` reads it.

    Re-implemented (a dozen lines) only to check the size between opening the attribute
    and reading it, with a single open. Variable-length values are bounded first by
    what their stored descriptors claim (``vlen`` reads them; None: not bounded).
    """
    key = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name
    plain = _libhdf5.read_plain_attribute(obj.id, key, MAX_ATTRIBUTE_BYTES)
    if plain is not None:
        return plain
    attr = h5py.h5a.open(obj.id, key)
    shape, dtype = attr.shape, attr.dtype
    if shape is None:
        return h5py.Empty(dtype)
    htype = h5py.h5t.py_create(dtype)
    if dtype.subdtype is not None:  # numpy has no top-level array types
        dtype, subshape = dtype.subdtype
        shape = shape + subshape
    size = math.prod(shape) * max(dtype.itemsize, 1)
    if size > MAX_ATTRIBUTE_BYTES:
        raise ValueError(f"{size} bytes exceed {MAX_ATTRIBUTE_BYTES}")
    if _is_variable_length(dtype) and math.prod(shape) and vlen is not None:
        descriptors = vlen(obj, attr, key, math.prod(shape))
        if descriptors is None:
            raise ValueError("its variable-length descriptors cannot be read to bound it")
        claimed = vlen_payload_bytes(descriptors)
        if size + claimed > MAX_ATTRIBUTE_BYTES:
            raise ValueError(
                f"its variable-length elements claim {claimed} bytes, more than "
                f"{MAX_ATTRIBUTE_BYTES}"
            )
    values = np.zeros(shape, dtype=dtype, order="C")
    attr.read(values, mtype=htype)
    string_info = h5py.check_string_dtype(dtype)
    if string_info is not None and string_info.length is None:
        decoded = [item.decode("utf-8", "surrogateescape") for item in values.flat]
        values = np.array(decoded, dtype=dtype).reshape(values.shape)
    return values[()] if values.ndim == 0 else values


def _is_variable_length(dtype: np.dtype) -> bool:
    """Whether h5py reads ``dtype`` as variable-length strings or sequences."""
    if h5py.check_vlen_dtype(dtype) is not None:
        return True
    string_info = h5py.check_string_dtype(dtype)
    return string_info is not None and string_info.length is None


def attribute_names(obj: h5py.HLObject, creation_plist: Any = None) -> list[str]:
    """The names of the attributes of ``obj`` as ``list(obj.attrs)`` gives them (in
    creation order when the object tracks it, else by name); raises when the attribute
    table cannot be listed. ``creation_plist`` is ``obj``'s creation property list
    where the caller has it.

    The same calls as h5py's ``AttributeManager.__iter__``, without building the
    manager, which costs more than the listing itself.
    """
    names: list[bytes] = []
    with _libhdf5.phil:
        # h5py lists a file's attributes through its root group, as here.
        oid = h5py.h5o.open(obj.id, b"/") if isinstance(obj, h5py.File) else obj.id
        # A dataset's creation property list is a copy h5py caches (its fill value
        # and chunk queries read it too): use that one rather than copy it again.
        plist = creation_plist
        if plist is None and isinstance(obj, h5py.Dataset):
            plist = _libhdf5.cached_creation_plist(obj)
        if plist is None:
            plist = oid.get_create_plist()
        tracked = plist.get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
        index = h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME
        h5py.h5a.iterate(oid, lambda name, *_: names.append(name), index_type=index)
    return [_libhdf5.decoded_name(obj, name) for name in names]


def read_attribute(obj: h5py.HLObject, name: str, vlen: VlenReader | None = None) -> Any:
    """One attribute as h5py returns it; an :class:`UnreadableAttribute` when h5py
    cannot read it (or it is too large to read safely, see ``vlen`` in
    :func:`_read_bounded`)."""
    try:
        return _read_bounded(obj, name, vlen)
    except Exception as exc:  # h5py cannot read some datatypes
        return UnreadableAttribute(exc)


def read_raw_attributes(
    obj: h5py.HLObject,
    names: list[str] | None = None,
    skip: frozenset[str] = frozenset(),
    creation_plist: Any = None,
    vlen: VlenReader | None = None,
) -> dict[str, Any]:
    """The attributes of ``obj`` as h5py returns them, each read once.

    ``names`` (default: :func:`attribute_names`, given ``creation_plist``) are read,
    except those in ``skip`` (attributes nobody will look at are not worth the read).
    An attribute h5py cannot read (or too large to read safely) maps to an
    :class:`UnreadableAttribute`; a table that cannot even be listed raises.
    """
    if names is None:
        names = attribute_names(obj, creation_plist)
    return {name: read_attribute(obj, name, vlen) for name in names if name not in skip}


def normalise_attribute(value: Any) -> Any:
    """An h5py attribute value as h5netcdf presents it (NumPy/Python values)."""
    if isinstance(value, h5py.Empty):
        string_info = h5py.check_string_dtype(value.dtype)
        if string_info is not None:
            return b"" if string_info.length == 1 else ""
        return np.array([], dtype=value.dtype)
    if isinstance(value, np.ndarray):
        string_info = h5py.check_string_dtype(value.dtype)
        if string_info is not None:
            if string_info.length is not None and string_info.length > 1:
                value = _decode_fixed_strings(value, "utf-8")
            else:
                value = value.tolist()
    elif isinstance(value, bytes):
        value = _decode_fixed_strings(value, "utf-8")
    if isinstance(value, list):
        return value[0] if len(value) == 1 else value
    if isinstance(value, np.ndarray) and value.ndim > 0 and value.size == 1:
        return value.reshape(-1)[0]
    return value


#: Object kinds ``file[reference]`` opens (others raise "Unknown object type").
_REFERENCE_TARGETS = frozenset({h5py.h5i.GROUP, h5py.h5i.DATASET, h5py.h5i.DATATYPE})


#: An object's path from its h5py identifier (None: unknown); see
#: :class:`~virtualizarr_fill.hdf5.walk.ObjectNames`.
PathOf = Callable[[Any], str | bytes | None]


def _resolver(obj: h5py.HLObject, path_of: PathOf | None = None) -> Callable[[Any], str]:
    def resolve(reference: Any) -> str:
        if not reference:
            raise _Skip("null object reference")
        # ``obj.file[reference].name``, without the File and Dataset/Group objects h5py
        # would build around the low-level calls (most of the cost).
        try:
            target = h5py.h5r.dereference(reference, obj.id)
            if target is None:
                raise ValueError("Invalid HDF5 object reference")
            if h5py.h5i.get_type(target) not in _REFERENCE_TARGETS:
                raise TypeError("Unknown object type")
        except Exception as exc:  # h5py raises several types here
            raise _Skip(f"object reference does not resolve ({exc})") from None
        name = (
            _libhdf5.decoded_name(obj, h5py.h5i.get_name(target))
            if path_of is None
            else path_of(target)
        )
        if name is None:
            raise _Skip("object reference to an anonymous object")
        return str(name)

    return resolve


def _contains_reference(value: Any) -> bool:
    if isinstance(value, h5py.Reference):
        return True
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":
        return any(isinstance(item, h5py.Reference) for item in value.flat)
    return False


def _is_structural(value: Any) -> bool:
    return isinstance(value, np.void) or (
        isinstance(value, np.ndarray) and value.dtype.names is not None
    )


def convert_attributes(
    obj: h5py.HLObject,
    *,
    source: str,
    keep_typed: frozenset[str] = frozenset(),
    raw: dict[str, Any] | None = None,
    path: str | None = None,
    creation_plist: Any = None,
    path_of: PathOf | None = None,
    vlen: VlenReader | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read the attributes of ``obj`` (or use ``raw``, from :func:`read_raw_attributes`;
    ``creation_plist`` as there). Object references become the path ``path_of`` gives
    (default: libhdf5's name of the object).

    Returns ``(json_attributes, typed)``: the JSON-ready attributes, and, for names in
    ``keep_typed``, the h5netcdf-style NumPy values (for the fill-value policy, which
    needs the attribute's own dtype). Problems are reported as
    :class:`AttributeWarning` and the attribute skipped; ``path`` (default: the
    object's name) is the path named in them.
    """
    kind = "group" if isinstance(obj, h5py.Group) else "dataset"
    owner = f"{kind} {(path if path is not None else obj.name)!r}"
    resolve = _resolver(obj, path_of)
    result: dict[str, Any] = {}
    typed: dict[str, Any] = {}
    if raw is None:
        try:
            # Hidden attributes are dropped below whatever they hold: never read them.
            raw = read_raw_attributes(
                obj, skip=HIDDEN_ATTRIBUTES, creation_plist=creation_plist, vlen=vlen
            )
        except Exception as exc:  # a corrupt attribute table
            _warn(source, owner, "*", f"attributes could not be listed ({exc}); all skipped")
            return result, typed
    for raw_name, stored in raw.items():
        name = _text_name(raw_name)
        if name in HIDDEN_ATTRIBUTES:
            continue
        if name != raw_name:
            _warn(source, owner, name, "name is not UTF-8; undecodable bytes replaced")
        if isinstance(stored, UnreadableAttribute):
            error = stored.error
            _warn(source, owner, name, f"unreadable ({type(error).__name__}: {error}); skipped")
            continue
        try:
            value = normalise_attribute(stored)
        except Exception as exc:  # a value of a shape h5netcdf's rules do not cover
            _warn(source, owner, name, f"unreadable ({type(exc).__name__}: {exc}); skipped")
            continue
        if name in keep_typed:
            typed[name] = value
        try:
            converted = _json_value(value, resolve)
        except _Skip as skip:
            _warn(source, owner, name, f"{skip}; skipped")
            continue
        replaced = False
        if _may_hold_text(stored):
            converted, replaced = _valid_unicode(converted)
        if replaced:
            _warn(source, owner, name, "bytes that are not UTF-8 replaced by U+FFFD")
        if _contains_reference(value):
            _warn(source, owner, name, "object reference stored as the target's path")
        elif _is_structural(value):
            _warn(source, owner, name, "compound value stored as a JSON object")
        result[name] = converted
    return result, typed


def _text_name(name: Any) -> str:
    """An attribute name as text (names that are not UTF-8 come back from h5py as bytes)."""
    if isinstance(name, bytes):
        return name.decode("utf-8", "replace")
    text = str(name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def _may_hold_text(value: Any) -> bool:
    """Whether a raw h5py value can contain strings (numeric arrays are skipped fast)."""
    if isinstance(value, np.ndarray | np.void):
        return value.dtype.kind in "SUOV"
    return not isinstance(value, int | float | np.number | np.bool_)


def _valid_unicode(value: Any) -> tuple[Any, bool]:
    """Replace undecodable bytes (kept as lone surrogates by h5py/h5netcdf) with U+FFFD.

    JSON writers that emit UTF-8 (Icechunk, kerchunk) cannot encode lone surrogates.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raw = value.encode("utf-8", "surrogateescape")
            return raw.decode("utf-8", "replace"), True
        return value, False
    if isinstance(value, list):
        items = [_valid_unicode(item) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    if isinstance(value, dict):
        pairs = {key: _valid_unicode(item) for key, item in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


__all__ = [
    "FILL_ATTRIBUTES",
    "HIDDEN_ATTRIBUTES",
    "AttributeWarning",
    "UnreadableAttribute",
    "attribute_names",
    "convert_attributes",
    "normalise_attribute",
    "read_attribute",
    "read_raw_attributes",
]
