"""Portable artifacts with Shardy (sdy) ops and attributes ("mixed"
serialization, as jax.export writes them).

Without jaxlib the tests round-trip handwritten programs; with it, they
compare with jaxlib's serializer byte for byte and with its deserializer's
result, over programs JAX lowers and exports for sharded jit and shard_map.
"""

import pytest

import support
from stablehlo._src import text
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import text_dump
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import writer
from stablehlo._src.ir import sdy
from stablehlo._src.ops import verify
from stablehlo._src.testing import jaxlib_oracle
from stablehlo._src.vhlo import portable
from stablehlo._src.vhlo import sdy_conversion

_PROGRAM = """
module @jit_f attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}]}}
  sdy.mesh @other = <["a"=4], device_ids=[0, 2, 1, 3]>
  func.func public @main(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}p1, {"y"}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["q"=2]>, [{}], unreduced={"q"}>}) -> (tensor<4x4xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@other, [{"a":(1)2}, {}], replicated={"a":(2)2}>}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x4xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : tensor<4x4xf32>
    %2 = sdy.propagation_barrier %1 allowed_direction=BACKWARD : tensor<4x4xf32>
    sdy.sharding_group %2 group_id=7 : tensor<4x4xf32>
    %3 = sdy.manual_computation(%2, %arg0) in_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg2: tensor<2x4xf32>, %arg3: tensor<4x4xf32>) {
      %5 = stablehlo.add %arg2, %arg2 : tensor<2x4xf32>
      %6 = sdy.reshard %5 <@mesh, [{}, {"y"}]> : tensor<2x4xf32>
      sdy.return %6 : tensor<2x4xf32>
    } : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %4 = sdy.named_computation<"g">(%3) (%arg2: tensor<4x4xf32>) {
      sdy.return %arg2 : tensor<4x4xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %7 = stablehlo.custom_call @f(%4) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>, sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=4}, custom>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %7 : tensor<4x4xf32>
  }
}
"""

