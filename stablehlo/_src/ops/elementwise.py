"""Elementwise ops: unary and binary math, logic, compare, select, clamp,
convert, complex parts, bitcast_convert, reduce_precision, the deprecated
map, and the elementwise chlo ops (their broadcasting forms and
constant_like included).

Spec sections are named after the ops (docs/spec.md, "Ops").
"""

from __future__ import annotations

import functools
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu

_EW = frozenset({r.ELEMENTWISE})
_EWC = frozenset({r.ELEMENTWISE, r.COMMUTATIVE})


# This family's defaults for `registry.define_op`.
_define_op = functools.partial(r.define_op, traits=_EW)
_define_chlo_op = functools.partial(r.define_op, results=None, spec=False)


def _infer_same_as_operand(ctx):
  return [ctx.operand_types[0]]


# --- unary ops: baseline_type(operand) = baseline_type(result) ------------------

_UNARY_BASELINE = {
    # op: allowed element kinds (spec input table)
    "stablehlo.cbrt": "float|complex|quant",
    "stablehlo.ceil": "float|quant",
    "stablehlo.cosine": "float|complex|quant",
    "stablehlo.exponential": "float|complex|quant",
    "stablehlo.exponential_minus_one": "float|complex|quant",
    "stablehlo.floor": "float|quant",
    "stablehlo.log": "float|complex|quant",
    "stablehlo.log_plus_one": "float|complex|quant",
    "stablehlo.logistic": "float|complex|quant",
    "stablehlo.negate": "int|float|complex|quant",
    "stablehlo.round_nearest_afz": "float|quant",
    "stablehlo.round_nearest_even": "float|quant",
    "stablehlo.rsqrt": "float|complex|quant",
    "stablehlo.sign": "sint|float|complex|quant",
    "stablehlo.sine": "float|complex|quant",
    "stablehlo.sqrt": "float|complex|quant",
    "stablehlo.tan": "float|complex|quant",
    "stablehlo.tanh": "float|complex|quant",
}


def _unary_baseline(kinds):

  def verify(ctx):
    c.check_kinds(ctx, kinds)
    c.same_baseline(ctx, "c1", [ctx.operand_types[0], ctx.result_types[0]],
                    ["operand", "result"])

  return verify


for _name, _kinds in _UNARY_BASELINE.items():
  _define_op(_name, _unary_baseline(_kinds), ("c1",), ("operand",),
             infer=_infer_same_as_operand)

# --- unary / binary ops: type(x) = type(result) -----------------------------------

_SAME_TYPE = {
    "stablehlo.count_leading_zeros": (("operand",), "int"),
    "stablehlo.popcnt": (("operand",), "int"),
    "stablehlo.not": (("operand",), "bool|int"),
    "stablehlo.and": (("lhs", "rhs"), "bool|int"),
    "stablehlo.or": (("lhs", "rhs"), "bool|int"),
    "stablehlo.xor": (("lhs", "rhs"), "bool|int"),
    "stablehlo.shift_left": (("lhs", "rhs"), "int"),
    "stablehlo.shift_right_arithmetic": (("lhs", "rhs"), "int"),
    "stablehlo.shift_right_logical": (("lhs", "rhs"), "int"),
}


def _same_type(names, kinds):

  def verify(ctx):
    c.check_kinds(ctx, kinds)
    c.same_type(ctx, "c1", list(ctx.operand_types) + [ctx.result_types[0]],
                list(names) + ["result"])

  return verify


for _name, (_ops, _kinds) in _SAME_TYPE.items():
  _define_op(_name, _same_type(_ops, _kinds), ("c1",), _ops,
             traits=(_EWC if _name in ("stablehlo.and", "stablehlo.or",
                                       "stablehlo.xor") else _EW),
             infer=_infer_same_as_operand)

# --- binary ops: baseline_type(lhs) = baseline_type(rhs) = baseline_type(result)

