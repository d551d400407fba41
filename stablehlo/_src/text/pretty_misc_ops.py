"""Pretty forms: dot_general, convolution, custom_call, composite, calls and
returns, the `check` / `interpreter` test dialects, CHLO and a few other
dialects' ops seen in the corpora."""

from __future__ import annotations

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import dialect_attrs
from stablehlo._src.text import op_defaults
from stablehlo._src.text import pretty_common as pc
from stablehlo._src.text.pretty_common import PrettyForm
from stablehlo._src.text.pretty_registry import register

# --- dot_general -----------------------------------------------------------------

_DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
               "lhs_contracting_dimensions", "rhs_contracting_dimensions")


def _dot_dims_attr(lb, rb, lc, rc) -> a.DialectAttr:
  params = tuple((k, tuple(v)) for k, v in zip(_DOT_FIELDS, (lb, rb, lc, rc))
                 if v)
  return a.DialectAttr("stablehlo.dot", params)


def _int_list(p):
  return p.parse_delimited("[", "]", p.parse_int)


def _dims_pair(p):
  lhs = _int_list(p)
  p.expect_keyword("x", "between dimension lists")
  return lhs, _int_list(p)


def _parse_precision_list(p):
  parse_one = pc.enum_parser("stablehlo.precision")
  return a.ArrayAttr(tuple(p.parse_delimited("[", "]", lambda: parse_one(p))))


def _format_precision_list(attr):
  if not isinstance(attr, a.ArrayAttr) or not all(
      pc.is_enum(e, "stablehlo.precision") for e in attr.elements):
    return None
  return "[" + ", ".join(e.params[0][1] for e in attr.elements) + "]"


def _parse_dot_general(p, name, pos):
  toks = pc.parse_operand_toks(p, allow_empty=False)
  lb = rb = ()
  if pc.parse_keyword_comma(p, "batching_dims"):
    lb, rb = _dims_pair(p)
  if not pc.parse_keyword_comma(p, "contracting_dims"):
    raise p.error("expected ', contracting_dims ='")
  lc, rc = _dims_pair(p)
  props = {"dot_dimension_numbers": _dot_dims_attr(lb, rb, lc, rc)}
  if pc.parse_keyword_comma(p, "precision"):
    props["precision_config"] = _parse_precision_list(p)
  if pc.parse_keyword_comma(p, "algorithm"):
    start = p.lex.token_start()
    if not p.at_punct("<"):
      raise p.error("expected '<'")
    p.expect_punct("<")
    p.lex.reset(start)
    props["algorithm"] = _parse_dot_algorithm(p)
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props)


def _parse_dot_algorithm(p):
  from stablehlo._src.text import lexer as lx  # pylint: disable=g-import-not-at-top
  fake = lx.Token(lx.HASH_ID, "#stablehlo.dot_algorithm", p.lex.token_start())
  attr = dialect_attrs.parse_dialect_attr(p, "stablehlo.dot_algorithm", fake)
  if not isinstance(attr, a.DialectAttr):
    raise p.error("malformed dot algorithm")
  return attr


def _print_dot_general(pr, op):
  dims = op.attr("dot_dimension_numbers")
  if not isinstance(dims, a.DialectAttr) or dims.name != "stablehlo.dot":
    return None
  d = dict(dims.params)
  vals = [d.get(k, ()) for k in _DOT_FIELDS]
  if not all(isinstance(v, tuple) and all(isinstance(x, int) for x in v)
             for v in vals) or op_defaults.canonical_params(
                 _dot_dims_attr(*vals)) != op_defaults.canonical_params(dims):
    return None
  if len(op.operands) != 2:
    return None
  fmt = lambda v: "[" + ", ".join(map(str, v)) + "]"
  parts = [pr.vs(op.operands)]
  if vals[0] or vals[1]:
    parts.append(f"batching_dims = {fmt(vals[0])} x {fmt(vals[1])}")
  parts.append(f"contracting_dims = {fmt(vals[2])} x {fmt(vals[3])}")
  elide = {"dot_dimension_numbers"}
  prec = op.attr("precision_config")
  if prec is not None:
    s = _format_precision_list(prec)
    if s is None:
      return None
    parts.append(f"precision = {s}")
    elide.add("precision_config")
  alg = op.attr("algorithm")
  if alg is not None:
    if not (isinstance(alg, a.DialectAttr) and
            alg.name == "stablehlo.dot_algorithm"):
      return None
    parts.append("algorithm = " + pr.a(alg)[len("#stablehlo.dot_algorithm"):])
    elide.add("algorithm")
  return (", ".join(parts) + f" {pr.attr_dict(op, elide)}: " +
          pr.fn_type(op.operand_types, op.result_types))


