"""StableHLO types and constants -> XLA PrimitiveType, Shape and Literal.

Follows XLA's importer: integer and float element types map one to one
(i1 is PRED, signless iN is sN, uiN is uN), complex<f32>/complex<f64> are
c64/c128, index is s64; ranked static tensors become array shapes with the
default {rank-1..0} layout, tuples tuple shapes, !stablehlo.token a token.
"""

from __future__ import annotations

import numpy as np

import support
from stablehlo import attributes as a
from stablehlo import types as t
from xla import primitive_util
from xla.literal import Literal
from xla.shape import Shape
from xla.xla_data import PrimitiveType

P = PrimitiveType

_FLOATS = {
    "f16": P.F16, "f32": P.F32, "f64": P.F64, "bf16": P.BF16,
    "f8E5M2": P.F8E5M2, "f8E4M3": P.F8E4M3, "f8E4M3FN": P.F8E4M3FN,
    "f8E4M3B11FNUZ": P.F8E4M3B11FNUZ, "f8E3M4": P.F8E3M4,
    "f8E5M2FNUZ": P.F8E5M2FNUZ, "f8E4M3FNUZ": P.F8E4M3FNUZ,
    "f4E2M1FN": P.F4E2M1FN, "f8E8M0FNU": P.F8E8M0FNU,
}
_SIGNED = {1: P.PRED, 2: P.S2, 4: P.S4, 8: P.S8, 16: P.S16, 32: P.S32,
           64: P.S64}
_UNSIGNED = {2: P.U2, 4: P.U4, 8: P.U8, 16: P.U16, 32: P.U32, 64: P.U64}


def element_type(ty: t.Type) -> PrimitiveType:
  """The PrimitiveType of a StableHLO element type."""
  if isinstance(ty, t.IntegerType):
    table = _UNSIGNED if ty.unsigned else _SIGNED
    if ty.width in table:
      return table[ty.width]
  elif isinstance(ty, t.FloatType):
    if ty.name in _FLOATS:
      return _FLOATS[ty.name]
  elif isinstance(ty, t.ComplexType):
    inner = ty.element_type
    if inner == t.f32:
      return P.C64
    if inner == t.f64:
      return P.C128
  elif isinstance(ty, t.IndexType):
    return P.S64
  raise support.UnimplementedError(
      f"Unimplemented: element type {ty} has no HLO primitive type")


def default_layout(rank: int) -> tuple[int, ...]:
  return tuple(range(rank - 1, -1, -1))


def shape(ty: t.Type) -> Shape:
  """The HLO shape of a StableHLO value type (default layout)."""
  if isinstance(ty, t.RankedTensorType):
    if not ty.has_static_shape:
      raise support.UnimplementedError(
          f"Unimplemented: dynamic tensor type {ty} in HLO import")
    if ty.encoding is not None:
      raise support.UnimplementedError(
          f"Unimplemented: tensor encoding {ty.encoding} in HLO import")
    return Shape.array(element_type(ty.element_type), ty.shape,
                       layout=default_layout(len(ty.shape)))
  if isinstance(ty, t.TokenType):
    return Shape.token()
  if isinstance(ty, t.TupleType):
    return Shape.tuple_of(shape(e) for e in ty.types)
  if isinstance(ty, t.QuantizedType):
    raise support.UnimplementedError(
        "Unimplemented: quantized types in HLO import")
  raise support.UnimplementedError(
      f"Unimplemented: type {ty} in HLO import")


def literal(attr: a.Attribute, ty: t.Type) -> Literal:
  """The Literal of a `dense<...>` constant of type `ty`."""
  if not isinstance(attr, a.DenseElementsAttr):
    raise support.UnimplementedError(
        f"Unimplemented: constant attribute {type(attr).__name__} in HLO "
        "import")
  if isinstance(t.element_type_of(ty), t.QuantizedType):
    raise support.UnimplementedError(
        "Unimplemented: quantized constant in HLO import")
  s = shape(ty)
  dtype = primitive_util.numpy_dtype(s.element_type)
  arr = np.asarray(attr.array)
  if arr.dtype != dtype:
    arr = arr.astype(dtype)
  if arr.size == int(np.prod(s.dimensions, dtype=np.int64)):
    arr = arr.reshape(s.dimensions)
  arr = np.array(np.broadcast_to(arr, s.dimensions), order="C")
  return Literal(s, arr)