_BINARY_BASELINE = {
    "stablehlo.atan2": ("float|complex|quant", _EW),
    "stablehlo.divide": ("int|float|complex|quant", _EW),
    "stablehlo.maximum": ("any", _EWC),
    "stablehlo.minimum": ("any", _EWC),
    "stablehlo.multiply": ("any", _EWC),
    "stablehlo.power": ("int|float|complex|quant", _EW),
    "stablehlo.remainder": ("int|float|complex|quant", _EW),
    "stablehlo.subtract": ("int|float|complex|quant", _EW),
}


def _binary_baseline(kinds):

  def verify(ctx):
    c.check_kinds(ctx, kinds)
    c.same_baseline(ctx, "c1", list(ctx.operand_types) + ctx.result_types,
                    ["lhs", "rhs", "result"])

  return verify


for _name, (_kinds, _traits) in _BINARY_BASELINE.items():
  _define_op(_name, _binary_baseline(_kinds), ("c1",), ("lhs", "rhs"),
             traits=_traits, infer=_infer_same_as_operand)


def _verify_add(ctx):
  lhs, rhs = ctx.operand_types
  res = ctx.result_types[0]
  c.check_kinds(ctx, "any")
  el, er, eo = (tu.element_type(x) for x in (lhs, rhs, res))
  if not any(tu.is_quantized(e) for e in (el, er, eo)):
    c.same_type(ctx, "c1", [lhs, rhs, res], ["lhs", "rhs", "result"])
    return
  ctx.check(all(tu.is_quantized(e) for e in (el, er, eo)), "c2",
            lambda: "lhs, rhs and result must all be quantized, got "
            f"{tu.fmt_types([lhs, rhs, res])}")
  ctx.check(el.storage_type == er.storage_type == eo.storage_type, "c3",
            lambda: "storage types differ: "
            f"{tu.fmt_types([lhs, rhs, res])}")
  ctx.check(el.expressed_type == er.expressed_type == eo.expressed_type, "c4",
            lambda: f"expressed types differ: {tu.fmt_types([lhs, rhs, res])}")
  ctx.check((tu.is_per_axis(el) or tu.is_per_axis(er)) == tu.is_per_axis(eo),
            "c5", "result must be per-axis quantized exactly when an operand "
            "is")
  for e, cid, nm in ((el, "c6", "lhs"), (er, "c7", "rhs")):
    if tu.is_per_axis(e):
      ctx.check(e.quantized_dimension == eo.quantized_dimension, cid,
                lambda e=e, nm=nm: f"{nm} quantization dimension "
                f"{e.quantized_dimension} differs from the result's "
                f"{eo.quantized_dimension}")
  ctx.check(tu.shapes_compatible(tu.shape_of(lhs), tu.shape_of(res)) and
            tu.shapes_compatible(tu.shape_of(rhs), tu.shape_of(res)),
            "add_schema", lambda: "operand and result shapes differ: "
            f"{tu.fmt_types([lhs, rhs, res])}")


_define_op("stablehlo.add", _verify_add,
           ("c1", "c2", "c3", "c4", "c5", "c6", "c7"), ("lhs", "rhs"),
           traits=_EWC, infer=_infer_same_as_operand)

# --- ops with their own element-type rules ---------------------------------------


def _part_type(e):
  return e.element_type if tu.is_complex(e) else e


def _verify_abs(ctx):
  c.check_kinds(ctx, "sint|float|complex|quant", "operands")
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.same_shape(ctx, "c1", [x, y], ["operand", "result"])
  want = tu.baseline_element_type(_part_type(tu.element_type(x)))
  got = tu.baseline_element_type(tu.element_type(y))
  ctx.check(want == got, "c2", lambda: f"result element type "
            f"{tu.fmt_elem(tu.element_type(y))} must be "
            f"{tu.fmt_elem(_part_type(tu.element_type(x)))}")


def _infer_abs(ctx):
  x = ctx.operand_types[0]
  return [t.RankedTensorType(x.shape, _part_type(x.element_type))]


_define_op("stablehlo.abs", _verify_abs, ("c1", "c2"), ("operand",),
           infer=_infer_abs)


