"""Environment and filesystem helpers.

The conformance corpora are data outside the repository. They are found at
$OPENXLA_CONFORMANCE_DIR when set, else at `../shared/conformance` beside the
checkout. Under `bazel test` the checkout is found by resolving this file's
runfiles symlink back to the source tree.
"""

from __future__ import annotations

import os
import pathlib

CONFORMANCE_ENV = "OPENXLA_CONFORMANCE_DIR"


def source_root() -> pathlib.Path:
  """The repository checkout this module was loaded from (symlinks resolved)."""
  return pathlib.Path(__file__).resolve().parents[2]


def conformance_dir() -> pathlib.Path | None:
  """The conformance corpora root (holding `stablehlo/`), or None if absent."""
  env = os.environ.get(CONFORMANCE_ENV)
  if env:
    path = pathlib.Path(env)
    return path if path.is_dir() else None
  candidates = [source_root().parent / "shared" / "conformance"]
  cwd = pathlib.Path.cwd().resolve()
  candidates += [p / "shared" / "conformance" for p in cwd.parents]
  for path in candidates:
    if (path / "stablehlo").is_dir():
      return path
  return None


def stablehlo_corpus(suite: str) -> pathlib.Path | None:
  """`<conformance>/stablehlo/<suite>` (interpret, testdata, vhlo) or None."""
  root = conformance_dir()
  if root is None:
    return None
  path = root / "stablehlo" / suite
  return path if path.is_dir() else None


def missing_corpus_reason(suite: str) -> str:
  return (f"StableHLO conformance corpus '{suite}' not found: set "
          f"{CONFORMANCE_ENV} or place it at ../shared/conformance/stablehlo")
