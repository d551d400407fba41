"""The HLO text lexer (xla/hlo/parser/hlo_lexer.cc).

Tokens are produced on demand, because some values are lexed raw: a
backend_config / frontend attribute `{...}` ("JSON dict") and the attributes
this parser keeps verbatim (sharding, origin, ...) are taken as the exact
brace-balanced source text.

Token rules, as XLA's lexer has them:
  * `[a-zA-Z_][a-zA-Z0-9_.-]*` followed by `:` is a NAME (the `:` eaten),
    followed by `=` an ATTRIBUTE_NAME (the `=` eaten); otherwise a primitive
    type (`f32`), a keyword, `nan`, a dim-labels pattern (`b01f_01io->b01f`)
    or an IDENT. `%name` is a NAME.
  * from `[0-9-?]`: `->`, a decimal (`1.5`, `1e5`), dim labels, `DxD`
    (`3x3`), a pad pattern (`0_1x2_3`), an int, `-inf`, `-nan`, or `?`.
  * strings in double or single quotes with C escapes; `/*...*/` and `//`
    comments; punctuation `= , : * # + ~ [ ] { } ( ) <= ...`.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Optional

from xla import primitive_util
from xla.hlo.ir import text_util


class Tok(enum.Enum):
  EOF = "end of input"
  ERROR = "invalid token"
  EQUAL = "'='"
  COMMA = "','"
  COLON = "':'"
  ASTERISK = "'*'"
  QUESTION = "'?'"
  OCTOTHORP = "'#'"
  PLUS = "'+'"
  TILDE = "'~'"
  LSQUARE = "'['"
  RSQUARE = "']'"
  LBRACE = "'{'"
  RBRACE = "'}'"
  LPAREN = "'('"
  RPAREN = "')'"
  ARROW = "'->'"
  LEQ = "'<='"
  DOTS = "'...'"
  KEYWORD = "keyword"
  NEG_INF = "'-inf'"
  PRIMITIVE_TYPE = "primitive type"
  NAME = "name"
  ATTRIBUTE_NAME = "attribute name"
  DIM_LABELS = "dim labels"
  DXD = "DxD pattern"
  PAD = "pad pattern"
  IDENT = "identifier"
  STRING = "string"
  INT = "integer"
  DECIMAL = "decimal"


KEYWORDS = frozenset({
    "true", "false", "inf", "HloModule", "ENTRY", "ROOT", "FileNames",
    "FunctionNames", "FileLocations", "StackFrames",
})

_PUNCT = {
    "=": Tok.EQUAL, ",": Tok.COMMA, ":": Tok.COLON, "*": Tok.ASTERISK,
    "#": Tok.OCTOTHORP, "+": Tok.PLUS, "~": Tok.TILDE, "[": Tok.LSQUARE,
    "]": Tok.RSQUARE, "{": Tok.LBRACE, "}": Tok.RBRACE, "(": Tok.LPAREN,
    ")": Tok.RPAREN,
}

_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.\-]*")
_FLOAT = re.compile(
    r"-?(?:(?:\d+|\d+\.\d*|\d*\.\d+)[eE][+-]?\d+|\d+\.\d*|\d*\.\d+)")
_DIM_LABELS = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_DXD = re.compile(r"[0-9]+(?:x[0-9]+)+")
_PAD = re.compile(r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+"
                  r"(?:_[0-9]+)?)*")
_INT = re.compile(r"-?\d+")
_NAN_PAYLOAD = re.compile(r"\(0x([0-9a-fA-F]+)\)")
_DQ_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SQ_STRING = re.compile(r"'(?:[^'\\]|\\.)*'", re.S)

_U64_MAX = 2**64 - 1


@dataclasses.dataclass(frozen=True)
class Token:
  kind: Tok
  start: int  # offset of the first character
  end: int
  value: object = None  # str / int / float / PrimitiveType, per kind
  error: str = ""  # for ERROR tokens

  def __str__(self) -> str:
    return self.kind.value


@dataclasses.dataclass(frozen=True)
class NanValue:
  """A NaN literal; `payload` is None for the plain quiet NaN."""

  negative: bool
  payload: Optional[int]


class HloLexer:
  """Lexes `text` one token at a time; `token` is the current token."""

  def __init__(self, text: str):
    self.text = text
    self.pos = 0
    self.token = Token(Tok.EOF, 0, 0)

  # -- state for backtracking --------------------------------------------------

  def save(self) -> tuple[int, Token]:
    return self.pos, self.token

  def restore(self, state: tuple[int, Token]) -> None:
    self.pos, self.token = state

  def lex(self) -> Token:
    self.token = self._lex()
    return self.token

  def look_ahead(self) -> Token:
    state = self.save()
    tok = self.lex()
    self.restore(state)
    return tok

  # -- raw lexing --------------------------------------------------------------

  def lex_raw_braced(self) -> Token:
    """With the current token a `{`: takes the whole balanced `{...}` as a
    STRING token holding the exact source text."""
    start = self.token.start
    end = text_util.scan_braced(self.text, start)
    if self.token.kind != Tok.LBRACE or end < 0:
      self.token = Token(Tok.ERROR, start, start + 1,
                         error="unbalanced braces")
      return self.token
    self.pos = end
    self.token = Token(Tok.STRING, start, end, self.text[start:end])
    return self.token

  # -- tokens ------------------------------------------------------------------

  def _skip_space_and_comments(self) -> Optional[Token]:
    text, n = self.text, len(self.text)
    while self.pos < n:
      c = text[self.pos]
      if c in " \t\r\n":
        self.pos += 1
      elif text.startswith("/*", self.pos):
        end = text.find("*/", self.pos + 2)
        if end < 0:
          return Token(Tok.ERROR, self.pos, n, error="unterminated comment")
        self.pos = end + 2
      elif text.startswith("//", self.pos):
        end = text.find("\n", self.pos)
        self.pos = n if end < 0 else end
      else:
        break
    return None

  def _lex(self) -> Token:
    err = self._skip_space_and_comments()
    if err is not None:
      return err
    text, start = self.text, self.pos
    if start >= len(text):
      return Token(Tok.EOF, start, start)
    c = text[start]
    if c.isascii() and (c.isalpha() or c == "_"):
      return self._lex_identifier()
    if c.isdigit() or c in "-?":
      if text.startswith("->", start):
        self.pos = start + 2
        return Token(Tok.ARROW, start, self.pos)
      tok = self._lex_number_or_pattern()
      if tok.kind == Tok.ERROR and c == "?":
        self.pos = start + 1
        return Token(Tok.QUESTION, start, self.pos)
      return tok
    if c == "<":
      if text.startswith("<=", start):
        self.pos = start + 2
        return Token(Tok.LEQ, start, self.pos)
      self.pos = start + 1
      return Token(Tok.ERROR, start, self.pos, error="stray '<'")
    if c == "%":
      m = _IDENT.match(text, start + 1)
      if m is None:
        self.pos = start + 1
        return Token(Tok.ERROR, start, self.pos, error="expected a name "
                     "after '%'")
      self.pos = m.end()
      return Token(Tok.NAME, start, self.pos, m.group())
    if c == ".":
      if text.startswith("...", start):
        self.pos = start + 3
        return Token(Tok.DOTS, start, self.pos)
      self.pos = start + 1
      return Token(Tok.ERROR, start, self.pos, error="stray '.'")
    if c in "\"'":
      return self._lex_string()
    if c in _PUNCT:
      self.pos = start + 1
      return Token(_PUNCT[c], start, self.pos)
    self.pos = start + 1
    return Token(Tok.ERROR, start, self.pos,
                 error=f"unexpected character {c!r}")

  def _lex_identifier(self) -> Token:
    text, start = self.text, self.pos
    m = _IDENT.match(text, start)
    end = m.end()
    ident = m.group()
    nxt = text[end] if end < len(text) else ""
    if nxt == ":":
      self.pos = end + 1
      return Token(Tok.NAME, start, end, ident)
    if nxt == "=":
      self.pos = end + 1
      return Token(Tok.ATTRIBUTE_NAME, start, end, ident)
    t = primitive_util.from_name(ident)
    if t is not None and ident not in ("tuple", "buffer"):
      self.pos = end
      return Token(Tok.PRIMITIVE_TYPE, start, end, t)
    if ident == "nan":
      return self._finish_nan(start, end, negative=False)
    if ident in KEYWORDS:
      self.pos = end
      return Token(Tok.KEYWORD, start, end, ident)
    m2 = _DIM_LABELS.match(text, start)
    if m2 is not None:
      self.pos = m2.end()
      return Token(Tok.DIM_LABELS, start, self.pos, m2.group())
    self.pos = end
    return Token(Tok.IDENT, start, end, ident)

  def _finish_nan(self, start: int, end: int, negative: bool) -> Token:
    payload = None
    m = _NAN_PAYLOAD.match(self.text, end)
    if m is not None:
      payload = int(m.group(1), 16)
      end = m.end()
      if payload <= 0 or payload >= 2**51:
        self.pos = end
        return Token(Tok.ERROR, start, end, error="NaN payload out of range")
    self.pos = end
    return Token(Tok.DECIMAL, start, end, NanValue(negative, payload))

  def _lex_number_or_pattern(self) -> Token:
    text, start = self.text, self.pos
    m = _FLOAT.match(text, start)
    if m is not None:
      self.pos = m.end()
      return Token(Tok.DECIMAL, start, self.pos, float(m.group()))
    for pattern, kind in ((_DIM_LABELS, Tok.DIM_LABELS), (_DXD, Tok.DXD),
                          (_PAD, Tok.PAD)):
      m = pattern.match(text, start)
      if m is not None:
        self.pos = m.end()
        return Token(kind, start, self.pos, m.group())
    m = _INT.match(text, start)
    if m is not None:
      value = int(m.group())
      self.pos = m.end()
      if value < -(2**63) or value > _U64_MAX:
        return Token(Tok.ERROR, start, self.pos,
                     error="integer out of the 64-bit range")
      return Token(Tok.INT, start, self.pos, value)
    if text.startswith("-inf", start):
      self.pos = start + 4
      return Token(Tok.NEG_INF, start, self.pos)
    if text.startswith("-nan", start):
      return self._finish_nan(start, start + 4, negative=True)
    self.pos = start + 1
    return Token(Tok.ERROR, start, self.pos, error="malformed number")

  def _lex_string(self) -> Token:
    text, start = self.text, self.pos
    pattern = _DQ_STRING if text[start] == '"' else _SQ_STRING
    m = pattern.match(text, start)
    if m is None:
      self.pos = len(text)
      return Token(Tok.ERROR, start, self.pos, error="unterminated string")
    self.pos = m.end()
    value = text_util.c_unescape(m.group()[1:-1])
    if value is None:
      return Token(Tok.ERROR, start, self.pos,
                   error="invalid escape in string")
    return Token(Tok.STRING, start, self.pos, value)