# Where values cross between VHLO and sdy ops, and so where the casts go.
_CROSSINGS = {
    "multi_args": """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
    %0 = sdy.sharding_constraint %c <@mesh, [{"x"}]> : tensor<4xf32>
    %1 = sdy.sharding_constraint %a <@mesh, [{"y"}]> : tensor<4xf32>
    %2 = stablehlo.add %0, %1 : tensor<4xf32>
    %3 = stablehlo.multiply %0, %2 : tensor<4xf32>
    %4 = stablehlo.add %b, %3 : tensor<4xf32>
    %5 = sdy.sharding_constraint %b <@mesh, [{}]> : tensor<4xf32>
    %6 = stablehlo.add %5, %4 : tensor<4xf32>
    return %6 : tensor<4xf32>
  }
}""",
    "multi_results": """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0:2 = stablehlo.optimization_barrier %a, %b : tensor<4xf32>, tensor<4xf32>
    %1 = stablehlo.add %0#0, %0#1 : tensor<4xf32>
    %2 = sdy.sharding_constraint %0#1 <@mesh, [{"x"}]> : tensor<4xf32>
    %3 = sdy.sharding_constraint %0#0 <@mesh, [{"y"}]> : tensor<4xf32>
    %4 = sdy.reshard %0#1 <@mesh, [{}]> : tensor<4xf32>
    %5 = stablehlo.add %2, %3 : tensor<4xf32>
    %6 = stablehlo.add %4, %5 : tensor<4xf32>
    %7 = stablehlo.add %4, %1 : tensor<4xf32>
    return %6, %7 : tensor<4xf32>, tensor<4xf32>
  }
}""",
    "nested": """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0:2 = stablehlo.while(%i = %n, %v = %a) : tensor<i32>, tensor<4xf32>
    cond {
      %p = stablehlo.compare LT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %w = sdy.sharding_constraint %v <@mesh, [{"x"}]> : tensor<4xf32>
      %s = stablehlo.add %w, %w : tensor<4xf32>
      %j = stablehlo.add %i, %c : tensor<i32>
      stablehlo.return %j, %s : tensor<i32>, tensor<4xf32>
    }
    %1 = sdy.manual_computation(%0#1, %a) in_shardings=[<@mesh, [{"x"}]>, <@mesh, [{"y"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x", "y"} (%l: tensor<2xf32>, %m: tensor<2xf32>) {
      %q = stablehlo.add %m, %l : tensor<2xf32>
      %r = stablehlo.multiply %q, %m : tensor<2xf32>
      %t = sdy.sharding_constraint %r <@mesh, [{}]> : tensor<2xf32>
      %u = stablehlo.add %t, %l : tensor<2xf32>
      sdy.return %u : tensor<2xf32>
    } : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = stablehlo.add %1, %1 : tensor<4xf32>
    %3 = stablehlo.add %2, %1 : tensor<4xf32>
    return %3 : tensor<4xf32>
  }
}""",
    "cross_region": """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %k = stablehlo.add %a, %a : tensor<4xf32>
    %s0 = sdy.sharding_constraint %k <@mesh, [{"y"}]> : tensor<4xf32>
    %0:2 = stablehlo.while(%i = %n, %v = %a) : tensor<i32>, tensor<4xf32>
    cond {
      %p = stablehlo.compare LT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %w = sdy.sharding_constraint %k <@mesh, [{"x"}]> : tensor<4xf32>
      %w2 = sdy.sharding_constraint %v <@mesh, [{"x"}]> : tensor<4xf32>
      %s = stablehlo.add %w, %s0 : tensor<4xf32>
      %s2 = stablehlo.add %s, %w2 : tensor<4xf32>
      %j = stablehlo.add %i, %c : tensor<i32>
      stablehlo.return %j, %s2 : tensor<i32>, tensor<4xf32>
    }
    %1:2 = sdy.named_computation<"n">(%0#1, %s0) (%l: tensor<4xf32>, %m: tensor<4xf32>) {
      %q = stablehlo.add %m, %l : tensor<4xf32>
      %q2 = stablehlo.add %q, %l : tensor<4xf32>
      sdy.return %q2, %q : tensor<4xf32>, tensor<4xf32>
    } : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %3 = stablehlo.add %1#1, %1#0 : tensor<4xf32>
    %4 = sdy.sharding_constraint %1#0 <@mesh, [{}]> : tensor<4xf32>
    return %3, %4 : tensor<4xf32>, tensor<4xf32>
  }
}""",
    # A token into and out of a manual computation (an ordered callback in
    # a shard_map): `!stablehlo.token` inside, in the stablehlo dialect's
    # own bytecode.
    "token": """module {
  sdy.mesh @mesh = <["i"=2]>
  func.func @main(%t: !stablehlo.token, %a: tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>) {
    %0:2 = sdy.manual_computation(%t, %a) in_shardings=[<@mesh, []>, <@mesh, [{"i"}]>] out_shardings=[<@mesh, []>, <@mesh, [{"i"}]>] manual_axes={"i"} (%u: !stablehlo.token, %b: tensor<2xf32>) {
      %1 = stablehlo.custom_call @cb(%u, %b) {has_side_effect = true} : (!stablehlo.token, tensor<2xf32>) -> !stablehlo.token
      %2 = stablehlo.add %b, %b : tensor<2xf32>
      sdy.return %1, %2 : !stablehlo.token, tensor<2xf32>
    } : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
    return %0#0, %0#1 : !stablehlo.token, tensor<4xf32>
  }
}""",
    "reduce_body": """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<4x4xf32>) -> tensor<4xf32> {
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = sdy.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<4x4xf32>
    %1 = stablehlo.reduce(%0 init: %z) across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
     reducer(%x: tensor<f32>, %y: tensor<f32>) {
      %s = stablehlo.add %x, %y : tensor<f32>
      %t = sdy.sharding_constraint %s <@mesh, []> : tensor<f32>
      %u = sdy.sharding_constraint %x <@mesh, []> : tensor<f32>
      %v = stablehlo.add %t, %u : tensor<f32>
      stablehlo.return %v : tensor<f32>
    }
    %2 = sdy.sharding_constraint %z <@mesh, []> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %4 = stablehlo.add %1, %3 : tensor<4xf32>
    return %4 : tensor<4xf32>
  }
}""",
}


