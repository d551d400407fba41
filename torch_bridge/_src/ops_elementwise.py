"""Lowerings of elementwise ATen ops (arithmetic, math functions,
comparisons, selection, constants and dtype conversion).

Arithmetic runs in the result dtype torch inferred (its type promotion is
already in `meta["val"]`), so every operand is converted to it and broadcast
numpy-style; comparisons run in the promoted operand type (spec
`stablehlo.compare`, with compare_type FLOAT / SIGNED / UNSIGNED).
"""

from __future__ import annotations

import math

import torch

from torch_bridge._src import helpers as h
from torch_bridge._src.mlir import TensorType
from torch_bridge._src.registry import lowering


def _node_dtype_is_float(node) -> bool:
  val = node.meta.get("val")
  return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _float_result(node):
  if not _node_dtype_is_float(node):
    return "needs a floating-point result"
  return None


def _no_alpha(node):
  alpha = node.kwargs.get("alpha", 1)
  if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
    return f"alpha={alpha!r} is not a Python number"
  return None


def _binary(ctx, name, x, y):
  ty = ctx.out
  return ctx.b.op(name, [h.operand(ctx.b, x, ty), h.operand(ctx.b, y, ty)],
                  ty)


@lowering("aten.add.Tensor", "aten.add.Scalar", check=_no_alpha)
def add(ctx, x, y, alpha=1):
  if alpha != 1:
    y = _binary(ctx, "stablehlo.multiply", y, alpha)
  return _binary(ctx, "stablehlo.add", x, y)


@lowering("aten.sub.Tensor", "aten.sub.Scalar", check=_no_alpha)
def sub(ctx, x, y, alpha=1):
  if alpha != 1:
    y = _binary(ctx, "stablehlo.multiply", y, alpha)
  return _binary(ctx, "stablehlo.subtract", x, y)


@lowering("aten.rsub.Scalar", "aten.rsub.Tensor", check=_no_alpha)
def rsub(ctx, x, y, alpha=1):
  return sub(ctx, y, x, alpha)


@lowering("aten.mul.Tensor", "aten.mul.Scalar")
def mul(ctx, x, y):
  if ctx.out.dtype == "i1":
    return _binary(ctx, "stablehlo.and", x, y)
  return _binary(ctx, "stablehlo.multiply", x, y)


def _true_division(node):
  if node.kwargs.get("rounding_mode") is not None:
    return f"rounding_mode={node.kwargs['rounding_mode']!r}"
  return _float_result(node)


@lowering("aten.div.Tensor", "aten.div.Scalar", check=_true_division)
def div(ctx, x, y):
  return _binary(ctx, "stablehlo.divide", x, y)


def _numeric_result(node):
  val = node.meta.get("val")
  if not isinstance(val, torch.Tensor) or val.dtype == torch.bool:
    return "needs a numeric result"
  return None


def _rounding_division(node):
  mode = node.kwargs.get("rounding_mode")
  if mode not in ("floor", "trunc"):
    return f"rounding_mode={mode!r}"
  return _numeric_result(node)


def _off_divisor_sign(b, rem, y, ty):
  """Where a C remainder `rem` of division by `y` is nonzero and of the
  other sign than `y`: where floor division is one below truncating
  division and Python's % is rem + y."""
  zero = b.constant(0, ty)
  return b.op("stablehlo.and", [
      h.compare(b, rem, zero, "NE"),
      h.compare(b, h.compare(b, rem, zero, "LT"),
                h.compare(b, y, zero, "LT"), "NE")], ty.with_dtype("i1"))


@lowering("aten.div.Tensor_mode", "aten.div.Scalar_mode",
          check=_rounding_division)
