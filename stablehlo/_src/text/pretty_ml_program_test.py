"""Parsing and printing of the ml_program ops' pretty forms.

Expected spellings follow the assembly formats of MLIR's MLProgram dialect
(jaxlib 0.10.2 does not register ml_program, so it cannot be the oracle).
"""

import pytest

from stablehlo._src import text
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t

_GENERIC = '''module {
  "ml_program.global"() <{sym_name = "state", sym_visibility = "private", type = tensor<i32>, is_mutable, value = dense<5> : tensor<i32>}> : () -> ()
  "ml_program.global"() <{sym_name = "m", type = tensor<2xf32>, is_mutable}> : () -> ()
  "ml_program.global"() <{sym_name = "c", sym_visibility = "nested", type = tensor<i64>, value = dense<7> : tensor<i64>}> {tag = 1 : i32} : () -> ()
  func.func @main(%v: tensor<i32>) -> tensor<i64> {
    %0 = "ml_program.global_load"() <{global = @state}> : () -> tensor<i32>
    "ml_program.global_store"(%v) <{global = @state}> {note} : (tensor<i32>) -> ()
    %1 = "ml_program.global_load_const"() <{global = @c}> : () -> tensor<i64>
    return %1 : tensor<i64>
  }
}'''

_PRETTY = [
    "module {",
    "  ml_program.global private mutable @state(dense<5> : tensor<i32>) : tensor<i32>",
    "  ml_program.global public mutable @m : tensor<2xf32>",
    "  ml_program.global nested @c(dense<7> : tensor<i64>) : tensor<i64> {tag = 1 : i32}",
    "  func.func @main(%arg0: tensor<i32>) -> tensor<i64> {",
    "    %0 = ml_program.global_load @state : tensor<i32>",
    "    ml_program.global_store @state = %arg0 : tensor<i32> {note}",
    "    %1 = ml_program.global_load_const @c : tensor<i64>",
    "    return %1 : tensor<i64>",
    "  }",
    "}",
]


def test_generic_prints_pretty_and_round_trips():
  out = text.print_module(text.parse_module(_GENERIC))
  assert out.splitlines() == _PRETTY
  assert text.print_module(text.parse_module(out)) == out


def test_pretty_parse_builds_upstream_attributes():
  module = text.parse_module("\n".join(_PRETTY))
  ops = list(module.body.operations)
  state, m = ops[0], ops[1]
  assert state.attr("sym_name") == a.StringAttr("state")
  assert state.attr("sym_visibility") == a.StringAttr("private")
  assert state.attr("type") == a.TypeAttr(t.RankedTensorType((), t.i32))
  assert isinstance(state.attr("is_mutable"), a.UnitAttr)
  assert m.attr("value") is None
  func = ops[3]
  load, store = func.regions[0].blocks[0].operations[:2]
  assert load.attr("global") == a.SymbolRefAttr("state")
  assert store.attr("global") == a.SymbolRefAttr("state")
  assert isinstance(store.attr("note"), a.UnitAttr)


def test_generic_and_pretty_give_the_same_module():
  # Upstream's parser turns the printed `public` keyword into an explicit
  # sym_visibility = "public"; everything else is unchanged.
  expected = _GENERIC.replace(
      '<{sym_name = "m", type', '<{sym_name = "m", sym_visibility = "public", type')
  generic = text.print_module(text.parse_module(expected), generic=True)
  from_pretty = text.print_module(text.parse_module("\n".join(_PRETTY)),
                                  generic=True)
  assert generic == from_pretty


@pytest.mark.parametrize("src,what", [
    ("ml_program.global private @g(dense<1> : tensor<i32>) tensor<i32>",
     "expected ':'"),
    ("ml_program.global private 3 : tensor<i32>", "global symbol name"),
    ('func.func @f() {\n  %0 = ml_program.global_load "g" : tensor<i32>\n}',
     "expected symbol reference"),
    ("func.func @f(%a: tensor<i32>) {\n"
     "  ml_program.global_store @g %a : tensor<i32>\n}", "expected '='"),
])
def test_malformed_is_a_parse_error(src, what):
  with pytest.raises(text.ParseError, match=what):
    text.parse_module(src)
