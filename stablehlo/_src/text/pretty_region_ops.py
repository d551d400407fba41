"""Pretty forms of ops with regions: `builtin.module`, `func.func`,
`stablehlo.reduce`, `stablehlo.while`, `chlo.scan`, `scf.for`."""

from __future__ import annotations

import re

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import pretty_common as pc
from stablehlo._src.text.pretty_common import PrettyForm
from stablehlo._src.text import pretty_registry
from stablehlo._src.text import pretty_simple_ops
from stablehlo._src.text import type_parser
from stablehlo._src.text.pretty_registry import register

# Ops whose regions all print their entry arguments under the names of the
# first region's (e.g. a while's `cond` and `do` share `%iterArg`s).
SHARED_ARG_NAMES = frozenset(("stablehlo.while",))

# --- builtin.module ---------------------------------------------------------------


def _parse_module(p, name, pos):
  props = {}
  if p.peek().kind == "at_id":
    props["sym_name"] = a.StringAttr(attr_parser.symbol_name(p.next().text))
  attrs = {}
  if p.consume_keyword("attributes"):
    attrs = dict(p.parse_attr_dict().entries)
  region = p.parse_region(entry_args=[], default_dialect="builtin")
  return pc.make_op(name, [], [], attrs, props, [region])


def _print_module(pr, op):
  if len(op.regions) != 1 or len(op.regions[0].blocks) != 1 or op.operands:
    return None
  sym = op.attr("sym_name")
  head = ""
  elide = set()
  if sym is not None:
    if not isinstance(sym, a.StringAttr):
      return None
    head = pr.symbol(sym.value) + " "
    elide.add("sym_name")
  d = pr.attr_dict(op, elide)
  if d:
    head += "attributes " + d
  return head + pr.region(op.regions[0], entry_args=False)


# (Registered with its fast path below, after the patterns it shares with
# func.func's.)

# --- func.func ---------------------------------------------------------------------

_FUNC_PROPS = ("sym_name", "function_type", "sym_visibility", "arg_attrs",
               "res_attrs")


def _parse_func(p, name, pos):
  props = {}
  if p.at_keyword("private") or p.at_keyword("public") or p.at_keyword(
      "nested"):
    props["sym_visibility"] = a.StringAttr(p.next().text)
  tok = p.expect_kind("at_id", "function name")
  props["sym_name"] = a.StringAttr(attr_parser.symbol_name(tok.text))
  p.expect_punct("(", "in function signature")
  args = []  # (token or None, type, attrs, loc)

  def arg():
    vtok = None
    if p.at_value():
      vtok = p.next()
      p.expect_punct(":", "after argument name")
    ty = p.parse_type()
    attrs = p.parse_attr_dict() if p.at_punct("{") else a.DictionaryAttr(())
    loc = p.parse_optional_location()
    args.append((vtok, ty, attrs, loc))

  p.parse_comma_list(arg, ")")
  p.expect_punct(")")
  named = [x[0] is not None for x in args]
  if any(named) and not all(named):
    raise p.error("expected SSA identifier for every argument", tok.pos)
  results = []
  if p.consume_punct("->"):
    if p.at_punct("(") and not _paren_is_function_type(p):
      p.next()

      def res():
        ty = p.parse_type()
        attrs = p.parse_attr_dict() if p.at_punct("{") else a.DictionaryAttr(
            ())
        results.append((ty, attrs))

      p.parse_comma_list(res, ")")
      p.expect_punct(")")
    else:
      results.append((p.parse_type(), a.DictionaryAttr(())))
  props["function_type"] = a.TypeAttr(t.FunctionType(
      tuple(x[1] for x in args), tuple(r[0] for r in results)))
  if any(x[2].entries for x in args):
    props["arg_attrs"] = a.ArrayAttr(tuple(x[2] for x in args))
  if any(r[1].entries for r in results):
    props["res_attrs"] = a.ArrayAttr(tuple(r[1] for r in results))
  attrs = {}
  if p.consume_keyword("attributes"):
    attrs = dict(p.parse_attr_dict().entries)
  region = core.Region()
  if p.at_punct("{"):
    if args and not all(named):
      raise p.error("expected named arguments for a function with a body",
                    tok.pos)
    region = p.parse_region(entry_args=[(x[0], x[1], x[3]) for x in args],
                            default_dialect="func")
  ordered = {k: props[k] for k in _FUNC_PROPS if k in props}
  return pc.make_op(name, [], [], attrs, ordered, [region])


