"""Tests for the HLO lexer."""

import pytest

from xla.hlo.parser.hlo_lexer import HloLexer
from xla.hlo.parser.hlo_lexer import NanValue
from xla.hlo.parser.hlo_lexer import Tok
from xla.xla_data import PrimitiveType as P


def lex_all(text):
  lexer = HloLexer(text)
  out = []
  while True:
    tok = lexer.lex()
    out.append((tok.kind, tok.value))
    if tok.kind in (Tok.EOF, Tok.ERROR):
      return out


def test_names_and_identifiers():
  assert lex_all("%get-tuple-element.7 param_0.1: x= add f32 ROOT") == [
      (Tok.NAME, "get-tuple-element.7"), (Tok.NAME, "param_0.1"),
      (Tok.ATTRIBUTE_NAME, "x"), (Tok.IDENT, "add"),
      (Tok.PRIMITIVE_TYPE, P.F32), (Tok.KEYWORD, "ROOT"), (Tok.EOF, None)]
  # `tuple` is not a primitive-type token; `token` is.
  assert lex_all("tuple token")[:2] == [(Tok.IDENT, "tuple"),
                                       (Tok.PRIMITIVE_TYPE, P.TOKEN)]


def test_numbers_and_patterns():
  kinds = [k for k, _ in lex_all("1 -2 1.5 3e+10 1. 3x3 0_1x-1_2 0_0_1 "
                                 "b01f_01io->b01f bf01_oi01->bf01 -inf inf")]
  assert kinds == [Tok.INT, Tok.INT, Tok.DECIMAL, Tok.DECIMAL, Tok.DECIMAL,
                   Tok.DXD, Tok.PAD, Tok.PAD, Tok.DIM_LABELS,
                   Tok.DIM_LABELS, Tok.NEG_INF, Tok.KEYWORD, Tok.EOF]
  assert lex_all("18446744073709551615")[0] == (Tok.INT, 2**64 - 1)
  assert lex_all("18446744073709551616")[0][0] == Tok.ERROR


def test_nan_forms():
  assert lex_all("nan")[0] == (Tok.DECIMAL, NanValue(False, None))
  assert lex_all("-nan")[0] == (Tok.DECIMAL, NanValue(True, None))
  assert lex_all("nan(0x1f)")[0] == (Tok.DECIMAL, NanValue(False, 0x1F))


def test_punctuation_comments_and_strings():
  text = ('{ } ( ) [ ] , : = * # + ~ -> <= ... ? /* c */ // line\n'
          '"a\\"b" \'single\'')
  kinds = [k for k, _ in lex_all(text)]
  assert kinds == [Tok.LBRACE, Tok.RBRACE, Tok.LPAREN, Tok.RPAREN,
                   Tok.LSQUARE, Tok.RSQUARE, Tok.COMMA, Tok.COLON,
                   Tok.EQUAL, Tok.ASTERISK, Tok.OCTOTHORP, Tok.PLUS,
                   Tok.TILDE, Tok.ARROW, Tok.LEQ, Tok.DOTS, Tok.QUESTION,
                   Tok.STRING, Tok.STRING, Tok.EOF]
  assert lex_all('"a\\"b\\n"')[0] == (Tok.STRING, 'a"b\n')


@pytest.mark.parametrize("text,error", [
    ('"open', "unterminated string"), ("/* open", "unterminated comment"),
    ("@", "unexpected character"), ("%1", "name"), ('"\\q"', "escape"),
    (".5", "stray"),
])
def test_errors(text, error):
  tok = HloLexer(text).lex()
  assert tok.kind == Tok.ERROR and error in tok.error


def test_raw_braced_and_lookahead():
  lexer = HloLexer('{a="}" {b}} next')
  lexer.lex()
  tok = lexer.lex_raw_braced()
  assert tok.kind == Tok.STRING and tok.value == '{a="}" {b}}'
  assert lexer.look_ahead().value == "next"
  assert lexer.token.value == '{a="}" {b}}'  # look-ahead does not advance
  assert lexer.lex().value == "next"
  assert lexer.lex().kind == Tok.EOF
