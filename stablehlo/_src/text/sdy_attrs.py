"""Parsing of Shardy (`sdy`) attributes into `stablehlo._src.ir.sdy` values.

Two spellings reach `parse_dialect_attr`, as MLIR prints them:
  #sdy.sharding<@mesh, [{"x"}, {}]>     (the body is one `<...>` group)
  #sdy<manual_axes{"x", "y"}>           (any other body)
The `parse_*_body` functions read the part after the mnemonic; the sdy ops'
pretty forms use them for their inline attributes (`<@mesh, [...]>`).

Printing is `str(attr)` / `attr.body()` on the IR values. Mnemonics this
module does not model (propagation-edge debugging attributes) are kept
verbatim as `OpaqueAttr`s.
"""

from __future__ import annotations

import re

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.text import lexer as lx

_PRIORITY_RE = re.compile(r"p(0|[1-9][0-9]*)")
_FACTOR_RE = re.compile(r"z_([1-9][0-9]*)|([i-z])")
_Z = ord("z") - ord("i")  # the index of factor `z`; `z_N` is _Z + N


# --- axes and meshes ----------------------------------------------------------------


def parse_mesh_axis(p) -> sdy.MeshAxis:
  name = p.parse_string("mesh axis name")
  p.expect_punct("=", "after a mesh axis name")
  return sdy.MeshAxis(name, p.parse_int("mesh axis size"))


def parse_mesh_body(p) -> sdy.Mesh:
  """`<["x"=2, "y"=2]>`, `<[], device_ids=[0]>`."""
  p.expect_punct("<", "to start a mesh")
  p.expect_punct("[", "to start the mesh axes")
  axes = p.parse_comma_list(lambda: parse_mesh_axis(p), "]")
  p.expect_punct("]", "to end the mesh axes")
  device_ids = ()
  if p.consume_punct(","):
    p.expect_keyword("device_ids", "in a mesh")
    p.expect_punct("=", "after 'device_ids'")
    p.expect_punct("[", "to start the device ids")
    device_ids = tuple(p.parse_comma_list(lambda: p.parse_int("device id"),
                                          "]"))
    p.expect_punct("]", "to end the device ids")
  p.expect_punct(">", "to end a mesh")
  return sdy.Mesh(tuple(axes), device_ids)


def parse_sub_axis_info(p) -> sdy.SubAxisInfo:
  p.expect_punct("(", "to start a sub-axis")
  pre_size = p.parse_int("sub-axis pre-size")
  p.expect_punct(")", "after a sub-axis pre-size")
  return sdy.SubAxisInfo(pre_size, p.parse_int("sub-axis size"))


def parse_axis_ref(p) -> sdy.AxisRef:
  """`"x"` or `"x":(1)2`."""
  name = p.parse_string("axis name")
  if p.at_punct(":"):
    save = p.lex.token_start()
    p.next()
    if p.at_punct("("):
      return sdy.AxisRef(name, parse_sub_axis_info(p))
    p.lex.reset(save)
  return sdy.AxisRef(name)


def parse_axis_ref_list_body(p) -> tuple[sdy.AxisRef, ...]:
  """`{"x", "y":(1)2}`."""
  p.expect_punct("{", "to start an axis list")
  axes = p.parse_comma_list(lambda: parse_axis_ref(p), "}")
  p.expect_punct("}", "to end an axis list")
  return tuple(axes)


def parse_dimension_sharding(p) -> sdy.DimensionSharding:
  """`{"x", "y"}`, `{"x", ?}`, `{?}`, each optionally followed by `pN`."""
  p.expect_punct("{", "to start a dimension sharding")
  axes = []
  closed = True
  while not p.consume_punct("}"):
    if axes:
      p.expect_punct(",", "or '}' in a dimension sharding")
    if p.consume_punct("?"):
      closed = False
      p.expect_punct("}", "after '?' in a dimension sharding")
      break
    axes.append(parse_axis_ref(p))
  priority = None
  tok = p.peek()
  if tok.kind == lx.BARE_ID:
    m = _PRIORITY_RE.fullmatch(tok.text)
    if m is None:
      raise p.error(f"expecting priority in format 'p<number>' without "
                    f"leading zeros, got: {tok.text}", tok.pos)
    p.next()
    priority = int(m.group(1))
  return sdy.DimensionSharding(tuple(axes), closed, priority)


# --- shardings --------------------------------------------------------------------------


def parse_mesh_or_ref(p) -> sdy.MeshOrRef:
  tok = p.peek()
  if tok.kind == lx.AT_ID:
    ref = p.parse_symbol_ref()
    if ref.nested:
      raise p.error("expected a flat symbol reference to a mesh", tok.pos)
    return ref.root
  if p.consume_keyword("mesh"):
    return parse_mesh_body(p)
  raise p.error("expecting MeshAttr or FlatSymbolRefAttr", tok.pos)