def _round_trip(src: str, target: str = "1.17.0"):
  module = text.parse_module(src)
  verify.verify_module(module)
  data = portable.serialize_portable_artifact(module, target)
  return module, data, portable.deserialize_portable_artifact(data)


@pytest.mark.parametrize("name", sorted(_CROSSINGS))
def test_crossings_round_trip(name):
  module, _, back = _round_trip(_CROSSINGS[name])
  assert text.print_module(back) == text.print_module(module)


@pytest.mark.parametrize("target", ["1.17.0", "1.10.0", "1.0.0", "0.14.0"])
def test_round_trip_keeps_the_sdy_parts(target):
  module, data, back = _round_trip(_PROGRAM, target)
  assert text.print_module(back) == text.print_module(module)
  # The sdy ops are themselves in the artifact, VHLO values reach them
  # through casts, and their attributes have sdy's own encoding.
  f = reader.read(data)
  names = [op.name for op in f.root.walk()]
  assert "sdy.manual_computation" in names and "vhlo.add_v1" in names
  assert sdy_conversion.CAST in names
  dump = text_dump.dump(f)
  assert "sdy.opaque" not in dump and "#sdy.TensorShardingAttrV2<" in dump


def test_sdy_values_in_the_ir():
  _, _, back = _round_trip(_PROGRAM)
  body = back.functions[0].regions[0].blocks[0].operations
  names = [op.name for op in body]
  # The casts are gone: a cast is the identity once both sides are our IR.
  assert names == ["stablehlo.multiply", "sdy.sharding_constraint",
                   "sdy.propagation_barrier", "sdy.sharding_group",
                   "sdy.manual_computation", "sdy.named_computation",
                   "stablehlo.custom_call", "func.return"]
  assert body[1].operands[0] is body[0].results[0]
  manual = body[4]
  assert manual.attr("manual_axes") == sdy.ManualAxes(["x"])
  inner = manual.regions[0].blocks[0]
  assert inner.operations[0].operands[0] is inner.arguments[0]
  arg1 = back.functions[0].attr("arg_attrs").elements[1].get(sdy.SHARDING)
  assert arg1.unreduced_axes == (sdy.AxisRef("q"),)
  assert isinstance(body[6].attr(sdy.SHARDING_RULE), sdy.OpShardingRule)
  mesh = back.body.operations[1].attr("mesh")
  assert mesh.device_ids == (0, 2, 1, 3)


def test_attribute_conversion_round_trips():
  values = [
      sdy.TensorSharding.of("m", [["x"], []], ["y"]),
      sdy.TensorSharding("m", [sdy.DimensionSharding(
          [sdy.AxisRef("x", sdy.SubAxisInfo(1, 2))], False, 0)],
                         unreduced_axes=[sdy.AxisRef("z")]),
      sdy.TensorShardingPerValue([sdy.TensorSharding.of("m", [])]),
      sdy.Mesh((sdy.MeshAxis("a", 2),), ()),
      sdy.ManualAxes(["a", "b"]),
      sdy.ListOfAxisRefLists([sdy.AxisRefList([sdy.AxisRef("a")])]),
      sdy.AllToAllParamList([sdy.AllToAllParam([sdy.AxisRef("a")], 0, 1)]),
      sdy.OpShardingRule((2, 3), [sdy.TensorMapping([sdy.DimMapping([0, 1])])],
                         [sdy.TensorMapping([sdy.DimMapping([1])])],
                         need_replication_factors=[0], is_custom_rule=True),
  ]
  for value in values:
    encoded = sdy_conversion.to_tree(value)
    assert encoded.dialect == "sdy"
    assert sdy_conversion.from_tree(encoded) == value
  # Shardy's writer picks the V2 encoding only for unreduced axes.
  assert sdy_conversion.to_tree(values[0]).kind == "TensorShardingAttr"
  assert sdy_conversion.to_tree(values[1]).kind == "TensorShardingAttrV2"


