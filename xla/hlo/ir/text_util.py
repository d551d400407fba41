"""Lexical helpers shared by the HLO printer and parser.

* C-style string escaping as absl::CEscape / CUnescape do it, byte-wise over
  UTF-8 (so any string round-trips).
* Brace scanning for "JSON dict" values (backend_config, frontend attribute
  values, shardings): from a `{` to its matching `}`, skipping over
  double-quoted strings.
"""

from __future__ import annotations

from typing import Optional

_ESCAPES = {
    ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t",
    ord('"'): '\\"', ord("'"): "\\'", ord("\\"): "\\\\",
}
_UNESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, '"': 0x22, "'": 0x27,
              "\\": 0x5C, "a": 0x07, "b": 0x08, "f": 0x0C, "v": 0x0B,
              "?": 0x3F}


def c_escape(text: str) -> str:
  """Escapes quotes, backslashes, control and non-ASCII bytes (octal)."""
  out = []
  for b in text.encode("utf-8"):
    if b in _ESCAPES:
      out.append(_ESCAPES[b])
    elif b < 0x20 or b >= 0x7F:
      out.append(f"\\{b:03o}")
    else:
      out.append(chr(b))
  return "".join(out)


def c_unescape(text: str) -> Optional[str]:
  """Undoes `c_escape` (and \\xHH); None if an escape is malformed."""
  out = bytearray()
  i, n = 0, len(text)
  while i < n:
    c = text[i]
    if c != "\\":
      out += c.encode("utf-8")
      i += 1
      continue
    if i + 1 >= n:
      return None
    e = text[i + 1]
    if e in _UNESCAPES:
      out.append(_UNESCAPES[e])
      i += 2
    elif e in "01234567":
      j = i + 1
      while j < n and j < i + 4 and text[j] in "01234567":
        j += 1
      value = int(text[i + 1:j], 8)
      if value > 0xFF:
        return None
      out.append(value)
      i = j
    elif e == "x":
      j = i + 2
      while j < n and text[j] in "0123456789abcdefABCDEF":
        j += 1
      if j == i + 2:
        return None
      value = int(text[i + 2:j], 16)
      if value > 0xFF:
        return None
      out.append(value)
      i = j
    else:
      return None
  return out.decode("utf-8", errors="surrogateescape")


def quote(text: str) -> str:
  return '"' + c_escape(text) + '"'


def scan_braced(text: str, start: int) -> int:
  """Index just past the `}` matching the `{` at `start`, or -1.

  Double-quoted strings (with backslash escapes) are skipped, so braces
  inside them do not count.
  """
  if start >= len(text) or text[start] != "{":
    return -1
  depth = 0
  i, n = start, len(text)
  while i < n:
    c = text[i]
    if c == '"':
      i += 1
      while i < n and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
      if i >= n:
        return -1
    elif c == "{":
      depth += 1
    elif c == "}":
      depth -= 1
      if depth == 0:
        return i + 1
    i += 1
  return -1


def is_json_dict(text: str) -> bool:
  """True if `text` is one brace-balanced `{...}` (whitespace around ok)."""
  stripped = text.strip()
  if not stripped.startswith("{"):
    return False
  return scan_braced(stripped, 0) == len(stripped)
