"""`python -m pjrt.tools.abi_fuzz`: bad-argument runs against a PJRT plugin.

    python -m pjrt.tools.abi_fuzz --plugin NAME_OR_PATH [--cases N] [--seed S]

Draws N cases (pjrt/tools/abi_fuzz_cases.py: wrong struct sizes, NULL args
and fields, deleted buffers and executables, wrong dtypes and shapes,
invalid formats, options, ids and layouts) and runs them against the plugin.
Each case must end in a PJRT_Error or, where the call is valid, success; it
must never take the process down.

The cases run in child processes forked from a clean fork server (the
plugin is never loaded in the process that forks, so no plugin thread is
forked half-way). A child loads the plugin, makes a client and runs cases
in order, reporting each start and result through a pipe; when it dies or
hangs, the case it was in is reported as a crash (with the signal and the
cause from its stderr) and a new child goes on with the rest.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from typing import Any, Callable, Iterable, Sequence

import support
from pjrt.tools import abi_fuzz_cases as cases_lib
from pjrt.tools import plugin_choice

# Seconds a child may spend on one case (or on loading the plugin).
CASE_TIMEOUT_S = 60
# Cases per child process before a fresh one takes over (bounds leaks).
BATCH = 250

_CRASH_CAUSES = ("Check failed", "FATAL", "terminate called", "what():",
                 "Assertion", "Segmentation fault", "Aborted")


# --------------------------------------------------------------------------
# The child.


def _child(conn, choice: str, case_records: list[dict], log_path: str):
  """Runs cases; sends {"start": i} and then a result record for each."""
  log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
  os.dup2(log, 1)
  os.dup2(log, 2)
  try:
    fixture = cases_lib.Fixture(plugin_choice.load(choice))
  except Exception as e:  # pylint: disable=broad-except
    conn.send({"fatal": f"cannot set up the plugin: {type(e).__name__}: "
                        f"{e}"})
    conn.close()
    # os._exit is the documented exit without teardown; no public alias.
    os._exit(3)  # pylint: disable=protected-access
  for record in case_records:
    case = cases_lib.Case(**record)
    conn.send({"start": case.index})
    result = cases_lib.run_case(fixture, case)
    result["index"] = case.index
    conn.send(result)
  conn.send({"done": True})
  conn.close()
  # Skip interpreter teardown: what the cases left behind is not the
  # plugin's next caller's business, and a crash there is no case's
  # (os._exit is the documented way; there is no public alias).
  os._exit(0)  # pylint: disable=protected-access


# --------------------------------------------------------------------------
# The parent.


@dataclasses.dataclass
class Result:
  """One case's outcome and verdict.

  Attributes:
    case: the case.
    outcome: ok, error, wrong, exception, skipped, crash or hang.
    code: the error's StatusCode number (outcome "error").
    message: the error message, what was wrong, or how the child ended.
    passed: True / False; None for a skipped case.
    known: a failure of a kind listed as known for this plugin.
  """

  case: cases_lib.Case
  outcome: str
  code: int | None = None
  message: str = ""
  passed: bool | None = None
  known: bool = False

  @property
  def failed(self) -> bool:
    return self.passed is False and not self.known

  def explain(self) -> str:
    """Why the case failed, in words."""
    info = self.case.info
    if self.outcome in ("crash", "hang"):
      return f"{'crashed' if self.outcome == 'crash' else 'hung'}: " + (
          self.message)
    if self.outcome == "exception":
      return ("the case raised in the harness (a bug of the case, or a "
              f"result it could not read): {self.message}")
    if self.outcome == "wrong":
      return f"succeeded with a wrong result: {self.message}"
    if self.outcome == "ok":
      return "succeeded, but the call is invalid: expected an error"
    name = _code_name(self.code)
    if info.expect == cases_lib.OK:
      return f"expected success, got {name}: {self.message}"
    return f"the error is not a clean PJRT_Error ({name}): {self.message!r}"

  def to_json(self) -> dict[str, Any]:
    return {**self.case.to_json(), "tier": self.case.info.tier,
            "expect": self.case.info.expect, "outcome": self.outcome,
            "code": _code_name(self.code) if self.code is not None else None,
            "message": self.message, "passed": self.passed,
            "known": self.known}


def _code_name(code: int | None) -> str:
  try:
    return support.StatusCode(code).name
  except (ValueError, TypeError):
    return str(code)


def _clean_error(code: int | None, message: str) -> bool:
  return (code not in (None, int(support.StatusCode.OK)) and
          bool(message.strip()) and
          "unknown PJRT error code" not in message and
          "error with code OK" not in message)


def judge(case: cases_lib.Case, record: dict) -> Result:
  """The verdict on one case's result record."""
  outcome = record["outcome"]
  result = Result(case, outcome, record.get("code"),
                  record.get("message", ""))
  expect = case.info.expect
  if outcome == "skipped":
    result.passed = None
  elif outcome == "ok":
    result.passed = expect in (cases_lib.OK, cases_lib.ANY)
  elif outcome == "error":
    result.passed = (expect in (cases_lib.ERROR, cases_lib.ANY) and
                     _clean_error(result.code, result.message))
  else:  # wrong, exception, crash, hang
    result.passed = False
  return result


