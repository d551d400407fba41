"""Token-level parser helpers and MLIR type parsing.

`TypeParser` is the base of the attribute and operation parsers: it owns the
lexer, the error helpers (every error is a positioned `ParseError`) and the
type grammar (builtin types, `!quant.uniform`, `!stablehlo.token`, aliases).
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from stablehlo._src.ir import types as t
from stablehlo._src.text import diagnostics
from stablehlo._src.text import lexer as lx

# Guards against deep nesting (types, attributes, regions) blowing the stack.
MAX_NESTING = 128

_DIMS_RE = re.compile(r"(?:(?:\?|[0-9]+)x)*")
_INT_TYPE_RE = re.compile(r"(si|ui|i)([0-9]+)$")
_FLOAT_NAMES = frozenset(t.FLOAT_TYPES)
_OPAQUE_BUILTIN_TYPES = frozenset(("memref", "vector"))

# Types repeat: a module names the same few tensor types on most of its ops.
# The text of a tensor type without an encoding, or of a function type made
# of them, matches one of these patterns; the type parsed from such a text
# is kept in _TYPE_CACHE under it, so the next occurrence is one regex
# match and one dict lookup instead of a token per `<`, dims, `x`, `>`.
# Types are immutable, so parses share them.
_TENSOR_TEXT = (r"tensor<(?:[0-9]+x|\?x)*(?:complex<[A-Za-z][A-Za-z0-9]*>|"
                r"[A-Za-z][A-Za-z0-9]*)>")
_TENSOR_LIST = r"\((?:" + _TENSOR_TEXT + r"(?:, " + _TENSOR_TEXT + r")*)?\)"
# Tensors of `!quant.uniform<...>` elements are kept by their text too (in
# parse_type only: the op fast paths leave such ops to the token path).
# Their meaning depends on the module only where it defines a type alias
# named `quant.uniform`, so a parser with type aliases does not use the
# cache for a text with `!` in it.
_QUANT_TEXT = (r"!quant\.uniform<[^<>{}\n]*(?:(?:<[^<>\n]*>|\{[^{}<>\n]*\})"
               r"[^<>{}\n]*)*>")
_ANY_TENSOR_TEXT = (r"tensor<(?:[0-9]+x|\?x)*(?:complex<[A-Za-z][A-Za-z0-9]*>|"
                    r"[A-Za-z][A-Za-z0-9]*|" + _QUANT_TEXT + ")>")
_ANY_TENSOR_LIST = (r"\((?:" + _ANY_TENSOR_TEXT + r"(?:, " + _ANY_TENSOR_TEXT +
                    r")*)?\)")
_CACHED_TYPE_RE = re.compile(
    r"[ \t\r\n]*(" + _ANY_TENSOR_TEXT + "|" + _ANY_TENSOR_LIST + " -> (?:" +
    _ANY_TENSOR_TEXT + "|" + _ANY_TENSOR_LIST + r")(?![ \t\r\n]*->))")
_TYPE_CACHE: dict[str, t.Type] = {}
_TYPE_CACHE_LIMIT = 1 << 14
# The text of a type that may be in the cache (no groups): for the op fast
# paths (pretty_common), which match a whole op tail at once and take its
# types from the cache, leaving the token path to types not seen before.
CACHEABLE_TYPE_TEXT = (_TENSOR_TEXT + "|" + _TENSOR_LIST + " -> (?:" +
                       _TENSOR_TEXT + "|" + _TENSOR_LIST + ")")
TENSOR_TYPE_TEXT = _TENSOR_TEXT
FUNCTION_TYPE_TEXT = (_TENSOR_LIST + " -> (?:" + _TENSOR_TEXT + "|" +
                      _TENSOR_LIST + ")")
cached_type = _TYPE_CACHE.get


def remember(cache: dict, key, value, limit: int):
  """Adds an entry to one of the text parser's caches of values by their
  source text, which are emptied when they reach `limit` entries; returns
  `value`."""
  if len(cache) >= limit:
    cache.clear()
  cache[key] = value
  return value


class TypeParser:
  """Base parser: token helpers plus types."""

  def __init__(self, text: str, filename: str = "<string>",
               line_offset: int = 0):
    self.source = diagnostics.SourceMap(text, filename, line_offset)
    self.lex = lx.Lexer(text, self.source)
    self.text = text
    self.type_aliases: dict[str, t.Type] = {}
    self._depth = 0

  # --- errors and tokens -----------------------------------------------------

  def error(self, what: str, pos: Optional[int] = None
            ) -> diagnostics.ParseError:
    if pos is None:
      pos = self.lex.token_start()
    return self.source.error(pos, what)

  # The token helpers below run for nearly every token: they read the
  # lexer's peeked token directly and call peek() only when there is none.
  # A punctuation text is never the text of a token of another kind, so
  # comparing texts is enough to test for one.

  def peek(self) -> lx.Token:
    return self.lex.peek()

  def next(self) -> lx.Token:
    return self.lex.next()

  def at_punct(self, p: str) -> bool:
    lex = self.lex
    tok = lex.peeked
    if tok is None:
      tok = lex.peek()
    return tok.text == p

  def at_keyword(self, kw: str) -> bool:
    lex = self.lex
    tok = lex.peeked
    if tok is None:
      tok = lex.peek()
    return tok.text == kw and tok.kind == lx.BARE_ID

  def consume_punct(self, p: str) -> bool:
    lex = self.lex
    tok = lex.peeked
    if tok is None:
      tok = lex.peek()
    if tok.text == p:
      lex.peeked = None
      return True
    return False

  def consume_keyword(self, kw: str) -> bool:
    if self.at_keyword(kw):
      self.lex.next()
      return True
    return False

  def expect_punct(self, p: str, context: str = "") -> lx.Token:
    lex = self.lex
    tok = lex.peeked
    if tok is None:
      tok = lex.peek()
    if tok.text == p:
      lex.peeked = None
      return tok
    where = f" {context}" if context else ""
    raise self.error(f"expected '{p}'{where}", tok.pos)

  def expect_keyword(self, kw: str, context: str = "") -> lx.Token:
    tok = self.lex.peek()
    if tok.kind == lx.BARE_ID and tok.text == kw:
      return self.lex.next()
    where = f" {context}" if context else ""
    raise self.error(f"expected '{kw}'{where}", tok.pos)

  def expect_kind(self, kind: str, what: str) -> lx.Token:
    lex = self.lex
    tok = lex.peeked
    if tok is None:
      tok = lex.peek()
    if tok.kind != kind:
      raise self.error(f"expected {what}", tok.pos)
    lex.peeked = None
    return tok

  def expect_bare_id(self, what: str = "identifier") -> str:
    return self.expect_kind(lx.BARE_ID, what).text

  def parse_string(self, what: str = "string literal") -> str:
    tok = self.expect_kind(lx.STRING, what)
    return lx.unescape_string(tok.text[1:-1])

  def parse_int(self, what: str = "integer value") -> int:
    tok = self.lex.peek()
    neg = False
    if tok.kind == lx.PUNCT and tok.text == "-":
      self.lex.next()
      neg = True
      tok = self.lex.peek()
    if tok.kind != lx.INTEGER:
      raise self.error(f"expected {what}", tok.pos)
    self.lex.next()
    value = lx.int_value(tok.text)
    return -value if neg else value

  def parse_comma_list(self, parse_elem: Callable[[], object],
                       close: Optional[str] = None) -> list:
    """Parses `elem (, elem)*`; empty when the next token is `close`."""
    if close is not None and self.at_punct(close):
      return []
    items = [parse_elem()]
    while self.consume_punct(","):
      items.append(parse_elem())
    return items

  def parse_delimited(self, open_: str, close: str,
                      parse_elem: Callable[[], object]) -> list:
    self.expect_punct(open_)
    items = self.parse_comma_list(parse_elem, close)
    self.expect_punct(close)
    return items

  def enter(self) -> None:
    self._depth += 1
    if self._depth > MAX_NESTING:
      raise self.error("nesting is too deep")

  def leave(self) -> None:
    self._depth -= 1

  # --- types -----------------------------------------------------------------

  def at_type(self) -> bool:
    tok = self.lex.peek()
    if tok.kind == lx.BANG_ID:
      return True
    if tok.kind == lx.PUNCT:
      return tok.text == "("
    if tok.kind != lx.BARE_ID:
      return False
    name = tok.text
    return (name in _FLOAT_NAMES or name in ("tensor", "complex", "tuple",
                                             "index", "none")
            or name in _OPAQUE_BUILTIN_TYPES
            or _INT_TYPE_RE.match(name) is not None)

  def parse_type(self) -> t.Type:
    lex = self.lex
    tok = lex.peeked
    m = _CACHED_TYPE_RE.match(self.text, lex.pos if tok is None else tok.pos)
    if m is not None and (not self.type_aliases or "!" not in m.group(1)):
      key = m.group(1)
      ty = _TYPE_CACHE.get(key)
      if ty is None:
        return remember(_TYPE_CACHE, key, self._parse_type_guarded(),
                        _TYPE_CACHE_LIMIT)
      lex.reset(m.end())
      return ty
    return self._parse_type_guarded()

  def _parse_type_guarded(self) -> t.Type:
    self.enter()
    try:
      return self._parse_type()
    finally:
      self.leave()

  def _parse_type(self) -> t.Type:
    tok = self.lex.peek()
    if tok.kind == lx.PUNCT and tok.text == "(":
      return self.parse_function_type()
    if tok.kind == lx.BANG_ID:
      return self._parse_dialect_type()
    if tok.kind != lx.BARE_ID:
      raise self.error("expected type", tok.pos)
    name = tok.text
    self.lex.next()
    if name in _FLOAT_NAMES:
      return t.FloatType(name)
    m = _INT_TYPE_RE.match(name)
    if m is not None:
      width = int(m.group(2))
      if width not in t.INT_WIDTHS or (width == 1 and m.group(1) != "i"):
        raise self.error(f"unsupported integer type '{name}'", tok.pos)
      return t.IntegerType(width, unsigned=m.group(1) == "ui",
                           signed=m.group(1) == "si")
    if name == "index":
      return t.IndexType()
    if name == "none":
      return t.NoneType()
    if name == "tensor":
      return self._parse_tensor_type(tok.pos)
    if name == "complex":
      self.expect_punct("<", "in complex type")
      elem = self.parse_type()
      self.expect_punct(">", "in complex type")
      return t.ComplexType(elem)
    if name == "tuple":
      self.expect_punct("<", "in tuple type")
      types = self.parse_comma_list(self.parse_type, ">")
      self.expect_punct(">", "in tuple type")
      return t.TupleType(tuple(types))
    if name in _OPAQUE_BUILTIN_TYPES:
      if not self.at_punct("<"):
        raise self.error(f"expected '<' in {name} type")
      start = self.lex.token_start()
      end = self.lex.skip_balanced(start)
      self.lex.reset(end)
      return t.OpaqueType("builtin", name + self.text[start:end])
    raise self.error(f"unknown type '{name}'", tok.pos)

  def _parse_tensor_type(self, pos: int) -> t.Type:
    self.expect_punct("<", "in tensor type")
    if self.at_punct("*"):
      self.lex.next()
      if not self.lex.match_raw(re.compile(r"x")):
        raise self.error("expected 'x' in unranked tensor type")
      elem = self.parse_type()
      self.expect_punct(">", "in tensor type")
      return t.UnrankedTensorType(elem)
    m = self.lex.match_raw(_DIMS_RE)
    shape = []
    if m is not None and m.group():
      for d in m.group()[:-1].split("x"):
        shape.append(t.DYNAMIC if d == "?" else int(d))
    elem = self.parse_type()
    if isinstance(elem, (t.RankedTensorType, t.UnrankedTensorType,
                         t.FunctionType)):
      raise self.error("invalid tensor element type", pos)
    encoding = None
    if self.consume_punct(","):
      encoding = self.parse_attribute()
    self.expect_punct(">", "in tensor type")
    return t.RankedTensorType(tuple(shape), elem, encoding)

  def parse_function_type(self) -> t.FunctionType:
    self.expect_punct("(", "in function type")
    inputs = self.parse_comma_list(self.parse_type, ")")
    self.expect_punct(")", "in function type")
    self.expect_punct("->", "in function type")
    results = self.parse_result_types()
    return t.FunctionType(tuple(inputs), tuple(results))

  def parse_result_types(self) -> list[t.Type]:
    """`type` or `(type, ...)` after an arrow."""
    if self.at_punct("("):
      # `(a, b)` is a result list; `(a) -> b` would be a function type.
      save = self.lex.token_start()
      self.lex.next()
      types = self.parse_comma_list(self.parse_type, ")")
      self.expect_punct(")")
      if self.at_punct("->"):
        self.lex.reset(save)
        return [self.parse_type()]
      return types
    return [self.parse_type()]

  def parse_type_list(self) -> list[t.Type]:
    """`type, type, ...` (at least one)."""
    return self.parse_comma_list(self.parse_type)

  def _parse_dialect_type(self) -> t.Type:
    tok = self.lex.next()
    name = tok.text[1:]
    if name in self.type_aliases:
      return self.type_aliases[name]
    if name == "stablehlo.token":
      return t.TokenType()
    if name == "quant.uniform":
      return self._parse_quant_uniform(tok.pos)
    if "." not in name:
      raise self.error(f"undefined symbol alias id '{name}'", tok.pos)
    dialect, _, mnemonic = name.partition(".")
    body = mnemonic
    if self.at_punct("<") and self.lex.token_start() == tok.end:
      start = tok.end
      end = self.lex.skip_balanced(start)
      self.lex.reset(end)
      body += self.text[start:end]
    return t.OpaqueType(dialect, body)

  def _parse_quant_uniform(self, pos: int) -> t.QuantizedType:
    self.expect_punct("<", "in quantized type")
    stok = self.expect_kind(lx.BARE_ID, "storage type")
    m = re.fullmatch(r"([iu])([0-9]+)", stok.text)
    if m is None or int(m.group(2)) not in t.INT_WIDTHS[1:]:
      raise self.error(f"invalid storage type '{stok.text}'", stok.pos)
    unsigned = m.group(1) == "u"
    storage = t.IntegerType(int(m.group(2)), unsigned=unsigned)
    smin = smax = None
    if self.consume_punct("<"):
      smin = self.parse_int("storage type minimum")
      self.expect_punct(":")
      smax = self.parse_int("storage type maximum")
      self.expect_punct(">")
    self.expect_punct(":", "in quantized type")
    expressed = self.parse_type()
    if not isinstance(expressed, t.FloatType):
      raise self.error("expressed type must be a float type", pos)
    axis = None
    if self.consume_punct(":"):
      axis = self.parse_int("quantized dimension")
    self.expect_punct(",", "in quantized type")
    scales, zps = [], []

    def scale_zp():
      scales.append(self.parse_number_value("scale"))
      zps.append(self.parse_int("zero point") if self.consume_punct(":")
                 else 0)

    if axis is not None:
      self.expect_punct("{", "in per-axis quantized type")
      self.parse_comma_list(scale_zp)
      self.expect_punct("}", "in per-axis quantized type")
    else:
      scale_zp()
    self.expect_punct(">", "in quantized type")
    return t.QuantizedType(storage, expressed, tuple(scales), tuple(zps),
                           axis, smin, smax, storage_unsigned=unsigned)

  def parse_number_value(self, what: str) -> float:
    tok = self.lex.peek()
    neg = False
    if tok.kind == lx.PUNCT and tok.text == "-":
      self.lex.next()
      neg = True
      tok = self.lex.peek()
    if tok.kind == lx.FLOAT:
      value = float(tok.text)
    elif tok.kind == lx.INTEGER and not tok.text.startswith("0x"):
      value = float(int(tok.text))
    else:
      raise self.error(f"expected {what}", tok.pos)
    self.lex.next()
    return -value if neg else value

  def parse_attribute(self):  # implemented by AttrParser
    raise NotImplementedError
