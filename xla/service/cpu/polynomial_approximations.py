"""Vectorizable approximations of transcendental functions in LLVM IR.

Every function takes an IRBuilder and float / double values (scalars or
LLVM vectors `<W x T>`) and emits straight-line code: range reduction,
polynomials evaluated with fused multiply-adds (Horner), and `select` for
special cases - no branches and no per-element library calls for f32, so
LLVM's loop vectorizer widens loops over them (AVX-512: 16 f32 lanes).

Coefficients are our own: Chebyshev fits (near-minimax) computed with
`mpmath.chebyfit` at 50 digits of precision for the function named next to
each table, on the stated reduced interval; reduction constants are exact
splits of ln 2, pi / 2 and 2 / pi. The f32 functions that need more range
than f32 gives (trigonometry with exact reduction, atan2, pow, cbrt, erf)
compute in double internally and round once. Accuracy on f32 (maximum error
in units in the last place, measured by polynomial_approximations_test
against float64 references on dense sweeps) is stated in each docstring.

f64: exp, expm1, log, log1p, tanh, logistic and cbrt are polynomial /
Newton code too; erf, sin, cos, tan, atan, atan2, asin, acos, sinh, cosh,
asinh, acosh, atanh and pow on f64 call the C library (`llvm.sin` /
`llvm.cos` / `llvm.tan` / `llvm.pow` intrinsics, libm `erf`, `atan2`...),
one call per element, as documented per function.
"""

from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from xla.service.cpu import elemental_util as u
from xla.service.cpu import polynomial_trig as trig

# --- helpers ----------------------------------------------------------------


def _is_double(x: ir.Value) -> bool:
  return isinstance(u.element_of(x.type), ir.DoubleType)


def _c(x: ir.Value, v) -> ir.Constant:
  """A constant of x's type (splatted over vectors)."""
  return u.const(x.type, v)


