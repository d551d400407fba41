"""Tests for the elementwise StableHLO kernels. Expected values come from
Python integer arithmetic, the `math` module, or values
worked out by hand from the spec, never from the kernels' own output."""

import math

import ml_dtypes
import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import kernels_elementwise_testing as testing
from stablehlo._src.ops import registry
from stablehlo._src.ops import verify

run_op = testing.run_op


def _int_samples(ty):
  dt = np.dtype(testing.NP[ty])
  info = ml_dtypes.iinfo(dt)
  lo, hi = int(info.min), int(info.max)
  vals = {lo, hi, 0, 1, 2, 3, lo + 1, hi - 1, info.bits - 1, info.bits,
          info.bits + 1}
  if lo < 0:
    vals |= {-1, -2, -3}
  vals = sorted(v for v in vals if lo <= v <= hi)
  return vals, info.bits, lo < 0


# --- integers -----------------------------------------------------------------


def _tdiv(a, b):
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def _int_ref(op, a, b, bits, signed):
  lo = -(1 << (bits - 1)) if signed else 0
  if op == "add":
    return a + b
  if op == "subtract":
    return a - b
  if op == "multiply":
    return a * b
  if op in ("divide", "remainder"):
    if b == 0:  # XLA: x / 0 = -1 (all ones), x % 0 = x
      return -1 if op == "divide" else a
    if signed and a == lo and b == -1:
      return lo if op == "divide" else 0
    q = _tdiv(a, b)
    return q if op == "divide" else a - q * b
  if op == "maximum":
    return max(a, b)
  if op == "minimum":
    return min(a, b)
  if op == "and":
    return a & b
  if op == "or":
    return a | b
  if op == "xor":
    return a ^ b
  ua, ub = a & ((1 << bits) - 1), b & ((1 << bits) - 1)
  if op == "shift_left":
    return ua << ub if ub < bits else 0
  if op == "shift_right_logical":
    return ua >> ub if ub < bits else 0
  if op == "shift_right_arithmetic":  # the bits read as two's complement
    return testing.wrap(a, bits, True) >> min(ub, bits - 1)
  if op == "power":
    if signed and b < 0:
      return 0 if abs(a) != 1 else a ** (-b)
    return pow(a, ub, 1 << bits)
  raise AssertionError(op)


_INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder",
               "maximum", "minimum", "and", "or", "xor", "shift_left",
               "shift_right_logical", "shift_right_arithmetic", "power")


@pytest.mark.parametrize("ty", ["i2", "i4", "i8", "i16", "i32", "i64", "ui2",
                                "ui4", "ui8", "ui16", "ui32", "ui64"])
@pytest.mark.parametrize("op", _INT_BINARY)
def test_integer_binary_ops_wrap(op, ty):
  vals, bits, signed = _int_samples(ty)
  a = [x for x in vals for _ in vals]
  b = [y for _ in vals for y in vals]
  dt = testing.NP[ty]
  wide = np.int64 if signed else np.uint64
  out = run_op("stablehlo." + op, [np.array(a, wide).astype(dt),
                                   np.array(b, wide).astype(dt)], [ty, ty], ty)
  want = [testing.wrap(_int_ref(op, x, y, bits, signed), bits, signed)
          for x, y in zip(a, b)]
  got = [int(v) for v in np.asarray(out).astype(np.int64 if signed else
                                                  np.uint64)]
  assert got == want


@pytest.mark.parametrize("ty", ["i4", "i8", "i32", "i64", "ui4", "ui16",
                                "ui64"])
