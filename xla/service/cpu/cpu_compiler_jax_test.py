"""Differential tests of the CPU compiler against XLA CPU through jax.

Each program is lowered by jax to (unoptimised) HLO text, compiled by our
pipeline and run on the same inputs; results are compared with jax's.
Skipped when jax is not installed.
"""

import numpy as np
import pytest

from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = jax.lax


def _programs():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((16, 40)).astype(np.float32)
  ints = rng.integers(-100, 100, (6, 5)).astype(np.int32)

  def softmax(a):
    e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)

  def layernorm(a):
    mu = jnp.mean(a, axis=-1, keepdims=True)
    var = jnp.mean((a - mu) ** 2, axis=-1, keepdims=True)
    return (a - mu) * lax.rsqrt(var + 1e-5)

  def scan_cumsum(a):
    def step(c, row):
      c = c + row
      return c, c * 2
    return lax.scan(step, jnp.zeros(a.shape[1], a.dtype), a)

  def fori(a):
    return lax.fori_loop(0, 5, lambda i, c: c * 0.5 + jnp.sin(c) + i, a)

  def while_loop(n, a):
    return lax.while_loop(lambda c: c[0] < n,
                          lambda c: (c[0] + 1, c[1] * 1.5 - 0.25), (0, a))

  def mlp(a, w):
    return jax.nn.gelu(a @ w) .sum(axis=0)

  return {
      "softmax": (softmax, (x,)),
      "layernorm": (layernorm, (x,)),
      "scan_cumsum": (scan_cumsum, (x,)),
      "fori_loop": (fori, (x,)),
      "while_loop": (while_loop, (np.int32(4), x)),
      "cond_switch": (lambda i, a: lax.switch(
          i, [jnp.sin, jnp.cos, jnp.tanh], a), (np.int32(2), x)),
      "reduce": (lambda a: (jnp.sum(a, axis=1), jnp.max(a, axis=0),
                            jnp.argmax(a, axis=0), jnp.prod(a[:, :3] * 0.1 +
                                                            1)), (x,)),
      "int_math": (lambda a: (a // 7, a % 7, a >> 2, a * a * a,
                              jnp.clip(a, -20, 20)), (ints,)),
      "convert": (lambda a: ((a * 100).astype(jnp.int8),
                             a.astype(jnp.bfloat16) * 3), (x,)),
      "dynamic_slice": (lambda a, i: lax.dynamic_update_slice(
          a, lax.dynamic_slice(a, (i, 0), (2, 8)) * 2, (0, i)),
                        (x, np.int32(3))),
      "pad_concat_rev": (lambda a: (jnp.pad(a, ((1, 2), (0, 3))),
                                    jnp.concatenate([a, a[::-1]], axis=1),
                                    a.T[::2]), (x,)),
      "mlp": (mlp, (x, rng.standard_normal((40, 24)).astype(np.float32))),
  }


PROGRAMS = _programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_jax(name):
  fn, args = PROGRAMS[name]
  jitted = jax.jit(fn)
  text = jitted.lower(*args).as_text(dialect="hlo")
  module = hlo_parser.parse_and_return_unverified_module(text)
  exe = cpu_compiler.compile(module, cpu_compiler.CpuCompileOptions(
      threads=2))
  got = exe.execute([np.asarray(a) for a in args])
  want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jitted(*args))]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape,
                                                       g.dtype, w.dtype)
    if w.dtype.kind in "iub":
      np.testing.assert_array_equal(g, w)
    else:
      np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                 rtol=2e-2 if w.dtype.itemsize < 4 else 2e-5,
                                 atol=1e-5)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "scan_cumsum",
                                  "while_loop", "cond_switch", "reduce",
                                  "mlp"])
def test_compiles_xla_optimized_hlo(name):
  # The HLO XLA prints after its own pipeline: fusions, layouts, physical
  # bitcasts. Our pipeline unfuses and re-fuses it.
  fn, args = PROGRAMS[name]
  jitted = jax.jit(fn)
  text = jitted.lower(*args).compile().as_text()
  module = hlo_parser.parse_and_return_unverified_module(text)
  exe = cpu_compiler.compile(module)
  got = exe.execute([np.asarray(a) for a in args])
  want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jitted(*args))]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                               rtol=2e-5, atol=1e-5)
