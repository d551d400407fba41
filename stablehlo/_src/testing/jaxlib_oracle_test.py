"""Checks the oracle wrapper itself, so differential tests can trust it."""

import pytest

from stablehlo._src.testing import jaxlib_oracle

pytestmark = pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                                reason=str(jaxlib_oracle.skip_reason()))

_ADD = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_version_is_the_pinned_jaxlib_one():
  assert jaxlib_oracle.stablehlo_version() == "1.17.0"


def test_parse_and_print_round_trip():
  text = jaxlib_oracle.canonical_text(_ADD)
  assert "stablehlo.add %arg0, %arg1 : tensor<4xf32>" in text
  assert jaxlib_oracle.canonical_text(text) == text


def test_generic_form():
  text = jaxlib_oracle.canonical_text(_ADD, generic=True)
  assert '"stablehlo.add"(%arg0, %arg1)' in text


def test_bad_input_is_reported_not_raised():
  module, error = jaxlib_oracle.parse("func.func @f( {")
  assert module is None and error
  assert jaxlib_oracle.canonical_text("stablehlo.bogus") is None