def _how_it_ended(exitcode: int | None, log_text: str) -> str:
  if exitcode is None:
    how = f"no result within {CASE_TIMEOUT_S} s (killed)"
  elif exitcode < 0:
    try:
      how = f"killed by {signal.Signals(-exitcode).name}"
    except ValueError:
      how = f"killed by signal {-exitcode}"
  else:
    how = f"exited with status {exitcode}"
  lines = [l for l in log_text.strip().splitlines() if l.strip()]
  causes = [l for l in lines if any(k in l for k in _CRASH_CAUSES)][:2]
  if not causes:
    causes = lines[-2:]
  text = " | ".join(c.strip()[:300] for c in causes)
  return f"{how}; stderr: {text}" if text else how


def _read_new(path: str, offset: int) -> tuple[str, int]:
  try:
    with open(path, "rb") as f:
      f.seek(offset)
      data = f.read()
  except OSError:
    return "", offset
  return data.decode("utf-8", errors="replace")[-4000:], offset + len(data)


def _context():
  context = multiprocessing.get_context("forkserver")
  # The fork server imports the cases (numpy, pjrt) once; it never loads a
  # plugin, so every child starts from a process without plugin threads.
  context.set_forkserver_preload(["pjrt.tools.abi_fuzz_cases"])
  return context


def run(choice: str, cases: Sequence[cases_lib.Case], *,
        known: Iterable[str] = (), batch: int = BATCH,
        progress: Callable[[Result], None] | None = None) -> list[Result]:
  """Runs `cases` against plugin `choice` (a registered name or a path).

  Raises:
    support.FailedPreconditionError: the plugin cannot be loaded or a
      client cannot be created at all.
  """
  known = list(known)
  context = _context()
  by_index = {c.index: c for c in cases}
  pending = [c.index for c in cases]
  results: dict[int, Result] = {}
  with tempfile.TemporaryDirectory(prefix="pjrt_abi_fuzz_") as tmp:
    log_path = os.path.join(tmp, "child.log")
    log_offset = 0
    while pending:
      chunk = pending[:batch]
      receiver, sender = context.Pipe(duplex=False)
      child = context.Process(
          target=_child, daemon=True,
          args=(sender, choice, [by_index[i].to_json() for i in chunk],
                log_path))
      child.start()
      sender.close()
      started, finished, fatal, timed_out = None, False, None, False
      while True:
        if not receiver.poll(CASE_TIMEOUT_S):
          timed_out = True
          child.kill()
          break
        try:
          message = receiver.recv()
        except (EOFError, OSError):
          break
        if "fatal" in message:
          fatal = message["fatal"]
        elif "start" in message:
          started = message["start"]
        elif "done" in message:
          finished = True
        else:
          case = by_index[message.pop("index")]
          result = judge(case, message)
          result.known = (result.passed is False and
                          is_known(case.kind, known))
          results[case.index] = result
          started = None
          if progress:
            progress(result)
      receiver.close()
      child.join(10)
      if child.is_alive():
        child.kill()
        child.join()
      exitcode = None if timed_out else child.exitcode
      log_text, log_offset = _read_new(log_path, log_offset)
      if fatal is not None:
        raise support.FailedPreconditionError(f"{fatal}\n{log_text[-2000:]}")
      if started is not None:
        # The child died (or was killed for hanging) inside this case.
        case = by_index[started]
        result = Result(case, "hang" if timed_out else "crash",
                        message=_how_it_ended(exitcode, log_text),
                        passed=False)
        result.known = is_known(case.kind, known)
        results[started] = result
        if progress:
          progress(result)
      elif not finished and not any(i in results for i in chunk):
        raise support.FailedPreconditionError(
            "the fuzz child died before running a case: " +
            _how_it_ended(exitcode, log_text))
      pending = [i for i in pending if i not in results]
  return [results[c.index] for c in cases]


