"""`python -m pjrt.tools.cache_bench`: compile time with a persistent cache.

For each program, two child processes compile it with
`jax_compilation_cache_dir` set to a fresh directory: the first compiles
it (cold), the second finds it in the cache (hit). Both run on our
platform (openxla_cpu: the plugin's own program cache, see
pjrt/_src/plugin/program_cache.py) and on JAX's CPU client (JAX's
persistent cache, with its size and compile-time thresholds at 0). Each
child first compiles a one-op program, so that the figures are those of
a process that has compiled before, then times `lowered.compile()` of
the program once (milliseconds; a hit is the best of --repeats
processes). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PROGRAMS = ("softmax", "mlp", "special_f64")

_CHILD = r'''
import json, os, sys, time
platform, cache, name = sys.argv[1], sys.argv[2], sys.argv[3]
if platform == "openxla_cpu":
  from pjrt import jax_plugin
  jax_plugin.register()
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from jax.scipy import special

def softmax(x):
  return jax.nn.softmax(x @ x.T, axis=-1)

def mlp(x):
  h = x
  for k in range(4):
    h = jnp.tanh(h @ (x * (k + 1)) + 0.5)
  return jax.nn.log_softmax(h, axis=-1)

def special_f64(x):
  y = jnp.abs(x).astype(jnp.float64) + 0.5
  return (special.gammaln(y) + special.digamma(y) + special.erf(y - 1) +
          special.ndtri(jnp.clip(y / 4, 0.01, 0.99)) + special.i0e(y))

fn = {"softmax": softmax, "mlp": mlp, "special_f64": special_f64}[name]
x = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
jax.jit(lambda v: v + 1).lower(x).compile()
lowered = jax.jit(fn).lower(x)
t = time.perf_counter()
lowered.compile()
ms = (time.perf_counter() - t) * 1e3
print("RESULT " + json.dumps({"ms": ms, "backend": jax.default_backend()}))
'''


def _child(platform: str, cache: str, name: str) -> dict:
  env = dict(os.environ, JAX_PLATFORMS=platform)
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  proc = subprocess.run([sys.executable, "-c", _CHILD, platform, cache, name],
                        env=env, capture_output=True, text=True, check=False,
                        timeout=600)
  for line in proc.stdout.splitlines():
    if line.startswith("RESULT "):
      return json.loads(line[len("RESULT "):])
  return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m pjrt.tools.cache_bench",
      description=__doc__.split("\n\n")[0] + " Cold compile against a "
      "persistent-cache hit, ours and XLA's.")
  parser.add_argument("--programs", default=",".join(PROGRAMS),
                      help=f"comma-separated (default {','.join(PROGRAMS)})")
  parser.add_argument("--platforms", default="openxla_cpu,cpu")
  parser.add_argument("--repeats", type=int, default=3,
                      help="processes per figure; the best counts")
  args = parser.parse_args(argv)
  names = [n for n in args.programs.split(",") if n]
  unknown = [n for n in names if n not in PROGRAMS]
  if unknown:
    parser.error(f"unknown programs {unknown}; choose from {PROGRAMS}")
  platforms = [p for p in args.platforms.split(",") if p]
  rows = []
  for name in names:
    row = {"program": name}
    for platform in platforms:
      with tempfile.TemporaryDirectory() as cache:
        for phase in ("cold", "hit"):
          print(f"[cache_bench] {name} on {platform}: {phase}",
                file=sys.stderr, flush=True)
          # Only the first process compiles cold (it fills the cache);
          # hits are the best of --repeats processes.
          runs = [_child(platform, cache, name)
                  for _ in range(1 if phase == "cold" else args.repeats)]
          good = [r for r in runs if "ms" in r]
          row[f"{platform} {phase}"] = (min(good, key=lambda r: r["ms"])
                                        if good else runs[0])
    rows.append(row)
  header = ["program"] + [f"{p} {ph} ms" for p in platforms
                          for ph in ("cold", "hit")]
  print(" | ".join(header))
  for row in rows:
    cells = [row["program"]]
    for p in platforms:
      for ph in ("cold", "hit"):
        r = row[f"{p} {ph}"]
        cells.append(f"{r['ms']:.1f}" if "ms" in r else
                     f"error: {r['error'][:60]}")
    print(" | ".join(cells))
  return 0


if __name__ == "__main__":
  sys.exit(main())
