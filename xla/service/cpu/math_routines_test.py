"""Tests of math_routines: kernels call the library routines of the
transcendental functions, vectorised, with the results of the inlined
approximations."""

import re

import numpy as np
import pytest

import support
from xla.service.cpu import cpu_testing
from xla.service.cpu import elemental_testing as et
from xla.service.cpu import jit
from xla.service.cpu import math_routines

# (HLO op, element type, arity) for every function with a routine.
_CASES = [(op, t, 1) for op in ("exponential", "exponential-minus-one", "log",
                                "log-plus-one", "tanh", "logistic", "cbrt")
          for t in ("f32", "f64")]
_CASES += [(op, "f32", 1) for op in ("erf", "sine", "cosine", "tan", "atan",
                                     "asin", "acos", "sinh", "cosh", "asinh",
                                     "acosh", "atanh")]
_CASES += [("power", "f32", 2), ("atan2", "f32", 2)]


def _inputs(t, arity, n=4099):
  """Dense sweeps with the special values (n is odd, so loops run their
  scalar remainder too)."""
  rng = np.random.default_rng(0)
  dt = np.float32 if t == "f32" else np.float64
  specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan,
                       1e-40, -1e-300, 88.7, 710.0, -745.2, 1e30], dt)
  out = []
  for k in range(arity):
    x = np.concatenate([specials, rng.uniform(-20, 20, n // 2).astype(dt),
                        np.exp(rng.uniform(-30, 30, n)).astype(dt)])[:n]
    out.append(np.roll(x, k))
  return out


def _batch(inline: bool):
  with support.flags.override(xla_cpu_inline_math=inline):
    bt = et.KernelBatch()
    names = {}
    for op, t, arity in _CASES:
      args = ", ".join(f"p{i}" for i in range(arity))
      names[(op, t)] = bt.add_elementwise(f"{op}({args})", [t] * arity, t,
                                          width=1)
  bt.compile({n: '"prefer-vector-width"="512"' for n in names.values()})
  return bt, names


@pytest.fixture(scope="module")
def batches():
  return _batch(False), _batch(True)


def test_results_equal_the_inlined_approximations_bit_for_bit(batches):
  (called, cn), (inlined, inn) = batches
  for op, t, arity in _CASES:
    xs = _inputs(t, arity)
    got = called.run(cn[(op, t)], *xs)
    want = inlined.run(inn[(op, t)], *xs)
    same = (got.view(np.uint8).reshape(len(got), -1) ==
            want.view(np.uint8).reshape(len(want), -1)).all(axis=1)
    same |= np.isnan(got) & np.isnan(want)
    assert same.all(), (op, t, xs[0][~same][:4], got[~same][:4],
                        want[~same][:4])


def test_loops_call_the_vector_forms_and_inline_no_polynomial(batches):
  (called, cn), _ = batches
  text = str(called.llvm_module)
  vector_bits = jit.host_target_info().vector_bits
  for op, t, _ in _CASES:
    body = text[text.index(f'@{cn[(op, t)]}('):]
    body = body[:body.index("\n}\n")]
    calls = set(re.findall(r"call [^@]*@\"?([\w.]+)", body))
    assert any(c.startswith(math_routines.routine_name("", _ty(t))[:-4])
               for c in calls), (op, t, calls)
    # The polynomial is not in the kernel: no fma chain of its own.
    assert body.count("llvm.fma") == 0, (op, t)
    if vector_bits >= 512:
      lanes = 16 if t == "f32" else 8
      assert any(c.endswith(f"_v{lanes}") for c in calls), (op, t, calls)


def _ty(t):
  from llvmlite import ir  # pylint: disable=g-import-not-at-top
  return ir.FloatType() if t == "f32" else ir.DoubleType()


def test_flag_inlines_the_approximations(batches):
  _, (inlined, inn) = batches
  text = str(inlined.llvm_module)
  assert "__xla_cpu_lib_math_" not in text
  assert "llvm.fma" in text


def test_a_program_from_the_disk_cache_links_its_routines_in_a_new_process(
    tmp_path):
  """A process that loads a program from the disk cache emits no kernel,
  and must still find the math routines the program calls."""
  hlo = """HloModule m
ENTRY e {
  p = f64[1001] parameter(0)
  ROOT r = f64[1001] log-plus-one(p)
}"""
  outs = cpu_testing.compile_in_new_processes(
      hlo, tmp_path, "args = [np.linspace(0, 5, 1001)]",
      "np.allclose(got, np.log1p(args[0]), rtol=1e-15, atol=0)")
  assert outs == [["miss", "True"], ["disk", "True"]]