def test_integer_unary_ops(ty):
  vals, bits, signed = _int_samples(ty)
  x = np.array(vals, np.int64 if signed else np.uint64).astype(testing.NP[ty])
  mask = (1 << bits) - 1

  def ints(r):
    return [int(v) for v in np.asarray(r).astype(
        np.int64 if signed else np.uint64)]

  assert ints(run_op("stablehlo.negate", [x], [ty], ty)) == [
      testing.wrap(-v, bits, signed) for v in vals]
  assert ints(run_op("stablehlo.not", [x], [ty], ty)) == [
      testing.wrap(~v, bits, signed) for v in vals]
  assert ints(run_op("stablehlo.popcnt", [x], [ty], ty)) == [
      bin(v & mask).count("1") for v in vals]
  assert ints(run_op("stablehlo.count_leading_zeros", [x], [ty], ty)) == [
      bits - (v & mask).bit_length() for v in vals]
  if signed:
    assert ints(run_op("stablehlo.abs", [x], [ty], ty)) == [
        testing.wrap(abs(v), bits, True) for v in vals]
    assert ints(run_op("stablehlo.sign", [x], [ty], ty)) == [
        (v > 0) - (v < 0) for v in vals]


def test_booleans_are_logical():
  a = np.array([False, False, True, True])
  b = np.array([False, True, False, True])
  ops = {"add": a | b, "multiply": a & b, "maximum": a | b, "minimum": a & b,
         "and": a & b, "or": a | b, "xor": a ^ b}
  for op, want in ops.items():
    out = run_op("stablehlo." + op, [a, b], ["i1", "i1"], "i1")
    assert out.dtype == np.bool_ and list(out) == list(want), op
  assert list(run_op("stablehlo.not", [a], ["i1"], "i1")) == list(~a)


# --- floats -------------------------------------------------------------------


def test_maximum_minimum_propagate_nan_and_order_zeros():
  x = np.array([np.nan, 1.0, -0.0, 0.0, -0.0, -np.inf], np.float32)
  y = np.array([1.0, np.nan, 0.0, -0.0, -0.0, 2.0], np.float32)
  mx = run_op("stablehlo.maximum", [x, y], ["f32", "f32"], "f32")
  mn = run_op("stablehlo.minimum", [x, y], ["f32", "f32"], "f32")
  assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
  assert [str(v) for v in mx[2:]] == ["0.0", "0.0", "-0.0", "2.0"]
  assert [str(v) for v in mn[2:]] == ["-0.0", "-0.0", "-0.0", "-inf"]
  xb, yb = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
  mxb = run_op("stablehlo.maximum", [xb, yb], ["bf16", "bf16"], "bf16")
  assert np.signbit(mxb[2:].astype(np.float32)).tolist() == [
      False, False, True, False]


def test_clamp_with_scalar_bounds():
  x = np.array([-5, 0, 3, 9], np.int32)
  out = run_op("stablehlo.clamp", [np.int32(-1), x, np.int32(4)],
               ["i32", "i32", "i32"], "i32", out_shape=(4,))
  assert out.tolist() == [-1, 0, 3, 4]


def test_remainder_takes_the_sign_of_the_dividend():
  x = np.array([5.5, -5.5, 5.5, -5.5, 1e30, 7.0], np.float64)
  y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, np.inf], np.float64)
  out = run_op("stablehlo.remainder", [x, y], ["f64", "f64"], "f64")
  assert out.tolist() == [math.fmod(a, b) for a, b in zip(x, y)]
  xh = x[:4].astype(np.float16)
  outh = run_op("stablehlo.remainder", [xh, y[:4].astype(np.float16)],
                ["f16", "f16"], "f16")
  assert outh.tolist() == [1.5, -1.5, 1.5, -1.5]


def test_rounding_ops():
  x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994, -0.3, 3.7,
                -np.inf], np.float64)
  afz = run_op("stablehlo.round_nearest_afz", [x], ["f64"], "f64")
  even = run_op("stablehlo.round_nearest_even", [x], ["f64"], "f64")
  assert [str(v) for v in afz] == ["1.0", "2.0", "3.0", "-1.0", "-3.0",
                                   "0.0", "-0.0", "4.0", "-inf"]
  assert [str(v) for v in even] == ["0.0", "2.0", "2.0", "-0.0", "-2.0",
                                    "0.0", "-0.0", "4.0", "-inf"]
  assert run_op("stablehlo.floor", [x], ["f64"], "f64").tolist() == [
      math.floor(v) if math.isfinite(v) else v for v in x]
  assert run_op("stablehlo.ceil", [x], ["f64"], "f64").tolist() == [
      math.ceil(v) if math.isfinite(v) else v for v in x]


