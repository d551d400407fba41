"""Tests for the inliner: structure after inlining, and the interpreter gives
the same results before and after."""

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.transforms import inline

_PROGRAM = """
module @m {
  func.func public @main() -> (tensor<2xi32>, tensor<i64>) {
    %0:2 = call @inputs() : () -> (tensor<2xi32>, tensor<i64>)
    %1 = call @id(%0#0) : (tensor<2xi32>) -> tensor<2xi32>
    check.expect_eq_const %1, dense<[1, 2]> : tensor<2xi32>
    return %1, %0#1 : tensor<2xi32>, tensor<i64>
  }
  func.func private @inputs() -> (tensor<2xi32>, tensor<i64>) {
    %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
    %1 = call @seven() : () -> tensor<i64>
    return %0, %1 : tensor<2xi32>, tensor<i64>
  }
  func.func private @seven() -> tensor<i64> {
    %0 = stablehlo.constant dense<7> : tensor<i64>
    return %0 : tensor<i64>
  }
  func.func private @id(%a: tensor<2xi32>) -> tensor<2xi32> {
    return %a : tensor<2xi32>
  }
  func.func public @unused_public() -> () {
    return
  }
}
"""


def _ops(module):
  return [op.name for op in module.walk()]


def test_inlines_calls_and_drops_unused_private_functions():
  m = text.parse_module(_PROGRAM, "p.mlir")
  before = interpreter.Interpreter(m).run("main")
  assert inline.run(m)
  assert "func.call" not in _ops(m)
  names = [f.attr("sym_name").value for f in m.functions]
  assert names == ["main", "unused_public"]
  after = interpreter.Interpreter(m).run("main")
  assert [x.tolist() for x in before] == [x.tolist() for x in after]
  assert after[1].tolist() == 7
  # The printed result parses back.
  text.parse_module(text.print_module(m), "printed")


def test_no_calls_means_no_change():
  m = text.parse_module("""
  func.func @main() -> tensor<i64> {
    %0 = stablehlo.constant dense<7> : tensor<i64>
    return %0 : tensor<i64>
  }""", "p.mlir")
  assert not inline.run(m)


def test_recursive_call_is_left_in_place():
  m = text.parse_module("""
  func.func @main(%x: tensor<i64>) -> tensor<i64> {
    %0 = call @f(%x) : (tensor<i64>) -> tensor<i64>
    return %0 : tensor<i64>
  }
  func.func private @f(%x: tensor<i64>) -> tensor<i64> {
    %0 = call @f(%x) : (tensor<i64>) -> tensor<i64>
    return %0 : tensor<i64>
  }""", "p.mlir")
  inline.run(m)
  calls = [op for op in m.walk() if op.name == "func.call"]
  assert calls and all(c.attr("callee").root == "f" for c in calls)


def test_call_results_used_in_nested_regions_are_rewired():
  m = text.parse_module("""
  func.func @main() -> tensor<i64> {
    %0 = call @seven() : () -> tensor<i64>
    %1 = stablehlo.constant dense<true> : tensor<i1>
    %2 = "stablehlo.if"(%1) ({
      stablehlo.return %0 : tensor<i64>
    }, {
      stablehlo.return %0 : tensor<i64>
    }) : (tensor<i1>) -> tensor<i64>
    return %2 : tensor<i64>
  }
  func.func private @seven() -> tensor<i64> {
    %0 = stablehlo.constant dense<7> : tensor<i64>
    return %0 : tensor<i64>
  }""", "p.mlir")
  inline.run(m)
  constants = [op for op in m.walk() if op.name == "stablehlo.constant"]
  if_op = next(op for op in m.walk() if op.name == "stablehlo.if")
  used = {v for r in if_op.regions for op in r.blocks[0].operations
          for v in op.operands}
  assert used == {constants[0].results[0]}
