"""Quantization ops (uniform_quantize, uniform_dequantize) and the checks
every quantized element type must pass (spec "Types": quantized element
types), which the module verifier applies to all op operands / results."""

from __future__ import annotations

import functools
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


# This family's defaults for `registry.define_op`.
_define_op = functools.partial(r.define_op, operands=("operand",),
                               traits=frozenset({r.ELEMENTWISE}))


def quantized_type_problem(e: t.QuantizedType, shape=None):
  """Why `e` is not a valid quantized element type (None if it is).

  Covers the spec's quantized-type rules: storage range within the storage
  type, positive finite scales, zero points within the storage range, one
  scale per zero point, and for per-axis types a valid quantization
  dimension whose size matches the number of scales.
  """
  lo, hi = tu.storage_range(e)
  w = e.storage_type.width
  unsigned = e.storage_type.unsigned or e.storage_unsigned
  tlo, thi = (0, 2**w - 1) if unsigned else (-(2**(w - 1)), 2**(w - 1) - 1)
  if not tlo <= lo <= hi <= thi:
    return (f"storage range [{lo}, {hi}] does not fit "
            f"{tu.fmt_elem(e.storage_type)}")
  if not tu.is_float(e.expressed_type):
    return f"expressed type {tu.fmt_elem(e.expressed_type)} is not a float"
  if len(e.scales) != len(e.zero_points):
    return (f"{len(e.scales)} scales but {len(e.zero_points)} zero points")
  if any(not s > 0 or s == float("inf") for s in e.scales):
    return f"scales {list(e.scales)} must be positive and finite"
  if any(not lo <= z <= hi for z in e.zero_points):
    return f"zero points {list(e.zero_points)} outside [{lo}, {hi}]"
  if e.quantized_dimension is None:
    if len(e.scales) != 1:
      return f"a per-tensor type needs one scale, has {len(e.scales)}"
  elif shape is not None:
    qd = e.quantized_dimension
    if not 0 <= qd < len(shape):
      return f"quantization dimension {qd} out of range [0, {len(shape)})"
    if shape[qd] is not None and shape[qd] != len(e.scales):
      return (f"dimension {qd} has size {shape[qd]} but there are "
              f"{len(e.scales)} scales")
  return None


def _verify_uniform_quantize(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.check_tensor(ctx, x, "operand", "float|qaxis")
  c.check_tensor(ctx, y, "result", "qaxis")
  c.same_shape(ctx, "c1", [x, y], ["operand", "result"])
  ex, ey = tu.element_type(x), tu.element_type(y)
  want = ex if tu.is_float(ex) else ex.expressed_type
  ctx.check(ey.expressed_type == want, "c2", lambda: "result expressed type "
            f"{tu.fmt_elem(ey.expressed_type)} must be {tu.fmt_elem(want)}")


_define_op("stablehlo.uniform_quantize", _verify_uniform_quantize, ("c1", "c2"))


def _verify_uniform_dequantize(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.check_tensor(ctx, x, "operand", "qaxis")
  c.check_tensor(ctx, y, "result", "float")
  c.same_shape(ctx, "c1", [x, y], ["operand", "result"])
  ex = tu.element_type(x)
  ctx.check(tu.element_type(y) == ex.expressed_type, "c2", lambda: "result "
            f"element type {tu.fmt_elem(tu.element_type(y))} must be the "
            f"expressed type {tu.fmt_elem(ex.expressed_type)}")


def _infer_dequantize(ctx):
  x = ctx.operand_types[0]
  return [t.RankedTensorType(x.shape, x.element_type.expressed_type)]


_define_op("stablehlo.uniform_dequantize", _verify_uniform_dequantize,
           ("c1", "c2"), infer=_infer_dequantize)
