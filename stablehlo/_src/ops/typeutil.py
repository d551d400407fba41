"""Type predicates, shape arithmetic and attribute readers for verifiers.

These follow the helper functions of the spec's "Notation" section
(`is_quantized`, `baseline_type`, `is_promotable`, ...) over the IR's type
objects. A dynamic dimension is `None`; comparisons treat it as compatible
with any size.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t

# --- element type predicates -------------------------------------------------


def element_type(ty: t.Type) -> t.Type:
  return t.element_type_of(ty)


def is_tensor(ty) -> bool:
  return isinstance(ty, (t.RankedTensorType, t.UnrankedTensorType))


def is_token(ty) -> bool:
  return isinstance(ty, t.TokenType) or (
      isinstance(ty, t.OpaqueType) and ty.body == "token")


def is_bool(e) -> bool:
  return isinstance(e, t.IntegerType) and e.width == 1


def is_integer(e) -> bool:
  """Integer element type, excluding booleans (i1)."""
  return isinstance(e, t.IntegerType) and e.width != 1


def is_signed_integer(e) -> bool:
  return is_integer(e) and not e.unsigned


def is_unsigned_integer(e) -> bool:
  return is_integer(e) and e.unsigned


def is_float(e) -> bool:
  return isinstance(e, t.FloatType)


def is_complex(e) -> bool:
  return isinstance(e, t.ComplexType)


def is_quantized(e) -> bool:
  return isinstance(e, t.QuantizedType)


def is_index(e) -> bool:
  return isinstance(e, t.IndexType)


def is_per_axis(e) -> bool:
  return is_quantized(e) and e.quantized_dimension is not None


def is_per_tensor(e) -> bool:
  return is_quantized(e) and e.quantized_dimension is None


_FLOAT_BITS = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "bf16": 16,
               "f16": 16, "f32": 32, "f64": 64, "tf32": 19}


def bitwidth(e) -> int:
  """Number of bits of an element type (complex: both halves)."""
  if isinstance(e, t.IntegerType):
    return e.width
  if isinstance(e, t.FloatType):
    return _FLOAT_BITS.get(e.name, 8)
  if isinstance(e, t.ComplexType):
    return 2 * bitwidth(e.element_type)
  if isinstance(e, t.QuantizedType):
    return e.storage_type.width
  if isinstance(e, t.IndexType):
    return 64
  raise TypeError(f"no bit width for {e!r}")


def storage_or_element(e):
  """`storage_type` of a quantized element type, the type itself otherwise."""
  return e.storage_type if is_quantized(e) else e


def quant_key(e):
  """A quantized element type without its scales and zero points (the
  spec's `baseline_element_type`)."""
  smin, smax = storage_range(e)
  return ("quant", e.storage_type.width, e.storage_type.unsigned or
          e.storage_unsigned, smin, smax, e.expressed_type,
          e.quantized_dimension)


def storage_range(e: t.QuantizedType) -> tuple[int, int]:
  w = e.storage_type.width
  if e.storage_type.unsigned or e.storage_unsigned:
    lo, hi = 0, 2**w - 1
  else:
    lo, hi = -(2**(w - 1)), 2**(w - 1) - 1
  return (lo if e.storage_min is None else e.storage_min,
          hi if e.storage_max is None else e.storage_max)


def baseline_element_type(e):
  return quant_key(e) if is_quantized(e) else e


def is_promotable(x, y) -> bool:
  """Spec `is_promotable`: same kind and no narrower (for reduction bodies)."""
  same_kind = ((is_bool(x) and is_bool(y)) or
               (is_integer(x) and is_integer(y)) or
               (is_float(x) and is_float(y)) or
               (is_complex(x) and is_complex(y)) or
               (is_quantized(x) and is_quantized(y) and
                x.expressed_type == y.expressed_type))
  if not same_kind:
    return False
  if is_bool(x):
    return True
  return bitwidth(x) <= bitwidth(y)


# --- shapes -------------------------------------------------------------------


def shape_of(ty) -> Optional[tuple]:
  """The dims of a ranked tensor; None for unranked tensors / non-tensors."""
  if isinstance(ty, t.RankedTensorType):
    return tuple(ty.shape)
  return None


def rank_of(ty) -> Optional[int]:
  s = shape_of(ty)
  return None if s is None else len(s)


def dims_compatible(x, y) -> bool:
  return x is None or y is None or x == y


def shapes_compatible(s1, s2) -> bool:
  if s1 is None or s2 is None:
    return True
  return len(s1) == len(s2) and all(
      dims_compatible(x, y) for x, y in zip(s1, s2))


def types_compatible(t1, t2, *, baseline: bool = False) -> bool:
  """Equal types up to dynamic dimensions (and scales with `baseline`)."""
  if is_tensor(t1) and is_tensor(t2):
    e1, e2 = element_type(t1), element_type(t2)
    if baseline:
      e1, e2 = baseline_element_type(e1), baseline_element_type(e2)
    return e1 == e2 and shapes_compatible(shape_of(t1), shape_of(t2))
  if isinstance(t1, t.TupleType) and isinstance(t2, t.TupleType):
    return len(t1.types) == len(t2.types) and all(
        types_compatible(x, y, baseline=baseline)
        for x, y in zip(t1.types, t2.types))
  return t1 == t2


def num_elements(shape) -> Optional[int]:
  if shape is None or any(d is None for d in shape):
    return None
  n = 1
  for d in shape:
    n *= d
  return n


def tensor(shape, elem) -> t.RankedTensorType:
  return t.RankedTensorType(tuple(shape), elem)


# --- formatting (for messages only; the text printer owns real syntax) -------


def fmt_elem(e) -> str:
  if isinstance(e, t.IntegerType):
    return ("ui" if e.unsigned else ("si" if e.signed else "i")) + str(e.width)
  if isinstance(e, t.FloatType):
    return e.name
  if isinstance(e, t.ComplexType):
    return f"complex<{fmt_elem(e.element_type)}>"
  if isinstance(e, t.IndexType):
    return "index"
  if isinstance(e, t.QuantizedType):
    axis = "" if e.quantized_dimension is None else f":{e.quantized_dimension}"
    return (f"!quant.uniform<{fmt_elem(e.storage_type)}:"
            f"{fmt_elem(e.expressed_type)}{axis}, {len(e.scales)} scales>")
  return fmt_type(e)


def fmt_shape(shape) -> str:
  if shape is None:
    return "*"
  return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def fmt_type(ty) -> str:
  if isinstance(ty, t.RankedTensorType):
    dims = "".join(("?" if d is None else str(d)) + "x" for d in ty.shape)
    return f"tensor<{dims}{fmt_elem(ty.element_type)}>"
  if isinstance(ty, t.UnrankedTensorType):
    return f"tensor<*x{fmt_elem(ty.element_type)}>"
  if isinstance(ty, t.TokenType):
    return "!stablehlo.token"
  if isinstance(ty, t.TupleType):
    return "tuple<" + ", ".join(fmt_type(x) for x in ty.types) + ">"
  if isinstance(ty, t.OpaqueType):
    return f"!{ty.dialect}.{ty.body}"
  if isinstance(ty, (t.IntegerType, t.FloatType, t.ComplexType, t.IndexType,
                     t.QuantizedType)):
    return fmt_elem(ty)
  return repr(ty)


def fmt_types(types) -> str:
  return "(" + ", ".join(fmt_type(x) for x in types) + ")"


# --- attribute readers ----------------------------------------------------------


def ints(v: Any) -> tuple:
  """An integer list from any of the spellings MLIR allows for it."""
  if isinstance(v, a.DenseArrayAttr):
    return tuple(int(x) for x in v.values)
  if isinstance(v, a.DenseElementsAttr):
    return tuple(int(x) for x in np.asarray(v.array).reshape(-1))
  if isinstance(v, a.ArrayAttr):
    return tuple(int_value(x) for x in v.elements)
  if isinstance(v, (list, tuple)):
    return tuple(int_value(x) for x in v)
  if isinstance(v, np.ndarray):
    return tuple(int(x) for x in v.reshape(-1))
  if isinstance(v, (a.IntegerAttr, int, np.integer)):
    return (int_value(v),)
  raise TypeError(f"not an integer list: {v!r}")


def int_matrix(v: Any) -> np.ndarray:
  """A 2-D integer attribute (e.g. padding) as an int64 array."""
  if isinstance(v, a.DenseElementsAttr):
    arr = np.asarray(v.array, dtype=np.int64)
    if arr.ndim == 0 and isinstance(v.type, t.RankedTensorType):
      arr = np.full(v.type.shape, int(arr), dtype=np.int64)
    return arr
  if isinstance(v, a.ArrayAttr):
    return np.array([list(ints(x)) for x in v.elements], dtype=np.int64)
  if isinstance(v, np.ndarray):
    return v.astype(np.int64)
  return np.array(v, dtype=np.int64)


def int_value(v: Any) -> int:
  if isinstance(v, bool):
    return int(v)
  if isinstance(v, (int, np.integer)):
    return int(v)
  if isinstance(v, a.IntegerAttr):
    return int(v.value)
  if isinstance(v, a.BoolAttr):
    return int(v.value)
  if isinstance(v, a.DenseElementsAttr) and np.asarray(v.array).size == 1:
    return int(np.asarray(v.array).reshape(-1)[0])
  raise TypeError(f"not an integer: {v!r}")


def bool_value(v: Any, default: bool = False) -> bool:
  if v is None:
    return default
  if isinstance(v, a.UnitAttr):
    return True
  if isinstance(v, a.BoolAttr):
    return v.value
  if isinstance(v, bool):
    return v
  if isinstance(v, a.IntegerAttr):
    return bool(v.value)
  return bool(v)


_ENUM_TEXT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*>?\s*$")


def enum_value(v: Any) -> Optional[str]:
  """The case name of an enum attribute, however it was modelled.

  Accepts `DialectAttr("stablehlo.comparison_direction", (("value", "EQ"),))`
  (any single parameter), `StringAttr("EQ")`, an `OpaqueAttr` holding
  `#stablehlo<comparison_direction EQ>`, or a plain string.
  """
  if v is None:
    return None
  if isinstance(v, str):
    return v
  if isinstance(v, a.StringAttr):
    return v.value
  if isinstance(v, a.DialectAttr):
    for _, val in v.params:
      return enum_value(val)
    return v.name.rsplit(".", 1)[-1]
  if isinstance(v, a.OpaqueAttr):
    m = _ENUM_TEXT.search(v.text)
    return m.group(1) if m else v.text
  if isinstance(v, a.IntegerAttr):
    return str(v.value)
  return str(v)


def enum_list(v: Any) -> tuple:
  if v is None:
    return ()
  if isinstance(v, a.ArrayAttr):
    return tuple(enum_value(x) for x in v.elements)
  if isinstance(v, (list, tuple)):
    return tuple(enum_value(x) for x in v)
  return (enum_value(v),)


class Params:
  """Uniform access to a structured attribute's fields.

  Works for `DialectAttr` (params), `DictionaryAttr` (entries) and plain
  dicts. Missing integer-list fields read as (), missing scalars as default.
  """

  def __init__(self, attr: Any):
    self.attr = attr

  def raw(self, key: str):
    v = self.attr
    if isinstance(v, a.DialectAttr):
      return v.get(key)
    if isinstance(v, a.DictionaryAttr):
      return v.get(key)
    if isinstance(v, dict):
      return v.get(key)
    return None

  def ints(self, key: str) -> tuple:
    v = self.raw(key)
    return () if v is None else ints(v)

  def int(self, key: str, default: int = 0) -> int:
    v = self.raw(key)
    return default if v is None else int_value(v)


def is_unique(xs: Sequence) -> bool:
  return len(set(xs)) == len(xs)


def is_sorted(xs: Sequence) -> bool:
  return all(x <= y for x, y in zip(xs, xs[1:]))
