"""Tests for shape inference: results and errors per opcode."""

import pytest

import support
from xla import xla_data as xd
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.parser import hlo_parser as hp
from xla.service import shape_inference as si
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P


def S(text):
  return hp.parse_shape(text).without_layout()


def test_elementwise():
  assert si.infer_binary_op_shape(O.kAdd, S("f32[2,3]"), S("f32[2,3]")) == (
      S("f32[2,3]"))
  assert si.infer_binary_op_shape(O.kCompare, S("s32[4]"), S("s32[4]")) == (
      S("pred[4]"))
  assert si.infer_binary_op_shape(O.kComplex, S("f64[2]"), S("f64[2]")) == (
      S("c128[2]"))
  assert si.infer_binary_op_shape(O.kAdd, S("f32[<=4]"), S("f32[4]")) == (
      S("f32[<=4]"))
  assert si.infer_unary_op_shape(O.kAbs, S("c64[3]")) == S("f32[3]")
  assert si.infer_unary_op_shape(O.kIsFinite, S("bf16[3]")) == S("pred[3]")
  with pytest.raises(support.InvalidArgumentError, match="incompatible"):
    si.infer_binary_op_shape(O.kAdd, S("f32[4]"), S("f32[]"))
  with pytest.raises(support.InvalidArgumentError, match="element types"):
    si.infer_binary_op_shape(O.kAdd, S("f32[4]"), S("s32[4]"))
  with pytest.raises(support.InvalidArgumentError, match="floating"):
    si.infer_unary_op_shape(O.kExp, S("s32[4]"))
  with pytest.raises(support.InvalidArgumentError, match="integral"):
    si.infer_binary_op_shape(O.kShiftLeft, S("f32[4]"), S("f32[4]"))
  assert si.infer_select_shape(S("pred[2]"), S("f32[2]"), S("f32[2]")) == (
      S("f32[2]"))
  with pytest.raises(support.InvalidArgumentError, match="same shape"):
    si.infer_select_shape(S("pred[]"), S("f32[2]"), S("f32[2]"))
  assert si.infer_clamp_shape(S("f32[]"), S("f32[3]"), S("f32[3]")) == (
      S("f32[3]"))


def test_shape_manipulation():
  assert si.infer_transpose_shape(S("f32[2,3,4]"), (2, 0, 1)) == (
      S("f32[4,2,3]"))
  assert si.infer_slice_shape(S("f32[10,5]"), (1, 0), (8, 5), (3, 2)) == (
      S("f32[3,3]"))  # ceil(7/3)=3, ceil(5/2)=3
  with pytest.raises(support.InvalidArgumentError, match="out of bounds"):
    si.infer_slice_shape(S("f32[4]"), (2,), (5,), (1,))
  assert si.infer_concatenate_shape([S("f32[2,3]"), S("f32[4,3]")], 0) == (
      S("f32[6,3]"))
  with pytest.raises(support.InvalidArgumentError, match="dimension 1"):
    si.infer_concatenate_shape([S("f32[2,3]"), S("f32[2,4]")], 0)
  pad = xd.PaddingConfig((xd.PaddingDimension(1, 2, 1),
                          xd.PaddingDimension(-1, 0, 0)))
  # 1 + 2 + 3 + 2*1 = 8;  4 - 1 = 3
  assert si.infer_pad_shape(S("f32[3,4]"), S("f32[]"), pad) == S("f32[8,3]")


def test_dot():
  d = xd.DotDimensionNumbers(lhs_contracting_dimensions=(2,),
                             rhs_contracting_dimensions=(1,),
                             lhs_batch_dimensions=(0,),
                             rhs_batch_dimensions=(0,))
  assert si.infer_dot_shape(S("f32[2,3,4]"), S("f32[2,4,5]"), d) == (
      S("f32[2,3,5]"))
  mixed = si.infer_dot_shape(S("s8[3,4]"), S("s8[4,2]"), xd.DotDimensionNumbers(
      (1,), (0,)), P.S32)
  assert mixed == S("s32[3,2]")
  with pytest.raises(support.InvalidArgumentError, match="contracting"):
    si.infer_dot_shape(S("f32[3,4]"), S("f32[5,2]"),
                       xd.DotDimensionNumbers((1,), (0,)))
  with pytest.raises(support.InvalidArgumentError, match="batch"):
    si.infer_dot_shape(S("f32[2,3]"), S("f32[2,3]"),
                       xd.DotDimensionNumbers((1,), (1,), (0,), ()))


def test_reduce_and_windows():
  assert si.infer_reduce_shape([S("f32[4,5,6]")], [S("f32[]")], (0, 2)) == (
      S("f32[5]"))
  two = si.infer_reduce_shape([S("f32[4]"), S("s32[4]")],
                              [S("f32[]"), S("s32[]")], (0,))
  assert two == Shape.tuple_of([S("f32[]"), S("s32[]")])
  with pytest.raises(support.InvalidArgumentError, match="duplicates"):
    si.infer_reduce_shape([S("f32[4,5]")], [S("f32[]")], (0, 0))
  w = xd.Window((xd.WindowDimension(size=3, stride=2, padding_low=1,
                                    padding_high=1),
                 xd.WindowDimension(size=2, base_dilation=2)))
  # (7 + 2 - 3) // 2 + 1 = 4;  dilated base 2*(5-1)+1 = 9 -> 9 - 2 + 1 = 8
  assert si.infer_reduce_window_shape([S("f32[7,5]")], [S("f32[]")], w) == (
      S("f32[4,8]"))


def test_convolution_and_gather():
  dn = xd.ConvolutionDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3,
                                      (1, 2))
  w = xd.Window((xd.WindowDimension(size=3, stride=2, padding_low=1,
                                    padding_high=1),) * 2)
  out = si.infer_convolution_shape(S("f32[1,8,8,6]"), S("f32[3,3,3,16]"),
                                   w, dn, feature_group_count=2)
  assert out == S("f32[1,4,4,16]")
  with pytest.raises(support.InvalidArgumentError, match="feature"):
    si.infer_convolution_shape(S("f32[1,8,8,6]"), S("f32[3,3,3,16]"), w, dn)
  g = xd.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                start_index_map=(0,), index_vector_dim=1)
  assert si.infer_gather_shape(S("f32[4,8]"), S("s32[3,1]"), g, (1, 8)) == (
      S("f32[3,8]"))
  with pytest.raises(support.InvalidArgumentError, match="slice size"):
    si.infer_gather_shape(S("f32[4,8]"), S("s32[3,1]"), g, (1, 9))
