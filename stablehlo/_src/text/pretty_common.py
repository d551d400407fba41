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
from stablehlo._src.text import lexer as lx


@dataclasses.dataclass(frozen=True)
class PrettyForm:
  parse: Callable
  print: Callable
  doc: str = ""
  # Whether `print` handles the op's regions; ops with regions (or
  # successors) the form does not print fall back to the generic form.
  has_regions: bool = False


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
_OPERAND_LIST_RE = re.compile(_OPERAND + r"(?:, " + _OPERAND + r")*")


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
