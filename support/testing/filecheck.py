"""A FileCheck engine (the LLVM tool's matching rules, as far as our tests
use them), shared by the StableHLO lit driver and the HLO pass tests.

`filecheck(output, check_text, prefixes=("CHECK",))` reads the directives
for `prefixes` out of `check_text` (anywhere on a line, usually after a
comment marker: `// CHECK: ...`, or bare `CHECK: ...` in a Python string)
and matches them against `output`; a mismatch raises `FileCheckError`
(an AssertionError) naming the directive, its line and what was found.

Directives:
  CHECK:        the pattern occurs at or after the end of the previous match
                (on the same line or a later one).
  CHECK-LABEL:  like CHECK (labels do not partition the output here).
  CHECK-NEXT:   the pattern occurs on the line after the previous match
                (on the first line when nothing has matched yet).
  CHECK-SAME:   the pattern occurs on the previous match's line, after it.
  CHECK-EMPTY:  the line after the previous match is empty.
  CHECK-NOT:    the pattern does not occur between the previous match and
                the next positive match (or the end of the output).
  CHECK-DAG:    a run of DAG directives matches in any order, each at or
                after the position before the run, without overlapping one
                another; the position moves to the end of the last of them.
  {LITERAL}     after the directive name (`CHECK-NEXT{LITERAL}:`): the
                pattern is taken verbatim ({{ and [[ are plain text).

Patterns: plain text, where a run of blanks matches any non-empty run of
blanks (and leading and trailing blanks are ignored); `{{regex}}` is a
Python regular expression; `[[NAME:regex]]` captures what the regex
matched into NAME; `[[NAME]]` matches NAME's captured text verbatim (a later
capture of NAME replaces it). Patterns never match across a line break
unless a regex says so.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional

DEFAULT_PREFIXES = ("CHECK",)

_KINDS = ("-NEXT", "-LABEL", "-SAME", "-NOT", "-DAG", "-EMPTY")
_BLANKS = r"[^\S\n]+"
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class FileCheckError(AssertionError):
  """The output did not match the check text (or the check text is bad)."""


@dataclasses.dataclass
class Directive:
  kind: str  # "", "-NEXT", "-LABEL", "-SAME", "-NOT", "-DAG", "-EMPTY"
  pattern: str  # stripped pattern text
  literal: bool
  line: int  # 1-based line in the check text

  @property
  def name(self) -> str:
    return f"CHECK{self.kind}"


def directives(check_text: str,
               prefixes: Iterable[str] = DEFAULT_PREFIXES) -> list[Directive]:
  """The directives of `check_text` for `prefixes`, in order."""
  prefixes = tuple(prefixes)
  pat = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, prefixes)) +
                   r")(" + "|".join(map(re.escape, _KINDS)) +
                   r")?(\{LITERAL\})?:(.*)$")
  out = []
  for n, raw in enumerate(check_text.splitlines(), 1):
    m = pat.search(raw)
    if m:
      out.append(Directive(m.group(2) or "", m.group(4).strip(),
                           bool(m.group(3)), n))
  return out


def _literal(text: str) -> str:
  return _BLANKS.join(re.escape(w) for w in text.split())


class _Matcher:
  """One directive's pattern, compiled against the current variables."""

  def __init__(self, d: Directive, variables: dict[str, str]):
    self.directive = d
    self.captures: list[tuple[str, str]] = []  # (variable, group name)
    if d.literal:
      regex = _literal(d.pattern)
    else:
      regex = self._compile(d.pattern, variables)
    try:
      self.regex = re.compile(regex, re.MULTILINE)
    except re.error as e:
      raise FileCheckError(f"check line {d.line}: bad regex in "
                           f"'{d.pattern}': {e}") from None

  def _compile(self, text: str, variables: dict[str, str]) -> str:
    parts = []
    defined_here: dict[str, str] = {}
    i = 0
    while i < len(text):
      j = min((k for k in (text.find("{{", i), text.find("[[", i)) if k >= 0),
              default=-1)
      if j < 0:
        parts.append(_literal_piece(text[i:], i == 0, True))
        break
      parts.append(_literal_piece(text[i:j], i == 0, False))
      if text.startswith("{{", j):
        end = text.find("}}", j + 2)
        if end < 0:
          raise FileCheckError(f"check line {self.directive.line}: "
                               f"unterminated {{{{ in '{text}'")
        parts.append("(?:" + text[j + 2:end] + ")")
        i = end + 2
        continue
      end = _close_brackets(text, j + 2)
      if end < 0:
        raise FileCheckError(f"check line {self.directive.line}: "
                             f"unterminated [[ in '{text}'")
      body = text[j + 2:end]
      name, sep, regex = body.partition(":")
      if not _VAR_NAME.match(name):
        raise FileCheckError(f"check line {self.directive.line}: bad "
                             f"variable '[[{body}]]'")
      if sep:
        group = f"v{len(self.captures)}_{name}"
        self.captures.append((name, group))
        defined_here[name] = group
        parts.append(f"(?P<{group}>{regex})")
      elif name in defined_here:
        parts.append(f"(?P={defined_here[name]})")
      elif name in variables:
        parts.append(re.escape(variables[name]))
      else:
        raise FileCheckError(f"check line {self.directive.line}: variable "
                             f"'{name}' used before it is defined")
      i = end + 2
    return "".join(parts)

  def search(self, text: str, start: int, end: Optional[int] = None):
    if end is None:
      return self.regex.search(text, start)
    return self.regex.search(text, start, end)


