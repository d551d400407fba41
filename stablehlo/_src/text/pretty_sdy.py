"""Pretty (custom assembly) forms of the Shardy (`sdy`) ops.

Syntax (openxla/shardy `docs/sdy_dialect.md`, as jaxlib prints it):
  sdy.mesh @mesh = <["x"=2, "y"=2]> attr-dict
  %r = sdy.sharding_constraint %v <@mesh, [{}, {"y"}]> attr-dict : T
  %r = sdy.reshard %v <@mesh, [{"x"}, {}]> attr-dict : T
  %r = sdy.propagation_barrier %v allowed_direction=FORWARD attr-dict : T
  sdy.sharding_group %v group_id=0 attr-dict : T
  %r = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}]>]
      out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%b: T') {
    ...
    sdy.return %c : T'
  } attr-dict : (T) -> T
  %r = sdy.named_computation<"name">(%a) [in_shardings=[...]]
      [out_shardings=[...]] (%b: T) { ... } attr-dict : (T) -> T
  sdy.return attr-dict [%v : T]
  %r = sdy.all_gather [{"x"}, {}] %v out_sharding=<@mesh, [...]> : T
  (all_slice, all_to_all `[{"x"}: 0->1]`, all_reduce `{"x"}`,
  reduce_scatter, collective_permute `%v out_sharding=...`, data_flow_edge,
  func_data_flow_edge, constant)

Inline attributes print without their `#sdy.sharding` prefix; the mesh
symbol prints as `@name`. The region ops' blocks name no label and take no
default dialect, so ops inside them print with their full names.
"""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import pretty_common as pc
from stablehlo._src.text import pretty_registry
# Registers stablehlo.constant, whose form sdy.constant shares.
from stablehlo._src.text import pretty_simple_ops  # pylint: disable=unused-import
from stablehlo._src.text import sdy_attrs
from stablehlo._src.text.pretty_common import PrettyForm
from stablehlo._src.text.pretty_registry import register


def _attr_dict_suffix(pr, op, elide) -> str:
  """` {...}` (leading space) or ""."""
  d = pr.attr_dict(op, elide).rstrip()
  return " " + d if d else ""


# --- sdy.mesh --------------------------------------------------------------------


def _parse_mesh(p, name, pos):
  tok = p.expect_kind(lx.AT_ID, "mesh symbol name")
  p.expect_punct("=", "after the mesh name")
  mesh = sdy_attrs.parse_mesh_body(p)
  attrs = pc.parse_opt_attr_dict(p)
  props = {"mesh": mesh,
           "sym_name": a.StringAttr(attr_parser.symbol_name(tok.text))}
  return pc.make_op(name, [], [], attrs, props)


def _print_mesh(pr, op):
  sym, mesh = op.attr("sym_name"), op.attr("mesh")
  if (op.operands or op.results or not isinstance(sym, a.StringAttr) or
      sym.type is not None or not isinstance(mesh, sdy.Mesh)):
    return None
  return (f"{sdy.symbol(sym.value)} = {mesh.body()}" +
          _attr_dict_suffix(pr, op, {"sym_name", "mesh"}))


register("sdy.mesh", PrettyForm(_parse_mesh, _print_mesh,
                                "@name = <[axes]> attr-dict"))

# --- ops with an operand and an inline attribute ------------------------------------


def _keyword_attr_form(keyword, attr_name, parse_value, print_value,
                       check, *, leading=None, results=1):
  """`%v keyword=attr attr-dict : T`; keyword=None writes the attribute
  alone (`%v <@mesh, ...>`). `leading` = (name, parse, check) adds an
  attribute before the operand (`[{"x"}] %v out_sharding=...`)."""

  def parse(p, name, pos):
    props = {}
    if leading is not None:
      props[leading[0]] = leading[1](p)
    tok = p.expect_kind(lx.PERCENT_ID, "SSA operand")
    if keyword is not None:
      p.expect_keyword(keyword, f"in '{name}'")
      p.expect_punct("=", f"after '{keyword}'")
    props[attr_name] = parse_value(p)
    attrs = pc.parse_opt_attr_dict(p)
    p.expect_punct(":", "followed by type")
    ty = p.parse_type()
    return pc.make_op(name, p.resolve_values([tok], [ty]), [ty] * results,
                      attrs, props)

  def print_(pr, op):
    value = op.attr(attr_name)
    if not (len(op.operands) == 1 and len(op.results) == results and
            all(r.type == op.operands[0].type for r in op.results) and
            check(value)):
      return None
    text = ""
    elide = {attr_name}
    if leading is not None:
      lead = op.attr(leading[0])
      if not leading[2](lead):
        return None
      text = lead.body() + " "
      elide.add(leading[0])
    text += pr.v(op.operands[0]) + " "
    if keyword is not None:
      text += f"{keyword}="
    return (text + print_value(value) + _attr_dict_suffix(pr, op, elide) +
            " : " + pr.t(op.operands[0].type))

  return PrettyForm(parse, print_)


