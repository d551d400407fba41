r"""Runs the StableHLO conformance corpora through the text tools.

  python -m stablehlo.tools.conformance --suite interpret --mode roundtrip
  python -m stablehlo.tools.conformance --suite testdata --mode parse \
      --sample 10 --jobs 8

Modes are registered in `MODES` (name -> function(text, filename,
line_offset) raising on failure); new modes add an entry there.
The last line printed is exactly `N passed, N failed`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import sys
import time
import traceback
from typing import Callable

from stablehlo._src import text as mlir_text
from stablehlo._src.text import structural
from support._src import env

SUITES = ("interpret", "testdata", "vhlo")


class RoundTripError(AssertionError):
  pass


def mode_parse(src: str, filename: str, line_offset: int) -> None:
  mlir_text.parse_module(src, filename, line_offset)


def mode_roundtrip(src: str, filename: str, line_offset: int) -> None:
  """parse -> print -> parse gives the same IR; printing again is stable;
  the generic form round-trips too."""
  m1 = mlir_text.parse_module(src, filename, line_offset)
  d1 = structural.dump_module(m1)
  for generic in (False, True):
    p1 = mlir_text.print_module(m1, generic=generic)
    try:
      m2 = mlir_text.parse_module(p1, f"<printed {filename}>")
    except mlir_text.ParseError as e:
      raise RoundTripError(f"printed form does not parse: {e}") from e
    if structural.dump_module(m2) != d1:
      raise RoundTripError(f"IR differs after printing "
                           f"({'generic' if generic else 'pretty'} form)")
    p2 = mlir_text.print_module(m2, generic=generic)
    if p1 != p2:
      raise RoundTripError("printing is not stable:\n" + _first_diff(p1, p2))


def _first_diff(a: str, b: str) -> str:
  for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
    if x != y:
      return f"line {i + 1}:\n- {x[:300]}\n+ {y[:300]}"
  return "(lengths differ)"


MODES: dict[str, Callable[[str, str, int], None]] = {
    "parse": mode_parse,
    "roundtrip": mode_roundtrip,
}


def suite_files(suite: str, root: pathlib.Path | None = None
                ) -> list[pathlib.Path]:
  root = root or env.stablehlo_corpus(suite)
  if root is None:
    return []
  return sorted(p for p in root.rglob("*.mlir") if p.is_file())


def split_cases(suite: str, path: pathlib.Path):
  """(text, line_offset) per case: interpret and vhlo files are split at
  `// -----` as upstream runs them; testdata files are whole programs."""
  src = path.read_text(encoding="utf-8", errors="surrogateescape")
  if suite == "testdata":
    return [(src, 0)]
  return [(c.text, c.first_line)
          for c in mlir_text.split_input_file(src)]


def run_file(args) -> tuple[str, int, int, list[str]]:
  suite, mode, path = args
  fn = MODES[mode]
  passed = failed = 0
  errors = []
  try:
    cases = split_cases(suite, pathlib.Path(path))
  except OSError as e:
    return path, 0, 1, [str(e)]
  for src, offset in cases:
    try:
      fn(src, path, offset)
      passed += 1
    except mlir_text.ParseError as e:
      failed += 1
      errors.append(str(e))
    except RoundTripError as e:
      failed += 1
      errors.append(f"{path}:{offset + 1}: roundtrip: {e}")
    except Exception:  # pylint: disable=broad-except
      failed += 1
      errors.append(f"{path}:{offset + 1}: internal error:\n" +
                    traceback.format_exc(limit=8))
  return path, passed, failed, errors


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m stablehlo.tools.conformance",
      description="Run a StableHLO conformance corpus through the MLIR text "
      "parser/printer.")
  ap.add_argument("--suite", choices=SUITES, required=True)
  ap.add_argument("--mode", choices=sorted(MODES), default="parse")
  ap.add_argument("--sample", type=int, default=1,
                  help="take every Nth file (default: all)")
  ap.add_argument("--jobs", type=int, default=1,
                  help="worker processes (default 1)")
  ap.add_argument("paths", nargs="*", help="files to run instead of the "
                  "whole suite")
  args = ap.parse_args(argv)
  if args.paths:
    files = [pathlib.Path(p) for p in args.paths]
  else:
    if env.stablehlo_corpus(args.suite) is None:
      print(env.missing_corpus_reason(args.suite), file=sys.stderr)
      return 2
    files = suite_files(args.suite)
  files = files[::max(1, args.sample)]
  work = [(args.suite, args.mode, str(p)) for p in files]
  passed = failed = 0
  start = time.monotonic()
  if args.jobs > 1:
    pool = concurrent.futures.ProcessPoolExecutor(args.jobs)
    results = pool.map(run_file, work, chunksize=8)
  else:
    pool = None
    results = map(run_file, work)
  for i, (path, p, f, errors) in enumerate(results):
    passed += p
    failed += f
    for e in errors:
      print(f"FAIL {e}", flush=True)
    if sys.stderr.isatty() or (i + 1) % 200 == 0 or i + 1 == len(work):
      print(f"\r[{i + 1}/{len(work)}] {passed} passed, {failed} failed, "
            f"{time.monotonic() - start:.1f}s", end="", file=sys.stderr,
            flush=True)
  if pool is not None:
    pool.shutdown()
  print(file=sys.stderr)
  print(f"{passed} passed, {failed} failed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
