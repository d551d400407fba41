"""Accuracy tests for the vectorizable transcendental functions.

f32: every function is JIT'ed as a 16-lane vector loop and swept densely
over its domain (linear sweeps of the interesting range plus random bit
patterns over all finite floats, both signs) and special values; the error
against the float64 numpy / scipy result, in f32 units in the last place,
must stay within the bound each docstring states. f64: a sample is checked
against mpmath at 40 digits. Also: the scalar loop over a polynomial is
vectorized by LLVM and calls no library function.
"""

import math
import re

import numpy as np
import pytest

import support
from xla.service.cpu import elemental_testing as et
from xla.service.cpu import jit

F32_MAX = float(np.finfo(np.float32).max)

_erf64 = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
  return _erf64(x).astype(np.float64)


def _logistic(x):
  return 1.0 / (1.0 + np.exp(-x))

# HLO opcode -> (float64 reference, documented max ulp on f32, domain).
_UNARY = {
    "exponential": (np.exp, 1.0, (-104.0, 89.0)),
    "exponential-minus-one": (np.expm1, 2.0, (-20.0, 89.0)),
    "log": (np.log, 1.0, (0.0, 100.0)),
    "log-plus-one": (np.log1p, 1.0, (-1.0, 10.0)),
    "tanh": (np.tanh, 2.0, (-10.0, 10.0)),
    "logistic": (_logistic, 3.0, (-110.0, 110.0)),
    "erf": (_erf, 1.0, (-5.0, 5.0)),
    "sine": (np.sin, 1.0, (-100.0, 100.0)),
    "cosine": (np.cos, 1.0, (-100.0, 100.0)),
    "tan": (np.tan, 1.0, (-100.0, 100.0)),
    "cbrt": (np.cbrt, 1.0, (-10.0, 10.0)),
    "atan": (np.arctan, 1.0, (-100.0, 100.0)),
    "asin": (np.arcsin, 1.0, (-1.0, 1.0)),
    "acos": (np.arccos, 1.0, (-1.0, 1.0)),
    "sinh": (np.sinh, 1.0, (-90.0, 90.0)),
    "cosh": (np.cosh, 1.0, (-90.0, 90.0)),
    "asinh": (np.arcsinh, 1.0, (-100.0, 100.0)),
    "acosh": (np.arccosh, 1.0, (1.0, 100.0)),
    "atanh": (np.arctanh, 1.0, (-1.0, 1.0)),
}
_BINARY = {
    "atan2": (np.arctan2, 1.0),
    "power": (np.power, 1.0),
}

_SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
     1e-45, -1e-45, 1e-40, -1e-40, 1.1754944e-38, F32_MAX, -F32_MAX, 88.72,
     88.73, -87.3, -103.9, -104.5, 3.0, 1e-8, -1e-8, 1e10, -1e10, 1e38,
     np.pi, np.pi / 2, 1.5707964, 3.1415927, 0.625, 3.92, 9.0, 10.5,
     -0.99999994, 16367173.0 * 2.0**72], np.float32)


def _random_floats(rng, n):
  """Random bit patterns over every finite float, both signs."""
  bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32)
  v = bits.view(np.float32)
  return np.concatenate([v, -v])


def _inputs(lo, hi, rng, n=100_000):
  lin = np.linspace(lo, hi, n, dtype=np.float64)
  uni = rng.uniform(lo, hi, n)
  return np.concatenate([lin, uni]).astype(np.float32)


def ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
  """|got - ref| in f32 ulps of ref; results that must be exactly a
  special value (NaN, infinities, zeros with their sign, overflow) count
  as 0 when they are that value and inf otherwise."""
  g = got.astype(np.float64)
  with np.errstate(all="ignore"):
    r32 = ref.astype(np.float32).astype(np.float64)  # rounds; inf on overflow
    a = np.abs(ref)
    exp = np.floor(np.log2(np.maximum(a, 2.0**-126)))
    ulp = 2.0**(exp - 23)
    err = np.abs(g - ref) / ulp
  exact = np.isnan(r32) | np.isinf(r32) | (r32 == 0)
  same = ((g == r32) & (np.signbit(g) == np.signbit(r32))) | (
      np.isnan(g) & np.isnan(r32))
  # A result that rounds to 0 or the largest float may be off by an ulp.
  near = exact & ~np.isnan(r32) & np.isfinite(g) & (err <= 1.0)
  return np.where(exact, np.where(same | near, 0.0, np.inf), err)


