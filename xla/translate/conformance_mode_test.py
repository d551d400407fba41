"""Tests of the `hlo-evaluator` conformance mode."""

import pathlib

import numpy as np
import pytest

from support import env
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


def _check_op_case(check: str) -> str:
  return f"""
func.func @main() -> tensor<2xf32> {{
  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  {check}
  return %a : tensor<2xf32>
}}"""


@pytest.mark.parametrize("check,passes", [
    ("check.expect_eq_const %a, dense<[1.0, 2.0]> : tensor<2xf32>", True),
    ("check.expect_eq_const %a, dense<[1.0, 2.5]> : tensor<2xf32>", False),
    # The check dialect's default tolerance is 1e-4 (the @check custom
    # call's is 1e-3).
    ("check.expect_almost_eq_const %a, dense<[1.0, 2.00001]> : "
     "tensor<2xf32>", True),
    ("check.expect_almost_eq_const %a, dense<[1.0, 2.0005]> : tensor<2xf32>",
     False),
    ("check.expect_almost_eq_const %a, dense<[1.0, 2.0005]> : tensor<2xf32> "
     "{tolerance = 1.0e-2 : f64}", True),
])
def test_check_dialect_ops_are_imported(check, passes):
  src = _check_op_case(check)
  if passes:
    np.testing.assert_array_equal(conformance_mode.run_case(src)[0], [1, 2])
  else:
    with pytest.raises(AssertionError, match="check.expect"):
      conformance_mode.run_case(src)


def test_expect_close_takes_its_ulp_bounds():
  one_ulp = np.nextafter(np.float32(2), np.float32(3))
  src = """
func.func @main() -> tensor<1xf32> {
  %a = stablehlo.constant dense<2.0> : tensor<1xf32>
  %b = stablehlo.constant dense<%s> : tensor<1xf32>
  check.expect_close %a, %b%attrs : tensor<1xf32>, tensor<1xf32>
  return %a : tensor<1xf32>
}""".replace("%s", f"{float(one_ulp)!r}")
  with pytest.raises(AssertionError, match="ULP"):  # default max: 0 ULP
    conformance_mode.run_case(src.replace("%attrs", ""))
  conformance_mode.run_case(src.replace(
      "%attrs", ", max_ulp_difference = 1"))


def test_quantized_program_with_the_default_pipeline():
  # 4 / 0.1 - 30 = 10 and 15 / 0.5 - 20 = 10 (per-axis), back to floats.
  src = """
func.func @main() -> (tensor<2xi8>, tensor<2xf32>) {
  %x = stablehlo.constant dense<[4.0, 15.0]> : tensor<2xf32>
  %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>
  %s = stablehlo.bitcast_convert %q : (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> tensor<2xi8>
  %d = stablehlo.uniform_dequantize %q : (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> tensor<2xf32>
  return %s, %d : tensor<2xi8>, tensor<2xf32>
}"""
  from xla.tools import hlo_opt  # pylint: disable=g-import-not-at-top
  s, d = conformance_mode.run_case(
      src, pipeline=hlo_opt.build_named_pipeline("default"))
  assert s.dtype == np.int8 and s.tolist() == [10, 10]
  np.testing.assert_allclose(d, [4.0, 15.0], rtol=1e-6)


def test_backend_is_pluggable():
  seen = []

  def backend(hlo, args, custom_calls):
    seen.append((hlo.entry_computation.root_instruction.opcode.value,
                 sorted(custom_calls)))
    return [np.array([2, 4, 6], np.float32)]

  out = conformance_mode.run_case(_CASE.replace("%s", "6.0"),
                                  backend=backend)
  assert seen and seen[0][0] == "add" and "check.expect_eq" in seen[0][1]
  np.testing.assert_array_equal(out[0], [2, 4, 6])


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
