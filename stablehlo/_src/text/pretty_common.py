"""Building blocks shared by the per-op pretty (custom assembly) forms.

A `PrettyForm` is one op's pair of functions:
  parse(parser, op_name, name_offset) -> Operation   (after the op name)
  print(printer, op) -> str | None                   (text after the name;
                                                      None = use generic form)
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import type_parser


@dataclasses.dataclass(frozen=True)
class PrettyForm:
  parse: Callable
  print: Callable
  doc: str = ""
  # Whether `print` handles the op's regions; ops with regions (or
  # successors) the form does not print fall back to the generic form.
  has_regions: bool = False
  # Optional fast path: fast(parser, op_name, offset after the name) ->
  # Operation, or None with nothing moved. It matches the common spelling
  # of the op's tail with one regex, taking types and attribute
  # dictionaries from the parser's caches; anything else (and every error)
  # is left to `parse`, which must give the same op.
  fast: Callable | None = None


def make_op(name, operands, result_types, attributes=None, properties=None,
            regions=(), successors=()) -> core.Operation:
  return core.Operation(name, operands, result_types, attributes or {},
                        properties or {}, regions, successors)


# --- parsing helpers -----------------------------------------------------------


# `%a, %b, %c` written plainly (one space after each comma, no comments):
# the operand lists of most ops, read with one match instead of two tokens
# per operand.
_OPERAND = r"%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?"
_OPERAND_RE = re.compile(_OPERAND)
OPERAND_LIST = _OPERAND + r"(?:, " + _OPERAND + r")*"
_OPERAND_LIST_RE = re.compile(OPERAND_LIST)


def parse_operand_toks(p, allow_empty: bool = True) -> list[lx.Token]:
  """`%a, %b, ...`; stops before a comma not followed by a value."""
  tok = p.peek()
  if tok.kind != lx.PERCENT_ID:
    if not allow_empty:
      raise p.error("expected SSA operand")
    return []
  m = _OPERAND_LIST_RE.match(p.text, tok.pos)
  end = m.end()
  if end == tok.end:
    toks = [tok]
    p.next()
  else:
    toks = [lx.Token(lx.PERCENT_ID, o.group(), o.start())
            for o in _OPERAND_RE.finditer(p.text, tok.pos, end)]
    p.lex.reset(end)
  while p.at_punct(","):
    save = p.lex.token_start()
    p.next()
    if not p.at_value():
      p.lex.reset(save)
      break
    toks.append(p.next())
  return toks


def parse_keyword_comma(p, keyword: str) -> bool:
  """Consumes `, keyword =` when it comes next; otherwise moves nothing."""
  if not p.at_punct(","):
    return False
  save = p.lex.token_start()
  p.next()
  if p.at_keyword(keyword):
    p.next()
    p.expect_punct("=", f"after '{keyword}'")
    return True
  p.lex.reset(save)
  return False


def parse_opt_attr_dict(p) -> dict:
  if p.at_punct("{"):
    return dict(p.parse_attr_dict().entries)
  return {}


def parse_i64_list(p) -> a.DenseArrayAttr:
  """`[1, 2, 3]` -> array<i64: 1, 2, 3>."""
  vals = p.parse_delimited("[", "]", p.parse_int)
  return a.DenseArrayAttr(t.i64, tuple(vals))


def parse_i64(p) -> a.IntegerAttr:
  return a.IntegerAttr(p.parse_int(), t.i64)


def enum_parser(dialect_mnemonic: str):
  def parse(p):
    tok = p.expect_kind(lx.BARE_ID, f"{dialect_mnemonic} value")
    return a.DialectAttr(dialect_mnemonic, (("value", tok.text),),
                         short_form=True)
  return parse


def parse_same_or_functional_type(p, operand_toks, num_results=1):
  """`: T` (every operand and the result are T) or `: (Ts) -> R`."""
  pos = p.lex.token_start()
  p.expect_punct(":", "followed by type")
  if p.at_punct("("):
    fn = p.parse_type()
    if not isinstance(fn, t.FunctionType):
      raise p.error("expected function type", pos)
    return p.resolve_values(operand_toks, fn.inputs), list(fn.results)
  ty = p.parse_type()
  operands = p.resolve_values(operand_toks, [ty] * len(operand_toks))
  return operands, [ty] * num_results


def parse_functional_type(p, operand_toks):
  pos = p.lex.token_start()
  p.expect_punct(":", "followed by type")
  fn = p.parse_type()
  if not isinstance(fn, t.FunctionType):
    raise p.error("expected function type", pos)
  return p.resolve_values(operand_toks, fn.inputs), list(fn.results)


# --- fast paths (PrettyForm.fast) -----------------------------------------------
#
# Each matches the tail of an op as the printer writes it (single spaces,
# no comments, tensor types without encodings) in one regex from just after
# the op name, and stops where the token path would stop; the types and
# attribute dictionaries come from the parser's caches by their text, and
# the operands from the innermost scope. Whatever one of these does not
# find (a type or dictionary not yet seen, a forward reference, `%x#1`)
# makes it return None, and the token path parses the op, reporting any
# error, and fills the caches for the next op.

_TYPE = type_parser.CACHEABLE_TYPE_TEXT
_TENSOR = TENSOR = type_parser.TENSOR_TYPE_TEXT
_FN_TYPE = type_parser.FUNCTION_TYPE_TEXT
_NO_ARROW = r"(?![ \t\r\n]*->)"
cached_type = type_parser.cached_type
cached_attr_dict = attr_parser.cached_attr_dict

# `op %a, %b : T` / `: (Ts) -> R`
_SAME_TYPE_FAST_RE = re.compile(
    r" (" + OPERAND_LIST + r") : (" + _TYPE + ")" + _NO_ARROW)
# `op %a, %b : T1, T2` (terminators)
_OPERANDS_TYPES_FAST_RE = re.compile(
    r" (" + OPERAND_LIST + r") : (" + _TENSOR + r"(?:, " + _TENSOR +
    r")*)(?![ \t\r\n]*[,\-])")
# `op @callee(%a, %b) {attrs} : (Ts) -> Rs`
_CALLEE_FAST_RE = re.compile(
    r" @([A-Za-z0-9_$.\-]+)\((" + OPERAND_LIST + r")?\)"
    r"(?: (\{[^{}\"#!/\n]*\}))? : (" + _FN_TYPE + ")" + _NO_ARROW)
# `op dense<"0x..."> : T`, `dense<[1, 2]> : T`, `dense<-1.5> : T`,
# `dense<true> : T`
_DENSE_HEX_TAIL_FAST_RE = re.compile(
    r'"> : (' + _TENSOR + ")" + _NO_ARROW)
_DENSE_JSON_FAST_RE = re.compile(
    r" dense<(\[[\[\]() ,0-9eE.+\-]*\])> : (" + _TENSOR + ")" + _NO_ARROW)
_DENSE_SCALAR_FAST_RE = re.compile(
    r" dense<(?:(-)?(?:([0-9]+\.[0-9]*(?:[eE][+\-]?[0-9]+)?)|(0x[0-9a-fA-F]+|"
    r"[0-9]+))|(true|false))> : (" + _TENSOR + ")" + _NO_ARROW)


def fast_same_type(p, name, pos):
  m = _SAME_TYPE_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  ty = cached_type(m.group(2))
  if ty is None:
    return None
  names = m.group(1).split(", ")
  if ty.__class__ is t.FunctionType:
    operands = p.fast_values(names, ty.inputs)
    results = ty.results
  else:
    operands = p.fast_values(names, [ty] * len(names))
    results = (ty,)
  if operands is None:
    return None
  p.lex.reset(m.end())
  return core.Operation(name, operands, results)


def fast_operands_types(p, name, pos):
  m = _OPERANDS_TYPES_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  types = []
  for text in m.group(2).split(", "):
    ty = cached_type(text)
    if ty is None:
      return None
    types.append(ty)
  operands = p.fast_values(m.group(1).split(", "), types)
  if operands is None:
    return None
  p.lex.reset(m.end())
  return core.Operation(name, operands)


def fast_callee(attr_name: str, as_string: bool):
  callees = {}  # callee -> its attribute (frozen, so ops share it)

  def fast(p, name, pos):
    m = _CALLEE_FAST_RE.match(p.text, pos)
    if m is None:
      return None
    fn = cached_type(m.group(4))
    if fn is None:
      return None
    attrs = None
    if m.group(3) is not None:
      d = cached_attr_dict(m.group(3))
      if d is None:
        return None
      attrs = d.entries
    ops = m.group(2)
    operands = p.fast_values(ops.split(", ") if ops else (), fn.inputs)
    if operands is None:
      return None
    p.lex.reset(m.end())
    callee = m.group(1)
    value = callees.get(callee)
    if value is None:
      value = type_parser.remember(
          callees, callee,
          a.StringAttr(callee) if as_string else a.SymbolRefAttr(callee),
          1 << 12)
    return core.Operation(name, operands, fn.results, attrs,
                          {attr_name: value})
  return fast


# Constants repeat as well (`dense<0> : tensor<i64>`, `dense<1.000000e+00>
# : tensor<f32>` in most functions): a short constant's tail is kept by its
# text as (type, array, splat), and each op gets its own copy of the array,
# as numpy arrays are mutable.
_DENSE_CACHE: dict = {}
_DENSE_CACHE_LIMIT = 1 << 12
_DENSE_CACHE_MAX_TEXT = 256
# ... and of at most this many bytes: a short splat text can stand for a
# large tensor, which is neither kept nor worth a copy per hit.
_DENSE_CACHE_MAX_BYTES = 1024


def fast_constant(p, name, pos):
  text = p.text
  if text.startswith(' dense<"0x', pos):
    # The closing quote by str.find, not by the regex running over the blob.
    end = text.find('"', pos + 10)
    if end < 0:
      return None
    m = _DENSE_HEX_TAIL_FAST_RE.match(text, end)
  elif text.startswith(" dense<[", pos):
    m = _DENSE_JSON_FAST_RE.match(text, pos)
  else:
    m = _DENSE_SCALAR_FAST_RE.match(text, pos)
  if m is None:
    return None
  stop = m.end()
  key = None
  if stop - pos <= _DENSE_CACHE_MAX_TEXT:
    key = text[pos:stop]
    hit = _DENSE_CACHE.get(key)
    if hit is not None:
      ty, array, splat = hit
      p.lex.reset(stop)
      return core.Operation(name, (), (ty,), None, {
          "value": a.DenseElementsAttr(ty, array.copy(), splat)})
  value = _fast_dense_value(p, text, pos, m)
  if value is None:
    return None
  if key is not None and value.array.nbytes <= _DENSE_CACHE_MAX_BYTES:
    type_parser.remember(_DENSE_CACHE, key, (
        value.type, value.array.copy(), value.splat), _DENSE_CACHE_LIMIT)
  p.lex.reset(stop)
  return core.Operation(name, (), (value.type,), None, {"value": value})


def _fast_dense_value(p, text, pos, m):
  """The attribute of the constant tail `m` matched (fast_constant)."""
  if text[pos + 7] == '"':
    ty = cached_type(m.group(1))
    if ty is None:
      return None
    body = text[pos + 10:m.start()]
    if "\\" in body or "\n" in body:
      return None
    try:
      blob = bytes.fromhex(body)
    except ValueError:
      return None
    return p.fast_dense(ty, hex_blob=blob)
  if text[pos + 7] == "[":
    ty = cached_type(m.group(2))
    if ty is None:
      return None
    body = m.group(1)
    values = attr_parser.load_dense_list(body)
    if values is None:
      return None
    return attr_parser.json_dense_attr(ty, values, body)
  ty = cached_type(m.group(5))
  if ty is None:
    return None
  if m.group(4) is not None:
    tok = lx.Token(lx.BARE_ID, m.group(4), m.start(4))
    return p.fast_dense(ty, literal=("bool", tok.text == "true", tok))
  if m.group(2) is not None:
    tok = lx.Token(lx.FLOAT, m.group(2), m.start(2))
  else:
    tok = lx.Token(lx.INTEGER, m.group(3), m.start(3))
  return p.fast_dense(ty, literal=("num", m.group(1) is not None, tok))


_KEYWORD_VALUE = {
    "i64list": r"\[((?:-?[0-9]+(?:, -?[0-9]+)*)?)\]",
    "i64": r"(-?[0-9]+)",
}
_ENUM_VALUE = r"([A-Za-z_][A-Za-z0-9_$.]*)"


# `op  LT, %a, %b,  SIGNED : (Ts) -> R` (compare; the type word optional)
_COMPARE_FAST_RE = re.compile(
    r" +" + _ENUM_VALUE + ", (" + OPERAND_LIST + r")(?:, +" + _ENUM_VALUE +
    r")? : (" + _FN_TYPE + ")" + _NO_ARROW)
# `op %p, %a, %b : P, T` / `: (Ts) -> R` (select)
_SELECT_FAST_RE = re.compile(
    r" (" + OPERAND_LIST + r") : (?:(" + _TENSOR + "), (" + _TENSOR +
    r")(?![ \t\r\n]*[,\-])|(" + _FN_TYPE + ")" + _NO_ARROW + ")")
# Enum attributes by (mnemonic, value): frozen, so ops share them.
_ENUM_ATTRS: dict = {}


def enum_attr(dialect_mnemonic: str, value: str) -> a.DialectAttr:
  """`#dialect<mnemonic VALUE>` as enum_parser makes it."""
  attr = _ENUM_ATTRS.get((dialect_mnemonic, value))
  if attr is None:
    attr = type_parser.remember(
        _ENUM_ATTRS, (dialect_mnemonic, value),
        a.DialectAttr(dialect_mnemonic, (("value", value),), short_form=True),
        1 << 10)
  return attr


def fast_compare(p, name, pos):
  m = _COMPARE_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  fn = cached_type(m.group(4))
  if fn is None:
    return None
  operands = p.fast_values(m.group(2).split(", "), fn.inputs)
  if operands is None:
    return None
  props = {"comparison_direction": enum_attr(
      "stablehlo.comparison_direction", m.group(1))}
  if m.group(3) is not None:
    props["compare_type"] = enum_attr("stablehlo.comparison_type",
                                      m.group(3))
  p.lex.reset(m.end())
  return core.Operation(name, operands, fn.results, None, props)


def fast_select(p, name, pos):
  m = _SELECT_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  names = m.group(1).split(", ")
  if m.group(4) is not None:
    fn = cached_type(m.group(4))
    if fn is None:
      return None
    operands = p.fast_values(names, fn.inputs)
    results = fn.results
  else:
    pred = cached_type(m.group(2))
    ty = cached_type(m.group(3))
    if pred is None or ty is None:
      return None
    operands = p.fast_values(names, (pred, ty, ty))
    results = (ty,)
  if operands is None:
    return None
  p.lex.reset(m.end())
  return core.Operation(name, operands, results)


# `op %a [0:2, 1:3:2] : (T) -> R` (slice)
_SLICE_DIM = r"-?[0-9]+:-?[0-9]+(?::-?[0-9]+)?"
_SLICE_FAST_RE = re.compile(
    r" (" + _OPERAND + r") \[((?:" + _SLICE_DIM + "(?:, " + _SLICE_DIM +
    r")*)?)\] : (" + _FN_TYPE + ")" + _NO_ARROW)


def fast_slice(p, name, pos):
  m = _SLICE_FAST_RE.match(p.text, pos)
  if m is None:
    return None
  fn = cached_type(m.group(3))
  if fn is None:
    return None
  operands = p.fast_values((m.group(1),), fn.inputs)
  if operands is None:
    return None
  starts, limits, strides = [], [], []
  if m.group(2):
    for dim in m.group(2).split(", "):
      parts = dim.split(":")
      starts.append(int(parts[0]))
      limits.append(int(parts[1]))
      strides.append(int(parts[2]) if len(parts) == 3 else 1)
  p.lex.reset(m.end())
  return core.Operation(name, operands, fn.results, None, {
      "start_indices": a.DenseArrayAttr(t.i64, tuple(starts)),
      "limit_indices": a.DenseArrayAttr(t.i64, tuple(limits)),
      "strides": a.DenseArrayAttr(t.i64, tuple(strides))})


def fast_keyword(keywords, types: str, result_only: bool):
  """The fast path of `op %a, kw = v, ... : types` (pretty_simple_ops'
  keyword_form), for i64 lists, i64s and enums, without an attr-dict."""
  parts = []
  for i, (word, _, kind) in enumerate(keywords):
    value = _ENUM_VALUE if kind.startswith("enum:") else _KEYWORD_VALUE[kind]
    parts.append((", " if i else "") + re.escape(word) + " = " + value)
  tail = "".join(parts)
  if result_only:
    # No operands: the token path rejects any.
    if not keywords:
      return None
    pattern = " ()" + tail + " : (" + _TYPE + ")"
  else:
    sep = ", " if keywords else ""
    type_text = _TYPE if types == "same" else _FN_TYPE
    pattern = " (" + OPERAND_LIST + ")" + sep + tail + " : (" + type_text + ")"
  regex = re.compile(pattern + _NO_ARROW)
  last = len(keywords) + 1

  def fast(p, name, pos):
    m = regex.match(p.text, pos)
    if m is None:
      return None
    ty = cached_type(m.group(last + 1))
    if ty is None:
      return None
    props = {}
    for i, (_, attr_name, kind) in enumerate(keywords):
      text = m.group(i + 2)
      if kind == "i64list":
        props[attr_name] = a.DenseArrayAttr(t.i64, tuple(
            int(v) for v in text.split(", ")) if text else ())
      elif kind == "i64":
        props[attr_name] = a.IntegerAttr(int(text), t.i64)
      else:
        props[attr_name] = a.DialectAttr(kind[5:], (("value", text),),
                                         short_form=True)
    if result_only:
      p.lex.reset(m.end())
      return core.Operation(name, (), (ty,), None, props)
    names = m.group(1).split(", ")
    if ty.__class__ is t.FunctionType:
      operands = p.fast_values(names, ty.inputs)
      results = ty.results
    else:  # `same` types
      operands = p.fast_values(names, [ty] * len(names))
      results = (ty,)
    if operands is None:
      return None
    p.lex.reset(m.end())
    return core.Operation(name, operands, results, None, props)

  return fast


# --- printing helpers ------------------------------------------------------------


def same_or_functional(pr, op) -> str:
  tys = op.operand_types + op.result_types
  if len(op.results) == 1 and all(ty == tys[0] for ty in tys):
    return pr.t(tys[0])
  return pr.fn_type(op.operand_types, op.result_types)


def is_i64_array(attr) -> bool:
  return isinstance(attr, a.DenseArrayAttr) and attr.element_type == t.i64


def format_i64_list(attr) -> str:
  return "[" + ", ".join(str(v) for v in attr.values) + "]"


def is_enum(attr, name: str) -> bool:
  return (isinstance(attr, a.DialectAttr) and attr.name == name and
          len(attr.params) == 1 and isinstance(attr.params[0][1], str))


def is_i64(attr) -> bool:
  return isinstance(attr, a.IntegerAttr) and attr.type == t.i64