def test_sign_of_floats_and_complex():
  x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan], np.float32)
  out = run_op("stablehlo.sign", [x], ["f32"], "f32")
  assert [str(v) for v in out[:4]] == ["-1.0", "-0.0", "0.0", "1.0"]
  assert np.isnan(out[4])
  z = np.array([3 + 4j, 0j, complex(np.nan, 1)], np.complex128)
  out = run_op("stablehlo.sign", [z], ["complex<f64>"], "complex<f64>")
  assert out[0] == 0.6 + 0.8j and out[1] == 0
  assert np.isnan(out[2].real) and np.isnan(out[2].imag)


def _rounded_f32(v):
  return float(np.float32(v))


@pytest.mark.parametrize("op,fn", [
    ("exponential", math.exp), ("log", math.log), ("sine", math.sin),
    ("cosine", math.cos), ("tan", math.tan), ("tanh", math.tanh),
    ("sqrt", math.sqrt), ("exponential_minus_one", math.expm1),
    ("log_plus_one", math.log1p), ("cbrt", lambda v: math.copysign(
        abs(v) ** (1 / 3), v)), ("rsqrt", lambda v: 1 / math.sqrt(v)),
    ("logistic", lambda v: 1 / (1 + math.exp(-v)))])
def test_float_functions_are_rounded_once(op, fn):
  # float64 evaluation rounded once to f32: within one ulp of the libm
  # value (the cube root via ** is itself only ~1 ulp accurate).
  x = np.array([0.1, 0.5, 1.0, 1.7, 2.25, 3.0, 10.5], np.float32)
  out = run_op("stablehlo." + op, [x], ["f32"], "f32")
  for got, v in zip(out, x):
    want = _rounded_f32(fn(float(v)))
    assert abs(float(got) - want) <= abs(np.spacing(np.float32(want))), (op, v)


def test_bf16_arithmetic_rounds_once_to_nearest_even():
  # 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to
  # even gives 1; a hair above the tie rounds up.
  a = np.array([1.0, 1.0], ml_dtypes.bfloat16)
  b = np.array([2.0 ** -8, 2.0 ** -8 + 2.0 ** -15], ml_dtypes.bfloat16)
  out = run_op("stablehlo.add", [a, b], ["bf16", "bf16"], "bf16")
  assert out.astype(np.float64).tolist() == [1.0, 1.0 + 2.0 ** -7]


def test_complex_parts():
  re = np.array([1.5, -2.0], np.float32)
  im = np.array([0.25, 3.0], np.float32)
  z = run_op("stablehlo.complex", [re, im], ["f32", "f32"], "complex<f32>")
  assert z.dtype == np.complex64 and z.tolist() == [1.5 + 0.25j, -2 + 3j]
  assert run_op("stablehlo.real", [z], ["complex<f32>"], "f32").tolist() == [
      1.5, -2.0]
  assert run_op("stablehlo.imag", [z], ["complex<f32>"], "f32").tolist() == [
      0.25, 3.0]
  assert run_op("stablehlo.imag", [re], ["f32"], "f32").tolist() == [0, 0]
  a = run_op("stablehlo.abs", [np.array([3 + 4j], np.complex64)],
             ["complex<f32>"], "f32")
  assert a.dtype == np.float32 and a.tolist() == [5.0]


def test_is_finite_and_select():
  x = np.array([1.0, np.inf, -np.inf, np.nan], ml_dtypes.bfloat16)
  assert run_op("stablehlo.is_finite", [x], ["bf16"], "i1").tolist() == [
      True, False, False, False]
  p = np.array([True, False, True])
  out = run_op("stablehlo.select", [p, np.array([1, 2, 3], np.int8),
                                    np.array([4, 5, 6], np.int8)],
               ["i1", "i8", "i8"], "i8")
  assert out.tolist() == [1, 5, 3]
  out = run_op("stablehlo.select", [np.bool_(False), np.array([1, 2]),
                                    np.array([4, 5])],
               ["i1", "i64", "i64"], "i64", out_shape=(2,))
  assert out.tolist() == [4, 5]


# --- compare ------------------------------------------------------------------

