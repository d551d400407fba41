"""Vectorizable sin, cos, tan and atan2 in LLVM IR (see
polynomial_approximations for the conventions).

f32 trigonometry reduces the argument *exactly* for every float (up to
3.4e38) without tables: with 2/pi split into five doubles C0..C4 (each the
rounding of what the previous ones leave), x (exact in double) times each
C_i is an exact double pair (h, l) by fma; every h and l is reduced modulo
4 exactly (t - 4 rint(t / 4)), and the reduced parts are added in double-
double. That gives x * 2/pi modulo 4 with ~100 bits, hence the quadrant
and r = x - quadrant * pi/2 in [-pi/4, pi/4] to double precision, even for
x near a multiple of pi/2. sin / cos polynomials in double then give
results rounded once to f32. f64 uses the C library (llvm intrinsics).
"""

from __future__ import annotations

from llvmlite import ir

from xla.service.cpu import elemental_util as u

# 2/pi = C0 + C1 + ... + C4 (+ < 2^-270).
_TWO_OVER_PI = tuple(float.fromhex(h) for h in (
    "0x1.45f306dc9c883p-1", "-0x1.6b01ec5417056p-55",
    "-0x1.6447e493ad4cep-109", "0x1.e21c820ff28b2p-163",
    "-0x1.508510ea79237p-218"))
_PI_OVER_2 = float.fromhex("0x1.921fb54442d18p+0")
_PI_OVER_2_LO = float.fromhex("0x1.1a62633145c07p-54")
_PI = float.fromhex("0x1.921fb54442d18p+1")
_PI_LO = 2 * _PI_OVER_2_LO
_PI_OVER_4 = float.fromhex("0x1.921fb54442d18p-1")
_TAN_PI_OVER_8 = float.fromhex("0x1.a827999fcef32p-2")

# sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4;
# chebyfit degree 3 in r^2 (|err| 2.8e-11 and 2.3e-12: plenty for f32).
_SIN_S = (-0.1666666666385529, 0.008333331874710208, -0.00019840086735384846,
          2.724992580305979e-06)
_COS_C = (0.0416666666643212, -0.001388888767201679, 2.480060037715673e-05,
          -2.730095920390147e-07)
# atan(z) = z + z^3 A(z^2) on |z| <= tan(pi/8); chebyfit degree 5 in z^2
# (|err| 5.4e-10).
_ATAN_A = (-0.333333332792548, 0.19999977258688387, -0.14284151193628614,
           0.11071365021884794, -0.08624676145249494, 0.050481385120797445)


def _c(x, v):
  return u.const(x.type, v)


def _horner(b, x, coeffs):
  acc = _c(x, coeffs[-1])
  for c in reversed(coeffs[:-1]):
    acc = u.fma(b, acc, x, _c(x, c))
  return acc


def _is_double(x):
  return isinstance(u.element_of(x.type), ir.DoubleType)


def _rint(b, x):
  return u.intrinsic(b, "roundeven", [x])


def _two_sum(b, a, c):
  s = b.fadd(a, c)
  bb = b.fsub(s, a)
  err = b.fadd(b.fsub(a, b.fsub(s, bb)), b.fsub(c, bb))
  return s, err


def _mod4(b, t):
  """t - 4 rint(t / 4): exact, in [-2, 2]."""
  k = _rint(b, b.fmul(t, _c(t, 0.25)))
  return u.fma(b, _c(t, -4.0), k, t)


def reduce_f32(b: ir.IRBuilder, xd: ir.Value):
  """(quadrant as i32 in 0..3, r in double) with xd = r + quadrant pi/2
  (mod 2 pi); xd is an f32 value widened to double (finite; NaN / inf give
  a NaN r).

  With |x| < 2^128 and x exact in 24 bits: x C_i = h_i + l_i exactly. Parts
  that can exceed 2 (h0, l0, h1, l1, h2) are reduced mod 4 and summed in
  double-double; l2 (< 2^-33) and h3 (< 2^-34) only refine the fraction;
  l3 and C4 lie below 2^-88 and are not needed for f32 results."""
  big = []
  small = []
  for i, ci in enumerate(_TWO_OVER_PI[:4]):
    h = b.fmul(xd, _c(xd, ci))
    if i == 3:
      small.append(h)
      break
    l = u.fma(b, xd, _c(xd, ci), b.fneg(h))
    big.append(_mod4(b, h))
    (small if i == 2 else big).append(l if i == 2 else _mod4(b, l))
  s = big[0]
  err = b.fadd(small[0], small[1])
  for t in big[1:]:
    s, e = _two_sum(b, s, t)
    err = b.fadd(err, e)
  k = _rint(b, s)
  f = b.fadd(b.fsub(s, k), err)  # x * 2/pi - k, |f| <~ 1/2
  r = u.fma(b, f, _c(xd, _PI_OVER_2), b.fmul(f, _c(xd, _PI_OVER_2_LO)))
  i32 = u.like(xd.type, u.I32)
  k_safe = b.select(u.is_nan(b, k), _c(k, 0.0), k)
  q = b.and_(b.fptosi(k_safe, i32), u.const(i32, 3))
  return q, r


def _sin_cos_poly(b, r):
  z = b.fmul(r, r)
  s = u.fma(b, b.fmul(z, r), _horner(b, z, _SIN_S), r)
  c = u.fma(b, b.fmul(z, z), _horner(b, z, _COS_C),
            u.fma(b, z, _c(z, -0.5), _c(z, 1.0)))
  return s, c


def _pick(b, q, vals):
  """vals[q] for q in 0..3 (lane-wise)."""
  out = vals[3]
  for i in (2, 1, 0):
    out = b.select(b.icmp_unsigned("==", q, u.const(q.type, i)), vals[i],
                   out)
  return out


