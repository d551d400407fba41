"""Kernels of the elementwise CHLO ops (docs/generated/chlo.md upstream):
the math functions, predicates, `mulhi`, `next_after`, `constant_like` and
every `chlo.broadcast_*` op.

Functions are evaluated in float64 / complex128 and rounded once (see
`kernels_elementwise_common`); the special functions are in
`kernels_elementwise_special`. The `broadcast_*` ops broadcast their
operands (numpy rules, or `broadcast_dimensions` mapping the lower-rank
operand's dimensions into the result's) and then run the kernel of the op
they broadcast.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.interpreter import kernels_elementwise_common as C
from stablehlo._src.interpreter import kernels_elementwise_special as S
from stablehlo._src.ir import attributes as a
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

FLOAT, COMPLEX = C.FLOAT, C.COMPLEX



def _unary(real_fn, complex_fn=None):

  def kernel(ctx, op, args):
    et = C.result_et(op)
    if C.kind(et) not in (FLOAT, COMPLEX):
      raise support.InvalidArgumentError(
          f"{op.name} needs a float or complex type, got {tu.fmt_elem(et)}")
    if C.kind(et) == COMPLEX and complex_fn is None:
      raise support.UnimplementedError(f"{op.name} on complex numbers")
    return C.float_map(args[0], et, real_fn, complex_fn)

  return kernel


def _binary_float(fn):

  def kernel(ctx, op, args):
    et = C.result_et(op)
    if C.kind(et) != FLOAT:
      raise support.InvalidArgumentError(
          f"{op.name} needs a float type, got {tu.fmt_elem(et)}")
    return C.float_map2(args[0], args[1], et, fn)

  return kernel


def _compute_dtype(et) -> np.dtype:
  """CHLO's decompositions compute f16 / bf16 (and narrower) in f32."""
  return np.dtype(np.float64) if et.name == "f64" else np.dtype(np.float32)


def _exp_in(v: np.ndarray) -> np.ndarray:
  return np.exp(v.astype(np.float64)).astype(v.dtype)


def _expm1_in(v: np.ndarray) -> np.ndarray:
  return np.expm1(v.astype(np.float64)).astype(v.dtype)


def _cosh_sinh_large(v: np.ndarray, sign: float) -> np.ndarray:
  # e^(x + log(1/2)) +- e^(log(1/2) - x), each step rounded to v's type.
  half_log = np.log(v.dtype.type(0.5)).astype(v.dtype)
  a = _exp_in(v + half_log)
  b = _exp_in(half_log - v)
  return a + b if sign > 0 else a - b


def _cosh_sinh(is_sinh: bool):
  """chlo.cosh / chlo.sinh the way CHLO decomposes them (upstream runs the
  corpus after that legalization, and XLA uses the same formulas), so
  results carry the same rounding: the large-|x| form for cosh and complex
  arguments, expm1-based for sinh when |x| < 1."""

  def kernel(ctx, op, args):
    et = C.result_et(op)
    x = args[0]
    if C.kind(et) == COMPLEX:
      z = C.upcast(x, et)
      big = np.exp(z + np.log(0.5))
      small = np.exp(np.log(0.5) - z)
      return C.round_float(big - small if is_sinh else big + small, et)
    if C.kind(et) != FLOAT:
      raise support.InvalidArgumentError(
          f"{op.name} needs a float or complex type, got {tu.fmt_elem(et)}")
    v = np.asarray(x).astype(_compute_dtype(et))
    if not is_sinh:
      r = _cosh_sinh_large(v, 1.0)
    else:
      large = _cosh_sinh_large(v, -1.0)
      e = _expm1_in(v)
      one = v.dtype.type(1.0)
      small = v.dtype.type(0.5) * (e + e / (e + one))
      r = np.where(np.abs(v) < one, small, large)
    return C.round_float(r, et)

  return kernel


@registry.interpreter_kernel("chlo.conj")
def _conj(ctx, op, args):
  return np.conj(args[0])


@registry.interpreter_kernel("chlo.square")
def _square(ctx, op, args):
  return registry.lookup("stablehlo.multiply").interpreter(
      ctx, op, [args[0], args[0]])


