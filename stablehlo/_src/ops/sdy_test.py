"""Verification of Shardy ops and sharding attributes.

Each invalid program names the constraint our error must cite; where jaxlib
is installed the same programs go through its parser (which verifies), and
it must accept exactly the programs we accept.
"""

import pytest

from stablehlo._src import text
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.ops import sdy as sdy_ops
from stablehlo._src.ops import verify
from stablehlo._src.testing import jaxlib_oracle

_HEAD = """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  sdy.mesh @m8 = <["a"=8]>
  sdy.mesh @mx = <[], device_ids=[0]>
"""


def _arg(ty, sharding):
  return (f"func.func @f(%a: {ty} {{sdy.sharding = {sharding}}}) -> {ty} {{\n"
          f"  return %a : {ty}\n}}")


def _manual(in_sh, out_sh, axes, local_in, local_out, ty="tensor<4x4xf32>"):
  return (f"func.func @f(%a: {ty}) -> {ty} {{\n"
          f"  %0 = sdy.manual_computation(%a) in_shardings=[{in_sh}] "
          f"out_shardings=[{out_sh}] manual_axes={{{axes}}} "
          f"(%b: {local_in}) {{\n"
          f"    %1 = stablehlo.constant dense<0.0> : {local_out}\n"
          f"    sdy.return %1 : {local_out}\n"
          f"  }} : ({ty}) -> {ty}\n"
          f"  return %0 : {ty}\n}}")


def _body(ops, ty="tensor<4x4xf32>"):
  return (f"func.func @f(%a: {ty}) -> {ty} {{\n{ops}\n"
          f"  return %a : {ty}\n}}")