# The header of a function with a body as the printer writes it, in one
# match (see pretty_common's fast paths): named arguments of tensor types
# with optional attribute dictionaries, results likewise, `attributes`.
_ID = r"[A-Za-z0-9_$.\-]+"
# (Runs of plain characters between strings, the unrolled-loop form: one
# alternation per string rather than one per character.)
_DICT = (r'\{[^{}"#!/\n]*(?:"[^"\\\n]*(?:\\.[^"\\\n]*)*"[^{}"#!/\n]*)*'
         r'\}')
_FUNC_ARG = "%" + _ID + ": " + pc.TENSOR + "(?: " + _DICT + ")?"
_FUNC_RES = pc.TENSOR + "(?: " + _DICT + ")?"
_FUNC_HEAD_FAST_RE = re.compile(
    r" (?:(public|private|nested) )?@(" + _ID + r")\((" + _FUNC_ARG +
    "(?:, " + _FUNC_ARG + r")*)?\)(?: -> (?:(" + pc.TENSOR + r")|\((" +
    _FUNC_RES + "(?:, " + _FUNC_RES + r")*)?\)))?(?: attributes (" + _DICT +
    r"))? (?=\{)")
_FUNC_ARG_RE = re.compile(
    "(%" + _ID + "): (" + pc.TENSOR + ")(?: (" + _DICT + "))?(?:, )?")
_FUNC_RES_RE = re.compile(
    "(" + pc.TENSOR + ")(?: (" + _DICT + "))?(?:, )?")


# A function header's signature, by the texts of its arguments, results and
# attribute dictionary (the name and visibility vary where these repeat,
# e.g. @inputs() -> tensor<...> in every test): its arguments as (name,
# offset from the argument list's start, type), its inherent attributes
# after sym_name, and its discardable attribute entries. All immutable, so
# functions share them.
_FUNC_SIGNATURES: dict = {}
_FUNC_SIGNATURES_LIMIT = 1 << 12
_NO_ATTRS = a.DictionaryAttr(())
# sym_name / sym_visibility attributes by their text (frozen, shared).
_SYMBOL_NAMES: dict = {}


def _fast_func(p, name, pos):
  m = _FUNC_HEAD_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  key = m.group(3, 4, 5, 6)
  sig = _FUNC_SIGNATURES.get(key)
  if sig is None:
    sig = _func_signature(p.text, m)
    if sig is None:
      return None
    type_parser.remember(_FUNC_SIGNATURES, key, sig, _FUNC_SIGNATURES_LIMIT)
  args, fn_props, attr_entries = sig
  props = {"sym_name": _symbol_attr(m.group(2))}
  props.update(fn_props)
  if m.group(1) is not None:
    # The order of _FUNC_PROPS: visibility after the function type.
    props = {"sym_name": props["sym_name"],
             "function_type": props["function_type"],
             "sym_visibility": _symbol_attr(m.group(1)), **fn_props}
  base = m.start(3)
  entry_args = [(lx.Token(lx.PERCENT_ID, arg_name, base + offset), ty, None)
                for arg_name, offset, ty in args]
  p.lex.reset(m.end())
  p.op_names.append(name)
  try:
    region = p.parse_region(entry_args=entry_args, default_dialect="func")
  finally:
    p.op_names.pop()
  return core.Operation(name, (), (), dict(attr_entries), props, (region,))


