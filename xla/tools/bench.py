r"""`bench`: our CPU compiler against XLA CPU (through jax), numpy and the
StableHLO interpreter, on the programs of examples/bench.

  python -m xla.tools.bench [--programs a,b] [--repeat N]
      [--platforms ours,xla,numpy,interpreter] [--out DIR] [--quick]
      [--threads N] [--interpreter-timeout S] [--rtol R] [--atol A]

Everything runs in one process on this machine, one program at a time:

  ours         xla.service.cpu.cpu_compiler on `<program>.mlir` (imported
               to HLO): compile time, best-of-N run time, peak memory (the
               executable's buffers plus the arguments);
  xla          `jax.jit` of the program's jax version (XLA's CPU backend):
               compile time of `.lower(...).compile()`, best-of-N run time,
               `memory_analysis()` (arguments + outputs + temporaries);
  numpy        the eager numpy version (peak: the arguments plus the
               tracemalloc peak, which numpy reports its allocations to);
  interpreter  our StableHLO reference interpreter, run once; skipped when it
               passes --interpreter-timeout (default 60 s).

Every platform runs once untimed (warm-up, and its results are checked),
then N timed runs. Results are verified against XLA's (numpy's when jax is
not installed): |got - want| <= atol + rtol * |want| elementwise, default
1e-3 / 1e-3 (summation orders of BLAS and fused reductions differ, and
transcendentals use different approximations). The elementwise chain's
achieved bandwidth (the bytes a fused kernel must move / time) is set
against this machine's, measured in the same run: a numpy copy and a
STREAM-like triad of large arrays.

Writes DIR/bench.json and DIR/bench.html (table + SVG bar chart); prints
the tables. `--quick` runs the small sizes (`<program>.quick.mlir`), for a
CI smoke test. Exit status 0 when every output that was checked matched;
1 otherwise; 2 bad usage. Speeds are reported, never asserted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import gc
import importlib
import math
import os
import pathlib
import platform as platform_mod
import sys
import time
import tracemalloc
from typing import Optional

import numpy as np

from support import env
from xla.tools import bench_report
from xla.tools import hlo_runner

PLATFORMS = ("ours", "xla", "numpy", "interpreter")
DEFAULT_TOLERANCE = 1e-3


@dataclasses.dataclass
class Measurement:
  """One platform on one program."""
  platform: str
  status: str = "ok"  # ok | skipped | unavailable | error
  note: str = ""
  frontend_s: Optional[float] = None  # ours: parse + import; xla: lower
  compile_s: Optional[float] = None
  run_s: Optional[float] = None  # best of the timed runs
  runs: list = dataclasses.field(default_factory=list)
  peak_bytes: Optional[int] = None
  max_abs_err: Optional[float] = None
  max_rel_err: Optional[float] = None
  verified: Optional[bool] = None  # None: not compared
  outputs: Optional[list] = dataclasses.field(default=None, repr=False)

  def to_json(self) -> dict:
    d = dataclasses.asdict(self)
    d.pop("outputs")
    return d


def _log(stderr, message: str) -> None:
  stderr.write(f"bench: {message}\n")
  stderr.flush()


def _best_of(fn, repeat: int) -> list[float]:
  times = []
  for _ in range(repeat):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return times


# -- platforms ------------------------------------------------------------------


def run_ours(mlir_path: str, inputs, repeat: int, threads) -> Measurement:
  m = Measurement("ours")
  program = hlo_runner.load(mlir_path)
  runner = hlo_runner.prepare(program, "cpu", threads=threads)
  m.frontend_s = program.load_seconds + runner.import_seconds
  m.compile_s = runner.compile_seconds
  if runner.peak_memory_bytes is not None:
    # The executable's own buffers (outputs, temporaries, constants); add
    # the arguments to count what XLA's peak_memory_in_bytes counts.
    m.peak_bytes = int(runner.peak_memory_bytes) + sum(
        x.nbytes for x in inputs)
  first = runner.run(inputs, 1)
  m.outputs = first.outputs
  m.runs = runner.run(inputs, repeat).seconds
  return m


def run_xla(name: str, sizes: dict, inputs, repeat: int,
            programs_dir: pathlib.Path) -> Measurement:
  m = Measurement("xla")
  import jax  # pylint: disable=g-import-not-at-top
  jax_programs = _programs_module("jax_programs", programs_dir)
  fn = jax.jit(jax_programs.function(name, **sizes))
  device_args = [jax.device_put(x) for x in inputs]
  jax.block_until_ready(device_args)
  start = time.perf_counter()
  lowered = fn.lower(*device_args)
  m.frontend_s = time.perf_counter() - start
  start = time.perf_counter()
  compiled = lowered.compile()
  m.compile_s = time.perf_counter() - start
  m.peak_bytes = _xla_peak_bytes(compiled)
  out = jax.block_until_ready(compiled(*device_args))
  m.outputs = [np.asarray(o) for o in out]
  m.runs = _best_of(lambda: jax.block_until_ready(compiled(*device_args)),
                    repeat)
  return m


def _xla_peak_bytes(compiled) -> Optional[int]:
  try:
    ma = compiled.memory_analysis()
  except Exception:  # pylint: disable=broad-except
    return None
  if ma is None:
    return None
  peak = getattr(ma, "peak_memory_in_bytes", None)
  if peak:
    return int(peak)
  parts = [getattr(ma, f, 0) or 0 for f in (
      "argument_size_in_bytes", "output_size_in_bytes",
      "temp_size_in_bytes")]
  alias = getattr(ma, "alias_size_in_bytes", 0) or 0
  total = sum(parts) - alias
  return int(total) if total > 0 else None


def run_numpy(program, preset: str, inputs, repeat: int) -> Measurement:
  m = Measurement("numpy")
  tracemalloc.start()
  try:
    m.outputs = list(program.run_numpy(inputs, preset))
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  m.peak_bytes = int(peak) + sum(x.nbytes for x in inputs)
  m.runs = _best_of(lambda: program.run_numpy(inputs, preset), repeat)
  return m


def run_interpreter(mlir_path: str, inputs, timeout_s: float) -> Measurement:
  m = Measurement("interpreter")
  start = time.perf_counter()
  program = hlo_runner.load(mlir_path)
  m.frontend_s = time.perf_counter() - start  # parse + verify
  runner = hlo_runner.prepare(program, "interpreter", timeout_s=timeout_s)
  from stablehlo import interpreter  # pylint: disable=g-import-not-at-top
  try:
    result = runner.run(inputs, 1)
  except interpreter.ResourceExhausted:
    # The interpreter checks its deadline between loop iterations.
    m.status, m.note = "skipped", f"takes over {timeout_s:g} s"
    return m
  m.outputs = result.outputs
  m.runs = result.seconds
  return m


# -- verification ---------------------------------------------------------------


def verify(m: Measurement, reference: Measurement, rtol: float,
           atol: float) -> None:
  diffs = hlo_runner.compare(m.outputs, reference.outputs, rtol, atol)
  m.max_abs_err = max(d.max_abs for d in diffs)
  m.max_rel_err = max(d.max_rel for d in diffs)
  m.verified = all(d.ok for d in diffs)
  bad = [d for d in diffs if not d.ok]
  if bad:
    m.note = (m.note + "; " if m.note else "") + (
        f"output {bad[0].index}: {bad[0].message}")


# -- machine bandwidth ------------------------------------------------------------


def machine_bandwidth(nbytes: int, repeat: int) -> dict:
  """GB/s of a numpy copy (2 arrays moved) and a triad a = b + s*c done
  as two numpy passes (5 arrays moved), best of `repeat`, each the better
  of one thread and one thread per core on slices (numpy drops the GIL
  while it copies and computes, and one core alone does not saturate the
  memory system)."""
  n = nbytes // 4
  a = np.ones(n, np.float32)
  b = np.full(n, 2.0, np.float32)
  c = np.full(n, 3.0, np.float32)
  np.copyto(a, b)  # touch the pages
  threads = max(1, os.cpu_count() or 1)
  bounds = [(n * i // threads, n * (i + 1) // threads)
            for i in range(threads)]

  def copy(lo, hi):
    np.copyto(a[lo:hi], b[lo:hi])

  def triad(lo, hi):
    np.multiply(c[lo:hi], np.float32(3.0), out=a[lo:hi])
    np.add(a[lo:hi], b[lo:hi], out=a[lo:hi])

  def best(fn) -> float:
    one = min(_best_of(lambda: fn(0, n), max(repeat, 3)))
    if threads == 1:
      return one
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
      def parallel():
        list(pool.map(lambda r: fn(*r), bounds))
      many = min(_best_of(parallel, max(repeat, 3)))
    return min(one, many)

  return {"array_bytes": n * 4, "threads": threads,
          "copy_gbps": 2 * n * 4 / best(copy) / 1e9,
          "triad_gbps": 5 * n * 4 / best(triad) / 1e9}


# -- driver -----------------------------------------------------------------------


def _programs_module(name: str, programs_dir: pathlib.Path):
  """examples/bench/<name>.py, imported as examples.bench.<name>."""
  root = programs_dir.resolve().parents[1]
  if str(root) not in sys.path:
    sys.path.insert(0, str(root))
  return importlib.import_module(f"{programs_dir.parent.name}."
                                 f"{programs_dir.name}.{name}")


def _jax_available() -> Optional[str]:
  try:
    import jax  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError as e:
    return f"jax is not installed ({e})"
  return None


def bench_program(program, args, programs_dir, stderr) -> dict:
  preset = "quick" if args.quick else "full"
  sizes = program.sizes[preset]
  mlir = programs_dir / (f"{program.name}.mlir" if preset == "full"
                         else f"{program.name}.{preset}.mlir")
  inputs = program.inputs(preset, seed=args.seed)
  results: dict[str, Measurement] = {}
  for platform in args.platforms:
    _log(stderr, f"{program.name}: {platform}...")
    unavailable = None
    if platform == "ours":
      try:
        hlo_runner.load_cpu_compiler()
      except hlo_runner.PlatformUnavailable as e:
        unavailable = str(e)
    elif platform == "xla":
      unavailable = _jax_available()
    if unavailable:
      results[platform] = Measurement(platform, "unavailable",
                                      unavailable.split(";")[0])
      continue
    try:
      if platform == "ours":
        m = run_ours(str(mlir), inputs, args.repeat, args.threads)
      elif platform == "xla":
        m = run_xla(program.name, sizes, inputs, args.repeat, programs_dir)
      elif platform == "numpy":
        m = run_numpy(program, preset, inputs, args.repeat)
      else:
        m = run_interpreter(str(mlir), inputs, args.interpreter_timeout)
    except Exception as e:  # pylint: disable=broad-except
      # One platform failing (an unimplemented op, a crash) must not stop
      # the others: record it.
      message = str(e).strip().splitlines()
      m = Measurement(platform, "error",
                      f"{type(e).__name__}: {message[0] if message else ''}"
                      [:300])
    if m.runs:
      m.run_s = min(m.runs)
    results[platform] = m
    gc.collect()
  reference = next((results[p] for p in ("xla", "numpy")
                    if p in results and results[p].outputs is not None),
                   None)
  for m in results.values():
    if m.outputs is not None and reference is not None and m is not reference:
      verify(m, reference, args.rtol, args.atol)
  entry = {
      "description": program.description,
      "sizes": sizes,
      "reference": reference.platform if reference else None,
      "platforms": {p: m.to_json() for p, m in results.items()},
  }
  if program.bytes_moved is not None:
    entry["bytes_moved"] = int(program.bytes_moved(**sizes))
  for m in results.values():
    m.outputs = None
  return entry


def geomean(values) -> Optional[float]:
  values = [v for v in values if v and v > 0 and math.isfinite(v)]
  if not values:
    return None
  return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(report: dict) -> None:
  """Adds per-program ratios and their geometric means to `report`."""
  pairs = {"ours/xla": ("ours", "xla"), "ours/numpy": ("ours", "numpy"),
           "ours/interpreter": ("ours", "interpreter"),
           "xla/numpy": ("xla", "numpy")}
  ratios_all = {k: [] for k in pairs}
  compile_all = []
  for entry in report["programs"].values():
    ps = entry["platforms"]

    def run_s(p):
      m = ps.get(p)
      return m["run_s"] if m and m["status"] == "ok" else None

    ratios = {}
    for key, (a, b) in pairs.items():
      ra, rb = run_s(a), run_s(b)
      ratios[key] = ra / rb if ra and rb else None
      if ratios[key]:
        ratios_all[key].append(ratios[key])
    oc = ps.get("ours", {}).get("compile_s")
    xc = ps.get("xla", {}).get("compile_s")
    ratios["compile ours/xla"] = oc / xc if oc and xc else None
    if ratios["compile ours/xla"]:
      compile_all.append(ratios["compile ours/xla"])
    entry["ratios"] = ratios
    if "bytes_moved" in entry:
      entry["achieved_gbps"] = {
          p: entry["bytes_moved"] / run_s(p) / 1e9
          for p in ps if run_s(p)}
  report["geomean"] = {k: geomean(v) for k, v in ratios_all.items()}
  report["geomean"]["compile ours/xla"] = geomean(compile_all)


def _machine_info() -> dict:
  info = {"python": platform_mod.python_version(),
          "machine": platform_mod.machine(),
          "cpu_count": os.cpu_count(), "numpy": np.__version__}
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          info["cpu"] = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  try:
    import jax  # pylint: disable=g-import-not-at-top
    info["jax"] = jax.__version__
  except ImportError:
    pass
  return info


def _arg_parser(names) -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(
      prog="python -m xla.tools.bench",
      description="Benchmark our CPU compiler against XLA CPU (jax), numpy "
      "and the StableHLO interpreter.")
  ap.add_argument("--programs", default="",
                  help="comma-separated (default: all): " + ",".join(names))
  ap.add_argument("--platforms", default=",".join(PLATFORMS),
                  help=f"comma-separated subset of {','.join(PLATFORMS)}")
  ap.add_argument("--repeat", type=int, default=5, metavar="N",
                  help="timed runs per platform; the best counts (default 5)")
  ap.add_argument("--out", default="bench_out", metavar="DIR",
                  help="where bench.json and bench.html go (default "
                  "./bench_out)")
  ap.add_argument("--quick", action="store_true",
                  help="small sizes (a smoke test; timings mean little)")
  ap.add_argument("--threads", type=int, default=None,
                  help="ours: worker threads (default: all cores)")
  ap.add_argument("--interpreter-timeout", type=float, default=60.0,
                  metavar="S", help="skip the interpreter on a program when "
                  "it runs longer than S seconds (default 60)")
  ap.add_argument("--rtol", type=float, default=DEFAULT_TOLERANCE)
  ap.add_argument("--atol", type=float, default=DEFAULT_TOLERANCE)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--no-bandwidth", dest="bandwidth", action="store_false",
                  help="skip measuring the machine's memory bandwidth")
  ap.add_argument("--programs-dir", default=None, metavar="DIR",
                  help="where the programs live (default: examples/bench "
                  "of this checkout)")
  return ap


def main(argv=None, stdout=None, stderr=None) -> int:
  stdout = stdout or sys.stdout
  stderr = stderr or sys.stderr
  programs_dir = pathlib.Path(env.source_root()) / "examples" / "bench"
  pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
  pre.add_argument("--programs-dir", default=None)
  known, _ = pre.parse_known_args(argv)
  if known.programs_dir:
    programs_dir = pathlib.Path(known.programs_dir)
  try:
    numpy_programs = _programs_module("numpy_programs", programs_dir)
  except (ImportError, TypeError, IndexError) as e:
    stderr.write(f"error: cannot load the benchmark programs from "
                 f"{programs_dir}: {e}\n")
    return 2
  ap = _arg_parser(list(numpy_programs.PROGRAMS))
  try:
    args = ap.parse_args(argv)
  except SystemExit as e:
    return int(e.code or 0)
  names = [n for n in args.programs.split(",") if n] or list(
      numpy_programs.PROGRAMS)
  args.platforms = [p for p in args.platforms.split(",") if p]
  unknown = [n for n in names if n not in numpy_programs.PROGRAMS]
  unknown += [p for p in args.platforms if p not in PLATFORMS]
  if unknown or not args.platforms or args.repeat < 1:
    ap.print_usage(stderr)
    stderr.write("error: " + (f"unknown program or platform: "
                              f"{', '.join(unknown)}" if unknown else
                              "need at least one platform and --repeat >= 1")
                 + "\n")
    return 2

  report = {"preset": "quick" if args.quick else "full",
            "repeat": args.repeat, "platforms": args.platforms,
            "tolerance": {"rtol": args.rtol, "atol": args.atol},
            "machine": _machine_info(), "programs": {}}
  if args.bandwidth:
    _log(stderr, "measuring memory bandwidth...")
    report["bandwidth"] = machine_bandwidth(
        (16 if args.quick else 256) << 20, args.repeat)
  for name in names:
    report["programs"][name] = bench_program(
        numpy_programs.PROGRAMS[name], args, programs_dir, stderr)
  summarize(report)

  text = bench_report.format_tables(report)
  stdout.write(text)
  try:
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "bench.json")
    html_path = os.path.join(args.out, "bench.html")
    bench_report.write_json(report, json_path)
    with open(html_path, "w", encoding="utf-8") as f:
      f.write(bench_report.to_html(report))
  except OSError as e:
    stderr.write(f"error: cannot write to {args.out}: {e}\n")
    return 1
  stdout.write(f"wrote {json_path} and {html_path}\n")
  stdout.flush()
  mismatched = [f"{n}/{p}" for n, e in report["programs"].items()
                for p, m in e["platforms"].items() if m["verified"] is False]
  if mismatched:
    stderr.write("error: outputs differ from the reference: "
                 + ", ".join(mismatched) + "\n")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