def is_known(kind: str, known: Sequence[str]) -> bool:
  """Whether `kind` matches a `KIND_GLOB[:REASON]` of `known`."""
  return any(fnmatch.fnmatchcase(kind, pattern.split(":", 1)[0])
             for pattern in known)


# --------------------------------------------------------------------------
# Reporting.


def by_kind(results: Sequence[Result]) -> dict[str, dict[str, int]]:
  """kind -> {"cases", "passed", "failed", "crashed", "skipped", "known"}."""
  table: dict[str, dict[str, int]] = collections.defaultdict(
      lambda: dict.fromkeys(("cases", "passed", "failed", "crashed",
                             "skipped", "known"), 0))
  for r in results:
    row = table[r.case.kind]
    row["cases"] += 1
    if r.passed is None:
      row["skipped"] += 1
    elif r.passed:
      row["passed"] += 1
    elif r.known:
      row["known"] += 1
    else:
      row["failed"] += 1
    if r.outcome in ("crash", "hang"):
      row["crashed"] += 1
  return dict(sorted(table.items()))


def summary(results: Sequence[Result]) -> dict[str, Any]:
  tiers = {}
  for tier in (cases_lib.CONTRACT, cases_lib.HARDENING):
    rs = [r for r in results if r.case.info.tier == tier]
    tiers[tier] = {
        "cases": len(rs),
        "passed": sum(r.passed is True for r in rs),
        "failed": sum(r.failed for r in rs),
        "known": sum(r.passed is False and r.known for r in rs),
        "crashed": sum(r.outcome in ("crash", "hang") for r in rs),
        "skipped": sum(r.passed is None for r in rs),
    }
  return tiers


def format_report(results: Sequence[Result], *, max_examples: int = 2) -> str:
  lines = []
  failing = [(k, row) for k, row in by_kind(results).items()
             if row["failed"] or row["known"]]
  if failing:
    lines.append("Failing kinds (cases failed / run; crashes):")
    for kind, row in failing:
      info = cases_lib.KINDS[kind]
      bad = [r for r in results if r.case.kind == kind and
             r.passed is False]
      tag = " [known]" if row["known"] and not row["failed"] else ""
      lines.append(f"  {kind} ({info.tier}, expect {info.expect}){tag}: "
                   f"{row['failed'] + row['known']}/"
                   f"{row['cases'] - row['skipped']}, "
                   f"{row['crashed']} crashed")
      for r in bad[:max_examples]:
        lines.append(f"    {r.case.describe()}")
        lines.append(f"      -> {r.explain()}")
  tiers = summary(results)
  for tier, s in tiers.items():
    lines.append(
        f"{tier}: {s['cases']} cases, {s['passed']} passed, {s['failed']} "
        f"failed ({s['crashed']} crashed or hung), {s['known']} known "
        f"failures, {s['skipped']} skipped")
  return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line.

_DESCRIPTION = """\
Calls a PJRT plugin's C API with bad arguments (wrong struct sizes, NULL
args and fields, deleted buffers and executables, wrong dtypes and shapes,
invalid formats, options, ids and layouts) and checks that every call ends
in a clean PJRT_Error, or success where the call is valid, and never
crashes. Cases run in child processes, so a crash fails only its case.
"""

