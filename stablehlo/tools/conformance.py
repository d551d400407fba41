r"""Runs the StableHLO conformance corpora through our tools.

  python -m stablehlo.tools.conformance --suite interpret --mode roundtrip
  python -m stablehlo.tools.conformance --suite testdata --mode parse \
      --sample 10 --jobs 8
  python -m stablehlo.tools.conformance --suite interpret --mode interpret \
      --xfail stablehlo/tools/testdata/interpret_xfail.txt

`--mode interpret` runs each file as its RUN lines invoke
`stablehlo-translate --interpret` (see `interpreter/lit.py`); files with no
enabled interpreter RUN line are skipped. `--xfail FILE` lists expected
failures (`suite/path:line  reason`): they are reported but not counted as
failures, and a listed case that passes is a failure (so the list can only
shrink).

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
from stablehlo._src.interpreter import lit
from stablehlo._src.text import structural
from stablehlo._src.vhlo import conformance_modes as vhlo_modes
import support
from support import env

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


def mode_interpret(src: str, filename: str, line_offset: int) -> None:
  """Runs the case with the interpreter (@main or the only function);
  used directly only for single cases - whole files go through their RUN
  lines in `run_file`."""
  from stablehlo._src.interpreter import conformance_run  # pylint: disable=g-import-not-at-top
  conformance_run.run_case(src, filename, line_offset)


MODES: dict[str, Callable[[str, str, int], None]] = {
    "parse": mode_parse,
    "roundtrip": mode_roundtrip,
    "interpret": mode_interpret,
}
MODES.update(vhlo_modes.MODES)  # deserialize, serialize, serialize_bytes
# Modes that run files by their RUN lines (per-case results, skips).
_FILE_MODES = {"interpret"}


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


def case_id(suite: str, path: str, offset: int) -> str:
  """`suite/relative/path.mlir:LINE`, the key of the xfail lists."""
  p = pathlib.Path(path)
  parts = p.parts
  if suite in parts:
    rel = "/".join(parts[len(parts) - parts[::-1].index(suite) - 1:])
  else:
    rel = f"{suite}/{p.name}"
  return f"{rel}:{offset + 1}"


def run_file_by_run_lines(suite: str, path: str):
  """(path, passed ids, failed [(id, message)], skipped) for one file."""
  try:
    src = pathlib.Path(path).read_text(encoding="utf-8",
                                       errors="surrogateescape")
  except OSError as e:
    return path, [], [(case_id(suite, path, 0), str(e))], 0
  if not lit.is_enabled(src):
    return path, [], [], 1
  passed, failed = [], []
  try:
    for offset, err in lit.run_file_cases(src, path):
      cid = case_id(suite, path, offset)
      if err is None:
        passed.append(cid)
      else:
        msg = str(err).strip() or type(err).__name__
        if not isinstance(err, (support.XlaError, AssertionError)):
          msg = f"internal error: {type(err).__name__}: {msg}"
        failed.append((cid, msg))
  except Exception as e:  # pylint: disable=broad-except
    failed.append((case_id(suite, path, 0),
                   f"internal error: {type(e).__name__}: {e}"))
  return path, passed, failed, 0


def run_file(args) -> tuple[str, int, int, list[str]]:
  suite, mode, path = args
  if mode in _FILE_MODES:
    return run_file_by_run_lines(suite, path)
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
    except (support.XlaError, AssertionError) as e:
      failed += 1
      errors.append(f"{path}:{offset + 1}: {mode}: {e}")
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
  ap.add_argument("--xfail", default=None, metavar="FILE",
                  help="expected failures: lines 'suite/path:line  reason'")
  ap.add_argument("--list-failures", default=None, metavar="FILE",
                  help="write the failing case ids with their first error "
                  "line to FILE (a starting point for an xfail list)")
  ap.add_argument("paths", nargs="*", help="files to run instead of the "
                  "whole suite")
  args = ap.parse_args(argv)
  if args.mode in _FILE_MODES:
    return _main_by_cases(args)
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


def read_xfail(path: str) -> dict[str, str]:
  """id -> reason from an xfail list ('#' starts a comment line)."""
  out = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line or line.startswith("#"):
        continue
      key, _, reason = line.partition(" ")
      out[key] = reason.strip()
  return out


def _main_by_cases(args) -> int:
  if args.paths:
    files = [pathlib.Path(p) for p in args.paths]
  else:
    if env.stablehlo_corpus(args.suite) is None:
      print(env.missing_corpus_reason(args.suite), file=sys.stderr)
      return 2
    files = suite_files(args.suite)
  files = files[::max(1, args.sample)]
  xfail = read_xfail(args.xfail) if args.xfail else {}
  work = [(args.suite, args.mode, str(p)) for p in files]
  start = time.monotonic()
  pool = None
  if args.jobs > 1:
    pool = concurrent.futures.ProcessPoolExecutor(args.jobs)
    results = pool.map(run_file, work, chunksize=4)
  else:
    results = map(run_file, work)
  passed = failed = skipped = xfailed = 0
  by_dir: dict[str, list[int]] = {}
  failures = []
  for i, (path, ok_ids, bad, skip) in enumerate(results):
    skipped += skip
    sub = pathlib.Path(path).parent.name
    sub = sub if sub in ("dynamic", "quantized", "chlo") else "."
    tally = by_dir.setdefault(sub, [0, 0, 0])
    tally[2] += skip
    for cid in ok_ids:
      if cid in xfail:
        failed += 1
        tally[1] += 1
        print(f"XPASS {cid}: listed as an expected failure but passes; "
              "remove it from the list", flush=True)
      else:
        passed += 1
        tally[0] += 1
    for cid, msg in bad:
      failures.append((cid, msg))
      if cid in xfail:
        xfailed += 1
        continue
      failed += 1
      tally[1] += 1
      print(f"FAIL {cid}: {msg}", flush=True)
    if sys.stderr.isatty() or (i + 1) % 100 == 0 or i + 1 == len(work):
      print(f"\r[{i + 1}/{len(work)}] {passed} passed, {failed} failed, "
            f"{time.monotonic() - start:.1f}s", end="", file=sys.stderr,
            flush=True)
  if pool is not None:
    pool.shutdown()
  print(file=sys.stderr)
  if args.list_failures:
    with open(args.list_failures, "w", encoding="utf-8") as f:
      for cid, msg in sorted(failures):
        first = msg.splitlines()[0] if msg else ""
        f.write(f"{cid}  {first[:200]}\n")
  if len(by_dir) > 1:
    for sub, (p, f, s) in sorted(by_dir.items()):
      name = "(top level)" if sub == "." else sub + "/"
      print(f"  {name}: {p} passed, {f} failed, {s} files not enabled")
  if skipped:
    print(f"{skipped} files skipped (no enabled interpreter RUN line)")
  if xfail:
    print(f"{xfailed} expected failures (listed in {args.xfail})")
  print(f"{passed} passed, {failed} failed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
