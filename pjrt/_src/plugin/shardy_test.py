"""Tests of shardy.py: artifacts with Shardy annotations, as jaxlib writes
them (mixed serialization), lose the annotations and nothing else."""

import numpy as np
import pytest

import support
from pjrt._src.plugin import programs
from pjrt._src.plugin import shardy
from stablehlo import text as mlir_text

jax = pytest.importorskip("jax")
_jax = pytest.importorskip("jaxlib._jax")

_SHARDED = """
module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  sdy.mesh @mesh = <["x"=1]>
  func.func public @main(%arg0: tensor<2x3xf32>
      {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
      -> (tensor<2x3xf32> {jax.result_info = "result",
                           sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<2x3xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<2x3xf32>
    %2 = stablehlo.add %1, %arg0 : tensor<2x3xf32>
    return %2 : tensor<2x3xf32>
  }
}
"""


def _artifact(text: str) -> bytes:
  return _jax.mlir.serialize_portable_artifact(text, "1.10.0", True)


def test_annotations_are_removed():
  module = shardy.deserialize(_artifact(_SHARDED))
  text = mlir_text.print_module(module)
  assert "sdy" not in text
  assert "jax.result_info" in text
  ops = [op.name for op in module.functions[0].regions[0].blocks[0].operations]
  assert ops == ["stablehlo.multiply", "stablehlo.add", "func.return"]
  # The add reads the multiply directly now.
  block = module.functions[0].regions[0].blocks[0]
  add = block.operations[1]
  assert add.operands[0] is block.operations[0].results[0]


def test_program_runs_like_jax():
  program = programs.load(_artifact(_SHARDED), "mlir")
  from pjrt._src.plugin import backends  # pylint: disable=g-import-not-at-top
  compiled = backends.compile_program(program, "interpreter", fallback=False)
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  np.testing.assert_array_equal(compiled.run([x])[0], x * x + x)


def test_artifacts_without_shardy_take_the_plain_path():
  text = _SHARDED.split("func.func")[0].replace("sdy.mesh @mesh = <[\"x\"=1]>",
                                               "") + """
  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    return %a : tensor<2xf32>
  }
}"""
  module = shardy.deserialize(_artifact(text))
  assert module.functions[0].attr("sym_name").value == "main"


def test_computation_changing_ops_are_unimplemented():
  text = """
module @m attributes {mhlo.num_partitions = 1 : i32} {
  sdy.mesh @mesh = <["x"=1]>
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}]>]
        out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"}
        (%b: tensor<4xf32>) {
      sdy.return %b : tensor<4xf32>
    } : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""
  with pytest.raises(support.UnimplementedError, match="manual_computation"):
    shardy.deserialize(_artifact(text))


def test_not_bytecode():
  with pytest.raises(support.InvalidArgumentError):
    shardy.deserialize(b"module {}")


# No Shardy op and no mesh: only an attribute, as on JAX's LAPACK custom calls
# in an unsharded program.
_RULE_ONLY = """
module @jit_f {
  func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.custom_call @my_target(%arg0) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l]) {i=4, j=4, k=4, l=4}, custom>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
"""


def test_a_shardy_attribute_alone_is_removed():
  module = shardy.deserialize(_artifact(_RULE_ONLY))
  text = mlir_text.print_module(module)
  assert "sdy" not in text
  assert "stablehlo.custom_call @my_target" in text


def test_a_jax_export_on_a_one_device_mesh_runs():
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from jax.sharding import NamedSharding  # pylint: disable=g-import-not-at-top
  from jax.sharding import PartitionSpec as P  # pylint: disable=g-import-not-at-top
  mesh = jax.make_mesh((1,), ("x",),
                       axis_types=(jax.sharding.AxisType.Auto,))

  def f(a):
    b = jax.lax.with_sharding_constraint(a * 2, NamedSharding(mesh, P("x")))
    return jnp.sin(b) + a

  fn = jax.jit(f, in_shardings=NamedSharding(mesh, P("x", None)))
  data = jax.export.export(fn)(jnp.ones((4, 3), jnp.float32))
  data = data.mlir_module_serialized
  assert b"sharding_constraint" in data and b"sdy" in data
  module = shardy.deserialize(data)
  assert "sdy" not in mlir_text.print_module(module)
  program = programs.load(data, "mlir")
  from pjrt._src.plugin import backends  # pylint: disable=g-import-not-at-top
  compiled = backends.compile_program(program, "interpreter", fallback=False)
  x = np.arange(12, dtype=np.float32).reshape(4, 3)
  np.testing.assert_allclose(compiled.run([x])[0], np.sin(x * 2) + x,
                             rtol=1e-6)
