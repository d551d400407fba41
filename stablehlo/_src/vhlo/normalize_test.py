"""Tests for the canonical module comparison."""

from stablehlo._src import text as mlir_text
from stablehlo._src.vhlo import normalize


def _dump(body: str):
  return normalize.dump(mlir_text.parse_module(
      "func.func @f(%a: tensor<4xf32>, %i: tensor<4x1xi32>) -> tensor<4xi1> "
      "{\n" + body + "\n  return %0 : tensor<4xi1>\n}"))


_CMP = ("  %0 = stablehlo.compare {0}, %a, %a{1} : (tensor<4xf32>, "
        "tensor<4xf32>) -> tensor<4xi1>")


def test_spellings_of_the_same_meaning_compare_equal():
  short = _dump(_CMP.format("LT", ""))
  long = _dump('  %0 = "stablehlo.compare"(%a, %a) {comparison_direction = '
               "#stablehlo.comparison_direction<LT>} : (tensor<4xf32>, "
               "tensor<4xf32>) -> tensor<4xi1>")
  assert short == long
  # Writing the default comparison type is the same as leaving it out.
  assert short == _dump(_CMP.format("LT", ", NOTYPE"))


def test_different_meanings_compare_different():
  assert _dump(_CMP.format("LT", "")) != _dump(_CMP.format("GT", ""))
  assert _dump(_CMP.format("LT", "")) != _dump(_CMP.format("LT", ", FLOAT"))


def test_struct_fields_order_and_omitted_empty_lists():
  gather = ("  %g = \"stablehlo.gather\"(%a, %i) {{dimension_numbers = "
            "#stablehlo.gather<{0}>, slice_sizes = array<i64: 1>}} : "
            "(tensor<4xf32>, tensor<4x1xi32>) -> tensor<4xf32>\n"
            + _CMP.format("LT", ""))
  a = _dump(gather.format("offset_dims = [], collapsed_slice_dims = [0], "
                          "start_index_map = [0], index_vector_dim = 1"))
  b = _dump(gather.format("index_vector_dim = 1, start_index_map = [0], "
                          "collapsed_slice_dims = [0]"))
  c = _dump(gather.format("collapsed_slice_dims = [0], start_index_map = [0]"))
  assert a == b
  assert a != c  # index_vector_dim 1 vs the implied 0.


def test_first_difference_points_at_the_op():
  x, y = _dump(_CMP.format("LT", "")), _dump(_CMP.format("GT", ""))
  assert "stablehlo.compare" in normalize.first_difference(x, y)
  assert normalize.first_difference(x, x) is None
