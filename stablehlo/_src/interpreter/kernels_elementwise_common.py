"""Element-type plumbing shared by the elementwise kernels: kinds, integer
bit patterns, correctly rounded float results, and `convert_array` (the
spec's `convert`).

Floating-point functions follow the reference interpreter's rule: compute in
double precision (float64 / complex128) and round the result once to the
destination type (spec section "Accuracy" leaves the precision of
transcendental functions to the implementation). numpy rounds float64 to
float32 and float16 correctly; ml_dtypes rounds float64 through float32
(double rounding), so for the other narrow types `round_float` first rounds
the float64 value to the destination precision itself.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import types as t
import support

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
C128 = np.dtype(np.complex128)

BOOL, SINT, UINT, FLOAT, COMPLEX = "bool", "sint", "uint", "float", "complex"

# Float types that numpy rounds to correctly from float64.
_NUMPY_ROUNDED = frozenset(("f16", "f32", "f64"))
# (precision incl. the implicit bit, exponent of the smallest normal) of the
# float types numpy has no native dtype for; tf32 is stored as float32.
_PRECISION = {"tf32": (11, -126)}


def storage_et(ty: t.Type) -> t.Type:
  """The element type whose values a runtime array holds (quantized ->
  storage integer, index -> i64)."""
  et = runtime.storage_element_type(ty)
  if isinstance(et, t.IndexType):
    return t.i64
  return et


def kind(et: t.Type) -> str:
  if isinstance(et, t.IntegerType):
    if et.width == 1:
      return BOOL
    return UINT if et.unsigned else SINT
  if isinstance(et, t.IndexType):
    return SINT
  if isinstance(et, t.FloatType):
    return FLOAT
  if isinstance(et, t.ComplexType):
    return COMPLEX
  raise support.UnimplementedError(f"element type {et} is not supported by "
                                   "the elementwise kernels")


def operand_et(op, i: int = 0) -> t.Type:
  return storage_et(op.operands[i].type)


def result_et(op, i: int = 0) -> t.Type:
  return storage_et(op.results[i].type)


def dtype(et: t.Type) -> np.dtype:
  return runtime.numpy_dtype(et)


def width(et: t.Type) -> int:
  if isinstance(et, t.IntegerType):
    return et.width
  if isinstance(et, t.IndexType):
    return 64
  if isinstance(et, t.FloatType):
    if et.name in ("f4E2M1FN",):
      return 4
    if et.name in ("f6E2M3FN", "f6E3M2FN"):
      return 6
    if et.name == "tf32":
      return 19
    return dtype(et).itemsize * 8
  if isinstance(et, t.ComplexType):
    return 2 * width(et.element_type)
  raise support.UnimplementedError(f"no bit width for {et}")


def is_narrow_int(et: t.Type) -> bool:
  return runtime.is_narrow_int(et)


# --- integers -----------------------------------------------------------------


def as_wide_int(x: np.ndarray, et: t.Type) -> np.ndarray:
  """Integer values in a dtype where +, -, * of two of them cannot lose
  bits before wrapping: int64 / uint64 for i2 / i4 / u2 / u4, the storage
  dtype otherwise (numpy integer arithmetic wraps modulo 2^width)."""
  if is_narrow_int(et):
    return x.astype(np.uint64 if et.unsigned else np.int64)
  return x


def finish_int(x, et: t.Type) -> np.ndarray:
  """Wraps integer results computed by `as_wide_int` values back to `et`."""
  if is_narrow_int(et):
    return runtime.wrap_to(x, et)
  return np.asarray(x).astype(dtype(et), copy=False)


def to_bits(x: np.ndarray, et: t.Type) -> np.ndarray:
  """The bit patterns of `x` as uint64 (the low width(et) bits)."""
  k = kind(et)
  x = np.asarray(x)
  if k == BOOL:
    return x.astype(np.uint64)
  if k in (SINT, UINT):
    w = width(et)
    if w == 64:
      return x.astype(np.int64 if k == SINT else np.uint64).view(np.uint64)
    return (x.astype(np.int64) & ((1 << w) - 1)).astype(np.uint64)
  if k == FLOAT:
    if et.name == "tf32":
      u = np.ascontiguousarray(x, dtype=F32).reshape(np.shape(x))
      u = u.view(np.uint32)
      return (u >> np.uint32(13)).astype(np.uint64)
    dt = dtype(et)
    u = np.ascontiguousarray(x).reshape(np.shape(x)).view(
        np.dtype(f"u{dt.itemsize}"))
    w = width(et)
    u = u.astype(np.uint64)
    if w < dt.itemsize * 8:
      u &= np.uint64((1 << w) - 1)
    return u
  raise support.UnimplementedError(f"no bit pattern for {et}")


def from_bits(u: np.ndarray, et: t.Type) -> np.ndarray:
  """Inverse of `to_bits`: values of `et` with the given low bits."""
  k = kind(et)
  u = np.asarray(u, dtype=np.uint64)
  w = width(et)
  if w < 64:
    u = u & np.uint64((1 << w) - 1)
  if k == BOOL:
    return u.astype(np.bool_)
  if k in (SINT, UINT):
    if w == 64:
      return u.view(np.int64) if k == SINT else u
    v = u.astype(np.int64)
    if k == SINT:
      v = np.where(v >= (1 << (w - 1)), v - (1 << w), v)
    return v.astype(dtype(et))
  if k == FLOAT:
    if et.name == "tf32":
      return (u.astype(np.uint32) << np.uint32(13)).view(F32)
    dt = dtype(et)
    return u.astype(np.dtype(f"u{dt.itemsize}")).view(dt)
  raise support.UnimplementedError(f"no bit pattern for {et}")


def int_min_max(et: t.Type) -> tuple[int, int]:
  w = width(et)
  if kind(et) == UINT:
    return 0, (1 << w) - 1
  return -(1 << (w - 1)), (1 << (w - 1)) - 1


# --- floats -------------------------------------------------------------------


def float_precision(et: t.FloatType) -> tuple[int, int]:
  """(significand bits incl. the implicit one, exponent of the smallest
  normal number)."""
  if et.name in _PRECISION:
    return _PRECISION[et.name]
  fi = ml_dtypes.finfo(dtype(et))
  return int(fi.nmant) + 1, int(fi.minexp)


def round_to_precision(v: np.ndarray, p: int, emin: int) -> np.ndarray:
  """Rounds float64 values to `p` significant bits (ties to even), with the
  subnormal spacing of a format whose smallest normal is 2^emin. The result
  is exactly representable in such a format unless it overflows."""
  v = np.asarray(v, dtype=F64)
  _, e = np.frexp(v)  # v = m * 2^e, 0.5 <= |m| < 1
  q = np.maximum(e.astype(np.int64) - 1, emin) - (p - 1)
  return np.ldexp(np.rint(np.ldexp(v, -q)), q)


def round_float(v, et: t.Type) -> np.ndarray:
  """Rounds float64 (or complex128) results once to the float or complex
  element type `et` (round to nearest even)."""
  v = np.asarray(v)
  if isinstance(et, t.ComplexType):
    return v.astype(dtype(et))
  dt = dtype(et)
  if et.name in _NUMPY_ROUNDED:
    return v.astype(dt)
  p, emin = float_precision(et)
  r = round_to_precision(v.astype(F64), p, emin)
  return r.astype(dt)


def upcast(x: np.ndarray, et: t.Type) -> np.ndarray:
  """float64 / complex128 copy of float / complex values."""
  if isinstance(et, t.ComplexType):
    return np.asarray(x).astype(C128)
  return np.asarray(x).astype(F64)


def float_map(x: np.ndarray, et: t.Type, real_fn, complex_fn=None):
  """`real_fn` (float64 -> float64) or `complex_fn` (complex128 ->
  complex128) applied in double precision, rounded to `et`."""
  if isinstance(et, t.ComplexType):
    if complex_fn is None:
      raise support.UnimplementedError(f"not defined for {et}")
    return round_float(complex_fn(upcast(x, et)), et)
  if not isinstance(et, t.FloatType):
    raise support.InvalidArgumentError(f"expected a float type, got {et}")
  return round_float(real_fn(upcast(x, et)), et)


def float_map2(x, y, et: t.Type, real_fn, complex_fn=None):
  if isinstance(et, t.ComplexType):
    if complex_fn is None:
      raise support.UnimplementedError(f"not defined for {et}")
    return round_float(complex_fn(upcast(x, et), upcast(y, et)), et)
  if not isinstance(et, t.FloatType):
    raise support.InvalidArgumentError(f"expected a float type, got {et}")
  return round_float(real_fn(upcast(x, et), upcast(y, et)), et)


def complex_tan(z: np.ndarray) -> np.ndarray:
  """tan of complex `z` with XLA CPU's values where a part is not finite or
  the real part is zero (the rule of xla/service/cpu/elemental_complex.py
  `_tan`, checked against jax.jit on CPU; numpy follows C99 instead):

    imag = +-inf        -> real +-0 (+0 for a non-finite real part; numpy
                           gives the sign of sin 2x for a finite one),
                           imag copysign(1, imag);
    real = +-inf or nan -> nan + nan i otherwise (imag = 0 included);
    real = +-0          -> real part +0 (also for -0).
  """
  z = np.asarray(z)
  with np.errstate(all="ignore"):
    out = np.tan(z)
  a, c = z.real, z.imag
  a_finite, c_inf = np.isfinite(a), np.isinf(c)
  re = np.where(a_finite, out.real, np.where(c_inf, 0.0, np.nan))
  im = np.where(a_finite | c_inf, out.imag, np.nan)
  im = np.where(c_inf, np.copysign(1.0, c), im)
  re = np.where(a == 0, 0.0, re)
  result = np.empty_like(out)
  result.real, result.imag = re, im
  return result


def complex_tanh(z: np.ndarray) -> np.ndarray:
  """tanh of complex `z` = a + ci with XLA CPU's values where a part is not
  finite or the imaginary part is zero (the rule of
  xla/service/cpu/elemental_complex.py `_tanh`, checked against jax.jit on
  CPU; numpy follows C99 instead):

    a = +-inf           -> copysign(1, a) + s i, s = +-0 with the sign of
                           sin 2c for a finite nonzero c (as numpy), +0
                           for c = +-0, +-inf or nan;
    c = +-inf or nan    -> nan + nan i otherwise (a = +-0 included);
    c = +-0             -> tanh(a) + 0i, imaginary part +0 (also for c = -0
                           and for a = nan).
  """
  z = np.asarray(z)
  with np.errstate(all="ignore"):
    out = np.tanh(z)
  a, c = z.real, z.imag
  a_inf, c_finite = np.isinf(a), np.isfinite(c)
  re = np.where(c_finite, out.real, np.nan)
  re = np.where(a_inf, np.copysign(1.0, a), re)
  im = np.where(c == 0, 0.0, out.imag)
  im = np.where(c_finite, im, np.where(a_inf, 0.0, np.nan))
  result = np.empty_like(out)
  result.real, result.imag = re, im
  return result


def _make_complex(like: np.ndarray, re, im) -> np.ndarray:
  out = np.empty(np.shape(like), np.asarray(like).dtype)
  out.real, out.imag = re, im
  return out


def _any_nan(z: np.ndarray) -> np.ndarray:
  return np.isnan(z.real) | np.isnan(z.imag)


# XLA CPU's complex exp / log / sqrt / sin / cos / expm1 / log1p at special
# values (the rules of xla/service/cpu/elemental_complex.py, checked against
# jax.jit on CPU); numpy follows C99 instead. z = a + ci throughout.


def complex_exp(z: np.ndarray) -> np.ndarray:
  """exp: c = +-0 -> e^a + 0i (imaginary part +0, a = nan included);
  c = +-inf or nan -> nan + nan i for every a."""
  z = np.asarray(z)
  with np.errstate(all="ignore"):
    out = np.exp(z)
    ea = np.exp(z.real)
  c = z.imag
  re = np.where(c == 0, ea, np.where(np.isfinite(c), out.real, np.nan))
  im = np.where(c == 0, 0.0, np.where(np.isfinite(c), out.imag, np.nan))
  return _make_complex(out, re, im)


def complex_log(z: np.ndarray) -> np.ndarray:
  """log: nan + nan i where a part is nan (C99 gives inf + nan i when the
  other part is infinite)."""
  z = np.asarray(z)
  with np.errstate(all="ignore"):
    out = np.log(z)
  nan = _any_nan(z)
  return _make_complex(out, np.where(nan, np.nan, out.real),
                       np.where(nan, np.nan, out.imag))


def complex_sqrt(z: np.ndarray) -> np.ndarray:
  """sqrt: a -0 imaginary part counts as +0 (sqrt(-1 - 0i) = +i); nan + nan
  i where a part is nan."""
  z = np.asarray(z)
  z = _make_complex(z, z.real, np.where(z.imag == 0, 0.0, z.imag))
  with np.errstate(all="ignore"):
    out = np.sqrt(z)
  nan = _any_nan(z)
  return _make_complex(out, np.where(nan, np.nan, out.real),
                       np.where(nan, np.nan, out.imag))


def _sin_cos(z, is_sin):
  z = np.asarray(z)
  with np.errstate(all="ignore"):
    out = np.sin(z) if is_sin else np.cos(z)
  a = z.real
  bad = ~np.isfinite(a)
  re = np.where(bad, np.nan, out.real)
  im = np.where(bad, np.nan, out.imag)
  if is_sin:
    re = np.where(a == 0, 0.0, re)
  else:
    im = np.where(a == 0, 0.0, im)
  return _make_complex(out, re, im)


def complex_sin(z: np.ndarray) -> np.ndarray:
  """sin: a = +-0 -> +0 + i sinh c (real part +0, also for c = +-inf or
  nan); a = +-inf or nan -> nan + nan i otherwise."""
  return _sin_cos(z, True)


def complex_cos(z: np.ndarray) -> np.ndarray:
  """cos: a = +-0 -> cosh c + 0i (imaginary part +0, also for c = +-inf or
  nan); a = +-inf or nan -> nan + nan i otherwise."""
  return _sin_cos(z, False)


def fix_complex_expm1(z: np.ndarray, out: np.ndarray) -> np.ndarray:
  """expm1 `out` (computed accurately elsewhere) with XLA CPU's special
  values: c = +-0 -> expm1(a) + 0i with both zeros +0 (expm1(-0 - 0i) =
  +0 + 0i); c = +-inf or nan -> nan + nan i."""
  z, out = np.asarray(z), np.asarray(out)
  a, c = z.real, z.imag
  with np.errstate(all="ignore"):
    em = np.expm1(a) + 0.0  # -0 -> +0
  re = np.where(c == 0, em, np.where(np.isfinite(c), out.real, np.nan))
  im = np.where(c == 0, 0.0, np.where(np.isfinite(c), out.imag, np.nan))
  return _make_complex(out, re, im)


def fix_complex_log1p(z: np.ndarray, out: np.ndarray) -> np.ndarray:
  """log1p `out` (real part computed accurately elsewhere) with XLA CPU's
  imaginary part atan2(c, 1 + a) (which keeps the sign of c = -0) and nan +
  nan i where a part is nan."""
  z, out = np.asarray(z), np.asarray(out)
  with np.errstate(all="ignore"):
    im = np.arctan2(z.imag, 1.0 + z.real)
  nan = _any_nan(z)
  return _make_complex(out, np.where(nan, np.nan, out.real),
                       np.where(nan, np.nan, im))


def native_float(et: t.Type) -> bool:
  """Float / complex types whose numpy +, -, *, / round correctly to the
  type itself (float16 goes through float32, which is innocuous)."""
  if isinstance(et, t.ComplexType):
    return True
  return isinstance(et, t.FloatType) and et.name in ("f16", "f32", "f64")


# --- convert ------------------------------------------------------------------


def _int_to_float(x: np.ndarray, src: t.Type, dst: t.FloatType) -> np.ndarray:
  """Integers to floats, rounded once to nearest even."""
  dt = dtype(dst)
  if dst.name in ("f32", "f64"):
    # The C conversions numpy uses round correctly.
    return x.astype(dt)
  wide = x.dtype in (np.dtype(np.int64), np.dtype(np.uint64))
  if not wide:
    return round_float(x.astype(F64), dst)  # exact in float64
  # Magnitudes above 2^53 are first rounded to 53 bits "to odd" (sticky
  # low bit), which keeps the final rounding to <= 24 bits correct.
  neg = x < 0 if x.dtype.kind == "i" else np.zeros(x.shape, bool)
  mag = np.where(neg, (-(x.astype(np.int64))).view(np.uint64),
                 x.view(np.uint64) if x.dtype.kind == "i" else x)
  mag = mag.astype(np.uint64)
  big = mag >= np.uint64(1 << 53)
  if np.any(big):
    m = mag[big]
    shift = np.zeros(m.shape, np.uint64)
    for s in range(11, 0, -1):  # bit length - 53, at most 11
      shift = np.where((m >> np.uint64(53 + s - 1)) != 0,
                       np.maximum(shift, np.uint64(s)), shift)
    lost = (m & ((np.uint64(1) << shift) - np.uint64(1))) != 0
    m = ((m >> shift) | lost.astype(np.uint64)) << shift
    mag = mag.copy()
    mag[big] = m
  v = mag.astype(F64)
  v = np.where(neg, -v, v)
  return round_float(v, dst)


def _float_to_int(x: np.ndarray, dst: t.Type) -> np.ndarray:
  """Floats to integers: truncation toward zero; NaN -> 0; values out of
  range saturate (APFloat::convertToInteger, as upstream's interpreter and
  XLA do)."""
  v = np.trunc(np.asarray(x).astype(F64))
  lo, hi = int_min_max(dst)
  nan = np.isnan(v)
  too_low = v < float(lo)
  too_high = v >= float(hi) + 1.0  # 2^w exactly representable
  safe = np.where(nan | too_low | too_high, 0.0, v)
  if kind(dst) == UINT:
    r = safe.astype(np.uint64)
    r = np.where(too_high, np.uint64(hi), r)
  else:
    r = safe.astype(np.int64)
    r = np.where(too_low, np.int64(lo), np.where(too_high, np.int64(hi), r))
  return finish_int(r, dst) if is_narrow_int(dst) else r.astype(dtype(dst))


def convert_array(x: np.ndarray, src: t.Type, dst: t.Type) -> np.ndarray:
  """spec: convert - one element type to another (see the module doc)."""
  x = np.asarray(x)
  sk, dk = kind(src), kind(dst)
  if sk == COMPLEX and dk != COMPLEX:
    x, src, sk = x.real, src.element_type, FLOAT
  if dk == BOOL:
    return x != 0
  if dk in (SINT, UINT):
    if sk == BOOL:
      return x.astype(dtype(dst))
    if sk in (SINT, UINT):
      wide = x.astype(np.uint64 if sk == UINT else np.int64)
      if is_narrow_int(dst):
        return runtime.wrap_to(wide.astype(np.int64), dst)
      return wide.astype(dtype(dst))
    return _float_to_int(x, dst)
  if dk == FLOAT:
    if sk == BOOL:
      return x.astype(dtype(dst))
    if sk in (SINT, UINT):
      if is_narrow_int(src):
        x = x.astype(np.int64)
      return _int_to_float(x, src, dst)
    if src == dst:
      return x.copy()
    return round_float(x.astype(F64), dst)
  if dk == COMPLEX:
    inner = dst.element_type
    if sk == COMPLEX:
      re = convert_array(x.real, src.element_type, inner)
      im = convert_array(x.imag, src.element_type, inner)
    else:
      re = convert_array(x, src, inner)
      im = np.zeros(re.shape, re.dtype)
    out = np.empty(re.shape, dtype(dst))
    out.real = re
    out.imag = im
    return out
  raise support.UnimplementedError(f"convert from {src} to {dst}")
