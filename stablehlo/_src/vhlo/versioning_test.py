"""Tests for VHLO upgrades, downgrades and target legality."""

import pytest

from stablehlo._src import text as mlir_text
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import legalize
from stablehlo._src.vhlo import versioning


def _vhlo(body, args="%a: tensor<4xf32>", results="tensor<4xf32>"):
  module = mlir_text.parse_module(
      f"func.func @main({args}) -> {results} {{\n{body}\n}}")
  return legalize.module_to_vhlo(module)


def _names(root):
  return [op.name for op in root.walk()][1:]


_EXP = ("  %0 = stablehlo.exponential %a {{result_accuracy = {}}} : "
        "tensor<4xf32>\n  return %0 : tensor<4xf32>")
_DEFAULT_RA = ("#stablehlo.result_accuracy<atol = 0.0, rtol = 0.0, ulps = 0, "
               "mode = #stablehlo.result_accuracy_mode<DEFAULT>>")
_HIGHEST_RA = ("#stablehlo.result_accuracy<atol = 0.0, rtol = 0.0, ulps = 0, "
               "mode = #stablehlo.result_accuracy_mode<HIGHEST>>")


def test_downgrade_then_upgrade_round_trips():
  root = _vhlo(_EXP.format(_DEFAULT_RA))
  rewritten = versioning.to_version(root, "1.8.0")
  assert _names(root) == ["vhlo.func_v1", "vhlo.exponential_v1",
                          "vhlo.return_v1"]
  assert [op.name for op in rewritten] == ["vhlo.exponential_v1"]
  assert root.regions[0].blocks[0].ops[0].regions[0].blocks[0].ops[0] \
      .named == {}
  versioning.upgrade(root)
  exp = list(root.walk())[2]
  assert exp.name == "vhlo.exponential_v2"
  assert exp.named == {"result_accuracy": ac.default_result_accuracy()}


def test_new_features_block_downgrades():
  root = _vhlo(_EXP.format(_HIGHEST_RA))
  versioning.to_version(root, "1.9.0")  # exponential_v2 exists since 1.9.
  root = _vhlo(_EXP.format(_HIGHEST_RA))
  with pytest.raises(versioning.UnsupportedAtTargetError) as e:
    versioning.to_version(root, "1.8.0")
  message = str(e.value)
  assert "stablehlo.exponential" in message
  assert "result_accuracy" in message and "1.9.0" in message


@pytest.mark.parametrize("body,target,needle", [
    ("  %0 = stablehlo.tan %a : tensor<4xf32>\n  return %0 : tensor<4xf32>",
     "1.3.0", r"stablehlo.tan \(vhlo.tan_v2\) needs StableHLO >= 1.4.0"),
    ('  %0:2 = "stablehlo.all_gather"(%a, %a) {all_gather_dim = 0 : i64, '
     "replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>, "
     "tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)\n"
     "  return %0#0 : tensor<4xf32>", "1.4.0", "2 operands"),
    ('  %0 = stablehlo.custom_call @f(%a) {api_version = 4 : i32} : '
     "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>",
     # A typed-FFI call's implied backend_config is a dictionary (>= 1.3.0).
     "1.2.0", "backend_config with a dictionary value needs StableHLO >= "
     "1.3.0"),
    ("  %0 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xf8E4M3>\n"
     "  return %a : tensor<4xf32>", "1.6.0", "type f8E4M3 needs StableHLO >= "
     "1.7.0"),
])
def test_unsupported_at_target(body, target, needle):
  with pytest.raises(versioning.UnsupportedAtTargetError, match=needle):
    versioning.to_version(_vhlo(body), target)


def test_reduce_with_mixed_element_types_needs_0_17():
  body = ("  %c = stablehlo.constant dense<0> : tensor<i32>\n"
          '  %0 = "stablehlo.reduce"(%a, %c) ({\n'
          "  ^bb0(%x: tensor<i32>, %y: tensor<i32>):\n"
          "    stablehlo.return %x : tensor<i32>\n"
          "  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<i32>) "
          "-> tensor<i32>\n"
          "  return %a : tensor<4xf32>")
  versioning.to_version(_vhlo(body), "0.17.0")
  with pytest.raises(versioning.UnsupportedAtTargetError, match="0.17.0"):
    versioning.to_version(_vhlo(body), "0.16.0")


def test_patch_versions_use_their_minor_op_set():
  body = ('  %0 = "stablehlo.all_to_all"(%a) {split_dimension = 0 : i64, '
          "concat_dimension = 0 : i64, split_count = 1 : i64, "
          "replica_groups = dense<[[0]]> : tensor<1x1xi64>} : "
          "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>")
  root = _vhlo(body)
  versioning.to_version(root, "1.4.1")
  assert "vhlo.all_to_all_v1" in _names(root)