def horner(b: ir.IRBuilder, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
  """c0 + c1 x + c2 x^2 + ... (lowest degree first), with fma."""
  acc = _c(x, coeffs[-1])
  for c in reversed(coeffs[:-1]):
    acc = u.fma(b, acc, x, _c(x, c))
  return acc


def _maxnum(b, x, y):
  return u.intrinsic(b, "maxnum", [x, y])


def _minnum(b, x, y):
  return u.intrinsic(b, "minnum", [x, y])


def _clamp(b, x, lo, hi):
  """x limited to [lo, hi]; NaN becomes lo (so later integer conversions
  never see a NaN; callers select the NaN result separately)."""
  return _minnum(b, _maxnum(b, x, _c(x, lo)), _c(x, hi))


def _copysign(b, x, s):
  return u.intrinsic(b, "copysign", [x, s])


def _pow2(b, n: ir.Value, fty: ir.Type) -> ir.Value:
  """2^n for integer n within the normal exponent range of `fty`."""
  double = isinstance(u.element_of(fty), ir.DoubleType)
  mant, bias = (52, 1023) if double else (23, 127)
  e = b.add(n, u.const(n.type, bias))
  return b.bitcast(b.shl(e, u.const(n.type, mant)), fty)


def ldexp(b: ir.IRBuilder, p: ir.Value, n: ir.Value) -> ir.Value:
  """p * 2^n for integer n (same lane count) with |n| up to twice the
  exponent range: two exact scalings, so a subnormal result is rounded once
  and an overflow gives infinity."""
  n1 = b.ashr(n, u.const(n.type, 1))
  n2 = b.sub(n, n1)
  return b.fmul(b.fmul(p, _pow2(b, n1, p.type)), _pow2(b, n2, p.type))


def _int_like(x: ir.Value) -> ir.Type:
  return u.like(x.type, u.I64 if _is_double(x) else u.I32)


def _to_int(b, k):
  return b.fptosi(k, _int_like(k))


def _roundeven(b, x):
  return u.intrinsic(b, "roundeven", [x])


def _widen(b, x):
  return b.fpext(x, u.like(x.type, u.F64))


def _narrow(b, d, ty):
  return b.fptrunc(d, ty)


# --- constants ----------------------------------------------------------------

_LOG2E = float.fromhex("0x1.71547652b82fep+0")
# ln 2 split for Cody-Waite reduction: k * hi is exact for the k that occur.
_LN2_HI_F32 = 0.693359375  # 9 significant bits
_LN2_LO_F32 = float.fromhex("-0x1.bd01060000000p-13")  # ln2 - hi, as f32
_LN2_HI_F64 = float.fromhex("0x1.62e42fee00000p-1")  # 32 significant bits
_LN2_LO_F64 = float.fromhex("0x1.a39ef35793c76p-33")
_SQRT2_F32_MANT = 0x3504F3  # mantissa bits of sqrt(2) as f32
_SQRT2_F64_MANT = 0x6A09E667F3BCD

# (e^r - 1 - r) / r^2 on |r| <= ln2 / 2; chebyfit degree 5 (|err| 1.4e-9)
# and degree 10 (|err| 1.4e-18).
_EXP_G_F32 = (0.5000000013457727, 0.16666666681614256, 0.04166646500604005,
              0.008333310934448869, 0.0013933641031986701,
              0.00019890980869750327)
_EXP_G_F64 = (0.5, 0.1666666666666667, 0.04166666666666667,
              0.008333333333326141, 0.0013888888888883752,
              0.00019841269874800493, 2.4801587325533363e-05,
              2.7557255425746435e-06, 2.7557273661348637e-07,
              2.510520637395701e-08, 2.0914679376583935e-09)
# (log(1 + f) - f + f^2 / 2) / f^3 on [sqrt(1/2) - 1, sqrt(2) - 1];
# chebyfit degree 8 (|err| 2.9e-8).
_LOG_H_F32 = (0.33333331180030046, -0.24999996957950882, 0.200007157488921,
              -0.16667802319501254, 0.1424905764569748, -0.12425687331451106,
              0.1168541992348674, -0.11479733846637635, 0.06971611471451178)
# f64 log: with s = f / (2 + f), z = s^2, log(1 + f) = f - f^2/2 +
# s (f^2/2 + z P(z)); P fitted on z <= ((sqrt2 - 1) / (sqrt2 + 1))^2,
# chebyfit degree 7 (|err| 2.1e-18).
_LOG_P_F64 = (0.6666666666666666, 0.4000000000000088, 0.28571428570803614,
              0.22222222391713917, 0.18181795640132906, 0.15386239702814658,
              0.13268773138656886, 0.13086626147840102)

# --- exp / expm1 ------------------------------------------------------------


def _exp_reduce(b, x):
  """(k, r) with x = k ln2 + r, |r| <= ln2 / 2 (x already clamped)."""
  double = _is_double(x)
  hi, lo = ((_LN2_HI_F64, _LN2_LO_F64) if double else
            (_LN2_HI_F32, _LN2_LO_F32))
  k = _roundeven(b, b.fmul(x, _c(x, _LOG2E)))
  r = u.fma(b, k, _c(x, -hi), x)
  r = u.fma(b, k, _c(x, -lo), r)
  return k, r


def _expm1_reduced(b, r):
  """expm1(r) = r + r^2 g(r) for the reduced argument."""
  g = horner(b, r, _EXP_G_F64 if _is_double(r) else _EXP_G_F32)
  return u.fma(b, b.fmul(r, r), g, r)


def exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """e^x. Cody-Waite reduction x = k ln2 + r, e^r = 1 + r + r^2 g(r), then
  an exact scaling by 2^k (subnormal results rounded once). Overflow gives
  +inf, NaN stays NaN. Max error: f32 1 ulp; f64 1 ulp (measured: see the
  test's table)."""
  double = _is_double(x)
  lo, hi = (-746.0, 710.0) if double else (-104.0, 89.0)
  # e^x rounds to +0 below lo. Those lanes (e.g. the -1e9 logits of a
  # masked softmax) are computed from x = 0 and replaced by 0: scaling by
  # 2^k at lo underflows, and on x86 each underflowing multiply costs a
  # microcode assist when denormals are not flushed (a causal softmax
  # fusion measured 4x slower). Results are unchanged.
  under = b.fcmp_ordered("<", x, _c(x, lo))
  xc = _clamp(b, b.select(under, _c(x, 0.0), x), lo, hi)
  k, r = _exp_reduce(b, xc)
  p = b.fadd(_c(x, 1.0), _expm1_reduced(b, r))
  res = b.select(under, _c(x, 0.0), ldexp(b, p, _to_int(b, k)))
  return b.select(u.is_nan(b, x), x, res)


def expm1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """e^x - 1 with full relative accuracy near 0: with x = k ln2 + r,
  e^x - 1 = 2 (2^(k-1) expm1(r) + (2^(k-1) - 1/2)), exact for k = 0.
  Max error: f32 2 ulp; f64 2 ulp."""
  double = _is_double(x)
  lo, hi = (-40.0, 710.0) if double else (-18.0, 89.0)
  xc = _clamp(b, x, lo, hi)
  k, r = _exp_reduce(b, xc)
  em1 = _expm1_reduced(b, r)
  ki = _to_int(b, k)
  t = _pow2(b, b.sub(ki, u.const(ki.type, 1)), x.type)
  res = b.fmul(_c(x, 2.0), u.fma(b, t, em1, b.fsub(t, _c(x, 0.5))))
  # k = 0: expm1(r) itself (halving a subnormal em1 would round it).
  res = b.select(b.icmp_signed("==", ki, u.const(ki.type, 0)), em1, res)
  res = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, res)  # keeps -0
  return b.select(u.is_nan(b, x), x, res)


