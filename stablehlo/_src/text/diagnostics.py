"""Parse diagnostics and the `// -----` input splitting rule.

Every error the text parser raises is a `ParseError` whose message follows
MLIR's diagnostic layout:

    file:line:col: error: <what>
    <the offending source line>
    <spaces>^
"""

from __future__ import annotations

import bisect
import dataclasses

import support

SPLIT_MARKER = "// -----"


class ParseError(support.InvalidArgumentError):
  """A syntax error in MLIR text, positioned at `filename:line:col`."""

  def __init__(self, message: str, filename: str = "<string>", line: int = 0,
               col: int = 0, what: str = ""):
    super().__init__(message)
    self.filename = filename
    self.line = line
    self.col = col
    self.what = what or message


class SourceMap:
  """Maps offsets of a text to (line, col), 1-based, lines found lazily.

  `line_offset` shifts reported line numbers, so that a case split out of a
  larger file reports the lines of the original file.
  """

  def __init__(self, text: str, filename: str = "<string>",
               line_offset: int = 0):
    self.text = text
    self.filename = filename
    self.line_offset = line_offset
    self._starts = None

  def _line_starts(self) -> list[int]:
    if self._starts is None:
      starts = [0]
      find = self.text.find
      i = find("\n")
      while i >= 0:
        starts.append(i + 1)
        i = find("\n", i + 1)
      self._starts = starts
    return self._starts

  def line_col(self, pos: int) -> tuple[int, int]:
    pos = max(0, min(pos, len(self.text)))
    starts = self._line_starts()
    idx = bisect.bisect_right(starts, pos) - 1
    return idx + 1 + self.line_offset, pos - starts[idx] + 1

  def line_text(self, pos: int) -> str:
    pos = max(0, min(pos, len(self.text)))
    starts = self._line_starts()
    idx = bisect.bisect_right(starts, pos) - 1
    end = self.text.find("\n", starts[idx])
    if end < 0:
      end = len(self.text)
    return self.text[starts[idx]:end]

  def error(self, pos: int, what: str) -> ParseError:
    """Builds (does not raise) a ParseError for offset `pos`."""
    line, col = self.line_col(pos)
    src = self.line_text(pos)
    # Very long lines (hex blobs) are cut around the caret.
    caret_col = col - 1
    if len(src) > 200:
      start = max(0, caret_col - 100)
      src = ("..." if start else "") + src[start:start + 200] + "..."
      caret_col = caret_col - start + (3 if start else 0)
    caret = " " * caret_col + "^"
    message = f"{self.filename}:{line}:{col}: error: {what}\n{src}\n{caret}"
    return ParseError(message, self.filename, line, col, what)


@dataclasses.dataclass(frozen=True)
class InputCase:
  """One case of a split input: its text and the 0-based line it starts at."""

  text: str
  first_line: int  # number of original lines before this case


def split_input_file(text: str) -> list[InputCase]:
  """Splits `text` at every line containing `// -----` (MLIR's rule).

  The marker lines themselves belong to no case. `first_line` lets the parser
  report line numbers of the original file.
  """
  cases = []
  lines = text.splitlines(keepends=True)
  current: list[str] = []
  start = 0
  for i, line in enumerate(lines):
    if SPLIT_MARKER in line:
      cases.append(InputCase("".join(current), start))
      current = []
      start = i + 1
    else:
      current.append(line)
  cases.append(InputCase("".join(current), start))
  return cases
