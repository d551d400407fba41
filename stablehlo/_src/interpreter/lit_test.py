"""Tests for the RUN-line driver and its FileCheck subset."""

import pytest

from stablehlo._src.interpreter import lit


def test_invocations_parse_flags_and_filecheck():
  src = """// RUN: stablehlo-translate --interpret -split-input-file %s
// RUN: not stablehlo-translate %s --interpret --args="[4.0 : f32]" 2>&1 | FileCheck %s --check-prefixes=ERR
// RUN-DISABLED: stablehlo-translate --interpret %s
// RUN: stablehlo-translate --serialize %s
"""
  invs = lit.invocations(src)
  assert len(invs) == 2
  assert invs[0].split and not invs[0].expect_failure
  assert invs[1].expect_failure and invs[1].merge_stderr
  assert invs[1].args == "[4.0 : f32]"
  assert invs[1].check_prefixes == ("ERR",)
  assert not lit.is_enabled("// RUN-DISABLED: stablehlo-translate "
                            "--interpret %s\n")


def test_filecheck_order_next_and_whitespace():
  out = "a\ntensor<2xi8> {\n  [1,   2]\n}\n"
  lit.filecheck(out, "// CHECK: tensor<2xi8> {\n// CHECK-NEXT: [1, 2]\n",
                ("CHECK",))
  with pytest.raises(lit.LitFailure, match="CHECK-NEXT"):
    lit.filecheck(out, "// CHECK: a\n// CHECK-NEXT: [1, 2]\n", ("CHECK",))
  with pytest.raises(lit.LitFailure, match="not found"):
    lit.filecheck(out, "// CHECK: }\n// CHECK: a\n", ("CHECK",))
  # Other prefixes are ignored.
  lit.filecheck(out, "// OTHER: nowhere\n", ("CHECK",))


def test_run_file_cases_reports_each_case():
  src = """// RUN: stablehlo-translate --interpret -split-input-file %s
func.func @ok() {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  check.expect_eq_const %0, dense<1> : tensor<i32>
  return
}
// -----
func.func @bad() {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  check.expect_eq_const %0, dense<2> : tensor<i32>
  return
}
"""
  results = list(lit.run_file_cases(src, "f.mlir"))
  assert [r[1] is None for r in results] == [True, False]
  assert "expect_eq_const failed" in str(results[1][1])