def _is(cls):
  return lambda v: isinstance(v, cls)


_SHARDING = (sdy_attrs.parse_sharding_body, lambda v: v.body(),
             _is(sdy.TensorSharding))

register("sdy.sharding_constraint",
         _keyword_attr_form(None, "sharding", *_SHARDING))
register("sdy.reshard", _keyword_attr_form(None, "sharding", *_SHARDING))


def _parse_direction(p):
  tok = p.expect_kind(lx.BARE_ID, "propagation direction")
  if tok.text not in sdy.PROPAGATION_DIRECTIONS:
    raise p.error(f"expected one of {', '.join(sdy.PROPAGATION_DIRECTIONS)} "
                  f"for the propagation direction, got '{tok.text}'", tok.pos)
  return a.IntegerAttr(sdy.PROPAGATION_DIRECTIONS.index(tok.text), t.i32)


def _is_direction(v) -> bool:
  return (isinstance(v, a.IntegerAttr) and v.type == t.i32 and
          0 <= v.value < len(sdy.PROPAGATION_DIRECTIONS))


register("sdy.propagation_barrier", _keyword_attr_form(
    "allowed_direction", "allowed_direction", _parse_direction,
    lambda v: sdy.PROPAGATION_DIRECTIONS[v.value], _is_direction))


def _is_i64(v) -> bool:
  return isinstance(v, a.IntegerAttr) and v.type == t.i64


register("sdy.sharding_group", _keyword_attr_form(
    "group_id", "group_id", lambda p: a.IntegerAttr(p.parse_int("group id"),
                                                    t.i64),
    lambda v: str(v.value), _is_i64, results=0))

# Collectives: `<axes> %v out_sharding=<...> attr-dict : T`.
_OUT = ("out_sharding", "out_sharding", *_SHARDING)
for _name, _lead in (
    ("sdy.all_gather", ("gathering_axes",
                        sdy_attrs.parse_list_of_axis_ref_lists,
                        _is(sdy.ListOfAxisRefLists))),
    ("sdy.all_slice", ("slicing_axes", sdy_attrs.parse_list_of_axis_ref_lists,
                       _is(sdy.ListOfAxisRefLists))),
    ("sdy.all_to_all", ("params", sdy_attrs.parse_all_to_all_param_list,
                        _is(sdy.AllToAllParamList))),
    ("sdy.all_reduce", ("reduction_axes", sdy_attrs.parse_axis_ref_list,
                        _is(sdy.AxisRefList))),
    ("sdy.reduce_scatter", ("reduce_scatter_axes",
                            sdy_attrs.parse_list_of_axis_ref_lists,
                            _is(sdy.ListOfAxisRefLists))),
):
  register(_name, _keyword_attr_form(*_OUT, leading=_lead))
register("sdy.collective_permute", _keyword_attr_form(*_OUT))


# --- ops with an optional attribute or none ---------------------------------------


def _parse_data_flow_edge(p, name, pos):
  tok = p.expect_kind(lx.PERCENT_ID, "SSA operand")
  props = {}
  if p.consume_keyword("sharding"):
    p.expect_punct("=", "after 'sharding'")
    props["sharding"] = sdy_attrs.parse_sharding_body(p)
  attrs = pc.parse_opt_attr_dict(p)
  p.expect_punct(":", "followed by type")
  ty = p.parse_type()
  return pc.make_op(name, p.resolve_values([tok], [ty]), [ty], attrs, props)


def _print_data_flow_edge(pr, op):
  sharding = op.attr("sharding")
  if (len(op.operands) != 1 or len(op.results) != 1 or
      op.results[0].type != op.operands[0].type or
      (sharding is not None and not isinstance(sharding,
                                               sdy.TensorSharding))):
    return None
  text = pr.v(op.operands[0])
  if sharding is not None:
    text += " sharding=" + sharding.body()
  return (text + _attr_dict_suffix(pr, op, {"sharding"}) + " : " +
          pr.t(op.operands[0].type))


register("sdy.data_flow_edge", PrettyForm(_parse_data_flow_edge,
                                          _print_data_flow_edge))
register("sdy.func_data_flow_edge", PrettyForm(_parse_data_flow_edge,
                                               _print_data_flow_edge))
# `sdy.constant dense<...> : T`, printed as stablehlo.constant is.
register("sdy.constant", pretty_registry.PRETTY_FORMS["stablehlo.constant"])


def _parse_return(p, name, pos):
  attrs = pc.parse_opt_attr_dict(p)
  toks = pc.parse_operand_toks(p)
  operands = []
  if toks:
    p.expect_punct(":", "followed by the returned types")
    types = p.parse_comma_list(p.parse_type)
    operands = p.resolve_values(toks, types)
  return pc.make_op(name, operands, [], attrs)