_DIRS = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b,
         "GE": lambda a, b: a >= b, "GT": lambda a, b: a > b,
         "LE": lambda a, b: a <= b, "LT": lambda a, b: a < b}


def _cmp_attrs(direction, ctype):
  return (f"{{comparison_direction = #stablehlo<comparison_direction "
          f"{direction}>, compare_type = #stablehlo<comparison_type {ctype}>}}")


@pytest.mark.parametrize("direction", sorted(_DIRS))
def test_compare_ints_and_floats(direction):
  vals = [-3, -1, 0, 2, 7]
  a = [x for x in vals for _ in vals]
  b = [y for _ in vals for y in vals]
  want = [_DIRS[direction](x, y) for x, y in zip(a, b)]
  for ty, ctype in (("i4", "SIGNED"), ("i64", "SIGNED"), ("f32", "FLOAT"),
                    ("bf16", "FLOAT")):
    out = run_op("stablehlo.compare", [np.array(a).astype(testing.NP[ty]),
                                       np.array(b).astype(testing.NP[ty])],
                 [ty, ty], "i1", _cmp_attrs(direction, ctype))
    assert out.tolist() == want, ty
  ua = [v & 0xFF for v in a]
  ub = [v & 0xFF for v in b]
  out = run_op("stablehlo.compare", [np.array(ua, np.uint8),
                                     np.array(ub, np.uint8)],
               ["ui8", "ui8"], "i1", _cmp_attrs(direction, "UNSIGNED"))
  assert out.tolist() == [_DIRS[direction](x, y) for x, y in zip(ua, ub)]


@pytest.mark.parametrize("direction", sorted(_DIRS))
def test_compare_float_nan_is_unordered_but_totalorder_orders_it(direction):
  # totalOrder: -NaN < -inf < -1 < -0 < +0 < 1 < +inf < +NaN.
  ordered = [-np.nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan]
  x = np.array(ordered, np.float64)
  x[0] = -abs(x[0])  # make sure the first NaN carries the sign bit
  x[-1] = abs(x[-1])
  n = len(ordered)
  a = np.repeat(x, n)
  b = np.tile(x, n)
  ia, ib = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
  out = run_op("stablehlo.compare", [a, b], ["f64", "f64"], "i1",
               _cmp_attrs(direction, "TOTALORDER"))
  assert out.tolist() == [_DIRS[direction](i, j) for i, j in zip(ia, ib)]
  out = run_op("stablehlo.compare", [a, b], ["f64", "f64"], "i1",
               _cmp_attrs(direction, "FLOAT"))
  assert out.tolist() == [_DIRS[direction](float(p), float(q))
                          for p, q in zip(a, b)]


def test_compare_complex_is_lexicographic():
  a = np.array([1 + 2j, 1 + 2j, 1 + 2j, 2 + 0j], np.complex64)
  b = np.array([1 + 3j, 1 + 2j, 0 + 9j, 1 + 9j], np.complex64)
  lt = run_op("stablehlo.compare", [a, b], ["complex<f32>"] * 2, "i1",
              _cmp_attrs("LT", "FLOAT"))
  eq = run_op("stablehlo.compare", [a, b], ["complex<f32>"] * 2, "i1",
              _cmp_attrs("EQ", "FLOAT"))
  assert lt.tolist() == [True, False, False, False]
  assert eq.tolist() == [False, True, False, False]


# --- map ----------------------------------------------------------------------


def _map_src(body):
  return f"""
  func.func @main(%x: tensor<2x3xi64>, %y: tensor<2x3xi64>)
      -> tensor<2x3xi64> {{
    %r = "stablehlo.map"(%x, %y) ({{
      ^bb0(%a: tensor<i64>, %b: tensor<i64>):
        {body}
    }}) {{dimensions = array<i64: 0, 1>}}
        : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
    return %r : tensor<2x3xi64>
  }}"""


