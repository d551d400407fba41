"""Special functions for the CHLO kernels, in float64 on numpy arrays.

numpy has no erf / lgamma / digamma / Bessel / zeta, and the project takes no
dependency on scipy, so they are written here from their textbook
definitions. `erf`, `erfc` and `lgamma` call the C library through Python's
`math` module (one call per element): libm is accurate to about one ulp in
float64, which the corpus's float64 ULP checks need and a short numpy
formula would not reach. Everything else is vectorized.

Domain rules (poles, NaN) follow what XLA's CHLO decompositions produce,
since the `testdata/` expectations were computed with them.
"""

from __future__ import annotations

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _lgamma_scalar(x: float) -> float:
  if math.isnan(x):
    return x
  if math.isinf(x):
    return math.inf
  try:
    return math.lgamma(x)
  except ValueError:  # a pole: 0, -1, -2, ...
    return math.inf


_lgamma = np.frompyfunc(_lgamma_scalar, 1, 1)


def _f64(x) -> np.ndarray:
  return np.asarray(x, dtype=np.float64)


def erf(x):
  return np.asarray(_erf(_f64(x)), dtype=np.float64)


def erfc(x):
  return np.asarray(_erfc(_f64(x)), dtype=np.float64)


def lgamma(x):
  """log|Gamma(x)|; +inf at the poles and at +-inf."""
  return np.asarray(_lgamma(_f64(x)), dtype=np.float64)


def sinpi(x):
  """sin(pi x) with the argument reduced exactly first."""
  x = _f64(x)
  n = np.rint(x)
  r = x - n  # exact, |r| <= 0.5
  s = np.sin(np.pi * r)
  odd = np.fmod(np.abs(n), 2.0) == 1.0
  return np.where(odd, -s, s)


def cospi(x):
  x = _f64(x)
  n = np.rint(x)
  r = x - n
  c = np.cos(np.pi * r)
  odd = np.fmod(np.abs(n), 2.0) == 1.0
  return np.where(odd, -c, c)


def _is_nonpositive_int(x):
  return (x <= 0) & (x == np.floor(x))


# Bernoulli numbers B_2k, k = 1..12 (exact rationals).
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6,
        -3617 / 510, 43867 / 798, -174611 / 330, 854513 / 138,
        -236364091 / 2730)


def _digamma_large(x):
  """Asymptotic series of psi(x) for x >= 10."""
  inv2 = 1.0 / (x * x)
  s = np.zeros_like(x)
  p = np.ones_like(x)
  for k, b in enumerate(_B2K[:8], start=1):
    p = p * inv2
    s = s + b / (2 * k) * p
  return np.log(x) - 0.5 / x - s


def digamma(x):
  """psi(x) = d/dx log Gamma(x). NaN at 0, the negative integers and -inf
  (as XLA), +inf at +inf."""
  x = _f64(x)
  with np.errstate(all="ignore"):
    # Reflection below 1/2: psi(x) = psi(1 - x) - pi cot(pi x).
    neg = x < 0.5
    y = np.where(neg, 1.0 - x, x)
    y = np.where(np.isfinite(y), y, np.where(np.isnan(y), y, 1e300))
    acc = np.zeros_like(y)
    z = y.copy()
    for _ in range(10):  # recurrence psi(z) = psi(z+1) - 1/z up to z >= 10
      small = z < 10.0
      acc = acc - np.where(small, 1.0 / np.where(small, z, 1.0), 0.0)
      z = np.where(small, z + 1.0, z)
    r = acc + _digamma_large(z)
    cot = cospi(x) / sinpi(x)
    r = np.where(neg, r - np.pi * cot, r)
    r = np.where(_is_nonpositive_int(x) | (x == -np.inf), np.nan, r)
    r = np.where(x == np.inf, np.inf, r)
  return r


def _zeta_em(s, q):
  """Hurwitz zeta for s > 1, q > 0 by Euler-Maclaurin summation."""
  n = 12
  total = np.zeros_like(q)
  for k in range(n):
    total = total + (q + k) ** (-s)
  a = q + n
  total = total + a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** (-s)
  # sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1)
  fact = 1.0
  rising = s.copy()
  term_pow = a ** (-s - 1.0)
  for j, b in enumerate(_B2K, start=1):
    fact = fact * (2 * j - 1) * (2 * j) if j > 1 else 2.0
    total = total + b / fact * rising * term_pow
    rising = rising * (s + 2 * j - 1) * (s + 2 * j)
    term_pow = term_pow / (a * a)
  return total