def parse_sharding_body(p) -> sdy.TensorSharding:
  """`<@mesh, [{"x"}, {}], replicated={"y"}, unreduced={"z"}>`."""
  p.expect_punct("<", "to start a tensor sharding")
  mesh = parse_mesh_or_ref(p)
  p.expect_punct(",", "after the mesh of a tensor sharding")
  p.expect_punct("[", "to start the dimension shardings")
  dims = p.parse_comma_list(lambda: parse_dimension_sharding(p), "]")
  p.expect_punct("]", "to end the dimension shardings")
  lists = {}
  while p.consume_punct(","):
    tok = p.peek()
    if (tok.kind != lx.BARE_ID or tok.text not in ("replicated", "unreduced")
        or tok.text in lists):
      raise p.error("failed to parse Sdy_TensorSharding, expected valid "
                    "named axis list after comma", tok.pos)
    p.next()
    p.expect_punct("=", f"after '{tok.text}'")
    lists[tok.text] = parse_axis_ref_list_body(p)
  p.expect_punct(">", "to end a tensor sharding")
  return sdy.TensorSharding(mesh, tuple(dims), lists.get("replicated", ()),
                            lists.get("unreduced", ()))


def parse_sharding_list(p) -> sdy.TensorShardingPerValue:
  """`[<@mesh, [...]>, ...]` (the stripped form ops print)."""
  p.expect_punct("[", "to start a list of shardings")
  shardings = p.parse_comma_list(lambda: parse_sharding_body(p), "]")
  p.expect_punct("]", "to end a list of shardings")
  return sdy.TensorShardingPerValue(tuple(shardings))


def parse_sharding_per_value_body(p) -> sdy.TensorShardingPerValue:
  p.expect_punct("<", "to start a sharding per value")
  value = parse_sharding_list(p)
  p.expect_punct(">", "to end a sharding per value")
  return value


def parse_manual_axes_body(p) -> sdy.ManualAxes:
  """`{"x", "y"}`."""
  p.expect_punct("{", "to start the manual axes")
  axes = p.parse_comma_list(lambda: p.parse_string("manual axis name"), "}")
  p.expect_punct("}", "to end the manual axes")
  return sdy.ManualAxes(tuple(axes))


# --- collective parameters ---------------------------------------------------------------


def parse_axis_ref_list(p) -> sdy.AxisRefList:
  return sdy.AxisRefList(parse_axis_ref_list_body(p))


def parse_list_of_axis_ref_lists(p) -> sdy.ListOfAxisRefLists:
  """`[{"x"}, {}]`."""
  p.expect_punct("[", "to start a list of axis lists")
  lists = p.parse_comma_list(lambda: parse_axis_ref_list(p), "]")
  p.expect_punct("]", "to end a list of axis lists")
  return sdy.ListOfAxisRefLists(tuple(lists))


def parse_all_to_all_param(p) -> sdy.AllToAllParam:
  """`{"x"}: 0->1`."""
  axes = parse_axis_ref_list_body(p)
  p.expect_punct(":", "after the axes of an all-to-all parameter")
  src = p.parse_int("source dimension")
  p.expect_punct("->", "in an all-to-all parameter")
  return sdy.AllToAllParam(axes, src, p.parse_int("target dimension"))


def parse_all_to_all_param_list(p) -> sdy.AllToAllParamList:
  p.expect_punct("[", "to start all-to-all parameters")
  params = p.parse_comma_list(lambda: parse_all_to_all_param(p), "]")
  p.expect_punct("]", "to end all-to-all parameters")
  return sdy.AllToAllParamList(tuple(params))


# --- sharding rules ------------------------------------------------------------------------


def _factor_indices(p, tok) -> tuple[int, ...]:
  """`ij`, `z_1k` -> factor indices."""
  out = []
  pos = 0
  text = tok.text
  while pos < len(text):
    m = _FACTOR_RE.match(text, pos)
    if m is None:
      raise p.error(f"expecting factor symbols from 'i' to 'z' or 'z_N', "
                    f"got: '{text[pos:]}'", tok.pos + pos)
    if m.group(1):
      out.append(int(m.group(1)) + _Z)
    else:
      out.append(ord(m.group(2)) - ord("i"))
    pos = m.end()
  return tuple(out)


def parse_dim_mapping(p) -> sdy.DimMapping:
  tok = p.expect_kind(lx.BARE_ID, "factor symbols")
  return sdy.DimMapping(_factor_indices(p, tok))