# --- log / log1p --------------------------------------------------------------


def _decompose(b, x):
  """(e, f) with x = 2^e (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); x > 0
  finite (subnormals included)."""
  double = _is_double(x)
  mant, bias, sqrt2 = ((52, 1023, _SQRT2_F64_MANT) if double else
                       (23, 127, _SQRT2_F32_MANT))
  ity = _int_like(x)
  tiny = b.fcmp_ordered("<", x, _c(x, 2.0**(-1022 if double else -126)))
  shift = 54 if double else 25
  xs = b.select(tiny, b.fmul(x, _c(x, 2.0**shift)), x)
  bits = b.bitcast(xs, ity)
  m_bits = b.and_(bits, u.const(ity, (1 << mant) - 1))
  e = b.sub(b.lshr(bits, u.const(ity, mant)), u.const(ity, bias))
  e = b.select(tiny, b.sub(e, u.const(ity, shift)), e)
  big = b.icmp_unsigned(">", m_bits, u.const(ity, sqrt2))
  # 1 + f in [1, 2) or, above sqrt(2), halved into [sqrt(1/2), 1).
  exp_field = b.select(big, u.const(ity, (bias - 1) << mant),
                       u.const(ity, bias << mant))
  m = b.bitcast(b.or_(m_bits, exp_field), x.type)
  e = b.select(big, b.add(e, u.const(ity, 1)), e)
  return b.sitofp(e, x.type), b.fsub(m, _c(x, 1.0))


def _log_core(b, x, c=None):
  """log(x) (+ c, a small correction) for finite x > 0."""
  e, f = _decompose(b, x)
  if _is_double(x):
    s = b.fdiv(f, b.fadd(f, _c(x, 2.0)))
    z = b.fmul(s, s)
    hfsq = b.fmul(_c(x, 0.5), b.fmul(f, f))
    r = b.fmul(z, horner(b, z, _LOG_P_F64))
    lo = b.fmul(e, _c(x, _LN2_LO_F64))
    if c is not None:
      lo = b.fadd(lo, c)
    inner = b.fadd(b.fmul(s, b.fadd(hfsq, r)), lo)
    return b.fsub(b.fmul(e, _c(x, _LN2_HI_F64)),
                  b.fsub(b.fsub(hfsq, inner), f))
  h = horner(b, f, _LOG_H_F32)
  corr = b.fmul(u.fma(b, f, h, _c(x, -0.5)), b.fmul(f, f))
  lo = u.fma(b, e, _c(x, _LN2_LO_F32), corr)
  if c is not None:
    lo = b.fadd(lo, c)
  return u.fma(b, e, _c(x, _LN2_HI_F32), b.fadd(f, lo))


def _log_specials(b, x, res, zero_at=0.0):
  """log's results outside (0, inf): -inf at `zero_at`, NaN below, +inf at
  +inf, NaN for NaN."""
  z = _c(x, zero_at)
  res = b.select(b.fcmp_ordered("==", x, _c(x, float("inf"))), x, res)
  res = b.select(b.fcmp_ordered("==", x, z), _c(x, float("-inf")), res)
  res = b.select(b.fcmp_unordered("<", x, z), _c(x, float("nan")), res)
  return res


def log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """Natural logarithm: x = 2^e (1 + f) with 1 + f in [sqrt(1/2),
  sqrt(2)), log = e ln2 + log1p(f) (f32: f - f^2/2 + f^3 h(f); f64: the
  s = f / (2 + f) form). Subnormals are scaled first. Max error: f32 1 ulp;
  f64 1 ulp."""
  xs = b.select(b.fcmp_ordered(">", x, _c(x, 0.0)), x, _c(x, 1.0))
  xs = b.select(b.fcmp_ordered("<", xs, _c(x, float("inf"))), xs,
                _c(x, 1.0))
  return _log_specials(b, x, _log_core(b, xs))