def _print_return(pr, op):
  if op.results:
    return None
  text = pr.attr_dict(op).rstrip()
  if op.operands:
    text += (" " if text else "") + (f"{pr.vs(op.operands)} : "
                                     f"{pr.ts(op.operand_types)}")
  return text


register("sdy.return", PrettyForm(_parse_return, _print_return,
                                  "attr-dict [%v, ... : T, ...]"))

# --- region ops --------------------------------------------------------------------------


def _parse_body(p):
  """`(%arg: T loc(...)?, ...) { ... }`: the region and its entry block's
  arguments, which have no block label."""
  p.expect_punct("(", "to start the region arguments")
  args = []

  def arg():
    tok = p.expect_kind(lx.PERCENT_ID, "region argument name")
    p.expect_punct(":", "after a region argument name")
    ty = p.parse_type()
    args.append((tok, ty, p.parse_optional_location()))

  p.parse_comma_list(arg, ")")
  p.expect_punct(")", "to end the region arguments")
  return p.parse_region(entry_args=args, default_dialect="")


def _print_body(pr, region) -> str | None:
  if len(region.blocks) != 1:
    return None
  args = []
  for v, loc in zip(region.blocks[0].arguments,
                    region.blocks[0].argument_locations):
    s = f"{pr.v(v)}: {pr.t(v.type)}"
    if pr.print_locations:
      s += pr.loc_suffix(loc)
    args.append(s)
  return f"({', '.join(args)}) " + pr.region(region, entry_args=False)


def _parse_manual_computation(p, name, pos):
  p.expect_punct("(", "to start the operands")
  toks = pc.parse_operand_toks(p)
  p.expect_punct(")", "to end the operands")
  props = {}
  for key in ("in_shardings", "out_shardings"):
    p.expect_keyword(key, f"in '{name}'")
    p.expect_punct("=", f"after '{key}'")
    props[key] = sdy_attrs.parse_sharding_list(p)
  p.expect_keyword("manual_axes", f"in '{name}'")
  p.expect_punct("=", "after 'manual_axes'")
  props["manual_axes"] = sdy_attrs.parse_manual_axes_body(p)
  region = _parse_body(p)
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props, [region])


def _print_manual_computation(pr, op):
  ins, outs = op.attr("in_shardings"), op.attr("out_shardings")
  axes = op.attr("manual_axes")
  if (len(op.regions) != 1 or
      not isinstance(ins, sdy.TensorShardingPerValue) or
      not isinstance(outs, sdy.TensorShardingPerValue) or
      not isinstance(axes, sdy.ManualAxes)):
    return None
  body = _print_body(pr, op.regions[0])
  if body is None:
    return None
  return (f"({pr.vs(op.operands)}) in_shardings={ins.stripped()} "
          f"out_shardings={outs.stripped()} manual_axes={axes.body()} "
          f"{body}" +
          _attr_dict_suffix(pr, op, {"in_shardings", "out_shardings",
                                     "manual_axes"}) +
          f" : {pr.fn_type(op.operand_types, op.result_types)}")


register("sdy.manual_computation", PrettyForm(
    _parse_manual_computation, _print_manual_computation,
    "(%a) in_shardings=[..] out_shardings=[..] manual_axes={..} (%b: T) "
    "{..} attr-dict : (T) -> T", has_regions=True))


def _parse_named_computation(p, name, pos):
  p.expect_punct("<", "before the computation name")
  props = {"name": a.StringAttr(p.parse_string("computation name"))}
  p.expect_punct(">", "after the computation name")
  p.expect_punct("(", "to start the operands")
  toks = pc.parse_operand_toks(p)
  p.expect_punct(")", "to end the operands")
  for key in ("in_shardings", "out_shardings"):
    if p.consume_keyword(key):
      p.expect_punct("=", f"after '{key}'")
      props[key] = sdy_attrs.parse_sharding_list(p)
  region = _parse_body(p)
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props, [region])


def _print_named_computation(pr, op):
  name = op.attr("name")
  if (len(op.regions) != 1 or not isinstance(name, a.StringAttr) or
      name.type is not None):
    return None
  text = f"<{sdy.quote(name.value)}>({pr.vs(op.operands)}) "
  for key in ("in_shardings", "out_shardings"):
    value = op.attr(key)
    if value is None:
      continue
    if not isinstance(value, sdy.TensorShardingPerValue):
      return None
    text += f"{key}={value.stripped()} "
  body = _print_body(pr, op.regions[0])
  if body is None:
    return None
  return (text + body +
          _attr_dict_suffix(pr, op, {"name", "in_shardings",
                                     "out_shardings"}) +
          f" : {pr.fn_type(op.operand_types, op.result_types)}")


register("sdy.named_computation", PrettyForm(
    _parse_named_computation, _print_named_computation,
    "<\"name\">(%a) [in_shardings=[..]] [out_shardings=[..]] (%b: T) {..} "
    "attr-dict : (T) -> T", has_regions=True))
