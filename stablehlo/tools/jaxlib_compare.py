"""Differential check of our MLIR text against jaxlib's (StableHLO 1.17.0).

For every corpus case that jaxlib can parse:
  * jaxlib's parser must accept the text our printer produces (`accepted`);
  * we report how often our pretty text equals jaxlib's own print of the
    same module (`identical`), both without locations, and list the first
    differing line of the first few cases that differ (`--show N`).
With --bench it also times parsing the whole corpus with our parser and with
jaxlib's, and prints the ratio (a benchmark, never a test assertion).

Usage:
  python -m stablehlo.tools.jaxlib_compare --suite testdata [--sample N]
  python -m stablehlo.tools.jaxlib_compare --suite interpret --strip-checks
  python -m stablehlo.tools.jaxlib_compare --suite interpret --bench
  python -m stablehlo.tools.jaxlib_compare --suite testdata --bench --repeat 3
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import support
from stablehlo._src import text as shlo_text
from stablehlo._src.testing import jaxlib_oracle
from stablehlo.tools import conformance
from support import env

SUITES = ("interpret", "testdata", "vhlo")


@dataclasses.dataclass
class Result:
  cases: int = 0
  jaxlib_parsed: int = 0
  accepted: int = 0
  identical: int = 0
  rejected: list = dataclasses.field(default_factory=list)
  ours_errors: list = dataclasses.field(default_factory=list)
  first_diffs: list = dataclasses.field(default_factory=list)


def corpus_cases(suite: str, sample: int = 1):
  """Yields (name, text) per case, split as the conformance runner does."""
  root = env.stablehlo_corpus(suite)
  if root is None:
    raise support.NotFoundError(env.missing_corpus_reason(suite))
  for path in conformance.suite_files(suite, root)[::max(sample, 1)]:
    rel = path.relative_to(root).as_posix()
    cases = conformance.split_cases(suite, path)
    for i, (text, _) in enumerate(cases):
      yield (f"{rel}#{i}" if len(cases) > 1 else rel), text


def _without_checks(name: str, source: str):
  """The case with its check ops turned into results (jaxlib has no `check`
  dialect), or None."""
  from stablehlo._src.testing import interpreter_oracle  # pylint: disable=g-import-not-at-top
  try:
    return interpreter_oracle.strip_checks(source, name)
  except support.XlaError:
    return None


def compare(suite: str, sample: int = 1, progress=True, show: int = 5,
            strip_checks: bool = False) -> Result:
  """With `strip_checks`, a case jaxlib cannot parse is retried with its
  check ops rewritten into results (most of the interpret suite)."""
  res = Result()
  for n, (name, source) in enumerate(corpus_cases(suite, sample)):
    res.cases += 1
    if progress and n % 100 == 0:
      print(f"\r[{suite}] {n} cases...", end="", file=sys.stderr, flush=True)
    theirs = jaxlib_oracle.canonical_text(source)
    if theirs is None and strip_checks:
      stripped = _without_checks(name, source)
      if stripped is not None:
        theirs = jaxlib_oracle.canonical_text(stripped)
        source = stripped
    if theirs is None:
      continue
    res.jaxlib_parsed += 1
    try:
      ours = shlo_text.print_module(shlo_text.parse_module(source, name))
    except support.XlaError as e:
      res.ours_errors.append((name, str(e).splitlines()[0]))
      continue
    reparsed = jaxlib_oracle.canonical_text(ours)
    if reparsed is None:
      res.rejected.append((name, jaxlib_oracle.parse(ours)[1][:300]))
      continue
    res.accepted += 1
    if ours.strip() == theirs.strip():
      res.identical += 1
    elif len(res.first_diffs) < show:
      res.first_diffs.append((name, _first_diff(ours, theirs)))
  if progress:
    print(file=sys.stderr)
  return res


def _first_diff(ours: str, theirs: str) -> str:
  for a, b in zip(ours.splitlines(), theirs.splitlines()):
    if a != b:
      return f"ours:   {a.strip()}\n    jaxlib: {b.strip()}"
  return "(line count differs)"


def bench(suite: str, sample: int = 1, repeat: int = 3
          ) -> tuple[float, float, int, int]:
  """(our seconds, jaxlib's seconds, cases, source bytes): the best of
  `repeat` passes over the suite for each side, the passes interleaved so
  both see the same machine load."""
  cases = list(corpus_cases(suite, sample))
  nbytes = sum(len(source.encode()) for _, source in cases)

  def ours():
    for name, source in cases:
      try:
        shlo_text.parse_module(source, name)
      except support.XlaError:
        pass

  def theirs():
    for _, source in cases:
      jaxlib_oracle.parse(source)

  jaxlib_oracle.ir_context()  # created once, outside the timing
  best_ours = best_theirs = float("inf")
  for _ in range(max(repeat, 1)):
    for fn, which in ((ours, 0), (theirs, 1)):
      t0 = time.perf_counter()
      fn()
      dt = time.perf_counter() - t0
      if which == 0:
        best_ours = min(best_ours, dt)
      else:
        best_theirs = min(best_theirs, dt)
  return best_ours, best_theirs, len(cases), nbytes


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m stablehlo.tools.jaxlib_compare",
      description="Compare our StableHLO text parser/printer with jaxlib's.")
  parser.add_argument("--suite", choices=SUITES, default="testdata")
  parser.add_argument("--sample", type=int, default=1,
                      help="take every N-th file (default: all)")
  parser.add_argument("--show", type=int, default=5,
                      help="list the first difference of this many cases")
  parser.add_argument("--strip-checks", action="store_true",
                      help="retry cases jaxlib cannot parse with their "
                      "check ops rewritten into results")
  parser.add_argument("--bench", action="store_true",
                      help="time parsing with ours vs jaxlib; print the ratio")
  parser.add_argument("--repeat", type=int, default=3,
                      help="with --bench: passes per side, the best is kept")
  args = parser.parse_args(argv)
  reason = jaxlib_oracle.skip_reason()
  if reason:
    print(f"error: {reason}", file=sys.stderr)
    return 2
  try:
    if args.bench:
      ours, theirs, n, nbytes = bench(args.suite, args.sample, args.repeat)
      mb = nbytes / 1e6
      print(f"parse {n} {args.suite} cases ({mb:.1f} MB of text), best of "
            f"{args.repeat}")
      print(f"parse ours  : {ours:6.2f} s {n / ours:8.1f} cases/s "
            f"{mb / ours:7.2f} MB/s")
      print(f"parse jaxlib: {theirs:6.2f} s {n / theirs:8.1f} cases/s "
            f"{mb / theirs:7.2f} MB/s")
      print(f"parse ratio ours/jaxlib (time): {ours / theirs:.2f}x")
      return 0
    res = compare(args.suite, args.sample, show=args.show,
                  strip_checks=args.strip_checks)
  except support.XlaError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  for name, err in res.ours_errors:
    print(f"OURS FAILED {name}: {err}")
  for name, err in res.rejected:
    print(f"JAXLIB REJECTED our print of {name}: {err}")
  for name, diff in res.first_diffs:
    print(f"first difference in {name}:\n    {diff}")
  pct = 100.0 * res.identical / max(res.accepted, 1)
  print(f"{res.cases} cases, jaxlib parses {res.jaxlib_parsed}; it accepts "
        f"our print of {res.accepted}; identical text: {res.identical} "
        f"({pct:.1f}%)")
  failed = len(res.rejected) + len(res.ours_errors)
  print(f"{res.accepted} passed, {failed} failed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
