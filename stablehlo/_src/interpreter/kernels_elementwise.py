"""Kernels of the elementwise StableHLO ops (spec sections "abs" ... "xor"),
and `map`.

Every kernel works on whole numpy arrays of any shape (regions such as
reduction bodies run them batched). Element types come from the op's
operand / result types, never the shapes. Semantics per element type:

* booleans (i1): logical ops; add = or, multiply = and, max = or, min = and.
* integers: two's complement, wrapping; i2 / i4 / u2 / u4 are computed in
  int64 / uint64 and wrapped back (`common.as_wide_int` / `finish_int`).
  Division by zero gives -1 (all bits set) and remainder by zero the
  dividend; INT_MIN / -1 gives INT_MIN and INT_MIN % -1 gives 0 (XLA's
  definition; the spec leaves these open).
* floats: IEEE arithmetic in the type itself (f16 / f32 / f64, and narrow
  types through float64 with one rounding); transcendental functions in
  double precision, rounded once (as the upstream reference interpreter).
* complex: complex64 / complex128, functions in complex128.

`convert`, `bitcast_convert` and `reduce_precision` live in
`kernels_elementwise_convert`, the CHLO ops in `kernels_elementwise_chlo`;
both register when this module is imported.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.interpreter import kernels_elementwise_common as C
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

BOOL, SINT, UINT, FLOAT, COMPLEX = C.BOOL, C.SINT, C.UINT, C.FLOAT, C.COMPLEX



def _unsupported(op, et):
  return support.InvalidArgumentError(
      f"{op.name} is not defined for element type {tu.fmt_elem(et)}")


# --- arithmetic ---------------------------------------------------------------


def _arith(np_fn, bool_fn=None):
  """A binary op that is `np_fn` on integers (wrapping) and floats."""

  def kernel(ctx, op, args):
    x, y = args
    et = C.result_et(op)
    k = C.kind(et)
    if k == BOOL:
      if bool_fn is None:
        raise _unsupported(op, et)
      return bool_fn(x, y)
    if k in (SINT, UINT):
      return C.finish_int(np_fn(C.as_wide_int(x, et), C.as_wide_int(y, et)),
                          et)
    if C.native_float(et):
      return np_fn(x, y)
    return C.float_map2(x, y, et, np_fn)

  return kernel


def int_div_rem(x, y, et):
  """Truncating integer division and remainder with XLA's results for
  division by zero and INT_MIN / -1 (see the module doc)."""
  xw, yw = C.as_wide_int(x, et), C.as_wide_int(y, et)
  zero = yw == 0
  if C.kind(et) == SINT:
    lo, _ = C.int_min_max(et)
    overflow = (xw == lo) & (yw == -1)
  else:
    lo = 0
    overflow = np.zeros(np.shape(zero), np.bool_)
  bad = zero | overflow
  safe = np.where(bad, np.ones((), yw.dtype), yw)
  r = np.fmod(xw, safe)
  q = (xw - r) // safe  # exact
  all_ones = -1 if C.kind(et) == SINT else C.int_min_max(et)[1]
  q = np.where(zero, np.asarray(all_ones).astype(q.dtype), q)
  q = np.where(overflow, np.asarray(lo).astype(q.dtype), q)
  r = np.where(zero, xw, np.where(overflow, np.zeros((), r.dtype), r))
  return C.finish_int(q, et), C.finish_int(r, et)


@registry.interpreter_kernel("stablehlo.divide")
def _divide(ctx, op, args):
  """spec: divide."""
  x, y = args
  et = C.result_et(op)
  k = C.kind(et)
  if k in (SINT, UINT):
    return int_div_rem(x, y, et)[0]
  if k == COMPLEX:
    # As upstream: complex<double> division, rounded to the type.
    return C.float_map2(x, y, et, None, np.divide)
  if k == FLOAT:
    if C.native_float(et):
      return np.divide(x, y)
    return C.float_map2(x, y, et, np.divide)
  raise _unsupported(op, et)


@registry.interpreter_kernel("stablehlo.remainder")
def _remainder(ctx, op, args):
  """spec: remainder - the sign of the dividend; floats by fmod (exact)."""
  x, y = args
  et = C.result_et(op)
  k = C.kind(et)
  if k in (SINT, UINT):
    return int_div_rem(x, y, et)[1]
  if k == FLOAT:
    return C.float_map2(x, y, et, np.fmod)
  if k == COMPLEX:
    raise support.UnimplementedError(
        "stablehlo.remainder on complex numbers (the spec leaves it TBD, "
        "openxla/stablehlo#997)")
  raise _unsupported(op, et)


def int_power(x, y, et):
  """Integer power by repeated squaring, wrapping; a negative exponent
  gives 0 unless |base| = 1 (upstream's definition)."""
  w = C.width(et)
  if C.kind(et) == SINT:
    # Two's complement modulo 2^64 (sign-extended), exponent magnitude.
    base = np.asarray(C.as_wide_int(x, et)).astype(np.int64).view(np.uint64)
    yv = np.asarray(C.as_wide_int(y, et)).astype(np.int64)
    neg = yv < 0
    xv = np.asarray(C.as_wide_int(x, et)).astype(np.int64)
    unit = (xv == 1) | (xv == -1)
    e = np.where(neg, -yv, yv).view(np.uint64)  # |INT_MIN| wraps: fine
  else:
    base = C.to_bits(x, et)
    e = C.to_bits(y, et)
    neg = unit = None
  e = e & np.uint64((1 << w) - 1 if w < 64 else 0xFFFFFFFFFFFFFFFF)
  result = np.ones(np.broadcast_shapes(base.shape, e.shape), np.uint64)
  base = np.broadcast_to(base, result.shape).copy()
  e = np.broadcast_to(e, result.shape).copy()
  while np.any(e):
    odd = (e & np.uint64(1)) != 0
    result = np.where(odd, result * base, result)
    base = base * base
    e = e >> np.uint64(1)
  if neg is not None:
    result = np.where(neg & ~unit, np.uint64(0), result)
  return C.from_bits(result, et)


@registry.interpreter_kernel("stablehlo.power")
def _power(ctx, op, args):
  """spec: power."""
  x, y = args
  et = C.result_et(op)
  k = C.kind(et)
  if k in (SINT, UINT):
    return int_power(x, y, et)
  if k in (FLOAT, COMPLEX):
    return C.float_map2(x, y, et, np.power, np.power)
  raise _unsupported(op, et)


def _max_min(is_max: bool):

  def kernel(ctx, op, args):
    x, y = args
    et = C.result_et(op)
    return max_min(x, y, et, is_max)

  return kernel


def max_min(x, y, et, is_max: bool):
  k = C.kind(et)
  if k == BOOL:
    return np.logical_or(x, y) if is_max else np.logical_and(x, y)
  if k in (SINT, UINT):
    xw, yw = C.as_wide_int(x, et), C.as_wide_int(y, et)
    return C.finish_int(np.maximum(xw, yw) if is_max else np.minimum(xw, yw),
                        et)
  if k == FLOAT:
    return _fmaxmin(x, y, et, is_max)
  if k == COMPLEX:
    # Lexicographic on (real, imag), as upstream.
    xr, yr = np.real(x), np.real(y)
    if is_max:
      pick = np.where(xr == yr, np.imag(x) > np.imag(y), xr > yr)
    else:
      pick = np.where(xr == yr, np.imag(x) < np.imag(y), xr < yr)
    return np.where(pick, x, y)
  raise support.InvalidArgumentError(f"max/min of {et}")


def _fmaxmin(x, y, et, is_max):
  native = C.native_float(et)
  xa = x if native else C.upcast(x, et)
  ya = y if native else C.upcast(y, et)
  r = np.maximum(xa, ya) if is_max else np.minimum(xa, ya)
  zeros = (xa == 0) & (ya == 0)
  if np.any(zeros):
    xneg = np.signbit(xa)
    pick = np.where(xneg, ya, xa) if is_max else np.where(xneg, xa, ya)
    r = np.where(zeros, pick, r)
  return r if native else C.round_float(r, et)


@registry.interpreter_kernel("stablehlo.clamp")
def _clamp(ctx, op, args):
  """spec: clamp = min(max(operand, min), max); min / max may be
  scalars."""
  lo, x, hi = args
  et = C.result_et(op)
  return max_min(max_min(x, lo, et, True), hi, et, False)


@registry.interpreter_kernel("stablehlo.negate")
def _negate(ctx, op, args):
  x = args[0]
  et = C.result_et(op)
  k = C.kind(et)
  if k in (SINT, UINT):
    return C.finish_int(np.negative(C.as_wide_int(x, et)), et)
  if k == FLOAT and not C.native_float(et):
    return C.float_map(x, et, np.negative)
  if k in (FLOAT, COMPLEX):
    return np.negative(x)
  raise _unsupported(op, et)


@registry.interpreter_kernel("stablehlo.abs")
def _abs(ctx, op, args):
  """spec: abs - integers wrap (|INT_MIN| = INT_MIN); complex -> the
  modulus in the component type."""
  x = args[0]
  et = C.operand_et(op)
  k = C.kind(et)
  if k in (SINT, UINT):
    return C.finish_int(np.abs(C.as_wide_int(x, et)), et)
  if k == FLOAT:
    if C.native_float(et):
      return np.abs(x)
    return C.float_map(x, et, np.abs)
  if k == COMPLEX:
    return C.round_float(np.abs(C.upcast(x, et)), et.element_type)
  raise _unsupported(op, et)


@registry.interpreter_kernel("stablehlo.sign")
def _sign(ctx, op, args):
  """spec: sign."""
  x = args[0]
  et = C.result_et(op)
  k = C.kind(et)
  if k in (SINT, UINT):
    xw = C.as_wide_int(x, et)
    return C.finish_int(np.where(xw > 0, 1, np.where(xw < 0, -1, 0)), et)
  if k == FLOAT:
    return C.float_map(x, et, lambda v: np.where(
        v > 0, 1.0, np.where(v < 0, -1.0, v)))  # keeps +-0 and NaN
  if k == COMPLEX:

    def csign(z):
      nan = np.isnan(z.real) | np.isnan(z.imag)
      zero = z == 0
      mag = np.where(zero | nan, 1.0, np.abs(z))
      r = (z.real / mag) + 1j * (z.imag / mag)  # z / |z| part by part
      r = np.where(zero, 0j, r)
      return np.where(nan, complex(np.nan, np.nan), r)

    return C.float_map(x, et, None, csign)
  raise _unsupported(op, et)


# --- bitwise ------------------------------------------------------------------


def _bitwise(np_fn, bool_fn):

  def kernel(ctx, op, args):
    et = C.result_et(op)
    k = C.kind(et)
    if k == BOOL:
      return bool_fn(*args)
    if k in (SINT, UINT):
      return C.finish_int(np_fn(*[C.as_wide_int(a, et) for a in args]), et)
    raise _unsupported(op, et)

  return kernel


def _sign_extend(u: np.ndarray, w: int) -> np.ndarray:
  """int64 values of w-bit two's complement patterns held in uint64."""
  u = np.asarray(u, dtype=np.uint64)
  if w == 64:
    return u.view(np.int64)
  v = u.astype(np.int64)
  return np.where(v >= (1 << (w - 1)), v - (1 << w), v)


def shift(x, y, et, how: str):
  """Shifts with the amount read as unsigned: amounts >= the bit width give
  0 (left, logical) or the sign fill (arithmetic)."""
  w = C.width(et)
  u = C.to_bits(x, et)
  s = C.to_bits(y, et)
  big = s >= np.uint64(w)
  sc = np.where(big, np.uint64(0), s)
  if how == "left":
    r = np.where(big, np.uint64(0), u << sc)
  elif how == "logical":
    r = np.where(big, np.uint64(0), u >> sc)
  else:
    v = _sign_extend(u, w)
    sa = np.where(big, np.uint64(w - 1), s).astype(np.int64)
    r = np.asarray(v >> sa, dtype=np.int64).view(np.uint64)
  return C.from_bits(r, et)


def _shift(how: str):

  def kernel(ctx, op, args):
    et = C.result_et(op)
    if C.kind(et) not in (SINT, UINT):
      raise _unsupported(op, et)
    return shift(args[0], args[1], et, how)

  return kernel


@registry.interpreter_kernel("stablehlo.popcnt")
def _popcnt(ctx, op, args):
  et = C.result_et(op)
  if C.kind(et) not in (SINT, UINT):
    raise _unsupported(op, et)
  n = np.bitwise_count(C.to_bits(args[0], et))
  return C.finish_int(n.astype(np.int64), et) if C.is_narrow_int(et) else (
      n.astype(C.dtype(et)))


def bit_length(u: np.ndarray) -> np.ndarray:
  """Number of significant bits of uint64 values."""
  u = np.asarray(u, dtype=np.uint64)
  n = np.zeros(u.shape, np.int64)
  for s in (32, 16, 8, 4, 2, 1):
    hi = (u >> np.uint64(s)) != 0
    n = n + np.where(hi, s, 0)
    u = np.where(hi, u >> np.uint64(s), u)
  return n + (u != 0)


@registry.interpreter_kernel("stablehlo.count_leading_zeros")
def _count_leading_zeros(ctx, op, args):
  et = C.result_et(op)
  if C.kind(et) not in (SINT, UINT):
    raise _unsupported(op, et)
  n = C.width(et) - bit_length(C.to_bits(args[0], et))
  return C.finish_int(n, et) if C.is_narrow_int(et) else n.astype(
      C.dtype(et))


# --- compare / select ---------------------------------------------------------

_CMP = {"EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal,
        "GT": np.greater, "LE": np.less_equal, "LT": np.less}


def total_order_key(x, et) -> np.ndarray:
  """int64 keys that order floats as IEEE totalOrder: -NaN < -inf < ... <
  -0 < +0 < ... < +inf < +NaN."""
  w = C.width(et)
  u = C.to_bits(x, et)
  neg = (u >> np.uint64(w - 1)) & np.uint64(1)
  mag = (u & np.uint64((1 << (w - 1)) - 1)).astype(np.int64)
  return np.where(neg != 0, -mag - 1, mag)


def compare(x, y, et, direction: str, compare_type) -> np.ndarray:
  """spec: compare."""
  fn = _CMP.get(direction)
  if fn is None:
    raise support.InvalidArgumentError(
        f"unknown comparison_direction {direction!r}")
  k = C.kind(et)
  if k == FLOAT:
    if compare_type == "TOTALORDER":
      # As XLA: every direction compares the totalOrder keys.
      return fn(total_order_key(x, et), total_order_key(y, et))
    if not C.native_float(et):
      x, y = C.upcast(x, et), C.upcast(y, et)
    return fn(x, y)
  if k == COMPLEX and direction not in ("EQ", "NE"):
    xr, yr, xi, yi = np.real(x), np.real(y), np.imag(x), np.imag(y)
    return fn(xr, yr) & ~(xr == yr) | (xr == yr) & fn(xi, yi)
  if k in (SINT, UINT):
    x, y = C.as_wide_int(x, et), C.as_wide_int(y, et)
  return fn(x, y)


@registry.interpreter_kernel("stablehlo.compare")
def _compare(ctx, op, args):
  et = C.operand_et(op)
  direction = tu.enum_value(op.attr("comparison_direction"))
  ctype = tu.enum_value(op.attr("compare_type"))
  return np.asarray(compare(args[0], args[1], et, direction, ctype))


@registry.interpreter_kernel("stablehlo.select")
def _select(ctx, op, args):
  pred, on_true, on_false = args
  return np.where(pred, on_true, on_false)


# --- complex parts ------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.complex")
def _complex(ctx, op, args):
  re, im = np.broadcast_arrays(args[0], args[1])
  out = np.empty(re.shape, C.dtype(C.result_et(op)))
  out.real = re
  out.imag = im
  return out


@registry.interpreter_kernel("stablehlo.real")
def _real(ctx, op, args):
  x = args[0]
  if C.kind(C.operand_et(op)) == COMPLEX:
    return np.real(x).copy()
  return x


@registry.interpreter_kernel("stablehlo.imag")
def _imag(ctx, op, args):
  x = args[0]
  if C.kind(C.operand_et(op)) == COMPLEX:
    return np.imag(x).copy()
  return np.zeros(np.shape(x), C.dtype(C.result_et(op)))


@registry.interpreter_kernel("stablehlo.is_finite")
def _is_finite(ctx, op, args):
  return np.isfinite(C.upcast(args[0], C.operand_et(op)))


# --- float functions ----------------------------------------------------------


def _unary(real_fn, complex_fn=None):

  def kernel(ctx, op, args):
    et = C.result_et(op)
    if C.kind(et) not in (FLOAT, COMPLEX):
      raise _unsupported(op, et)
    return C.float_map(args[0], et, real_fn, complex_fn)

  return kernel


def round_afz(v):
  """Round half away from zero, exactly (no x + 0.5 rounding error)."""
  t = np.trunc(v)
  frac = v - t
  r = t + np.where(np.abs(frac) >= 0.5, np.sign(v), 0.0)
  return np.copysign(r, v)


def _cbrt_complex(z):
  # The principal cube root (upstream's formula).
  theta = np.arctan2(z.imag, z.real) / 3.0
  mag = np.power(z.real * z.real + z.imag * z.imag, 1.0 / 6.0)
  return mag * (np.cos(theta) + 1j * np.sin(theta))


def expm1_complex(z):
  """exp(z) - 1 without cancellation near 0."""
  x, y = z.real, z.imag
  s = np.sin(0.5 * y)
  re = np.expm1(x) * np.cos(y) - 2.0 * s * s
  im = np.exp(x) * np.sin(y)
  out = np.where(np.abs(z) < 1.0, re + 1j * im, np.exp(z) - 1.0)
  return out


def log1p_complex(z):
  """log(1 + z) without cancellation near 0."""
  x, y = z.real, z.imag
  re = 0.5 * np.log1p(x * (2.0 + x) + y * y)
  im = np.arctan2(y, 1.0 + x)
  return np.where(np.abs(z) < 0.5, re + 1j * im, np.log(1.0 + z))


def _logistic_real(v):
  return 1.0 / (1.0 + np.exp(-v))


def atan2_complex(y, x):
  # atan2(y, x) = -i * log((x + i y) / sqrt(x^2 + y^2)) (upstream).
  return -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))


