"""Dialect attributes `#dialect.mnemonic<...>` / `#dialect<mnemonic VALUE>`.

Structured bodies (`key = value, ...`, a single enum value, the compact
convolution dimension numbers) become `DialectAttr`s with their fields in
`params`; anything else is kept verbatim as an `OpaqueAttr`.

Param values: int, float, bool, None (`?`), str (an identifier such as an
enum case), tuple (a `[...]` list), a Type, or an Attribute (nested `#...`
attribute or a quoted string as `StringAttr`).
"""

from __future__ import annotations

import re

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.text import diagnostics
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import sdy_attrs

_ENUM_BODY_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*)\s+([A-Za-z_][A-Za-z0-9_]*)\s*$")
CONV_NAMES = frozenset(("stablehlo.conv",))
_BOUNDS_NAMES = frozenset(("stablehlo.bounds",))

# The fields of convolution dimension numbers, in the order MLIR keeps them.
CONV_FIELDS = (
    "input_batch_dimension", "input_feature_dimension",
    "input_spatial_dimensions", "kernel_input_feature_dimension",
    "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension", "output_feature_dimension",
    "output_spatial_dimensions",
)


def parse_dialect_attr(p, name: str, tok: lx.Token) -> a.Attribute:
  """Parses the `<...>` body after `#name` (the lexer is at the `<`)."""
  if name == sdy.DIALECT or name.startswith("sdy."):
    return sdy_attrs.parse_dialect_attr(p, name, tok)
  start = p.lex.token_start()
  end = p.lex.skip_balanced(start)
  body = p.text[start + 1:end - 1]
  if "." not in name:
    m = _ENUM_BODY_RE.match(body)
    p.lex.reset(end)
    if m is not None:
      return a.DialectAttr(f"{name}.{m.group(1)}", (("value", m.group(2)),),
                           short_form=True)
    return a.OpaqueAttr(f"#{name}<{body}>")
  p.expect_punct("<")
  try:
    if name in CONV_NAMES:
      params = parse_conv_dims(p)
    elif name in _BOUNDS_NAMES:
      params = (("bounds", tuple(p.parse_comma_list(
          lambda: _parse_value(p), ">"))),)
    else:
      params = _parse_params(p)
    if p.lex.token_start() != end - 1:
      raise p.error("expected '>'")
    p.expect_punct(">")
  except diagnostics.ParseError:
    p.lex.reset(end)
    return a.OpaqueAttr(f"#{name}<{body}>")
  return a.DialectAttr(name, params)


def _parse_params(p) -> tuple:
  tok = p.peek()
  if tok.kind == lx.BARE_ID:
    p.next()
    if p.at_punct(">"):
      return (("value", tok.text),)
    p.lex.reset(tok.pos)
  if p.at_punct(">"):
    return ()

  def entry():
    key = p.expect_bare_id("parameter name")
    p.expect_punct("=")
    return key, _parse_value(p)

  return tuple(p.parse_comma_list(entry))


def _parse_value(p):
  p.enter()
  try:
    tok = p.peek()
    if tok.kind == lx.PUNCT:
      if tok.text == "[":
        p.next()
        items = p.parse_comma_list(lambda: _parse_value(p), "]")
        p.expect_punct("]")
        return tuple(items)
      if tok.text == "?":
        p.next()
        return None
      if tok.text == "-":
        return _number(p)
    if tok.kind in (lx.INTEGER, lx.FLOAT):
      return _number(p)
    if tok.kind == lx.BARE_ID:
      if tok.text in ("true", "false"):
        p.next()
        return tok.text == "true"
      if p.at_type():
        return p.parse_type()
      p.next()
      return tok.text
    if tok.kind == lx.BANG_ID:
      return p.parse_type()
    return p.parse_attribute()
  finally:
    p.leave()


def _number(p):
  neg = p.consume_punct("-")
  tok = p.next()
  if tok.kind == lx.INTEGER:
    v = lx.int_value(tok.text)
  elif tok.kind == lx.FLOAT:
    v = float(tok.text)
  else:
    raise p.error("expected number", tok.pos)
  return -v if neg else v


# --- convolution dimension numbers -------------------------------------------


def parse_conv_dims(p) -> tuple:
  """`[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` (or the `raw k = v` form)."""
  if p.consume_keyword("raw"):
    return _parse_params(p)
  pos = p.lex.token_start()
  lhs = _conv_dim_list(p)
  if not p.consume_keyword("x"):
    raise p.error("expected 'x' in convolution dimension numbers")
  rhs = _conv_dim_list(p)
  p.expect_punct("->", "in convolution dimension numbers")
  out = _conv_dim_list(p)
  try:
    ib, ifeat, isp = _conv_roles(lhs, ("b", "f"))
    ki, ko, ksp = _conv_roles(rhs, ("i", "o"))
    ob, of, osp = _conv_roles(out, ("b", "f"))
  except ValueError as e:
    raise p.error(str(e), pos)
  return (("input_batch_dimension", ib), ("input_feature_dimension", ifeat),
          ("input_spatial_dimensions", isp),
          ("kernel_input_feature_dimension", ki),
          ("kernel_output_feature_dimension", ko),
          ("kernel_spatial_dimensions", ksp),
          ("output_batch_dimension", ob), ("output_feature_dimension", of),
          ("output_spatial_dimensions", osp))


