"""Benchmarks of the CPU backend against XLA CPU (through jax), printing
time ratios (ours / jax; below 1 is faster). Not a test: speed is shown,
never asserted.

    python -m xla.service.cpu.cpu_bench [--size 4096] [--reps 10]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler


def _best(fn, reps: int) -> float:
  fn()
  best = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t)
  return best


def _cases(n: int):
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  return {
      "exp(tanh(x))": lambda a: jnp.exp(jnp.tanh(a)),
      "x * y + 1": lambda a: a * a.T + 1,
      "sum rows": lambda a: jnp.sum(a, axis=1),
      "sum columns": lambda a: jnp.sum(a, axis=0),
      "sum all": jnp.sum,
      "softmax": lambda a: jax.nn.softmax(a, axis=-1),
  }


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", type=int, default=4096)
  parser.add_argument("--reps", type=int, default=10)
  parser.add_argument("--threads", type=int, default=None)
  args = parser.parse_args(argv)
  try:
    import jax  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("jax is not installed; nothing to compare with")
    return 0
  n = args.size
  x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
  xj = jax.numpy.asarray(x)
  print(f"f32[{n},{n}], best of {args.reps}; ratio = ours / jax")
  for name, fn in _cases(n).items():
    jitted = jax.jit(fn)
    module = hlo_parser.parse_and_return_unverified_module(
        jitted.lower(x).as_text(dialect="hlo"))
    exe = cpu_compiler.compile(module, cpu_compiler.CpuCompileOptions(
        threads=args.threads))
    ours = _best(lambda: exe.execute([x]), args.reps)
    theirs = _best(lambda: jitted(xj).block_until_ready(), args.reps)
    err = np.max(np.abs(exe.execute([x])[0] - np.asarray(jitted(xj))))
    print(f"{name:14s} ours {ours * 1e3:8.2f} ms  jax {theirs * 1e3:8.2f} ms"
          f"  ratio {ours / theirs:5.2f}  max|diff| {err:.1e}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
