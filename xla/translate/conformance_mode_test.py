"""Tests of the `hlo-evaluator` conformance mode."""

import pathlib

import numpy as np
import pytest

from support._src import env
from xla.translate import conformance_mode

_CASE = """
func.func @main() -> tensor<3xf32> {
  %a = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %e = stablehlo.constant dense<[2.0, 4.0, %s]> : tensor<3xf32>
  %0 = stablehlo.add %a, %a : tensor<3xf32>
  stablehlo.custom_call @check.expect_eq(%0, %e) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
  return %0 : tensor<3xf32>
}"""


def test_passing_case_returns_results():
  results = conformance_mode.run_case(_CASE.replace("%s", "6.0"))
  np.testing.assert_array_equal(results[0], np.array([2, 4, 6], np.float32))


def test_failing_check_raises():
  with pytest.raises(AssertionError, match="check.expect_eq"):
    conformance_mode.run_case(_CASE.replace("%s", "7.0"))


def test_corpus_sample():
  root = env.stablehlo_corpus("testdata")
  if root is None:
    pytest.skip(env.missing_corpus_reason("testdata"))
  names = ["add_float32_20_20_float32_20_20.mlir",
           "add_float32_1_20_float32_20_20.mlir",
           "dot_general_float32_4_3_complex64_3_6.mlir"]
  for name in names:
    path = pathlib.Path(root) / name
    conformance_mode.run_case(path.read_text(), str(path))
