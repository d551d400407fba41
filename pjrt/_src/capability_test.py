"""Tests of the capability query (pjrt/_src/capability.py)."""

import json

import pytest

import pjrt
import support
from pjrt._src import capability
from pjrt._src import test_util
from stablehlo.interpreter import program as interpreter_program
from stablehlo.ops import registry
from stablehlo.text import parse_module
from stablehlo.vhlo import portable

ADD = """
module {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %a : tensor<4xf32>
    %1 = stablehlo.add %0, %a : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""


def _program(body: str, args: str = "%a: tensor<4xf32>",
             result: str = "tensor<4xf32>") -> str:
  return (f"module {{\n  func.func @main({args}) -> {result} {{\n{body}\n"
          "  }\n}\n")


def _by_name(report):
  return {o.name: o for o in report.ops}


@pytest.fixture(scope="module")
def interp():
  return capability.interpreter_table()


def test_all_supported_program(interp):
  report = capability.query(ADD, interp)
  ops = _by_name(report)
  assert set(ops) == {"builtin.module", "func.func", "stablehlo.add",
                      "func.return"}
  assert ops["stablehlo.add"].count == 2
  assert all(o.status == capability.SUPPORTED for o in report.ops)
  assert report.status == capability.SUPPORTED and report.supported
  assert report.counts() == {"supported": 4, "maybe": 0, "unsupported": 0}


def test_op_without_kernel_is_unsupported_with_the_registry_reason(interp):
  text = _program(
      '    %0 = "stablehlo.torch_index_select"(%a, %i) {dim = 0 : i64, '
      "batch_dims = 0 : i64} : (tensor<4xf32>, tensor<2xi32>) -> "
      "tensor<2xf32>\n"
      "    return %0 : tensor<2xf32>",
      args="%a: tensor<4xf32>, %i: tensor<2xi32>", result="tensor<2xf32>")
  report = capability.query(text, interp)
  op = _by_name(report)["stablehlo.torch_index_select"]
  expected = registry.get("stablehlo.torch_index_select").unsupported[
      "interpreter"]
  assert op.status == capability.UNSUPPORTED
  assert op.reasons == [expected]
  assert report.status == capability.UNSUPPORTED
  # Sorted worst first.
  assert report.ops[0].name == "stablehlo.torch_index_select"


def test_unknown_op_is_unsupported(interp):
  text = _program('    %0 = "foo.bar"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n'
                  "    return %0 : tensor<4xf32>")
  op = _by_name(capability.query(text, interp))["foo.bar"]
  assert op.status == capability.UNSUPPORTED
  assert "registry" in op.reasons[0]


def test_custom_call_depends_on_registered_targets(interp):
  known = interpreter_program.custom_call_targets()
  assert known, "the interpreter registers the check.* targets"
  body = (f"    %0 = stablehlo.custom_call @{known[0]}(%a) : "
          "(tensor<4xf32>) -> tensor<4xf32>\n"
          "    %1 = stablehlo.custom_call @no_such_target_xyz(%0) : "
          "(tensor<4xf32>) -> tensor<4xf32>\n"
          "    return %1 : tensor<4xf32>")
  op = _by_name(capability.query(_program(body), interp))[
      "stablehlo.custom_call"]
  assert op.count == 2
  assert op.status == capability.MAYBE
  assert len(op.reasons) == 1 and "'no_such_target_xyz'" in op.reasons[0]
  # Line 1 is `module {`, line 2 the function, then the body.
  assert op.locations == ["line 4"]


def test_custom_call_registered_later_counts(interp):
  target = "capability_test_late_target"
  body = (f"    %0 = stablehlo.custom_call @{target}(%a) : "
          "(tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>")
  before = capability.query(_program(body), interp).status
  interpreter_program.register_custom_call(target, lambda ctx, op, args: 0)
  after = capability.query(_program(body), interp).status
  assert (before, after) == (capability.MAYBE, capability.SUPPORTED)


def test_dynamic_shapes_are_maybe(interp):
  body = ("    %0 = stablehlo.abs %a : tensor<?xf32>\n"
          "    return %0 : tensor<?xf32>")
  report = capability.query(
      _program(body, args="%a: tensor<?xf32>", result="tensor<?xf32>"),
      interp)
  ops = _by_name(report)
  assert ops["stablehlo.abs"].status == capability.MAYBE
  assert "dynamic dimensions" in ops["stablehlo.abs"].reasons[0]
  # The function signature carries the dynamic type too.
  assert ops["func.func"].status == capability.MAYBE
  assert report.status == capability.MAYBE


def test_bytecode_and_module_inputs_give_the_text_answer(interp):
  module = parse_module(ADD)
  artifact = portable.serialize_portable_artifact(module, "current")
  assert artifact[:4] == b"ML\xefR"
  want = capability.query(ADD, interp).to_json()
  assert capability.query(artifact, interp).to_json() == want
  assert capability.query(module, interp).to_json() == want
  assert capability.query(ADD.encode(), interp).to_json() == want


@pytest.mark.parametrize("program", [
    b"\xff\xfe\x00garbage", "module { this is not mlir", 42,
    b"ML\xefR\x00\x01",
])
def test_unreadable_programs_are_support_errors(interp, program):
  with pytest.raises((support.InvalidArgumentError, support.DataLossError)):
    capability.query(program, interp)


def test_foreign_table_says_maybe_with_reason():
  report = capability.query(ADD, capability.foreign_table())
  ops = _by_name(report)
  assert ops["stablehlo.add"].status == capability.MAYBE
  assert ops["stablehlo.add"].reasons == [capability.NO_INFORMATION]
  for name in ("builtin.module", "func.func", "func.return"):
    assert ops[name].status == capability.SUPPORTED
  assert report.status == capability.MAYBE


def test_hlo_coverage_table_maps_ops_to_opcodes():
  coverage = {"add": "codegen", "dot": ("unimplemented", "no gemm yet"),
              "broadcast": {"status": "thunk"}, "constant": "codegen",
              "custom-call": "thunk"}
  table = capability.hlo_coverage_table(coverage, name="fake_cpu")
  text = _program(
      "    %c = stablehlo.constant dense<1.0> : tensor<f32>\n"
      "    %b = stablehlo.broadcast_in_dim %c, dims = [] : "
      "(tensor<f32>) -> tensor<4xf32>\n"
      "    %0 = stablehlo.add %a, %b : tensor<4xf32>\n"
      "    %1 = stablehlo.multiply %0, %0 : tensor<4xf32>\n"
      "    %2 = stablehlo.dot_general %1, %1, contracting_dims = [0] x [0] : "
      "(tensor<4xf32>, tensor<4xf32>) -> tensor<f32>\n"
      "    %3 = chlo.erf %a : tensor<4xf32> -> tensor<4xf32>\n"
      "    return %3 : tensor<4xf32>")
  report = capability.query(text, table)
  ops = _by_name(report)
  assert report.source == "fake_cpu"
  for name in ("stablehlo.constant", "stablehlo.broadcast_in_dim",
               "stablehlo.add"):
    assert ops[name].status == capability.SUPPORTED, ops[name]
  assert ops["stablehlo.dot_general"].status == capability.UNSUPPORTED
  assert "no gemm yet" in ops["stablehlo.dot_general"].reasons[0]
  assert "HLO dot" in ops["stablehlo.dot_general"].reasons[0]
  assert ops["stablehlo.multiply"].status == capability.UNSUPPORTED
  assert ops["chlo.erf"].status == capability.MAYBE


def test_hlo_coverage_table_element_types():
  table = capability.hlo_coverage_table({"add": "codegen"})
  text = _program("    %0 = stablehlo.add %a, %a : tensor<4xf8E4M3FN>\n"
                  "    return %0 : tensor<4xf8E4M3FN>",
                  args="%a: tensor<4xf8E4M3FN>", result="tensor<4xf8E4M3FN>")
  op = _by_name(capability.query(text, table))["stablehlo.add"]
  assert op.status == capability.MAYBE
  assert "element type f8E4M3FN" in op.reasons[0]
  for plain in ("f64", "f16", "bf16", "i64", "ui8", "complex<f64>"):
    text = _program(f"    %0 = stablehlo.add %a, %a : tensor<4x{plain}>\n"
                    f"    return %0 : tensor<4x{plain}>",
                    args=f"%a: tensor<4x{plain}>", result=f"tensor<4x{plain}>")
    assert capability.query(text, table).status == capability.SUPPORTED, (
        plain)
  quant = "!quant.uniform<i8:f32, 0.5:3>"
  text = _program(f"    %0 = stablehlo.add %a, %a : tensor<4x{quant}>\n"
                  f"    return %0 : tensor<4x{quant}>",
                  args=f"%a: tensor<4x{quant}>", result=f"tensor<4x{quant}>")
  op = _by_name(capability.query(text, table))["stablehlo.add"]
  assert op.status == capability.MAYBE
  assert capability.QUANTIZED in op.reasons[0]


def test_hlo_coverage_status_words_are_checked():
  with pytest.raises(support.InvalidArgumentError):
    capability.hlo_coverage_table({"add": "sometimes"})


def test_table_json_round_trip(interp):
  data = json.loads(json.dumps(interp.to_json()))
  again = capability.CapabilityTable.from_json(data)
  assert again.to_json() == interp.to_json()
  for program in (ADD, _program("    %0 = stablehlo.abs %a : tensor<?xf32>\n"
                                "    return %0 : tensor<?xf32>",
                                "%a: tensor<?xf32>", "tensor<?xf32>")):
    assert (capability.query(program, again).to_json()["ops"] ==
            capability.query(program, interp).to_json()["ops"])


def test_table_from_json_by_hand():
  table = capability.CapabilityTable.from_json(json.dumps({
      "name": "mine",
      "ops": {"stablehlo.add": "supported", "func.func": "supported",
              "func.return": "supported", "builtin.module": "supported"},
      "unknown_op": ["unsupported", "not in my table"],
  }))
  assert capability.query(ADD, table).status == capability.SUPPORTED
  text = _program("    %0 = stablehlo.abs %a : tensor<4xf32>\n"
                  "    return %0 : tensor<4xf32>")
  op = _by_name(capability.query(text, table))["stablehlo.abs"]
  assert (op.status, op.reasons) == (capability.UNSUPPORTED,
                                     ["not in my table"])


@pytest.mark.parametrize("data", [
    "[1, 2]", "{not json", json.dumps({"ops": {"x": "perhaps"}}),
    json.dumps({"opz": {}}), json.dumps({"ops": []}),
])
def test_bad_json_tables(data):
  with pytest.raises(support.InvalidArgumentError):
    capability.CapabilityTable.from_json(data)


class _FakePlugin:

  def __init__(self, name, attributes):
    self.name = name
    self._attributes = attributes

  def attributes(self):
    return dict(self._attributes)


def test_table_for_plugin_sources():
  mine = capability.foreign_table("test table", name="capability_test_src")
  mine.ops["stablehlo.add"] = capability.OK
  capability.register_source("capability_test_src", mine)
  try:
    with pytest.raises(support.AlreadyExistsError):
      capability.register_source("capability_test_src", mine)
    named = _FakePlugin("p1", {capability.PLUGIN_ATTRIBUTE:
                               "capability_test_src"})
    assert capability.table_for_plugin(named) is mine
    silent = _FakePlugin("p2", {"xla_version": 2})
    assert (capability.table_for_plugin(silent).unknown_op.reason ==
            capability.NO_INFORMATION)
    capability.bind_plugin("p2", "capability_test_src")
    assert capability.table_for_plugin(silent) is mine
    capability.bind_plugin("p2", None)
    stranger = _FakePlugin("p3", {capability.PLUGIN_ATTRIBUTE: "nope"})
    table = capability.table_for_plugin(stranger)
    assert table.unknown_op.status == capability.MAYBE
    assert "'nope'" in table.unknown_op.reason
  finally:
    capability.unregister_source("capability_test_src")
  with pytest.raises(support.NotFoundError):
    capability.source("capability_test_src")


def test_default_table_prefers_a_registered_cpu_source(interp):
  assert "xla_cpu" not in capability.registered_sources()
  assert capability.default_table().name == "interpreter"
  fake = capability.hlo_coverage_table({"add": "codegen"})
  capability.register_source("xla_cpu", lambda: fake)
  try:
    assert capability.default_table() is fake
  finally:
    capability.unregister_source("xla_cpu")
  assert capability.default_table().name == "interpreter"


def test_bad_status():
  with pytest.raises(support.InvalidArgumentError):
    capability.Verdict("sometimes")


def test_format_table_and_summary(interp):
  report = capability.query(ADD, interp)
  text = report.format_table()
  assert text.splitlines()[0].split() == ["op", "count", "status", "reason"]
  assert "stablehlo.add" in text
  assert report.summary().endswith("-> supported")
  assert "4 op kinds (5 ops)" in report.summary()


@test_util.requires_xla_cpu_pjrt
def test_client_query_on_a_foreign_plugin():
  with pjrt.Client(test_util.xla_cpu_pjrt_path()) as client:
    report = client.query_capabilities(ADD)
    ops = _by_name(report)
    assert ops["stablehlo.add"].status == capability.MAYBE
    assert ops["stablehlo.add"].reasons == [capability.NO_INFORMATION]
    given = client.query_capabilities(ADD, capability.interpreter_table())
    assert given.status == capability.SUPPORTED