@registry.interpreter_kernel("stablehlo.atan2")
def _atan2(ctx, op, args):
  et = C.result_et(op)
  if C.kind(et) not in (FLOAT, COMPLEX):
    raise _unsupported(op, et)
  return C.float_map2(args[0], args[1], et, np.arctan2, atan2_complex)


# --- map ----------------------------------------------------------------------


_BATCHABLE_EXTRA = frozenset(("stablehlo.return", "chlo.constant_like"))


def _batchable(region) -> bool:
  """True if every op of the region is elementwise (or a scalar constant),
  so that running it once on whole arrays computes every element."""
  for block in region.blocks:
    for o in block.operations:
      if o.regions:
        return False
      if o.name in ("stablehlo.constant", "chlo.constant"):
        if any(tu.rank_of(r.type) != 0 for r in o.results):
          return False
        continue
      if o.name in _BATCHABLE_EXTRA:
        continue
      d = registry.lookup(o.name)
      if d is None or registry.ELEMENTWISE not in d.traits:
        return False
  return True


@registry.interpreter_kernel("stablehlo.map")
def _map(ctx, op, args):
  """spec: map - the region applied elementwise. A region of elementwise
  ops runs once on the whole arrays (the kernels are shape-agnostic); any
  other region runs once per element."""
  region = op.regions[0]
  arrays = [np.asarray(a) for a in args]
  shape = np.broadcast_shapes(*[a.shape for a in arrays]) if arrays else ()
  dt = C.dtype(C.result_et(op))
  if _batchable(region):
    out = np.asarray(ctx.run_region(region, arrays)[0])
    return np.broadcast_to(out, shape).astype(dt)
  result = np.empty(shape, dt)
  for idx in np.ndindex(*shape):
    elems = [np.asarray(a[idx]) for a in arrays]
    result[idx] = np.asarray(ctx.run_region(region, elems)[0])
  return result


