"""Mutation fuzzing of the MLIR parser: the only exception malformed input
may raise is `ParseError`, and parsing must finish quickly.

Script mode (not run by tests):
  python -m stablehlo._src.text.fuzz --cases 100000 [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
import traceback

from stablehlo._src import text
from stablehlo._src.text import diagnostics

# Small programs covering the grammar, used when the corpora are absent.
SEEDS = [
    '''module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {a = "b"}) -> (tensor<3xf32> {jax.result_info = ""}) {
    %cst = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 0x7FC00000]]> : tensor<2x3xf32>
    %0 = stablehlo.add %arg0, %cst : tensor<2x3xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
    %2:2 = "stablehlo.sort"(%1, %1) <{dimension = 0 : i64}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %x: tensor<f32>, %y: tensor<f32>):
      %3 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    }) : (tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
    %4 = stablehlo.slice %2#0 [0:3:1] : (tensor<3xf32>) -> tensor<3xf32>
    return %4 : tensor<3xf32> loc(#loc1)
  }
}
#loc1 = loc("x.py":1:2)
''',
    '''func.func @w(%arg0: tensor<i64>, %q: tensor<4x!quant.uniform<i8:f32, 0.5:-20>>) -> tensor<i64> {
  %0 = stablehlo.while(%iterArg = %arg0) : tensor<i64>
   cond {
    %c = stablehlo.constant dense<10> : tensor<i64>
    %1 = stablehlo.compare  LT, %iterArg, %c : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.custom_call @foo(%iterArg) {backend_config = "", x = #stablehlo.gather<offset_dims = [1]>} : (tensor<i64>) -> tensor<i64>
    stablehlo.return %1 : tensor<i64>
  }
  %2 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [] x [], precision = [DEFAULT, DEFAULT] : (tensor<i64>, tensor<i64>) -> tensor<i64>
  check.expect_eq_const %2, dense<"0x0100000000000000"> : tensor<i64>
  func.return %0 : tensor<i64>
}
''',
]

TIME_LIMIT_S = 5.0


class _Timeout(Exception):
  pass


def mutate(rng: random.Random, src: str) -> str:
  data = bytearray(src.encode("utf-8"))
  for _ in range(rng.randint(1, 4)):
    if not data:
      break
    kind = rng.randrange(5)
    i = rng.randrange(len(data))
    if kind == 0:  # byte flip
      data[i] = rng.randrange(32, 127) if rng.random() < 0.8 else rng.randrange(256)
    elif kind == 1:  # truncation
      del data[i:]
    elif kind == 2:  # deletion
      del data[i:i + rng.randint(1, 16)]
    elif kind == 3:  # duplication
      j = min(len(data), i + rng.randint(1, 32))
      data[i:i] = data[i:j]
    else:  # insert a syntax character
      data[i:i] = rng.choice([b"(", b")", b"{", b"}", b"[", b"]", b"<", b">",
                              b",", b":", b"%", b"#", b"!", b"^", b"\"",
                              b"-", b"0x", b"// -----\n"])
  return data.decode("utf-8", errors="replace")


def check_one(src: str) -> str | None:
  """None if fine, else a description of the failure."""
  def on_alarm(signum, frame):
    raise _Timeout()
  use_alarm = hasattr(signal, "setitimer")
  if use_alarm:
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
  start = time.monotonic()
  try:
    module = text.parse_module(src, "fuzz.mlir")
    printed = text.print_module(module)
    text.parse_module(printed, "printed.mlir")
  except diagnostics.ParseError as e:
    if not str(e).startswith("fuzz.mlir:"):
      return "ParseError from re-parsing printed output:\n" + str(e)
  except _Timeout:
    return f"timeout after {TIME_LIMIT_S}s"
  except Exception:  # pylint: disable=broad-except
    return traceback.format_exc(limit=6)
  finally:
    if use_alarm:
      signal.setitimer(signal.ITIMER_REAL, 0)
      signal.signal(signal.SIGALRM, old)
  if time.monotonic() - start > TIME_LIMIT_S:
    return "too slow"
  return None


def seed_corpus() -> list[str]:
  seeds = list(SEEDS)
  from support import env  # pylint: disable=g-import-not-at-top
  root = env.stablehlo_corpus("interpret")
  if root is not None:
    for path in sorted(root.glob("*.mlir"))[::7]:
      for case in diagnostics.split_input_file(path.read_text()):
        if len(case.text) < 4000:
          seeds.append(case.text)
  return seeds


def run(cases: int, seed: int = 0, verbose: bool = False) -> list[str]:
  rng = random.Random(seed)
  seeds = seed_corpus()
  failures = []
  for i in range(cases):
    src = mutate(rng, rng.choice(seeds))
    problem = check_one(src)
    if problem is not None:
      failures.append(f"case {i}:\n{src[:2000]}\n--> {problem}")
      if verbose:
        print(failures[-1], file=sys.stderr)
    if verbose and (i + 1) % 1000 == 0:
      print(f"{i + 1} cases, {len(failures)} failures", file=sys.stderr)
  return failures


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m stablehlo._src.text.fuzz")
  ap.add_argument("--cases", type=int, default=100000)
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args(argv)
  failures = run(args.cases, args.seed, verbose=True)
  print(f"{args.cases - len(failures)} passed, {len(failures)} failed")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