def _trig_f32(b, x, which):
  xd = b.fpext(x, u.like(x.type, u.F64))
  q, r = reduce_f32(b, xd)
  s, c = _sin_cos_poly(b, r)
  ns, nc = b.fneg(s), b.fneg(c)
  if which == "sin":
    res = _pick(b, q, (s, c, ns, nc))
  elif which == "cos":
    res = _pick(b, q, (c, ns, nc, s))
  else:
    odd = b.icmp_unsigned("==", b.and_(q, u.const(q.type, 1)),
                          u.const(q.type, 1))
    res = b.select(odd, b.fdiv(nc, s), b.fdiv(s, c))
  res = b.fptrunc(res, x.type)
  if which != "cos":  # sin(-0) = -0, tan(-0) = -0
    res = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, res)
  return res


def sin(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """sin x. f32: exact reduction (module doc) and double polynomials; max
  error 1 ulp (0.5 + the final rounding). f64: `llvm.sin` (the C library),
  one call per element."""
  if _is_double(x):
    return u.intrinsic(b, "sin", [x])
  return _trig_f32(b, x, "sin")


def cos(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """cos x. f32: as `sin`; max error 1 ulp. f64: `llvm.cos` (C library)."""
  if _is_double(x):
    return u.intrinsic(b, "cos", [x])
  return _trig_f32(b, x, "cos")


def tan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """tan x. f32: sin r / cos r (or -cos r / sin r in odd quadrants) in
  double after the exact reduction; max error 1 ulp. f64: `llvm.tan`
  (C library)."""
  if _is_double(x):
    return u.intrinsic(b, "tan", [x])
  return _trig_f32(b, x, "tan")


def atan2(b: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
  """atan2(y, x) with IEEE special cases (signed zeros, infinities, NaN).
  f32: in double - t = min(|x|,|y|) / max(|x|,|y|) in [0, 1], reduced to
  [0, tan(pi/8)] by atan t = pi/4 + atan((t-1)/(t+1)), an odd polynomial,
  then the octant / quadrant fix-ups; max error 1 ulp. f64: the C
  library's atan2, one call per element."""
  if _is_double(x):
    return u.libm_call(b, "atan2", [y, x])
  dty = u.like(x.type, u.F64)
  return b.fptrunc(atan2_wide(b, b.fpext(y, dty), b.fpext(x, dty)), x.type)


def atan2_wide(b: ir.IRBuilder, yd: ir.Value, xd: ir.Value) -> ir.Value:
  """atan2 of doubles accurate to ~1e-10 relative (enough for a result
  rounded to f32), with every IEEE special case."""
  ax, ay = u.fabs(b, xd), u.fabs(b, yd)
  mx = u.intrinsic(b, "maxnum", [ax, ay])
  mn = u.intrinsic(b, "minnum", [ax, ay])
  zero, one = _c(xd, 0.0), _c(xd, 1.0)
  inf = _c(xd, float("inf"))
  both_inf = b.fcmp_ordered("==", mn, inf)
  t = b.fdiv(mn, b.select(b.fcmp_ordered("==", mx, zero), one, mx))
  t = b.select(b.fcmp_ordered("==", mx, inf), zero, t)  # finite / inf
  big = b.fcmp_ordered(">", t, _c(t, _TAN_PI_OVER_8))
  z = b.select(big, b.fdiv(b.fsub(t, one), b.fadd(t, one)), t)
  z2 = b.fmul(z, z)
  a = u.fma(b, b.fmul(z2, z), _horner(b, z2, _ATAN_A), z)
  a = b.select(big, b.fadd(a, _c(a, _PI_OVER_4)), a)
  a = b.select(both_inf, _c(a, _PI_OVER_4), a)
  a = b.select(b.fcmp_ordered(">", ay, ax), b.fsub(_c(a, _PI_OVER_2), a), a)
  x_neg = b.icmp_signed("<", b.bitcast(xd, u.like(xd.type, u.I64)),
                        u.const(u.like(xd.type, u.I64), 0))
  a = b.select(x_neg, b.fsub(_c(a, _PI), a), a)
  a = u.intrinsic(b, "copysign", [a, yd])
  nan = b.or_(u.is_nan(b, xd), u.is_nan(b, yd))
  a = b.select(nan, b.fadd(xd, yd), a)
  return a


def atan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """atan x. f32: atan2(x, 1) in double; max error 1 ulp. f64: the C
  library's atan, one call per element."""
  if _is_double(x):
    return u.libm_call(b, "atan", [x])
  xd = b.fpext(x, u.like(x.type, u.F64))
  return b.fptrunc(atan2_wide(b, xd, _c(xd, 1.0)), x.type)


def _asin_acos(b, x, name):
  if _is_double(x):
    return u.libm_call(b, name, [x])
  xd = b.fpext(x, u.like(x.type, u.F64))
  one = _c(xd, 1.0)
  # (1 - x)(1 + x) is exact in double for an f32 x; NaN outside [-1, 1].
  c = u.intrinsic(b, "sqrt", [b.fmul(b.fsub(one, xd), b.fadd(one, xd))])
  a = atan2_wide(b, xd, c) if name == "asin" else atan2_wide(b, c, xd)
  return b.fptrunc(a, x.type)


def asin(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """asin x = atan2(x, sqrt((1 - x)(1 + x))). f32: in double; max error
  1 ulp. f64: the C library's asin, one call per element."""
  return _asin_acos(b, x, "asin")


def acos(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """acos x = atan2(sqrt((1 - x)(1 + x)), x). f32: in double; max error
  1 ulp. f64: the C library's acos, one call per element."""
  return _asin_acos(b, x, "acos")
