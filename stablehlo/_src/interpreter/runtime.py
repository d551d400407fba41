"""Runtime values of the reference interpreter and the dtype rules kernels
share.

A tensor value is a numpy array whose dtype is the storage dtype of the
element type (`numpy_dtype`): ml_dtypes types for bf16 / f8 / f6 / f4 / i2 /
i4 / u2 / u4, `np.bool_` for i1, complex64 / complex128 for complex types, and
the storage integers for quantized types (the IR type says how to read them).
A token is the `TOKEN` singleton; a tuple is a Python `tuple` of values.

Kernels never see Python scalars: results are normalized to arrays by the
dispatch loop. Integer arithmetic wraps around as the spec requires; for the
narrow integer types kernels compute in a wide type and call `wrap_to`.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.text import dense
import support


class Token:
  """The value of `!stablehlo.token`; carries no data."""

  __slots__ = ()

  def __repr__(self):
    return "TOKEN"


TOKEN = Token()

_NARROW_INT = frozenset((2, 4))


def numpy_dtype(ty: t.Type) -> np.dtype:
  """The storage dtype for a tensor type or an element type."""
  et = t.element_type_of(ty)
  dt = dense.numpy_dtype(et)
  if dt is None:
    raise support.UnimplementedError(
        f"interpreter: element type {et} has no numpy representation")
  return dt


def element_type(ty: t.Type) -> t.Type:
  return t.element_type_of(ty)


def storage_element_type(ty: t.Type) -> t.Type:
  """The integer type holding a quantized type's values, else the element
  type itself."""
  et = t.element_type_of(ty)
  if isinstance(et, t.QuantizedType):
    return et.storage_type
  return et


def is_narrow_int(et: t.Type) -> bool:
  return isinstance(et, t.IntegerType) and et.width in _NARROW_INT


def compute_dtype(ty: t.Type) -> np.dtype:
  """A dtype in which integer arithmetic for `ty` is exact before wrapping:
  int64 / uint64 for i2 / i4 / u2 / u4, otherwise the storage dtype."""
  et = storage_element_type(ty)
  if isinstance(et, t.IntegerType) and et.width in _NARROW_INT:
    return np.dtype(np.uint64 if et.unsigned else np.int64)
  return numpy_dtype(et)


def wrap_to(x, ty: t.Type) -> np.ndarray:
  """Converts integer values `x` (any integer dtype or Python ints) to the
  storage dtype of `ty`, wrapping around modulo 2^width (two's complement for
  signed types), as the spec's integer semantics require."""
  et = storage_element_type(ty)
  dt = numpy_dtype(et)
  x = np.asarray(x)
  if not isinstance(et, t.IntegerType):
    return x.astype(dt)
  if et.width == 1:
    return (x.astype(np.int64) & 1).astype(np.bool_)
  if et.width >= 8:
    if x.dtype.kind in "iub":
      return x.astype(dt)  # numpy integer casts truncate bits: wrap-around
    return np.asarray(x, dtype=object).astype(np.int64).astype(dt)
  w = et.width
  v = x.astype(np.int64) & ((1 << w) - 1)
  if not et.unsigned:
    v = np.where(v >= (1 << (w - 1)), v - (1 << w), v)
  return v.astype(dt)


def zeros(ty: t.Type) -> np.ndarray:
  return np.zeros(static_shape(ty), dtype=numpy_dtype(ty))


def static_shape(ty: t.Type) -> tuple:
  if not isinstance(ty, t.RankedTensorType):
    raise support.UnimplementedError(
        f"interpreter: expected a ranked tensor type, got {ty}")
  if not ty.has_static_shape:
    raise support.UnimplementedError(
        f"interpreter: dynamic shape {ty} has no runtime shape here")
  return tuple(ty.shape)


def from_attr(attr, module=None) -> np.ndarray:
  """The runtime value of a constant attribute (dense or dense_resource)."""
  if isinstance(attr, a.DenseElementsAttr):
    arr = attr.array
    shape = tuple(attr.type.shape) if isinstance(
        attr.type, t.RankedTensorType) else arr.shape
    if arr.shape != shape:
      arr = np.broadcast_to(arr, shape)
    return np.array(arr, dtype=numpy_dtype(attr.type), copy=True)
  if isinstance(attr, a.DenseResourceAttr):
    blob = None
    if module is not None:
      blob = module.resources.get("builtin", {}).get(attr.key)
    if blob is None:
      raise support.NotFoundError(
          f"dense_resource<{attr.key}> has no blob in the module's "
          "dialect_resources")
    data = bytes.fromhex(blob[2:] if blob.startswith(("0x", "0X")) else blob)
    # The first 4 bytes of a resource blob are its alignment.
    return dense.decode_hex_blob(data[4:], t.element_type_of(attr.type),
                                 static_shape(attr.type)).copy()
  raise support.InvalidArgumentError(
      f"expected a dense elements attribute, got {type(attr).__name__}")


def to_attr(value: np.ndarray, ty: t.Type) -> a.DenseElementsAttr:
  return a.DenseElementsAttr(ty, np.asarray(value, dtype=numpy_dtype(ty)))


def as_result(value, ty: t.Type):
  """Normalizes a kernel's result to the runtime representation of `ty`:
  numpy scalars and Python numbers become arrays of the storage dtype."""
  if isinstance(ty, t.TokenType) or isinstance(ty, t.TupleType):
    return value
  if type(value) is np.ndarray:
    return value
  if isinstance(value, np.generic) or isinstance(value, (int, float, bool,
                                                         complex)):
    return np.asarray(value, dtype=numpy_dtype(ty))
  return value
