"""Tests for xla.literal: construction and XLA's literal text forms."""

import math

import ml_dtypes
import numpy as np
import pytest

import support
from xla import shape_util as su
from xla.literal import format_float
from xla.literal import Literal
from xla.xla_data import PrimitiveType as P


def test_array_and_scalar_text():
  assert str(Literal.from_array(np.array([1, 2], np.float32))) == (
      "f32[2]{0} {1, 2}")
  assert str(Literal.scalar(1.5, P.F32)) == "f32[] 1.5"
  assert str(Literal.scalar(True, P.PRED)) == "pred[] true"
  assert str(Literal.scalar(False, P.PRED)) == "pred[] false"
  assert str(Literal.from_array(np.array([True, False]))) == (
      "pred[2]{0} {1, 0}")
  assert str(Literal.scalar(1 + 2j, P.C64)) == "c64[] (1, 2)"
  assert str(Literal.scalar(-7, P.S8)) == "s8[] -7"
  assert str(Literal.scalar(2**64 - 1, P.U64)) == (
      "u64[] 18446744073709551615")


def test_multiline_and_oneline_arrays():
  lit = Literal.from_array(np.array([[1, 2], [3, 4]], np.int32))
  assert lit.to_string() == "s32[2,2]{1,0} {\n  { 1, 2 },\n  { 3, 4 }\n}"
  assert lit.to_string(oneline=True) == "s32[2,2]{1,0} { { 1, 2 }, { 3, 4 } }"
  column = Literal.from_array(np.array([[True], [False]]))
  assert column.to_string_without_shape() == "{ {1}, {0} }"
  cube = Literal.from_array(np.arange(8, dtype=np.int32).reshape(2, 2, 2))
  assert cube.to_string_without_shape() == (
      "{ { { 0, 1 }, { 2, 3 } }, { { 4, 5 }, { 6, 7 } } }")
  assert Literal.from_array(np.zeros((0,), np.float32)).to_string() == (
      "f32[0]{0} {}")


def test_tuple_text():
  t = Literal.tuple_of([Literal.scalar(1, P.F32), Literal.scalar(2, P.S32)])
  assert t.to_string(oneline=True) == "(f32[], s32[]) ( f32[] 1, s32[] 2 )"
  assert t.to_string_without_shape() == "( 1, 2 )"
  assert t.is_tuple() and len(t.elements) == 2


@pytest.mark.parametrize("value,dtype,text", [
    (0.1, np.float32, "0.1"),            # 6 digits read back exactly
    (1.50140941, np.float32, "1.50140941"),  # needs max_digits10 = 9
    (3e10, np.float32, "3e+10"),
    (1e-20, np.float32, "1e-20"),
    (-2.0, np.float32, "-2"),
    (-0.0, np.float32, "-0"),
    (0.1, np.float64, "0.1"),
    (1 / 3, np.float64, "0.33333333333333331"),
    (0.1, ml_dtypes.bfloat16, "0.1001"),  # bf16: always 4 digits
    (2.0, np.float16, "2"),
    (math.inf, np.float32, "inf"),
    (-math.inf, np.float64, "-inf"),
    (math.nan, np.float32, "nan"),
])
def test_format_float(value, dtype, text):
  assert format_float(value, dtype) == text


def test_nan_sign_and_payload():
  neg = np.array(0xFFC00000, np.uint32).view(np.float32)
  assert format_float(neg, np.float32) == "-nan"
  payload = np.array(0x7F800001, np.uint32).view(np.float32)
  assert format_float(payload, np.float32) == "nan(0x1)"


def test_equality_is_bitwise():
  a = Literal.from_array(np.array([np.nan, 1.0], np.float32))
  b = Literal.from_array(np.array([np.nan, 1.0], np.float32))
  assert a == b
  assert Literal.scalar(0.0, P.F32) != Literal.scalar(-0.0, P.F32)
  assert Literal.scalar(1, P.S32) != Literal.scalar(1, P.S64)
  relaid = a.with_shape(su.make_shape_with_layout(P.F32, (2,), (0,)))
  assert relaid == a


def test_validation():
  shape = su.make_shape(P.F32, (2,))
  with pytest.raises(support.InvalidArgumentError, match="dtype"):
    Literal(shape, np.zeros(2, np.float64))
  with pytest.raises(support.InvalidArgumentError, match="array of shape"):
    Literal(shape, np.zeros(3, np.float32))
  with pytest.raises(support.UnimplementedError, match="dynamic"):
    Literal(su.make_shape(P.F32, (2,), (True,)))
  with pytest.raises(support.UnimplementedError):
    Literal(su.make_shape(P.S1, (2,)))


def test_elided_prints_dots():
  lit = Literal(su.make_shape_with_default_layout(P.F32, (100,)),
                elided=True)
  assert lit.to_string() == "f32[100]{0} {...}"


def test_narrow_types():
  lit = Literal.from_array(np.array([1, -2], np.int8), P.S4)
  assert lit.array.dtype == ml_dtypes.int4
  assert str(lit) == "s4[2]{0} {1, -2}"
  assert str(Literal.scalar(0.5, P.F8E4M3FN)) == "f8e4m3fn[] 0.5"
