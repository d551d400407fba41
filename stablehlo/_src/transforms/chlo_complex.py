"""Complex-operand legalizations of the CHLO inverse trigonometric and
hyperbolic functions: asin, acos, asinh, acosh, atan, atanh.

asin / acos follow Hull, Fairgrieve and Tang, "Implementing the complex
arcsine and arccosine functions using exception handling" (ACM TOMS 1997):
with x = |Re z|, y = |Im z|, r = |z + 1|, s = |z - 1|, A = (r + s) / 2 and
B = x / A,

  Re asin = asin(B) for B <= 0.6417, else an atan form that avoids the
            cancellation in A - x;
  Re acos = acos(B) likewise;
  |Im|    = log1p(A - 1 + sqrt((A - 1)(A + 1))) for A <= 1.5 (A - 1 computed
            without cancellation), else log(A + sqrt(A^2 - 1));

and the signs restored from z. For |z| > 1e150 (reachable in f64 only) the
asymptotic forms Re asin = atan2(x, y), |Im| = log 2 + log |z| are used.
atanh uses Re = log1p(4x / ((1 - x)^2 + y^2)) / 4 and
Im = atan2(2y, (1 - x)(1 + x) - y^2) / 2 (x / |z|^2 and pi/2 for huge z).
The others reduce to these: asinh(z) = -i asin(iz), atan(z) = -i atanh(iz),
acosh(z) = (|Im acos z|, copysign(Re acos z, Im z)).

complex<f32> is computed in f64 and rounded once at the end, complex<f64>
in f64.
"""

from __future__ import annotations

import math

from stablehlo._src.ir import types as t
from stablehlo._src.transforms import chlo_decompositions
from stablehlo._src.transforms import rewrite
from stablehlo._src.transforms.chlo_expr import E
from stablehlo._src.transforms.chlo_expr import select

_HUGE = 1e150  # above this, squares overflow f64
_TINY = 1e-150  # below this, squares underflow f64


def _part(z: E, name: str, ty) -> E:
  return E(z.b, z.b.one("stablehlo." + name, [z.v], ty))


def _complex(re: E, im: E, ty) -> E:
  return E(re.b, re.b.one("stablehlo.complex", [re.v, im.v], ty))


def _is_negative(v: E) -> E:
  """v < 0, including -0.0."""
  return (v < 0.0) | ((v.eq(0.0)) & ((1.0 / v) < 0.0))


def _copysign(mag: E, sign_of: E) -> E:
  return select(_is_negative(sign_of), -mag, mag)


def _is_inf(v: E) -> E:
  return v.abs().eq(math.inf)


def _hypot(a: E, b: E) -> E:
  """sqrt(a^2 + b^2); scaled where the squares would over- or underflow."""
  a, b = a.abs(), b.abs()
  m, n = a.max(b), a.min(b)
  q = n / select(m.eq(0.0), 1.0, m)
  scaled = select(_is_inf(m), m, m * (1.0 + q * q).sqrt())
  return select((m > _HUGE) | (m < _TINY), scaled, (a * a + b * b).sqrt())


def _real_asin(v: E) -> E:
  half = v.atan2(1.0 + ((1.0 - v) * (1.0 + v)).sqrt())
  return half + half


def _real_acos(v: E) -> E:
  return ((1.0 - v) * (1.0 + v)).sqrt().atan2(v)