def zeta(s, q):
  """Hurwitz zeta(s, q) = sum_{k>=0} (q+k)^-s, with XLA's domain: +inf at
  s = 1 and at the poles q = 0, -1, ...; NaN for s < 1; for q < 0 only
  integer s is defined (summed directly up to q > 0)."""
  s, q = np.broadcast_arrays(_f64(s), _f64(q))
  with np.errstate(all="ignore"):
    ok = np.isfinite(s) & np.isfinite(q) & (s > 1)
    shift = np.where(ok & (q < 1), np.ceil(1.0 - q), 0.0)
    shift = np.minimum(shift, 1e6)
    qq = np.where(ok, q + shift, 1.0)
    ss = np.where(ok, s, 2.0)
    r = _zeta_em(ss, qq)
    # Shifted terms: zeta(s, q) = sum_{k<m} (q+k)^-s + zeta(s, q+m).
    m = int(np.max(shift)) if shift.size else 0
    for k in range(m):
      use = ok & (k < shift)
      r = r + np.where(use, np.where(use, q + k, 1.0) ** (-ss), 0.0)
    r = np.where(ok, r, np.nan)
    r = np.where(s == 1, np.inf, r)
    r = np.where((q < 0) & (s != np.floor(s)) & (s > 1), np.nan, r)
    r = np.where(_is_nonpositive_int(q) & (s > 1), np.inf, r)
    r = np.where(np.isnan(s) | np.isnan(q), np.nan, r)
  return r


def polygamma(n, x):
  """psi^(n)(x): digamma for n = 0, (-1)^(n+1) n! zeta(n+1, x) for positive
  integers n; NaN for other n and at the poles."""
  n, x = np.broadcast_arrays(_f64(n), _f64(x))
  with np.errstate(all="ignore"):
    is_int = (n == np.floor(n)) & (n >= 0) & np.isfinite(n)
    nn = np.where(is_int, n, 1.0)
    fact = np.exp(lgamma(nn + 1.0))
    fact = np.where(nn < 20, np.round(fact), fact)
    sign = np.where(np.fmod(nn, 2.0) == 0.0, -1.0, 1.0)
    r = sign * fact * zeta(nn + 1.0, x)
    r = np.where(n == 0, digamma(x), r)
    r = np.where(is_int, r, np.nan)
    r = np.where((n > 0) & _is_nonpositive_int(x), np.nan, r)
  return r


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf_inv(y):
  """The inverse of erf on [-1, 1]: an initial guess from Winitzki's
  closed-form approximation, refined by Halley's method on erf (|y| < 0.5)
  or on erfc (|y| >= 0.5, where 1 - |y| is exact). +-inf at +-1, NaN
  outside [-1, 1]."""
  y = _f64(y)
  with np.errstate(all="ignore"):
    a = np.abs(y)
    inside = a < 1.0
    aa = np.where(inside, a, 0.5)
    la = 0.147
    ln = np.log1p(-aa * aa)
    t = 2.0 / (np.pi * la) + 0.5 * ln
    x = np.sqrt(np.sqrt(t * t - ln / la) - t)
    tail = aa >= 0.5
    target = np.where(tail, 1.0 - aa, aa)
    for _ in range(4):
      f = np.empty_like(x)
      f[tail] = erfc(x[tail])
      f[~tail] = erf(x[~tail])
      f = f - target
      fp = _TWO_OVER_SQRT_PI * np.exp(-x * x)
      fp = np.where(tail, -fp, fp)
      ratio = f / fp
      step = ratio / (1.0 + x * ratio)  # Halley: f'' = -2 x f'
      x = np.where(np.isfinite(step) & (fp != 0), x - step, x)
    r = np.copysign(x, y)
    r = np.where(a == 1.0, np.copysign(np.inf, y), r)
    r = np.where(a > 1.0, np.nan, r)
    r = np.where(y == 0, y, r)
    r = np.where(np.isnan(y), np.nan, r)
  return r


def bessel_i1e(x):
  """exp(-|x|) I1(x): the power series for |x| <= 20, Hankel's asymptotic
  expansion beyond."""
  x = _f64(x)
  with np.errstate(all="ignore"):
    ax = np.abs(x)
    small = ax <= 20.0
    # Power series: I1(x) = sum_k (x/2)^(2k+1) / (k! (k+1)!).
    xs = np.where(small, ax, 0.0)
    h = xs / 2.0
    term = h.copy()
    total = term.copy()
    hh = h * h
    for k in range(1, 70):
      term = term * hh / (k * (k + 1))
      total = total + term
    series = total * np.exp(-xs)
    # Asymptotic: I1e(x) ~ 1/sqrt(2 pi x) sum_k (-1)^k a_k / x^k with
    # a_k = prod_{j<=k} (4 - (2j-1)^2) / (k! 8^k).
    xl = np.where(small, 30.0, ax)
    term = np.ones_like(xl)
    total = term.copy()
    for k in range(1, 30):
      term = term * -(4.0 - (2 * k - 1) ** 2) / (k * 8.0 * xl)
      total = total + term
    asym = total / np.sqrt(2.0 * np.pi * xl)
    asym = np.where(np.isinf(ax), 0.0, asym)
    r = np.where(small, series, asym)
    r = np.copysign(r, x)
    r = np.where(np.isnan(x), np.nan, r)
  return r
