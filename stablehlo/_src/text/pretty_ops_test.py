"""Checks on the pretty-form table itself."""

from stablehlo._src import text
from stablehlo._src.text import pretty_common
from stablehlo._src.text import pretty_ops


def test_table_is_keyed_by_full_op_names():
  assert text.PRETTY_FORMS is pretty_ops.PRETTY_FORMS
  for name, form in pretty_ops.PRETTY_FORMS.items():
    assert "." in name, name
    assert isinstance(form, pretty_common.PrettyForm)
    assert callable(form.parse) and callable(form.print)


def test_core_ops_have_pretty_forms():
  for name in ("stablehlo.add", "stablehlo.constant", "stablehlo.compare",
               "stablehlo.reduce", "stablehlo.while", "stablehlo.convolution",
               "stablehlo.dot_general", "stablehlo.custom_call",
               "func.func", "func.return", "func.call", "builtin.module",
               "check.expect_eq_const", "chlo.top_k", "stablehlo.composite"):
    assert name in pretty_ops.PRETTY_FORMS, name


def test_composite_with_region_prints_pretty():
  # Spelling as jaxlib (StableHLO 1.17) prints this module.
  src = '''func.func @f(%a: tensor<f32>) -> tensor<f32> {
  %0 = "stablehlo.composite"(%a) ({
  ^bb0(%x: tensor<f32>):
    "stablehlo.return"(%x) : (tensor<f32>) -> ()
  }) {name = "c", decomposition = @f} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}'''
  out = text.print_module(text.parse_module(src))
  assert out.splitlines()[2:6] == [
      '    %0 = stablehlo.composite "c" %arg0 ({',
      "    ^bb0(%arg1: tensor<f32>):",
      "      stablehlo.return %arg1 : tensor<f32>",
      "    }) {decomposition = @f} : (tensor<f32>) -> tensor<f32>",
  ]
  assert text.print_module(text.parse_module(out)) == out


def test_print_falls_back_to_generic_when_form_does_not_fit():
  # broadcast_in_dim whose dims are not an i64 array stays generic.
  src = '''func.func @g(%a: tensor<f32>) -> tensor<2xf32> {
  %0 = "stablehlo.broadcast_in_dim"(%a) {broadcast_dimensions = 1 : i64} : (tensor<f32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}'''
  out = text.print_module(text.parse_module(src))
  assert '"stablehlo.broadcast_in_dim"(%arg0)' in out


def test_compare_and_select_fast_paths_match_the_token_path():
  # The first parse reads each op by tokens (its types are new); later ones
  # take the ops' fast paths. Both must give the same ops.
  src = '''func.func @f(%a: tensor<3xi64>, %b: tensor<3xi64>, %p: tensor<3xi1>) -> tensor<3xi64> {
  %0 = stablehlo.compare  LT, %a, %b,  SIGNED : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %1 = stablehlo.compare  EQ, %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %2 = stablehlo.select %0, %a, %b : tensor<3xi1>, tensor<3xi64>
  %3 = stablehlo.select %1, %2, %b : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %3 : tensor<3xi64>
}'''

  def summary(module):
    func = module.body.operations[0]
    return [(op.name, [v.type for v in op.operands],
             [v.type for v in op.results], dict(op.properties),
             dict(op.attributes))
            for op in func.regions[0].entry.operations]

  first = summary(text.parse_module(src))
  for _ in range(2):
    assert summary(text.parse_module(src)) == first
  cmp_lt, cmp_eq = first[0], first[1]
  assert cmp_lt[3]["comparison_direction"].params == (("value", "LT"),)
  assert cmp_lt[3]["compare_type"].params == (("value", "SIGNED"),)
  assert list(cmp_eq[3]) == ["comparison_direction"]
  assert [len(op[1]) for op in first[:4]] == [2, 2, 3, 3]
  out = text.print_module(text.parse_module(src))
  assert "stablehlo.compare LT, %arg0, %arg1, SIGNED" in out
  for _ in range(2):  # single spaces, as our printer writes them
    assert text.print_module(text.parse_module(out)) == out


def test_slice_fast_path_matches_the_token_path():
  src = '''func.func @f(%a: tensor<4x6xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.slice %a [1:3, 0:6:3] : (tensor<4x6xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.slice %0 [0:2, 0:2] {x = 1 : i32} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}'''
  runs = []
  for _ in range(3):  # the first reads by tokens, the others take the fast path
    func = text.parse_module(src).body.operations[0]
    s0, s1, _ = func.regions[0].entry.operations
    runs.append([(dict(op.properties), dict(op.attributes),
                  [v.type for v in op.operands], [v.type for v in op.results])
                 for op in (s0, s1)])
    assert s0.operands == [func.regions[0].entry.arguments[0]]
    assert s1.operands == [s0.results[0]]
  assert runs[0] == runs[1] == runs[2]
  props = runs[0][0][0]
  assert [props[k].values for k in ("start_indices", "limit_indices",
                                    "strides")] == [(1, 0), (3, 6), (1, 3)]
  assert list(runs[0][1][1]) == ["x"]
