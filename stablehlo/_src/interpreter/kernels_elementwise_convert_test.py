"""Tests for convert, bitcast_convert and reduce_precision. Expected values
are exact rationals (`fractions`), bit patterns assembled by hand, or the
spec's examples; jax's `lax.reduce_precision` is a differential oracle
when installed."""

import fractions
import math
import struct

import ml_dtypes
import numpy as np
import pytest

from stablehlo._src.interpreter import kernels_elementwise_common as common
from stablehlo._src.interpreter import kernels_elementwise_testing as testing
from stablehlo._src.ir import types as t

run_op = testing.run_op


def _round_to_format(v: fractions.Fraction, p: int, emin: int):
  """Exact round-to-nearest-even of `v` to `p` significant bits with
  subnormals below 2^emin; returns a Fraction."""
  if v == 0:
    return fractions.Fraction(0)
  sign = -1 if v < 0 else 1
  a = abs(v)
  e = math.floor(math.log2(a))
  while fractions.Fraction(2) ** e > a:
    e -= 1
  while fractions.Fraction(2) ** (e + 1) <= a:
    e += 1
  q = max(e, emin) - (p - 1)
  scaled = a / fractions.Fraction(2) ** q
  n = math.floor(scaled)
  rem = scaled - n
  if rem > fractions.Fraction(1, 2) or (rem == fractions.Fraction(1, 2) and
                                        n % 2 == 1):
    n += 1
  return sign * n * fractions.Fraction(2) ** q


def test_float_to_int_truncates_saturates_and_maps_nan_to_zero():
  x = np.array([1.9, -1.9, -0.5, 300.0, -300.0, np.inf, -np.inf, np.nan,
                127.99, -128.7], np.float32)
  assert run_op("stablehlo.convert", [x], ["f32"], "i8").tolist() == [
      1, -1, 0, 127, -128, 127, -128, 0, 127, -128]
  assert run_op("stablehlo.convert", [x], ["f32"], "ui8").tolist() == [
      1, 0, 0, 255, 0, 255, 0, 0, 127, 0]
  assert run_op("stablehlo.convert", [x], ["f32"], "i4").astype(
      np.int64).tolist() == [1, -1, 0, 7, -8, 7, -8, 0, 7, -8]
  big = np.array([2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 1e300], np.float64)
  assert run_op("stablehlo.convert", [big], ["f64"], "i64").tolist() == [
      2 ** 63 - 1, -2 ** 63, 2 ** 63 - 1, 2 ** 63 - 1]
  assert run_op("stablehlo.convert", [big], ["f64"], "ui64").tolist() == [
      2 ** 63, 0, 2 ** 64 - 1, 2 ** 64 - 1]


def test_int_to_int_wraps_and_bool_conversions():
  x = np.array([-1, 0, 255, 256, 300], np.int32)
  assert run_op("stablehlo.convert", [x], ["i32"], "ui8").tolist() == [
      255, 0, 255, 0, 44]
  assert run_op("stablehlo.convert", [x], ["i32"], "i4").astype(
      int).tolist() == [-1, 0, -1, 0, -4]
  assert run_op("stablehlo.convert", [x], ["i32"], "i1").tolist() == [
      True, False, True, True, True]
  b = np.array([True, False])
  assert run_op("stablehlo.convert", [b], ["i1"], "f32").tolist() == [1, 0]
  assert run_op("stablehlo.convert", [b], ["i1"], "complex<f64>").tolist(
  ) == [1 + 0j, 0j]
  u = np.array([2 ** 64 - 1], np.uint64)
  assert run_op("stablehlo.convert", [u], ["ui64"], "i64").tolist() == [-1]


def test_complex_to_real_drops_the_imaginary_part():
  z = np.array([-1.5 + 2j, 0 + 1j, 3.25 - 1j], np.complex128)
  assert run_op("stablehlo.convert", [z], ["complex<f64>"], "f32").tolist(
  ) == [-1.5, 0.0, 3.25]
  assert run_op("stablehlo.convert", [z], ["complex<f64>"], "i1").tolist(
  ) == [True, False, True]
  assert run_op("stablehlo.convert", [z], ["complex<f64>"], "i32").tolist(
  ) == [-1, 0, 3]
  c = run_op("stablehlo.convert", [z], ["complex<f64>"], "complex<f32>")
  assert c.dtype == np.complex64 and c.tolist() == z.tolist()


@pytest.mark.parametrize("ty", ["bf16", "f16", "f8E4M3FN", "f8E5M2",
                                "f4E2M1FN"])
def test_f64_to_narrow_float_rounds_once(ty):
  et = t.FloatType(ty)
  p, emin = common.float_precision(et)
  fmax = float(ml_dtypes.finfo(testing.NP[ty]).max)
  rng = np.random.default_rng(7)
  # Values just around ties: midpoints between neighbours, nudged.
  base = np.array([1.0, 1.5, 3.0, -2.5, 0.75, 0.3, 2.0 ** emin * 1.5])
  ulp = 2.0 ** (np.floor(np.log2(np.abs(base))) - (p - 1))
  x = np.concatenate([base + ulp / 2, base + ulp / 2 + 2.0 ** -40,
                      base - ulp / 2, rng.uniform(-fmax / 2, fmax / 2, 50)])
  out = run_op("stablehlo.convert", [x], ["f64"], ty)
  for v, got in zip(x, out.astype(np.float64)):
    assert got == float(_round_to_format(fractions.Fraction(v), p, emin)), v