# name -> (program body, None when valid or (error tag, message part)).
CASES = {
    "uneven_shards_ok": (_arg("tensor<3xf32>",
                              '#sdy.sharding<@mesh, [{"x"}]>'), None),
    "sub_axes_ok": (_arg("tensor<8x8xf32>",
                         '#sdy.sharding<@m8, [{"a":(1)2}, {"a":(2)4}]>'),
                    None),
    "open_and_priorities_ok": (_arg(
        "tensor<4x4xf32>", '#sdy.sharding<@mesh, [{"x", ?}p0, {?}p3], '
        'replicated={"y"}>'), None),
    "maximal_ok": (_arg("tensor<4xf32>", "#sdy.sharding<@mx, []>"), None),
    "unknown_mesh": (_arg("tensor<4xf32>", "#sdy.sharding<@nope, [{}]>"),
                     ("sdy.sharding_mesh_exists",
                      "arg 0 - unknown mesh: @nope")),
    "unknown_axis": (_arg("tensor<4xf32>", '#sdy.sharding<@mesh, [{"z"}]>'),
                     ("sdy.sharding_axis_known",
                      'arg 0 - unknown axis name: "z"')),
    "axis_twice": (_arg("tensor<4x4xf32>",
                        '#sdy.sharding<@mesh, [{"x"}, {"x"}]>'),
                   ("sdy.sharding_axis_unique", 'duplicate axis ref: "x"')),
    "axis_sharded_and_replicated": (_arg(
        "tensor<4x4xf32>", '#sdy.sharding<@mesh, [{"x"}, {}], '
        'replicated={"x"}>'), ("sdy.sharding_axis_unique",
                               'duplicate axis ref: "x"')),
    "rank": (_arg("tensor<4x4xf32>", '#sdy.sharding<@mesh, [{"x"}]>'),
             ("sdy.sharding_rank",
              "sharding doesn't match tensor rank: 1 != 2")),
    "replicated_order": (_arg(
        "tensor<4xf32>", '#sdy.sharding<@mesh, [{}], replicated={"y", "x"}>'),
        ("sdy.sharding_axis_order", "replicated axes are not ordered")),
    "sub_axes_mergeable": (_arg(
        "tensor<8xf32>", '#sdy.sharding<@m8, [{"a":(1)2, "a":(2)2}]>'),
        ("sdy.sharding_sub_axis", "two consecutive sub-axes can be merged")),
    "sub_axes_overlap": (_arg(
        "tensor<8x8xf32>", '#sdy.sharding<@m8, [{"a":(1)4}, {"a":(2)2}]>'),
        ("sdy.sharding_axis_unique", "overlapping sub-axes")),
    "sub_and_full_axis": (_arg(
        "tensor<8x8xf32>", '#sdy.sharding<@m8, [{"a"}, {"a":(2)2}]>'),
        ("sdy.sharding_axis_unique", "both sub-axis and full-axis")),
    "sub_axis_whole": (_arg("tensor<8xf32>",
                            '#sdy.sharding<@m8, [{"a":(1)8}]>'),
                       ("sdy.sharding_sub_axis", "equal to the full axis")),
    "sub_axis_not_dividing": (_arg("tensor<8xf32>",
                                   '#sdy.sharding<@m8, [{"a":(1)3}]>'),
                              ("sdy.sharding_sub_axis", "doesn't divide")),
    "priority_on_closed_empty": (_arg("tensor<8xf32>",
                                      "#sdy.sharding<@m8, [{}p1]>"),
                                 ("sdy.sharding_priority",
                                  "empty and closed but has a priority")),
    "maximal_with_dims": (_arg("tensor<4xf32>", "#sdy.sharding<@mx, [{}]>"),
                          ("sdy.sharding_maximal", "a maximal sharding")),
    "constraint_rank": (_body(
        '  %0 = sdy.sharding_constraint %a <@mesh, [{}]> : tensor<4x4xf32>'),
        ("sdy.sharding_constraint_rank", "doesn't match tensor rank")),
    "reshard_axis": (_body(
        '  %0 = sdy.reshard %a <@mesh, [{"q"}, {}]> : tensor<4x4xf32>'),
        ("sdy.reshard_axis_known", 'unknown axis name: "q"')),
    "per_value_count": (_body(
        "  %0 = stablehlo.add %a, %a {sdy.sharding = #sdy.sharding_per_value<"
        "[<@mesh, [{}, {}]>, <@mesh, [{}, {}]>]>} : tensor<4x4xf32>"),
        ("sdy.sharding_count", "2 shardings vs 1 values")),
    "per_value_bad_axis": (_body(
        "  %0 = stablehlo.add %a, %a {sdy.sharding = #sdy.sharding_per_value<"
        '[<@mesh, [{"w"}, {}]>]>} : tensor<4x4xf32>'),
        ("sdy.sharding_axis_known", 'unknown axis name: "w"')),
    "barrier_both": (_body(
        "  %0 = sdy.propagation_barrier %a allowed_direction=BOTH : "
        "tensor<4x4xf32>"), ("sdy.propagation_barrier_direction",
                             "cannot specify `BOTH`")),
    "manual_ok": (_manual('<@mesh, [{"x"}, {"y"}]>', '<@mesh, [{"x"}, {}]>',
                          '"x", "y"', "tensor<2x2xf32>", "tensor<2x4xf32>"),
                  None),
    "manual_partial_ok": (_manual('<@mesh, [{"x", ?}, {?}]>',
                                  '<@mesh, [{?}, {?}]>', '"x"',
                                  "tensor<2x4xf32>", "tensor<4x4xf32>"),
                          None),
    "manual_local_shape": (_manual('<@mesh, [{"x"}, {}]>', '<@mesh, [{}, {}]>',
                                   '"x"', "tensor<4x4xf32>",
                                   "tensor<4x4xf32>"),
                           ("sdy.manual_computation_local_shape",
                            "Expected local shape tensor<2x4xf32>, actual "
                            "local shape tensor<4x4xf32>")),
    "manual_result_local_shape": (_manual(
        '<@mesh, [{}, {}]>', '<@mesh, [{}, {"y"}]>', '"y"', "tensor<4x4xf32>",
        "tensor<4x4xf32>"), ("sdy.manual_computation_local_shape",
                             "result shape")),
    "manual_not_divisible": (_manual(
        '<@mesh, [{"x"}, {}]>', '<@mesh, [{}, {}]>', '"x"', "tensor<1x4xf32>",
        "tensor<3x4xf32>", ty="tensor<3x4xf32>"),
        ("sdy.manual_computation_divisible", "3 is not divisible by the "
         "manual axes size 2")),
    "manual_after_free": (_manual('<@mesh, [{"y", "x"}, {}]>',
                                  '<@mesh, [{}, {}]>', '"x"',
                                  "tensor<2x4xf32>", "tensor<4x4xf32>"),
                          ("sdy.manual_computation_manual_axes",
                           'Saw manual axis "x" after free axis "y"')),
    "manual_unknown_axis": (_manual('<@mesh, [{}, {}]>', '<@mesh, [{}, {}]>',
                                    '"q"', "tensor<4x4xf32>",
                                    "tensor<4x4xf32>"),
                            ("sdy.manual_computation_manual_axes",
                             'unknown manual axis: "q"')),
    "manual_sharding_count": (_manual("", '<@mesh, [{}, {}]>', '"x"',
                                      "tensor<4x4xf32>", "tensor<4x4xf32>"),
                              ("sdy.manual_computation_count",
                               "0 shardings vs 1 values")),
    "manual_nested_same_axis": ("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%b: tensor<2xf32>) {
    %1 = sdy.manual_computation(%b) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%c: tensor<1xf32>) {
      sdy.return %c : tensor<1xf32>
    } : (tensor<2xf32>) -> tensor<2xf32>
    sdy.return %1 : tensor<2xf32>
  } : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""", ("sdy.manual_computation_manual_bound", 'axis "x" which is already '
       "bound")),
    "named_computation_types": ("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sdy.named_computation<"n">(%a) (%b: tensor<2xf32>) {
    sdy.return %b : tensor<2xf32>
  } : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""", ("sdy.named_computation_region_types", "block argument types")),
    "mesh_duplicate_axis": ('sdy.mesh @bad = <["a"=2, "a"=2]>',
                            ("sdy.mesh_mesh", 'duplicate axis name: "a"')),
    "mesh_device_count": ('sdy.mesh @bad = <["a"=2], device_ids=[0, 1, 2]>',
                          ("sdy.mesh_mesh", "got: 2 != 3")),
    "mesh_device_ids": ('sdy.mesh @bad = <["a"=2], device_ids=[1, 3]>',
                        ("sdy.mesh_mesh", "sorted device ids must be iota")),
    "mesh_redefined": ('sdy.mesh @mesh = <["a"=2]>',
                       ("sdy.mesh_mesh_parent", "redefinition of symbol")),
    "rule_count": (_body(
        "  %0 = stablehlo.custom_call @foo(%a) {sdy.sharding_rule = "
        "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=4, j=4}>} : "
        "(tensor<4x4xf32>) -> tensor<4x4xf32>"),
        ("sdy.sharding_rule_rule", "number of operands and mappings must "
         "match: 1 != 2")),
    "rule_rank": (_body(
        "  %0 = stablehlo.custom_call @foo(%a) {sdy.sharding_rule = "
        "#sdy.op_sharding_rule<([i])->([i, j]) {i=4, j=4}>} : "
        "(tensor<4x4xf32>) -> tensor<4x4xf32>"),
        ("sdy.sharding_rule_rule", "mapping rank must match: 1 != 2")),
}


