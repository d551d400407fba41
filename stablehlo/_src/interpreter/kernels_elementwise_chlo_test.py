"""Tests for the CHLO elementwise kernels and the special functions behind
them. Expectations are closed forms (Gamma at integers and halves, zeta at
even integers), Python's `math` / `cmath`, Python big-integer arithmetic,
and jax.scipy.special as a differential oracle when installed."""

import cmath
import math

import ml_dtypes
import numpy as np
import pytest

from stablehlo._src.interpreter import kernels_elementwise_special as special
from stablehlo._src.interpreter import kernels_elementwise_testing as testing

run_op = testing.run_op
EULER = 0.5772156649015329


def _close(got, want, rel=1e-13, abs_=0.0):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  both_nan = np.isnan(got) & np.isnan(want)
  same_inf = np.isinf(want) & (got == want)
  with np.errstate(invalid="ignore"):
    err = np.abs(got - want)
  ok = both_nan | same_inf | (err <= abs_ + rel * np.abs(want))
  assert ok.all(), (got[~ok], want[~ok])


# --- special functions (float64) ----------------------------------------------


def test_lgamma_closed_forms_and_poles():
  x = np.array([1.0, 2.0, 5.0, 0.5, -0.5, -1.5, 0.0, -3.0, np.inf, -np.inf])
  want = [0.0, 0.0, math.log(24), 0.5 * math.log(math.pi),
          math.log(2 * math.sqrt(math.pi)),
          math.log(4 * math.sqrt(math.pi) / 3), np.inf, np.inf, np.inf,
          np.inf]
  _close(special.lgamma(x), want, abs_=1e-15)


def test_digamma_closed_forms_and_poles():
  x = np.array([1.0, 0.5, 4.0, 1.5, -0.5, 30.5, 0.0, -2.0, np.inf])
  want = [-EULER, -EULER - 2 * math.log(2), -EULER + 1 + 1 / 2 + 1 / 3,
          2 - EULER - 2 * math.log(2), 2 - EULER - 2 * math.log(2),
          math.nan, math.nan, math.nan, math.inf]
  # psi(30.5) from the recurrence psi(x + 1) = psi(x) + 1 / x.
  v = -EULER - 2 * math.log(2)
  for k in range(30):
    v += 1 / (0.5 + k)
  want[5] = v
  _close(special.digamma(x), want, rel=1e-13, abs_=1e-15)


def test_zeta_and_polygamma_closed_forms():
  s = np.array([2.0, 4.0, 2.0, 3.0, 1.0, 0.5, 2.0, 2.0])
  q = np.array([1.0, 1.0, 0.5, 2.0, 1.0, 1.0, 0.0, -1.5])
  zeta3 = 1.2020569031595942
  want = [math.pi ** 2 / 6, math.pi ** 4 / 90, math.pi ** 2 / 2, zeta3 - 1,
          math.inf, math.nan, math.inf,
          1 / 1.5 ** 2 + 1 / 0.5 ** 2 + math.pi ** 2 / 2]
  _close(special.zeta(s, q), want, rel=1e-13)
  n = np.array([1.0, 2.0, 0.0, 1.5, -1.0, 1.0])
  x = np.array([1.0, 1.0, 1.0, 1.0, 1.0, -2.0])
  want = [math.pi ** 2 / 6, -2 * zeta3, -EULER, math.nan, math.nan,
          math.nan]
  _close(special.polygamma(n, x), want, rel=1e-13)


def test_erf_inv_inverts_erf():
  y = np.array([-0.999999, -0.9, -0.3, 1e-9, 0.25, 0.5, 0.75, 0.99,
                1 - 1e-15])
  x = special.erf_inv(y)
  back = np.array([math.erf(v) for v in x])
  _close(back, y, rel=2e-15)
  tail = np.array([math.erfc(v) for v in x[-3:]])
  _close(tail, 1 - y[-3:], rel=1e-12)
  edges = special.erf_inv(np.array([1.0, -1.0, 1.5, 0.0, -0.0, np.nan]))
  assert edges[:2].tolist() == [math.inf, -math.inf]
  assert np.isnan(edges[2]) and np.isnan(edges[5])
  assert np.signbit(edges[4]) and not np.signbit(edges[3])