register("stablehlo.dot_general",
         PrettyForm(_parse_dot_general, _print_dot_general))


# --- convolution -------------------------------------------------------------------

_WINDOW_KEYS = (("stride", "window_strides"), ("pad", "padding"),
                ("lhs_dilate", "lhs_dilation"), ("rhs_dilate", "rhs_dilation"),
                ("reverse", "window_reversal"))


def _parse_convolution(p, name, pos):
  p.expect_punct("(")
  toks = pc.parse_operand_toks(p, allow_empty=False)
  p.expect_punct(")")
  p.expect_keyword("dim_numbers")
  p.expect_punct("=")
  props = {"dimension_numbers": a.DialectAttr(
      "stablehlo.conv", dialect_attrs.parse_conv_dims(p))}
  p.expect_punct(",")
  p.expect_keyword("window")
  p.expect_punct("=")
  p.expect_punct("{")
  seen = set()

  def entry():
    tok = p.expect_kind("bare_id", "window attribute name")
    keys = dict(_WINDOW_KEYS)
    if tok.text not in keys or tok.text in seen:
      raise p.error(f"unexpected or duplicate window attribute '{tok.text}'",
                    tok.pos)
    seen.add(tok.text)
    p.expect_punct("=")
    attr_name = keys[tok.text]
    if tok.text == "pad":
      rows = p.parse_delimited("[", "]", lambda: p.parse_delimited(
          "[", "]", p.parse_int))
      if any(len(r) != 2 for r in rows):
        raise p.error("expected [low, high] padding pairs", tok.pos)
      arr = np.array(rows, dtype=np.int64).reshape(len(rows), 2)
      props[attr_name] = a.DenseElementsAttr(
          t.RankedTensorType((len(rows), 2), t.i64), arr)
    elif tok.text == "reverse":
      def flag():
        ftok = p.peek()
        if p.consume_keyword("true"):
          return True
        if p.consume_keyword("false"):
          return False
        v = p.parse_int("boolean")
        if v not in (0, 1):
          raise p.error("expected boolean", ftok.pos)
        return bool(v)
      props[attr_name] = a.DenseArrayAttr(
          t.i1, tuple(p.parse_delimited("[", "]", flag)))
    else:
      props[attr_name] = pc.parse_i64_list(p)

  p.parse_comma_list(entry, "}")
  p.expect_punct("}")
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props)


def _print_convolution(pr, op):
  dims = op.attr("dimension_numbers")
  if not isinstance(dims, a.DialectAttr) or dims.name != "stablehlo.conv":
    return None
  compact = dialect_attrs.format_conv_dims(dims)
  if compact is None or a.DialectAttr("stablehlo.conv", tuple(
      (k, dict(dims.params).get(k)) for k in dialect_attrs.CONV_FIELDS)) != dims:
    return None
  window = []
  elide = {"dimension_numbers"}
  for key, attr_name in _WINDOW_KEYS:
    attr = op.attr(attr_name)
    if attr is None:
      continue
    if key == "pad":
      if not (isinstance(attr, a.DenseElementsAttr) and
              attr.type == t.RankedTensorType(attr.array.shape, t.i64) and
              attr.array.ndim == 2 and attr.array.shape[1] == 2):
        return None
      s = "[" + ", ".join(f"[{int(lo)}, {int(hi)}]"
                          for lo, hi in attr.array.tolist()) + "]"
    elif key == "reverse":
      if not (isinstance(attr, a.DenseArrayAttr) and attr.element_type == t.i1):
        return None
      s = "[" + ", ".join("true" if v else "false" for v in attr.values) + "]"
    else:
      if not pc.is_i64_array(attr):
        return None
      s = pc.format_i64_list(attr)
    window.append(f"{key} = {s}")
    elide.add(attr_name)
  if len(op.operands) != 2:
    return None
  return (f"({pr.vs(op.operands)}) dim_numbers = {compact}, window = "
          f"{{{', '.join(window)}}} {pr.attr_dict(op, elide)}: "
          f"{pr.fn_type(op.operand_types, op.result_types)}")


register("stablehlo.convolution",
         PrettyForm(_parse_convolution, _print_convolution))


# --- symbol-callee forms: custom_call, func.call -----------------------------------