def _real_imag(ctx):
  c.check_kinds(ctx, "float|complex", "operands")
  c.check_kinds(ctx, "float", "results")
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.same_shape(ctx, "c1", [x, y], ["operand", "result"])
  want = _part_type(tu.element_type(x))
  ctx.check(tu.element_type(y) == want, "c2", lambda: "result element type "
            f"{tu.fmt_elem(tu.element_type(y))} must be {tu.fmt_elem(want)}")


for _name in ("stablehlo.real", "stablehlo.imag"):
  _define_op(_name, _real_imag, ("c1", "c2"), ("operand",), infer=_infer_abs)


def _verify_complex(ctx):
  lhs, rhs = ctx.operand_types
  res = ctx.result_types[0]
  c.check_tensor(ctx, lhs, "lhs", "float")
  ctx.check(tu.element_type(lhs) in (t.f32, t.f64), "complex_schema",
            lambda: f"lhs must be f32 or f64, got {tu.fmt_type(lhs)}")
  c.check_tensor(ctx, res, "result", "complex")
  c.same_type(ctx, "c1", [lhs, rhs], ["lhs", "rhs"])
  c.same_shape(ctx, "c2", [res, lhs], ["result", "lhs"])
  want = t.ComplexType(tu.element_type(lhs))
  ctx.check(tu.element_type(res) == want, "c3", lambda: "result element type "
            f"{tu.fmt_elem(tu.element_type(res))} must be {tu.fmt_elem(want)}")


def _infer_complex(ctx):
  x = ctx.operand_types[0]
  return [t.RankedTensorType(x.shape, t.ComplexType(x.element_type))]


_define_op("stablehlo.complex", _verify_complex, ("c1", "c2", "c3"),
           ("lhs", "rhs"), infer=_infer_complex)


def _verify_is_finite(ctx):
  c.check_kinds(ctx, "float|quant", "operands")
  c.check_kinds(ctx, "bool", "results")
  c.same_shape(ctx, "c1", [ctx.operand_types[0], ctx.result_types[0]],
               ["x", "y"])


def _infer_bool(ctx):
  return [t.RankedTensorType(ctx.operand_types[0].shape, t.i1)]


_define_op("stablehlo.is_finite", _verify_is_finite, ("c1",), ("x",),
           results=("y",), infer=_infer_bool)

_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
_COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _verify_compare(ctx):
  lhs, rhs = ctx.operand_types
  res = ctx.result_types[0]
  c.check_kinds(ctx, "any", "operands")
  c.check_kinds(ctx, "bool", "results")
  direction = ctx.enum("comparison_direction")
  ctx.check(direction in _DIRECTIONS, "compare_schema",
            f"comparison_direction {direction!r} is not one of "
            f"{', '.join(_DIRECTIONS)}")
  c.same_baseline(ctx, "c1", [tu.tensor((), tu.element_type(lhs)),
                              tu.tensor((), tu.element_type(rhs))],
                  ["lhs", "rhs"])
  c.same_shape(ctx, "c2", [lhs, rhs, res], ["lhs", "rhs", "result"])
  ct = ctx.enum("compare_type")
  if ct is None:
    return
  ctx.check(ct in _COMPARE_TYPES, "compare_schema",
            f"compare_type {ct!r} is not one of {', '.join(_COMPARE_TYPES)}")
  e = tu.storage_or_element(tu.element_type(lhs))
  if tu.is_signed_integer(e):
    ok = ("SIGNED",)
  elif tu.is_unsigned_integer(e) or tu.is_bool(e):
    ok = ("UNSIGNED",)
  elif tu.is_float(e):
    ok = ("FLOAT", "TOTALORDER")
  elif tu.is_complex(e):
    ok = ("FLOAT",)
  else:
    ok = _COMPARE_TYPES
  ctx.check(ct in ok, "c3", lambda: f"compare_type {ct} does not fit element "
            f"type {tu.fmt_elem(tu.element_type(lhs))} (expected "
            f"{' or '.join(ok)})")


