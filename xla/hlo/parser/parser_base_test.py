"""Tests for parsing shapes and layouts (parser_base)."""

import pytest

import support
from xla.hlo.parser import hlo_parser as hp


@pytest.mark.parametrize("text", [
    "f32[4,2]{1,0}", "f32[4,2]{0,1}", "(f32[2]{0}, s32[])", "token[]",
    "f32[<=4]{0}", "f32[?,3]{1,0}", "b(f32[4]{0})", "()", "opaque[]",
    "((pred[], u8[0]{0}), c128[1]{0})", "s4[8]{0:T(2)E(4)}",
    "f32[8,128]{1,0:T(8,128)S(1)}", "bf16[2]{0:#(u32)*(u16)}",
    "s32[4]{0:D(C+~)}", "f32[4]{0:SC(0:1,2)(0:3)M(16)}",
    "f32[4]{0:L(8)}", "u8[2]{0:P(u8[2]{0})}",
])
def test_shape_round_trip(text):
  assert str(hp.parse_shape(text)) == text


def test_missing_layouts_are_filled():
  assert str(hp.parse_shape("f32[3,4]")) == "f32[3,4]{1,0}"
  assert hp.parse_shape("f32[]").layout is not None
  assert hp.parse_shape("f32[]{:T(128)}").layout.tiles == ((128,),)
  shape = hp.parse_shape("(f32[2], s32[<=3])")
  assert str(shape) == "(f32[2]{0}, s32[<=3]{0})"


@pytest.mark.parametrize("text,message", [
    ("f32[2]{0,1}", "minor to major size is 2"),
    ("f32[2,2]{0,0}", "not a permutation"),
    ("f33[2]", "expected a shape"),
    ("f32[-1]", "negative"),
    ("f32[2", "']' or ','"),
    ("f32[2]{0} extra", "extra content"),
    ("bf16[2]{0:#(f32)}", "unsigned integer type"),
])
def test_shape_errors(text, message):
  with pytest.raises(support.InvalidArgumentError, match=message) as e:
    hp.parse_shape(text)
  assert str(e.value).startswith("1:")


def test_layout_parsing():
  layout = hp.parse_layout("{1,0:T(8,128)(*,2)E(4)S(2)}")
  assert layout.minor_to_major == (1, 0)
  assert layout.tiles[1][0] < 0  # combine dimension
  assert (layout.element_size_in_bits, layout.memory_space) == (4, 2)
