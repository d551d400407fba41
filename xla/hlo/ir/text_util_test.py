"""Tests for the HLO text lexical helpers."""

import pytest

from xla.hlo.ir import text_util as tu


@pytest.mark.parametrize("raw,escaped", [
    ('a"b', 'a\\"b'), ("a'b", "a\\'b"), ("x\\y", "x\\\\y"),
    ("line\nnext\t", "line\\nnext\\t"), ("\x01", "\\001"),
    ("é", "\\303\\251"),  # UTF-8 bytes as octal, like absl::CEscape
])
def test_escape_round_trip(raw, escaped):
  assert tu.c_escape(raw) == escaped
  assert tu.c_unescape(escaped) == raw


def test_unescape_hex_and_errors():
  assert tu.c_unescape("\\x41\\x42") == "AB"
  assert tu.c_unescape("\\q") is None
  assert tu.c_unescape("trailing\\") is None
  assert tu.c_unescape("\\777") is None


def test_scan_braced_skips_strings():
  text = 'x={a="}", b={c}} tail'
  assert tu.scan_braced(text, 2) == len('x={a="}", b={c}}')
  assert tu.scan_braced("{unclosed", 0) == -1
  assert tu.scan_braced("no brace", 0) == -1


def test_is_json_dict():
  assert tu.is_json_dict('{"k": [1, 2]}')
  assert tu.is_json_dict("  {uplo = 76 : ui8} ")
  assert not tu.is_json_dict("{a} {b}")
  assert not tu.is_json_dict("plain")
  assert tu.quote('say "hi"') == '"say \\"hi\\""'