def _callee_form(attr_name: str, as_string: bool):
  def parse(p, name, pos):
    tok = p.expect_kind("at_id", "callee symbol")
    callee = attr_parser.symbol_name(tok.text)
    p.expect_punct("(")
    toks = pc.parse_operand_toks(p)
    p.expect_punct(")")
    attrs = pc.parse_opt_attr_dict(p)
    operands, results = pc.parse_functional_type(p, toks)
    value = a.StringAttr(callee) if as_string else a.SymbolRefAttr(callee)
    return pc.make_op(name, operands, results, attrs, {attr_name: value})

  def print_(pr, op):
    callee = op.attr(attr_name)
    if as_string:
      if not isinstance(callee, a.StringAttr) or callee.type is not None:
        return None
      sym = pr.symbol(callee.value)
    else:
      if not isinstance(callee, a.SymbolRefAttr) or callee.nested:
        return None
      sym = pr.symbol(callee.root)
    return (f"{sym}({pr.vs(op.operands)}) {pr.attr_dict(op, {attr_name})}: "
            f"{pr.fn_type(op.operand_types, op.result_types)}")

  return PrettyForm(parse, print_, "op @callee(%a) attr-dict : (Ts) -> Rs",
                    fast=pc.fast_callee(attr_name, as_string))


register("stablehlo.custom_call", _callee_form("call_target_name", True))
register("func.call", _callee_form("callee", False))


def _parse_composite(p, name, pos):
  """`"name" %a, %b ( ({r1}, {r2}) )? attr-dict : functional-type`."""
  cname = p.parse_string("composite name")
  toks = pc.parse_operand_toks(p)
  regions = []
  if p.consume_punct("("):
    regions.append(p.parse_region())
    while p.consume_punct(","):
      regions.append(p.parse_region())
    p.expect_punct(")", "after composite regions")
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs,
                    {"name": a.StringAttr(cname)}, regions)


def _print_composite(pr, op):
  cname = op.attr("name")
  if not isinstance(cname, a.StringAttr):
    return None
  ops = pr.vs(op.operands)
  text = f"{pr.string(cname.value)}{' ' if ops else ''}{ops} "
  if op.regions:
    text += "(" + ", ".join(pr.region(r) for r in op.regions) + ") "
  return (text + f"{pr.attr_dict(op, {'name'})}: "
          f"{pr.fn_type(op.operand_types, op.result_types)}")


register("stablehlo.composite", PrettyForm(_parse_composite, _print_composite,
                                          has_regions=True))


# --- terminators and type-list ops: `op %a, %b attr-dict : T1, T2` ----------------


def _parse_operands_types(p, name, pos):
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  types = []
  if toks:
    p.expect_punct(":", "followed by types")
    types = p.parse_type_list()
  return pc.make_op(name, p.resolve_values(toks, types), [], attrs)


def _print_operands_types(pr, op):
  if op.results:
    return None
  if not op.operands:
    return pr.attr_dict(op).rstrip()
  return f"{pr.vs(op.operands)} {pr.attr_dict(op)}: {pr.ts(op.operand_types)}"


OPERANDS_TYPES = PrettyForm(_parse_operands_types, _print_operands_types,
                            "op %a, %b attr-dict : T1, T2",
                            fast=pc.fast_operands_types)
for _name in ("func.return", "stablehlo.return", "scf.yield",
              "interpreter.print"):
  register(_name, OPERANDS_TYPES)


# --- check / interpreter ---------------------------------------------------------


