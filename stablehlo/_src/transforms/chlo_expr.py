"""A tiny expression layer over `rewrite.Builder` for writing CHLO
decompositions as formulas: `E` wraps a value and overloads arithmetic and
comparisons so that each operator emits the matching StableHLO op; Python
numbers become splat constants of the other operand's type."""

from __future__ import annotations

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.transforms import rewrite


_MAX_FINITE = {
    "f16": 65504.0, "bf16": 3.3895313892515355e38,
    "f32": float(np.finfo(np.float32).max),
    "f64": float(np.finfo(np.float64).max)}


def enum(name: str, value: str) -> a.DialectAttr:
  return a.DialectAttr(name, (("value", value),), short_form=True)


class E:
  """A value under construction; `b` is the builder collecting its ops."""

  def __init__(self, b: rewrite.Builder, value: core.Value):
    self.b = b
    self.v = value

  @property
  def type(self) -> t.RankedTensorType:
    return self.v.type

  @property
  def et(self):
    return self.v.type.element_type

  def max_finite(self) -> float:
    return _MAX_FINITE[self.et.name]

  # -- construction -------------------------------------------------------
  def const(self, value, ty=None) -> "E":
    ty = ty or self.type
    arr = np.asarray(value, dtype=runtime.numpy_dtype(ty))
    return E(self.b, self.b.constant(arr, ty))

  def _lift(self, other) -> "E":
    return other if isinstance(other, E) else self.const(other)

  def op(self, name: str, *others, ty=None, **kw) -> "E":
    ops = [self.v] + [self._lift(o).v for o in others]
    return E(self.b, self.b.one("stablehlo." + name, ops, ty or self.type,
                                **kw))

  # -- arithmetic ---------------------------------------------------------
  def __add__(self, o): return self.op("add", o)
  def __radd__(self, o): return self._lift(o).op("add", self)
  def __sub__(self, o): return self.op("subtract", o)
  def __rsub__(self, o): return self._lift(o).op("subtract", self)
  def __mul__(self, o): return self.op("multiply", o)
  def __rmul__(self, o): return self._lift(o).op("multiply", self)
  def __truediv__(self, o): return self.op("divide", o)
  def __rtruediv__(self, o): return self._lift(o).op("divide", self)
  def __neg__(self): return self.op("negate")
  def __and__(self, o): return self.op("and", o)
  def __or__(self, o): return self.op("or", o)
  def __xor__(self, o): return self.op("xor", o)
  def __invert__(self): return self.op("not")

  def __pow__(self, o): return self.op("power", o)

  # -- comparisons --------------------------------------------------------
  def cmp(self, direction: str, o) -> "E":
    ty = rewrite.with_element_type(self.type, t.i1)
    return self.op("compare", o, ty=ty, properties={
        "comparison_direction": enum("stablehlo.comparison_direction",
                                     direction)})

  def __lt__(self, o): return self.cmp("LT", o)
  def __le__(self, o): return self.cmp("LE", o)
  def __gt__(self, o): return self.cmp("GT", o)
  def __ge__(self, o): return self.cmp("GE", o)
  def eq(self, o): return self.cmp("EQ", o)
  def ne(self, o): return self.cmp("NE", o)

  __hash__ = object.__hash__

  # -- unary functions ----------------------------------------------------
  def abs(self): return self.op("abs")
  def exp(self): return self.op("exponential")
  def expm1(self): return self.op("exponential_minus_one")
  def log(self): return self.op("log")
  def log1p(self): return self.op("log_plus_one")
  def sqrt(self): return self.op("sqrt")
  def rsqrt(self): return self.op("rsqrt")
  def sin(self): return self.op("sine")
  def cos(self): return self.op("cosine")
  def tan(self): return self.op("tan")
  def floor(self): return self.op("floor")
  def round_even(self): return self.op("round_nearest_even")
  def sign(self): return self.op("sign")
  def is_finite(self):
    return self.op("is_finite", ty=rewrite.with_element_type(self.type, t.i1))
  def atan2(self, o): return self.op("atan2", o)
  def max(self, o): return self.op("maximum", o)
  def min(self, o): return self.op("minimum", o)
  def rem(self, o): return self.op("remainder", o)

  def convert(self, et) -> "E":
    if et == self.et:
      return self
    return self.op("convert", ty=rewrite.with_element_type(self.type, et))

  def bitcast(self, et) -> "E":
    return self.op("bitcast_convert",
                   ty=rewrite.with_element_type(self.type, et))

  def clamp(self, lo, hi) -> "E":
    lo, hi = self._lift(lo), self._lift(hi)
    return E(self.b, self.b.one("stablehlo.clamp", [lo.v, self.v, hi.v],
                                self.type))

  def is_nan(self) -> "E":
    return self.ne(self)

  def poly(self, coeffs) -> "E":
    """Horner: coeffs[0] * x^(n-1) + ... + coeffs[-1]."""
    acc = self.const(coeffs[0])
    for c in coeffs[1:]:
      acc = acc * self + c
    return acc


def select(pred: E, on_true, on_false) -> E:
  """`stablehlo.select`; Python numbers take the other branch's type."""
  if not isinstance(on_true, E):
    on_true = on_false.const(on_true)
  if not isinstance(on_false, E):
    on_false = on_true.const(on_false)
  return E(pred.b, pred.b.one("stablehlo.select",
                              [pred.v, on_true.v, on_false.v], on_true.type))
