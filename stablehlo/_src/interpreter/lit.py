"""Runs a corpus file the way its `// RUN:` lines invoke
`stablehlo-translate --interpret`, without a shell.

Understood: `--interpret`, `-split-input-file`, `--args="..."`,
`--interpreter-print-dense`, `--probe-output-dir` (records are kept in
memory), a leading `not` (the run must fail), `2>&1`, and `| FileCheck
[--check-prefix(es)=...]`, checked by the shared FileCheck engine
(support.testing.filecheck: CHECK, -NEXT, -SAME, -NOT, -DAG, -LABEL,
{LITERAL}, {{regex}}, [[VAR:regex]]; whitespace runs compare equal). `stablehlo-opt` steps before the interpreter (`-inline`,
`--chlo-legalize-to-stablehlo`, `--stablehlo-legalize-composite-to-call`)
are semantics-preserving, and the interpreter runs those ops directly.

A file is *enabled* for interpretation when it has a RUN line (not a
RUN-DISABLED one) that calls `stablehlo-translate --interpret`.
"""

from __future__ import annotations

import dataclasses
import io
import re
import shlex
from typing import Optional

from stablehlo._src import interpreter
from stablehlo._src import text as mlir_text
from stablehlo._src.interpreter import cli_args
from stablehlo._src.interpreter import conformance_run
from support.testing import filecheck as _filecheck

_RUN_RE = re.compile(r"^\s*//\s*RUN:(.*)$")


@dataclasses.dataclass
class Invocation:
  split: bool = False
  args: Optional[str] = None
  print_dense: bool = False
  expect_failure: bool = False
  merge_stderr: bool = False
  check_prefixes: Optional[tuple] = None  # None: no FileCheck


def run_lines(src: str) -> list[str]:
  return [m.group(1).strip() for m in map(_RUN_RE.match, src.splitlines())
          if m]


def invocations(src: str) -> list[Invocation]:
  """The interpreter invocations of a file's RUN lines."""
  out = []
  for line in run_lines(src):
    if "stablehlo-translate" not in line or "--interpret" not in line:
      continue
    inv = Invocation()
    stages = [s.strip() for s in line.split("|")]
    for stage in stages:
      try:
        words = shlex.split(stage)
      except ValueError:
        words = stage.split()
      if not words:
        continue
      if "stablehlo-translate" in words:
        k = words.index("stablehlo-translate")
        if "not" in words[:k]:
          inv.expect_failure = True
        for w in words[k + 1:]:
          if w in ("-split-input-file", "--split-input-file"):
            inv.split = True
          elif w.startswith("--args="):
            inv.args = w[len("--args="):]
          elif w == "--interpreter-print-dense":
            inv.print_dense = True
          elif w == "2>&1":
            inv.merge_stderr = True
      elif words and words[0] == "FileCheck":
        prefixes = ("CHECK",)
        for w in words[1:]:
          if w.startswith(("--check-prefix=", "--check-prefixes=")):
            prefixes = tuple(w.split("=", 1)[1].split(","))
        inv.check_prefixes = prefixes
    out.append(inv)
  return out


def is_enabled(src: str) -> bool:
  return bool(invocations(src))


def split(src: str, inv: Invocation) -> list[tuple[str, int]]:
  if inv.split:
    return [(c.text, c.first_line) for c in mlir_text.split_input_file(src)]
  return [(src, 0)]


class LitFailure(AssertionError):
  pass


def run_invocation(text: str, filename: str, offset: int,
                   inv: Invocation) -> None:
  """Runs one case under one invocation; raises on failure."""
  out = io.StringIO()
  opts = interpreter.Options(print_dense=inv.print_dense, out=out)
  error = None
  try:
    call_args = cli_args.parse_args(inv.args) if inv.args is not None else ()
    conformance_run.run_case(text, filename, offset, opts, args=call_args)
  except Exception as e:  # pylint: disable=broad-except
    if not inv.expect_failure:
      raise
    error = e
  if inv.expect_failure and error is None:
    raise LitFailure("expected the run to fail (RUN: not ...), it passed")
  if inv.check_prefixes is not None:
    output = out.getvalue()
    if inv.merge_stderr and error is not None:
      output += f"{error}\n"
    filecheck(output, text, inv.check_prefixes)


def filecheck(output: str, check_text: str, prefixes) -> None:
  """The directives in `check_text` for `prefixes` must match `output`
  (support.testing.filecheck); a case without any passes."""
  try:
    _filecheck.filecheck(output, check_text, prefixes,
                         require_directives=False)
  except _filecheck.FileCheckError as e:
    raise LitFailure(str(e)) from None


def run_file_cases(src: str, filename: str):
  """Yields (first_line, error_or_None) per case of the file's first
  interpreter invocation; every other invocation is applied to the same
  cases and folded into their verdicts."""
  invs = invocations(src)
  if not invs:
    return
  main = invs[0]
  cases = split(src, main)
  for text, offset in cases:
    err = None
    for inv in invs:
      try:
        run_invocation(text, filename, offset, inv)
      except Exception as e:  # pylint: disable=broad-except
        err = e
        break
    yield offset, err
