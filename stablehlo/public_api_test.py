"""The public modules of stablehlo: what other components import."""

import subprocess
import sys

import numpy as np

import stablehlo
from stablehlo import interpreter
from stablehlo import ops
from stablehlo import sdy
from stablehlo import text
from stablehlo import transforms
from stablehlo import verify
from stablehlo import vhlo
import support

_ADD = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  %1 = stablehlo.multiply %0, %b : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
"""


def _loaded_after(statement):
  """The stablehlo modules loaded by a fresh interpreter running `statement`."""
  code = (f"import sys; {statement}; "
          "print(' '.join(m for m in sys.modules if m.startswith('stablehlo')))")
  out = subprocess.run([sys.executable, "-c", code], check=True,
                       capture_output=True, text=True).stdout.split()
  return set(out)


def test_light_modules_do_not_load_the_interpreter_or_vhlo():
  loaded = _loaded_after("import stablehlo, stablehlo.text, stablehlo.ops, "
                         "stablehlo.verify, stablehlo.bytecode")
  assert "stablehlo.text" in loaded and "stablehlo.bytecode" in loaded
  assert "stablehlo._src.interpreter" not in loaded
  assert "stablehlo._src.vhlo" not in loaded
  bare = _loaded_after("import stablehlo")
  assert "stablehlo._src.text" not in bare
  assert "stablehlo._src.ops.verify" not in bare


def test_parse_verify_print_round_trip():
  module = text.parse_module(_ADD, "add.mlir")
  verify.verify_module(module)
  assert isinstance(module, stablehlo.ir.Module)
  printed = text.print_module(module)
  assert "stablehlo.add" in printed
  assert text.print_module(text.parse_module(printed)) == printed


def test_parse_error_is_public_and_names_the_input():
  try:
    text.parse_module("func.func @main( {", "bad.mlir")
  except text.ParseError as e:
    assert "bad.mlir" in str(e)
  else:
    raise AssertionError("a malformed module parsed")


def test_portable_artifact_round_trip_matches_numpy():
  module = text.parse_module(_ADD)
  data = vhlo.serialize_portable_artifact(module,
                                          vhlo.get_current_version())
  assert vhlo.get_portable_artifact_version(data) == vhlo.get_current_version()
  back = vhlo.deserialize_portable_artifact(data)
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  b = np.full((2, 3), 1.5, np.float32)
  (got,) = interpreter.Interpreter(back).run("main", [a, b])
  np.testing.assert_array_equal(got, (a + b) * b)


def test_registry_and_element_types():
  assert ops.registry.lookup("stablehlo.add") is not None
  assert ops.registry.lookup("stablehlo.no_such_op") is None
  assert text.numpy_dtype(stablehlo.types.f32) == np.float32


def test_chlo_legalize_is_public():
  module = text.parse_module("""
  func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = chlo.tan %a : tensor<3xf32> -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }""")
  transforms.chlo_legalize.run(module)
  assert not any(op.name.startswith("chlo.") for op in module.walk())
  x = np.array([0.0, 0.5, -1.0], np.float32)
  (got,) = interpreter.Interpreter(module).run("main", [x])
  np.testing.assert_allclose(got, np.tan(x), rtol=1e-6)


def test_support_env_finds_the_checkout():
  assert (support.env.source_root() / "support" / "__init__.py").is_file()


def test_sdy_is_public_and_light():
  loaded = _loaded_after("import stablehlo.sdy")
  assert "stablehlo._src.vhlo" not in loaded
  assert "stablehlo._src.interpreter" not in loaded
  module = text.parse_module("""
  sdy.mesh @mesh = <["x"=2]>
  func.func @main(%a: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }""")
  verify.verify_module(module)
  arg = module.functions[0].attr("arg_attrs").elements[0].get(sdy.SHARDING)
  assert arg == sdy.TensorSharding.of("mesh", [["x"]])
  mesh = sdy.lookup_mesh(module, arg.mesh_or_ref)
  ty = stablehlo.types.RankedTensorType((4,), stablehlo.types.f32)
  assert sdy.local_type(ty, arg, ["x"], mesh).shape == (2,)
  assert sdy.sharding_problem(sdy.TensorSharding.of("mesh", [["y"]]), ty,
                              module.op) == ("axis_known",
                                             'unknown axis name: "y"')
