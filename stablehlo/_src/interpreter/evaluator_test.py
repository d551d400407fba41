"""Tests for the dispatch loop: entry selection, errors with locations,
custom calls, globals, limits."""

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import evaluator
import support


def _interp(src, **opts):
  return interpreter.Interpreter(text.parse_module(src, "e.mlir"),
                                 interpreter.Options(**opts))


def test_runs_main_or_the_only_function():
  it = _interp("""
  func.func @only() -> tensor<2xi8> {
    %0 = stablehlo.constant dense<[1, -2]> : tensor<2xi8>
    return %0 : tensor<2xi8>
  }""")
  (out,) = it.run()
  assert out.dtype == np.int8 and out.tolist() == [1, -2]


def test_ambiguous_entry_is_an_error():
  it = _interp("""
  func.func @a() { return }
  func.func @b() { return }""")
  with pytest.raises(support.InvalidArgumentError, match="@a, @b"):
    it.run()
  assert it.run("b") == []
  with pytest.raises(support.NotFoundError):
    it.run("c")


def test_arguments_are_passed_and_counted():
  it = _interp("""
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }""")
  x = np.array([1.5, 2.5], np.float32)
  assert it.run("main", [x])[0].tolist() == [1.5, 2.5]
  with pytest.raises(support.InvalidArgumentError, match="takes 1"):
    it.run("main", [])


def test_unknown_custom_call_is_unimplemented_with_location():
  it = _interp("""
  func.func @main() {
    %0 = stablehlo.constant dense<1> : tensor<i32>
    stablehlo.custom_call @no_such_target(%0) : (tensor<i32>) -> ()
    return
  }""")
  with pytest.raises(support.UnimplementedError,
                     match=r"e.mlir:4:\d+: error: stablehlo.custom_call: "
                     r"custom_call target 'no_such_target'"):
    it.run()


def test_registered_custom_call_runs():
  interpreter.register_custom_call(
      "test.twice", lambda ctx, op, args: args[0] * 2)
  it = _interp("""
  func.func @main() -> tensor<2xi32> {
    %0 = stablehlo.constant dense<[3, 4]> : tensor<2xi32>
    %1 = stablehlo.custom_call @test.twice(%0) : (tensor<2xi32>) -> tensor<2xi32>
    return %1 : tensor<2xi32>
  }""")
  assert it.run()[0].tolist() == [6, 8]


def test_check_failure_names_check_and_location():
  it = _interp("""
  func.func @main() {
    %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    check.expect_almost_eq_const %0, dense<[1.0, 2.5]> : tensor<2xf32>
    return
  }""")
  with pytest.raises(interpreter.CheckFailure,
                     match=r"e.mlir:4:5: error: check.expect_almost_eq_const "
                     r"failed: 1 of 2 elements differ .* index \[1\]"):
    it.run()


def test_globals_persist_across_calls_of_one_instance():
  it = _interp("""
  ml_program.global private mutable @state(dense<5> : tensor<i32>) : tensor<i32>
  func.func @swap(%x: tensor<i32>) -> tensor<i32> {
    %0 = ml_program.global_load @state : tensor<i32>
    ml_program.global_store @state = %x : tensor<i32>
    return %0 : tensor<i32>
  }""")
  seen = [int(it.run("swap", [np.array(v, np.int32)])[0]) for v in (7, 8, 9)]
  assert seen == [5, 7, 8]


def test_missing_kernel_is_unimplemented():
  it = _interp("""
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.no_such_op"(%x) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }""")
  with pytest.raises(support.UnimplementedError, match="no_such_op"):
    it.run("main", [np.zeros(2, np.float32)])


def test_tick_enforces_iteration_limit():
  it = _interp("func.func @main() { return }", max_while_iterations=3)
  ctx = evaluator.Context(it)
  op = it.module.functions[0]
  ctx.tick(3, op)
  with pytest.raises(interpreter.ResourceExhausted, match="more than 3"):
    ctx.tick(4, op)


def test_region_binary_op_detects_reduction_bodies():
  m = text.parse_module("""
  func.func @main(%x: tensor<4xf32>, %i: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.reduce(%x init: %i) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %1 = stablehlo.reduce(%x init: %i) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
     reducer(%a: tensor<f32>, %b: tensor<f32>) {
      %s = stablehlo.subtract %b, %a : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }
    return %0 : tensor<f32>
  }""", "r.mlir")
  ops = m.functions[0].regions[0].blocks[0].operations
  assert evaluator.region_binary_op(ops[0].regions[0]) == "stablehlo.maximum"
  # subtract with swapped operands is not commutative: no shortcut.
  assert evaluator.region_binary_op(ops[1].regions[0]) is None


def test_quantized_reduction_body_is_not_vectorized_on_storage():
  # Stored [12, 14, 16] with scale 0.5, zero point 10 are 1.0, 2.0, 3.0;
  # their sum 6.0 (plus init 0.0) is stored as 6.0 / 0.5 + 10 = 22.
  q = "!quant.uniform<i8:f32, 0.5:10>"
  src = f"""func.func @main() -> tensor<{q}> {{
    %0 = stablehlo.constant dense<[12, 14, 16]> : tensor<3xi8>
    %1 = stablehlo.bitcast_convert %0 : (tensor<3xi8>) -> tensor<3x{q}>
    %i = stablehlo.constant dense<10> : tensor<i8>
    %ii = stablehlo.bitcast_convert %i : (tensor<i8>) -> tensor<{q}>
    %2 = stablehlo.reduce(%1 init: %ii) applies stablehlo.add across dimensions = [0] : (tensor<3x{q}>, tensor<{q}>) -> tensor<{q}>
    return %2 : tensor<{q}>
  }}"""
  m = text.parse_module(src, "q.mlir")
  reduce_op = m.functions[0].regions[0].blocks[0].operations[4]
  assert evaluator.region_binary_op(reduce_op.regions[0]) is None
  assert int(interpreter.Interpreter(m).run()[0]) == 22