def _check_form(keywords=(), const=False, two_types=False, result=False):
  """`op %a, (%b | <typed attr>) (, kw = v)* attr-dict (: T (, T)?)?`."""

  def parse_kw_value(p, kind):
    if kind == "f64":
      return a.FloatAttr(p.parse_number_value("float value"), t.f64)
    if kind == "str":
      return a.StringAttr(p.parse_string())
    return a.IntegerAttr(p.parse_int(), t.IntegerType(int(kind[1:])))

  def parse(p, name, pos):
    toks = [p.expect_kind("percent_id", "SSA operand")]
    props = {}
    if const:
      p.expect_punct(",")
      props["value"] = p.parse_attribute()
    elif p.at_punct(",") and not keywords_next(p):
      p.next()
      toks.append(p.expect_kind("percent_id", "SSA operand"))
    for word, attr_name, kind in keywords:
      if pc.parse_keyword_comma(p, word):
        props[attr_name] = parse_kw_value(p, kind)
    attrs = pc.parse_opt_attr_dict(p)
    if const:
      ty = getattr(props["value"], "type", None)
      if not isinstance(ty, t.Type):
        raise p.error("expected typed attribute", pos)
      return pc.make_op(name, p.resolve_values(toks, [ty]), [], attrs, props)
    p.expect_punct(":", "followed by type")
    types = p.parse_type_list() if two_types else [p.parse_type()]
    if not two_types:
      types = types * len(toks)
    operands = p.resolve_values(toks, types)
    return pc.make_op(name, operands, [types[0]] if result else [], attrs,
                      props)

  def keywords_next(p):
    return any(_peek_comma_keyword(p, w) for w, _, _ in keywords)

  def print_(pr, op):
    parts = [pr.vs(op.operands)]
    elide = set()
    if const:
      value = op.attr("value")
      if value is None or len(op.operands) != 1 or getattr(
          value, "type", None) != op.operands[0].type:
        return None
      parts.append(pr.a(value))
      elide.add("value")
    for word, attr_name, kind in keywords:
      attr = op.attr(attr_name)
      if attr is None:
        continue
      if kind == "f64":
        if not (isinstance(attr, a.FloatAttr) and attr.type == t.f64):
          return None
        s = pr.float_value(attr.value, t.f64)
      elif kind == "str":
        if not isinstance(attr, a.StringAttr):
          return None
        s = pr.string(attr.value)
      else:
        if not (isinstance(attr, a.IntegerAttr) and
                attr.type == t.IntegerType(int(kind[1:]))):
          return None
        s = str(attr.value)
      parts.append(f"{word} = {s}")
      elide.add(attr_name)
    head = ", ".join(parts)
    if const:
      d = pr.attr_dict(op, elide).rstrip()
      return head + (" " + d if d else "")
    if two_types:
      ty = pr.ts(op.operand_types)
    else:
      if any(x != op.operands[0].type for x in op.operand_types):
        return None
      ty = pr.t(op.operands[0].type)
    if result and op.result_types != [op.operands[0].type]:
      return None
    if not result and op.results:
      return None
    return f"{head} {pr.attr_dict(op, elide)}: {ty}"

  return PrettyForm(parse, print_)


def _peek_comma_keyword(p, word) -> bool:
  if not p.at_punct(","):
    return False
  save = p.lex.token_start()
  p.next()
  found = p.at_keyword(word)
  p.lex.reset(save)
  return found


register("check.expect_eq", _check_form())
register("check.expect_almost_eq",
         _check_form([("tolerance", "tolerance", "f64")]))
register("check.expect_eq_const", _check_form(const=True))
register("check.expect_almost_eq_const", _check_form(const=True))
register("check.expect_close", _check_form(
    [("max_ulp_difference", "max_ulp_difference", "i64"),
     ("min_ulp_difference", "min_ulp_difference", "i64")], two_types=True))
register("check.expect_serialized_eq", _check_form(
    [("probe_id", "probe_id", "str"), ("iter", "iteration", "i32")]))
register("interpreter.probe", _check_form([("probe_id", "probe_id", "str")],
                                          result=True))


# --- CHLO: `chlo.op %a, %b attr-dict : T1, T2 -> R` ---------------------------------


def _parse_chlo(p, name, pos):
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  p.expect_punct(":", "followed by types")
  types = p.parse_type_list()
  p.expect_punct("->")
  results = p.parse_result_types()
  return pc.make_op(name, p.resolve_values(toks, types), results, attrs)


def _print_chlo(pr, op):
  if not op.operands or len(op.results) != 1:
    return None
  return (f"{pr.vs(op.operands)} {pr.attr_dict(op)}: "
          f"{pr.ts(op.operand_types)} -> {pr.t(op.results[0].type)}")


CHLO_FORM = PrettyForm(_parse_chlo, _print_chlo, "op %a attr-dict : T -> R")
for _name in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "bessel_i1e", "conj",
    "cosh", "digamma", "erf", "erf_inv", "erfc", "is_inf", "is_neg_inf",
    "is_pos_inf", "lgamma", "sinh", "square", "tan", "next_after",
    "polygamma", "zeta", "mulhi"):
  register("chlo." + _name, CHLO_FORM)


def _parse_chlo_broadcast(p, name, pos):
  """`op %a, %b attr-dict : (T1, T2) -> R`; also the `T1, T2 -> R` spelling
  this printer used to write."""
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  tpos = p.lex.token_start()
  p.expect_punct(":", "followed by types")
  if p.at_punct("("):
    p.lex.reset(tpos)
    operands, results = pc.parse_functional_type(p, toks)
    return pc.make_op(name, operands, results, attrs)
  types = p.parse_type_list()
  p.expect_punct("->")
  results = p.parse_result_types()
  return pc.make_op(name, p.resolve_values(toks, types), results, attrs)


