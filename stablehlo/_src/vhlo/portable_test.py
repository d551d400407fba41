"""Tests for the portable artifact API (serialize / deserialize)."""

import pathlib
import random

import pytest

import support
from stablehlo._src import text as mlir_text
from stablehlo._src import vhlo
from stablehlo._src.bytecode import reader
from stablehlo._src.vhlo import normalize
from stablehlo._src.vhlo import portable
from support import env

_PROGRAM = """
module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %1 = stablehlo.add %a, %0 : tensor<2x3xf32>
    %2 = stablehlo.exponential %1 : tensor<2x3xf32>
    %c = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
    return %2 : tensor<2x3xf32>
  }
}
"""


def _module(text=_PROGRAM):
  return mlir_text.parse_module(text)


@pytest.mark.parametrize("target,bytecode_version", [
    ("1.20.0", 6), ("1.15.0", 6), ("1.0.0", 6), ("0.14.0", 4), ("0.12.0", 3),
    ("0.10.0", 1), ("0.9.0", 0)])
def test_round_trip_at_targets(target, bytecode_version):
  module = _module()
  data = vhlo.serialize_portable_artifact(module, target)
  assert data[:4] == b"ML\xefR"
  f = reader.read(data)
  assert f.version == bytecode_version
  assert f.producer == f"StableHLO_v{target}"
  assert vhlo.get_portable_artifact_version(data) == target
  back = vhlo.deserialize_portable_artifact(data)
  assert normalize.dump(back) == normalize.dump(module)
  assert back.op.attributes["sym_name"].value == "m"


def test_locations_are_kept_unless_stripped():
  module = _module()
  data = vhlo.serialize_portable_artifact(module, "1.15.0")
  back = vhlo.deserialize_portable_artifact(data)
  locs = {(op.location.kind, op.location.line) for op in back.walk()
          if op.name == "stablehlo.add"}
  assert locs == {("file", 5)}
  stripped = vhlo.serialize_portable_artifact(module, "1.15.0",
                                              strip_debuginfo=True)
  assert len(stripped) < len(data)
  back = vhlo.deserialize_portable_artifact(stripped)
  assert all(op.location.kind == "unknown" for op in back.walk())


def test_current_and_minimum_targets():
  module = _module()
  current = vhlo.serialize_portable_artifact(module, "current")
  assert vhlo.get_portable_artifact_version(current) == \
      vhlo.get_current_version()
  assert vhlo.get_portable_artifact_version(
      vhlo.serialize_portable_artifact(module, "minimum")) == "0.9.0"


@pytest.mark.parametrize("target", ["", "1.2", "2.0.0", "0.8.0"])
def test_bad_targets(target):
  with pytest.raises(support.InvalidArgumentError):
    vhlo.serialize_portable_artifact(_module(), target)


def test_unsupported_feature_names_op_attribute_and_version():
  module = _module(
      "func.func @f(%a: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = stablehlo.cbrt %a {result_accuracy = #stablehlo.result_accuracy"
      "<mode = #stablehlo.result_accuracy_mode<HIGHEST>>} : tensor<f32>\n"
      "  return %0 : tensor<f32>\n}")
  vhlo.serialize_portable_artifact(module, "1.10.0")
  with pytest.raises(vhlo.UnsupportedAtTargetError) as e:
    vhlo.serialize_portable_artifact(module, "1.9.0")
  assert isinstance(e.value, support.InvalidArgumentError)
  for part in ("stablehlo.cbrt", "result_accuracy", "1.10.0", "1.9.0"):
    assert part in str(e.value)


def test_bad_input_raises_support_errors_only():
  data = vhlo.serialize_portable_artifact(_module(), "1.15.0")
  with pytest.raises(support.InvalidArgumentError):
    vhlo.deserialize_portable_artifact(b"not bytecode")
  with pytest.raises(support.InvalidArgumentError):
    vhlo.deserialize_portable_artifact("a string")
  rng = random.Random(0)
  for _ in range(200):
    broken = bytearray(data)
    if rng.random() < 0.3:
      broken = broken[:rng.randrange(len(broken))]
    else:
      for _ in range(rng.randint(1, 3)):
        broken[rng.randrange(len(broken))] = rng.randrange(256)
    try:
      vhlo.deserialize_portable_artifact(bytes(broken))
    except support.XlaError:
      pass


def test_non_module_input():
  with pytest.raises(support.InvalidArgumentError):
    vhlo.serialize_portable_artifact("func.func @f() { return }", "1.0.0")


def _vhlo_corpus():
  root = env.stablehlo_corpus("vhlo")
  if root is None:
    pytest.skip(env.missing_corpus_reason("vhlo"))
  return root


@pytest.mark.parametrize("version", ["0_9_0", "1_9_0", "1_20_0"])
def test_corpus_artifacts(version):
  root = _vhlo_corpus()
  mlir = root / f"stablehlo_legalize_to_vhlo.{version}.mlir"
  data = pathlib.Path(str(mlir) + ".bc").read_bytes()
  expected = mlir_text.parse_module(mlir.read_text(), str(mlir))
  ours = vhlo.deserialize_portable_artifact(data)
  assert normalize.dump(ours) == normalize.dump(expected)
  # Upstream's test: serializing the .mlir for its version gives the .bc.
  target = version.replace("_", ".")
  assert portable.serialize_portable_artifact(
      expected, target, strip_debuginfo=True) == data


def test_future_artifact_with_unknown_op_is_refused():
  root = _vhlo_corpus()
  data = (root / "invalid_vhlo_future.mlir.bc").read_bytes()
  assert vhlo.get_portable_artifact_version(data) == "2.0.0"
  with pytest.raises(support.InvalidArgumentError, match="constant_v99"):
    vhlo.deserialize_portable_artifact(data)


def test_public_api_names():
  assert vhlo.get_current_version() == "1.20.0"
  assert vhlo.get_minimum_version() == "0.9.0"
  assert vhlo.get_smaller_version("1.1.0", "0.20.0") == "0.20.0"
  req = vhlo.StablehloCompatibilityRequirement
  assert vhlo.get_version_from_compatibility_requirement(req.WEEK_4) == \
      "1.18.0"
  assert vhlo.Version.parse("1.2.3") < vhlo.Version.parse("1.10.0")
