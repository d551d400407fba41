"""StableHLO / MLIR types (spec section "Types").

Types are immutable, hashable value objects; equality is structural. The MLIR
text spelling of each type is produced by the printer (`stablehlo._src.text`),
not here, so that this module stays a plain data model.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

# Element-type names as MLIR spells them. Float names are MLIR's builtin float
# types; ml_dtypes provides the numpy dtype for each (see `numpy_dtype`).
FLOAT_TYPES = (
    "f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3", "f8E4M3FN",
    "f8E4M3FNUZ", "f8E4M3B11FNUZ", "f8E5M2", "f8E5M2FNUZ", "f8E8M0FNU",
    "bf16", "f16", "f32", "f64", "tf32",
)
INT_WIDTHS = (1, 2, 4, 8, 16, 32, 64)

DYNAMIC = None  # a dynamic dimension ('?') in a tensor shape


class Type:
  """Base of every type."""

  __slots__ = ()


@dataclasses.dataclass(frozen=True)
class IntegerType(Type):
  """`iN` (signless; StableHLO's signed integers and i1) or `uiN` (unsigned).

  `signed` is True only for the explicit `siN` spelling, which MLIR allows
  but StableHLO programs rarely use.
  """

  width: int
  unsigned: bool = False
  signed: bool = False


@dataclasses.dataclass(frozen=True)
class FloatType(Type):
  name: str  # one of FLOAT_TYPES


@dataclasses.dataclass(frozen=True)
class IndexType(Type):
  pass


@dataclasses.dataclass(frozen=True)
class NoneType(Type):
  pass


@dataclasses.dataclass(frozen=True)
class ComplexType(Type):
  element_type: Type


@dataclasses.dataclass(frozen=True)
class QuantizedType(Type):
  """`!quant.uniform<storage[:expressed][, axis], {scales...}>`.

  Per-tensor when `axis` is None (one scale / zero point), per-axis otherwise.
  """

  storage_type: IntegerType
  expressed_type: FloatType
  scales: tuple[float, ...]
  zero_points: tuple[int, ...]
  quantized_dimension: Optional[int] = None
  storage_min: Optional[int] = None
  storage_max: Optional[int] = None
  # Extra dialect-spelling details (e.g. `u8` vs `i8` storage prefix) that the
  # printer needs to reproduce the source text exactly.
  storage_unsigned: bool = False

  @property
  def is_per_axis(self) -> bool:
    return self.quantized_dimension is not None


@dataclasses.dataclass(frozen=True)
class RankedTensorType(Type):
  """`tensor<2x?x3xf32[, encoding]>`; a dynamic dimension is DYNAMIC (None)."""

  shape: tuple[Optional[int], ...]
  element_type: Type
  encoding: Optional[object] = None  # an Attribute, e.g. #stablehlo.bounds<...>

  @property
  def rank(self) -> int:
    return len(self.shape)

  @property
  def has_static_shape(self) -> bool:
    return None not in self.shape


@dataclasses.dataclass(frozen=True)
class UnrankedTensorType(Type):
  element_type: Type


@dataclasses.dataclass(frozen=True)
class TokenType(Type):
  """`!stablehlo.token`."""


@dataclasses.dataclass(frozen=True)
class TupleType(Type):
  types: tuple[Type, ...]


@dataclasses.dataclass(frozen=True)
class FunctionType(Type):
  inputs: tuple[Type, ...]
  results: tuple[Type, ...]


@dataclasses.dataclass(frozen=True)
class OpaqueType(Type):
  """A dialect type we carry verbatim, e.g. `!chlo.something<...>`."""

  dialect: str
  body: str


def is_tensor(t: Type) -> bool:
  return isinstance(t, (RankedTensorType, UnrankedTensorType))


def element_type_of(t: Type) -> Type:
  if isinstance(t, (RankedTensorType, UnrankedTensorType)):
    return t.element_type
  return t


# Convenience singletons used throughout.
i1 = IntegerType(1)
i32 = IntegerType(32)
i64 = IntegerType(64)
f32 = FloatType("f32")
f64 = FloatType("f64")
index = IndexType()
token = TokenType()