def _close_brackets(text: str, start: int) -> int:
  """The offset of the `]]` closing a `[[` whose body starts at `start`;
  brackets of a character class inside the body are skipped."""
  depth = 0
  k = start
  while k < len(text):
    c = text[k]
    if c == "\\":
      k += 2
      continue
    if depth == 0 and text.startswith("]]", k):
      return k
    if c == "[":
      depth += 1
    elif c == "]" and depth:
      depth -= 1
    k += 1
  return -1


def _literal_piece(text: str, at_start: bool, at_end: bool) -> str:
  """Plain text between regex parts: blank runs match blank runs; a blank
  at either edge of a piece stays significant unless it is the pattern's
  own edge."""
  words = text.split()
  if not words:
    return "" if (at_start or at_end or not text) else _BLANKS
  body = _literal(text)
  if text[0].isspace() and not at_start:
    body = _BLANKS + body
  if text[-1].isspace() and not at_end:
    body = body + _BLANKS
  return body


def _line_of(text: str, offset: int) -> str:
  start = text.rfind("\n", 0, offset) + 1
  end = text.find("\n", offset)
  return text[start:end if end >= 0 else len(text)]


def _context(text: str, offset: int) -> str:
  if offset >= len(text):
    return "<end of output>"
  return repr(_line_of(text, offset))


def filecheck(output: str, check_text: str,
              prefixes: Iterable[str] = DEFAULT_PREFIXES,
              require_directives: bool = True) -> None:
  """Matches `output` against the directives of `check_text`; raises
  FileCheckError on the first mismatch. A check text with no directives
  for `prefixes` is an error (it would check nothing) unless
  `require_directives` is False."""
  prefixes = tuple(prefixes)
  ds = directives(check_text, prefixes)
  if not ds and require_directives:
    raise FileCheckError(f"no check directives for prefixes "
                         f"{tuple(prefixes)} in the check text")
  variables: dict[str, str] = {}
  pos = 0  # end of the previous match
  matched_any = False
  pending_not: list[_Matcher] = []

  def where(d: Directive) -> str:
    return f"{d.name}{'{LITERAL}' if d.literal else ''} (check line {d.line})"

  def bind(m: _Matcher, match) -> None:
    for name, group in m.captures:
      variables[name] = match.group(group)

  def check_nots(start: int, end: int) -> None:
    for n in pending_not:
      found = n.search(output, start, end)
      if found:
        raise FileCheckError(
            f"{where(n.directive)}: '{n.directive.pattern}' found in the "
            f"output: {_context(output, found.start())}")
    pending_not.clear()

  def next_line_start(p: int) -> int:
    if not matched_any:
      return 0
    nl = output.find("\n", p)
    return len(output) if nl < 0 else nl + 1

  i = 0
  while i < len(ds):
    d = ds[i]
    if not d.pattern and d.kind != "-EMPTY":
      raise FileCheckError(f"{where(d)}: empty pattern")
    if d.kind == "-NOT":
      pending_not.append(_Matcher(d, variables))
      i += 1
      continue
    if d.kind == "-DAG":
      group_start = pos
      claimed: list[tuple[int, int]] = []
      while i < len(ds) and ds[i].kind == "-DAG":
        m = _Matcher(ds[i], variables)
        start = group_start
        while True:
          found = m.search(output, start)
          if found is None:
            raise FileCheckError(
                f"{where(ds[i])}: '{ds[i].pattern}' not found in the output "
                f"after {_context(output, group_start)}")
          span = (found.start(), max(found.end(), found.start() + 1))
          if not any(span[0] < e and s < span[1] for s, e in claimed):
            break
          start = found.start() + 1
        claimed.append(span)
        bind(m, found)
        i += 1
      check_nots(pos, min(s for s, _ in claimed))
      pos = max(found_end for _, found_end in claimed)
      matched_any = True
      continue
    m = _Matcher(d, variables)
    if d.kind == "-EMPTY":
      start = next_line_start(pos)
      line = _line_of(output, start) if start < len(output) else None
      if line is None or line.strip():
        raise FileCheckError(f"{where(d)}: expected an empty line, got "
                             f"{_context(output, start)}")
      check_nots(pos, start)
      pos = start
      matched_any = True
      i += 1
      continue
    if d.kind == "-NEXT":
      start = next_line_start(pos)
      if start >= len(output):
        raise FileCheckError(f"{where(d)}: expected '{d.pattern}' on the "
                             f"next line, got <end of output>")
      line_end = output.find("\n", start)
      line_end = len(output) if line_end < 0 else line_end
      found = m.search(output, start, line_end)
      if found is None:
        raise FileCheckError(f"{where(d)}: expected '{d.pattern}' on the "
                             f"next line, got {_context(output, start)}")
    elif d.kind == "-SAME":
      line_end = output.find("\n", pos)
      line_end = len(output) if line_end < 0 else line_end
      found = m.search(output, pos, line_end) if matched_any else None
      if found is None:
        raise FileCheckError(f"{where(d)}: '{d.pattern}' not on the matched "
                             f"line {_context(output, max(pos - 1, 0))}")
    else:  # CHECK, CHECK-LABEL
      found = m.search(output, pos)
      if found is None:
        raise FileCheckError(f"{where(d)}: '{d.pattern}' not found in the "
                             f"output after {_context(output, pos)}")
    check_nots(pos, found.start())
    bind(m, found)
    pos = found.end()
    matched_any = True
    i += 1
  check_nots(pos, len(output))