# --- registration -------------------------------------------------------------

registry.register_interpreter("stablehlo.add", _arith(np.add, np.logical_or))
registry.register_interpreter("stablehlo.subtract", _arith(np.subtract))
registry.register_interpreter("stablehlo.multiply",
                              _arith(np.multiply, np.logical_and))
registry.register_interpreter("stablehlo.maximum", _max_min(True))
registry.register_interpreter("stablehlo.minimum", _max_min(False))
registry.register_interpreter("stablehlo.and",
                              _bitwise(np.bitwise_and, np.logical_and))
registry.register_interpreter("stablehlo.or",
                              _bitwise(np.bitwise_or, np.logical_or))
registry.register_interpreter("stablehlo.xor",
                              _bitwise(np.bitwise_xor, np.logical_xor))
registry.register_interpreter("stablehlo.not",
                              _bitwise(np.invert, np.logical_not))
registry.register_interpreter("stablehlo.shift_left", _shift("left"))
registry.register_interpreter("stablehlo.shift_right_logical",
                              _shift("logical"))
registry.register_interpreter("stablehlo.shift_right_arithmetic",
                              _shift("arithmetic"))
registry.register_interpreter("stablehlo.exponential",
                              _unary(np.exp, C.complex_exp))
registry.register_interpreter("stablehlo.exponential_minus_one",
                              _unary(
    np.expm1, lambda z: C.fix_complex_expm1(z, expm1_complex(z))))