def _i1e_series(x):
  """exp(-|x|) I1(x) by direct summation in Python floats."""
  h = abs(x) / 2
  term, total, k = h, h, 0
  while term > 1e-18 * total:
    k += 1
    term *= h * h / (k * (k + 1))
    total += term
  return math.copysign(total * math.exp(-abs(x)), x)


def test_bessel_i1e_series_and_asymptotics():
  x = np.array([0.0, 1e-5, 0.5, -1.0, 3.0, 10.0, -19.9, 20.5, 45.0, 300.0])
  want = [_i1e_series(v) for v in x]
  _close(special.bessel_i1e(x), want, rel=1e-13)
  assert special.bessel_i1e(np.array([np.inf, -np.inf])).tolist() == [0, 0]


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erf", "erfc",
                                  "erf_inv", "bessel_i1e"])
def test_special_functions_match_jax(name):
  jax = pytest.importorskip("jax")
  jax.config.update("jax_enable_x64", True)
  jss = jax.scipy.special
  ref = {"lgamma": jss.gammaln, "digamma": jss.digamma, "erf": jss.erf,
         "erfc": jss.erfc, "erf_inv": jss.erfinv, "bessel_i1e": jss.i1e}[name]
  rng = np.random.default_rng(5)
  x = rng.uniform(-0.999, 0.999, 300) if name == "erf_inv" else (
      rng.uniform(-20, 20, 300))
  if name in ("lgamma", "digamma"):
    x = x[np.abs(x - np.round(x)) > 1e-3]  # away from the poles
  got = getattr(special, name)(x)
  want = np.asarray(ref(jax.numpy.asarray(x)))
  _close(got, want, rel=1e-10, abs_=1e-12)


# --- CHLO kernels -------------------------------------------------------------


@pytest.mark.parametrize("op,fn", [
    ("acos", math.acos), ("asin", math.asin), ("atan", math.atan),
    ("acosh", math.acosh), ("asinh", math.asinh), ("atanh", math.atanh),
    ("cosh", math.cosh), ("sinh", math.sinh), ("tan", math.tan),
    ("erf", math.erf), ("erfc", math.erfc), ("lgamma", math.lgamma)])
def test_unary_float_ops_within_two_ulp(op, fn):
  x = np.array([-0.9, -0.3, 0.2, 0.6, 0.95, 1.5, 3.0, 7.25], np.float32)
  for v, got in zip(x, run_op("chlo." + op, [x], ["f32"], "f32")):
    try:
      want = np.float32(fn(float(v)))
    except ValueError:
      assert np.isnan(got), (op, v)
      continue
    assert abs(float(got) - float(want)) <= 2 * abs(
        float(np.spacing(want))), (op, v, got, want)


@pytest.mark.parametrize("op,fn", [
    ("acos", cmath.acos), ("asin", cmath.asin), ("atan", cmath.atan),
    ("acosh", cmath.acosh), ("asinh", cmath.asinh), ("atanh", cmath.atanh),
    ("cosh", cmath.cosh), ("sinh", cmath.sinh), ("tan", cmath.tan)])
def test_unary_complex_ops(op, fn):
  z = np.array([0.5 + 0.25j, -1.5 + 2j, 3 - 0.5j, -0.1 - 4j], np.complex128)
  got = run_op("chlo." + op, [z], ["complex<f64>"], "complex<f64>")
  want = np.array([fn(complex(v)) for v in z])
  np.testing.assert_allclose(got, want, rtol=1e-12)