@pytest.fixture(scope="module")
def f32_batch():
  bt = et.KernelBatch()
  ks = {op: bt.add_elementwise(f"{op}(p0)", ["f32"], "f32", width=16)
        for op in _UNARY}
  ks.update({op: bt.add_elementwise(f"{op}(p0, p1)", ["f32", "f32"], "f32",
                                    width=16) for op in _BINARY})
  bt.compile()
  bt.ks = ks
  return bt


@pytest.mark.parametrize("op", sorted(_UNARY))
def test_f32_ulp_bound(f32_batch, op):
  ref_fn, bound, (lo, hi) = _UNARY[op]
  rng = np.random.default_rng(7)
  x = np.concatenate([_inputs(lo, hi, rng), _random_floats(rng, 100_000),
                      _SPECIAL])
  got = f32_batch.run(f32_batch.ks[op], x)
  with np.errstate(all="ignore"):
    ref = ref_fn(x.astype(np.float64))
  err = ulp_error(got, ref)
  worst = int(np.argmax(err))
  assert err[worst] <= bound, (op, x[worst], got[worst], ref[worst],
                               err[worst])
  # The bound is not loose by more than an ulp.
  assert err.max() > bound - 1.0


def test_f32_special_values_exact(f32_batch):
  """NaN, infinities and signed zeros exactly as C99 Annex F says."""
  run = lambda op, *a: f32_batch.run(f32_batch.ks[op], *[
      np.array(v, np.float32) for v in a])
  inf, nan = np.inf, np.nan
  np.testing.assert_array_equal(run("exponential", [inf, -inf, nan, -0.0]),
                                [inf, 0.0, nan, 1.0])
  np.testing.assert_array_equal(run("log", [0.0, -0.0, -1.0, inf, nan, 1.0]),
                                [-inf, -inf, nan, inf, nan, 0.0])
  for op in ("exponential-minus-one", "log-plus-one", "tanh", "erf", "sine",
             "tan", "cbrt"):
    got = run(op, [-0.0, 0.0])
    assert got[0] == 0 and np.signbit(got[0]) and not np.signbit(got[1]), op
  np.testing.assert_array_equal(run("log-plus-one", [-1.0, -2.0, inf]),
                                [-inf, nan, inf])
  np.testing.assert_array_equal(run("tanh", [inf, -inf]), [1.0, -1.0])
  np.testing.assert_array_equal(run("logistic", [inf, -inf, 0.0]),
                                [1.0, 0.0, 0.5])
  np.testing.assert_array_equal(run("sine", [inf, -inf, nan]),
                                [nan, nan, nan])
  y = [0.0, -0.0, 0.0, -0.0, inf, inf, -inf, 1.0, -1.0, nan, 1.0]
  x = [0.0, 0.0, -0.0, -0.0, inf, -inf, -inf, -inf, inf, 1.0, nan]
  np.testing.assert_array_equal(
      run("atan2", y, x),
      np.arctan2(np.float32(y), np.float32(x)).astype(np.float32))
  got = run("atan2", y, x)
  np.testing.assert_array_equal(np.signbit(got[:4]), [False, True, False,
                                                      True])


def test_f32_power_special_cases(f32_batch):
  vals = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0,
                   np.inf, -np.inf, np.nan, 1e-40, 2.5], np.float32)
  x = np.repeat(vals, vals.size)
  y = np.tile(vals, vals.size)
  got = f32_batch.run(f32_batch.ks["power"], x, y)
  with np.errstate(all="ignore"):
    want = np.power(x.astype(np.float64), y.astype(np.float64))  # C's pow
  # Special results (NaN, infinities, signed zeros, exact 1) exactly;
  # others within the bound.
  assert ulp_error(got, want).max() <= _BINARY["power"][1]
  special = ~np.isfinite(want) | (want == 0) | (want == 1)
  np.testing.assert_array_equal(got[special], want[special])
  num = ~np.isnan(want)
  np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))