def _source(name):
  return _HEAD + CASES[name][0] + "\n}\n"


def _our_error(name):
  module = text.parse_module(_source(name), f"{name}.mlir")
  try:
    verify.verify_module(module)
  except verify.VerificationError as e:
    return e
  return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_verification(name):
  expected = CASES[name][1]
  error = _our_error(name)
  if expected is None:
    assert error is None, str(error)
    return
  tag, part = expected
  assert error is not None, f"{name} verified but violates {tag}"
  assert error.constraint == tag, str(error)
  assert part in str(error)
  # A diagnostic at the offending op, not a traceback.
  assert str(error).startswith(f"{name}.mlir:"), str(error)
  assert ": error: '" in str(error)


@pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                    reason=str(jaxlib_oracle.skip_reason()))
@pytest.mark.parametrize("name", sorted(CASES))
def test_jaxlib_agrees(name):
  _, jaxlib_error = jaxlib_oracle.parse(_source(name))
  ours = _our_error(name)
  assert (jaxlib_error is None) == (ours is None), (jaxlib_error, ours)


def test_mesh_problem_and_sharding_problem_directly():
  assert sdy_ops.mesh_problem(sdy.Mesh((sdy.MeshAxis("a", 0),))) == \
      "axis size must be at least 1, got: 0"
  assert sdy_ops.mesh_problem(sdy.Mesh((), (0, 1))) == \
      "axes is empty and device_ids has more than one element"
  assert sdy_ops.mesh_problem(sdy.Mesh((), (-1,))) == \
      "device id must be non-negative, got: -1"
  module = text.parse_module(_HEAD + "}")
  ty = t.RankedTensorType((4, 4), t.f32)
  ok = sdy.TensorSharding.of("mesh", [["x"], ["y"]])
  assert sdy_ops.sharding_problem(ok, ty, module.op) is None
  bad = sdy.TensorSharding.of("mesh", [["x", "y"], ["y"]])
  assert sdy_ops.sharding_problem(bad, ty, module.op) == (
      "axis_unique", 'duplicate axis ref: "y"')
  # A token takes a rank-0 sharding only.
  assert sdy_ops.sharding_problem(sdy.TensorSharding.of("mesh", []), t.token,
                                  module.op) is None
  assert sdy_ops.sharding_problem(ok, t.token, module.op)[0] == "maximal"


def _jax_programs():
  if jaxlib_oracle.skip_reason() is not None:
    return []
  from stablehlo._src.testing import sdy_programs  # pylint: disable=g-import-not-at-top
  return sorted(sdy_programs.programs())


@pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                    reason=str(jaxlib_oracle.skip_reason()))
@pytest.mark.parametrize("name", _jax_programs())
def test_jax_programs_verify(name):
  from stablehlo._src.testing import sdy_programs  # pylint: disable=g-import-not-at-top
  entry = sdy_programs.programs()[name]
  for key in ("text", "export"):
    if key in entry:
      verify.verify_module(text.parse_module(entry[key], f"{name}.mlir"))
