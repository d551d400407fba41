"""MLIR attribute parsing: builtin attributes, dense literals, dialect
attributes (`#stablehlo.gather<...>`, `#stablehlo<comparison_direction EQ>`)
and locations."""

from __future__ import annotations

import json
import math
import re

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.text import dense
from stablehlo._src.text import diagnostics
from stablehlo._src.text import dialect_attrs
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import type_parser

# dense<> values are numpy arrays; a splat of a huge tensor would not fit.
MAX_DENSE_ELEMENTS = 1 << 26
_OPAQUE_BUILTIN_ATTRS = frozenset(("affine_map", "affine_set", "strided"))
# A dense literal of plain decimal numbers, `[[1, -2], [3.5, 4.0e+00]]`, is
# JSON: json (C) reads it and numpy checks its shape and converts it, in
# place of a token per number, comma and bracket. Anything else (hex floats,
# booleans, complex pairs, `inf`) takes the token path.
_JSON_DENSE_RE = re.compile(
    r"\[[\[\]() \t\r\n,0-9eE.+\-]*\](?=[ \t\r\n]*>)")
# Complex literals, `[(1.5,-2.0), (0.0,1.0)]`, are JSON once their pairs'
# parentheses are brackets, when every parenthesis encloses a pair of plain
# numbers (the lexer's spelling: no exponent without a fraction) and no
# number stands outside one: the pairs are then the innermost lists.
_PLAIN_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][+\-]?[0-9]+)?)?"
_COMPLEX_PAIR = (r"\([ \t\r\n]*" + _PLAIN_NUMBER + r"[ \t\r\n]*,[ \t\r\n]*" +
                 _PLAIN_NUMBER + r"[ \t\r\n]*\)")
_COMPLEX_LIST_RE = re.compile(
    r"\[[\[\], \t\r\n]*(?:" + _COMPLEX_PAIR + r"[\[\], \t\r\n]*)*\]")
_PARENS_TO_BRACKETS = str.maketrans("()", "[]")
_NATIVE_INT_KINDS = frozenset("iu")
# Attribute dictionaries repeat too (`{mhlo.layout_mode = "default"}` on
# most function results). One without nested braces, aliases (`#`, `!`:
# their meaning is the module's), comments or dense elements (numpy arrays
# are not immutable) is kept by its text, as types are (type_parser).
# `#stablehlo.name<` / `#stablehlo<` with the `<` adjacent always starts a
# StableHLO attribute (never an alias; made of tuples), so those may appear.
# (Written as runs of plain characters between strings and attribute
# heads: one alternation per such item rather than one per character.)
_ATTR_DICT_RE = re.compile(
    r'\{[^{}"#!/\n]*(?:(?:"[^"\\\n]*(?:\\.[^"\\\n]*)*"|'
    r'#stablehlo(?:\.[A-Za-z_][A-Za-z0-9_]*)?<)[^{}"#!/\n]*)*\}')
_ATTR_DICT_CACHE: dict = {}
_ATTR_DICT_CACHE_LIMIT = 1 << 12
cached_attr_dict = _ATTR_DICT_CACHE.get
# What the lexer skips before a token (a match that always succeeds).
_SKIP_MATCH = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*").match
_FILE_LOC_RE = re.compile(r'^"((?:[^"\\]|\\.)*)":([0-9]+):([0-9]+)')


