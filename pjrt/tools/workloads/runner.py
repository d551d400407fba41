"""Runs workloads on the platform under test and on the reference, each in
its own subprocess, and compares them.

    python -m pjrt.tools.workloads [--only a,b] [--family f] [--list]
        [--steps N] [--out DIR] [--timeout S]
        [--platforms openxla_cpu,cpu]

For each workload and platform a child process (`child.py`) times the
model's init, the first step (trace + compile + run, blocked on results)
and N steady steps, records its peak RSS and saves the outputs of the first
and last step. The runner compares our outputs with the reference's (f32:
max|ours-ref| <= 2e-3 max|ref|, f64: 1e-9), prints a progress line per
workload and a table, and writes workloads.json and workloads.html. A child
that crashes or runs past --timeout is reported as ERROR / TIMEOUT.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from pjrt.tools.workloads import registry
from pjrt.tools.workloads import report

DEFAULT_PLATFORMS = ("openxla_cpu", "cpu")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


def _child_env(platform: str) -> dict:
  env = dict(os.environ)
  env["JAX_PLATFORMS"] = platform
  env.setdefault("KERAS_BACKEND", "jax")
  env["PYTHONPATH"] = os.pathsep.join(
      [_REPO_ROOT] + [p for p in sys.path if p and os.path.isdir(p)])
  env.pop("JAX_ENABLE_X64", None)  # the child sets x64 per workload
  return env


def _last_line(path: str) -> str:
  try:
    with open(path, errors="replace") as f:
      lines = [l.strip() for l in f.read().splitlines() if l.strip()]
  except OSError:
    return ""
  return lines[-1] if lines else ""


def run_child(name: str, platform: str, steps: int, seed: int, out: str,
              timeout: float) -> tuple[dict, dict]:
  """Runs one workload on one platform; returns (record, outputs).

  Never raises for the child's failures: a crash or a timeout becomes a
  record with "error" (and "timeout": True)."""
  os.makedirs(out, exist_ok=True)
  log_path = os.path.join(out, "log.txt")
  cmd = [sys.executable, "-m", "pjrt.tools.workloads.child", "--name", name,
         "--platform", platform, "--steps", str(steps), "--seed", str(seed),
         "--out", out]
  start = time.perf_counter()
  with open(log_path, "w") as log:
    proc = subprocess.Popen(cmd, env=_child_env(platform), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=out, start_new_session=True)
    try:
      rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
      return ({"name": name, "platform": platform, "timeout": True,
               "error": f"timed out after {timeout:g}s",
               "wall_s": time.perf_counter() - start}, {})
  wall = time.perf_counter() - start
  result_path = os.path.join(out, "result.json")
  if not os.path.exists(result_path):
    how = (f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}")
    last = _last_line(log_path)
    return ({"name": name, "platform": platform,
             "error": f"crashed ({how})" + (f": {last}" if last else ""),
             "wall_s": wall}, {})
  with open(result_path) as f:
    record = json.load(f)
  record["wall_s"] = wall
  if not record.get("error") and record.get("backend") != platform:
    record["error"] = (f"ran on backend {record.get('backend')!r}, "
                       f"not {platform!r}")
  outputs = {}
  npz = os.path.join(out, "outputs.npz")
  if os.path.exists(npz):
    with np.load(npz) as data:
      outputs = {k: data[k] for k in data.files}
  return record, outputs


# Figures of a child's record that --rounds takes the median of.
ROUND_FIGURES = ("init_s", "first_s", "steady_median_s", "steady_best_s",
                 "peak_rss_mb")


def merge_rounds(records: list[dict]) -> dict:
  """One record from the records of several rounds on one platform: the
  first round's, with each of ROUND_FIGURES the median over the rounds
  (the lower middle of an even count), and the rounds' values kept under
  "rounds". The first failed round's record if any failed."""
  for r in records:
    if r.get("error"):
      return r
  merged = dict(records[0])
  if len(records) > 1:
    merged["rounds"] = {}
    for key in ROUND_FIGURES:
      vals = [r[key] for r in records if r.get(key) is not None]
      if vals:
        merged["rounds"][key] = vals
        merged[key] = sorted(vals)[(len(vals) - 1) // 2]
  return merged


def run_workload(wl: registry.Workload, platforms: list[str], steps: int,
                 seed: int, out_dir: str, timeout: float,
                 rounds: int = 1) -> dict:
  """Both platforms (reference first), `rounds` times, alternating, then
  the comparison of the first round's outputs; one row. Each platform's
  figures are the medians over its rounds (`merge_rounds`): alternating
  spreads a drift in the machine's speed over both sides."""
  per_round = {p: [] for p in platforms}
  outs = {}
  for k in range(max(1, rounds)):
    for platform in reversed(platforms):
      sub = os.path.join(out_dir, wl.name, platform)
      if k:
        sub = os.path.join(sub, f"round{k + 1}")
      record, out = run_child(wl.name, platform, steps, seed, sub, timeout)
      per_round[platform].append(record)
      if k == 0:
        outs[platform] = out
    if any(r[-1].get("error") for r in per_round.values()):
      break
  records = {p: merge_rounds(r) for p, r in per_round.items()}
  ours = records[platforms[0]]
  ref = records.get(platforms[1]) if len(platforms) > 1 else None
  comparison = None
  if ref is not None and not ours.get("error") and not ref.get("error"):
    comparison = report.compare_outputs(outs[platforms[0]], outs[platforms[1]],
                                        wl.dtype)
  return report.make_row(wl.name, wl.family, wl.dtype, ours, ref, comparison)


def _for_json(row: dict) -> dict:
  row = dict(row)
  for side in ("ours", "ref"):
    if row.get(side):
      row[side] = {k: v for k, v in row[side].items() if k != "traceback"}
  if row.get("max_rel_err") is not None and row["max_rel_err"] == float("inf"):
    row["max_rel_err"] = "inf"
  return row


def write_reports(rows: list[dict], platforms: list[str], out_dir: str,
                  command: str) -> tuple[str, str]:
  os.makedirs(out_dir, exist_ok=True)
  ref = platforms[1] if len(platforms) > 1 else "-"
  json_path = os.path.join(out_dir, "workloads.json")
  with open(json_path, "w") as f:
    json.dump({"command": command, "ours": platforms[0], "reference": ref,
               "summary": report.summary(rows),
               "rows": [_for_json(r) for r in rows]}, f, indent=1)
  html_path = os.path.join(out_dir, "workloads.html")
  with open(html_path, "w") as f:
    f.write(report.to_html(rows, platforms[0], ref, command))
  return json_path, html_path


def _split(text: str | None) -> list[str]:
  return [x.strip() for x in (text or "").split(",") if x.strip()]


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m pjrt.tools.workloads",
      description="Real JAX workloads (flax, optax, equinox, keras, plain "
      "JAX) on our platform beside JAX's own CPU client: correctness, init "
      "time, first-step (compile) time, steady-step time, peak RSS.")
  ap.add_argument("--only", help="comma-separated workload names")
  ap.add_argument("--family", help="comma-separated families")
  ap.add_argument("--list", action="store_true",
                  help="list the workloads and exit")
  ap.add_argument("--steps", type=int, default=10,
                  help="steady steps timed after the first (default 10)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--out", help="directory for workloads.json, "
                  "workloads.html and per-run logs (default: a temp dir)")
  ap.add_argument("--timeout", type=float, default=600,
                  help="seconds per child process (default 600)")
  ap.add_argument("--rounds", type=int, default=1,
                  help="run each workload this many times per platform, "
                  "alternating with the reference, and report each "
                  "platform's median over the rounds (default 1; the "
                  "machine's speed drifts between runs)")
  ap.add_argument("--platforms", default=",".join(DEFAULT_PLATFORMS),
                  help="under test, reference (default openxla_cpu,cpu)")
  args = ap.parse_args(argv)
  try:
    chosen = registry.select(_split(args.only), _split(args.family))
  except KeyError as e:
    print(f"error: {e.args[0]}", file=sys.stderr)
    return 2
  if args.list:
    for wl in chosen:
      print(f"{wl.name:32s} {wl.family:10s} {wl.dtype}  {wl.description}")
    return 0
  platforms = _split(args.platforms)
  if not 1 <= len(platforms) <= 2:
    print("error: --platforms takes one or two names", file=sys.stderr)
    return 2
  out_dir = args.out or tempfile.mkdtemp(prefix="workloads-")
  command = "python -m pjrt.tools.workloads " + " ".join(
      shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
  if args.rounds < 1:
    print("error: --rounds takes a positive count", file=sys.stderr)
    return 2
  print(f"{len(chosen)} workloads on {' vs '.join(platforms)}, "
        f"{args.steps} steady steps"
        + (f", {args.rounds} rounds" if args.rounds > 1 else "")
        + f"; logs in {out_dir}", flush=True)
  rows = []
  for i, wl in enumerate(chosen, 1):
    row = run_workload(wl, platforms, args.steps, args.seed, out_dir,
                       args.timeout, rounds=args.rounds)
    rows.append(row)
    print(report.progress_line(i, len(chosen), row), flush=True)
  print()
  print(report.format_table(rows, platforms[0],
                            platforms[1] if len(platforms) > 1 else "-"))
  json_path, html_path = write_reports(rows, platforms, out_dir, command)
  print(f"\nwrote {json_path} and {html_path}")
  return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
