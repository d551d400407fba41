"""Tokenizer for MLIR textual IR.

The lexer is pull-based: the parser asks for one token at a time, and may
re-read raw characters at the current position (`match_raw`) for the few
places where MLIR's grammar is not token-based, e.g. the `2x?x3x` dimension
list of a shaped type. A hand-written regex lexer is used (no third-party
parser generator) because MLIR's grammar needs exactly this kind of
context-dependent lexing, and it keeps every error a positioned `ParseError`.
"""

from __future__ import annotations

import dataclasses
import re

from stablehlo._src.text import diagnostics

# Token kinds.
EOF = "eof"
BARE_ID = "bare_id"  # foo, stablehlo.add, f32, dense
PERCENT_ID = "percent_id"  # %x, %0, %r#1 (the #N kept in the text)
AT_ID = "at_id"  # @sym, @"quoted sym"
CARET_ID = "caret_id"  # ^bb0
HASH_ID = "hash_id"  # #alias, #stablehlo.gather, #stablehlo
BANG_ID = "bang_id"  # !quant.uniform, !alias
INTEGER = "integer"  # 12, 0x7FC00000
FLOAT = "float"  # 1.5, 1.0e-3
STRING = "string"  # "text" (escapes undone in .value)
PUNCT = "punct"  # ( ) { } [ ] < > , : = -> ? * + - :: {-# #-} ...

_ID_CHARS = r"[A-Za-z0-9_$.\-]"
# Strings use the unrolled-loop form `"[^"\\]*(?:\\.[^"\\]*)*"`: one
# character-class run per step rather than an alternation per character,
# which made long `dense<"0x...">` blobs dominate parse time.
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>(?:[ \t\r\n]+|//[^\n]*)+)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+\-]?[0-9]+)?)
  | (?P<hex>0x[0-9a-fA-F]+)
  | (?P<integer>[0-9]+)
  | (?P<bare_id>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<percent_id>%""" + _ID_CHARS + r"""+(?:\#[0-9]+)?)
  | (?P<at_id>@(?:""" + _ID_CHARS + r"""+|"[^"\\\n]*(?:\\.[^"\\\n]*)*"))
  | (?P<caret_id>\^""" + _ID_CHARS + r"""+)
  | (?P<hash_end>\#-\})
  | (?P<hash_id>\#""" + _ID_CHARS + r"""+)
  | (?P<bang_id>!""" + _ID_CHARS + r"""+)
  | (?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*")
  | (?P<punct>->|::|\{-\#|\.\.\.|[(){}\[\]<>,:=?*+\-|])
    """, re.VERBOSE)

_KIND_OF_GROUP = {
    "float": FLOAT, "hex": INTEGER, "integer": INTEGER, "bare_id": BARE_ID,
    "percent_id": PERCENT_ID, "at_id": AT_ID, "caret_id": CARET_ID,
    "hash_end": PUNCT, "hash_id": HASH_ID, "bang_id": BANG_ID,
    "string": STRING, "punct": PUNCT,
}

_ESCAPE_RE = re.compile(r"\\(?:([0-9a-fA-F]{2})|(.))", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


@dataclasses.dataclass(frozen=True)
class Token:
  kind: str
  text: str
  pos: int  # offset of the first character

  @property
  def end(self) -> int:
    return self.pos + len(self.text)

  def is_keyword(self, kw: str) -> bool:
    return self.kind == BARE_ID and self.text == kw


def unescape_string(body: str) -> str:
  """Undoes MLIR string escapes (`\\n`, `\\"`, `\\\\`, `\\XX` hex bytes)."""
  if "\\" not in body:
    return body
  out = bytearray()
  pos = 0
  for m in _ESCAPE_RE.finditer(body):
    out += body[pos:m.start()].encode("utf-8")
    if m.group(1):
      out.append(int(m.group(1), 16))
    else:
      ch = m.group(2)
      out += _SIMPLE_ESCAPES.get(ch, ch).encode("utf-8")
    pos = m.end()
  out += body[pos:].encode("utf-8")
  return out.decode("utf-8", errors="surrogateescape")


def escape_string(value: str) -> str:
  """The body (without quotes) of an MLIR string literal for `value`."""
  out = []
  for ch in value:
    o = ord(ch)
    if ch == '"' or ch == "\\":
      out.append("\\" + ch)
    elif ch == "\n":
      out.append("\\0A")
    elif ch == "\t":
      out.append("\\09")
    elif o < 0x20 or o == 0x7F:
      out.append("\\%02X" % o)
    elif 0xDC80 <= o <= 0xDCFF:  # a raw byte kept by surrogateescape
      out.append("\\%02X" % (o - 0xDC00))
    else:
      out.append(ch)
  return "".join(out)


class Lexer:
  """Produces tokens from `text` on demand."""

  def __init__(self, text: str, source: diagnostics.SourceMap):
    self.text = text
    self.source = source
    self.pos = 0  # where the next token (or its leading whitespace) starts
    self._peeked: Token | None = None

  def error(self, pos: int, what: str) -> diagnostics.ParseError:
    return self.source.error(pos, what)

  def _lex(self) -> Token:
    text = self.text
    pos = self.pos
    m = _TOKEN_RE.match(text, pos)
    if m is not None and m.lastgroup == "ws":
      pos = m.end()
      m = _TOKEN_RE.match(text, pos)
    if pos >= len(text):
      self.pos = pos
      return Token(EOF, "", pos)
    if m is None:
      ch = text[pos]
      if ch == '"':
        raise self.error(pos, "expected '\"' in string literal")
      raise self.error(pos, f"unexpected character '{ch}'")
    self.pos = m.end()
    return Token(_KIND_OF_GROUP[m.lastgroup], m.group(), pos)

  def peek(self) -> Token:
    if self._peeked is None:
      self._peeked = self._lex()
    return self._peeked

  def next(self) -> Token:
    tok = self.peek()
    self._peeked = None
    return tok

  def token_start(self) -> int:
    """Offset of the next token, after whitespace and comments."""
    return self.peek().pos

  def match_raw(self, regex: re.Pattern) -> re.Match | None:
    """Matches `regex` on raw characters at the next token's start.

    On success the lexer continues after the match; on failure nothing moves.
    """
    start = self.token_start()
    m = regex.match(self.text, start)
    if m is not None:
      self._peeked = None
      self.pos = m.end()
    return m

  def skip_balanced(self, open_pos: int) -> int:
    """Given the offset of an opening '<', '(', '[' or '{', returns the offset
    just past its matching close (strings respected); raises if unbalanced."""
    text = self.text
    pairs = {"<": ">", "(": ")", "[": "]", "{": "}"}
    stack = []
    i = open_pos
    n = len(text)
    while i < n:
      ch = text[i]
      if ch == '"':
        j = i + 1
        while j < n and text[j] != '"':
          j += 2 if text[j] == "\\" else 1
        if j >= n:
          break
        i = j + 1
        continue
      if ch in pairs:
        stack.append(pairs[ch])
      elif ch in ">)]}":
        if ch == ">" and i > 0 and text[i - 1] == "-":  # '->' arrow
          i += 1
          continue
        if not stack or stack[-1] != ch:
          raise self.error(i, f"unbalanced '{ch}'")
        stack.pop()
        if not stack:
          return i + 1
      i += 1
    raise self.error(open_pos, f"unbalanced '{text[open_pos]}'")

  def reset(self, pos: int) -> None:
    self._peeked = None
    self.pos = pos


def int_value(text: str) -> int:
  """The value of an INTEGER token (decimal, leading zeros allowed, or 0x)."""
  if text.startswith("0x"):
    return int(text, 16)
  return int(text)
