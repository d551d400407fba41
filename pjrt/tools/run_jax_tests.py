"""Runs a selection of JAX's own test files against our PJRT plugin.

The test files (e.g. tests/lax_test.py from github jax-ml/jax at the tag of
the installed jax) live outside this repository; point --jax-tests at the
folder holding them. Each file runs under pytest in a subprocess with
JAX_PLATFORMS set to the chosen platform ("openxla_cpu" registers our plugin
through pjrt.tools.jax_tests_pytest_plugin, "cpu" gives JAX's own backend as
the baseline). The subprocess streams one JSON record per test, so a file cut
off by --file-timeout still counts what it ran.

  python -m pjrt.tools.run_jax_tests --jax-tests /tmp/jaxtests \\
      --files lax_test.py,lax_numpy_test.py --num-generated-cases 1 \\
      --timeout 60 --jobs 2

For the SPMD files (pmap_test.py, shard_map_test.py, pjit_test.py,
array_test.py) give both platforms the same devices, ours and the baseline:

  python -m pjrt.tools.run_jax_tests --jax-tests /tmp/jaxtests \\
      --files pmap_test.py --devices 4 --test-dut cpu --platform openxla_cpu
  python -m pjrt.tools.run_jax_tests --jax-tests /tmp/jaxtests \\
      --files pmap_test.py --devices 4 --test-dut cpu --platform cpu

prints pass/fail/skip/error counts per file and the failures grouped by their
first error line (most common first).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

_PLUGIN_MODULE = "pjrt.tools.jax_tests_pytest_plugin"
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
# Worse outcomes win when a test has several records (call, then teardown).
_RANK = {"passed": 0, "xfailed": 1, "skipped": 2, "xpassed": 3, "failed": 4,
         "error": 5, "timeout": 6}


def _repo_root() -> str:
  here = os.path.dirname(os.path.abspath(__file__))
  return os.path.dirname(os.path.dirname(here))


@dataclasses.dataclass
class FileResult:
  """Per-test outcomes of one test file (or a shard of it)."""
  name: str
  outcomes: dict[str, str] = dataclasses.field(default_factory=dict)
  messages: dict[str, str] = dataclasses.field(default_factory=dict)
  returncode: int | None = None
  timed_out: bool = False
  seconds: float = 0.0

  def add(self, record: dict) -> None:
    nodeid = record["nodeid"]
    outcome = record["outcome"]
    old = self.outcomes.get(nodeid)
    if old is None or _RANK[outcome] > _RANK[old]:
      self.outcomes[nodeid] = outcome
      self.messages[nodeid] = record.get("message", "")

  def merge(self, other: "FileResult") -> None:
    for nodeid, outcome in other.outcomes.items():
      self.add({"nodeid": nodeid, "outcome": outcome,
                "message": other.messages.get(nodeid, "")})
    self.timed_out |= other.timed_out
    self.seconds = max(self.seconds, other.seconds)
    if other.returncode not in (None, 0, 1, 5):
      self.returncode = other.returncode
    elif self.returncode is None:
      self.returncode = other.returncode

  def counts(self) -> dict[str, int]:
    c = collections.Counter(self.outcomes.values())
    return {k: c.get(k, 0) for k in OUTCOMES}


def read_results(path: str, name: str) -> FileResult:
  """Reads the JSON-lines records the pytest plugin wrote."""
  result = FileResult(name)
  if not os.path.exists(path):
    return result
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line:
        continue
      try:
        result.add(json.loads(line))
      except (ValueError, KeyError):
        continue  # a line cut short by a kill
  return result


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(\.\d+)?(e[-+]?\d+)?")
_SPACES = re.compile(r"\s+")


def first_error_line(message: str) -> str:
  """The line that names a failure: "Type: text", numbers kept.

  pytest's crash message is "ExcType: first line ..."; when the text after the
  type is empty (numpy's assert_allclose starts with a newline) the first
  non-empty line of the rest is appended.
  """
  lines = [ln.strip() for ln in (message or "").splitlines()]
  lines = [ln for ln in lines if ln]
  if not lines:
    return "(no message)"
  head = lines[0]
  if head.endswith(":") and len(lines) > 1:
    head = f"{head} {lines[1]}"
  return head


def category(message: str, width: int = 160) -> str:
  """first_error_line with addresses and numbers folded, for grouping."""
  line = first_error_line(message)
  line = _ADDRESS.sub("ADDR", line)
  line = _NUMBER.sub("#", line)
  line = _SPACES.sub(" ", line)
  return line[:width]


def group_failures(results: list[FileResult],
                   outcomes=("failed", "error")) -> list[tuple[str, int, str]]:
  """(category, count, one example nodeid), most common first."""
  counter: collections.Counter = collections.Counter()
  example: dict[str, str] = {}
  for result in results:
    for nodeid, outcome in sorted(result.outcomes.items()):
      if outcome not in outcomes:
        continue
      cat = category(result.messages.get(nodeid, ""))
      counter[cat] += 1
      example.setdefault(cat, nodeid)
  return [(cat, n, example[cat]) for cat, n in
          sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]


def _pump(stream, prefix: str, sink) -> None:
  for line in iter(stream.readline, ""):
    if line.startswith("[progress]") or sink is not None:
      sys.stderr.write(f"{prefix}{line}")
      sys.stderr.flush()
    if sink is not None:
      sink.write(line)


@dataclasses.dataclass
class RunConfig:
  """How the pytest subprocesses are started."""
  jax_tests: str
  platform: str = "openxla_cpu"
  backend: str | None = None
  num_generated_cases: int = 1
  timeout: float = 60.0
  file_timeout: float | None = None
  keyword: str | None = None
  skip_slow: bool = True
  progress_every: int = 25
  test_dut: str | None = None
  devices: int | None = None
  extra_pytest_args: tuple[str, ...] = ()
  verbose: bool = False
  work_dir: str | None = None


def subprocess_env(cfg: RunConfig, results_path: str,
                   shard: str | None) -> dict[str, str]:
  env = dict(os.environ)
  root = _repo_root()
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (root, env.get("PYTHONPATH", "")) if p)
  env["JAX_PLATFORMS"] = cfg.platform
  env["JAX_NUM_GENERATED_CASES"] = str(cfg.num_generated_cases)
  if cfg.skip_slow:
    env["JAX_SKIP_SLOW_TESTS"] = "1"
  if cfg.backend:
    env["OPENXLA_CPU_BACKEND"] = cfg.backend
  env["OPENXLA_JAX_TESTS_PLATFORM"] = cfg.platform
  env["OPENXLA_JAX_TESTS_TIMEOUT"] = str(cfg.timeout or 0)
  env["OPENXLA_JAX_TESTS_RESULTS"] = results_path
  env["OPENXLA_JAX_TESTS_PROGRESS"] = str(cfg.progress_every)
  env.pop("OPENXLA_JAX_TESTS_SHARD", None)
  env.pop("OPENXLA_JAX_TESTS_DUT", None)
  if cfg.test_dut:
    env["OPENXLA_JAX_TESTS_DUT"] = cfg.test_dut
  if shard:
    env["OPENXLA_JAX_TESTS_SHARD"] = shard
  env.pop("OPENXLA_JAX_TESTS_DEVICES", None)
  if cfg.devices:
    # The same device count on both platforms: ours reads its client option,
    # JAX's CPU client the XLA flag. The test files call
    # jtu.request_cpu_devices(8), which would raise JAX's count past the
    # flag; the pytest plugin pins it before they are imported.
    env["OPENXLA_CPU_NUM_DEVICES"] = str(cfg.devices)
    flag = f"--xla_force_host_platform_device_count={cfg.devices}"
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + [flag])
    env["OPENXLA_JAX_TESTS_DEVICES"] = str(cfg.devices)
  return env


def pytest_command(cfg: RunConfig, test_file: str) -> list[str]:
  cmd = [sys.executable, "-m", "pytest", "-p", _PLUGIN_MODULE,
         "-p", "no:cacheprovider", "-q", "--no-header", "-rN",
         "--tb=line" if not cfg.verbose else "--tb=short",
         "--rootdir", os.path.dirname(os.path.abspath(test_file)),
         test_file]
  if cfg.keyword:
    cmd += ["-k", cfg.keyword]
  return cmd + list(cfg.extra_pytest_args)


def run_file(cfg: RunConfig, name: str, jobs: int = 1) -> FileResult:
  """Runs one test file in `jobs` sharded pytest subprocesses."""
  test_file = os.path.join(cfg.jax_tests, name)
  work = cfg.work_dir or tempfile.mkdtemp(prefix="run_jax_tests_")
  os.makedirs(work, exist_ok=True)
  start = time.monotonic()
  procs = []
  for k in range(jobs):
    shard = f"{k}/{jobs}" if jobs > 1 else None
    path = os.path.join(work, f"{name}.{cfg.platform}.{k}.jsonl")
    if os.path.exists(path):
      os.remove(path)
    log = open(os.path.join(work, f"{name}.{cfg.platform}.{k}.log"), "w",
               encoding="utf-8")
    proc = subprocess.Popen(
        pytest_command(cfg, test_file), cwd=os.path.dirname(test_file),
        env=subprocess_env(cfg, path, shard), stdout=log,
        stderr=subprocess.PIPE, text=True)
    pump = threading.Thread(
        target=_pump, args=(proc.stderr, f"[{name} {k + 1}/{jobs}] ",
                            log if cfg.verbose else None), daemon=True)
    pump.start()
    procs.append((proc, path, log, pump))
  result = FileResult(name)
  for proc, path, log, pump in procs:
    remaining = None
    if cfg.file_timeout:
      remaining = max(0.0, cfg.file_timeout - (time.monotonic() - start))
    part = FileResult(name)
    try:
      part.returncode = proc.wait(timeout=remaining)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
      part.timed_out = True
    pump.join(timeout=5)
    log.close()
    part.merge(read_results(path, name))
    result.merge(part)
  result.seconds = time.monotonic() - start
  return result


def format_report(results: list[FileResult], platform: str,
                  top: int = 15) -> str:
  lines = [f"platform={platform}",
           f"{'file':<24}" + "".join(f"{k:>9}" for k in OUTCOMES) +
           f"{'total':>8}{'secs':>7}  note"]
  total = collections.Counter()
  for r in results:
    c = r.counts()
    total.update(c)
    note = []
    if r.timed_out:
      note.append("cut off by --file-timeout")
    if r.returncode not in (None, 0, 1, 5):
      note.append(f"pytest rc={r.returncode}")
    lines.append(f"{r.name:<24}" + "".join(f"{c[k]:>9}" for k in OUTCOMES) +
                 f"{sum(c.values()):>8}{r.seconds:>7.0f}  {'; '.join(note)}")
  if len(results) > 1:
    lines.append(f"{'TOTAL':<24}" + "".join(f"{total[k]:>9}" for k in OUTCOMES)
                 + f"{sum(total.values()):>8}")
  groups = group_failures(results)
  if groups:
    lines.append(f"\nTop failure categories ({len(groups)} distinct):")
    for cat, n, example in groups[:top]:
      lines.append(f"{n:>6}  {cat}\n        e.g. {example}")
  return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(
      prog="python -m pjrt.tools.run_jax_tests",
      description=__doc__.split("\n\n")[0] + " Prints per-file counts and "
      "failures grouped by first error line.")
  p.add_argument("--jax-tests", required=True,
                 help="folder holding JAX's test files (outside this repo)")
  p.add_argument("--files", default="lax_test.py",
                 help="comma-separated test file names in --jax-tests")
  p.add_argument("--platform", default="openxla_cpu",
                 help="JAX_PLATFORMS for the run: openxla_cpu (ours) or cpu "
                 "(JAX's own backend, the baseline)")
  p.add_argument("--backend", choices=("cpu", "interpreter", "evaluator",
                                       "auto"),
                 help="OPENXLA_CPU_BACKEND for our plugin")
  p.add_argument("--num-generated-cases", type=int, default=1,
                 help="JAX_NUM_GENERATED_CASES (cases per parametrized test)")
  p.add_argument("--timeout", type=float, default=60.0,
                 help="per-test limit in seconds (0 = none)")
  p.add_argument("--file-timeout", type=float, default=None,
                 help="wall-clock limit per file; the partial result counts")
  p.add_argument("--jobs", type=int, default=1,
                 help="pytest processes per file (tests sharded round-robin)")
  p.add_argument("-k", "--keyword", help="pytest -k expression")
  p.add_argument("--run-slow", action="store_true",
                 help="do not set JAX_SKIP_SLOW_TESTS=1")
  p.add_argument("--test-dut",
                 help="jtu's jax_test_dut, e.g. cpu: our platform then takes "
                 "the tests' CPU-specific branches (skips, tolerances)")
  p.add_argument("--devices", type=int,
                 help="devices of the platform: OPENXLA_CPU_NUM_DEVICES for "
                 "ours, --xla_force_host_platform_device_count (pinned against "
                 "the files' request_cpu_devices) for JAX's CPU backend")
  p.add_argument("--top", type=int, default=15,
                 help="failure categories to list")
  p.add_argument("--work-dir", help="keep per-test JSON lines and logs here")
  p.add_argument("--json", help="also write the per-test outcomes here")
  p.add_argument("--verbose", action="store_true",
                 help="echo pytest's stderr and use --tb=short")
  p.add_argument("pytest_args", nargs="*",
                 help="extra pytest arguments (after --)")
  return p.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  cfg = RunConfig(
      jax_tests=os.path.abspath(args.jax_tests), platform=args.platform,
      backend=args.backend, num_generated_cases=args.num_generated_cases,
      timeout=args.timeout, file_timeout=args.file_timeout,
      keyword=args.keyword, skip_slow=not args.run_slow,
      test_dut=args.test_dut, devices=args.devices, extra_pytest_args=tuple(args.pytest_args),
      verbose=args.verbose, work_dir=args.work_dir)
  results = []
  names = [f.strip() for f in args.files.split(",") if f.strip()]
  # Every name is checked before any file runs: a typo in the last name
  # must not cost the run of the others.
  missing = [n for n in names
             if not os.path.exists(os.path.join(cfg.jax_tests, n))]
  if missing:
    print(f"error: not found in {cfg.jax_tests}: {', '.join(missing)}",
          file=sys.stderr)
    return 2
  for name in names:
    sys.stderr.write(f"[run_jax_tests] {name} on {cfg.platform} "
                     f"(jobs={args.jobs})\n")
    results.append(run_file(cfg, name, jobs=max(1, args.jobs)))
  print(format_report(results, cfg.platform, top=args.top))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({r.name: {"outcomes": r.outcomes, "messages": r.messages}
                 for r in results}, f)
  return 0 if all(r.counts()["failed"] + r.counts()["error"] == 0
                  for r in results) else 1


if __name__ == "__main__":
  sys.exit(main())