def test_f32_binary_ulp_bounds(f32_batch):
  rng = np.random.default_rng(3)
  y = np.concatenate([_random_floats(rng, 100_000),
                      rng.uniform(-10, 10, 100_000).astype(np.float32)])
  x = np.concatenate([_random_floats(rng, 100_000)[::-1],
                      rng.uniform(-10, 10, 100_000).astype(np.float32)])
  got = f32_batch.run(f32_batch.ks["atan2"], y, x)
  err = ulp_error(got, np.arctan2(y.astype(np.float64),
                                  x.astype(np.float64)))
  assert err.max() <= _BINARY["atan2"][1]
  base = np.concatenate([rng.uniform(0, 4, 100_000),
                         np.abs(_random_floats(rng, 50_000))]).astype(
                             np.float32)
  base[::3] *= -1  # negative bases with integer exponents below
  expo = rng.uniform(-60, 60, base.size).astype(np.float32)
  expo[::3] = np.round(expo[::3])
  got = f32_batch.run(f32_batch.ks["power"], base, expo)
  with np.errstate(all="ignore"):
    ref = np.power(base.astype(np.float64), expo.astype(np.float64))
  err = ulp_error(got, ref)
  worst = int(np.argmax(err))
  assert err[worst] <= _BINARY["power"][1], (base[worst], expo[worst],
                                              got[worst], ref[worst])


# --- f64 ---------------------------------------------------------------------

def _f64_table(mpmath):
  """opcode -> (mpmath function, documented ulp bound, sampler)."""
  return {
      "exponential": (mpmath.exp, 1.0, lambda r: r.uniform(-745, 709.7, 600)),
      "exponential-minus-one": (mpmath.expm1, 2.0,
                                lambda r: r.uniform(-3, 3, 600)),
      "log": (mpmath.log, 1.0, lambda r: np.abs(_random_f64(r, 300))),
      "log-plus-one": (mpmath.log1p, 1.0, lambda r: r.uniform(-1, 5, 600)),
      "tanh": (mpmath.tanh, 3.0, lambda r: r.uniform(-3, 3, 600)),
      "logistic": (lambda v: 1 / (1 + mpmath.exp(-v)), 2.0,
                   lambda r: r.uniform(-50, 50, 600)),
      "cbrt": (lambda v: mpmath.sign(v) * mpmath.cbrt(abs(v)), 1.0,
               lambda r: _random_f64(r, 300)),
      "erf": (mpmath.erf, 1.0, lambda r: r.uniform(-6, 6, 300)),
      "sine": (mpmath.sin, 1.0, lambda r: r.uniform(-10, 10, 300)),
      "cosine": (mpmath.cos, 1.0, lambda r: r.uniform(-10, 10, 300)),
      "tan": (mpmath.tan, 1.0, lambda r: r.uniform(-10, 10, 300)),
  }


def _random_f64(rng, n):
  bits = rng.integers(0, 0x7FF0000000000000, n, dtype=np.uint64)
  v = bits.view(np.float64)
  return np.concatenate([v, -v])


def _f64_ulps(mpmath, got, xs, fn):
  mpmath.mp.dps = 40
  worst = 0.0
  for g, x in zip(got, xs):
    r = fn(mpmath.mpf(float(x)))
    rf = float(r)
    if not np.isfinite(rf):
      assert g == rf or np.isnan(g), (x, g, rf)
      continue
    ulp = max(float(np.spacing(abs(rf))), 2.0**-1074)
    worst = max(worst, float(abs(mpmath.mpf(float(g)) - r)) / ulp)
  return worst