def test_wide_ints_to_bf16_round_once():
  vals = [2 ** 62 + 2 ** 54 + 1, -(2 ** 62 + 2 ** 54 + 1), 2 ** 62 + 2 ** 54,
          2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1, 3 * 2 ** 54 + 2 ** 46 + 1]
  out = run_op("stablehlo.convert", [np.array(vals, np.int64)], ["i64"],
               "bf16")
  want = [float(_round_to_format(fractions.Fraction(v), 8, -126))
          for v in vals]
  assert out.astype(np.float64).tolist() == want
  u = [2 ** 64 - 1, 2 ** 63 + 2 ** 55 + 1]
  out = run_op("stablehlo.convert", [np.array(u, np.uint64)], ["ui64"],
               "f16")
  assert out.astype(np.float64).tolist() == [math.inf, math.inf]
  out = run_op("stablehlo.convert", [np.array(u, np.uint64)], ["ui64"],
               "bf16")
  assert out.astype(np.float64).tolist() == [
      float(_round_to_format(fractions.Fraction(v), 8, -126)) for v in u]


# --- bitcast_convert ----------------------------------------------------------


def _f64_from_bits(bits):
  return struct.unpack("<d", bits.to_bytes(8, "little"))[0]


def test_bitcast_spec_example_f64_to_f16():
  x = np.array(_f64_from_bits(0x0123456789ABCDEF))
  out = run_op("stablehlo.bitcast_convert", [x], ["f64"], "f16",
               out_shape=(4,))
  assert out.view(np.uint16).tolist() == [0xCDEF, 0x89AB, 0x4567, 0x0123]
  back = run_op("stablehlo.bitcast_convert", [out], ["f16"], "f64",
                out_shape=())
  assert back.view(np.uint64) == 0x0123456789ABCDEF


def test_bitcast_i1_and_i4_pack_least_significant_first():
  word = 0b1011_0010
  bits = [(word >> k) & 1 == 1 for k in range(8)]
  out = run_op("stablehlo.bitcast_convert", [np.array(bits)], ["i1"],
               "ui8", out_shape=())
  assert int(out) == word
  back = run_op("stablehlo.bitcast_convert", [np.array(word, np.uint8)],
                ["ui8"], "i1", out_shape=(8,))
  assert back.tolist() == bits
  nib = np.array([[1, -2], [7, -8]], ml_dtypes.int4)
  out = run_op("stablehlo.bitcast_convert", [nib], ["i4"], "ui8",
               out_shape=(2,))
  assert out.tolist() == [0xE1, 0x87]
  out = run_op("stablehlo.bitcast_convert", [np.array([0xE1, 0x87],
                                                      np.uint8)],
               ["ui8"], "i4", out_shape=(2, 2))
  assert out.astype(int).tolist() == [[1, -2], [7, -8]]


def test_bitcast_complex_splits_parts_little_endian():
  z = np.array(complex(_f64_from_bits(0x0123456789ABCDEF),
                       _f64_from_bits(0x11111111)))
  out = run_op("stablehlo.bitcast_convert", [z], ["complex<f64>"],
               "complex<f32>", out_shape=(2,))
  words = out.view(np.uint32).tolist()
  assert words == [0x89ABCDEF, 0x01234567, 0x11111111, 0]


def test_bitcast_f32_to_i32_and_f4():
  x = np.array([1.0, -2.0], np.float32)
  out = run_op("stablehlo.bitcast_convert", [x], ["f32"], "i32")
  assert out.tolist() == [0x3F800000, -0x40000000]
  f4 = np.array([[1.0, -6.0]], ml_dtypes.float4_e2m1fn)  # codes 0x2, 0xF
  out = run_op("stablehlo.bitcast_convert", [f4], ["f4E2M1FN"], "i8",
               out_shape=(1,))
  assert out.tolist() == [-14]  # 0xF2


# --- reduce_precision ---------------------------------------------------------


def _rp_attrs(e, m):
  return f"{{exponent_bits = {e} : i32, mantissa_bits = {m} : i32}}"


def test_reduce_precision_to_f16_format():
  x = np.array([65504.0, 65520.0, 1e-8, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
                -np.inf, np.nan, 2.0 ** -14], np.float64)
  out = run_op("stablehlo.reduce_precision", [x], ["f64"], "f64",
               _rp_attrs(5, 10))
  want = [65504.0, np.inf, 0.0, 1.0, 1.0 + 2.0 ** -9, -np.inf, np.nan,
          2.0 ** -14]
  np.testing.assert_array_equal(out, want)
  # No mantissa bits left: NaN becomes infinity (upstream's rule); 3 =
  # 1.1b x 2^1 is a tie and the even neighbour keeps the exponent 1024.
  out = run_op("stablehlo.reduce_precision", [np.array([np.nan, 3.0, 7.0])],
               ["f64"], "f64", _rp_attrs(5, 0))
  assert out.tolist() == [np.inf, 2.0, 8.0]


@pytest.mark.parametrize("ty", ["f32", "bf16", "f16", "f64"])
def test_reduce_precision_matches_jax(ty):
  jax = pytest.importorskip("jax")
  jax.config.update("jax_enable_x64", True)
  dt = np.dtype(testing.NP[ty])
  rng = np.random.default_rng(11)
  bits = rng.integers(0, 2 ** min(dt.itemsize * 8, 63), 500,
                      dtype=np.uint64)
  x = bits.astype(f"u{dt.itemsize}").view(dt)
  for e, m in ((5, 10), (8, 7), (4, 3), (2, 1), (8, 23)):
    want = np.asarray(jax.lax.reduce_precision(jax.numpy.asarray(x), e, m))
    got = run_op("stablehlo.reduce_precision", [x], [ty], ty, _rp_attrs(e, m))
    same = got.view(f"u{dt.itemsize}") == want.view(f"u{dt.itemsize}")
    with np.errstate(invalid="ignore"):
      both_nan = np.isnan(got.astype(np.float64)) & np.isnan(
          want.astype(np.float64))
    assert (same | both_nan).all(), (e, m)