def _print_chlo_broadcast(pr, op):
  if not op.operands or len(op.results) != 1:
    return None
  return (f"{pr.vs(op.operands)} {pr.attr_dict(op)}: "
          f"{pr.fn_type(op.operand_types, op.result_types)}")


CHLO_BROADCAST_FORM = PrettyForm(_parse_chlo_broadcast, _print_chlo_broadcast,
                                 "op %a, %b attr-dict : (T1, T2) -> R")
for _name in (
    "broadcast_add", "broadcast_atan2", "broadcast_divide",
    "broadcast_maximum", "broadcast_minimum", "broadcast_multiply",
    "broadcast_next_after", "broadcast_polygamma", "broadcast_power",
    "broadcast_remainder", "broadcast_shift_left",
    "broadcast_shift_right_arithmetic", "broadcast_shift_right_logical",
    "broadcast_subtract", "broadcast_zeta", "broadcast_and", "broadcast_or",
    "broadcast_xor", "broadcast_complex", "broadcast_compare",
    "broadcast_select"):
  register("chlo." + _name, CHLO_BROADCAST_FORM)


def _parse_chlo_constant(p, name, pos):
  attrs = pc.parse_opt_attr_dict(p)
  vpos = p.lex.token_start()
  value = p.parse_attribute()
  ty = getattr(value, "type", None)
  if not isinstance(ty, t.Type):
    raise p.error("expected a typed attribute", vpos)
  return pc.make_op(name, [], [ty], attrs, {"value": value})


def _print_chlo_constant(pr, op):
  """`chlo.constant attr-dict <typed value>`."""
  value = op.attr("value")
  if (len(op.results) != 1 or op.operands or
      getattr(value, "type", None) != op.results[0].type):
    return None
  return f"{pr.attr_dict(op, {'value'})}{pr.a(value)}"


register("chlo.constant", PrettyForm(_parse_chlo_constant,
                                     _print_chlo_constant))


def _parse_top_k(p, name, pos):
  p.expect_punct("(")
  tok = p.expect_kind("percent_id", "SSA operand")
  if not pc.parse_keyword_comma(p, "k"):
    raise p.error("expected ', k ='")
  k = p.parse_int()
  p.expect_punct(")")
  attrs = pc.parse_opt_attr_dict(p)
  p.expect_punct(":", "followed by types")
  ty = p.parse_type()
  p.expect_punct("->")
  results = p.parse_result_types()
  return pc.make_op(name, p.resolve_values([tok], [ty]), results, attrs,
                    {"k": a.IntegerAttr(k, t.i64)})


def _print_top_k(pr, op):
  k = op.attr("k")
  if not isinstance(k, a.IntegerAttr) or len(op.operands) != 1:
    return None
  return (f"({pr.v(op.operands[0])}, k = {k.value}) "
          f"{pr.attr_dict(op, {'k'})}: {pr.t(op.operands[0].type)} -> "
          f"({pr.ts(op.result_types)})")


register("chlo.top_k", PrettyForm(_parse_top_k, _print_top_k))


# --- tensor.insert ------------------------------------------------------------------


def _parse_tensor_insert(p, name, pos):
  scalar = p.expect_kind("percent_id", "SSA operand")
  p.expect_keyword("into")
  dest = p.expect_kind("percent_id", "SSA operand")
  p.expect_punct("[")
  idx = pc.parse_operand_toks(p)
  p.expect_punct("]")
  attrs = pc.parse_opt_attr_dict(p)
  tpos = p.lex.token_start()
  p.expect_punct(":")
  ty = p.parse_type()
  if not isinstance(ty, t.RankedTensorType):
    raise p.error("expected ranked tensor type", tpos)
  operands = p.resolve_values([scalar, dest] + idx,
                              [ty.element_type, ty] + [t.index] * len(idx))
  return pc.make_op(name, operands, [ty], attrs)


def _print_tensor_insert(pr, op):
  if len(op.operands) < 2 or len(op.results) != 1:
    return None
  return (f"{pr.v(op.operands[0])} into {pr.v(op.operands[1])}"
          f"[{pr.vs(op.operands[2:])}] {pr.attr_dict(op)}: "
          f"{pr.t(op.results[0].type)}")


register("tensor.insert", PrettyForm(_parse_tensor_insert,
                                     _print_tensor_insert))