def _predicate(fn):

  def kernel(ctx, op, args):
    return fn(C.upcast(args[0], C.operand_et(op)))

  return kernel


def mulhi(x, y, et):
  """The high `width` bits of the double-width product."""
  w = C.width(et)
  signed = C.kind(et) == C.SINT
  if w <= 32:
    wide = np.int64 if signed else np.uint64
    p = x.astype(wide) * y.astype(wide)
    return C.finish_int(p >> wide(w), et) if C.is_narrow_int(et) else (
        (p >> wide(w)).astype(C.dtype(et)))
  a_, b_ = C.to_bits(x, et), C.to_bits(y, et)
  m32 = np.uint64(0xFFFFFFFF)
  s32 = np.uint64(32)
  a0, a1, b0, b1 = a_ & m32, a_ >> s32, b_ & m32, b_ >> s32
  p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
  mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
  hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
  if signed:
    hi = hi - np.where(x < 0, b_, np.uint64(0))
    hi = hi - np.where(y < 0, a_, np.uint64(0))
  return C.from_bits(hi, et)


@registry.interpreter_kernel("chlo.mulhi")
def _mulhi(ctx, op, args):
  et = C.result_et(op)
  if C.kind(et) not in (C.SINT, C.UINT):
    raise support.InvalidArgumentError(f"chlo.mulhi needs integers, got {et}")
  x, y = np.broadcast_arrays(np.asarray(args[0]), np.asarray(args[1]))
  return mulhi(x, y, et)


def next_after(x, y, et):
  """The neighbour of x in the direction of y (C nextafter)."""
  if et.name in ("f16", "f32", "f64"):
    # numpy's float16 nextafter returns x (not y) for x == y = -+0.
    return np.where(x == y, y, np.nextafter(x, y))
  w = C.width(et)
  xf, yf = C.upcast(x, et), C.upcast(y, et)
  u = C.to_bits(x, et)
  sign = np.uint64(1 << (w - 1))
  one = np.uint64(1)
  away = (xf < yf) == (xf > 0)  # move the magnitude up
  r = np.where(away, u + one, u - one)
  r = np.where(xf == 0, np.where(yf > 0, one, sign | one), r)
  out = C.from_bits(r, et)
  out = np.where(xf == yf, y, out)
  nan = np.isnan(xf) | np.isnan(yf)
  return np.where(nan, np.asarray(np.nan).astype(C.dtype(et)), out)


@registry.interpreter_kernel("chlo.next_after")
def _next_after(ctx, op, args):
  et = C.result_et(op)
  x, y = np.broadcast_arrays(np.asarray(args[0]), np.asarray(args[1]))
  return next_after(x, y, et)


@registry.interpreter_kernel("chlo.constant_like")
def _constant_like(ctx, op, args):
  """A splat of `value` shaped like the operand."""
  v = op.attr("value")
  dt = C.dtype(C.result_et(op))
  shape = np.shape(args[0])
  if isinstance(v, a.DenseElementsAttr):
    val = np.asarray(v.array).reshape(-1)[0] if np.size(v.array) else 0
  elif isinstance(v, (a.FloatAttr, a.IntegerAttr, a.BoolAttr)):
    val = v.value
  else:
    raise support.InvalidArgumentError(
        f"chlo.constant_like: unsupported value {v!r}")
  return np.full(shape, np.asarray(val)).astype(dt)


# --- broadcasting ops ---------------------------------------------------------