def div_rounding(ctx, x, y, rounding_mode=None):
  """`torch.div(x, y, rounding_mode=...)`, `//` among them. Integers: the
  truncating quotient, one less where floor mode and a nonzero remainder
  of the other sign than the divisor. Floats: trunc(x / y), or torch's
  floor division, which rounds the exact quotient of x - fmod(x, y)
  (floor(x / y) of the rounded quotient can be one off)."""
  b, ty = ctx.b, ctx.out
  xv, yv = h.operand(b, x, ty), h.operand(b, y, ty)
  quotient = b.op("stablehlo.divide", [xv, yv], ty)
  zero = b.constant(0, ty)
  if not ty.is_float:
    if rounding_mode == "trunc":
      return quotient
    rem = b.op("stablehlo.remainder", [xv, yv], ty)
    return b.op("stablehlo.select", [
        _off_divisor_sign(b, rem, yv, ty),
        b.op("stablehlo.subtract", [quotient, b.constant(1, ty)], ty),
        quotient], ty)
  if rounding_mode == "trunc":
    # trunc(q) = sign(q) * floor(|q|).
    return b.op("stablehlo.multiply", [
        b.op("stablehlo.sign", [quotient], ty),
        b.op("stablehlo.floor", [b.op("stablehlo.abs", [quotient], ty)],
             ty)], ty)
  mod = b.op("stablehlo.remainder", [xv, yv], ty)
  div = b.op("stablehlo.divide",
             [b.op("stablehlo.subtract", [xv, mod], ty), yv], ty)
  one = b.constant(1, ty)
  div = b.op("stablehlo.select", [
      _off_divisor_sign(b, mod, yv, ty),
      b.op("stablehlo.subtract", [div, one], ty), div], ty)
  floor = b.op("stablehlo.floor", [div], ty)
  floor = b.op("stablehlo.select", [
      h.compare(b, b.op("stablehlo.subtract", [div, floor], ty),
                b.constant(0.5, ty), "GT"),
      b.op("stablehlo.add", [floor, one], ty), floor], ty)
  # A zero quotient keeps the sign of x / y; division by zero is x / y.
  signed_zero = b.op("stablehlo.multiply", [
      b.op("stablehlo.sign", [quotient], ty), zero], ty)
  floor = b.op("stablehlo.select", [h.compare(b, div, zero, "EQ"),
                                    signed_zero, floor], ty)
  return b.op("stablehlo.select", [h.compare(b, yv, zero, "EQ"), quotient,
                                   floor], ty)


@lowering("aten.maximum.default")
def maximum(ctx, x, y):
  return _binary(ctx, "stablehlo.maximum", x, y)


@lowering("aten.minimum.default")
def minimum(ctx, x, y):
  return _binary(ctx, "stablehlo.minimum", x, y)


def _pow_check(node):
  exponent = node.args[1]
  if isinstance(exponent, torch.fx.Node):
    return _float_result(node)
  if not _node_dtype_is_float(node) and (
      not isinstance(exponent, int) or exponent < 0):
    return "integer power needs a non-negative integer exponent"
  return None


@lowering("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", check=_pow_check)
def pow_(ctx, x, exponent):
  b, ty = ctx.b, ctx.out
  if not h.is_value(exponent):
    if exponent == 1:
      return h.operand(b, x, ty)
    if exponent == 2:
      xv = h.operand(b, x, ty)
      return b.op("stablehlo.multiply", [xv, xv], ty)
    if exponent == 3:
      # Multiplies, as torch's own kernel does: a general power costs a
      # log and an exp per element.
      xv = h.operand(b, x, ty)
      square = b.op("stablehlo.multiply", [xv, xv], ty)
      return b.op("stablehlo.multiply", [square, xv], ty)
    if ty.is_float and exponent in (0.5, -0.5, -1, -2):
      xv = h.operand(b, x, ty)
      if exponent == 0.5:
        return b.op("stablehlo.sqrt", [xv], ty)
      if exponent == -0.5:
        return b.op("stablehlo.rsqrt", [xv], ty)
      if exponent == -2:
        xv = b.op("stablehlo.multiply", [xv, xv], ty)
      return b.op("stablehlo.divide", [b.constant(1, ty), xv], ty)
  return _binary(ctx, "stablehlo.power", x, exponent)


# -- Unary math. ------------------------------------------------------------

_FLOAT_UNARY = {
    "aten.exp.default": "stablehlo.exponential",
    "aten.log.default": "stablehlo.log",
    "aten.tanh.default": "stablehlo.tanh",
    "aten.sigmoid.default": "stablehlo.logistic",
    "aten.rsqrt.default": "stablehlo.rsqrt",
    "aten.sqrt.default": "stablehlo.sqrt",
    "aten.sin.default": "stablehlo.sine",
    "aten.cos.default": "stablehlo.cosine",
    "aten.log1p.default": "stablehlo.log_plus_one",
    "aten.expm1.default": "stablehlo.exponential_minus_one",
    "aten.erf.default": "chlo.erf",
    "aten.floor.default": "stablehlo.floor",
    "aten.ceil.default": "stablehlo.ceil",
    # torch.round rounds half to even.
    "aten.round.default": "stablehlo.round_nearest_even",
    "aten.tan.default": "chlo.tan",
    "aten.sinh.default": "chlo.sinh",
    "aten.cosh.default": "chlo.cosh",
    "aten.asin.default": "chlo.asin",
    "aten.acos.default": "chlo.acos",
    "aten.atan.default": "chlo.atan",
    "aten.asinh.default": "chlo.asinh",
    "aten.acosh.default": "chlo.acosh",
    "aten.atanh.default": "chlo.atanh",
    "aten.erfc.default": "chlo.erfc",
    "aten.erfinv.default": "chlo.erf_inv",
    "aten.lgamma.default": "chlo.lgamma",
    "aten.digamma.default": "chlo.digamma",
}