def _asin_acos_parts(x: E, y: E):
  """(Re asin, Re acos, |Im|) for x, y >= 0 (f64)."""
  r = _hypot(x + 1.0, y)
  s = _hypot(x - 1.0, y)
  big_a = 0.5 * (r + s)
  b = x / big_a
  y2 = y * y
  rpxp1 = r + x + 1.0
  spxm1 = s + (1.0 - x)  # s - x + 1, no cancellation for x < 1
  smxm1 = s + (x - 1.0)  # s + x - 1, no cancellation for x >= 1
  half_apx = 0.5 * (big_a + x)
  x_le_1 = x <= 1.0
  # sqrt(A^2 - x^2) without cancellation.
  den = select(x_le_1, (half_apx * (y2 / rpxp1 + spxm1)).sqrt(),
               y * (half_apx * (1.0 / rpxp1 + 1.0 / smxm1)).sqrt())
  small_b = b <= 0.6417
  re_asin = select(small_b, _real_asin(b), (x / den).atan2(1.0))
  re_acos = select(small_b, _real_acos(b), den.atan2(x))
  am1 = select(x < 1.0, 0.5 * (y2 / rpxp1 + y2 / spxm1),
               0.5 * (y2 / rpxp1 + smxm1))
  im_small = (am1 + (am1 * (big_a + 1.0)).sqrt()).log1p()
  im_big = (big_a + (big_a * big_a - 1.0).sqrt()).log()
  im = select(big_a <= 1.5, im_small, im_big)
  # Tiny y with x < 1 (y^2 underflows): |Im| ~ y / sqrt(1 - x^2).
  im = select((y < _TINY) & (x < 1.0),
              y / ((1.0 - x) * (1.0 + x)).sqrt(), im)
  # Huge |z|: asin z ~ -i log(2iz).
  huge = x.max(y) > _HUGE
  mag = _hypot(x, y)
  im = select(huge, x.const(math.log(2.0)) + mag.log(), im)
  re_asin = select(huge, x.atan2(y), re_asin)
  re_acos = select(huge, y.atan2(x), re_acos)
  return re_asin, re_acos, im


def _asin(re: E, im: E):
  a, _, m = _asin_acos_parts(re.abs(), im.abs())
  return _copysign(a, re), _copysign(m, im)


def _acos(re: E, im: E):
  _, c, m = _asin_acos_parts(re.abs(), im.abs())
  c = select(_is_negative(re), re.const(math.pi) - c, c)
  return c, -_copysign(m, im)


def _atanh(re: E, im: E):
  x, y = re.abs(), im.abs()
  one_m_x = 1.0 - x
  r = 0.25 * (4.0 * x / (one_m_x * one_m_x + y * y)).log1p()
  i = 0.5 * (y + y).atan2(one_m_x * (1.0 + x) - y * y)
  # Near z = 1, where (1 - x)^2 + y^2 underflows: Re ~ log(2 / |1 - z|) / 2.
  d = _hypot(one_m_x, y)
  r = select(d < _TINY, 0.5 * (x.const(math.log(2.0)) - d.log()), r)
  huge = x.max(y) > _HUGE
  mag = _hypot(x, y)
  r = select(huge, select(_is_inf(mag), 0.0, (x / mag) / mag), r)
  i = select(huge, x.const(math.pi / 2), i)
  return _copysign(r, re), _copysign(i, im)


def _asinh(re: E, im: E):
  u, v = _asin(-im, re)  # asin(iz)
  return v, -u


def _acosh(re: E, im: E):
  c, m = _acos(re, im)
  return m.abs(), _copysign(c, im)


def _atan(re: E, im: E):
  p, q = _atanh(-im, re)  # atanh(iz)
  return q, -p


_FUNCTIONS = {"chlo.asin": _asin, "chlo.acos": _acos, "chlo.asinh": _asinh,
              "chlo.acosh": _acosh, "chlo.atan": _atan, "chlo.atanh": _atanh}


def _complex_rule(fn, real_rule):
  def rule(b, op):
    z = E(b, op.operands[0])
    ty = z.type
    if not isinstance(z.et, t.ComplexType):
      return real_rule(b, op)
    part_et = z.et.element_type
    part_ty = rewrite.with_element_type(ty, part_et)
    re = _part(z, "real", part_ty).convert(t.f64)
    im = _part(z, "imag", part_ty).convert(t.f64)
    out_re, out_im = fn(re, im)
    return [_complex(out_re.convert(part_et), out_im.convert(part_et),
                     ty).v]
  return rule


# CHLO op -> rule: the complex path here, the real one from
# chlo_decompositions. chlo_legalize installs these over its table.
RULES = {name: _complex_rule(fn, chlo_decompositions.RULES[name])
         for name, fn in _FUNCTIONS.items()}
