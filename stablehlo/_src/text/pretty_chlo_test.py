"""CHLO pretty forms against jaxlib's printer: every registered chlo op,
written in generic form, must print exactly as jaxlib prints it, and
jaxlib's print must parse back to the same text."""

import pytest

from stablehlo._src import text
from stablehlo._src.ops import registry
from stablehlo._src.testing import jaxlib_oracle

_F = "tensor<4xf32>"
_UNARY = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "bessel_i1e",
          "conj", "cosh", "digamma", "erf", "erf_inv", "erfc", "lgamma",
          "sinh", "square", "tan")
_BINARY = ("next_after", "polygamma", "zeta")
_BROADCAST_FLOAT = ("add", "atan2", "divide", "maximum", "minimum",
                    "multiply", "next_after", "polygamma", "power",
                    "remainder", "subtract", "zeta")
_BROADCAST_INT = ("and", "or", "xor", "shift_left", "shift_right_arithmetic",
                  "shift_right_logical")


def _cases() -> dict[str, str]:
  cases = {}
  for u in _UNARY:
    cases[u] = f'%r = "chlo.{u}"(%a) : ({_F}) -> {_F}'
  for u in ("is_inf", "is_neg_inf", "is_pos_inf"):
    cases[u] = f'%r = "chlo.{u}"(%a) : ({_F}) -> tensor<4xi1>'
  for b in _BINARY:
    cases[b] = f'%r = "chlo.{b}"(%a, %a) : ({_F}, {_F}) -> {_F}'
  cases["mulhi"] = ('%r = "chlo.mulhi"(%i, %i) : (tensor<4xi32>, '
                    'tensor<4xi32>) -> tensor<4xi32>')
  for b in _BROADCAST_FLOAT:
    cases["broadcast_" + b] = (
        f'%r = "chlo.broadcast_{b}"(%a, %s) {{broadcast_dimensions = '
        f'array<i64>}} : ({_F}, tensor<f32>) -> {_F}')
  for b in _BROADCAST_INT:
    cases["broadcast_" + b] = (
        f'%r = "chlo.broadcast_{b}"(%i, %i) : (tensor<4xi32>, '
        'tensor<4xi32>) -> tensor<4xi32>')
  cases["broadcast_complex"] = (
      f'%r = "chlo.broadcast_complex"(%a, %a) : ({_F}, {_F}) -> '
      'tensor<4xcomplex<f32>>')
  cases["broadcast_compare"] = (
      '%r = "chlo.broadcast_compare"(%a, %s) {comparison_direction = '
      '#chlo<comparison_direction LT>, compare_type = '
      f'#chlo<comparison_type FLOAT>}} : ({_F}, tensor<f32>) -> tensor<4xi1>')
  cases["broadcast_select"] = (
      f'%r = "chlo.broadcast_select"(%p, %a, %a) : (tensor<4xi1>, {_F}, '
      f'{_F}) -> {_F}')
  cases["constant"] = (f'%r = "chlo.constant"() {{value = dense<1.0> : '
                       f'{_F}}} : () -> {_F}')
  cases["constant_like"] = (f'%r = "chlo.constant_like"(%a) {{value = 1.0 '
                            f': f32}} : ({_F}) -> {_F}')
  cases["top_k"] = (f'%r:2 = "chlo.top_k"(%a) {{k = 2 : i64}} : ({_F}) -> '
                    '(tensor<2xf32>, tensor<2xi32>)')
  cases["ragged_dot"] = (
      '%r = "chlo.ragged_dot"(%l, %w, %g) {ragged_dot_dimension_numbers = '
      '#chlo.ragged_dot<lhs_batching_dimensions = [], '
      'rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], '
      'rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], '
      'rhs_group_dimensions = [0]>, precision_config = '
      '[#chlo<precision DEFAULT>, #chlo<precision HIGHEST>]} : '
      '(tensor<11x5xf32>, tensor<3x5x7xf32>, tensor<3xi64>) -> '
      'tensor<11x7xf32>')
  cases["scan"] = (
      '%r:2 = "chlo.scan"(%a, %s) ({\n'
      '  ^bb0(%x: tensor<f32>, %c: tensor<f32>):\n'
      '    "stablehlo.return"(%x, %c) : (tensor<f32>, tensor<f32>) -> ()\n'
      '  }) {dimension = 0 : i64, operandSegmentSizes = array<i32: 1, 1>, '
      'resultSegmentSizes = array<i32: 1, 1>, is_reverse = true} : '
      f'({_F}, tensor<f32>) -> ({_F}, tensor<f32>)')
  return cases


_CASES = _cases()


def _module(body: str) -> str:
  return ("func.func @f(%a: tensor<4xf32>, %s: tensor<f32>, "
          "%i: tensor<4xi32>, %p: tensor<4xi1>, %l: tensor<11x5xf32>, "
          "%w: tensor<3x5x7xf32>, %g: tensor<3xi64>) {\n  " + body +
          "\n  return\n}")


def test_every_registered_chlo_op_is_covered():
  assert {"chlo." + k for k in _CASES} == set(registry.names("chlo"))


@pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                    reason=str(jaxlib_oracle.skip_reason()))
@pytest.mark.parametrize("op", sorted(_CASES))
def test_chlo_print_matches_jaxlib(op):
  src = _module(_CASES[op])
  expected = jaxlib_oracle.canonical_text(src)
  assert expected is not None, jaxlib_oracle.parse(src)[1]
  # jaxlib has no custom form for these two; all others print pretty.
  generic = op in ("constant_like", "ragged_dot")
  assert (f'"chlo.{op}"' in expected) == generic
  assert text.print_module(text.parse_module(src)) == expected
  assert text.print_module(text.parse_module(expected)) == expected


def test_scan_with_foreign_result_segments_stays_generic():
  # The pretty form implies resultSegmentSizes = (results - inits, inits);
  # other segments must not be lost.
  src = _module(_CASES["scan"].replace("array<i32: 1, 1>, is_reverse",
                                       "array<i32: 2, 0>, is_reverse"))
  out = text.print_module(text.parse_module(src))
  assert '"chlo.scan"' in out and "array<i32: 2, 0>" in out
  assert text.print_module(text.parse_module(out)) == out