def _unary(op_name):
  def lower(ctx, x):
    return ctx.b.op(op_name, [h.operand(ctx.b, x, ctx.out)], ctx.out)
  return lower


for _aten, _shlo in _FLOAT_UNARY.items():
  lowering(_aten, check=_float_result)(_unary(_shlo))


@lowering("aten.log2.default", "aten.log10.default", check=_float_result)
def log_base(ctx, x):
  """log(x) / log(base), as torch's CPU kernels compute it."""
  base = 2.0 if ctx.node.target.__name__.startswith("log2") else 10.0
  b, ty = ctx.b, ctx.out
  return b.op("stablehlo.divide", [
      b.op("stablehlo.log", [h.operand(b, x, ty)], ty),
      b.constant(math.log(base), ty)], ty)


@lowering("aten.atan2.default", check=_float_result)
def atan2(ctx, x, y):
  return _binary(ctx, "stablehlo.atan2", x, y)


@lowering("aten.isnan.default")
def isnan(ctx, x):
  if x.dtype not in ("f16", "bf16", "f32", "f64"):
    return ctx.b.constant(False, ctx.out)
  return h.compare(ctx.b, x, x, "NE")


@lowering("aten.fmod.Scalar", "aten.fmod.Tensor", check=_numeric_result)
def fmod(ctx, x, y):
  """C's fmod: the remainder has the sign of x (stablehlo.remainder)."""
  return _binary(ctx, "stablehlo.remainder", x, y)


@lowering("aten.remainder.Scalar", "aten.remainder.Tensor",
          check=_numeric_result)
def remainder(ctx, x, y):
  """Python's %: the remainder has the sign of y (fmod, plus y where the
  two signs differ and the remainder is not zero)."""
  b, ty = ctx.b, ctx.out
  xv, yv = h.operand(b, x, ty), h.operand(b, y, ty)
  rem = b.op("stablehlo.remainder", [xv, yv], ty)
  return b.op("stablehlo.select", [
      _off_divisor_sign(b, rem, yv, ty),
      b.op("stablehlo.add", [rem, yv], ty), rem], ty)


@lowering("aten.neg.default")
def neg(ctx, x):
  return ctx.b.op("stablehlo.negate", [x], ctx.out)


@lowering("aten.abs.default")
def abs_(ctx, x):
  return ctx.b.op("stablehlo.abs", [x], ctx.out)


@lowering("aten.sign.default", check=_float_result)
def sign(ctx, x):
  return ctx.b.op("stablehlo.sign", [x], ctx.out)


@lowering("aten.reciprocal.default", check=_float_result)
def reciprocal(ctx, x):
  return _binary(ctx, "stablehlo.divide", 1.0, x)


@lowering("aten.relu.default")
def relu(ctx, x):
  return _binary(ctx, "stablehlo.maximum", x, 0)


@lowering("aten.hardtanh.default", check=_float_result)
def hardtanh(ctx, x, min_val=-1.0, max_val=1.0):
  """clamp(x, min_val, max_val) (ReLU6 is hardtanh(0, 6)); NaN stays."""
  return _binary(ctx, "stablehlo.minimum",
                 _binary(ctx, "stablehlo.maximum", x, min_val), max_val)


def _positive(ctx, x):
  ty = ctx.out
  return h.compare(ctx.b, h.operand(ctx.b, x, ty), ctx.b.constant(0, ty),
                   "GT")


@lowering("aten.leaky_relu.default", check=_float_result)
def leaky_relu(ctx, x, negative_slope=0.01):
  """x where x > 0, else negative_slope * x (NaN stays NaN)."""
  return ctx.b.op("stablehlo.select", [
      _positive(ctx, x), h.operand(ctx.b, x, ctx.out),
      _binary(ctx, "stablehlo.multiply", x, negative_slope)], ctx.out)