registry.register_interpreter("stablehlo.log", _unary(np.log, C.complex_log))
registry.register_interpreter("stablehlo.log_plus_one",
                              _unary(
             np.log1p, lambda z: C.fix_complex_log1p(z, log1p_complex(z))))
registry.register_interpreter("stablehlo.logistic",
                              _unary(_logistic_real, _logistic_real))
registry.register_interpreter("stablehlo.sine", _unary(np.sin, C.complex_sin))
registry.register_interpreter("stablehlo.cosine", _unary(np.cos, C.complex_cos))
registry.register_interpreter("stablehlo.tan", _unary(np.tan, C.complex_tan))
registry.register_interpreter("stablehlo.tanh", _unary(np.tanh, C.complex_tanh))
registry.register_interpreter("stablehlo.sqrt", _unary(np.sqrt, C.complex_sqrt))
registry.register_interpreter("stablehlo.rsqrt",
                              _unary(lambda v: 1.0 / np.sqrt(v),
                                     lambda z: 1.0 / np.sqrt(z)))
registry.register_interpreter("stablehlo.cbrt", _unary(np.cbrt, _cbrt_complex))
registry.register_interpreter("stablehlo.floor", _unary(np.floor))
registry.register_interpreter("stablehlo.ceil", _unary(np.ceil))
registry.register_interpreter("stablehlo.round_nearest_even", _unary(np.rint))
registry.register_interpreter("stablehlo.round_nearest_afz", _unary(round_afz))

# Sibling families: imported for their registrations.
# pylint: disable=g-import-not-at-top,unused-import,g-bad-import-order
from stablehlo._src.interpreter import kernels_elementwise_convert
from stablehlo._src.interpreter import kernels_elementwise_chlo