_define_op("stablehlo.compare", _verify_compare, ("c1", "c2", "c3"),
           ("lhs", "rhs"),
           attributes={"comparison_direction": "enum", "compare_type?": "enum"},
           infer=_infer_bool)


def _verify_select(ctx):
  pred, on_true, on_false = ctx.operand_types
  res = ctx.result_types[0]
  c.check_tensor(ctx, pred, "pred", "bool")
  pr = tu.rank_of(pred)
  if pr != 0:
    c.same_shape(ctx, "c1", [pred, on_true], ["pred", "on_true"])
  c.same_baseline(ctx, "c2", [on_true, on_false, res],
                  ["on_true", "on_false", "result"])


def _infer_select(ctx):
  return [ctx.operand_types[1]]


_define_op("stablehlo.select", _verify_select, ("c1", "c2"),
           ("pred", "on_true", "on_false"), infer=_infer_select)


def _verify_clamp(ctx):
  mn, x, mx = ctx.operand_types
  res = ctx.result_types[0]
  for ty, nm, cid in ((mn, "min", "c1"), (mx, "max", "c2")):
    if tu.rank_of(ty) != 0:
      c.same_shape(ctx, cid, [ty, x], [nm, "operand"])
  es = [tu.tensor((), tu.element_type(y)) for y in (mn, x, mx)]
  c.same_baseline(ctx, "c3", es, ["min", "operand", "max"])
  c.same_baseline(ctx, "c4", [x, res], ["operand", "result"])


_define_op("stablehlo.clamp", _verify_clamp, ("c1", "c2", "c3", "c4"),
           ("min", "operand", "max"), infer=_infer_select)


def _verify_convert(ctx):
  c.check_kinds(ctx, "bool|int|float|complex|index")
  c.same_shape(ctx, "c1", [ctx.operand_types[0], ctx.result_types[0]],
               ["operand", "result"])


_define_op("stablehlo.convert", _verify_convert, ("c1",), ("operand",))


def _verify_reduce_precision(ctx):
  c.check_kinds(ctx, "float|quant")
  c.same_baseline(ctx, "c1", [ctx.operand_types[0], ctx.result_types[0]],
                  ["operand", "output"])
  eb = ctx.int("exponent_bits")
  mb = ctx.int("mantissa_bits")
  ctx.check(eb >= 1, "c2", f"exponent_bits must be >= 1, got {eb}")
  ctx.check(mb >= 0, "c3", f"mantissa_bits must be >= 0, got {mb}")


_define_op("stablehlo.reduce_precision", _verify_reduce_precision,
           ("c1", "c2", "c3"), ("operand",), results=("output",),
           attributes={"exponent_bits": "i32", "mantissa_bits": "i32"},
           infer=_infer_same_as_operand)