@lowering("aten.elu.default", check=_float_result)
def elu(ctx, x, alpha=1.0, scale=1.0, input_scale=1.0):
  """scale * x where x > 0, else scale * alpha * (exp(input_scale x) - 1)
  (expm1, exact near 0)."""
  b, ty = ctx.b, ctx.out
  xv = h.operand(b, x, ty)
  inner = xv if input_scale == 1 else _binary(ctx, "stablehlo.multiply", xv,
                                              input_scale)
  neg = b.op("stablehlo.exponential_minus_one", [inner], ty)
  if scale * alpha != 1:
    neg = _binary(ctx, "stablehlo.multiply", neg, scale * alpha)
  pos = xv if scale == 1 else _binary(ctx, "stablehlo.multiply", xv, scale)
  return b.op("stablehlo.select", [_positive(ctx, x), pos, neg], ty)


def _gelu_check(node):
  approximate = node.kwargs.get(
      "approximate", node.args[1] if len(node.args) > 1 else "none")
  if approximate not in ("none", "tanh"):
    return f"approximate={approximate!r}"
  return _float_result(node)


@lowering("aten.gelu.default", check=_gelu_check)
def gelu(ctx, x, approximate="none"):
  """gelu(x) = x/2 (1 + erf(x / sqrt 2)), or the tanh approximation
  x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
  b, ty = ctx.b, ctx.out
  x = h.operand(b, x, ty)
  if approximate == "tanh":
    cube = b.op("stablehlo.multiply",
                [b.op("stablehlo.multiply", [x, x], ty), x], ty)
    inner = b.op("stablehlo.add", [
        x, b.op("stablehlo.multiply", [cube, b.constant(0.044715, ty)], ty)],
                 ty)
    inner = b.op("stablehlo.multiply",
                 [inner, b.constant(math.sqrt(2 / math.pi), ty)], ty)
    t = b.op("stablehlo.tanh", [inner], ty)
  else:
    t = b.op("chlo.erf", [
        b.op("stablehlo.multiply", [x, b.constant(math.sqrt(0.5), ty)], ty)],
             ty)
  one_plus = b.op("stablehlo.add", [t, b.constant(1.0, ty)], ty)
  half_x = b.op("stablehlo.multiply", [x, b.constant(0.5, ty)], ty)
  return b.op("stablehlo.multiply", [half_x, one_plus], ty)


def _clamp_check(node):
  for bound in list(node.args[1:3]) + [node.kwargs.get(k) for k in
                                        ("min", "max")]:
    if bound is not None and not isinstance(bound, (int, float)):
      return "tensor bounds are not supported"
  return None


@lowering("aten.clamp.default", check=_clamp_check)
def clamp(ctx, x, min=None, max=None):  # pylint: disable=redefined-builtin
  b, ty = ctx.b, ctx.out
  out = h.operand(b, x, ty)
  if min is not None:
    out = b.op("stablehlo.maximum", [out, b.constant(min, ty)], ty)
  if max is not None:
    out = b.op("stablehlo.minimum", [out, b.constant(max, ty)], ty)
  return out


@lowering("aten.clamp.Tensor", "aten.clamp_min.Tensor",
          "aten.clamp_max.Tensor")
def clamp_tensor(ctx, x, min=None, max=None):  # pylint: disable=redefined-builtin
  """clamp with tensor bounds (broadcast): max(x, min), then min(., max),
  as torch applies them (a min above max gives max)."""
  name = ctx.node.target.__name__
  if name.startswith("clamp_max"):
    min, max = None, min
  out = h.operand(ctx.b, x, ctx.out)
  if min is not None:
    out = _binary(ctx, "stablehlo.maximum", out, min)
  if max is not None:
    out = _binary(ctx, "stablehlo.minimum", out, max)
  return out


# -- Logic and bitwise. -------------------------------------------------------

def _bool_or_int(node):
  val = node.meta.get("val")
  if val is None or val.dtype.is_floating_point:
    return "needs bool or integer operands"
  return None


@lowering("aten.bitwise_and.Tensor", "aten.logical_and.default",
          check=_bool_or_int)
def bitwise_and(ctx, x, y):
  return _binary(ctx, "stablehlo.and", x, y)


@lowering("aten.bitwise_or.Tensor", "aten.logical_or.default",
          check=_bool_or_int)
def bitwise_or(ctx, x, y):
  return _binary(ctx, "stablehlo.or", x, y)


@lowering("aten.bitwise_not.default", check=_bool_or_int)
def bitwise_not(ctx, x):
  return ctx.b.op("stablehlo.not", [x], ctx.out)


@lowering("aten.logical_not.default")
def logical_not(ctx, x):
  return ctx.b.op("stablehlo.not", [h.convert(ctx.b, x, "i1")], ctx.out)


_COMPARISONS = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT",
                "ge": "GE"}


def _comparison(direction):
  def lower(ctx, x, y):
    dtype = h.promote(x, y)
    shape = ctx.out.shape
    ty = TensorType(shape, dtype)
    return h.compare(ctx.b, h.operand(ctx.b, x, ty), h.operand(ctx.b, y, ty),
                     direction)
  return lower


for _name, _direction in _COMPARISONS.items():
  lowering(f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(
      _comparison(_direction))


@lowering("aten.where.self")
def where(ctx, cond, x, y):
  b, ty = ctx.b, ctx.out
  pred = h.broadcast(b, h.convert(b, cond, "i1"), ty.shape)
  return b.op("stablehlo.select",
              [pred, h.operand(b, x, ty), h.operand(b, y, ty)], ty)


# -- Constants and conversion. -----------------------------------------------

def _plain_factory(node):
  """Factory ops: only strided CPU tensors without pinned memory."""
  layout = node.kwargs.get("layout")
  if layout not in (None, torch.strided):
    return f"layout={layout}"
  device = node.kwargs.get("device")
  if device is not None and torch.device(device).type != "cpu":
    return f"device={device}"
  if node.kwargs.get("pin_memory"):
    return "pin_memory=True"
  return None


@lowering("aten.full.default", check=_plain_factory)
def full(ctx, size, fill_value, **unused_kwargs):
  return ctx.b.constant(fill_value, ctx.out)


@lowering("aten.full_like.default", check=_plain_factory)
def full_like(ctx, x, fill_value, **unused_kwargs):
  return ctx.b.constant(fill_value, ctx.out)


@lowering("aten.empty.memory_format", check=_plain_factory)
def empty(ctx, size, **unused_kwargs):
  """Uninitialized memory in torch; zeros are one valid content."""
  return ctx.b.constant(0, ctx.out)


@lowering("aten.scalar_tensor.default", check=_plain_factory)
def scalar_tensor(ctx, value, **unused_kwargs):
  return ctx.b.constant(value, ctx.out)


@lowering("aten.arange.start_step", "aten.arange.start", "aten.arange.default",
          check=_plain_factory)
def arange(ctx, *args, **unused_kwargs):
  """start + step * iota, computed in the result dtype (torch computes in
  double and rounds; exact for the integer ranges models use)."""
  numbers = [a for a in args if isinstance(a, (int, float))]
  start, step = 0, 1
  if len(numbers) >= 2:
    start = numbers[0]
  if len(numbers) >= 3:
    step = numbers[2]
  b, ty = ctx.b, ctx.out
  iota = b.op("stablehlo.iota", [], ty, "iota_dimension = 0 : i64")
  if step != 1:
    iota = b.op("stablehlo.multiply", [iota, b.constant(step, ty)], ty)
  if start != 0:
    iota = b.op("stablehlo.add", [iota, b.constant(start, ty)], ty)
  return iota


def _to_copy_check(node):
  reason = _plain_factory(node)
  if reason:
    return reason
  fmt = node.kwargs.get("memory_format")
  if fmt not in (None, torch.preserve_format, torch.contiguous_format):
    return f"memory_format={fmt}"
  return None


@lowering("aten._to_copy.default", check=_to_copy_check)
def to_copy(ctx, x, **unused_kwargs):
  return h.convert(ctx.b, x, ctx.out.dtype)


def _contiguous_only(node):
  fmt = node.kwargs.get("memory_format")
  if fmt not in (None, torch.preserve_format, torch.contiguous_format):
    return f"memory_format={fmt}"
  return None


@lowering("aten.clone.default", check=_contiguous_only)
def clone(ctx, x, **unused_kwargs):
  return x


@lowering("aten.alias.default", "aten.lift_fresh_copy.default",
          "aten.detach.default")
def alias(ctx, x):
  return x


@lowering("aten.copy.default")
def copy(ctx, dst, src, non_blocking=False):
  return h.operand(ctx.b, src, ctx.out)