def test_sdy_attributes_kept_as_text_round_trip():
  # Propagation debugging attributes have no bytecode encoding: Shardy
  # writes them as text, and our IR keeps them verbatim.
  src = ('func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n'
         '  %0 = stablehlo.add %a, %a {sdy.propagation_edges = '
         '#sdy.propagation_edges<[{step-0 = [{"x" = operand-0 -> '
         '[result-0]}]}]>} : tensor<4xf32>\n'
         '  return %0 : tensor<4xf32>\n}')
  module, data, back = _round_trip(src)
  assert text.print_module(back) == text.print_module(module)
  entries = [op.attrs for op in reader.read(data).root.walk()
             if op.name == "vhlo.add_v1"][0].fields[0]
  assert isinstance(entries[0][1], tree.AsmAttr)


def test_ops_of_other_dialects_are_still_refused():
  module = text.parse_module('func.func @f() {\n  "foo.bar"() : () -> ()\n'
                             "  return\n}")
  with pytest.raises(support.InvalidArgumentError, match="foo"):
    portable.serialize_portable_artifact(module, "1.17.0")


# --- against jaxlib ------------------------------------------------------------------

_needs_jaxlib = pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                                   reason=str(jaxlib_oracle.skip_reason()))


def _programs(key):
  if jaxlib_oracle.skip_reason() is not None:
    return []
  from stablehlo._src.testing import sdy_programs  # pylint: disable=g-import-not-at-top
  return sorted(n for n, e in sdy_programs.programs().items() if key in e)


def _entry(name):
  from stablehlo._src.testing import sdy_programs  # pylint: disable=g-import-not-at-top
  return sdy_programs.programs()[name]


def _fresh_context():
  """A new jaxlib context: deserializing loads dialects (quant, ...) into
  its context, which must not leak into the shared oracle context."""
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  return jax_mlir.make_ir_context()


def _jaxlib_artifact(src: str, target: str) -> bytes:
  from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top
  from jaxlib.mlir import passmanager  # pylint: disable=g-import-not-at-top
  from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top
  ctx = _fresh_context()
  module = ir.Module.parse(src, ctx)
  with ctx:
    passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(
        module.operation)
  return stablehlo.serialize_portable_artifact(module, target, True)


def _jaxlib_read(data: bytes) -> str:
  from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top
  return jaxlib_oracle.print_module(stablehlo.deserialize_portable_artifact(
      _fresh_context(), data))


@_needs_jaxlib
@pytest.mark.parametrize("target", ["1.17.0", "1.10.0", "1.0.0"])
@pytest.mark.parametrize("name", _programs("text"))
def test_serialization_is_byte_identical_to_jaxlib(name, target):
  src = _entry(name)["text"]
  ours = portable.serialize_portable_artifact(
      text.parse_module(src), target, strip_debuginfo=True,
      producer_version=jaxlib_oracle.stablehlo_version())
  assert ours == _jaxlib_artifact(src, target)


@_needs_jaxlib
@pytest.mark.parametrize("target", ["1.17.0", "1.0.0"])
@pytest.mark.parametrize("name", ["mixed"] + sorted(_CROSSINGS))
def test_handwritten_programs_are_byte_identical_to_jaxlib(name, target):
  src = _CROSSINGS.get(name, _PROGRAM)
  ours = portable.serialize_portable_artifact(
      text.parse_module(src), target, strip_debuginfo=True,
      producer_version=jaxlib_oracle.stablehlo_version())
  theirs = _jaxlib_artifact(src, target)
  assert ours == theirs
  assert _jaxlib_read(ours) == text.print_module(
      portable.deserialize_portable_artifact(theirs))


@_needs_jaxlib
@pytest.mark.parametrize("name", _programs("artifact"))
def test_jax_export_artifacts(name):
  data = _entry(name)["artifact"]
  # The bytecode tree, sdy attributes decoded, writes back the same bytes.
  f = reader.read(data)
  assert not [op.name for op in f.root.walk()
              if op.dialect == "sdy" and
              isinstance(op.properties, tree.RawProperties)]
  assert writer.write(f) == data
  # We read what jaxlib reads ...
  module = portable.deserialize_portable_artifact(data)
  assert text.print_module(module) == _jaxlib_read(data)
  assert any(op.dialect == "sdy" for op in module.walk())
  # ... and write the artifact back byte for byte, locations included.
  version = portable.get_portable_artifact_version(data)
  assert portable.serialize_portable_artifact(
      module, version,
      producer_version=jaxlib_oracle.stablehlo_version()) == data
