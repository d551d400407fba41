"""Tests for the interpreter differential harness (needs jax)."""

import numpy as np
import pytest

from stablehlo._src.testing import interpreter_oracle as oracle
from stablehlo._src.testing import jaxlib_oracle

pytestmark = pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                                reason=str(jaxlib_oracle.skip_reason()))

_PROGRAM = """
func.func @main() -> tensor<2xi32> {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.constant dense<[1.5, 2.5]> : tensor<2xbf16>
  check.expect_eq_const %0, dense<[1, 2]> : tensor<2xi32>
  stablehlo.custom_call @check.expect_close(%1, %1) {has_side_effect = true} : (tensor<2xbf16>, tensor<2xbf16>) -> ()
  %2 = stablehlo.custom_call @check.eq(%0, %0) : (tensor<2xi32>, tensor<2xi32>) -> tensor<i1>
  return %0 : tensor<2xi32>
}
"""


def test_strip_checks_returns_checked_values_and_jaxlib_runs_it():
  stripped = oracle.strip_checks(_PROGRAM)
  assert "check" not in stripped
  results, seconds = oracle.jaxlib_eval(stripped)
  assert seconds >= 0
  assert [r.tolist() for r in results] == [[1, 2], [1, 2], [1.5, 2.5],
                                           [1, 2]]
  assert str(results[2].dtype) == "bfloat16"


def test_oracle_failure_is_a_clean_error():
  import support
  with pytest.raises(support.InternalError, match="oracle"):
    oracle.jaxlib_eval("func.func @main() { this is not mlir }")


def test_compare_verdicts():
  a = [np.array([1.0, np.nan], np.float32)]
  assert oracle.compare(a, [np.array([1.0, np.nan], np.float32)]).verdict \
      == "identical"
  near = np.nextafter(np.float32(1), np.float32(2))
  assert oracle.compare(a, [np.array([near, np.nan], np.float32)]).verdict \
      == "close"
  c = oracle.compare(a, [np.array([2.0, np.nan], np.float32)])
  assert c.verdict == "differ" and "at [0]" in c.detail
  assert oracle.compare([np.array([1])], [np.array([2])]).verdict == "differ"
