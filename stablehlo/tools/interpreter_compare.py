r"""Differential run and benchmark of our interpreter against jaxlib's
StableHLO reference interpreter (`eval_module`; a test-only oracle).

  python -m stablehlo.tools.interpreter_compare --suite interpret
  python -m stablehlo.tools.interpreter_compare --suite testdata --jobs 8
  python -m stablehlo.tools.interpreter_compare --bench --top 50

Each case has its checks turned into results (`interpreter_oracle.
strip_checks`); both interpreters run the same text. Verdicts: identical
(bit for bit), close (floats within 3 ULP), differ, or skipped (one side
cannot run it; the reason is counted). `--bench` times both on the N
largest testdata files (interpretation only, parsing excluded) and prints a
ratio table with the geometric mean.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import math
import pathlib
import sys
import time

from stablehlo._src import interpreter
from stablehlo._src import text as mlir_text
from stablehlo._src.interpreter import lit
from stablehlo._src.testing import interpreter_oracle as oracle
from stablehlo._src.testing import jaxlib_oracle
from stablehlo.tools import conformance
import support


def _cases(suite, path: pathlib.Path):
  src = path.read_text(encoding="utf-8", errors="surrogateescape")
  if suite == "testdata" and not lit.is_enabled(src):
    return []
  invs = lit.invocations(src) or [lit.Invocation()]
  return lit.split(src, invs[0])


def _ours(text: str):
  module = mlir_text.parse_module(text, "<stripped>")
  interp = interpreter.Interpreter(module)
  start = time.perf_counter()
  out = interp.run()
  return out, time.perf_counter() - start


def compare_file(job):
  suite, path = job
  rows = []
  for text, offset in _cases(suite, pathlib.Path(path)):
    cid = conformance.case_id(suite, path, offset)
    try:
      stripped = oracle.strip_checks(text, path)
    except support.XlaError as e:
      rows.append((cid, "skipped", f"not rewritable: {str(e)[:80]}"))
      continue
    if stripped is None:
      rows.append((cid, "skipped", "interpreter dialect or nested checks"))
      continue
    try:
      ours, _ = _ours(stripped)
    except Exception as e:  # pylint: disable=broad-except
      rows.append((cid, "skipped", f"ours failed: {type(e).__name__}"))
      continue
    try:
      theirs, _ = oracle.jaxlib_eval(stripped)
    except support.XlaError as e:
      reason = str(e).splitlines()[0]
      reason = "jaxlib crashed" if "crashed" in reason else "jaxlib failed"
      rows.append((cid, "skipped", reason))
      continue
    c = oracle.compare(ours, theirs)
    rows.append((cid, c.verdict, c.detail))
  return rows


def run_compare(args) -> int:
  files = conformance.suite_files(args.suite)[::max(1, args.sample)]
  jobs = [(args.suite, str(p)) for p in files]
  counts = collections.Counter()
  skip_reasons = collections.Counter()
  differ = []
  with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
    for i, rows in enumerate(pool.map(compare_file, jobs, chunksize=2)):
      for cid, verdict, detail in rows:
        counts[verdict] += 1
        if verdict == "skipped":
          skip_reasons[detail] += 1
        elif verdict == "differ":
          differ.append((cid, detail))
          print(f"DIFFER {cid}: {detail}", flush=True)
      if (i + 1) % 100 == 0:
        print(f"[{i + 1}/{len(jobs)}]", file=sys.stderr, flush=True)
  both = counts["identical"] + counts["close"] + counts["differ"]
  print(f"cases run by both: {both}")
  for v in ("identical", "close", "differ"):
    share = 100.0 * counts[v] / both if both else 0.0
    print(f"  {v}: {counts[v]} ({share:.1f}%)")
  print(f"skipped: {counts['skipped']}")
  for reason, n in skip_reasons.most_common():
    print(f"  {n:5d}  {reason}")
  return 0


def run_bench(args) -> int:
  root = conformance.suite_files("testdata")
  enabled = []
  for p in root:
    src = p.read_text(encoding="utf-8", errors="surrogateescape")
    if lit.is_enabled(src) and "split-input-file" not in src.splitlines()[0]:
      enabled.append(p)
  enabled.sort(key=lambda p: p.stat().st_size, reverse=True)
  ratios = []
  print(f"{'file':60s} {'KiB':>6s} {'ours ms':>9s} {'jaxlib ms':>10s} "
        f"{'speedup':>8s}")
  for p in enabled[:args.top]:
    try:
      stripped = oracle.strip_checks(p.read_text(), str(p))
      if stripped is None:
        continue
      best_ours = min(_ours(stripped)[1] for _ in range(args.repeat))
      best_theirs = min(oracle.jaxlib_eval(stripped)[1]
                        for _ in range(args.repeat))
    except Exception as e:  # pylint: disable=broad-except
      print(f"{p.name[:60]:60s} skipped: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:60]}")
      continue
    ratio = best_theirs / best_ours
    ratios.append(ratio)
    print(f"{p.name[:60]:60s} {p.stat().st_size / 1024:6.0f} "
          f"{best_ours * 1e3:9.2f} {best_theirs * 1e3:10.2f} {ratio:7.1f}x",
          flush=True)
  if ratios:
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"geomean speedup over jaxlib eval_module on {len(ratios)} files: "
          f"{geo:.1f}x (min {min(ratios):.1f}x, max {max(ratios):.1f}x)")
  return 0


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m stablehlo.tools.interpreter_compare",
      description="Compare our interpreter with jaxlib's eval_module "
      "(results and speed).")
  ap.add_argument("--suite", choices=("interpret", "testdata"),
                  default="interpret")
  ap.add_argument("--sample", type=int, default=1,
                  help="take every Nth file (default: all)")
  ap.add_argument("--jobs", type=int, default=4)
  ap.add_argument("--bench", action="store_true",
                  help="time both on the largest testdata files")
  ap.add_argument("--top", type=int, default=50,
                  help="number of files for --bench (default 50)")
  ap.add_argument("--repeat", type=int, default=3,
                  help="runs per file for --bench; the best is kept")
  args = ap.parse_args(argv)
  reason = jaxlib_oracle.skip_reason()
  if reason:
    print(reason, file=sys.stderr)
    return 2
  if args.bench:
    return run_bench(args)
  return run_compare(args)


if __name__ == "__main__":
  sys.exit(main())