def test_map_runs_the_region_elementwise():
  x = np.arange(6, dtype=np.int64).reshape(2, 3)
  y = np.arange(6, 12, dtype=np.int64).reshape(2, 3)
  src = _map_src("""
        %c = stablehlo.constant dense<3> : tensor<i64>
        %0 = stablehlo.multiply %a, %b : tensor<i64>
        %1 = stablehlo.add %0, %c : tensor<i64>
        stablehlo.return %1 : tensor<i64>""")
  module = text.parse_module(src, "t.mlir")
  verify.verify_module(module)
  (out,) = interpreter.Interpreter(module).run("main", [x, y])
  assert out.tolist() == (x * y + 3).tolist()
  src = _map_src("""
        %c = stablehlo.constant dense<7> : tensor<i64>
        stablehlo.return %c : tensor<i64>""")
  module = text.parse_module(src, "t.mlir")
  (out,) = interpreter.Interpreter(module).run("main", [x, y])
  assert out.tolist() == [[7] * 3] * 2


def test_map_runs_other_regions_per_element():
  # reshape / concatenate / slice are not elementwise: the region must see
  # one element at a time. Result: b - a.
  x = np.arange(6, dtype=np.int64).reshape(2, 3)
  y = x * 10
  src = _map_src("""
        %0 = stablehlo.reshape %a : (tensor<i64>) -> tensor<1xi64>
        %1 = stablehlo.reshape %b : (tensor<i64>) -> tensor<1xi64>
        %2 = stablehlo.concatenate %0, %1, dim = 0
            : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
        %3 = stablehlo.slice %2 [1:2] : (tensor<2xi64>) -> tensor<1xi64>
        %4 = stablehlo.reshape %3 : (tensor<1xi64>) -> tensor<i64>
        %5 = stablehlo.subtract %4, %a : tensor<i64>
        stablehlo.return %5 : tensor<i64>""")
  module = text.parse_module(src, "t.mlir")
  (out,) = interpreter.Interpreter(module).run("main", [x, y])
  assert out.tolist() == (y - x).tolist()


# --- corpus -------------------------------------------------------------------

_INTERPRET_FILES = (
    "abs", "add", "and", "atan2", "bitcast_convert", "cbrt", "ceil", "clamp",
    "compare", "complex", "convert", "cosine", "count_leading_zeros",
    "divide", "exponential", "exponential_minus_one", "floor", "imag",
    "is_finite", "log", "log_plus_one", "logistic", "map", "maximum",
    "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "real",
    "reduce_precision", "remainder", "round_nearest_afz",
    "round_nearest_even", "rsqrt", "select", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sine", "sqrt",
    "subtract", "tan", "tanh", "xor", "chlo/mulhi")

# A fixed, small sample of generated programs that use these ops.
_TESTDATA_FILES = (
    "atan2_float32_20_20_float32_20_20.mlir",
    "div_int8_2_int8_2.mlir",
    "div_complex64_2_complex64_2.mlir",
    "rem_float16_2_float16_2.mlir",
    "shift_right_arithmetic_int32_20_20_int32_20_20.mlir",
    "convert_element_type_float32_100_100.mlir",
    "bitcast_convert_type_float32_2_3.mlir",
    "reduce_precision_bfloat16_5_7.mlir",
    "exp_bfloat16_20_20.mlir",
    "logistic_float32_20_20.mlir",
    "pow_float32_20_30_float32_20_30.mlir",
    "sign_int32_20_20.mlir",
    "population_count_uint16_3.mlir",
    "lgamma_float32_20_20_chlo.mlir",
    "erf_inv_float32_20_20_chlo.mlir",
    "sinh_float32_20_20_chlo.mlir",
    "nextafter_bfloat16_20_20_bfloat16_20_20_chlo.mlir",
)


@pytest.mark.parametrize("name", _INTERPRET_FILES)
def test_interpret_corpus(name):
  corpus_testing.run_corpus_file("interpret", f"{name}.mlir")


@pytest.mark.parametrize("name", _TESTDATA_FILES)
def test_testdata_sample(name):
  corpus_testing.run_corpus_file("testdata", name)


def test_every_kernel_is_registered():
  names = [f"stablehlo.{n}" for n in _INTERPRET_FILES if "/" not in n]
  names += ["stablehlo.convert", "stablehlo.bitcast_convert",
            "stablehlo.reduce_precision"]
  for name in names:
    assert registry.get(name).interpreter is not None, name
