"""Tokenizer for MLIR textual IR.

The lexer is pull-based: the parser asks for one token at a time, and may
re-read raw characters at the current position (`match_raw`) for the few
places where MLIR's grammar is not token-based, e.g. the `2x?x3x` dimension
list of a shaped type. A hand-written regex lexer is used (no third-party
parser generator) because MLIR's grammar needs exactly this kind of
context-dependent lexing, and it keeps every error a positioned `ParseError`.
"""

from __future__ import annotations

import collections
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
# One pattern lexes a token with the whitespace and comments before it: the
# token's kind is the number of the group that matched (`m.lastindex`), so
# a token costs one regex match and one tuple index.
# Strings use the unrolled-loop form `"[^"\\]*(?:\\.[^"\\]*)*"`: one
# character-class run per step rather than an alternation per character,
# which made long `dense<"0x...">` blobs dominate parse time.
_TOKEN_RE = re.compile(
    r"""
    (?:[ \t\r\n]+|//[^\n]*)*
    (?:
      (->|::|\{-\#|\.\.\.|[(){}\[\]<>,:=?*+\-|])
    | (%""" + _ID_CHARS + r"""+(?:\#[0-9]+)?)
    | ([A-Za-z_][A-Za-z0-9_$.]*)
    | ([0-9]+\.[0-9]*(?:[eE][+\-]?[0-9]+)?)
    | (0x[0-9a-fA-F]+)
    | ([0-9]+)
    | ("[^"\\\n]*(?:\\.[^"\\\n]*)*")
    | (@(?:""" + _ID_CHARS + r"""+|"[^"\\\n]*(?:\\.[^"\\\n]*)*"))
    | (\#-\})
    | (\#""" + _ID_CHARS + r"""+)
    | (!""" + _ID_CHARS + r"""+)
    | (\^""" + _ID_CHARS + r"""+)
    )?
    """, re.VERBOSE)

# The kind of each group of _TOKEN_RE, by group number. The alternatives
# are tried in order, so the most frequent kinds come first (punctuation,
# SSA names, identifiers); a float before a hex integer before a decimal.
_KIND_OF_GROUP = (None, PUNCT, PERCENT_ID, BARE_ID, FLOAT, INTEGER, INTEGER,
                  STRING, AT_ID, PUNCT, HASH_ID, BANG_ID, CARET_ID)

_BALANCE_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|->|[<>(){}\[\]"]', re.S)
_CLOSE_OF = {"<": ">", "(": ")", "[": "]", "{": "}"}

_ESCAPE_RE = re.compile(r"\\(?:([0-9a-fA-F]{2})|(.))", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


class Token(collections.namedtuple("_TokenFields", "kind text pos")):
  """One token: its kind, its text and the offset of its first character.

  A named tuple that the lexer builds with tuple.__new__ (no Python-level
  constructor runs; fields read through C accessors): the parser makes one
  per token.
  """
  __slots__ = ()

  @property
  def end(self) -> int:
    return self.pos + len(self.text)

  def is_keyword(self, kw: str) -> bool:
    return self.kind == BARE_ID and self.text == kw


_new_token = tuple.__new__


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
    # The token `peek` returned, until it is consumed: parsers on hot paths
    # read it directly and consume it by setting it to None.
    self.peeked: Token | None = None

  def error(self, pos: int, what: str) -> diagnostics.ParseError:
    return self.source.error(pos, what)

  def _lex(self) -> Token:
    text = self.text
    m = _TOKEN_RE.match(text, self.pos)
    idx = m.lastindex
    if idx is None:
      pos = m.end()
      if pos >= len(text):
        self.pos = pos
        return Token(EOF, "", pos)
      ch = text[pos]
      if ch == '"':
        raise self.error(pos, "expected '\"' in string literal")
      raise self.error(pos, f"unexpected character '{ch}'")
    self.pos = m.end()
    return _new_token(Token, (_KIND_OF_GROUP[idx], m.group(idx),
                              m.start(idx)))

  def peek(self) -> Token:
    tok = self.peeked
    if tok is not None:
      return tok
    # _lex inlined: peek is where nearly every token is made.
    m = _TOKEN_RE.match(self.text, self.pos)
    idx = m.lastindex
    if idx is None:
      tok = self.peeked = self._lex()
      return tok
    self.pos = m.end()
    tok = self.peeked = _new_token(Token, (_KIND_OF_GROUP[idx], m.group(idx),
                                           m.start(idx)))
    return tok

  def next(self) -> Token:
    tok = self.peeked
    if tok is None:
      return self._lex()
    self.peeked = None
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
      self.peeked = None
      self.pos = m.end()
    return m

  def skip_balanced(self, open_pos: int) -> int:
    """Given the offset of an opening '<', '(', '[' or '{', returns the offset
    just past its matching close (strings respected); raises if unbalanced."""
    text = self.text
    stack = []
    for m in _BALANCE_RE.finditer(text, open_pos):
      ch = m.group()
      close = _CLOSE_OF.get(ch)
      if close is not None:
        stack.append(close)
      elif ch in ">)]}":
        i = m.start()
        if not stack or stack[-1] != ch:
          raise self.error(i, f"unbalanced '{ch}'")
        stack.pop()
        if not stack:
          return i + 1
      elif ch == '"':  # a string without its closing quote
        break
    raise self.error(open_pos, f"unbalanced '{text[open_pos]}'")

  def reset(self, pos: int) -> None:
    self.peeked = None
    self.pos = pos


def int_value(text: str) -> int:
  """The value of an INTEGER token (decimal, leading zeros allowed, or 0x)."""
  if text.startswith("0x"):
    return int(text, 16)
  return int(text)
