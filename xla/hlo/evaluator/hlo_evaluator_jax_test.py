"""Differential tests of the HLO evaluator against XLA CPU through jax.

Each program is jitted by jax; the optimized HLO text XLA prints (with
fusions, layouts and bitcasts) is parsed and evaluated on the same inputs,
and the results are compared with jax's. Skipped when jax is not
installed.
"""

import numpy as np
import pytest

from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.parser import hlo_parser

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = jax.lax


def _programs():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((4, 8)).astype(np.float32)
  img = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
  kernel = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
  ints = rng.integers(-100, 100, (6, 5)).astype(np.int32)

  def softmax(a):
    e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)

  def fori(a):
    return lax.fori_loop(0, 5, lambda i, c: c * 0.5 + jnp.sin(c) + i, a)

  def maxpool_grad(a):
    return jax.grad(lambda v: jnp.sum(lax.reduce_window(
        v, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") ** 2))(a)

  def while_loop(n, a):
    return lax.while_loop(lambda c: c[0] < n,
                          lambda c: (c[0] + 1, c[1] * 1.5 - 0.25), (0, a))

  return {
      "random_bits": (lambda k: jax.random.normal(
          jax.random.wrap_key_data(k), (3, 4)), (np.array([0, 42],
                                                          np.uint32),)),
      "maxpool_grad": (maxpool_grad, (img,)),
      "while_loop": (while_loop, (np.int32(4), x)),
      "fft": (lambda a: (jnp.fft.irfft(jnp.fft.rfft(a)), jnp.fft.fft(a)),
              (x,)),
      "bits": (lambda a: (lax.population_count(a), lax.clz(a),
                          lax.shift_right_logical(a, 3),
                          jnp.bitwise_xor(a, 0x5a5a)), (ints,)),
      "elementwise": (lambda a, b: jnp.tanh(a) * b + jnp.exp(a) -
                      jnp.log1p(jnp.abs(b)) / (1 + a * a), (x, x[::-1])),
      "int_math": (lambda a: (a // 7, a % 7, a >> 2, a * a * a * a,
                              jnp.clip(a, -20, 20)), (ints,)),
      "softmax": (softmax, (x,)),
      "reduce": (lambda a: (jnp.sum(a, axis=1), jnp.max(a, axis=0),
                            jnp.argmax(a, axis=0), jnp.prod(a[:, :3])),
                 (x,)),
      "dot": (lambda a, b: (a @ b.T, jnp.einsum("ij,kj->ik", a, b)), (x, x)),
      "conv": (lambda a, w: lax.conv_general_dilated(a, w, (2, 2), "SAME"),
               (img, kernel)),
      "conv_grouped": (lambda a, w: lax.conv_general_dilated(
          a, w, (1, 1), ((1, 0), (0, 2)), rhs_dilation=(2, 1),
          feature_group_count=3), (img, kernel.reshape(4, 3, 3, 3)[:3, :1])),
      "fori_loop": (fori, (x,)),
      "scatter": (lambda a, i: a.at[i].add(a[i] * 2),
                  (x, np.array([0, 2, 2], np.int32))),
      "sort": (lambda a: (jnp.sort(a, axis=1), jnp.argsort(a, axis=0)),
               (x,)),
      "gather": (lambda a, i: (a[i], a[:, i], jnp.take(a, i, axis=1)),
                 (x, np.array([3, 0, 1], np.int32))),
      "cumsum_pool": (lambda a: (jnp.cumsum(a, axis=1), lax.reduce_window(
          a, -jnp.inf, lax.max, (2, 2), (1, 2), "VALID")), (x,)),
      "cond_switch": (lambda i, a: lax.switch(
          i, [jnp.sin, jnp.cos, jnp.tanh], a), (np.int32(1), x)),
      "convert": (lambda a: ((a * 100).astype(jnp.int8),
                             a.astype(jnp.bfloat16) * 3), (x,)),
      "dynamic_slice": (lambda a, i: lax.dynamic_update_slice(
          a, lax.dynamic_slice(a, (i, 0), (2, 8)) * 2, (0, i)),
                        (x, np.int32(3))),
      "top_k_cumprod": (lambda a: (lax.top_k(a, 3), jnp.cumprod(
          a[:, :4], axis=0)), (x,)),
  }


PROGRAMS = _programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_xla_cpu(name):
  fn, args = PROGRAMS[name]
  jitted = jax.jit(fn)
  text = jitted.lower(*args).compile().as_text()
  module = hlo_parser.parse_and_return_unverified_module(text)
  got = hlo_evaluator.HloEvaluator().evaluate(module,
                                              [np.asarray(a) for a in args])
  want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jitted(*args))]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape,
                                                       g.dtype, w.dtype)
    if w.dtype.kind in "iub":
      np.testing.assert_array_equal(g, w)
    else:
      wide = np.complex128 if w.dtype.kind == "c" else np.float64
      np.testing.assert_allclose(g.astype(wide), w.astype(wide),
                                 rtol=2e-2 if w.dtype.itemsize < 4 else 1e-4,
                                 atol=1e-5)