def _conv_dim_list(p) -> list:
  p.expect_punct("[", "in convolution dimension numbers")

  def item():
    tok = p.next()
    if tok.kind == lx.INTEGER and not tok.text.startswith("0x"):
      return int(tok.text)
    if tok.kind == lx.BARE_ID and tok.text in ("b", "f", "i", "o"):
      return tok.text
    raise p.error("expected convolution dimension (b, f, i, o or a number)",
                  tok.pos)

  items = p.parse_comma_list(item, "]")
  p.expect_punct("]", "in convolution dimension numbers")
  return items


def _conv_roles(items, letters):
  found = {}
  spatial = {}
  for pos, item in enumerate(items):
    if isinstance(item, int):
      if item in spatial:
        raise ValueError(f"duplicate spatial dimension {item}")
      spatial[item] = pos
    elif item in letters and item not in found:
      found[item] = pos
    else:
      raise ValueError(f"unexpected or duplicate dimension '{item}'")
  for letter in letters:
    if letter not in found:
      raise ValueError(f"missing dimension '{letter}'")
  if sorted(spatial) != list(range(len(spatial))):
    raise ValueError("spatial dimensions must be 0..N-1")
  return (found[letters[0]], found[letters[1]],
          tuple(spatial[i] for i in range(len(spatial))))


def format_conv_dims(attr: a.DialectAttr) -> str | None:
  """The compact spelling, or None when the fields don't describe one."""
  try:
    d = dict(attr.params)
    ib, ifeat = d["input_batch_dimension"], d["input_feature_dimension"]
    isp = tuple(d["input_spatial_dimensions"])
    ki = d["kernel_input_feature_dimension"]
    ko = d["kernel_output_feature_dimension"]
    ksp = tuple(d["kernel_spatial_dimensions"])
    ob, of = d["output_batch_dimension"], d["output_feature_dimension"]
    osp = tuple(d["output_spatial_dimensions"])
    parts = [_roles_to_list(ib, "b", ifeat, "f", isp),
             _roles_to_list(ki, "i", ko, "o", ksp),
             _roles_to_list(ob, "b", of, "f", osp)]
  except (KeyError, TypeError, ValueError, IndexError):
    return None
  return "{}x{}->{}".format(*parts)


def _roles_to_list(d0, l0, d1, l1, spatial) -> str:
  n = 2 + len(spatial)
  slots = [None] * n
  for dim, label in ((d0, l0), (d1, l1)):
    slots[dim] = label
  for i, dim in enumerate(spatial):
    if slots[dim] is not None:
      raise ValueError("overlapping dimensions")
    slots[dim] = str(i)
  if any(s is None for s in slots):
    raise ValueError("incomplete dimensions")
  return "[" + ", ".join(slots) + "]"


# --- printing ------------------------------------------------------------------


def format_dialect_attr(attr: a.DialectAttr, fmt_type, fmt_attr,
                        fmt_float) -> str:
  name = attr.name
  params = attr.params
  if attr.short_form and len(params) == 1:
    dialect, _, mnemonic = name.partition(".")
    return f"#{dialect}<{mnemonic} {params[0][1]}>"
  if name in CONV_NAMES:
    compact = format_conv_dims(attr)
    if compact is not None:
      return f"#{name}<{compact}>"
  if name in _BOUNDS_NAMES and len(params) == 1:
    return f"#{name}<" + ", ".join(
        format_value(v, fmt_type, fmt_attr, fmt_float)
        for v in params[0][1]) + ">"
  if not params:
    return f"#{name}"
  if len(params) == 1 and params[0][0] == "value" and isinstance(
      params[0][1], str):
    return f"#{name}<{params[0][1]}>"
  body = ", ".join(f"{k} = {format_value(v, fmt_type, fmt_attr, fmt_float)}"
                   for k, v in params)
  return f"#{name}<{body}>"


def format_value(v, fmt_type, fmt_attr, fmt_float) -> str:
  if v is None:
    return "?"
  if isinstance(v, bool):
    return "true" if v else "false"
  if isinstance(v, int):
    return str(v)
  if isinstance(v, float):
    return fmt_float(v)
  if isinstance(v, str):
    return v
  if isinstance(v, (tuple, list)):
    return "[" + ", ".join(format_value(x, fmt_type, fmt_attr, fmt_float)
                           for x in v) + "]"
  if isinstance(v, t.Type):
    return fmt_type(v)
  return fmt_attr(v)
