"""Tests for StableHLO -> VHLO legalization."""

import pytest

import support
from stablehlo._src import text as mlir_text
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import legalize


def _ops(body: str, args="%a: tensor<4xf32>", results="tensor<4xf32>"):
  module = mlir_text.parse_module(
      f"func.func @main({args}) -> {results} {{\n{body}\n}}")
  root = legalize.module_to_vhlo(module)
  return list(root.walk())[1:]  # Skip builtin.module.


def test_names_and_defaults():
  func, exp, ret = _ops("  %0 = stablehlo.exponential %a : tensor<4xf32>\n"
                        "  return %0 : tensor<4xf32>")
  assert (func.name, exp.name, ret.name) == ("vhlo.func_v1",
                                             "vhlo.exponential_v2",
                                             "vhlo.return_v1")
  assert func.named["sym_visibility"] == ac.string("")
  assert func.named["arg_attrs"] == ac.array(())
  assert exp.named == {"result_accuracy": ac.default_result_accuracy()}


def test_compare_and_dot_general():
  ops = _ops(
      "  %0 = stablehlo.compare LT, %a, %a : (tensor<4xf32>, tensor<4xf32>)"
      " -> tensor<4xi1>\n"
      "  %1 = stablehlo.dot_general %a, %a, contracting_dims = [0] x [0] : "
      "(tensor<4xf32>, tensor<4xf32>) -> tensor<f32>\n"
      "  return %1 : tensor<f32>", results="tensor<f32>")
  compare, dot = ops[1], ops[2]
  assert compare.named == {
      "comparison_direction": ac.enum("ComparisonDirectionV1Attr", "LT"),
      "compare_type": ac.enum("ComparisonTypeV1Attr", "NOTYPE")}
  assert dot.named["lhs_contracting_dimensions"] == ac.i64_tensor([0])
  assert dot.named["lhs_batching_dimensions"] == ac.i64_tensor([])
  assert dot.named["precision_config"] == ac.array(
      [ac.enum("PrecisionV1Attr", "DEFAULT")] * 2)
  assert dot.named["accumulation_type"] == ac.none_type_attr()
  assert "dot_dimension_numbers" not in dot.named


def test_collectives_and_custom_call():
  ops = _ops(
      '  %0 = "stablehlo.all_reduce"(%a) ({\n'
      "  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
      "    %s = stablehlo.add %x, %y : tensor<f32>\n"
      "    stablehlo.return %s : tensor<f32>\n"
      "  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>,"
      " channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>,"
      " use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>\n"
      '  %1 = stablehlo.custom_call @foo(%0) {api_version = 4 : i32} : '
      "(tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %1 : tensor<4xf32>")
  all_reduce = ops[1]
  custom = next(o for o in ops if o.name == "vhlo.custom_call_v2")
  assert all_reduce.name == "vhlo.all_reduce_v2"
  assert all_reduce.named["channel_id"] == ac.integer(5)
  assert all_reduce.named["use_global_device_ids"] == ac.boolean(True)
  assert "channel_handle" not in all_reduce.named
  assert [o.name for o in ops[2:5]] == ["vhlo.add_v1", "vhlo.return_v1",
                                        "vhlo.custom_call_v2"]
  assert custom.named["api_version"] == ac.enum(
      "CustomCallApiVersionV1Attr", "API_VERSION_TYPED_FFI")
  # The default backend_config of a typed-FFI call is an empty dictionary.
  assert custom.named["backend_config"] == ac.va("DictionaryV1Attr", ())
  assert custom.named["call_target_name"] == ac.string("foo")


def test_window_defaults_follow_rank():
  ops = _ops(
      "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
      '  %0 = "stablehlo.reduce_window"(%a, %c) ({\n'
      "  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
      "    %s = stablehlo.add %x, %y : tensor<f32>\n"
      "    stablehlo.return %s : tensor<f32>\n"
      "  }) {window_dimensions = array<i64: 2>} : (tensor<4xf32>, tensor<f32>)"
      " -> tensor<3xf32>\n"
      "  return %0 : tensor<3xf32>", results="tensor<3xf32>")
  rw = ops[2]
  assert rw.named["window_strides"] == ac.i64_tensor([1])
  assert rw.named["padding"] == ac.i64_tensor([[0, 0]], shape=(1, 2))


def test_discardable_attributes_are_kept():
  ops = _ops('  %0 = stablehlo.abs %a {mhlo.sharding = "{replicated}"} : '
             "tensor<4xf32>\n  return %0 : tensor<4xf32>")
  assert ops[1].named == {"mhlo.sharding": ac.string("{replicated}")}


def test_chlo_and_other_dialects_are_refused():
  with pytest.raises(legalize.LegalizationError, match="CHLO"):
    _ops("  %0 = chlo.erf %a : tensor<4xf32> -> tensor<4xf32>\n"
         "  return %0 : tensor<4xf32>")
  with pytest.raises(support.InvalidArgumentError, match="arith"):
    _ops("  %0 = arith.addf %a, %a : tensor<4xf32>\n"
         "  return %0 : tensor<4xf32>")


def test_bad_attributes_are_refused():
  with pytest.raises(support.InvalidArgumentError, match="custom_call"):
    _ops('  %0 = "stablehlo.custom_call"(%a) {call_target_name = "f" : '
         "tensor<3xf32>} : (tensor<4xf32>) -> tensor<4xf32>\n"
         "  return %0 : tensor<4xf32>")
  with pytest.raises(support.InvalidArgumentError,
                     match="comparison_direction"):
    _ops('  %0 = "stablehlo.compare"(%a, %a) : (tensor<4xf32>, '
         "tensor<4xf32>) -> tensor<4xi1>\n"
         "  return %a : tensor<4xf32>")
  with pytest.raises(support.InvalidArgumentError):
    legalize.module_to_vhlo("not a module")
