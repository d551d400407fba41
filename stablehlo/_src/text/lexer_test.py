"""Tests for the MLIR lexer."""

import pytest

from stablehlo._src.text import diagnostics
from stablehlo._src.text import lexer as lx


def _tokens(text):
  lexer = lx.Lexer(text, diagnostics.SourceMap(text))
  out = []
  while True:
    tok = lexer.next()
    if tok.kind == lx.EOF:
      return out
    out.append((tok.kind, tok.text))


def test_basic_tokens():
  assert _tokens('%0:2 = "stablehlo.add"(%a#1) // comment\n') == [
      (lx.PERCENT_ID, "%0"), (lx.PUNCT, ":"), (lx.INTEGER, "2"),
      (lx.PUNCT, "="), (lx.STRING, '"stablehlo.add"'), (lx.PUNCT, "("),
      (lx.PERCENT_ID, "%a#1"), (lx.PUNCT, ")")]


def test_numbers_and_ids():
  assert _tokens("0x7FC00000 1.5E-3 -2 @f @\"q s\" ^bb0 #loc1 !quant.uniform"
                 " {-# #-} ->") == [
                     (lx.INTEGER, "0x7FC00000"), (lx.FLOAT, "1.5E-3"),
                     (lx.PUNCT, "-"), (lx.INTEGER, "2"), (lx.AT_ID, "@f"),
                     (lx.AT_ID, '@"q s"'), (lx.CARET_ID, "^bb0"),
                     (lx.HASH_ID, "#loc1"), (lx.BANG_ID, "!quant.uniform"),
                     (lx.PUNCT, "{-#"), (lx.PUNCT, "#-}"), (lx.PUNCT, "->")]


def test_string_escapes_round_trip():
  for s in ["plain", 'q"uote', "back\\slash", "new\nline", "\x01"]:
    assert lx.unescape_string(lx.escape_string(s)) == s
  assert lx.unescape_string(r"\41\n") == "A\n"


def test_unexpected_character_is_parse_error():
  with pytest.raises(diagnostics.ParseError) as e:
    _tokens("%a = `")
  assert str(e.value).startswith("<string>:1:6: error: unexpected character")


def test_unterminated_string():
  with pytest.raises(diagnostics.ParseError, match="1:3: error"):
    _tokens('a "abc')
