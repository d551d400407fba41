"""The base of the HLO text parsers: tokens, errors, shapes and layouts.

`ParserBase` holds the lexer, the error helpers, the scalar and list
parsers and the shape / layout grammar. `literal_parser.LiteralParser`,
`value_parser.ValueParser` and `hlo_parser.HloParser` extend it in turn.

Every syntax error is an `HloParseError` (a support.InvalidArgumentError)
whose message reads

    <line>:<col>: error: <what>
    <the source line>
    <caret under the column>
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Optional

import support
from xla import layout as layout_lib
from xla import primitive_util
from xla import shape_util
from xla.hlo.parser.hlo_lexer import HloLexer
from xla.hlo.parser.hlo_lexer import NanValue
from xla.hlo.parser.hlo_lexer import Tok
from xla.hlo.parser.hlo_lexer import Token
from xla.shape import Shape
from xla.shape import UNBOUNDED_SIZE
from xla.xla_data import PrimitiveType


def _position_message(text: str, pos: int, what: str) -> tuple[int, int, str]:
  pos = max(0, min(pos, len(text)))
  line = text.count("\n", 0, pos) + 1
  line_start = text.rfind("\n", 0, pos) + 1
  line_end = text.find("\n", pos)
  if line_end < 0:
    line_end = len(text)
  col = pos - line_start + 1
  src = text[line_start:line_end]
  caret_col = col - 1
  if len(src) > 200:  # cut very long lines around the caret
    lo = max(0, caret_col - 100)
    src = src[lo:lo + 200]
    caret_col -= lo
  return line, col, f"{line}:{col}: error: {what}\n{src}\n{' ' * caret_col}^"


class HloParseError(support.InvalidArgumentError):
  """A syntax or semantic error in HLO text, at `line`:`col`."""

  def __init__(self, text: str, pos: int, what: str):
    line, col, message = _position_message(text, pos, what)
    super().__init__(message)
    self.line, self.col, self.what = line, col, what


class HloParseUnimplementedError(support.UnimplementedError):
  """Valid HLO text using a feature this parser does not support yet."""

  def __init__(self, text: str, pos: int, what: str):
    line, col, message = _position_message(text, pos, what)
    super().__init__(message)
    self.line, self.col, self.what = line, col, what


class ParserBase:
  """Token helpers, scalars, lists, shapes and layouts."""

  def __init__(self, text: str, fill_missing_layouts: bool = True):
    self.text = text
    self.lexer = HloLexer(text)
    self.fill_missing_layouts = fill_missing_layouts
    self.lexer.lex()

  # -- tokens and errors -------------------------------------------------------

  @property
  def tok(self) -> Token:
    return self.lexer.token

  def error(self, what: str, at: Optional[Token | int] = None):
    """Raises an HloParseError at `at` (a token or offset; default: the
    current token)."""
    if at is None:
      at = self.tok
    pos = at.start if isinstance(at, Token) else at
    if isinstance(at, Token) and at.kind == Tok.ERROR and at.error:
      what = f"{what} ({at.error})"
    raise HloParseError(self.text, pos, what)

  def unimplemented(self, what: str, at: Optional[Token] = None):
    at = at or self.tok
    raise HloParseUnimplementedError(self.text, at.start,
                                     f"Unimplemented: {what}")

  @contextlib.contextmanager
  def at(self, token: Token):
    """Turns IR errors raised inside the block into errors at `token`."""
    try:
      yield
    except (HloParseError, HloParseUnimplementedError):
      raise
    except support.UnimplementedError as e:
      raise HloParseUnimplementedError(self.text, token.start, str(e)) from e
    except support.XlaError as e:
      raise HloParseError(self.text, token.start, str(e)) from e

  def describe(self, token: Optional[Token] = None) -> str:
    token = token or self.tok
    if token.kind == Tok.EOF:
      return "end of input"
    return repr(self.text[token.start:token.end][:40])

  def advance(self) -> Token:
    """Consumes the current token and returns it."""
    tok = self.tok
    self.lexer.lex()
    return tok

  def is_tok(self, kind: Tok, value=None) -> bool:
    return self.tok.kind == kind and (value is None or self.tok.value == value)

  def eat(self, kind: Tok, value=None) -> bool:
    if self.is_tok(kind, value):
      self.advance()
      return True
    return False

  def expect(self, kind: Tok, what: str = "", value=None) -> Token:
    if not self.is_tok(kind, value):
      want = what or (repr(value) if value is not None else kind.value)
      self.error(f"expected {want}, saw {self.describe()}")
    return self.advance()

  def is_keyword(self, word: str) -> bool:
    return self.is_tok(Tok.KEYWORD, word)

  def is_ident(self, word: Optional[str] = None) -> bool:
    return self.is_tok(Tok.IDENT, word)

  # -- scalars -----------------------------------------------------------------

  def parse_int(self, what: str = "integer") -> int:
    tok = self.expect(Tok.INT, what)
    value = tok.value
    if value >= 2**63:  # as XLA, unsigned spellings wrap to int64
      value -= 2**64
    return value

  def parse_bool(self) -> bool:
    if self.eat(Tok.KEYWORD, "true"):
      return True
    if self.eat(Tok.KEYWORD, "false"):
      return False
    self.error(f"expected true or false, saw {self.describe()}")

  def parse_double(self) -> float:
    """A decimal, integer, inf or -inf (NaN is only valid in literals)."""
    tok = self.tok
    if tok.kind == Tok.DECIMAL and not isinstance(tok.value, NanValue):
      self.advance()
      return tok.value
    if tok.kind == Tok.INT:
      self.advance()
      return float(tok.value)
    if self.eat(Tok.KEYWORD, "inf"):
      return math.inf
    if self.eat(Tok.NEG_INF):
      return -math.inf
    self.error(f"expected a number, saw {self.describe()}")

  def parse_string(self) -> str:
    return self.expect(Tok.STRING, "string").value

  def parse_name(self, what: str = "name") -> str:
    if self.tok.kind in (Tok.NAME, Tok.IDENT):
      return self.advance().value
    self.error(f"expected {what}, saw {self.describe()}")

  def parse_attribute_name(self) -> str:
    return self.expect(Tok.ATTRIBUTE_NAME, "attribute name").value

  def parse_list(self, open_: Tok, close: Tok, item: Callable[[], Any],
                 delim: Tok = Tok.COMMA) -> list:
    """`open (item (delim item)*)? close`."""
    self.expect(open_)
    items = []
    if not self.is_tok(close):
      items.append(item())
      while self.eat(delim):
        items.append(item())
    self.expect(close, f"{close.value} or {delim.value}")
    return items

  def parse_int_list(self, open_: Tok = Tok.LBRACE,
                     close: Tok = Tok.RBRACE,
                     delim: Tok = Tok.COMMA) -> tuple[int, ...]:
    return tuple(self.parse_list(open_, close, self.parse_int, delim))

  def parse_int_list_list(self) -> tuple[tuple[int, ...], ...]:
    return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE, self.parse_int_list))

  def parse_raw_braced(self) -> str:
    """A balanced `{...}`, returned as its exact source text."""
    if not self.is_tok(Tok.LBRACE):
      self.error(f"expected '{{', saw {self.describe()}")
    tok = self.lexer.lex_raw_braced()
    if tok.kind != Tok.STRING:
      self.error("unbalanced braces", tok)
    self.advance()
    return tok.value

  # -- shapes and layouts ------------------------------------------------------

  def can_be_shape(self) -> bool:
    if self.tok.kind in (Tok.PRIMITIVE_TYPE, Tok.LPAREN):
      return True
    return (self.is_ident("b") and
            self.lexer.look_ahead().kind == Tok.LPAREN)

  def parse_shape(self, fill_layout: Optional[bool] = None,
                  value_follows: bool = False) -> Shape:
    """`f32[2,<=3,?]{1,0}` | `(shape, ...)` | `b(shape)` | `token[]`.

    With `value_follows` (a literal's shape), a `{` after the dimensions is
    taken as a layout only if a `{` value follows it, so `f32[2] {1, 2}`
    reads as a value rather than as a malformed layout.
    """
    fill = self.fill_missing_layouts if fill_layout is None else fill_layout
    start = self.tok
    if self.is_ident("b") and self.lexer.look_ahead().kind == Tok.LPAREN:
      self.advance()
      self.advance()
      inner = self.parse_shape(fill)
      self.expect(Tok.RPAREN, "')' at the end of a buffer shape")
      with self.at(start):
        return Shape.buffer(inner)
    if self.eat(Tok.LPAREN):
      elements = []
      if not self.is_tok(Tok.RPAREN):
        elements.append(self.parse_shape(fill))
        while self.eat(Tok.COMMA):
          elements.append(self.parse_shape(fill))
      self.expect(Tok.RPAREN, "')' at the end of a tuple shape")
      return Shape.tuple_of(elements)
    if self.tok.kind != Tok.PRIMITIVE_TYPE:
      self.error(f"expected a shape, saw {self.describe()}")
    element_type = self.advance().value
    dims, dynamic = [], []

    def dim():
      if self.eat(Tok.QUESTION):
        dims.append(UNBOUNDED_SIZE)
        dynamic.append(True)
        return
      is_dynamic = self.eat(Tok.LEQ)
      dims.append(self.parse_int("dimension size"))
      dynamic.append(is_dynamic)

    self.parse_list(Tok.LSQUARE, Tok.RSQUARE, dim)
    layout = None
    if self.is_tok(Tok.LBRACE) and self.lexer.look_ahead().kind in (
        Tok.INT, Tok.COLON):
      layout_tok = self.tok
      state = self.lexer.save()
      try:
        layout = self.parse_layout()
      except HloParseError:
        if not value_follows:
          raise
      if value_follows and (layout is None or not self.is_tok(Tok.LBRACE)):
        self.lexer.restore(state)
        layout = None
      elif len(layout.minor_to_major) != len(dims):
        self.error(f"dimensions size is {len(dims)}, but minor to major size "
                   f"is {len(layout.minor_to_major)}", layout_tok)
    with self.at(start):
      shape = Shape(element_type, tuple(dims), tuple(dynamic), (), layout)
      if layout is None and shape.is_array() and fill:
        shape = shape_util.with_default_layouts(shape)
    return shape

  def parse_shape_list(self) -> tuple[Shape, ...]:
    return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE, self.parse_shape))

  def parse_layout(self) -> layout_lib.Layout:
    """`{m2m,...(:D(..)T(..)..L(n)#(t)*(t)E(n)S(n)SC(..)P(shape)M(n))?}`."""
    self.expect(Tok.LBRACE, "'{' to start a layout")
    minor_to_major: list[int] = []
    fields: dict[str, Any] = {}
    if self.is_tok(Tok.INT):
      minor_to_major.append(self.parse_int())
      while self.eat(Tok.COMMA):
        minor_to_major.append(self.parse_int())
    if self.eat(Tok.COLON):
      if self.is_ident("D"):
        self.advance()
        fields["dim_level_types"] = tuple(self.parse_list(
            Tok.LPAREN, Tok.RPAREN, self._parse_dim_level))
      if self.is_ident("T"):
        self.advance()
        tiles = []
        while self.is_tok(Tok.LPAREN):
          tiles.append(tuple(self.parse_list(Tok.LPAREN, Tok.RPAREN,
                                             self._parse_tile_dim)))
        fields["tiles"] = tuple(tiles)
      if self.is_ident("L"):
        self.advance()
        fields["tail_padding_alignment_in_elements"] = self._paren_int()
      if self.eat(Tok.OCTOTHORP):
        fields["index_primitive_type"] = self._paren_unsigned_type()
      if self.eat(Tok.ASTERISK):
        fields["pointer_primitive_type"] = self._paren_unsigned_type()
      if self.is_ident("E"):
        self.advance()
        fields["element_size_in_bits"] = self._paren_int()
      if self.is_ident("S"):
        self.advance()
        fields["memory_space"] = self._paren_int()
      if self.is_ident("SC"):
        self.advance()
        configs = []
        while self.eat(Tok.LPAREN):
          dim = self.parse_int()
          indices = self.parse_list(Tok.COLON, Tok.RPAREN, self.parse_int)
          configs.append(layout_lib.SplitConfig(dim, tuple(indices)))
        fields["split_configs"] = tuple(configs)
      if self.is_ident("P"):
        self.advance()
        self.expect(Tok.LPAREN)
        fields["physical_shape"] = self.parse_shape()
        self.expect(Tok.RPAREN)
      if self.is_ident("M"):
        self.advance()
        fields["dynamic_shape_metadata_prefix_bytes"] = self._paren_int()
    self.expect(Tok.RBRACE, "'}' at the end of the layout")
    return layout_lib.Layout(minor_to_major=tuple(minor_to_major), **fields)

  def _paren_int(self) -> int:
    self.expect(Tok.LPAREN)
    value = self.parse_int()
    self.expect(Tok.RPAREN)
    return value

  def _paren_unsigned_type(self) -> PrimitiveType:
    self.expect(Tok.LPAREN)
    tok = self.expect(Tok.PRIMITIVE_TYPE, "an unsigned integer type")
    if not primitive_util.is_unsigned_integral(tok.value):
      self.error("expected an unsigned integer type", tok)
    self.expect(Tok.RPAREN)
    return tok.value

  def _parse_dim_level(self) -> layout_lib.DimLevel:
    tok = self.tok
    if tok.kind != Tok.IDENT or tok.value not in ("D", "C", "S", "H"):
      self.error("expected a dim level type (D, C, S or H)")
    self.advance()
    unique = not self.eat(Tok.PLUS)
    ordered = not self.eat(Tok.TILDE)
    return layout_lib.DimLevel(tok.value, unique, ordered)

  def _parse_tile_dim(self) -> int:
    if self.eat(Tok.ASTERISK):
      return layout_lib.COMBINE_DIMENSION
    return self.parse_int("tile dimension")
