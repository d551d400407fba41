"""Portable artifacts against jaxlib's serializer (StableHLO 1.17.0).

Skips when jax / jaxlib are not installed.
"""

import pytest

from stablehlo._src import text as mlir_text
from stablehlo._src.testing import jaxlib_oracle
from stablehlo._src.vhlo import normalize
from stablehlo._src.vhlo import portable
from stablehlo._src.vhlo import testdata

if jaxlib_oracle.skip_reason():
  pytest.skip(jaxlib_oracle.skip_reason(), allow_module_level=True)

from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top,g-bad-import-order
from jaxlib.mlir import passmanager  # pylint: disable=g-import-not-at-top
from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top

_PROGRAMS = {
    "mixed": """
module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%a: tensor<2x3xf32>, %i: tensor<2xi32>) -> (tensor<2x3xf32> {jax.result_info = ""}) {
    %c = stablehlo.constant dense<[true, false]> : tensor<2xi1>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = stablehlo.exponential %a : tensor<2x3xf32>
    %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<2xf32>) -> tensor<2x3xf32>
    %3 = stablehlo.dot_general %a, %2, batching_dims = [0] x [0], contracting_dims = [1] x [1] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2xf32>
    %4 = stablehlo.compare GT, %i, %i, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %5 = stablehlo.and %4, %c : tensor<2xi1>
    stablehlo.custom_call @check.expect_close(%2, %0) {has_side_effect = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
    return %2 : tensor<2x3xf32>
  }
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
}
_PROGRAMS.update({k: v for k, (v, _) in testdata.USE_LIST_PROGRAMS.items()})
_TARGETS = ["1.17.0", "1.15.0", "1.8.0", "1.0.0", "0.14.0", "0.9.0"]


def _context():
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  return jax_mlir.make_ir_context()


def _jaxlib_artifact(text: str, target: str) -> bytes:
  ctx = _context()
  module = ir.Module.parse(text, ctx)
  with ctx:
    passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(
        module.operation)
  return stablehlo.serialize_portable_artifact(module, target)


@pytest.mark.parametrize("target", _TARGETS)
@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_byte_identical_to_jaxlib(name, target):
  text = _PROGRAMS[name]
  ours = portable.serialize_portable_artifact(
      mlir_text.parse_module(text), target, strip_debuginfo=True,
      producer_version=stablehlo.get_current_version())
  assert ours == _jaxlib_artifact(text, target)


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_jaxlib_loads_ours_and_we_load_jaxlibs(name):
  text = _PROGRAMS[name]
  module = mlir_text.parse_module(text)
  ctx = _context()
  ours = portable.serialize_portable_artifact(module, "1.15.0")
  loaded = stablehlo.deserialize_portable_artifact(ctx, ours)
  expected = ir.Module.parse(text, ctx)
  assert loaded.operation.get_asm(enable_debug_info=False) == \
      expected.operation.get_asm(enable_debug_info=False)
  theirs = portable.deserialize_portable_artifact(
      _jaxlib_artifact(text, "1.15.0"))
  assert normalize.dump(theirs) == normalize.dump(module)


def test_version_api_agrees_with_jaxlib():
  from stablehlo._src.vhlo import version  # pylint: disable=g-import-not-at-top
  assert version.get_minimum_version() == stablehlo.get_minimum_version()
  for a, b in (("1.2.3", "1.10.0"), ("0.9.0", "0.20.5")):
    assert version.get_smaller_version(a, b) == \
        stablehlo.get_smaller_version(a, b)
  req = stablehlo.StablehloCompatibilityRequirement
  assert version.get_version_from_compatibility_requirement(
      req.MAX.value) == stablehlo.get_version_from_compatibility_requirement(
          req.MAX)