def log1p(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """log(1 + x): u = fl(1 + x) is decomposed like `log` and the rounding
  error of 1 + x is added back as c / u. Max error: f32 1 ulp; f64 1 ulp.
  """
  one = _c(x, 1.0)
  w = b.fadd(one, x)
  ok = b.and_(b.fcmp_ordered(">", w, _c(x, 0.0)),
              b.fcmp_ordered("<", w, _c(x, float("inf"))))
  ws = b.select(ok, w, one)
  xs = b.select(ok, x, _c(x, 0.0))
  # c = x - (u - 1) when u < 2 (exact), 1 - (u - x) otherwise.
  c_small = b.fsub(xs, b.fsub(ws, one))
  c_big = b.fsub(one, b.fsub(ws, xs))
  c = b.select(b.fcmp_ordered("<", ws, _c(x, 2.0)), c_small, c_big)
  res = _log_core(b, ws, b.fdiv(c, ws))
  res = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, res)  # keeps -0
  return _log_specials(b, x, res, zero_at=-1.0)


# --- tanh / logistic ----------------------------------------------------------


# (tanh(x) - x) / x^3 as a polynomial in x^2 on |x| <= 0.625; chebyfit
# degree 5 (|err| 1.6e-9).
_TANH_T_F32 = (-0.3333333317214036, 0.1333330355691574, -0.053959259577204544,
               0.02176891865102821, -0.008343945515839153,
               0.002292744816178142)


def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """tanh |x| = e / (e + 2) with e = expm1(2 |x|), sign copied from x
  (so tanh(-0) = -0); |x| is clamped where the result is 1. f32 uses
  x + x^3 T(x^2) below |x| = 0.625. Max error: f32 2 ulp; f64 3 ulp."""
  lim = 20.0 if _is_double(x) else 10.0
  ax = _minnum(b, u.fabs(b, x), _c(x, lim))
  e = expm1(b, b.fmul(ax, _c(x, 2.0)))
  res = b.fdiv(e, b.fadd(e, _c(x, 2.0)))
  res = _copysign(b, res, x)
  if not _is_double(x):
    x2 = b.fmul(x, x)
    small = u.fma(b, b.fmul(x2, x), horner(b, x2, _TANH_T_F32), x)
    res = b.select(b.fcmp_ordered("<", ax, _c(x, 0.625)), small, res)
    res = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, res)  # -0
  return b.select(u.is_nan(b, x), x, res)


