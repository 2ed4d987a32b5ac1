"""HDF5 datatypes as Zarr v3 data types.

A dataset's chunks can be referenced in place only when its *file* datatype has the
byte layout of a NumPy/Zarr type: IEEE floats, integers using all their bits, packed
compounds of such, fixed-length null-padded strings, opaque blobs. h5py converts
anything else while reading (custom float formats, n-bit integers, padded compounds,
space-padded strings, variable-length strings), so referencing the stored bytes would
return values h5py never shows. Those datasets are *materialised* instead: read once
through h5py at parse time and stored inline in the manifest, when they are small
enough, or refused.

Datatypes with no Zarr representation at all (object and region references,
variable-length sequences, HDF5 array types, compounds with such fields) are refused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import h5py
import numpy as np

Endian = Literal["little", "big"]


class UnsupportedDtypeError(Exception):
    """The dataset's datatype has no Zarr v3 representation."""


class Storage(enum.Enum):
    """How a dataset's values reach the Zarr array."""

    #: stored bytes are referenced as they are
    REFERENCE = "reference"
    #: values are read through h5py at parse time and inlined
    MATERIALISE = "materialise"


@dataclass(frozen=True)
class DtypePlan:
    """The Zarr data type of a dataset and how its values get there.

    Attributes
    ----------
    dtype
        NumPy dtype of the Zarr array; for referenced data, the stored layout (with its
        byte order); for materialised data, the type the values are converted to.
    endian
        Byte order the ``bytes`` codec declares (referenced data only).
    storage
        Whether stored bytes are referenced or values materialised.
    reason
        Why values must be materialised (empty when referenced).
    """

    dtype: np.dtype
    endian: Endian | None
    storage: Storage
    reason: str = ""

    @property
    def is_string(self) -> bool:
        return self.dtype.kind == "T"


_STANDARD_FLOATS = {
    2: h5py.h5t.IEEE_F16LE,
    4: h5py.h5t.IEEE_F32LE,
    8: h5py.h5t.IEEE_F64LE,
}


def _order(tid: h5py.h5t.TypeID) -> Endian | None:
    order = tid.get_order()
    if order == h5py.h5t.ORDER_LE:
        return "little"
    if order == h5py.h5t.ORDER_BE:
        return "big"
    if order == h5py.h5t.ORDER_NONE:
        return None
    raise UnsupportedDtypeError(f"unsupported byte order code {order} (VAX or mixed)")


def _native_layout_problem(tid: h5py.h5t.TypeID) -> str | None:
    """Why an atomic/compound file type's bytes differ from its NumPy view, or None."""
    cls = tid.get_class()
    if cls == h5py.h5t.BITFIELD:
        return None  # h5py reads bitfields as unsigned integers of the same size
    if cls == h5py.h5t.INTEGER:
        if tid.get_precision() != tid.get_size() * 8 or tid.get_offset() != 0:
            return (
                f"{tid.get_precision()}-bit integer at bit offset {tid.get_offset()} "
                f"in {tid.get_size()} bytes"
            )
        return None
    if cls == h5py.h5t.FLOAT:
        standard = _STANDARD_FLOATS.get(tid.get_size())
        if standard is None or (
            tid.get_fields() != standard.get_fields()
            or tid.get_ebias() != standard.get_ebias()
            or tid.get_precision() != standard.get_precision()
            or tid.get_offset() != 0
            or tid.get_norm() != standard.get_norm()
        ):
            return f"non-IEEE {tid.get_size()}-byte floating-point format"
        return None
    if cls == h5py.h5t.ENUM:
        return _native_layout_problem(tid.get_super())
    if cls == h5py.h5t.COMPOUND:
        expected_offset = 0
        for index in range(tid.get_nmembers()):
            member = tid.get_member_type(index)
            if tid.get_member_offset(index) != expected_offset:
                return "compound with padding between fields"
            problem = _native_layout_problem(member)
            if problem is not None:
                return f"compound field {tid.get_member_name(index)!r}: {problem}"
            expected_offset += member.get_size()
        if expected_offset != tid.get_size():
            return "compound with trailing padding"
        return None
    if cls == h5py.h5t.STRING:
        if tid.is_variable_str():
            return "variable-length strings"
        if tid.get_strpad() != h5py.h5t.STR_NULLPAD:
            pad = "space" if tid.get_strpad() == h5py.h5t.STR_SPACEPAD else "null-terminated"
            return f"{pad}-padded fixed-length strings"
        return None
    if cls == h5py.h5t.OPAQUE:
        return None
    if cls == h5py.h5t.ARRAY:
        return "HDF5 array datatype"
    return f"HDF5 datatype class {cls}"