def _verify_bitcast_convert(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  ex = tu.storage_or_element(tu.element_type(x))
  ey = tu.storage_or_element(tu.element_type(y))
  ctx.check(tu.is_complex(ex) == tu.is_complex(ey), "c2",
            lambda: "complex and non-complex types cannot be bitcast: "
            f"{tu.fmt_type(x)} -> {tu.fmt_type(y)}")
  sx, sy = tu.shape_of(x), tu.shape_of(y)
  if sx is None or sy is None:
    return
  bx, by = tu.bitwidth(ex), tu.bitwidth(ey)
  rank = len(sx)

  def msg():
    return (f"cannot bitcast {tu.fmt_type(x)} ({bx} bits) to "
            f"{tu.fmt_type(y)} ({by} bits)")

  if bx == by:
    ctx.check(tu.shapes_compatible(sx, sy), "c1", msg)
  elif by < bx:
    ctx.check(len(sy) == rank + 1 and tu.shapes_compatible(sx, sy[:rank]) and
              (sy[rank] is None or sy[rank] * by == bx), "c1", msg)
  else:
    ctx.check(len(sy) == rank - 1 and tu.shapes_compatible(sx[:-1], sy) and
              (sx[-1] is None or sx[-1] * bx == by), "c1", msg)


_define_op("stablehlo.bitcast_convert", _verify_bitcast_convert, ("c1", "c2"),
           ("operand",), traits=frozenset())

# --- map ----------------------------------------------------------------------


def _verify_map(ctx):
  ins = ctx.operand_types
  y = ctx.result_types[0]
  ctx.check(len(ins) > 0, "c2", "needs at least one input")
  c.same_shape(ctx, "c1", list(ins) + [y],
               [f"input #{i}" for i in range(len(ins))] + ["result"])
  dims = ctx.ints("dimensions")
  rank = tu.rank_of(ins[0])
  if rank is not None:
    ctx.check(list(dims) == list(range(rank)), "c3", lambda: f"dimensions "
              f"{list(dims)} must be [0, ..., {rank - 1}]")
  c.check_region(ctx, "c4", 0, "computation",
                 [tu.tensor((), tu.element_type(x)) for x in ins],
                 [tu.tensor((), tu.element_type(y))])


_define_op("stablehlo.map", _verify_map, ("c1", "c2", "c3", "c4"), ("inputs*",),
           results=("result",), attributes={"dimensions": "i64[]"},
           regions=("computation",), traits=frozenset({r.DEPRECATED}))

# --- chlo (outside the spec) --------------------------------------------------

_CHLO_UNARY = ("acos", "acosh", "asin", "asinh", "atan", "atanh",
               "bessel_i1e", "conj", "cosh", "digamma", "erf", "erf_inv",
               "erfc", "lgamma", "sinh", "square", "tan")
_CHLO_PREDICATES = ("is_inf", "is_neg_inf", "is_pos_inf")
_CHLO_BINARY = ("next_after", "polygamma", "zeta", "mulhi")
_CHLO_BROADCAST = ("broadcast_add", "broadcast_and", "broadcast_atan2",
                   "broadcast_complex", "broadcast_compare",
                   "broadcast_divide", "broadcast_maximum",
                   "broadcast_minimum", "broadcast_multiply",
                   "broadcast_next_after", "broadcast_or",
                   "broadcast_polygamma", "broadcast_power",
                   "broadcast_remainder", "broadcast_select",
                   "broadcast_shift_left", "broadcast_shift_right_arithmetic",
                   "broadcast_shift_right_logical", "broadcast_subtract",
                   "broadcast_xor", "broadcast_zeta")


def _chlo_same_type(ctx):
  for i, x in enumerate(ctx.operand_types):
    c.same_types(ctx, [x], ctx.result_types[:1], f"operand #{i} and result")


def _chlo_predicate(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.check_tensor(ctx, x, "operand", "float")
  c.check_tensor(ctx, y, "result", "bool")
  c.same_shape(ctx, ctx.short + "_schema", [x, y], ["operand", "result"])


for _n in _CHLO_UNARY:
  _define_chlo_op("chlo." + _n, _chlo_same_type, operands=("operand",),
                  results=("result",), traits=frozenset({r.ELEMENTWISE}),
                  infer=lambda ctx: [ctx.operand_types[0]])
for _n in _CHLO_PREDICATES:
  _define_chlo_op("chlo." + _n, _chlo_predicate, operands=("operand",),
                  results=("result",), traits=frozenset({r.ELEMENTWISE}))
for _n in _CHLO_BINARY:
  _define_chlo_op("chlo." + _n, _chlo_same_type, operands=("lhs", "rhs"),
                  results=("result",), traits=frozenset({r.ELEMENTWISE}),
                  infer=lambda ctx: [ctx.operand_types[0]])
for _n in _CHLO_BROADCAST:
  _define_chlo_op("chlo." + _n, None, operands=None, results=("result",),
                  attributes={"broadcast_dimensions?": "i64[]"})
_define_chlo_op("chlo.constant_like", None, operands=("operand",),
                results=("result",), attributes={"value": "attr"})