def test_f64_ulp_bounds():
  mpmath = pytest.importorskip("mpmath")
  table = _f64_table(mpmath)
  bt = et.KernelBatch()
  ks = {op: bt.add_elementwise(f"{op}(p0)", ["f64"], "f64", width=8)
        for op in table}
  k_atan2 = bt.add_elementwise("atan2(p0, p1)", ["f64", "f64"], "f64",
                               width=8)
  k_pow = bt.add_elementwise("power(p0, p1)", ["f64", "f64"], "f64",
                             width=8)
  bt.compile()
  rng = np.random.default_rng(11)
  for op, (fn, bound, sample) in table.items():
    xs = sample(rng)
    assert _f64_ulps(mpmath, bt.run(ks[op], xs), xs, fn) <= bound, op
  y, x = rng.uniform(-5, 5, 64), rng.uniform(-5, 5, 64)
  np.testing.assert_allclose(bt.run(k_atan2, y, x), np.arctan2(y, x),
                             rtol=4e-16)
  np.testing.assert_allclose(bt.run(k_pow, np.abs(x), y),
                             np.power(np.abs(x), y), rtol=4e-16)
  specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1.0])
  with np.errstate(all="ignore"):
    for op, want in (("exponential", np.exp), ("log", np.log),
                     ("exponential-minus-one", np.expm1),
                     ("log-plus-one", np.log1p), ("tanh", np.tanh),
                     ("cbrt", np.cbrt)):
      got = bt.run(ks[op], specials)
      np.testing.assert_allclose(got, want(specials), rtol=3e-16)
      np.testing.assert_array_equal(np.signbit(got[:2]),
                                    np.signbit(want(specials[:2])))


def test_f64_library_functions():
  """The f64 functions documented as C library calls, on vectors too."""
  libm = {"atan": np.arctan, "asin": np.arcsin, "acos": np.arccos,
          "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
          "acosh": np.arccosh, "atanh": np.arctanh, "sine": np.sin,
          "cosine": np.cos, "tan": np.tan, "erf": _erf}
  bt = et.KernelBatch()
  ks = {op: bt.add_elementwise(f"{op}(p0)", ["f64"], "f64", width=8)
        for op in libm}
  bt.compile()
  x = np.linspace(-3, 3, 1001)
  with np.errstate(all="ignore"):
    for op, fn in libm.items():
      np.testing.assert_allclose(bt.run(ks[op], x), fn(x), rtol=1e-15)


# --- half precision and code shape ------------------------------------------


def test_f16_and_bf16_compute_in_f32():
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  bt = et.KernelBatch()
  k16 = bt.add_elementwise("exponential(p0)", ["f16"], "f16", width=16)
  kbf = bt.add_elementwise("tanh(p0)", ["bf16"], "bf16", width=16)
  bt.compile()
  x = np.linspace(-12, 11, 4001).astype(np.float16)
  got = bt.run(k16, x).astype(np.float64)
  want = np.exp(x.astype(np.float64)).astype(np.float16).astype(np.float64)
  with np.errstate(invalid="ignore"):
    ok = (got == want) | (np.abs(got - want) <= np.spacing(
        np.abs(want).astype(np.float16)).astype(np.float64))
  assert ok.all()
  xb = np.linspace(-5, 5, 2001).astype(ml_dtypes.bfloat16)
  got = bt.run(kbf, xb).astype(np.float64)
  want = np.tanh(xb.astype(np.float64))
  assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)) < 2**-8


def test_f32_loop_vectorizes_without_calls():
  """A scalar loop over exp / sin is widened by LLVM (16 f32 lanes when
  512-bit vectors are preferred; 8 for the functions that compute in
  double) and calls only LLVM intrinsics when the approximations are
  inlined (math_routines.INLINE_MATH)."""
  with support.flags.override(xla_cpu_inline_math=True):
    bt = et.KernelBatch()
    ops = {"exponential": "<16 x float>", "log": "<16 x float>",
           "tanh": "<16 x float>", "sine": "<8 x double>",
           "erf": "<8 x double>"}
    names = {bt.add_elementwise(f"{op}(p0)", ["f32"], "f32", width=1): want
             for op, want in ops.items()}
  bt.compile({n: '"prefer-vector-width"="512"' for n in names})
  text = str(bt.llvm_module)
  calls = set(re.findall(r"call [^@]*@\"?([\w.]+)", text))
  assert all(c.startswith("llvm.") for c in calls), calls
  if jit.host_target_info().vector_bits >= 512:
    for n, want in names.items():
      body = text[text.index(f"@{n}("):]
      body = body[:body.index("\n}\n")]
      assert want in body, n