def test_predicates_conj_square():
  x = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
  assert run_op("chlo.is_inf", [x], ["f32"], "i1").tolist() == [
      False, True, True, False]
  assert run_op("chlo.is_pos_inf", [x], ["f32"], "i1").tolist() == [
      False, True, False, False]
  assert run_op("chlo.is_neg_inf", [x], ["f32"], "i1").tolist() == [
      False, False, True, False]
  z = np.array([1 + 2j, -3j], np.complex64)
  assert run_op("chlo.conj", [z], ["complex<f32>"], "complex<f32>").tolist(
  ) == [1 - 2j, 3j]
  assert run_op("chlo.square", [z], ["complex<f32>"],
                "complex<f32>").tolist() == [-3 + 4j, -9 + 0j]
  i = np.array([100, -3], np.int8)
  assert run_op("chlo.square", [i], ["i8"], "i8").tolist() == [16, 9]


@pytest.mark.parametrize("ty,bits", [("i8", 8), ("ui8", 8), ("i32", 32),
                                     ("ui32", 32), ("i64", 64),
                                     ("ui64", 64)])
def test_mulhi_is_the_high_half_of_the_product(ty, bits):
  signed = not ty.startswith("ui")
  lo = -(1 << (bits - 1)) if signed else 0
  hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
  vals = [lo, hi, 0, 1, 3, hi // 3, lo // 5 if signed else hi // 7]
  if signed:
    vals += [-1, -12345]
  vals = [v for v in vals if lo <= v <= hi]
  a = [x for x in vals for _ in vals]
  b = [y for _ in vals for y in vals]
  wide = np.int64 if signed else np.uint64
  dt = testing.NP[ty]
  out = run_op("chlo.mulhi", [np.array(a, wide).astype(dt),
                              np.array(b, wide).astype(dt)], [ty, ty], ty)
  want = [testing.wrap((x * y) >> bits, bits, signed) for x, y in zip(a, b)]
  assert [int(v) for v in out] == want


def test_next_after_bf16_steps_one_ulp():
  bf = ml_dtypes.bfloat16
  x = np.array([1.0, 1.0, -1.0, 0.0, 0.0, 2.0, np.inf, np.nan], bf)
  y = np.array([2.0, 0.0, 0.0, 1.0, -1.0, 2.0, 0.0, 1.0], bf)
  out = run_op("chlo.next_after", [x, y], ["bf16", "bf16"], "bf16")
  bits = out.view(np.uint16).tolist()
  assert bits[:7] == [0x3F81, 0x3F7F, 0xBF7F, 0x0001, 0x8001, 0x4000, 0x7F7F]
  assert np.isnan(out[7].astype(np.float32))


def test_broadcast_binary_ops():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  y = np.array([1.0, 4.0, 3.0], np.float32)
  out = run_op("chlo.broadcast_add", [x, y], ["f32", "f32"], "f32",
               "{broadcast_dimensions = array<i64: 1>}", out_shape=(2, 3))
  assert out.tolist() == [[1, 5, 5], [4, 8, 8]]
  c = np.array([10.0, 20.0], np.float32)
  out = run_op("chlo.broadcast_multiply", [x, c], ["f32", "f32"], "f32",
               "{broadcast_dimensions = array<i64: 0>}", out_shape=(2, 3))
  assert out.tolist() == [[0, 10, 20], [60, 80, 100]]
  out = run_op(
      "chlo.broadcast_compare", [x, y], ["f32", "f32"], "i1",
      "{comparison_direction = #chlo<comparison_direction LT>}",
      out_shape=(2, 3))
  assert out.tolist() == [[True, True, True], [False, False, False]]
  col = np.array([[1], [2]], np.int32)
  row = np.array([[10, 20, 30]], np.int32)
  out = run_op("chlo.broadcast_subtract", [row, col], ["i32", "i32"], "i32",
               out_shape=(2, 3))
  assert out.tolist() == [[9, 19, 29], [8, 18, 28]]
  p = np.array([True, False, True])
  out = run_op("chlo.broadcast_select", [p, x, np.float32(-1)],
               ["i1", "f32", "f32"], "f32", out_shape=(2, 3))
  assert out.tolist() == [[0, -1, 2], [3, -1, 5]]


def test_constant_like_takes_the_operand_shape():
  x = np.zeros((2, 3), np.float32)
  out = run_op("chlo.constant_like", [x], ["f32"], "f32",
               "{value = 2.5 : f32}")
  assert out.shape == (2, 3) and (out == 2.5).all()
