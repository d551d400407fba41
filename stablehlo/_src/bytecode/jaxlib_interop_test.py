"""Differential tests against jaxlib's StableHLO serializer (if installed)."""

import collections
import re

import pytest

from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import text_dump
from stablehlo._src.bytecode import writer

stablehlo = pytest.importorskip("jaxlib.mlir.dialects.stablehlo")

_PROGRAMS = {
    "add": """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}""",
    "constants": """
func.func @main() -> (tensor<4xi1>, tensor<2xi32>, tensor<f64>) {
  %0 = stablehlo.constant dense<[true, false, true, true]> : tensor<4xi1>
  %1 = stablehlo.constant dense<[7, -3]> : tensor<2xi32>
  %2 = stablehlo.constant dense<2.5> : tensor<f64>
  return %0, %1, %2 : tensor<4xi1>, tensor<2xi32>, tensor<f64>
}""",
    "reduce": """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.add across dimensions = [1]
      : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""",
    "while": """
func.func @main(%n: tensor<i64>) -> tensor<i64> {
  %c0 = stablehlo.constant dense<0> : tensor<i64>
  %c1 = stablehlo.constant dense<1> : tensor<i64>
  %r:2 = stablehlo.while(%i = %c0, %acc = %c0) : tensor<i64>, tensor<i64>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %i1 = stablehlo.add %i, %c1 : tensor<i64>
      %a1 = stablehlo.add %acc, %i : tensor<i64>
      stablehlo.return %i1, %a1 : tensor<i64>, tensor<i64>
    }
  return %r#1 : tensor<i64>
}""",
    "compare_select": """
func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %p = stablehlo.compare GT, %a, %b, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %0 = stablehlo.select %p, %a, %b : tensor<3xi1>, tensor<3xf32>
  return %0 : tensor<3xf32>
}""",
}

_TARGETS = ["0.9.0", "0.14.0", "1.0.0", "1.15.0", "1.17.0"]


def _serialize(text: str, target: str) -> bytes:
  return stablehlo.serialize_portable_artifact_str(text, target)


def _stablehlo_op_names(module_text: str) -> collections.Counter:
  names = re.findall(r'"((?:stablehlo|func)\.[a-z_]+)"', module_text)
  # vhlo.return_v1 stands for both func.return and stablehlo.return.
  return collections.Counter("return" if n.endswith(".return") else n
                             for n in names)


@pytest.mark.parametrize("target", _TARGETS)
@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_reads_and_rewrites_jaxlib_artifacts(name, target):
  data = _serialize(_PROGRAMS[name], target)
  f = reader.read(data)
  assert f.producer == f"StableHLO_v{target}"
  ops = list(f.ops())
  assert all(op.name.startswith("vhlo.") for op in ops[1:])
  assert writer.write(f) == data
  text_dump.dump(f)


def _vhlo_to_stablehlo_name(name: str) -> str:
  base = re.sub(r"_v\d+$", "", name.split(".", 1)[1])
  if base == "return":
    return "return"
  if base in ("func", "call"):
    return "func." + base
  return "stablehlo." + base


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_op_names_match_jaxlib_deserializer(name):
  mlir = pytest.importorskip("jax._src.interpreters.mlir")
  ir = pytest.importorskip("jaxlib.mlir.ir")
  data = _serialize(_PROGRAMS[name], "1.15.0")
  ours = collections.Counter(_vhlo_to_stablehlo_name(op.name)
                             for op in list(reader.read(data).ops())[1:])
  with mlir.make_ir_context():
    module = stablehlo.deserialize_portable_artifact(ir.Context.current, data)
    theirs = _stablehlo_op_names(
        module.operation.get_asm(print_generic_op_form=True))
  assert ours == theirs