def _symbol_attr(text: str) -> a.StringAttr:
  attr = _SYMBOL_NAMES.get(text)
  if attr is None:
    attr = type_parser.remember(_SYMBOL_NAMES, text, a.StringAttr(text),
                                _FUNC_SIGNATURES_LIMIT)
  return attr


def _func_signature(text, m):
  """The signature (see _FUNC_SIGNATURES) of the header `m` matched; None
  where a type or attribute dictionary is not in the parser's caches."""
  args = []  # (name, offset, type, attributes)
  if m.group(3) is not None:
    base = at = m.start(3)
    end = m.end(3)
    while at < end:
      item = _FUNC_ARG_RE.match(text, at, end)
      ty = pc.cached_type(item.group(2))
      attrs = _NO_ATTRS
      if item.group(3) is not None:
        attrs = pc.cached_attr_dict(item.group(3))
      if ty is None or attrs is None:
        return None
      args.append((item.group(1), at - base, ty, attrs))
      at = item.end()
  results = []  # (type, attributes)
  if m.group(4) is not None:
    ty = pc.cached_type(m.group(4))
    if ty is None:
      return None
    results.append((ty, _NO_ATTRS))
  elif m.group(5) is not None:
    at, end = m.span(5)
    while at < end:
      item = _FUNC_RES_RE.match(text, at, end)
      ty = pc.cached_type(item.group(1))
      attrs = _NO_ATTRS
      if item.group(2) is not None:
        attrs = pc.cached_attr_dict(item.group(2))
      if ty is None or attrs is None:
        return None
      results.append((ty, attrs))
      at = item.end()
  attr_entries = ()
  if m.group(6) is not None:
    d = pc.cached_attr_dict(m.group(6))
    if d is None:
      return None
    attr_entries = d.entries
  fn_props = {"function_type": a.TypeAttr(t.FunctionType(
      tuple(x[2] for x in args), tuple(r[0] for r in results)))}
  if any(x[3].entries for x in args):
    fn_props["arg_attrs"] = a.ArrayAttr(tuple(x[3] for x in args))
  if any(r[1].entries for r in results):
    fn_props["res_attrs"] = a.ArrayAttr(tuple(r[1] for r in results))
  return (tuple((x[0], x[1], x[2]) for x in args), fn_props, attr_entries)


# `module @name attributes {...} {` as the printer writes it, in one match:
# the name (unquoted) and the dictionary (from the cache) both optional.
_MODULE_HEAD_FAST_RE = re.compile(
    r" (?:@(" + _ID + r") )?(?:attributes (" + _DICT + r") )?(?=\{)")


def _fast_module(p, name, pos):
  m = _MODULE_HEAD_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  attrs = {}
  if m.group(2) is not None:
    d = pc.cached_attr_dict(m.group(2))
    if d is None:
      return None
    attrs = dict(d.entries)
  props = {}
  if m.group(1) is not None:
    props["sym_name"] = _symbol_attr(m.group(1))
  p.lex.reset(m.end())
  p.op_names.append(name)
  try:
    region = p.parse_region(entry_args=[], default_dialect="builtin")
  finally:
    p.op_names.pop()
  return core.Operation(name, (), (), attrs, props, (region,))


register("builtin.module", PrettyForm(_parse_module, _print_module,
                                      has_regions=True, fast=_fast_module))


# A parenthesized result list without nested parentheses (strings may hold
# any), and the arrow that would follow it if it were a function type.
_FLAT_PARENS_RE = re.compile(
    r'\((?:[^()"]|"[^"\\]*(?:\\.[^"\\]*)*")*\)')
_ARROW_RE = re.compile(r"[ \t\r\n]*->")


def _paren_is_function_type(p) -> bool:
  """After `->`: is `(`...`)` followed by `->` (a function-typed result)?"""
  save = p.lex.token_start()
  m = _FLAT_PARENS_RE.match(p.text, save)
  if m is not None:  # the common case, without moving the lexer
    return _ARROW_RE.match(p.text, m.end()) is not None
  end = p.lex.skip_balanced(save)
  p.lex.reset(end)
  result = p.at_punct("->")
  p.lex.reset(save)
  return result