def parse_tensor_mapping(p) -> sdy.TensorMapping:
  p.expect_punct("[", "to start a tensor mapping")
  dims = p.parse_comma_list(lambda: parse_dim_mapping(p), "]")
  p.expect_punct("]", "to end a tensor mapping")
  return sdy.TensorMapping(tuple(dims))


def _single_factor(p) -> int:
  tok = p.expect_kind(lx.BARE_ID, "factor symbol")
  indices = _factor_indices(p, tok)
  if len(indices) != 1:
    raise p.error(f"expecting single factor symbol: {tok.text}", tok.pos)
  return indices[0]


def parse_op_sharding_rule_body(p) -> sdy.OpShardingRule:
  """`<([i, j], [j, k])->([i, k]) {i=4, j=2, k=4} reduction={j}, custom>`."""
  p.expect_punct("<", "to start a sharding rule")

  def mappings():
    p.expect_punct("(", "to start tensor mappings")
    items = p.parse_comma_list(lambda: parse_tensor_mapping(p), ")")
    p.expect_punct(")", "to end tensor mappings")
    return tuple(items)

  operands = mappings()
  p.expect_punct("->", "in a sharding rule")
  results = mappings()
  sizes = []
  if p.consume_punct("{"):
    def size():
      tok = p.peek()
      index = _single_factor(p)
      if index != len(sizes):
        raise p.error("expecting factor indices to be ordered like an iota "
                      f"(e.g. {{i=#, j=#, ...}}); expecting factor symbol "
                      f"'{sdy.factor_symbol(len(sizes))}', received "
                      f"'{tok.text}'", tok.pos)
      p.expect_punct("=", "after a factor symbol")
      sizes.append(p.parse_int("factor size"))
    p.parse_comma_list(size, "}")
    p.expect_punct("}", "to end the factor sizes")
  kinds = {}
  for kind in sdy.OpShardingRule.FACTOR_KINDS:
    if p.consume_keyword(kind):
      p.expect_punct("=", f"after '{kind}'")
      p.expect_punct("{", f"to start the {kind} factors")
      kinds[kind] = tuple(p.parse_comma_list(lambda: _single_factor(p), "}"))
      p.expect_punct("}", f"to end the {kind} factors")
  custom = False
  if p.consume_punct(","):
    p.expect_keyword("custom", "in a sharding rule")
    custom = True
  p.expect_punct(">", "to end a sharding rule")
  return sdy.OpShardingRule(
      tuple(sizes), operands, results,
      *(kinds.get(k, ()) for k in sdy.OpShardingRule.FACTOR_KINDS),
      is_custom_rule=custom)


# --- `#sdy...` dispatch ----------------------------------------------------------------------

# mnemonic -> parser of the body that follows it.
_BODY_PARSERS = {
    "mesh": parse_mesh_body,
    "mesh_axis": parse_mesh_axis,
    "sub_axis_info": parse_sub_axis_info,
    "axis_ref": parse_axis_ref,
    "dimension_sharding": parse_dimension_sharding,
    "sharding": parse_sharding_body,
    "sharding_per_value": parse_sharding_per_value_body,
    "manual_axes": parse_manual_axes_body,
    "axis_ref_list": parse_axis_ref_list,
    "list_of_axis_ref_lists": parse_list_of_axis_ref_lists,
    "all_to_all_param": parse_all_to_all_param,
    "all_to_all_param_list": parse_all_to_all_param_list,
    "dim_mapping": parse_dim_mapping,
    "tensor_mapping": parse_tensor_mapping,
    "op_sharding_rule": parse_op_sharding_rule_body,
}


def parse_dialect_attr(p, name: str, tok: lx.Token) -> a.Attribute:
  """`#sdy.<mnemonic><...>` or `#sdy<mnemonic ...>`; the lexer is at `<`."""
  start = p.lex.token_start()
  end = p.lex.skip_balanced(start)
  if name == sdy.DIALECT:
    p.expect_punct("<")
    mtok = p.peek()
    parse = _BODY_PARSERS.get(mtok.text) if mtok.kind == lx.BARE_ID else None
    if parse is None:
      p.lex.reset(end)
      return a.OpaqueAttr(f"#{name}{p.text[start:end]}")
    p.next()
    value = parse(p)
    p.expect_punct(">", f"to end #sdy<{mtok.text}...>")
    return value
  mnemonic = name[len(sdy.DIALECT) + 1:]
  parse = _BODY_PARSERS.get(mnemonic)
  if parse is None:
    p.lex.reset(end)
    return a.OpaqueAttr(f"#{name}{p.text[start:end]}")
  # As upstream, `#sdy.axis_ref<...>` hands `<...>` to the body parser,
  # which fails for every mnemonic whose body is not one `<...>` group.
  return parse(p)