_EPILOG = """\
Tiers: 'contract' cases test what the PJRT C API header promises callers;
'hardening' cases (NULL args pointers, NULL in fields the header does not
mark optional) go beyond it. Exit status: 0 no unexpected failure, 1 some,
2 usage error or a plugin that cannot be loaded.

Examples:
  python -m pjrt.tools.abi_fuzz --plugin path/to/plugin.so --cases 2000
  python -m pjrt.tools.abi_fuzz --plugin cpu --kind 'struct_size.*'
  python -m pjrt.tools.abi_fuzz --plugin X --cases 2000 --only 17  # replay
"""


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m pjrt.tools.abi_fuzz", description=_DESCRIPTION,
      epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
      allow_abbrev=False)
  parser.add_argument("--plugin", required=True, metavar="PLUGIN",
                      help="a path to a shared library exporting "
                      "GetPjrtApi, a Python plugin as module:attribute "
                      f"(ours: {plugin_choice.OUR_PLUGIN}), or a name pjrt "
                      "knows")
  parser.add_argument("--cases", type=int, default=200, metavar="N",
                      help="number of cases (default 200)")
  parser.add_argument("--seed", type=int, default=0, metavar="S",
                      help="random seed (default 0)")
  parser.add_argument("--tier", choices=("all", cases_lib.CONTRACT,
                                         cases_lib.HARDENING), default="all",
                      help="which cases (default all)")
  parser.add_argument("--kind", action="append", default=[],
                      metavar="PATTERN", help="only kinds matching this "
                      "glob, e.g. 'compile.*'; repeatable")
  parser.add_argument("--only", metavar="I,J,...",
                      help="run only these case indices (replay)")
  parser.add_argument("--known", action="append", default=[],
                      metavar="KIND[:REASON]", help="a kind (glob) known to "
                      "fail on this plugin: its failures are reported but "
                      "do not fail the run; repeatable")
  parser.add_argument("--batch", type=int, default=BATCH, metavar="N",
                      help=f"cases per child process (default {BATCH})")
  parser.add_argument("--json", metavar="FILE",
                      help="also write every result as JSON to FILE")
  parser.add_argument("--list-kinds", action="store_true",
                      help="list the kinds and exit")
  parser.add_argument("-v", "--verbose", action="store_true",
                      help="print every case as it finishes")
  return parser


def _select(args) -> list[cases_lib.Case]:
  tiers = ((cases_lib.CONTRACT, cases_lib.HARDENING) if args.tier == "all"
           else (args.tier,))
  kinds = None
  if args.kind:
    kinds = [k for k in cases_lib.KINDS
             if any(fnmatch.fnmatchcase(k, p) for p in args.kind)]
    if not kinds:
      raise support.InvalidArgumentError(
          f"no kind matches {', '.join(args.kind)} (see --list-kinds)")
  cases = cases_lib.generate(args.cases, args.seed, tiers=tiers, kinds=kinds)
  if args.only:
    wanted = {int(x) for x in args.only.split(",") if x.strip()}
    cases = [c for c in cases if c.index in wanted]
  return cases


def main(argv: Sequence[str] | None = None) -> int:
  parser = _parser()
  if argv is None:
    argv = sys.argv[1:]
  if "--list-kinds" in argv:
    for name, info in sorted(cases_lib.KINDS.items()):
      print(f"{name:45} {info.tier:9} {info.expect:5} {info.doc}")
    return 0
  args = parser.parse_args(argv)
  choice = plugin_choice.absolute(args.plugin)
  if plugin_choice.is_path(choice) and not os.path.exists(choice):
    print(f"error: plugin library {choice} does not exist", file=sys.stderr)
    return 2
  if args.cases < 1 or args.batch < 1:
    print("error: --cases and --batch must be positive", file=sys.stderr)
    return 2
  try:
    cases = _select(args)
  except (support.XlaError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"PJRT ABI fuzz: plugin {args.plugin}, {len(cases)} cases, seed "
        f"{args.seed}, {len({c.kind for c in cases})} kinds", flush=True)

  def progress(result: Result) -> None:
    if args.verbose:
      status = ("skip" if result.passed is None else
                "PASS" if result.passed else
                "known" if result.known else "FAIL")
      print(f"{status:5} {result.case.describe()} -> {result.outcome}"
            + (f" {_code_name(result.code)}" if result.code else ""),
            flush=True)

  start = time.monotonic()
  try:
    results = run(choice, cases, known=args.known, batch=args.batch,
                  progress=progress)
  except support.XlaError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  elapsed = time.monotonic() - start
  print(format_report(results))
  print(f"({elapsed:.1f} s)")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"plugin": args.plugin, "seed": args.seed,
                 "cases": args.cases, "known": args.known,
                 "summary": summary(results), "by_kind": by_kind(results),
                 "results": [r.to_json() for r in results]}, f, indent=1)
  return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
  sys.exit(main())