def _print_func(pr, op):
  sym = op.attr("sym_name")
  fty = op.attr("function_type")
  if not (isinstance(sym, a.StringAttr) and isinstance(fty, a.TypeAttr) and
          isinstance(fty.value, t.FunctionType)) or len(op.regions) != 1:
    return None
  fn = fty.value
  vis = op.attr("sym_visibility")
  head = ""
  if vis is not None:
    if not isinstance(vis, a.StringAttr):
      return None
    head = vis.value + " "
  arg_attrs = _dict_list(op.attr("arg_attrs"), len(fn.inputs))
  res_attrs = _dict_list(op.attr("res_attrs"), len(fn.results))
  if arg_attrs is None or res_attrs is None:
    return None
  region = op.regions[0]
  body = region.blocks[0] if region.blocks else None
  if body is not None and [v.type for v in body.arguments] != list(fn.inputs):
    return None
  args = []
  for i, ty in enumerate(fn.inputs):
    s = pr.t(ty)
    if body is not None:
      s = f"{pr.v(body.arguments[i])}: {s}"
    if arg_attrs[i].entries:
      s += " " + pr.a(arg_attrs[i])
    if body is not None and pr.print_locations:
      s += pr.loc_suffix(body.argument_locations[i])
    args.append(s)
  text = f"{head}{pr.symbol(sym.value)}({', '.join(args)})"
  if fn.results:
    res = [pr.t(ty) + (" " + pr.a(ra) if ra.entries else "")
           for ty, ra in zip(fn.results, res_attrs)]
    if len(res) == 1 and not res_attrs[0].entries and not isinstance(
        fn.results[0], t.FunctionType):
      text += f" -> {res[0]}"
    else:
      text += f" -> ({', '.join(res)})"
  d = pr.attr_dict(op, set(_FUNC_PROPS))
  if d:
    text += " attributes " + d.rstrip()
  if body is not None:
    text += " " + pr.region(region, entry_args=False)
  return text


def _dict_list(attr, n):
  if attr is None:
    return [a.DictionaryAttr(())] * n
  if not isinstance(attr, a.ArrayAttr) or len(attr.elements) != n or not all(
      isinstance(e, a.DictionaryAttr) for e in attr.elements):
    return None
  return list(attr.elements)


register("func.func", PrettyForm(_parse_func, _print_func, has_regions=True,
                                 fast=_fast_func))

# --- stablehlo.reduce ------------------------------------------------------------


def _parse_reduce(p, name, pos):
  inputs, inits = [], []

  def pair():
    p.expect_punct("(")
    inputs.append(p.expect_kind("percent_id", "SSA operand"))
    p.expect_keyword("init")
    p.expect_punct(":")
    inits.append(p.expect_kind("percent_id", "SSA operand"))
    p.expect_punct(")")

  pair()
  while p.consume_punct(","):
    pair()
  body_op = None
  if p.consume_keyword("applies"):
    btok = p.expect_kind("bare_id", "reduction op name")
    body_op = btok.text
  p.expect_keyword("across")
  p.expect_keyword("dimensions")
  p.expect_punct("=")
  props = {"dimensions": pc.parse_i64_list(p)}
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, inputs + inits)
  n = len(inputs)
  if body_op is not None:
    if n != 1:
      raise p.error("'applies' needs exactly one input", pos)
    region = _compact_reduce_body(body_op, operands[n].type)
  else:
    p.expect_keyword("reducer")
    lhs, rhs = [], []
    for _ in range(n):
      p.expect_punct("(")
      for side in (lhs, rhs):
        vtok = p.expect_kind("percent_id", "block argument")
        p.expect_punct(":")
        ty = p.parse_type()
        side.append((vtok, ty, p.parse_optional_location()))
        if side is lhs:
          p.expect_punct(",")
      p.expect_punct(")")
    region = p.parse_region(entry_args=lhs + rhs)
  return pc.make_op(name, operands, results, attrs, props, [region])


