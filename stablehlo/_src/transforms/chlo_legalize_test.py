"""Tests for CHLO legalization: the rewritten ops, and the Unimplemented
error for ops without a rule."""

import numpy as np
import pytest

from stablehlo._src import text
from stablehlo._src.ops import verify
from stablehlo._src.transforms import chlo_legalize
import support


def _legalize(src):
  m = text.parse_module(src, "c.mlir")
  assert chlo_legalize.run(m)
  verify.verify_module(m)
  return m, [op.name for op in m.functions[0].regions[0].blocks[0].operations]


def test_broadcast_add_broadcasts_the_scalar_operand():
  m, names = _legalize("""
  func.func @f(%a: tensor<2x3xf32>, %b: tensor<f32>) -> tensor<2x3xf32> {
    %0 = "chlo.broadcast_add"(%a, %b) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }""")
  assert names == ["stablehlo.broadcast_in_dim", "stablehlo.add",
                   "func.return"]


def test_broadcast_dimensions_are_respected():
  m, _ = _legalize("""
  func.func @f(%a: tensor<2x3xf32>, %b: tensor<2xf32>) -> tensor<2x3xf32> {
    %0 = "chlo.broadcast_multiply"(%a, %b) {broadcast_dimensions = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }""")
  bcast = next(op for op in m.walk()
               if op.name == "stablehlo.broadcast_in_dim")
  assert bcast.attr("broadcast_dimensions").values == (0,)


def test_compare_keeps_direction():
  m, names = _legalize("""
  func.func @f(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xi1> {
    %0 = "chlo.broadcast_compare"(%a, %b) {comparison_direction = #chlo<comparison_direction LT>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    return %0 : tensor<2xi1>
  }""")
  cmp = next(op for op in m.walk() if op.name == "stablehlo.compare")
  assert cmp.attr("comparison_direction").get("value") == "LT"
  assert names == ["stablehlo.compare", "func.return"]


def test_is_inf_and_mulhi():
  m, names = _legalize("""
  func.func @f(%a: tensor<2xf32>, %i: tensor<3xi16>) -> (tensor<2xi1>, tensor<3xi16>) {
    %0 = chlo.is_inf %a : tensor<2xf32> -> tensor<2xi1>
    %1 = "chlo.mulhi"(%i, %i) : (tensor<3xi16>, tensor<3xi16>) -> tensor<3xi16>
    return %0, %1 : tensor<2xi1>, tensor<3xi16>
  }""")
  assert "stablehlo.abs" in names and "chlo.is_inf" not in names
  consts = [op for op in m.walk() if op.name == "stablehlo.constant"]
  values = sorted(float(np.asarray(c.attr("value").array).ravel()[0])
                  for c in consts)
  assert values == [16.0, float("inf")]


def test_op_without_rule_is_unimplemented_with_location():
  m = text.parse_module("""
  func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "chlo.zeta"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }""", "c.mlir")
  with pytest.raises(support.UnimplementedError, match=r"c.mlir:3:\d+: "
                     r"chlo.zeta has no legalization"):
    chlo_legalize.run(m)
