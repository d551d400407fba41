"""`python -m pjrt.tools.collective_bench`: all-reduce bandwidth of our plugin.

One run measures two all-reduces of the same f32 buffer per device (64 MiB
by default), each through JAX on our plugin (a jitted shard_map `psum` over
every device), next to a baseline measured in the same processes, and
prints one table with the ratios:

  mpi    `mpirun -n 2`: two processes of two devices each (the collective
         crosses processes: reduced in each process, one MPI reduction
         between them); baselines: mpi4py's `Allreduce` of one such buffer
         between the two processes, blocking, and the same as a
         nonblocking `Iallreduce` completed by polling `Test` (what the
         plugin's transport does, so that a wait can time out);
  local  one process of four devices (the in-process collective);
         baselines: a numpy copy of one buffer (memcpy bandwidth), and of
         every device's buffer, one after the other (the bytes the
         all-reduce must read and write at least: n buffers in, n out).

Every repetition runs the all-reduce and its baselines back to back (after
a barrier, across processes: each timing is the slowest process's), and
the table shows medians, so that other work on the machine touches all
alike. Ratios are the baseline's time over ours (1.0: as fast); the goals
the tool was written for are printed beside them. Timings are printed,
never asserted.

The measurements run in child processes (JAX's platform and device count
are per process): `--child mpi` under mpirun, `--child local`; a progress
line on stderr says which part runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Optional, Sequence

import numpy as np

# Open MPI refuses to run as root without these.
_MPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1",
                 "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
_CHILD_TIMEOUT_S = 900
_GOALS = {"mpi": 0.8, "local": 0.5}


# -- the measurements (children) ----------------------------------------------


def _psum(jax, devices, count: int, value_of):
  """A jitted psum over `devices` and its input: each device's shard is
  `count` f32 of `value_of(device)`."""
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # pylint: disable=g-import-not-at-top
  mesh = Mesh(np.array(devices), ("d",))
  local = {d: np.full(count, value_of(d), np.float32)
           for d in jax.local_devices()}
  x = jax.make_array_from_single_device_arrays(
      (len(devices) * count,), NamedSharding(mesh, P("d")),
      [jax.device_put(local[d], d) for d in jax.local_devices()])
  f = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "d"), mesh=mesh,
                            in_specs=P("d"), out_specs=P()))
  return f, x


def _check(out, want: float) -> None:
  for shard in out.addressable_shards:
    got = np.asarray(shard.data)
    if got[0] != want or got[-1] != want:
      raise AssertionError(f"all-reduce gave {got[0]}..{got[-1]}, "
                           f"{want} expected")


def _time(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def _child_mpi(count: int, repeats: int) -> Optional[dict]:
  from mpi4py import MPI  # pylint: disable=g-import-not-at-top
  comm = MPI.COMM_WORLD
  import pjrt.jax_plugin  # pylint: disable=g-import-not-at-top
  pjrt.jax_plugin.register()
  import jax  # pylint: disable=g-import-not-at-top
  jax.distributed.initialize()
  devices = jax.devices()
  f, x = _psum(jax, devices, count, lambda d: 1 + devices.index(d))
  want = float(sum(range(1, len(devices) + 1)))
  _check(f(x), want)  # compiles, and checks the value
  send = np.full(count, 1.0 + comm.rank, np.float32)
  recv = np.zeros_like(send)

  def ours():
    f(x).block_until_ready()

  def blocking():
    comm.Allreduce(send, recv, MPI.SUM)

  def polled():
    request = comm.Iallreduce(send, recv, MPI.SUM)
    pause = 0.0
    while not request.Test():
      pause = min(1e-3, pause * 2 if pause else 1e-6)
      time.sleep(pause)

  cases = {"ours": ours, "blocking": blocking, "polled": polled}
  times = {k: [] for k in cases}
  for _ in range(repeats + 1):  # the first round warms up
    for name, fn in cases.items():
      comm.Barrier()
      times[name].append(comm.allreduce(_time(fn), op=MPI.MAX))
  if comm.rank != 0:
    return None
  return {"processes": comm.size, "devices": len(devices),
          "times": {k: v[1:] for k, v in times.items()}}


def _child_local(count: int, repeats: int) -> dict:
  import pjrt.jax_plugin  # pylint: disable=g-import-not-at-top
  pjrt.jax_plugin.register()
  import jax  # pylint: disable=g-import-not-at-top
  devices = jax.devices()
  f, x = _psum(jax, devices, count, lambda d: 1 + devices.index(d))
  _check(f(x), float(sum(range(1, len(devices) + 1))))
  # One buffer per device, copied; touched first: no page faults.
  srcs = [np.full(count, 1.0, np.float32) for _ in devices]
  dsts = [np.zeros_like(a) for a in srcs]

  def ours():
    f(x).block_until_ready()

  def memcpy():
    np.copyto(dsts[0], srcs[0])

  def memcpy_all():
    for dst, src in zip(dsts, srcs):
      np.copyto(dst, src)

  cases = {"ours": ours, "memcpy": memcpy, "memcpy_all": memcpy_all}
  times = {k: [] for k in cases}
  for _ in range(repeats + 1):
    for name, fn in cases.items():
      times[name].append(_time(fn))
  return {"processes": 1, "devices": len(devices),
          "times": {k: v[1:] for k, v in times.items()}}


# -- the parent ---------------------------------------------------------------


def _python_path() -> str:
  return os.pathsep.join(p for p in sys.path if p)


def _child_env(devices: int) -> dict:
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
  env.update(JAX_PLATFORMS="openxla_cpu",
             OPENXLA_CPU_NUM_DEVICES=str(devices),
             PYTHONPATH=_python_path())
  return env


def _result_of(proc: subprocess.CompletedProcess, what: str) -> dict:
  for line in proc.stdout.splitlines():
    if line.startswith("RESULT "):
      return json.loads(line[len("RESULT "):])
  tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
  return {"error": f"{what} failed (exit {proc.returncode}): " +
                   "\n".join(tail)}


def run_mpi(mib: float, repeats: int, mpirun: Optional[str] = None) -> dict:
  """The cross-process measurement: 2 processes x 2 devices."""
  mpirun = mpirun or shutil.which("mpirun")
  if mpirun is None:
    return {"error": "mpirun is not installed (Open MPI: apt-get install "
                     "openmpi-bin)"}
  try:
    import mpi4py  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return {"error": "mpi4py is not installed"}
  env = dict(_child_env(2), **_MPI_ROOT_ENV)
  forwarded = []
  for name in ("PYTHONPATH", "JAX_PLATFORMS", "OPENXLA_CPU_NUM_DEVICES"):
    forwarded += ["-x", name]
  proc = subprocess.run(
      [mpirun, "-n", "2", "--oversubscribe", *forwarded, sys.executable,
       "-m", "pjrt.tools.collective_bench", "--child", "mpi", "--mib",
       str(mib), "--repeats", str(repeats)],
      env=env, capture_output=True, text=True, timeout=_CHILD_TIMEOUT_S,
      check=False)
  return _result_of(proc, "mpirun -n 2")


def run_local(mib: float, repeats: int) -> dict:
  """The in-process measurement: 1 process x 4 devices."""
  proc = subprocess.run(
      [sys.executable, "-m", "pjrt.tools.collective_bench", "--child",
       "local", "--mib", str(mib), "--repeats", str(repeats)],
      env=_child_env(4), capture_output=True, text=True,
      timeout=_CHILD_TIMEOUT_S, check=False)
  return _result_of(proc, "the in-process child")


def rows(results: dict, mib: float) -> list[dict]:
  """The table's rows: one per measured case, with its median time,
  algorithm bandwidth and ratios."""
  nbytes = mib * (1 << 20)
  out = []
  for part, baselines in (("mpi", ("blocking", "polled")),
                          ("local", ("memcpy", "memcpy_all"))):
    result = results.get(part)
    if result is None:
      continue
    if "error" in result:
      out.append({"part": part, "error": result["error"]})
      continue
    times = {k: statistics.median(v) for k, v in result["times"].items()}
    n = result["devices"]
    shape = f"{result['processes']} proc x {n // result['processes']} dev"
    ours = times["ours"]
    row = {"part": part, "case": f"all-reduce, jax psum ({shape})",
           "ms": ours * 1e3, "gbps": nbytes / ours / 1e9, "ratios": {}}
    out.append(row)
    for name in baselines:
      t = times[name]
      moved = nbytes * (n if name == "memcpy_all" else 1)
      out.append({"part": part, "case": _BASELINE_NAMES[name].format(n=n),
                  "ms": t * 1e3, "gbps": moved / t / 1e9})
      row["ratios"][name] = t / ours
  return out


_BASELINE_NAMES = {
    "blocking": "mpi4py Allreduce, blocking (2 proc)",
    "polled": "mpi4py Iallreduce + Test polling (2 proc)",
    "memcpy": "numpy copy (memcpy), 1 buffer",
    "memcpy_all": "numpy copy (memcpy), {n} buffers",
}


def format_table(table: list[dict], mib: float, repeats: int) -> str:
  lines = [f"f32 all-reduce of {mib:g} MiB per device; medians of "
           f"{repeats} repetitions",
           f"{'case':46s} {'ms':>9s} {'GB/s':>7s}  ratio (baseline / ours)"]
  for row in table:
    if "error" in row:
      lines.append(f"{row['part']}: not measured: {row['error']}")
      continue
    ratios = row.get("ratios") or {}
    text = ""
    if row["part"] == "mpi" and ratios:
      goal = _GOALS["mpi"]
      text = (f"vs Allreduce {ratios['blocking']:.2f}, vs polled "
              f"{ratios['polled']:.2f} (goal >= {goal:.2f} of raw MPI)")
    elif row["part"] == "local" and ratios:
      goal = _GOALS["local"]
      text = (f"vs 1 buffer {ratios['memcpy']:.2f}, vs all buffers "
              f"{ratios['memcpy_all']:.2f} (goal >= {goal:.2f} of memcpy)")
    lines.append(f"{row['case']:46s} {row['ms']:9.2f} {row['gbps']:7.2f}  "
                 f"{text}".rstrip())
  lines.append("GB/s: the bytes of one buffer (of all n for the n-buffer "
               "copy) / time. An all-reduce of n devices reads n buffers "
               "and writes n: at best it takes the n-buffer copy's time")
  return "\n".join(lines)


def _progress(text: str) -> None:
  sys.stderr.write(f"collective_bench: {text}\n")
  sys.stderr.flush()


def main(argv: Optional[Sequence[str]] = None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m pjrt.tools.collective_bench",
      description="All-reduce bandwidth of the openxla_cpu plugin through "
      "JAX: 2 processes x 2 devices under mpirun against mpi4py, and 1 "
      "process x 4 devices against memcpy; prints one table of medians "
      "and ratios.")
  ap.add_argument("--mib", type=float, default=64.0,
                  help="f32 buffer per device, MiB (default 64)")
  ap.add_argument("--repeats", type=int, default=7,
                  help="timed repetitions per case (default 7; medians)")
  ap.add_argument("--only", choices=("mpi", "local"),
                  help="run one part only")
  ap.add_argument("--mpirun", help="the mpirun to use (default: on PATH)")
  ap.add_argument("--json", action="store_true",
                  help="print the raw timings as JSON after the table")
  ap.add_argument("--child", choices=("mpi", "local"),
                  help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  count = max(1, int(args.mib * (1 << 20)) // 4)
  if args.child == "mpi":
    result = _child_mpi(count, args.repeats)
    if result is not None:
      print("RESULT " + json.dumps(result), flush=True)
    return 0
  if args.child == "local":
    print("RESULT " + json.dumps(_child_local(count, args.repeats)),
          flush=True)
    return 0
  parts = [args.only] if args.only else ["mpi", "local"]
  results = {}
  for k, part in enumerate(parts, 1):
    what = ("2 processes x 2 devices under mpirun" if part == "mpi" else
            "1 process x 4 devices")
    _progress(f"[{k}/{len(parts)}] {what}: {args.mib:g} MiB all-reduce, "
              f"{args.repeats} repetitions ...")
    start = time.perf_counter()
    results[part] = (run_mpi(args.mib, args.repeats, args.mpirun)
                     if part == "mpi" else run_local(args.mib, args.repeats))
    _progress(f"[{k}/{len(parts)}] done in {time.perf_counter() - start:.1f} s")
  print(format_table(rows(results, args.mib), args.mib, args.repeats))
  if args.json:
    print(json.dumps(results))
  return 0


if __name__ == "__main__":
  sys.exit(main())