def _compact_reduce_body(op_name, ty) -> core.Region:
  block = core.Block([ty, ty])
  inner = pc.make_op(op_name, block.arguments, [ty])
  block.append(inner)
  block.append(pc.make_op("stablehlo.return", inner.results, []))
  return core.Region([block])


def _compact_body_op(op) -> str | None:
  """The op name for `applies <op>` if the reducer is that simple form."""
  if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
    return None
  block = op.regions[0].blocks[0]
  if len(op.operands) != 2 or len(block.arguments) != 2 or len(
      block.operations) != 2:
    return None
  inner, ret = block.operations
  init_ty = op.operands[1].type
  if (inner.name.split(".")[0] != "stablehlo" or inner.regions or
      inner.attributes or inner.properties or len(inner.results) != 1 or
      list(inner.operands) != block.arguments or
      any(v.type != init_ty for v in block.arguments) or
      inner.results[0].type != init_ty or ret.name != "stablehlo.return" or
      list(ret.operands) != inner.results or ret.attributes or
      ret.properties or inner.name == "stablehlo.return"):
    return None
  if pretty_registry.PRETTY_FORMS.get(inner.name) is not (
      pretty_simple_ops.SAME_TYPE):
    return None
  return inner.name


def _print_reduce(pr, op):
  dims = op.attr("dimensions")
  if not pc.is_i64_array(dims) or len(op.regions) != 1 or len(
      op.operands) % 2 or not op.operands:
    return None
  n = len(op.operands) // 2
  pairs = ", ".join(f"({pr.v(op.operands[i])} init: {pr.v(op.operands[n + i])})"
                    for i in range(n))
  head = (f"{pairs}")
  compact = _compact_body_op(op) if not pr.print_locations else None
  if compact is not None:
    head += f" applies {compact}"
  head += (f" across dimensions = {pc.format_i64_list(dims)} "
           f"{pr.attr_dict(op, {'dimensions'})}: "
           f"{pr.fn_type(op.operand_types, op.result_types)}")
  if compact is not None:
    return head
  region = op.regions[0]
  if len(region.blocks) != 1 or len(region.blocks[0].arguments) != 2 * n:
    return None
  args = region.blocks[0].arguments
  locs = region.blocks[0].argument_locations
  groups = []
  for i in range(n):
    parts = []
    for j in (i, n + i):
      parts.append(f"{pr.v(args[j])}: {pr.t(args[j].type)}" +
                   (pr.loc_suffix(locs[j]) if pr.print_locations else ""))
    groups.append("(" + ", ".join(parts) + ")")
  return (head + "\n" + pr.indent_str() + " reducer" + " ".join(groups) +
          "  " + pr.region(region, entry_args=False))


# Upstream's spelling: `(%a init: %b)` follows the op name directly.
register("stablehlo.reduce", PrettyForm(_parse_reduce, _print_reduce, has_regions=True))

# --- stablehlo.while ---------------------------------------------------------------


def _parse_while(p, name, pos):
  p.expect_punct("(")
  arg_toks, init_toks = [], []

  def item():
    arg_toks.append(p.expect_kind("percent_id", "iteration argument"))
    p.expect_punct("=")
    init_toks.append(p.expect_kind("percent_id", "SSA operand"))

  p.parse_comma_list(item, ")")
  p.expect_punct(")")
  types = []
  if arg_toks:
    p.expect_punct(":", "followed by types")
    types = p.parse_type_list()
  operands = p.resolve_values(init_toks, types)
  attrs = {}
  if p.consume_keyword("attributes"):
    attrs = dict(p.parse_attr_dict().entries)
  entry = [(tok, ty, None) for tok, ty in zip(arg_toks, types)]
  p.expect_keyword("cond")
  cond = p.parse_region(entry_args=entry)
  p.expect_keyword("do")
  body = p.parse_region(entry_args=entry)
  return pc.make_op(name, operands, types, attrs, {}, [cond, body])


