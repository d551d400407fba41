"""`--chlo-legalize-to-stablehlo`: rewrites CHLO ops into StableHLO ops.

Covered: every `chlo.broadcast_*` op with a StableHLO counterpart
(operands are broadcast with `broadcast_in_dim` to the static result shape,
following `broadcast_dimensions` or numpy-style trailing alignment),
constant, constant_like, is_inf / is_pos_inf / is_neg_inf, square, conj,
tan, mulhi (through the double-width product), and top_k (sort on an iota
index plus slice). Any other CHLO op (the special functions: erf, lgamma,
digamma, ...; ragged_dot; scan) raises an Unimplemented error naming it: the
interpreter runs those ops directly, so `stablehlo-translate --interpret`
does not need this pass.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.transforms import chlo_complex
from stablehlo._src.transforms import chlo_decompositions
from stablehlo._src.transforms import chlo_expr
from stablehlo._src.transforms import rewrite
import support

# chlo.broadcast_X -> stablehlo.Y
_BROADCAST_BINARY = {
    "add": "add", "and": "and", "atan2": "atan2", "complex": "complex",
    "divide": "divide", "maximum": "maximum", "minimum": "minimum",
    "multiply": "multiply", "or": "or", "power": "power",
    "remainder": "remainder", "shift_left": "shift_left",
    "shift_right_arithmetic": "shift_right_arithmetic",
    "shift_right_logical": "shift_right_logical", "subtract": "subtract",
    "xor": "xor",
}

_Rule = Callable[[rewrite.Builder, core.Operation], list]
_RULES: dict[str, _Rule] = {}


def _rule(name):
  def wrap(fn):
    _RULES[name] = fn
    return fn
  return wrap


def _static(op: core.Operation, ty: t.Type) -> t.RankedTensorType:
  if not isinstance(ty, t.RankedTensorType) or not ty.has_static_shape:
    raise support.UnimplementedError(
        f"{op.name}: legalizing dynamic shapes is not supported")
  return ty


def _broadcast_to(b: rewrite.Builder, op, v: core.Value, shape, dims=None):
  ty = _static(op, v.type)
  if tuple(ty.shape) == tuple(shape):
    return v
  if dims is None:  # numpy-style: align trailing dimensions
    dims = range(len(shape) - ty.rank, len(shape))
  out = t.RankedTensorType(tuple(shape), ty.element_type)
  return b.one("stablehlo.broadcast_in_dim", [v], out, properties={
      "broadcast_dimensions": rewrite.i64_array(dims)})


def _broadcast_operands(b, op):
  result = _static(op, op.results[0].type)
  dims_attr = op.attr("broadcast_dimensions")
  lhs, rhs = op.operands[:2]
  dims = tuple(dims_attr.values) if isinstance(
      dims_attr, a.DenseArrayAttr) and dims_attr.values else None
  # broadcast_dimensions maps the lower-rank operand into the result.
  lrank, rrank = _static(op, lhs.type).rank, _static(op, rhs.type).rank
  lhs = _broadcast_to(b, op, lhs, result.shape,
                      dims if dims is not None and lrank < rrank else None)
  rhs = _broadcast_to(b, op, rhs, result.shape,
                      dims if dims is not None and rrank < lrank else None)
  return lhs, rhs, result


def _make_binary(stablehlo_name):
  def rule(b, op):
    lhs, rhs, result = _broadcast_operands(b, op)
    return [b.one("stablehlo." + stablehlo_name, [lhs, rhs], result)]
  return rule


for _chlo, _shlo in _BROADCAST_BINARY.items():
  _RULES["chlo.broadcast_" + _chlo] = _make_binary(_shlo)


def _enum(name: str, value: str) -> a.DialectAttr:
  return a.DialectAttr(name, (("value", value),), short_form=True)


@_rule("chlo.broadcast_compare")
def _compare(b, op):
  lhs, rhs, result = _broadcast_operands(b, op)
  direction = op.attr("comparison_direction").get("value")
  props = {"comparison_direction": _enum("stablehlo.comparison_direction",
                                         direction)}
  ctype = op.attr("compare_type")
  if ctype is not None:
    props["compare_type"] = _enum("stablehlo.comparison_type",
                                  ctype.get("value"))
  return [b.one("stablehlo.compare", [lhs, rhs], result, properties=props)]


@_rule("chlo.broadcast_select")
def _select(b, op):
  result = _static(op, op.results[0].type)
  pred, x, y = op.operands
  shape = result.shape
  ops = [_broadcast_to(b, op, v, shape) if _static(op, v.type).rank else v
         for v in (pred, x, y)]
  return [b.one("stablehlo.select", ops, result)]


@_rule("chlo.constant")
def _constant(b, op):
  return [b.one("stablehlo.constant", [], op.results[0].type,
                properties={"value": op.attr("value")})]


@_rule("chlo.constant_like")
def _constant_like(b, op):
  ty = _static(op, op.results[0].type)
  value = op.attr("value")
  scalar = runtime.from_attr(value) if isinstance(
      value, a.DenseElementsAttr) else np.asarray(
          value.value, dtype=runtime.numpy_dtype(ty))
  arr = np.asarray(scalar, dtype=runtime.numpy_dtype(ty)).reshape(())
  return [b.constant(arr, ty)]


def _splat(b, ty: t.RankedTensorType, value) -> core.Value:
  return b.constant(np.asarray(value, dtype=runtime.numpy_dtype(ty)), ty)


def _is_inf_rule(kind):
  def rule(b, op):
    x = op.operands[0]
    ty = _static(op, x.type)
    if kind == "any":
      x = b.one("stablehlo.abs", [x], ty)
    target = _splat(b, ty, -np.inf if kind == "neg" else np.inf)
    return [b.one("stablehlo.compare", [x, target], op.results[0].type,
                  properties={"comparison_direction": _enum(
                      "stablehlo.comparison_direction", "EQ")})]
  return rule


_RULES["chlo.is_inf"] = _is_inf_rule("any")
_RULES["chlo.is_pos_inf"] = _is_inf_rule("pos")
_RULES["chlo.is_neg_inf"] = _is_inf_rule("neg")


@_rule("chlo.square")
def _square(b, op):
  x = op.operands[0]
  return [b.one("stablehlo.multiply", [x, x], op.results[0].type)]


@_rule("chlo.tan")
def _tan(b, op):
  return [b.one("stablehlo.tan", list(op.operands), op.results[0].type)]


@_rule("chlo.conj")
def _conj(b, op):
  x = op.operands[0]
  ty = _static(op, x.type)
  et = ty.element_type
  if not isinstance(et, t.ComplexType):
    return [x]
  part = rewrite.with_element_type(ty, et.element_type)
  re = b.one("stablehlo.real", [x], part)
  im = b.one("stablehlo.imag", [x], part)
  neg = b.one("stablehlo.negate", [im], part)
  return [b.one("stablehlo.complex", [re, neg], ty)]


@_rule("chlo.mulhi")
def _mulhi(b, op):
  lhs, rhs, result = _broadcast_operands(b, op)
  et = result.element_type
  if not isinstance(et, t.IntegerType) or et.width > 64:
    raise support.UnimplementedError(
        f"chlo.mulhi: legalization supports integers up to 64 bits, got "
        f"{et}")
  if et.width == 64:
    fn = (chlo_decompositions.mulhi_u64 if et.unsigned else
          chlo_decompositions.mulhi_i64)
    return [fn(chlo_expr.E(b, lhs), chlo_expr.E(b, rhs)).v]
  wide_et = t.IntegerType(et.width * 2, et.unsigned)
  wide = rewrite.with_element_type(result, wide_et)
  l = b.one("stablehlo.convert", [lhs], wide)
  r = b.one("stablehlo.convert", [rhs], wide)
  p = b.one("stablehlo.multiply", [l, r], wide)
  shift = _splat(b, wide, et.width)
  kind = "stablehlo.shift_right_logical" if et.unsigned else \
      "stablehlo.shift_right_arithmetic"
  hi = b.one(kind, [p, shift], wide)
  return [b.one("stablehlo.convert", [hi], result)]


_RULES.update(chlo_decompositions.RULES)
_RULES.update(chlo_complex.RULES)  # complex asin, acos, atan, ... (+ real)


def run(module: core.Module) -> bool:
  """Legalizes every CHLO op; returns whether the module changed."""
  changed = False
  for fn in module.functions:
    for op in list(fn.walk()):
      for region in op.regions:
        for block in region.blocks:
          changed |= _legalize_block(block)
  return changed


def _legalize_block(block: core.Block) -> bool:
  mapping: dict = {}
  new_ops = []
  changed = False
  for op in block.operations:
    op.operands = [mapping.get(v, v) for v in op.operands]
    if op.dialect != "chlo" or op.name == "chlo.return":
      new_ops.append(op)
      continue
    rule = _RULES.get(op.name)
    if rule is None:
      raise support.UnimplementedError(
          f"{_where(op)}: {op.name} has no legalization to StableHLO yet")
    b = rewrite.Builder(op.location)
    results = rule(b, op)
    new_ops.extend(b.ops)
    for old, new in zip(op.results, results):
      mapping[old] = new
    changed = True
  block.operations = []
  for op in new_ops:
    block.append(op)
  # Uses inside nested regions of later ops.
  for op in block.operations:
    for inner in op.walk():
      if inner is not op:
        inner.operands = [mapping.get(v, v) for v in inner.operands]
  return changed


def _where(op) -> str:
  loc = op.location
  if loc is not None and loc.kind == "file":
    return f"{loc.filename}:{loc.line}:{loc.col}"
  return "<unknown>"
