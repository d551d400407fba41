"""Pretty (custom assembly) forms of the ml_program ops JAX emits for
stateful programs: `global`, `global_load`, `global_load_const` and
`global_store`.

Syntax (MLIR's MLProgram dialect):
  ml_program.global <visibility> [mutable] @name[(<initial value>)] : T {attrs}
  %r = ml_program.global_load @name : T {attrs}
  %r = ml_program.global_load_const @name : T {attrs}
  ml_program.global_store @name = %v : T {attrs}

The attribute dictionary comes after the type. Upstream always prints a
visibility keyword (`public` when the op has none) and requires one when
parsing; this parser also accepts it missing.
"""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.text import attr_parser
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import pretty_common as pc
from stablehlo._src.text.pretty_common import PrettyForm
from stablehlo._src.text.pretty_registry import register

_VISIBILITIES = ("public", "private", "nested")
_GLOBAL_PROPS = frozenset(
    ("sym_name", "sym_visibility", "type", "is_mutable", "value"))


def _parse_symbol_ref(p) -> a.SymbolRefAttr:
  pos = p.lex.token_start()
  if p.peek().kind != lx.AT_ID:
    raise p.error("expected symbol reference to a global", pos)
  ref = p.parse_attribute()
  if not isinstance(ref, a.SymbolRefAttr):
    raise p.error("expected symbol reference to a global", pos)
  return ref


def _trailing_attr_dict(pr, op, elide) -> str:
  """` {...}` (leading space) or ""."""
  d = pr.attr_dict(op, elide)
  return " " + d.rstrip() if d else ""


# --- ml_program.global -----------------------------------------------------------


def _parse_global(p, name, pos):
  props = {}
  for vis in _VISIBILITIES:
    if p.at_keyword(vis):
      p.next()
      props["sym_visibility"] = a.StringAttr(vis)
      break
  if p.at_keyword("mutable"):
    p.next()
    props["is_mutable"] = a.UnitAttr()
  tok = p.expect_kind(lx.AT_ID, "global symbol name")
  props["sym_name"] = a.StringAttr(attr_parser.symbol_name(tok.text))
  if p.at_punct("("):
    p.next()
    props["value"] = p.parse_attribute()
    p.expect_punct(")")
  p.expect_punct(":", "followed by the global's type")
  props["type"] = a.TypeAttr(p.parse_type())
  attrs = pc.parse_opt_attr_dict(p)
  return pc.make_op(name, [], [], attrs, props)


def _print_global(pr, op):
  sym = op.attr("sym_name")
  ty = op.attr("type")
  vis = op.attr("sym_visibility")
  mut = op.attr("is_mutable")
  value = op.attr("value")
  if (op.operands or op.results or
      not isinstance(sym, a.StringAttr) or sym.type is not None or
      not isinstance(ty, a.TypeAttr) or
      (mut is not None and not isinstance(mut, a.UnitAttr))):
    return None
  if vis is None:
    vis_text = "public"
  elif (isinstance(vis, a.StringAttr) and vis.type is None and
        vis.value in _VISIBILITIES):
    vis_text = vis.value
  else:
    return None
  parts = [vis_text]
  if mut is not None:
    parts.append("mutable")
  init = f"({pr.a(value)})" if value is not None else ""
  parts.append(f"{pr.symbol(sym.value)}{init} : {pr.t(ty.value)}")
  return " ".join(parts) + _trailing_attr_dict(pr, op, _GLOBAL_PROPS)


# --- global_load / global_load_const / global_store ------------------------------------


def _parse_load(p, name, pos):
  ref = _parse_symbol_ref(p)
  p.expect_punct(":", "followed by the loaded type")
  ty = p.parse_type()
  attrs = pc.parse_opt_attr_dict(p)
  return pc.make_op(name, [], [ty], attrs, {"global": ref})


def _print_load(pr, op):
  ref = op.attr("global")
  if (op.operands or len(op.results) != 1 or
      not isinstance(ref, a.SymbolRefAttr)):
    return None
  return (f"{pr.a(ref)} : {pr.t(op.results[0].type)}" +
          _trailing_attr_dict(pr, op, {"global"}))


def _parse_store(p, name, pos):
  ref = _parse_symbol_ref(p)
  p.expect_punct("=", "after the global's symbol")
  tok = p.expect_kind(lx.PERCENT_ID, "SSA operand")
  p.expect_punct(":", "followed by the stored type")
  ty = p.parse_type()
  attrs = pc.parse_opt_attr_dict(p)
  return pc.make_op(name, p.resolve_values([tok], [ty]), [], attrs,
                    {"global": ref})


def _print_store(pr, op):
  ref = op.attr("global")
  if (len(op.operands) != 1 or op.results or
      not isinstance(ref, a.SymbolRefAttr)):
    return None
  return (f"{pr.a(ref)} = {pr.v(op.operands[0])} : "
          f"{pr.t(op.operands[0].type)}" +
          _trailing_attr_dict(pr, op, {"global"}))


register("ml_program.global", PrettyForm(
    _parse_global, _print_global, "vis [mutable] @name[(value)] : T attr-dict"))
_LOAD = PrettyForm(_parse_load, _print_load, "@name : T attr-dict")
register("ml_program.global_load", _LOAD)
register("ml_program.global_load_const", _LOAD)
register("ml_program.global_store", PrettyForm(
    _parse_store, _print_store, "@name = %v : T attr-dict"))