def _print_while(pr, op):
  if len(op.regions) != 2 or op.operand_types != op.result_types:
    return None
  for region in op.regions:
    if len(region.blocks) != 1 or [v.type for v in region.blocks[0].arguments
                                   ] != op.operand_types:
      return None
  args = op.regions[0].blocks[0].arguments
  items = ", ".join(f"{pr.v(x)} = {pr.v(y)}" for x, y in zip(args,
                                                              op.operands))
  text = f"({items})"
  if op.operands:
    text += f" : {pr.ts(op.operand_types)}"
  d = pr.attr_dict(op)
  if d:
    text += " attributes " + d.rstrip()
  return (text + "\n" + pr.indent_str() + "cond " +
          pr.region(op.regions[0], entry_args=False) + " do " +
          pr.region(op.regions[1], entry_args=False))


register("stablehlo.while", PrettyForm(_parse_while, _print_while, has_regions=True))

# --- chlo.scan / scf.for -------------------------------------------------------------


def _parse_scan(p, name, pos):
  p.expect_punct("(")
  inputs = pc.parse_operand_toks(p)
  p.expect_punct(")")
  p.expect_keyword("inits")
  p.expect_punct("(")
  inits = pc.parse_operand_toks(p)
  p.expect_punct(")")
  p.expect_keyword("dimension")
  p.expect_punct("=")
  props = {"dimension": a.IntegerAttr(p.parse_int(), t.i64)}
  attrs = {}
  if p.consume_keyword("attributes"):
    attrs = dict(p.parse_attr_dict().entries)
  region = p.parse_region()
  operands, results = pc.parse_functional_type(p, inputs + inits)
  props["operandSegmentSizes"] = a.DenseArrayAttr(t.i32, (len(inputs),
                                                          len(inits)))
  # As upstream: one carry per init, the other results are the outputs.
  if len(results) >= len(inits):
    props["resultSegmentSizes"] = _scan_result_segments(len(results),
                                                        len(inits))
  return pc.make_op(name, operands, results, attrs, props, [region])


def _scan_result_segments(num_results: int, num_inits: int):
  return a.DenseArrayAttr(t.i32, (num_results - num_inits, num_inits))


def _print_scan(pr, op):
  seg = op.attr("operandSegmentSizes")
  dim = op.attr("dimension")
  if not (isinstance(seg, a.DenseArrayAttr) and len(seg.values) == 2 and
          sum(seg.values) == len(op.operands) and isinstance(
              dim, a.IntegerAttr) and len(op.regions) == 1):
    return None
  n = seg.values[0]
  # The pretty form cannot carry result segments other than the ones its
  # parser derives (upstream drops them); keep such ops generic.
  rseg = op.attr("resultSegmentSizes")
  num_inits = len(op.operands) - n
  if rseg is not None and (len(op.results) < num_inits or rseg != (
      _scan_result_segments(len(op.results), num_inits))):
    return None
  # Upstream's spelling: `inits (`, and two spaces after the dimension.
  text = (f"({pr.vs(op.operands[:n])}) inits ({pr.vs(op.operands[n:])}) "
          f"dimension={dim.value} ")
  d = pr.attr_dict(op, {"operandSegmentSizes", "resultSegmentSizes",
                       "dimension"})
  if d:
    text += " attributes " + d.rstrip()
  return (text + " " + pr.region(op.regions[0], entry_args=True) + " : " +
          pr.fn_type(op.operand_types, op.result_types))


register("chlo.scan", PrettyForm(_parse_scan, _print_scan, has_regions=True))