class AttrParser(type_parser.TypeParser):
  """Adds attributes and locations to the type parser."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.attr_aliases: dict[str, a.Attribute] = {}
    self.loc_aliases: dict[str, a.Location] = {}
    self.uses_loc_aliases = False
    self._in_attr_dict = 0

  def parse_attribute(self, type_hint: t.Type | None = None) -> a.Attribute:
    self.enter()
    try:
      return self._parse_attribute()
    finally:
      self.leave()

  def _parse_attribute(self) -> a.Attribute:
    tok = self.peek()
    kind = tok.kind
    if kind == lx.BARE_ID:
      name = tok.text
      if name == "unit":
        self.next()
        return a.UnitAttr()
      if name in ("true", "false"):
        self.next()
        return a.BoolAttr(name == "true")
      if name == "dense":
        self.next()
        return self._parse_dense(tok.pos)
      if name == "dense_resource":
        self.next()
        self.expect_punct("<", "in dense_resource")
        key_tok = self.next()
        if key_tok.kind not in (lx.BARE_ID, lx.STRING):
          raise self.error("expected resource handle", key_tok.pos)
        self.expect_punct(">", "in dense_resource")
        self.expect_punct(":", "after dense_resource")
        return a.DenseResourceAttr(self.parse_type(), key_tok.text)
      if name == "array":
        self.next()
        return self._parse_dense_array()
      if name in _OPAQUE_BUILTIN_ATTRS:
        self.next()
        if not self.at_punct("<"):
          raise self.error(f"expected '<' after '{name}'")
        start = self.lex.token_start()
        end = self.lex.skip_balanced(start)
        self.lex.reset(end)
        return a.OpaqueAttr(name + self.text[start:end])
      if self.at_type():
        return a.TypeAttr(self.parse_type())
      raise self.error(f"unknown attribute '{name}'", tok.pos)
    if kind in (lx.INTEGER, lx.FLOAT) or (kind == lx.PUNCT and tok.text == "-"):
      return self._parse_number_attr()
    if kind == lx.STRING:
      value = self.parse_string()
      if self.at_punct(":") and self._typed_string_follows():
        self.next()
        return a.StringAttr(value, self.parse_type())
      return a.StringAttr(value)
    if kind == lx.PUNCT:
      if tok.text == "[":
        self.next()
        elems = self.parse_comma_list(self.parse_attribute, "]")
        self.expect_punct("]", "in array attribute")
        return a.ArrayAttr(tuple(elems))
      if tok.text == "{":
        return self.parse_attr_dict()
      if tok.text == "(":
        return a.TypeAttr(self.parse_type())
    if kind == lx.AT_ID:
      return self.parse_symbol_ref()
    if kind == lx.HASH_ID:
      return self._parse_hash_attr()
    if kind == lx.BANG_ID:
      return a.TypeAttr(self.parse_type())
    raise self.error("expected attribute value", tok.pos)

  def _typed_string_follows(self) -> bool:
    """After a string: is `: type` a type annotation (not a dict's next
    `key:` nor a trailing op type)? Only inside attribute dictionaries."""
    return self._in_attr_dict > 0

  def parse_symbol_ref(self) -> a.SymbolRefAttr:
    tok = self.expect_kind(lx.AT_ID, "symbol reference")
    root = symbol_name(tok.text)
    nested = []
    while self.at_punct("::"):
      self.next()
      nested.append(symbol_name(self.expect_kind(lx.AT_ID, "symbol").text))
    return a.SymbolRefAttr(root, tuple(nested))

  def _parse_number_attr(self) -> a.Attribute:
    start = self.peek()
    neg = self.consume_punct("-")
    tok = self.next()
    if tok.kind not in (lx.INTEGER, lx.FLOAT):
      raise self.error("expected integer or float literal", tok.pos)
    ty = None
    if self.consume_punct(":"):
      ty = self.parse_type()
    if tok.kind == lx.FLOAT or isinstance(ty, t.FloatType):
      ty = ty or t.f64
      if not isinstance(ty, t.FloatType):
        raise self.error("floating point value not valid for specified type",
                         start.pos)
      if tok.text.startswith("0x"):
        value = float(dense.float_from_bits(int(tok.text, 16), ty))
        if neg:
          raise self.error("hexadecimal float literal should not have a "
                           "leading minus sign", start.pos)
      else:
        value = float(tok.text)
        if neg:
          value = -value
      return a.FloatAttr(value, ty)
    value = lx.int_value(tok.text)
    if neg:
      value = -value
    ty = ty or t.i64
    if isinstance(ty, t.IntegerType):
      lo, hi = dense.int_range(ty)
      if not lo <= value <= hi:
        raise self.error("integer constant out of range for attribute",
                         tok.pos)
    elif not isinstance(ty, t.IndexType):
      raise self.error("integer literal not valid for specified type",
                       start.pos)
    return a.IntegerAttr(value, ty)

  def parse_attr_dict(self) -> a.DictionaryAttr:
    lex = self.lex
    tok = lex.peek()
    m = _ATTR_DICT_RE.match(self.text, tok.pos)
    if m is None or "dense" in m.group():
      return self._parse_attr_dict()
    key = m.group()
    attr = _ATTR_DICT_CACHE.get(key)
    if attr is None:
      return type_parser.remember(_ATTR_DICT_CACHE, key,
                                  self._parse_attr_dict(),
                                  _ATTR_DICT_CACHE_LIMIT)
    lex.reset(m.end())
    return attr

  def _parse_attr_dict(self) -> a.DictionaryAttr:
    self.expect_punct("{")
    self._in_attr_dict += 1
    try:
      entries = self.parse_comma_list(self._parse_attr_entry, "}")
    finally:
      self._in_attr_dict -= 1
    self.expect_punct("}", "in attribute dictionary")
    seen = set()
    for k, _ in entries:
      if k in seen:
        raise self.error(f"duplicate key '{k}' in dictionary attribute")
      seen.add(k)
    return a.DictionaryAttr(tuple(entries))

  def _parse_attr_entry(self):
    tok = self.next()
    if tok.kind == lx.BARE_ID:
      key = tok.text
    elif tok.kind == lx.STRING:
      key = lx.unescape_string(tok.text[1:-1])
    else:
      raise self.error("expected attribute name", tok.pos)
    if self.consume_punct("="):
      return key, self.parse_attribute()
    return key, a.UnitAttr()

  def _parse_dense_array(self) -> a.DenseArrayAttr:
    self.expect_punct("<", "in array attribute")
    et = self.parse_type()
    values = []
    if self.consume_punct(":"):
      values = self.parse_comma_list(lambda: self._array_elem(et))
    self.expect_punct(">", "in array attribute")
    return a.DenseArrayAttr(et, tuple(values))

  def _array_elem(self, et: t.Type):
    tok = self.peek()
    if isinstance(et, t.IntegerType) and et.width == 1 and tok.kind == lx.BARE_ID:
      if tok.text in ("true", "false"):
        self.next()
        return tok.text == "true"
    if isinstance(et, t.IntegerType):
      v = self.parse_int("integer array element")
      lo, hi = dense.int_range(et)
      if not lo <= v <= hi:
        raise self.error("integer value out of range", tok.pos)
      return bool(v) if et.width == 1 else v
    if isinstance(et, t.FloatType):
      return self.parse_number_value("float array element")
    raise self.error("expected integer or float element type in array",
                     tok.pos)

  # --- dense elements --------------------------------------------------------

  def _parse_dense(self, pos: int) -> a.DenseElementsAttr:
    self.expect_punct("<", "in dense attribute")
    literal = None
    hex_blob = None
    lex = self.lex
    text = self.text
    start = lex.pos
    if lex.peeked is None and text.startswith('"0x', start):
      # `<"0x...">` right after the `<`: find the closing quote with
      # str.find rather than scanning the blob with the token regex.
      end = text.find('"', start + 1)
      body = text[start + 3:end] if end > 0 else "\\"
      if "\\" not in body and "\n" not in body:
        try:
          hex_blob = bytes.fromhex(body)
        except ValueError:
          raise self.error("malformed hex blob in dense attribute", start)
        lex.reset(end + 1)
    if hex_blob is not None:
      pass
    elif self.at_punct(">"):
      literal = []
    elif self.peek().kind == lx.STRING:
      tok = self.next()
      body = tok.text[1:-1]
      if not body.startswith("0x"):
        raise self.error("string dense elements are not supported", tok.pos)
      try:
        hex_blob = bytes.fromhex(body[2:])
      except ValueError:
        raise self.error("malformed hex blob in dense attribute", tok.pos)
    else:
      tok = self.peek()
      if tok.text == "[" and tok.kind == lx.PUNCT:
        attr = self._parse_json_dense(tok.pos)
        if attr is not None:
          return attr
      literal = self._parse_dense_literal()
    self.expect_punct(">", "in dense attribute")
    tpos = self.lex.token_start()
    self.expect_punct(":", "after dense attribute")
    ty = self.parse_type()
    if not isinstance(ty, t.RankedTensorType) or not ty.has_static_shape:
      raise self.error("dense attribute needs a statically shaped tensor "
                       "type", tpos)
    et = ty.element_type
    if math.prod(ty.shape) > MAX_DENSE_ELEMENTS:
      raise self.error(f"dense attribute has too many elements to "
                       f"materialize (limit {MAX_DENSE_ELEMENTS})", tpos)
    dtype = dense.numpy_dtype(et)
    if dtype is None:
      raise self.error(f"unsupported dense element type", tpos)
    if hex_blob is not None:
      return self.dense_from_hex(ty, hex_blob, dtype, tpos)
    return self._build_dense(ty, dtype, literal, tpos)

  def fast_dense(self, ty, hex_blob=None, literal=None):
    """The `dense<...> : ty` attribute of a hex blob or a scalar literal
    leaf (as `_parse_dense_scalar` makes) that an op fast path read; None
    where the token path would raise (it then reports the error)."""
    if (ty.__class__ is not t.RankedTensorType or not ty.has_static_shape or
        math.prod(ty.shape) > MAX_DENSE_ELEMENTS):
      return None
    dtype = dense.numpy_dtype(ty.element_type)
    if dtype is None:
      return None
    try:
      if hex_blob is not None:
        return self.dense_from_hex(ty, hex_blob, dtype, 0)
      return self._build_dense(ty, dtype, literal, 0)
    except diagnostics.ParseError:
      return None

  def dense_from_hex(self, ty, hex_blob: bytes, dtype, tpos: int
                     ) -> a.DenseElementsAttr:
    arr = dense.decode_hex_blob(hex_blob, ty.element_type, ty.shape)
    if arr is None:
      raise self.error("hex blob size does not match the tensor type", tpos)
    return a.DenseElementsAttr(ty, arr, splat=arr.size > 1 and len(
        hex_blob) == dtype.itemsize)

  def _parse_json_dense(self, start: int):
    """The dense attribute whose literal starts at `start` (a `[`), read as
    JSON; None (the lexer back at `start`) when that literal or its type is
    not one this path handles exactly as the token path would."""
    m = _JSON_DENSE_RE.match(self.text, start)
    if m is None:
      return None
    body = m.group()
    values = load_dense_list(body)
    if values is None:
      return None
    self.lex.reset(m.end())
    self.expect_punct(">", "in dense attribute")
    self.expect_punct(":", "after dense attribute")
    attr = json_dense_attr(self.parse_type(), values, body)
    if attr is None:
      self.lex.reset(start)
    return attr


  def _parse_dense_literal(self):
    """Nested lists of ('tok', Token) / ('cplx', tok, tok) leaves."""
    self.enter()
    try:
      if self.consume_punct("["):
        items = self.parse_comma_list(self._parse_dense_literal, "]")
        self.expect_punct("]", "in dense literal")
        return items
      return self._parse_dense_scalar()
    finally:
      self.leave()

  def _parse_dense_scalar(self):
    if self.consume_punct("("):
      re_ = self._parse_dense_scalar()
      self.expect_punct(",", "in complex literal")
      im = self._parse_dense_scalar()
      self.expect_punct(")", "in complex literal")
      return ("cplx", re_, im)
    start = self.lex.token_start()
    neg = self.consume_punct("-")
    tok = self.next()
    if tok.kind in (lx.INTEGER, lx.FLOAT):
      return ("num", neg, tok)
    if tok.kind == lx.BARE_ID and tok.text in ("true", "false") and not neg:
      return ("bool", tok.text == "true", tok)
    raise self.error("expected element literal of primitive type", start)

  def _build_dense(self, ty, dtype, literal, tpos):
    shape = ty.shape
    if isinstance(literal, tuple):  # a splat scalar
      value = _to_array([self._convert_scalar(literal, ty.element_type)],
                        dtype)
      arr = np.repeat(value, math.prod(shape)).reshape(shape)
      return a.DenseElementsAttr(ty, arr, splat=True)
    flat = []
    lit_shape = self._flatten(literal, flat, 0, tpos)
    if tuple(lit_shape) != tuple(shape):
      if flat or int(np.prod(shape)) != 0:
        raise self.error(
            f"inferred shape of elements literal ([{', '.join(map(str, lit_shape))}])"
            f" does not match type ([{', '.join(map(str, shape))}])", tpos)
    et = ty.element_type
    arr = _to_array([self._convert_scalar(leaf, et) for leaf in flat], dtype)
    return a.DenseElementsAttr(ty, arr.reshape(shape))

  def _flatten(self, lit, out, depth, tpos):
    if isinstance(lit, tuple):
      out.append(lit)
      return []
    shape = [len(lit)]
    sub = None
    for item in lit:
      s = self._flatten(item, out, depth + 1, tpos)
      if sub is None:
        sub = s
      elif s != sub:
        raise self.error("tensor literal is invalid; ranks are not "
                         "consistent between elements", tpos)
    return shape + (sub or [])

  def _convert_scalar(self, leaf, et):
    et = dense.storage_type(et)
    if leaf[0] == "cplx":
      if not isinstance(et, t.ComplexType):
        raise self.error("complex literal for a non-complex element type",
                         leaf[1][2].pos if leaf[1][0] != "cplx" else None)
      inner = et.element_type
      return complex(self._convert_scalar(leaf[1], inner),
                     self._convert_scalar(leaf[2], inner))
    if isinstance(et, t.ComplexType):
      raise self.error("expected complex element literal (re, im)",
                       leaf[-1].pos)
    if leaf[0] == "bool":
      if isinstance(et, t.IntegerType) and et.width == 1:
        return leaf[1]
      raise self.error("expected integer or float elements, but parsed "
                       "boolean", leaf[2].pos)
    _, neg, tok = leaf
    if isinstance(et, t.FloatType):
      if tok.text.startswith("0x"):
        if neg:
          raise self.error("hexadecimal float literal should not have a "
                           "leading minus sign", tok.pos)
        bits = int(tok.text, 16)
        if bits >> dense.float_bits(et.name):
          raise self.error("hexadecimal float constant out of range for type",
                           tok.pos)
        return dense.float_from_bits(bits, et)
      v = float(tok.text) if tok.kind == lx.FLOAT else float(int(tok.text))
      return -v if neg else v
    if tok.kind == lx.FLOAT:
      raise self.error("expected integer elements, but parsed floating-point",
                       tok.pos)
    v = lx.int_value(tok.text)
    if neg:
      v = -v
    if isinstance(et, t.IntegerType):
      lo, hi = dense.int_range(et)
      if not lo <= v <= hi:
        raise self.error("integer constant out of range for type", tok.pos)
      if et.width == 1:
        return bool(v)
      return dense.wrap_int(v, et)
    return v

  # --- dialect attributes ----------------------------------------------------

  def _parse_hash_attr(self) -> a.Attribute:
    tok = self.next()
    name = tok.text[1:]
    adjacent = self.at_punct("<") and self.lex.token_start() == tok.end
    if not adjacent:
      if name in self.attr_aliases:
        return self.attr_aliases[name]
      if "." in name:
        return a.DialectAttr(name)
      raise self.error(f"undefined symbol alias id '{name}'", tok.pos)
    return dialect_attrs.parse_dialect_attr(self, name, tok)

  # --- locations ---------------------------------------------------------------

  def parse_optional_location(self) -> a.Location | None:
    lex = self.lex
    if lex.peeked is None:
      # Most ops have no loc(...): tell by a match, leaving the next token
      # to be read by whoever needs it.
      text = self.text
      if not text.startswith("loc", _SKIP_MATCH(text, lex.pos).end()):
        return None
    if not self.at_keyword("loc"):
      return None
    tok = self.next()
    if not self.at_punct("("):
      raise self.error("expected '(' in location", tok.end)
    start = self.lex.token_start()
    end = self.lex.skip_balanced(start)
    self.lex.reset(end)
    return self.make_location(self.text[start + 1:end - 1].strip(), start)

  def make_location(self, body: str, pos: int) -> a.Location:
    if body == "unknown":
      return a.Location("unknown", text=body)
    m = _FILE_LOC_RE.match(body)
    if m is not None:
      return a.Location("file", lx.unescape_string(m.group(1)),
                        int(m.group(2)), int(m.group(3)), text=body)
    if body.startswith("#"):
      self.uses_loc_aliases = True
      return a.Location("alias", text=body)
    if body.startswith("callsite("):
      return a.Location("callsite", text=body)
    if body.startswith("fused"):
      return a.Location("fused", text=body)
    if body.startswith('"'):
      return a.Location("name", text=body)
    raise self.error("expected location instance", pos + 1)


def _to_array(values, dtype) -> np.ndarray:
  """Converts parsed scalars to `dtype`. Python floats go through float64
  (one rounding step); numpy scalars (exact bit patterns) are kept."""
  if dtype.kind in "biuc":
    return np.array(values, dtype=dtype)
  arr = np.array([float(v) if not isinstance(v, np.generic) else 0.0
                  for v in values], dtype=np.float64).astype(dtype)
  for i, v in enumerate(values):
    if isinstance(v, np.generic):
      arr[i] = v
  return arr


def symbol_name(text: str) -> str:
  """The symbol of an `@name` / `@"name"` token."""
  body = text[1:]
  if body.startswith('"'):
    return lx.unescape_string(body[1:-1])
  return body


def load_dense_list(body: str):
  """The nested lists json reads from the dense literal `body` (complex
  pairs as two-element lists); None where json cannot read it, or where it
  has parentheses that are not all pairs of plain numbers."""
  if "(" in body:
    if _COMPLEX_LIST_RE.fullmatch(body) is None:
      return None
    body = body.translate(_PARENS_TO_BRACKETS)
  try:
    return json.loads(body)
  except ValueError:
    return None


def json_dense_attr(ty, values, body: str):
  """The dense attribute of type `ty` whose literal `body` (plain decimal
  numbers or complex pairs of them in nested lists) load_dense_list read as
  `values`; None where that type or literal is not one this path handles
  exactly as the token path would."""
  arr = None
  if isinstance(ty, t.RankedTensorType):
    et = dense.storage_type(ty.element_type)
    dtype = dense.numpy_dtype(et)
    try:
      if "(" in body:
        # Pairs: (re, im) as two float64s, each rounded to the element
        # type's parts as the token path's complex() values are.
        if isinstance(et, t.ComplexType) and dtype is not None:
          pairs = np.array(values, dtype=np.float64)
          if pairs.size and pairs.shape == tuple(ty.shape) + (2,):
            return a.DenseElementsAttr(ty, pairs.view(np.complex128).reshape(
                ty.shape).astype(dtype))
        return None
      if isinstance(et, t.FloatType) and dtype is not None:
        arr = np.array(values, dtype=np.float64)
      elif (isinstance(et, t.IntegerType) and et.width >= 8 and
            dtype is not None and dtype.kind in _NATIVE_INT_KINDS and
            "." not in body and "e" not in body and "E" not in body):
        arr = np.array(values, dtype=np.int64)
        if et.width < 64 and arr.size:
          lo, hi = dense.int_range(et)
          if int(arr.min()) < lo or int(arr.max()) > hi:
            arr = None  # the token path names the offending element
    except (ValueError, TypeError, OverflowError):
      arr = None
  if arr is not None and arr.size and arr.shape == tuple(ty.shape):
    return a.DenseElementsAttr(ty, arr.astype(dtype))
  return None
