"""Complex (C64 / C128) elementwise math for the CPU elemental emitter.

Values are LLVM literal structs {re, im} of float / double, scalar only.
C64 products, quotients and moduli are computed in double and rounded once
(so they match the HLO evaluator, which computes in complex128 and rounds).
Division uses Smith's algorithm (scaled by the larger divisor component,
like numpy); the modulus of a C128 is scaled to avoid overflow.
"""

from __future__ import annotations

from llvmlite import ir

from xla.service.cpu import elemental_util as u
from xla.service.cpu import polynomial_approximations as pa


def _parts(b, z):
  return b.extract_value(z, 0), b.extract_value(z, 1)


def make(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> ir.Value:
  ty = ir.LiteralStructType([re.type, im.type])
  out = ir.Constant(ty, ir.Undefined)
  return b.insert_value(b.insert_value(out, re, 0), im, 1)


def _widen(b, v):
  """(value in double, function rounding a double back to v's type)."""
  if isinstance(v.type, ir.DoubleType):
    return v, lambda x: x
  return b.fpext(v, u.F64), lambda x: b.fptrunc(x, v.type)


def add(b, x, y):
  (a, c), (d, e) = _parts(b, x), _parts(b, y)
  return make(b, b.fadd(a, d), b.fadd(c, e))


def subtract(b, x, y):
  (a, c), (d, e) = _parts(b, x), _parts(b, y)
  return make(b, b.fsub(a, d), b.fsub(c, e))


def negate(b, x):
  a, c = _parts(b, x)
  return make(b, b.fneg(a), b.fneg(c))


def multiply(b, x, y):
  """(a + ci)(d + ei) = (ad - ce) + (ae + cd)i in the component type (as
  numpy and XLA: no rescue of infinities from NaN results)."""
  (a, c), (d, e) = _parts(b, x), _parts(b, y)
  re = b.fsub(b.fmul(a, d), b.fmul(c, e))
  im = b.fadd(b.fmul(a, e), b.fmul(c, d))
  return make(b, re, im)


def divide(b, x, y):
  """Smith's algorithm: divide through by the larger of |re y|, |im y|."""
  (a, c), (d, e) = _parts(b, x), _parts(b, y)
  (a, back), (c, _), (d, _), (e, _) = [_widen(b, v) for v in (a, c, d, e)]
  ty = a.type
  ad, ae = u.fabs(b, d), u.fabs(b, e)
  real_big = b.fcmp_ordered(">=", ad, ae)
  # |d| >= |e|: r = e / d, s = 1 / (d + e r)
  r1 = b.fdiv(e, d)
  s1 = b.fdiv(u.const(ty, 1.0), b.fadd(d, b.fmul(e, r1)))
  re1 = b.fmul(b.fadd(a, b.fmul(c, r1)), s1)
  im1 = b.fmul(b.fsub(c, b.fmul(a, r1)), s1)
  # |d| < |e| (or NaN): r = d / e, s = 1 / (e + d r)
  r2 = b.fdiv(d, e)
  s2 = b.fdiv(u.const(ty, 1.0), b.fadd(e, b.fmul(d, r2)))
  re2 = b.fmul(b.fadd(b.fmul(a, r2), c), s2)
  im2 = b.fmul(b.fsub(b.fmul(c, r2), a), s2)
  # Division by (0, 0): a / 0, c / 0 (infinities or NaN), as numpy.
  both_zero = b.and_(b.fcmp_ordered("==", ad, u.const(ty, 0.0)),
                     b.fcmp_ordered("==", ae, u.const(ty, 0.0)))
  re0, im0 = b.fdiv(a, ad), b.fdiv(c, ae)
  re = b.select(both_zero, re0, b.select(real_big, re1, re2))
  im = b.select(both_zero, im0, b.select(real_big, im1, im2))
  return make(b, back(re), back(im))


def modulus(b, a, c):
  """|a + ci| (hypot): C64 exactly in double then rounded; C128 scaled by
  the larger component. Infinite if either part is infinite (even NaN)."""
  is_double = isinstance(a.type, ir.DoubleType)
  a, back = _widen(b, a)
  c, _ = _widen(b, c)
  return back(_modulus_wide(b, a, c, is_double))


def _modulus_wide(b, a, c, is_double):
  """|a + ci| in double: exact sum of squares for widened C64 parts,
  scaled for C128 parts (`is_double`)."""
  ty = a.type
  if is_double:  # scale by the larger component
    aa, ac = u.fabs(b, a), u.fabs(b, c)
    big = u.intrinsic(b, "maxnum", [aa, ac])
    small = u.intrinsic(b, "minnum", [aa, ac])
    q = b.fdiv(small, big)
    r = b.fmul(big, u.intrinsic(
        b, "sqrt", [b.fadd(u.const(ty, 1.0), b.fmul(q, q))]))
    r = b.select(b.fcmp_ordered("==", big, u.const(ty, 0.0)),
                 u.const(ty, 0.0), r)
    r = b.select(b.fcmp_ordered("==", small, u.const(ty, 0.0)), big, r)
  else:
    r = u.intrinsic(b, "sqrt", [b.fadd(b.fmul(a, a), b.fmul(c, c))])
  inf = u.const(ty, float("inf"))
  is_inf = b.or_(b.fcmp_ordered("==", u.fabs(b, a), inf),
                 b.fcmp_ordered("==", u.fabs(b, c), inf))
  nan = b.or_(u.is_nan(b, a), u.is_nan(b, c))
  r = b.select(nan, u.const(ty, float("nan")), r)
  return b.select(is_inf, inf, r)


def abs_(b, x):
  a, c = _parts(b, x)
  return modulus(b, a, c)


def sign(b, x):
  """z / |z| part by part; 0 for 0, NaN + NaN i if a part is NaN."""
  a, c = _parts(b, x)
  is_double = isinstance(a.type, ir.DoubleType)
  a, back = _widen(b, a)
  c, _ = _widen(b, c)
  ty = a.type
  m = _modulus_wide(b, a, c, is_double)
  zero = b.and_(b.fcmp_ordered("==", a, u.const(ty, 0.0)),
                b.fcmp_ordered("==", c, u.const(ty, 0.0)))
  nan = b.or_(u.is_nan(b, a), u.is_nan(b, c))
  safe = b.select(b.or_(zero, nan), u.const(ty, 1.0), m)
  re, im = b.fdiv(a, safe), b.fdiv(c, safe)
  re = b.select(zero, u.const(ty, 0.0), re)
  im = b.select(zero, u.const(ty, 0.0), im)
  qnan = u.const(ty, float("nan"))
  return make(b, back(b.select(nan, qnan, re)), back(b.select(nan, qnan, im)))


_PRED = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def compare(b, direction, x, y):
  (a, c), (d, e) = _parts(b, x), _parts(b, y)
  if direction == "EQ":
    return b.and_(b.fcmp_ordered("==", a, d), b.fcmp_ordered("==", c, e))
  if direction == "NE":
    return b.or_(b.fcmp_unordered("!=", a, d), b.fcmp_unordered("!=", c, e))
  # Lexicographic on (re, im), as the evaluator.
  p = _PRED[direction]
  re_eq = b.fcmp_ordered("==", a, d)
  return b.or_(b.and_(b.fcmp_ordered(p, a, d), b.not_(re_eq)),
               b.and_(re_eq, b.fcmp_ordered(p, c, e)))


def max_min(b, x, y, is_max):
  (a, c), (d, e) = _parts(b, x), _parts(b, y)
  p = ">" if is_max else "<"
  pick = b.select(b.fcmp_ordered("==", a, d), b.fcmp_ordered(p, c, e),
                  b.fcmp_ordered(p, a, d))
  return b.select(pick, x, y)


# --- transcendental functions ------------------------------------------------
# Computed in double (C64 parts widened, results rounded once) with the f64
# functions of polynomial_approximations (sin / cos / atan2 of a double
# call the C library: complex values are scalars anyway).


def _wide_fn(fn):
  """Wraps fn(b, a, c) -> (re, im) on doubles into a C64 / C128 function."""

  def emit(b, z):
    a, c = _parts(b, z)
    a, back = _widen(b, a)
    c, _ = _widen(b, c)
    re, im = fn(b, a, c)
    return make(b, back(re), back(im))

  return emit


def _d(x, v):
  return u.const(x.type, v)


def _cosh_sinh(b, x):
  """(cosh x, sinh x), sinh accurate near 0 (from expm1)."""
  e = pa.exp(b, x)
  ei = pa.exp(b, b.fneg(x))
  em, emn = pa.expm1(b, x), pa.expm1(b, b.fneg(x))
  half = _d(x, 0.5)
  return b.fmul(half, b.fadd(e, ei)), b.fmul(half, b.fsub(em, emn))


def _exp(b, a, c):
  ea = pa.exp(b, a)
  re = b.fmul(ea, pa.cos(b, c))
  im = b.fmul(ea, pa.sin(b, c))
  real_arg = b.fcmp_ordered("==", c, _d(c, 0.0))  # keeps e^inf + 0i finite
  return b.select(real_arg, ea, re), b.select(real_arg, c, im)


def _expm1(b, a, c):
  # Re = expm1(a) cos c - 2 sin^2(c / 2); Im = e^a sin c.
  s2 = pa.sin(b, b.fmul(c, _d(c, 0.5)))
  re = b.fsub(b.fmul(pa.expm1(b, a), pa.cos(b, c)),
              b.fmul(_d(c, 2.0), b.fmul(s2, s2)))
  im = b.fmul(pa.exp(b, a), pa.sin(b, c))
  real_arg = b.fcmp_ordered("==", c, _d(c, 0.0))
  return b.select(real_arg, pa.expm1(b, a), re), b.select(real_arg, c, im)


def _log(b, a, c):
  m = _modulus_wide(b, a, c, True)
  return pa.log(b, m), pa.atan2(b, c, a)


def _log1p(b, a, c):
  # |1 + z|^2 = 1 + (2a + a^2 + c^2).
  t = b.fadd(b.fmul(_d(a, 2.0), a), b.fadd(b.fmul(a, a), b.fmul(c, c)))
  re = b.fmul(_d(a, 0.5), pa.log1p(b, t))
  big = b.fcmp_ordered(">", b.fadd(u.fabs(b, a), u.fabs(b, c)), _d(a, 1e150))
  re_big = pa.log(b, _modulus_wide(b, b.fadd(a, _d(a, 1.0)), c, True))
  return b.select(big, re_big, re), pa.atan2(b, c, b.fadd(a, _d(a, 1.0)))


def _sqrt(b, a, c):
  """Principal square root (numpy's method): t = sqrt((|a| + |z|) / 2)."""
  m = _modulus_wide(b, a, c, True)
  t = u.intrinsic(b, "sqrt", [b.fmul(b.fadd(u.fabs(b, a), m), _d(a, 0.5))])
  other = b.fdiv(u.fabs(b, c), b.fmul(_d(a, 2.0), t))
  nonneg = b.fcmp_ordered(">=", a, _d(a, 0.0))
  re = b.select(nonneg, t, other)
  im = b.select(nonneg, u.intrinsic(b, "copysign", [other, c]),
                u.intrinsic(b, "copysign", [t, c]))
  zero = b.and_(b.fcmp_ordered("==", a, _d(a, 0.0)),
                b.fcmp_ordered("==", c, _d(c, 0.0)))
  re = b.select(zero, _d(a, 0.0), re)
  im = b.select(zero, c, im)
  inf = _d(c, float("inf"))
  c_inf = b.fcmp_ordered("==", u.fabs(b, c), inf)
  re = b.select(c_inf, inf, re)
  im = b.select(c_inf, c, im)
  return re, im


def _sin(b, a, c):
  ch, sh = _cosh_sinh(b, c)
  return b.fmul(pa.sin(b, a), ch), b.fmul(pa.cos(b, a), sh)


def _cos(b, a, c):
  ch, sh = _cosh_sinh(b, c)
  return b.fmul(pa.cos(b, a), ch), b.fneg(b.fmul(pa.sin(b, a), sh))


def _tan_parts(b, x, y):
  """tan(x + iy) = (sin 2x + i sinh 2y) / (cos 2x + cosh 2y); for |y| > 20
  the imaginary part is sign(y) and the real part 4 sin x cos x e^-2|y|."""
  x2, y2 = b.fmul(x, _d(x, 2.0)), b.fmul(y, _d(y, 2.0))
  ch, sh = _cosh_sinh(b, y2)
  den = b.fadd(pa.cos(b, x2), ch)
  re = b.fdiv(pa.sin(b, x2), den)
  im = b.fdiv(sh, den)
  big = b.fcmp_ordered(">", u.fabs(b, y), _d(y, 20.0))
  re_big = b.fmul(b.fmul(_d(x, 2.0), pa.sin(b, x2)),
                  pa.exp(b, b.fneg(u.fabs(b, y2))))
  im_big = u.intrinsic(b, "copysign", [_d(y, 1.0), y])
  return b.select(big, re_big, re), b.select(big, im_big, im)


def _tan(b, a, c):
  """tan(a + ic), with XLA CPU's results at special values (checked against
  jax.jit on CPU, c64 and c128):

    c = +-inf        -> (r, copysign(1, c)), r = +-0 with the sign of
                        sin 2a for finite a (what the |c| > 20 branch of
                        _tan_parts gives), +0 for a = +-inf or nan;
    a = +-inf or nan -> (nan, nan) for any other c, c = 0 included;
    a = +-0          -> real part +0 (also for a = -0), imaginary part as
                        computed (tanh c; nan for c = nan);
  and _tan_parts everywhere else (a finite nonzero and c = nan: nan, nan).
  """
  re, im = _tan_parts(b, a, c)
  inf, nan, zero = _d(a, float("inf")), _d(a, float("nan")), _d(a, 0.0)
  a_finite = b.fcmp_ordered("<", u.fabs(b, a), inf)
  c_inf = b.fcmp_ordered("==", u.fabs(b, c), inf)
  re = b.select(a_finite, re, b.select(c_inf, zero, nan))
  im = b.select(b.or_(a_finite, c_inf), im, nan)
  im = b.select(c_inf, u.intrinsic(b, "copysign", [_d(c, 1.0), c]), im)
  re = b.select(b.fcmp_ordered("==", a, zero), zero, re)
  return re, im


def _tanh(b, a, c):
  """tanh(a + ic) = -i tan(-c + ia), with XLA CPU's results at special
  values (checked against jax.jit on CPU, c64 and c128):

    a = +-inf          -> (copysign(1, a), s), s = +-0 with the sign of
                          sin 2c for finite nonzero c (what the |y| > 20
                          branch of _tan_parts gives), +0 for c = +-0,
                          +-inf or nan;
    c = +-inf or nan   -> (nan, nan) otherwise, a = +-0 included;
    c = +-0            -> (tanh a, +0): the imaginary part is +0 also for
                          c = -0 and a = nan;
  and _tan_parts everywhere else.
  """
  t_re, t_im = _tan_parts(b, b.fneg(c), a)
  re, im = t_im, b.fneg(t_re)
  inf, nan, zero = _d(a, float("inf")), _d(a, float("nan")), _d(a, 0.0)
  a_inf = b.fcmp_ordered("==", u.fabs(b, a), inf)
  c_finite = b.fcmp_ordered("<", u.fabs(b, c), inf)
  im = b.select(b.fcmp_ordered("==", c, zero), zero, im)
  im = b.select(c_finite, im, b.select(a_inf, zero, nan))
  re = b.select(c_finite, re, nan)
  re = b.select(a_inf, u.intrinsic(b, "copysign", [_d(a, 1.0), a]), re)
  return re, im


# XLA CPU's results at special values (checked against jax.jit on CPU, c64
# and c128), on top of the formulas above; z = a + ic.


def _any_nan(b, a, c):
  return b.or_(u.is_nan(b, a), u.is_nan(b, c))


def _exp_op(b, a, c):
  """exp: c = +-0 -> (e^a, +0) (a = nan included); c = +-inf or nan gives
  (nan, nan) through cos / sin."""
  re, im = _exp(b, a, c)
  return re, b.select(b.fcmp_ordered("==", c, _d(c, 0.0)), _d(c, 0.0), im)


def _expm1_op(b, a, c):
  """expm1: c = +-0 -> (expm1 a, +0) with a -0 real part made +0."""
  re, im = _expm1(b, a, c)
  zero = _d(a, 0.0)
  c_zero = b.fcmp_ordered("==", c, zero)
  re = b.select(b.and_(c_zero, b.fcmp_ordered("==", re, zero)), zero, re)
  return re, b.select(c_zero, zero, im)


def _log_op(b, a, c):
  """log: (nan, nan) where a part is nan (even if the other is +-inf)."""
  re, im = _log(b, a, c)
  nan, qnan = _any_nan(b, a, c), _d(a, float("nan"))
  return b.select(nan, qnan, re), b.select(nan, qnan, im)


def _sqrt_op(b, a, c):
  """sqrt: c = -0 counts as +0 (sqrt(-1 - 0i) = +i); (nan, nan) where a
  part is nan."""
  c = b.select(b.fcmp_ordered("==", c, _d(c, 0.0)), _d(c, 0.0), c)
  re, im = _sqrt(b, a, c)
  nan, qnan = _any_nan(b, a, c), _d(a, float("nan"))
  return b.select(nan, qnan, re), b.select(nan, qnan, im)


def _sin_op(b, a, c):
  """sin: a = +-0 -> (+0, sinh c), also for c = +-inf or nan."""
  re, im = _sin(b, a, c)
  zero = _d(a, 0.0)
  return b.select(b.fcmp_ordered("==", a, zero), zero, re), im


def _cos_op(b, a, c):
  """cos: a = +-0 -> (cosh c, +0), also for c = +-inf or nan."""
  re, im = _cos(b, a, c)
  zero = _d(a, 0.0)
  return re, b.select(b.fcmp_ordered("==", a, zero), zero, im)


exp = _wide_fn(_exp_op)
expm1 = _wide_fn(_expm1_op)
log = _wide_fn(_log_op)
log1p = _wide_fn(_log1p)
sqrt = _wide_fn(_sqrt_op)
sin = _wide_fn(_sin_op)
cos = _wide_fn(_cos_op)
tan = _wide_fn(_tan)
tanh = _wide_fn(_tanh)


def rsqrt(b, z):
  one = make(b, ir.Constant(z.type.elements[0], 1.0),
             ir.Constant(z.type.elements[1], 0.0))
  return divide(b, one, _wide_fn(_sqrt)(b, z))


def power(b, x, y):
  """x^y = exp(y log x); x^0 = 1; 0^y = 0 for real y > 0, NaN otherwise
  (as numpy)."""
  (xa, xc), (ya, yc) = _parts(b, x), _parts(b, y)
  xa, back = _widen(b, xa)
  xc, _ = _widen(b, xc)
  ya, _ = _widen(b, ya)
  yc, _ = _widen(b, yc)
  lr, li = _log(b, xa, xc)
  # (ya + i yc)(lr + i li)
  zr = b.fsub(b.fmul(ya, lr), b.fmul(yc, li))
  zi = b.fadd(b.fmul(ya, li), b.fmul(yc, lr))
  re, im = _exp(b, zr, zi)
  zero = _d(xa, 0.0)
  x_zero = b.and_(b.fcmp_ordered("==", xa, zero),
                  b.fcmp_ordered("==", xc, zero))
  y_zero = b.and_(b.fcmp_ordered("==", ya, zero),
                  b.fcmp_ordered("==", yc, zero))
  y_pos_real = b.and_(b.fcmp_ordered(">", ya, zero),
                      b.fcmp_ordered("==", yc, zero))
  nan = _d(xa, float("nan"))
  re = b.select(x_zero, b.select(y_pos_real, zero, nan), re)
  im = b.select(x_zero, b.select(y_pos_real, zero, nan), im)
  re = b.select(y_zero, _d(xa, 1.0), re)
  im = b.select(y_zero, zero, im)
  return make(b, back(re), back(im))