def _parse_scf_for(p, name, pos):
  iv = p.expect_kind("percent_id", "induction variable")
  p.expect_punct("=")
  bounds = [p.expect_kind("percent_id", "lower bound")]
  p.expect_keyword("to")
  bounds.append(p.expect_kind("percent_id", "upper bound"))
  p.expect_keyword("step")
  bounds.append(p.expect_kind("percent_id", "step"))
  arg_toks, init_toks = [], []
  if p.consume_keyword("iter_args"):
    p.expect_punct("(")

    def item():
      arg_toks.append(p.expect_kind("percent_id", "iteration argument"))
      p.expect_punct("=")
      init_toks.append(p.expect_kind("percent_id", "SSA operand"))

    p.parse_comma_list(item, ")")
    p.expect_punct(")")
  types = []
  if p.consume_punct("->"):
    types = p.parse_result_types()
  iv_type = t.index
  if p.consume_punct(":"):
    iv_type = p.parse_type()
  operands = p.resolve_values(bounds + init_toks, [iv_type] * 3 + types)
  region = p.parse_region(entry_args=[(iv, iv_type, None)] + [
      (tok, ty, None) for tok, ty in zip(arg_toks, types)])
  attrs = pc.parse_opt_attr_dict(p)
  return pc.make_op(name, operands, types, attrs, {}, [region])


def _print_scf_for(pr, op):
  if len(op.operands) < 3 or len(op.regions) != 1:
    return None
  region = op.regions[0]
  if len(region.blocks) != 1:
    return None
  args = region.blocks[0].arguments
  if len(args) != len(op.operands) - 2:
    return None
  lb, ub, st = op.operands[:3]
  text = f"{pr.v(args[0])} = {pr.v(lb)} to {pr.v(ub)} step {pr.v(st)}"
  if len(op.operands) > 3:
    items = ", ".join(f"{pr.v(x)} = {pr.v(y)}" for x, y in zip(
        args[1:], op.operands[3:]))
    text += f" iter_args({items}) -> ({pr.ts(op.result_types)})"
  if lb.type != t.index:
    text += f" : {pr.t(lb.type)}"
  d = pr.attr_dict(op).rstrip()
  return text + " " + pr.region(region, entry_args=False) + (
      " " + d if d else "")


register("scf.for", PrettyForm(_parse_scf_for, _print_scf_for, has_regions=True))

# --- vhlo.func_v1 ------------------------------------------------------------------


def _parse_vhlo_func(p, name, pos):
  tok = p.expect_kind("at_id", "function name")
  props = {"sym_name": a.StringAttr(attr_parser.symbol_name(tok.text))}
  p.expect_punct("(")
  args = []

  def arg():
    vtok = p.expect_kind("percent_id", "argument name")
    p.expect_punct(":")
    args.append((vtok, p.parse_type(), p.parse_optional_location()))

  p.parse_comma_list(arg, ")")
  p.expect_punct(")")
  p.expect_punct("->")
  p.expect_punct("(")
  results = p.parse_comma_list(p.parse_type, ")")
  p.expect_punct(")")
  props["function_type"] = a.TypeAttr(t.FunctionType(
      tuple(x[1] for x in args), tuple(results)))
  region = p.parse_region(entry_args=args)
  attrs = pc.parse_opt_attr_dict(p)
  return pc.make_op(name, [], [], attrs, props, [region])


def _print_vhlo_func(pr, op):
  sym, fty = op.attr("sym_name"), op.attr("function_type")
  if not (isinstance(sym, a.StringAttr) and isinstance(fty, a.TypeAttr) and
          isinstance(fty.value, t.FunctionType)) or len(op.regions) != 1:
    return None
  region = op.regions[0]
  if len(region.blocks) < 1 or [v.type for v in region.blocks[0].arguments
                                ] != list(fty.value.inputs):
    return None
  args = ", ".join(f"{pr.v(v)}: {pr.t(v.type)}"
                   for v in region.blocks[0].arguments)
  d = pr.attr_dict(op, {"sym_name", "function_type"}).rstrip()
  return (f"{pr.symbol(sym.value)}({args}) -> ({pr.ts(fty.value.results)}) " +
          pr.region(region, entry_args=False) + (" " + d if d else ""))


register("vhlo.func_v1", PrettyForm(_parse_vhlo_func, _print_vhlo_func,
                                    has_regions=True))