def logistic(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """1 / (1 + e^-x), computed from e = e^-|x| as 1 / (1 + e) (x >= 0) or
  e / (1 + e) (x < 0), so tiny results keep their relative accuracy.
  Max error: f32 3 ulp; f64 2 ulp."""
  e = exp(b, b.fneg(u.fabs(b, x)))
  d = b.fadd(_c(x, 1.0), e)
  pos = b.fdiv(_c(x, 1.0), d)
  neg = b.fdiv(e, d)
  res = b.select(b.fcmp_ordered(">=", x, _c(x, 0.0)), pos, neg)
  return b.select(u.is_nan(b, x), x, res)


# --- erf ----------------------------------------------------------------------

# erf(x) / x as a polynomial in y = x^2 on [0, 1]; chebyfit degree 6
# (|err| 1.2e-9).
_ERF_SMALL = (1.1283791658483509, -0.37612626666720334, 0.11283594715160218,
              -0.026854212010626412, 0.005189087423433974,
              -0.000801686428716587, 7.875875062685488e-05)
# erfc(x) e^(x^2) as a polynomial in t = 1 / x, t in [1/3.92, 1];
# chebyfit degree 9 (|err| 4.3e-9).
_ERFC_Q = (0.0001605464023951204, 0.561065044021031, 0.02593445022736237,
           -0.3993399847813604, 0.29415045686291846, 0.1260869285591228,
           -0.4086619650691171, 0.34632953158931934, -0.14220010771237782,
           0.024058678372130195)


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """Error function. f32: computed in double - x P(x^2) for |x| < 1,
  1 - e^(-x^2) Q(1/|x|) up to 3.92, +-1 beyond; max error 1 ulp.
  f64: the C library's erf, one call per element."""
  if _is_double(x):
    return u.libm_call(b, "erf", [x])
  d = _widen(b, x)
  ad = _minnum(b, u.fabs(b, d), _c(d, 4.0))
  small = b.fmul(d, horner(b, b.fmul(d, d), _ERF_SMALL))
  safe = _maxnum(b, ad, _c(d, 1.0))
  q = horner(b, b.fdiv(_c(d, 1.0), safe), _ERFC_Q)
  big = b.fsub(_c(d, 1.0), b.fmul(exp(b, b.fneg(b.fmul(safe, safe))), q))
  big = b.select(b.fcmp_ordered(">=", ad, _c(d, 3.92)), _c(d, 1.0), big)
  res = b.select(b.fcmp_ordered("<", ad, _c(d, 1.0)), small,
                 _copysign(b, big, d))
  res = b.select(u.is_nan(b, d), d, res)
  return _narrow(b, res, x.type)


# --- power / cbrt -------------------------------------------------------------


def _is_integer(b, y):
  return b.fcmp_ordered("==", u.intrinsic(b, "floor", [y]), y)


def _is_odd_integer(b, y):
  half = b.fmul(y, _c(y, 0.5))
  return b.and_(_is_integer(b, y), b.not_(_is_integer(b, half)))


def power(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
  """x^y with C's special cases (pow(x, +-0) = 1, pow(1, y) = 1, negative
  x only for integer y, signed zeros / infinities for odd y...). f32:
  e^(y log|x|) in double (our f64 log and exp), rounded once; max error
  1 ulp. f64: `llvm.pow` (the C library's pow), one call per element."""
  if _is_double(x):
    return u.intrinsic(b, "pow", [x, y])
  xd, yd = _widen(b, x), _widen(b, y)
  ax = u.fabs(b, xd)
  l = log(b, ax)
  z = b.fmul(yd, l)
  r = exp(b, z)
  one, zero = _c(xd, 1.0), _c(xd, 0.0)
  inf, nan = _c(xd, float("inf")), _c(xd, float("nan"))
  odd = _is_odd_integer(b, yd)
  # Negative base: the sign of an odd power; NaN for non-integer y.
  neg = b.fcmp_ordered("<", xd, zero)
  r = b.select(b.and_(neg, odd), b.fneg(r), r)
  finite_neg = b.and_(neg, b.fcmp_ordered(">", xd, b.fneg(inf)))
  r = b.select(b.and_(finite_neg, b.not_(_is_integer(b, yd))), nan, r)
  # -0 and -inf bases keep the sign of odd powers (the log is +-inf there).
  is_neg_zero = b.and_(b.fcmp_ordered("==", xd, zero),
                       b.icmp_signed("<", b.bitcast(xd, u.like(xd.type,
                                                               u.I64)),
                                     u.const(u.like(xd.type, u.I64), 0)))
  r = b.select(b.and_(is_neg_zero, odd), b.fneg(r), r)
  # |x| = 1 with y = +-inf (0 * inf in the exponent): 1.
  unit = b.fcmp_ordered("==", ax, one)
  r = b.select(b.and_(unit, b.fcmp_ordered("==", u.fabs(b, yd), inf)), one,
               r)
  r = b.select(u.is_nan(b, xd), xd, r)
  r = b.select(u.is_nan(b, yd), yd, r)
  r = b.select(b.fcmp_ordered("==", xd, one), one, r)
  r = b.select(b.fcmp_ordered("==", yd, zero), one, r)
  return _narrow(b, r, x.type)


def cbrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """Cube root: an exponent / 3 estimate from the double's bit pattern,
  three Halley steps r <- r (r^3 + 2a) / (2 r^3 + a) in double (f32) or
  three Halley steps and a final Newton step (f64); sign copied, 0 / inf /
  NaN returned as is. Max error: f32 1 ulp (0.5 + rounding); f64 1 ulp."""
  double = _is_double(x)
  d = x if double else _widen(b, x)
  a = u.fabs(b, d)
  i64 = u.like(d.type, u.I64)
  tiny = b.fcmp_ordered("<", a, _c(d, 2.0**-1000))
  a_s = b.select(tiny, b.fmul(a, _c(d, 2.0**300)), a)  # 2^300: cube 2^100
  bits = b.bitcast(a_s, i64)
  third = b.fptosi(b.fmul(b.sitofp(bits, d.type), _c(d, 1.0 / 3.0)), i64)
  r = b.bitcast(b.add(third, u.const(i64, 682 << 52)), d.type)
  for _ in range(3):
    r3 = b.fmul(b.fmul(r, r), r)
    num = u.fma(b, _c(d, 2.0), a_s, r3)
    den = u.fma(b, _c(d, 2.0), r3, a_s)
    r = b.fmul(r, b.fdiv(num, den))
  if double:
    # Newton step on the residual: r += (a - r^3) / (3 r^2).
    r2 = b.fmul(r, r)
    resid = u.fma(b, b.fneg(r2), r, a_s)
    r = b.fadd(r, b.fdiv(resid, b.fmul(_c(d, 3.0), r2)))
  r = b.select(tiny, b.fmul(r, _c(d, 2.0**-100)), r)
  r = _copysign(b, r, d)
  special = b.or_(b.fcmp_ordered("==", a, _c(d, 0.0)),
                  b.fcmp_unordered("==", a, _c(d, float("inf"))))
  r = b.select(special, d, r)
  return r if double else _narrow(b, r, x.type)


# --- hyperbolic and inverse hyperbolic functions ---------------------------
# f32: in double with the f64 functions above, rounded once; f64: the C
# library (one call per element).


def _in_double(fn_wide, libm_name):

  def emit(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    if _is_double(x):
      return u.libm_call(b, libm_name, [x])
    return _narrow(b, fn_wide(b, _widen(b, x)), x.type)

  return emit


def _sinh_wide(b, d):
  # sinh |x| = (m + m / (m + 1)) / 2 with m = expm1|x| (no cancellation).
  a = u.fabs(b, d)
  m = expm1(b, a)
  r = b.fmul(_c(d, 0.5), b.fadd(m, b.fdiv(m, b.fadd(m, _c(d, 1.0)))))
  r = b.select(b.fcmp_ordered(">", a, _c(d, 700.0)), _c(d, float("inf")), r)
  r = b.select(b.fcmp_ordered("==", a, _c(d, 0.0)), a, r)
  return _copysign(b, r, d)


def _cosh_wide(b, d):
  e = exp(b, u.fabs(b, d))
  return b.fmul(_c(d, 0.5), b.fadd(e, b.fdiv(_c(d, 1.0), e)))


def _asinh_wide(b, d):
  # asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); f32 squares fit.
  a = u.fabs(b, d)
  a2 = b.fmul(a, a)
  one = _c(d, 1.0)
  s = u.intrinsic(b, "sqrt", [b.fadd(one, a2)])
  r = log1p(b, b.fadd(a, b.fdiv(a2, b.fadd(one, s))))
  r = b.select(b.fcmp_ordered("==", a, _c(d, 0.0)), a, r)
  r = b.select(b.fcmp_ordered("==", a, _c(d, float("inf"))), a, r)
  return _copysign(b, r, d)


def _acosh_wide(b, d):
  # acosh x = log1p((x - 1) + sqrt((x - 1)(x + 1))); NaN below 1.
  one = _c(d, 1.0)
  t = b.fsub(d, one)
  r = log1p(b, b.fadd(t, u.intrinsic(b, "sqrt", [b.fmul(t, b.fadd(d, one))])))
  return b.select(b.fcmp_unordered("<", d, one), _c(d, float("nan")), r)


def _atanh_wide(b, d):
  # atanh x = log1p(2x / (1 - x)) / 2; +-inf at +-1, NaN beyond.
  r = log1p(b, b.fdiv(b.fmul(_c(d, 2.0), d), b.fsub(_c(d, 1.0), d)))
  return b.fmul(_c(d, 0.5), r)


sinh = _in_double(_sinh_wide, "sinh")
sinh.__doc__ = "sinh x. f32: in double, max error 1 ulp. f64: C library."
cosh = _in_double(_cosh_wide, "cosh")
cosh.__doc__ = "cosh x. f32: in double, max error 1 ulp. f64: C library."
asinh = _in_double(_asinh_wide, "asinh")
asinh.__doc__ = "asinh x. f32: in double, max error 1 ulp. f64: C library."
acosh = _in_double(_acosh_wide, "acosh")
acosh.__doc__ = "acosh x. f32: in double, max error 1 ulp. f64: C library."
atanh = _in_double(_atanh_wide, "atanh")
atanh.__doc__ = "atanh x. f32: in double, max error 1 ulp. f64: C library."

# --- trigonometry (polynomial_trig) ----------------------------------------

sin = trig.sin
cos = trig.cos
tan = trig.tan
atan2 = trig.atan2
atan = trig.atan
asin = trig.asin
acos = trig.acos