def _byte_orders(tid: h5py.h5t.TypeID) -> set[Endian]:
    cls = tid.get_class()
    if cls == h5py.h5t.COMPOUND:
        orders: set[Endian] = set()
        for index in range(tid.get_nmembers()):
            orders |= _byte_orders(tid.get_member_type(index))
        return orders
    if cls == h5py.h5t.ENUM:
        return _byte_orders(tid.get_super())
    if cls in (h5py.h5t.INTEGER, h5py.h5t.FLOAT, h5py.h5t.BITFIELD):
        order = _order(tid)
        return {order} if order is not None and tid.get_size() > 1 else set()
    return set()


def _refuse_unrepresentable(dtype: np.dtype, tid: h5py.h5t.TypeID) -> None:
    """Raise for types no Zarr array can hold."""
    ref = h5py.check_ref_dtype(dtype)
    if ref is h5py.RegionReference:
        raise UnsupportedDtypeError("region references")
    if ref is not None:
        raise UnsupportedDtypeError("object references")
    if dtype.subdtype is not None or tid.get_class() == h5py.h5t.ARRAY:
        raise UnsupportedDtypeError("HDF5 array datatype")
    vlen = h5py.check_vlen_dtype(dtype)
    if vlen is not None and vlen not in (str, bytes):
        raise UnsupportedDtypeError("variable-length sequences")
    if tid.get_class() == h5py.h5t.TIME:
        raise UnsupportedDtypeError("HDF5 time datatype")
    fields = dtype.fields
    if dtype.names is not None and fields is not None:
        for index, name in enumerate(dtype.names):
            field = fields[name][0]
            if field.subdtype is not None:
                raise UnsupportedDtypeError(f"compound field {name!r} is an array")
            if field.kind == "O":
                raise UnsupportedDtypeError(
                    f"compound field {name!r} holds variable-length data or references"
                )
            if field.names is not None:
                _refuse_unrepresentable(field, tid.get_member_type(index))


def has_file_form(tid: h5py.h5t.TypeID) -> bool:
    """Whether values of the type are stored in a form other than their memory form
    (variable-length data, references), whose size libhdf5 does not report."""
    cls = tid.get_class()
    if cls in (h5py.h5t.VLEN, h5py.h5t.REFERENCE):
        return True
    if cls == h5py.h5t.STRING:
        return bool(tid.is_variable_str())
    if cls == h5py.h5t.COMPOUND:
        return any(has_file_form(tid.get_member_type(i)) for i in range(tid.get_nmembers()))
    if cls in (h5py.h5t.ARRAY, h5py.h5t.ENUM):
        return has_file_form(tid.get_super())
    return False


def little_endian(dtype: np.dtype) -> np.dtype:
    """``dtype`` with every multi-byte field little-endian and compounds packed."""
    fields = dtype.fields
    if dtype.names is not None and fields is not None:
        return np.dtype([(name, little_endian(fields[name][0])) for name in dtype.names])
    if dtype.kind in "biufcmM" and dtype.itemsize > 1:
        return dtype.newbyteorder("<")
    return dtype


#: Plans by serialised file datatype: a plan depends on nothing else, and a file (or an
#: archive of files) has few distinct types. Bounded, for processes that see many.
_PLANS: dict[bytes, DtypePlan] = {}
_MAX_PLANS = 4096


def plan_dtype(dataset: h5py.Dataset) -> DtypePlan:
    """Decide the Zarr data type of ``dataset`` and whether its bytes can be referenced.

    Raises :class:`UnsupportedDtypeError` for types Zarr cannot hold.
    """
    tid = dataset.id.get_type()
    try:
        key: bytes | None = tid.encode()
    except Exception:  # a type libhdf5 cannot serialise: plan it uncached
        key = None
    if key is not None:
        known = _PLANS.get(key)
        if known is not None:
            return known
    plan = _plan(dataset.dtype, tid)
    if key is not None and len(_PLANS) < _MAX_PLANS:
        _PLANS[key] = plan
    return plan


def _plan(dtype: np.dtype, tid: h5py.h5t.TypeID) -> DtypePlan:
    _refuse_unrepresentable(dtype, tid)

    if h5py.check_vlen_dtype(dtype) in (str, bytes):
        return DtypePlan(
            np.dtypes.StringDType(), None, Storage.MATERIALISE, "variable-length strings"
        )

    problem = _native_layout_problem(tid)
    orders = _byte_orders(tid)
    if problem is None and len(orders) > 1:
        problem = "compound fields of mixed byte order"
    if problem is not None:
        return DtypePlan(little_endian(dtype), "little", Storage.MATERIALISE, problem)
    endian: Endian = "big" if orders == {"big"} else "little"
    return DtypePlan(dtype, endian, Storage.REFERENCE)


__all__ = [
    "DtypePlan",
    "Storage",
    "UnsupportedDtypeError",
    "has_file_form",
    "little_endian",
    "plan_dtype",
]