_BROADCAST_OF = {
    "chlo.broadcast_add": "stablehlo.add",
    "chlo.broadcast_and": "stablehlo.and",
    "chlo.broadcast_atan2": "stablehlo.atan2",
    "chlo.broadcast_complex": "stablehlo.complex",
    "chlo.broadcast_compare": "stablehlo.compare",
    "chlo.broadcast_divide": "stablehlo.divide",
    "chlo.broadcast_maximum": "stablehlo.maximum",
    "chlo.broadcast_minimum": "stablehlo.minimum",
    "chlo.broadcast_multiply": "stablehlo.multiply",
    "chlo.broadcast_next_after": "chlo.next_after",
    "chlo.broadcast_or": "stablehlo.or",
    "chlo.broadcast_polygamma": "chlo.polygamma",
    "chlo.broadcast_power": "stablehlo.power",
    "chlo.broadcast_remainder": "stablehlo.remainder",
    "chlo.broadcast_select": "stablehlo.select",
    "chlo.broadcast_shift_left": "stablehlo.shift_left",
    "chlo.broadcast_shift_right_arithmetic": "stablehlo.shift_right_arithmetic",
    "chlo.broadcast_shift_right_logical": "stablehlo.shift_right_logical",
    "chlo.broadcast_subtract": "stablehlo.subtract",
    "chlo.broadcast_xor": "stablehlo.xor",
    "chlo.broadcast_zeta": "chlo.zeta",
}


def broadcast_operands(arrays, broadcast_dimensions=None) -> list:
  """Broadcasts to a common shape. With `broadcast_dimensions`, the
  lower-rank operand's dimension i becomes result dimension
  broadcast_dimensions[i] (XLA's rule); otherwise shapes align on the
  right (numpy)."""
  arrays = [np.asarray(x) for x in arrays]
  if broadcast_dimensions is not None and len(arrays) == 2:
    r = max(x.ndim for x in arrays)
    bd = tuple(broadcast_dimensions)
    out = []
    for x in arrays:
      if x.ndim < r:
        if len(bd) != x.ndim:
          raise support.InvalidArgumentError(
              f"broadcast_dimensions {list(bd)} do not match an operand of "
              f"rank {x.ndim}")
        shape = [1] * r
        for i, d in enumerate(bd):
          shape[d] = x.shape[i]
        x = x.reshape(shape)
      out.append(x)
    arrays = out
  try:
    return list(np.broadcast_arrays(*arrays))
  except ValueError as e:
    raise support.InvalidArgumentError(
        f"operand shapes {[x.shape for x in arrays]} are not "
        "broadcast-compatible") from e


def _broadcasting(base: str):

  def kernel(ctx, op, args):
    bd = op.attr("broadcast_dimensions")
    dims = tu.ints(bd) if bd is not None else None
    xs = broadcast_operands(args, dims)
    k = registry.lookup(base).interpreter
    return k(ctx, op, [np.array(x) for x in xs])

  return kernel


# --- registration -------------------------------------------------------------

registry.register_interpreter("chlo.acos", _unary(np.arccos, np.arccos))
registry.register_interpreter("chlo.acosh", _unary(np.arccosh, np.arccosh))
registry.register_interpreter("chlo.asin", _unary(np.arcsin, np.arcsin))
registry.register_interpreter("chlo.asinh", _unary(np.arcsinh, np.arcsinh))
registry.register_interpreter("chlo.atan", _unary(np.arctan, np.arctan))
registry.register_interpreter("chlo.atanh", _unary(np.arctanh, np.arctanh))
registry.register_interpreter("chlo.cosh", _cosh_sinh(False))
registry.register_interpreter("chlo.sinh", _cosh_sinh(True))
registry.register_interpreter("chlo.tan", _unary(np.tan, C.complex_tan))
registry.register_interpreter("chlo.bessel_i1e", _unary(S.bessel_i1e))
registry.register_interpreter("chlo.digamma", _unary(S.digamma))
registry.register_interpreter("chlo.erf", _unary(S.erf))
registry.register_interpreter("chlo.erfc", _unary(S.erfc))
registry.register_interpreter("chlo.erf_inv", _unary(S.erf_inv))
registry.register_interpreter("chlo.lgamma", _unary(S.lgamma))
registry.register_interpreter("chlo.is_inf", _predicate(np.isinf))
registry.register_interpreter("chlo.is_pos_inf",
                              _predicate(lambda v: v == np.inf))
registry.register_interpreter("chlo.is_neg_inf",
                              _predicate(lambda v: v == -np.inf))
registry.register_interpreter("chlo.polygamma", _binary_float(S.polygamma))
registry.register_interpreter("chlo.zeta", _binary_float(S.zeta))
for _name, _base in _BROADCAST_OF.items():
  registry.register_interpreter(_name, _broadcasting(_base))
