"""Tests for parsing literals (literal_parser)."""

import ml_dtypes
import numpy as np
import pytest

import support
from xla.hlo.parser import hlo_parser as hp


def test_literals():
  lit = hp.parse_literal("f32[2,3] { { 1, 2.5, -inf }, { 4, nan, 6e-1 } }")
  expected = np.array([[1, 2.5, -np.inf], [4, np.nan, 0.6]], np.float32)
  np.testing.assert_array_equal(lit.array, expected)
  assert hp.parse_literal("pred[3] {true, 0, 1}").array.tolist() == [
      True, False, True]
  c = hp.parse_literal("c64[2] {(1, -2), (0.5, inf)}")
  assert c.array.tolist() == [complex(1, -2), complex(0.5, np.inf)]
  assert hp.parse_literal("u64[] 18446744073709551615").get() == 2**64 - 1
  t = hp.parse_literal("(f32[] 1, (s8[] -3, pred[] true))")
  assert t.elements[1].elements[0].get() == -3
  bf = hp.parse_literal("bf16[2] {0.1001, 3}")
  assert bf.array.dtype == ml_dtypes.bfloat16
  assert hp.parse_literal("f32[3] {...}").elided
  assert str(hp.parse_literal("s4[2]{0} {-8, 7}")) == "s4[2]{0} {-8, 7}"
  # Without a layout, the braces after the shape are the value.
  assert str(hp.parse_literal("s32[2] {1, 0}")) == "s32[2]{0} {1, 0}"
  assert str(hp.parse_literal("s32[2,1] {{1}, {0}}")) == (
      "s32[2,1]{1,0} {\n  {1},\n  {0}\n}")


def test_negative_zero_keeps_its_sign():
  lit = hp.parse_literal("f64[2] {-0, 0}")
  assert np.signbit(lit.array).tolist() == [True, False]
  assert lit.to_string_without_shape() == "{-0, 0}"


def test_nan_payload_literal_round_trips():
  lit = hp.parse_literal("f32[2] {nan(0x1), -nan}")
  bits = lit.array.view(np.uint32)
  assert bits.tolist() == [0x7F800001, 0xFFC00000]
  assert lit.to_string_without_shape() == "{nan(0x1), -nan}"


@pytest.mark.parametrize("text,message", [
    ("s8[] 128", "out of range for literal's primitive type S8"),
    ("u8[] -1", "out of range"),
    ("s32[2] {1, 2, 3}", "expected 2 elements in dimension 0, but saw more"),
    ("s32[2,2] {{1, 2}, {3}}", "expected 2 elements in dimension 1 of "
     "element \\[1\\], but saw 1"),
    ("s32[] 1.5", "expected an integer"),
    ("f16[] 70000", "out of range"),
    ("f32[] (1, 2)", "only valid for complex"),
    ("c64[] 1", "expected \\(real, imag\\)"),
    ("f32[2] {1 2}", "'}' or ','"),
])
def test_literal_errors(text, message):
  with pytest.raises(support.InvalidArgumentError, match=message):
    hp.parse_literal(text)


def test_unsupported_literal_type():
  with pytest.raises(support.UnimplementedError, match="s1"):
    hp.parse_literal("s1[2] {0, 1}")


def test_literal_value_errors_point_at_the_element():
  with pytest.raises(support.InvalidArgumentError) as e:
    hp.parse_literal("s8[3] {1,\n 2, 999}")
  assert str(e.value).startswith("2:5: error: value 999")
  assert str(e.value).splitlines()[1:] == [" 2, 999}", "    ^"]
