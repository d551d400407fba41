r"""Runs a StableHLO conformance corpus through the compiler: CHLO and
quantized-type legalization, StableHLO -> HLO import, the default HLO pass
pipeline (verified after every pass), and an execution backend.

  python -m xla.tools.hlo_conformance --suite testdata --jobs 2
  python -m xla.tools.hlo_conformance --suite testdata --sample 40 \
      --no-passes --backend evaluator --list-failures
  python -m xla.tools.hlo_conformance --suite testdata FILE...

Cases are chosen as the interpreter runner (`python -m
stablehlo.tools.conformance --mode interpret`) chooses them: a file counts
only when one of its RUN lines invokes `stablehlo-translate --interpret`
(so RUN-DISABLED files and the round-trip-only dynamic/ files are skipped),
and a file whose RUN line splits its input (`-split-input-file`, as the
quantized/ files do) counts once per case. The percentage printed is of
those interpreter-enabled cases.

Backends (`--backend`): `evaluator` (xla.hlo.evaluator, the default) and
`cpu` (xla.service.cpu.cpu_compiler, imported only when asked for:
`compile(hlo_module) -> exe`, `exe.execute(args, custom_calls=...)`).

`--list-failures [FILE]` prints (or writes to FILE) the failing cases
grouped by their first error line, largest group first. The last line
printed is exactly `N passed, N failed`. Exit status: 0 all passed,
1 a case failed, 2 bad usage (e.g. an unavailable backend).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import importlib
import pathlib
import re
import sys
import time
from typing import Optional

import support
from support import env

SUITES = ("testdata",)
BACKENDS = ("evaluator", "cpu")
_CPU_COMPILER = "xla.service.cpu.cpu_compiler"


def suite_files(suite: str) -> list[pathlib.Path]:
  root = env.stablehlo_corpus(suite)
  if root is None:
    return []
  return sorted(p for p in pathlib.Path(root).rglob("*.mlir") if p.is_file())


def case_id(suite: str, path: str, offset: int) -> str:
  """`suite/relative/path.mlir:LINE`, as the interpreter runner names
  cases."""
  parts = pathlib.Path(path).parts
  if suite in parts:
    rel = "/".join(parts[len(parts) - parts[::-1].index(suite) - 1:])
  else:
    rel = f"{suite}/{pathlib.Path(path).name}"
  return f"{rel}:{offset + 1}"


def enabled_cases(src: str) -> Optional[list[tuple[str, int, bool]]]:
  """(text, line_offset, expect_failure) per interpreter-enabled case, or
  None when the file has no enabled `stablehlo-translate --interpret` RUN
  line (the interpreter runner's selection, `interpreter/lit.py`)."""
  from stablehlo import lit  # pylint: disable=g-import-not-at-top
  invocations = lit.invocations(src)
  if not invocations:
    return None
  main = invocations[0]
  return [(text, offset, main.expect_failure)
          for text, offset in lit.split(src, main)]


# -- backends -----------------------------------------------------------------


def cpu_backend_error() -> Optional[str]:
  """None when the CPU backend can be loaded, else why not."""
  try:
    module = importlib.import_module(_CPU_COMPILER)
  except ImportError as e:
    return (f"backend 'cpu' needs {_CPU_COMPILER}, which is not available "
            f"({type(e).__name__}: {e})")
  if not callable(getattr(module, "compile", None)):
    return f"backend 'cpu': {_CPU_COMPILER} has no compile(hlo_module)"
  return None


def _cpu_backend(hlo, args, custom_calls) -> list:
  error = cpu_backend_error()
  if error is not None:
    raise support.UnimplementedError(error)
  compiler = importlib.import_module(_CPU_COMPILER)
  exe = compiler.compile(hlo)
  return list(exe.execute(list(args), custom_calls=custom_calls))


def get_backend(name: str):
  """fn(hlo, args, custom_calls) -> flat results, for `--backend NAME`."""
  if name == "evaluator":
    from xla.translate import conformance_mode  # pylint: disable=g-import-not-at-top
    return conformance_mode.evaluator_backend
  if name == "cpu":
    return _cpu_backend
  raise support.InvalidArgumentError(
      f"unknown backend '{name}'; known: {', '.join(BACKENDS)}")


def default_pipeline():
  """hlo_opt's `default` pipeline (passes not available are skipped)."""
  from xla.tools import hlo_opt  # pylint: disable=g-import-not-at-top
  return hlo_opt.build_named_pipeline("default")


# -- running ------------------------------------------------------------------


def _error_line(e: BaseException) -> str:
  lines = str(e).strip().splitlines()
  return f"{type(e).__name__}: {lines[0] if lines else ''}"


def run_file(work) -> tuple[str, list[tuple[str, Optional[str]]], bool]:
  """(path, [(case id, None or first error line)], enabled) for one file."""
  suite, path, passes, backend_name = work
  from xla.translate import conformance_mode  # pylint: disable=g-import-not-at-top
  try:
    src = pathlib.Path(path).read_text(encoding="utf-8",
                                       errors="surrogateescape")
    cases = enabled_cases(src)
  except Exception as e:  # pylint: disable=broad-except
    return path, [(case_id(suite, path, 0), _error_line(e))], True
  if cases is None:
    return path, [], False
  backend = get_backend(backend_name)
  results = []
  for text, offset, expect_failure in cases:
    cid = case_id(suite, path, offset)
    err = None
    try:
      pipeline = default_pipeline() if passes else None
      conformance_mode.run_case(text, path, offset, pipeline=pipeline,
                                backend=backend)
    except Exception as e:  # pylint: disable=broad-except
      err = _error_line(e)
    if expect_failure:
      err = None if err else "expected the run to fail (RUN: not ...)"
    results.append((cid, err))
  return path, results, True


_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_LOCATION = re.compile(r"^\S+\.mlir:\d+(:\d+)?:\s*(error:\s*)?")


def failure_group(message: str) -> str:
  """The grouping key of a first error line: without the file location
  and with numbers replaced by N."""
  kind, _, rest = message.partition(": ")
  rest = _LOCATION.sub("", rest.strip())
  return f"{kind}: {_NUMBER.sub('N', rest)[:160]}"


def format_failure_groups(failures: list[tuple[str, str]]) -> str:
  groups: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
  for cid, msg in failures:
    groups[failure_group(msg)].append((cid, msg))
  out = []
  for key, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]),
                                                             kv[0])):
    out.append(f"[{len(members)}] {key}")
    for cid, msg in sorted(members):
      out.append(f"    {cid}  {msg[:240]}")
  return "\n".join(out) + ("\n" if out else "")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m xla.tools.hlo_conformance")
  ap.add_argument("--suite", choices=SUITES, required=True)
  ap.add_argument("--sample", type=int, default=1,
                  help="take every Nth file (default: all)")
  ap.add_argument("--jobs", type=int, default=1)
  ap.add_argument("--backend", choices=BACKENDS, default="evaluator",
                  help="execution backend (default: evaluator)")
  ap.add_argument("--no-passes", dest="passes", action="store_false",
                  help="skip the HLO pass pipeline (import + backend only)")
  ap.add_argument("--list-failures", nargs="?", const="-", default=None,
                  metavar="FILE", help="list the failing cases grouped by "
                  "first error line, on stdout or in FILE")
  ap.add_argument("paths", nargs="*", help="files instead of the suite")
  args = ap.parse_args(argv)
  if args.backend == "cpu":
    error = cpu_backend_error()
    if error is not None:
      print(f"error: {error}", file=sys.stderr)
      return 2
  files = [str(p) for p in (args.paths or suite_files(args.suite))]
  if not files:
    print(env.missing_corpus_reason(args.suite))
    print("0 passed, 0 failed")
    return 0
  files = files[::max(1, args.sample)]
  work = [(args.suite, f, args.passes, args.backend) for f in files]
  start = time.monotonic()
  pool = None
  if args.jobs > 1:
    pool = concurrent.futures.ProcessPoolExecutor(args.jobs)
    results = pool.map(run_file, work, chunksize=2)
  else:
    results = map(run_file, work)
  passed = 0
  failures: list[tuple[str, str]] = []
  not_enabled = 0
  for i, (_, cases, enabled) in enumerate(results):
    not_enabled += not enabled
    for cid, err in cases:
      if err is None:
        passed += 1
      else:
        failures.append((cid, err))
        print(f"FAIL {cid}: {err[:300]}", flush=True)
    if sys.stderr.isatty() or (i + 1) % 100 == 0 or i + 1 == len(work):
      print(f"\r[{i + 1}/{len(work)}] {passed} passed, {len(failures)} "
            f"failed, {time.monotonic() - start:.1f}s", end="",
            file=sys.stderr, flush=True)
  if pool is not None:
    pool.shutdown()
  print(file=sys.stderr)
  if args.list_failures:
    listing = format_failure_groups(failures)
    if args.list_failures == "-":
      print(listing, end="")
    else:
      pathlib.Path(args.list_failures).write_text(listing, encoding="utf-8")
  total = passed + len(failures)
  pct = 100.0 * passed / total if total else 100.0
  pipeline = "default pipeline" if args.passes else "no passes"
  print(f"{total} interpreter-enabled cases ({len(files)} files, "
        f"{not_enabled} not enabled); {pipeline}, backend {args.backend}: "
        f"{pct:.2f}% passed")
  print(f"{passed} passed, {len(failures)} failed")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
