"""Tests of programs.py: formats, verification, entry signatures."""

import numpy as np
import pytest

import support
from pjrt._src import abi
from pjrt._src.plugin import programs
from pjrt._src.plugin import testing
from stablehlo._src import text as mlir_text
from stablehlo._src import vhlo

_SIGNATURE = """
module @sig {
  func.func @main(%a: tensor<2x3xbf16> {tf.aliasing_output = 1 : i32},
                  %b: tensor<i1> {jax.buffer_donor = true},
                  %c: tensor<4xui8>) -> (tensor<f64>, tensor<2x3xbf16>) {
    %0 = stablehlo.constant dense<1.0> : tensor<f64>
    return %0, %a : tensor<f64>, tensor<2x3xbf16>
  }
}
"""


def test_signature_and_aliases():
  program = programs.load(_SIGNATURE.encode(), "mlir")
  assert program.name == "sig" and program.entry == "main"
  assert [p.element_type for p in program.parameters] == [
      abi.BufferType.BF16, abi.BufferType.PRED, abi.BufferType.U8]
  assert [p.shape for p in program.parameters] == [(2, 3), (), (4,)]
  assert [r.element_type for r in program.results] == [
      abi.BufferType.F64, abi.BufferType.BF16]
  assert program.aliases == {0: 1}
  assert program.donors == frozenset({1})
  assert program.donatable() == frozenset({0, 1})
  assert not program.uses_collectives


def test_portable_artifact_is_read():
  module = mlir_text.parse_module(testing.ADD_F32)
  data = vhlo.serialize_portable_artifact(module, "1.0.0")
  program = programs.load(data, "mlir")
  assert program.parameters[0].shape == (4,)
  assert program.code == data


def test_collectives_are_noticed():
  assert programs.load(testing.ALL_REDUCE_2.encode(), "mlir").uses_collectives


@pytest.mark.parametrize("code,fmt,error", [
    (b"", "mlir", support.InvalidArgumentError),
    (b"not mlir", "mlir", support.InvalidArgumentError),
    (bytes(range(256)), "mlir", support.InvalidArgumentError),
    (b"ML\xefR\x00garbage", "mlir", support.XlaError),
    (testing.ADD_F32.encode(), "hlo", support.UnimplementedError),
    (testing.ADD_F32.encode(), "hlo_with_config", support.UnimplementedError),
    (testing.ADD_F32.encode(), "tflite", support.InvalidArgumentError),
])
def test_bad_programs(code, fmt, error):
  with pytest.raises(error):
    programs.load(code, fmt)


def test_main_is_required():
  text = testing.ADD_F32.replace("@main", "@other")
  with pytest.raises(support.InvalidArgumentError, match="@other"):
    programs.load(text.encode(), "mlir")


@pytest.mark.parametrize("result_type,error", [
    ("tensor<?xf32>", "dynamic"),
    ("!stablehlo.token", "ranked tensors"),
])
def test_unsupported_signatures(result_type, error):
  text = f"""
  func.func @main(%a: {result_type}) -> {result_type} {{
    return %a : {result_type}
  }}"""
  with pytest.raises(support.UnimplementedError, match=error):
    programs.load(text.encode(), "mlir")


def test_fresh_module_is_a_new_copy():
  program = programs.load(testing.ADD_F32.encode(), "mlir")
  assert program.fresh_module() is not program.module
  assert "stablehlo.add" in program.text()
  assert len(program.fingerprint) == 64
  assert np.dtype(program.parameters[0].dtype) == np.float32
