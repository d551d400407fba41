"""The sdy ops in the interpreter: annotations are identities."""

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.ops import verify
import support

_PROGRAM = """
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%a: tensor<4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<4x2xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<4x2xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : tensor<4x2xf32>
  %2 = sdy.reshard %1 <@mesh, [{"x"}, {}]> : tensor<4x2xf32>
  %3 = sdy.propagation_barrier %2 allowed_direction=FORWARD : tensor<4x2xf32>
  sdy.sharding_group %3 group_id=0 : tensor<4x2xf32>
  %4:2 = sdy.named_computation<"twice">(%3, %a) (%b: tensor<4x2xf32>, %c: tensor<4x2xf32>) {
    %5 = stablehlo.add %b, %c : tensor<4x2xf32>
    sdy.return %5, %c : tensor<4x2xf32>, tensor<4x2xf32>
  } : (tensor<4x2xf32>, tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  %6 = stablehlo.subtract %4#0, %4#1 : tensor<4x2xf32>
  return %6 : tensor<4x2xf32>
}
"""


def test_annotations_are_identities():
  module = text.parse_module(_PROGRAM, "t.mlir")
  verify.verify_module(module)
  x = np.arange(8, dtype=np.float32).reshape(4, 2)
  (got,) = interpreter.Interpreter(module).run("main", [x])
  np.testing.assert_array_equal(got, x * x)


def test_manual_computation_is_refused():
  module = text.parse_module("""
sdy.mesh @mesh = <["x"=2]>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%b: tensor<2xf32>) {
    sdy.return %b : tensor<2xf32>
  } : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
  with pytest.raises(support.XlaError, match="manual_computation"):
    interpreter.Interpreter(module).run("main", [np.zeros(4, np.float32)])
