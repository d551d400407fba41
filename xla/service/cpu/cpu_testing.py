"""Test helpers for the CPU backend: compile HLO text, run it, and compare
with the HLO evaluator (the reference semantics)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Optional, Sequence

import ml_dtypes
import numpy as np

from xla import primitive_util
from xla.hlo.evaluator.hlo_evaluator import HloEvaluator
from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler


def parse(text: str):
  return hlo_parser.parse_and_return_unverified_module(text)


_DISK_CACHE_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing as ct
exe = cpu_compiler.compile(ct.parse(sys.argv[3]),
                           cpu_compiler.CpuCompileOptions(cache_dir=sys.argv[2]))
exec(sys.argv[4])
got = exe.execute(args)[0]
print(exe.compile_stats["cache"], bool(eval(sys.argv[5])))
"""


def compile_in_new_processes(hlo: str, cache_dir: str, setup: str,
                             check: str, runs: int = 2) -> list[list[str]]:
  """Compiles and runs HLO text `hlo` with the disk cache `cache_dir` in
  `runs` fresh processes, one after another (so the later ones load it from
  the disk cache). In each, Python `setup` defines `args`, and `check` is
  an expression over `got` (the first output) and `args`. Returns
  [the compile's cache outcome, str(check)] of each process."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  return [subprocess.run(
      [sys.executable, "-c", _DISK_CACHE_CHILD, root, str(cache_dir), hlo,
       setup, check], check=True, capture_output=True,
      text=True).stdout.split() for _ in range(runs)]


def random_args(module, seed: int = 0) -> list[np.ndarray]:
  """Arguments for the entry parameters: normal floats, small integers,
  random predicates (tuples for tuple parameters)."""
  rng = np.random.default_rng(seed)

  def make(shape):
    if shape.is_tuple():
      return tuple(make(s) for s in shape.tuple_shapes)
    dt = np.dtype(primitive_util.numpy_dtype(shape.element_type))
    dims = tuple(shape.dimensions)
    if dt == np.bool_:
      return rng.random(dims) < 0.5
    if dt.kind == "i":
      return rng.integers(-20, 21, dims).astype(dt)
    if dt.kind == "u":
      return rng.integers(0, 30, dims).astype(dt)
    if dt.kind == "c":
      return (rng.standard_normal(dims) +
              1j * rng.standard_normal(dims)).astype(dt)
    return rng.standard_normal(dims).astype(dt)

  return [make(p.shape) for p in sorted(
      module.entry_computation.parameter_instructions,
      key=lambda p: p.parameter_number)]


def assert_same(got: Sequence, want: Sequence, rtol: float = 1e-5,
                atol: float = 1e-6) -> None:
  """Exact for integers / predicates, allclose (NaN == NaN) for floats."""
  assert len(got) == len(want), (len(got), len(want))
  for k, (g, w) in enumerate(zip(got, want)):
    if w is None:
      assert g is None
      continue
    g, w = np.asarray(g), np.asarray(w)
    assert g.shape == w.shape, (k, g.shape, w.shape)
    assert g.dtype == w.dtype, (k, g.dtype, w.dtype)
    if g.dtype.kind in "biu":
      np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
      continue
    wide = np.complex128 if g.dtype.kind == "c" else np.float64
    tol = rtol
    if g.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
      tol = max(rtol, 1e-2)
    np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=tol,
                               atol=atol, equal_nan=True,
                               err_msg=f"output {k}")


def compile_text(text: str, threads: Optional[int] = 2, **kw):
  module = parse(text)
  return module, cpu_compiler.compile(
      module, cpu_compiler.CpuCompileOptions(threads=threads, **kw))


def run_and_compare(text: str, args: Optional[Sequence] = None,
                    threads: Optional[int] = 2, rtol: float = 1e-5,
                    atol: float = 1e-6, custom_calls=None, seed: int = 0):
  """Compiles and runs `text`, checks it against the evaluator; returns
  (executable, outputs)."""
  module, exe = compile_text(text, threads)
  if args is None:
    args = random_args(module, seed)
  got = exe.execute(args, custom_calls=custom_calls)
  want = HloEvaluator(custom_calls=custom_calls).evaluate(module, args)
  assert_same(got, want, rtol, atol)
  return exe, got


def thunk_kinds(thunks) -> list:
  """A nested summary of a plan's thunks: ('kernel', name) etc."""
  out = []
  for t in thunks:
    k = t["kind"]
    if k == "while":
      out.append(("while", thunk_kinds(t["init"]), thunk_kinds(t["cond"]),
                  thunk_kinds(t["body"])))
    elif k == "conditional":
      out.append(("conditional",
                  [thunk_kinds(b) for b in t["branches"]]))
    else:
      out.append((k, t["name"]))
  return out


def flat_kinds(thunks) -> list[str]:
  out = []
  for t in thunks:
    out.append(t["kind"])
    for key in ("init", "cond", "body", "thunks"):
      if key in t:
        out.extend(flat_kinds(t[key]))
    for b in t.get("branches", ()):
      out.extend(flat_kinds(b))
  return out
