r"""`run_hlo_module`: compile and run a program, time it, check it, compare
it against another platform.

  python -m xla.tools.run_hlo_module FILE [--platform=cpu|evaluator|interpreter]
      [--compare-to=PLATFORM] [--inputs=random|FILE.npz] [--seed=N]
      [--rtol=R] [--atol=A] [--iterations=N] [--entry=NAME] [--threads=N]
      [--print-results | --no-print-results] [--save-inputs=FILE.npz]
      [--save-outputs=FILE.npz] [--timeout=S]

FILE is StableHLO MLIR (`.mlir`; CHLO-legalized and imported to HLO for the
cpu and evaluator platforms, run as is by the interpreter) or HLO text.

A testdata-style program (one with `@check.*` custom calls, like the
StableHLO testdata corpus) runs its checks on each platform and reports
how many passed. Otherwise the entry's parameters get random inputs (floats
standard normal, ints in [-5, 5] ([0, 10] unsigned), preds uniform; `--seed`)
or the arrays of an .npz file (keys arg0..argN or arr_0..arr_N, else the
archive order). Prints the import / compile time, the run time (best of
`--iterations`), the peak memory where the platform knows it, and with
`--compare-to` the max absolute / relative error of each output and
PASS or FAIL: an element passes when |got - want| <= atol + rtol * |want|
(`want` from the --compare-to platform; NaN matches NaN; integers exactly;
default tolerances by type, f32: rtol 1e-4, atol 1e-4).

Exit status: 0 success; 1 a mismatch, a failed check, or bad input
(unreadable or invalid program, bad .npz, an op a platform does not
implement); 2 bad usage (unknown flag or platform, a platform that is not
available, such as cpu before the CPU compiler exists); 3 an internal error
(a bug in a platform). Errors go to stderr as `FILE:LINE:COL: error: ...`
where the position is known; bad input never prints a Python traceback.
Work that takes more than two seconds prints a progress line on stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Optional

import numpy as np

import support
from xla.tools import hlo_runner

OK = 0
FAILED = 1
USAGE = 2
INTERNAL = 3


def _arg_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(
      prog="python -m xla.tools.run_hlo_module",
      description="Compile and run a StableHLO (.mlir) or HLO text program "
      "on a platform; time it, run its @check.* custom calls, and compare "
      "its results with another platform.",
      epilog="exit status: 0 ok, 1 mismatch / failed check / bad input, "
      "2 bad usage or platform not available, 3 internal error")
  ap.add_argument("file", metavar="FILE",
                  help="StableHLO MLIR (.mlir) or HLO text")
  platforms = sorted(hlo_runner.PLATFORMS)
  ap.add_argument("--platform", default="cpu", choices=platforms,
                  help="where to run it (default: cpu, our CPU compiler)")
  ap.add_argument("--compare-to", metavar="PLATFORM", choices=platforms,
                  help="also run it here and compare the results "
                  f"({', '.join(platforms)})")
  ap.add_argument("--inputs", default="random", metavar="random|FILE.npz",
                  help="the entry's arguments: random (default) or arrays "
                  "from an .npz file")
  ap.add_argument("--seed", type=int, default=0,
                  help="seed of the random inputs (default 0)")
  ap.add_argument("--rtol", type=float, default=None,
                  help="relative tolerance (default: by type; f32 1e-4)")
  ap.add_argument("--atol", type=float, default=None,
                  help="absolute tolerance (default: by type; f32 1e-4)")
  ap.add_argument("--iterations", type=int, default=1, metavar="N",
                  help="run N times, report the best time (default 1)")
  ap.add_argument("--entry", metavar="NAME",
                  help="the function to run (StableHLO input; default "
                  "@main or the only public function)")
  ap.add_argument("--threads", type=int, default=None, metavar="N",
                  help="cpu: worker threads (default: all cores)")
  ap.add_argument("--timeout", type=float, default=None, metavar="S",
                  help="interpreter: give up after S seconds")
  group = ap.add_mutually_exclusive_group()
  group.add_argument("--print-results", dest="print_results",
                     action="store_true", default=None,
                     help="print the results (default: only when there is "
                     "nothing to compare or check)")
  group.add_argument("--no-print-results", dest="print_results",
                     action="store_false")
  ap.add_argument("--save-inputs", metavar="FILE.npz",
                  help="write the inputs used (arg0..argN) to an .npz file "
                  "(bf16 / f8 as f32, int4 as int8)")
  ap.add_argument("--save-outputs", metavar="FILE.npz",
                  help="write the results of --platform (out0..outN) to an "
                  ".npz file")
  return ap


def _fmt_seconds(s: float) -> str:
  if s >= 1:
    return f"{s:.2f} s"
  if s >= 1e-3:
    return f"{s * 1e3:.2f} ms"
  return f"{s * 1e6:.1f} us"


def _fmt_bytes(n: int) -> str:
  for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
    if n >= scale:
      return f"{n / scale:.1f} {unit}"
  return f"{n} B"


def _with_source_line(message: str, path: str, text: str) -> str:
  """Adds the source line and a caret under a `path:L:C: error:` message
  that does not show it yet."""
  m = re.match(r"(.*?):(\d+):(\d+): error: ", message)
  if not m or m.group(1) != path or "\n" in message:
    return message
  line, col = int(m.group(2)), int(m.group(3))
  lines = text.splitlines()
  if not 1 <= line <= len(lines):
    return message
  return f"{message}\n{lines[line - 1]}\n{' ' * (col - 1)}^"


def _located(message: str, path: str) -> str:
  if re.match(r"\S.*?:\d+:\d+: error: ", message) or message.startswith(
      (f"{path}:", "error:")):
    return message
  return f"{path}: error: {message}"


class _Failure(Exception):
  """Ends the run with an exit code and a message for stderr."""

  def __init__(self, code: int, message: str):
    super().__init__(message)
    self.code = code


def main(argv=None, stdout=None, stderr=None) -> int:
  stdout = stdout or sys.stdout
  stderr = stderr or sys.stderr
  ap = _arg_parser()
  try:
    args = ap.parse_args(argv)
  except SystemExit as e:  # argparse printed --help or a usage error
    return int(e.code or 0)
  try:
    return _run(args, stdout, stderr)
  except _Failure as e:
    stderr.write(str(e).rstrip("\n") + "\n")
    return e.code
  except BrokenPipeError:
    return OK


def _check_usage(args) -> None:
  if args.iterations < 1:
    raise _Failure(USAGE, "error: --iterations must be at least 1")
  if args.compare_to == args.platform:
    raise _Failure(USAGE, f"error: --compare-to={args.compare_to} is the "
                   "platform itself; name another platform")
  if args.inputs != "random" and not args.inputs.endswith(".npz"):
    raise _Failure(USAGE, f"error: --inputs={args.inputs}: give 'random' "
                   "or a .npz file")
  if args.threads is not None and args.threads < 1:
    raise _Failure(USAGE, "error: --threads must be at least 1")
  if "cpu" in (args.platform, args.compare_to):
    try:
      hlo_runner.load_cpu_compiler()
    except hlo_runner.PlatformUnavailable as e:
      raise _Failure(USAGE, f"error: {e}") from None


def _guard(path: str, text: str, fn, *a, **kw):
  """Runs fn, turning errors into _Failure with the right exit code."""
  try:
    return fn(*a, **kw)
  except _Failure:
    raise
  except hlo_runner.PlatformUnavailable as e:
    raise _Failure(USAGE, f"error: {e}") from None
  except support.XlaError as e:
    raise _Failure(FAILED, _with_source_line(_located(str(e), path), path,
                                             text)) from None
  except RecursionError:
    raise _Failure(FAILED, f"{path}: error: input nested too deeply") from None
  except MemoryError:
    raise _Failure(FAILED, f"{path}: error: out of memory") from None
  except Exception as e:  # pylint: disable=broad-except
    if os.environ.get("RUN_HLO_MODULE_TRACEBACK"):
      raise
    raise _Failure(INTERNAL, f"{path}: internal error: {type(e).__name__}: "
                   f"{e} (rerun with RUN_HLO_MODULE_TRACEBACK=1 for the "
                   "traceback)") from None


def _run(args, stdout, stderr) -> int:
  _check_usage(args)
  path = args.file
  try:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
      text = f.read()
  except OSError as e:
    raise _Failure(FAILED, f"error: cannot read {path}: {e.strerror}"
                   ) from None
  program = _guard(path, text, _load, path, text, args.entry, stderr)
  if program.kind == "hlo" and "interpreter" in (args.platform,
                                                 args.compare_to):
    raise _Failure(USAGE, f"error: {path} is HLO text; the StableHLO "
                   "interpreter runs StableHLO (.mlir) input only (use "
                   "--platform=evaluator)")
  out = stdout.write
  params = program.params()
  n_checks = program.check_count()
  kind = "StableHLO" if program.kind == "stablehlo" else "HLO"
  entry = ("@" if program.kind == "stablehlo" else "") + program.entry_name
  out(f"{path}: {kind} module, entry {entry}, {len(params)} parameter"
      f"{'' if len(params) == 1 else 's'}"
      + (f", {n_checks} check{'' if n_checks == 1 else 's'}"
         if n_checks else "") + "\n")

  # Inputs.
  if args.inputs == "random":
    inputs = _guard(path, text, hlo_runner.random_inputs, params, args.seed)
    origin = f"random (seed {args.seed})"
  else:
    inputs = _guard(args.inputs, "", hlo_runner.npz_inputs, args.inputs,
                    params)
    origin = args.inputs
  if params:
    out(f"inputs: {origin}: "
        + ", ".join(hlo_runner.describe(x) if not isinstance(x, tuple)
                    else "(tuple)" for x in inputs) + "\n")
  if args.save_inputs:
    _save(args.save_inputs, inputs, "arg")

  # Run on each platform.
  platforms = [args.platform] + ([args.compare_to] if args.compare_to else [])
  results = {}
  failed = False
  for platform in platforms:
    runner = _guard(path, text, _prepare, program, platform, args, stderr)
    with hlo_runner.progress(f"run_hlo_module: running on {platform} "
                             f"({args.iterations}x)", stderr):
      result = _guard(path, text, runner.run, inputs, args.iterations)
    results[platform] = result
    _report_platform(out, runner, result, args.iterations)
    if n_checks:
      if result.check_failures:
        failed = True
        out(f"{platform}: checks FAILED\n")
        for msg in result.check_failures:
          stderr.write(_with_source_line(_located(msg, path), path, text)
                       + "\n")
      else:
        out(f"{platform}: checks passed ({n_checks} in the program)\n")

  main_result = results[args.platform]
  if args.save_outputs:
    _save(args.save_outputs, main_result.outputs, "out")
  print_results = args.print_results
  if print_results is None:
    print_results = not args.compare_to and not n_checks
  if print_results:
    _print_outputs(out, main_result.outputs)

  if args.compare_to:
    want = results[args.compare_to].outputs
    diffs = hlo_runner.compare(main_result.outputs, want, args.rtol,
                               args.atol)
    out(f"compare {args.platform} to {args.compare_to}:\n")
    for d in diffs:
      label = f"output {d.index} {d.description}" if d.index >= 0 else (
          "outputs")
      status = "ok" if d.ok else "MISMATCH"
      out(f"  {label}: max abs error {d.max_abs:.3g}, max rel error "
          f"{d.max_rel:.3g}  {status}\n")
      if d.message:
        out(f"    {d.message}\n")
    if any(not d.ok for d in diffs):
      failed = True
  if args.compare_to or n_checks:
    out("FAIL\n" if failed else "PASS\n")
  stdout.flush()
  return FAILED if failed else OK


def _load(path: str, text: str, entry: Optional[str], stderr):
  with hlo_runner.progress(f"run_hlo_module: parsing {path}", stderr):
    return hlo_runner.from_text(path, text, entry)


def _prepare(program, platform: str, args, stderr):
  verb = "compiling" if platform == "cpu" else "preparing"
  with hlo_runner.progress(f"run_hlo_module: {verb} for {platform}", stderr):
    return hlo_runner.prepare(program, platform, threads=args.threads,
                              timeout_s=args.timeout)


def _report_platform(out, runner, result, iterations: int) -> None:
  parts = []
  if runner.import_seconds:
    parts.append(f"import {_fmt_seconds(runner.import_seconds)}")
  if runner.platform == "cpu":
    parts.append(f"compile {_fmt_seconds(runner.compile_seconds)}")
  parts.append(f"run {_fmt_seconds(result.best_seconds)}"
               + (f" (best of {iterations})" if iterations > 1 else ""))
  if runner.peak_memory_bytes:
    parts.append(f"peak memory {_fmt_bytes(int(runner.peak_memory_bytes))}")
  out(f"{runner.platform}: " + ", ".join(parts) + "\n")
  if runner.compile_stats:
    phases = ", ".join(f"{k} {_fmt_seconds(float(v))}"
                       for k, v in runner.compile_stats.items()
                       if isinstance(v, (int, float)))
    if phases:
      out(f"{runner.platform}: compile phases: {phases}\n")


def _print_outputs(out, outputs) -> None:
  with np.printoptions(threshold=64, edgeitems=3, linewidth=100):
    for i, v in enumerate(outputs):
      body = "token" if v is None else np.array2string(np.asarray(v))
      out(f"result {i}: {hlo_runner.describe(v)} =\n{body}\n")


def _portable(a) -> np.ndarray:
  """ml_dtypes arrays (bf16, f8, int4: numpy kind 'V') as float32 / int8 /
  uint8, which .npz stores portably and --inputs converts back."""
  a = np.asarray(a)
  if a.dtype.kind != "V":
    return a
  name = a.dtype.name
  if name.startswith("uint"):
    return a.astype(np.uint8)
  if name.startswith("int"):
    return a.astype(np.int8)
  return a.astype(np.float32)


def _save(path: str, arrays, prefix: str) -> None:
  try:
    np.savez(path, **{f"{prefix}{i}": _portable(a)
                      for i, a in enumerate(arrays)
                      if a is not None and not isinstance(a, tuple)})
  except OSError as e:
    raise _Failure(FAILED, f"error: cannot write {path}: {e.strerror}"
                   ) from None


if __name__ == "__main__":
  sys.exit(main())
