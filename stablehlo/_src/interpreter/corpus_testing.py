"""Test helper: run one upstream corpus file the way its RUN lines invoke
the interpreter (see `lit`), skipping when the corpus is absent.

Kernel tests use it for the corpus files of their ops, so the split rule
(`-split-input-file` or not, e.g. `call.mlir` runs whole) lives in one
place.
"""

from __future__ import annotations

from stablehlo._src.interpreter import conformance_run
from stablehlo._src.interpreter import lit
from support import env


def run_corpus_file(suite: str, relpath: str, disabled_ok: bool = False
                    ) -> int:
  """Runs `suite/relpath`; raises the first case's error; returns the
  number of cases run. A file with no enabled interpreter RUN line is an
  error here (a test that names it expects it to run), unless `disabled_ok`:
  then it runs whole, as one case (for files upstream disabled that our
  interpreter passes)."""
  import pytest  # pylint: disable=g-import-not-at-top  (tests only)
  root = env.stablehlo_corpus(suite)
  if root is None:
    pytest.skip(env.missing_corpus_reason(suite))
  path = root / relpath
  if not path.exists():
    pytest.skip(f"{relpath} not in this corpus")
  src = path.read_text(encoding="utf-8")
  if not lit.is_enabled(src):
    if disabled_ok:
      conformance_run.run_case(src, str(path))
      return 1
    raise AssertionError(f"{relpath} has no enabled interpreter RUN line")
  n = 0
  for _, err in lit.run_file_cases(src, str(path)):
    if err is not None:
      raise err
    n += 1
  return n
