"""Tests for VHLO -> StableHLO conversion."""

import pytest

import support
from stablehlo._src import text as mlir_text
from stablehlo._src.bytecode import tree
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import legalize
from stablehlo._src.vhlo import unlegalize
from stablehlo._src.vhlo import vhlo_ir


def _round_trip(text: str):
  module = mlir_text.parse_module(text)
  return unlegalize.vhlo_to_module(legalize.module_to_vhlo(module))


def _ops(module):
  return [op for op in module.walk()][2:]


def test_defaults_are_dropped_and_structs_rebuilt():
  module = _round_trip(
      "func.func @main(%a: tensor<2x3xf32>) -> tensor<2x2xf32> {\n"
      "  %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [1] : "
      "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>\n"
      "  %1 = stablehlo.exponential %0 : tensor<2x2xf32>\n"
      "  return %1 : tensor<2x2xf32>\n}")
  func = list(module.walk())[1]
  assert func.name == "func.func"
  assert set(func.attributes) == {"sym_name", "function_type"}
  dot, exp, ret = _ops(module)
  assert set(dot.attributes) == {"dot_dimension_numbers"}
  dims = dot.attributes["dot_dimension_numbers"]
  assert dims.name == "stablehlo.dot"
  assert dict(dims.params) == {"lhs_contracting_dimensions": (1,),
                               "rhs_contracting_dimensions": (1,)}
  assert exp.attributes == {}
  assert ret.name == "func.return"


def test_channel_handles_flags_and_dense_arrays():
  module = _round_trip(
      "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
      '  %0 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64,'
      " replica_groups = dense<[[0]]> : tensor<1x1xi64>,"
      " channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>,"
      " use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>\n"
      "  %1 = stablehlo.transpose %0, dims = [0] : (tensor<4xf32>) -> "
      "tensor<4xf32>\n"
      "  return %1 : tensor<4xf32>\n}")
  gather, transpose, _ = _ops(module)
  handle = gather.attributes["channel_handle"]
  # VHLO keeps only the channel id of collectives; the type reads back 0.
  assert dict(handle.params) == {"handle": 3, "type": 0}
  assert gather.attributes["use_global_device_ids"] == a.UnitAttr()
  assert transpose.attributes["permutation"] == a.DenseArrayAttr(t.i64, (0,))


def test_return_inside_regions_is_stablehlo_return():
  module = _round_trip(
      "func.func @main(%a: tensor<4xf32>, %i: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = stablehlo.reduce(%a init: %i) applies stablehlo.add across "
      "dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>\n"
      "  return %0 : tensor<f32>\n}")
  names = [op.name for op in module.walk()]
  assert names == ["builtin.module", "func.func", "stablehlo.reduce",
                   "stablehlo.add", "stablehlo.return", "func.return"]
  reduce = list(module.walk())[2]
  assert reduce.attributes["dimensions"] == a.DenseArrayAttr(t.i64, (0,))


def test_unknown_ops_and_bad_attributes_are_errors():
  root = vhlo_ir.VhloOp(name="builtin.module",
                        location=tree.Attr("builtin", "UnknownLoc", ()))
  block = tree.Block()
  root.regions = [tree.Region([block])]
  block.ops.append(vhlo_ir.VhloOp(name="vhlo.constant_v99",
                                  location=root.location))
  with pytest.raises(support.InvalidArgumentError, match="constant_v99"):
    unlegalize.vhlo_to_module(root)
  block.ops[0] = vhlo_ir.VhloOp(
      name="vhlo.call_v1", location=root.location,
      named={"callee": ac.integer(1)})
  with pytest.raises(support.InvalidArgumentError, match="symbol"):
    unlegalize.vhlo_to_module(root)
