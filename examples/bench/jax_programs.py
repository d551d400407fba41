"""The jax versions of the benchmark programs (see numpy_programs.py).

`function(name, **sizes)` returns a plain jax function of the program's
inputs (in `numpy_programs.PROGRAMS[name].make_inputs` order) returning a
tuple of results; `gen_programs.py` lowers it to StableHLO and the bench
runs it through `jax.jit` (XLA CPU). Needs jax.
"""

from __future__ import annotations

import functools

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from examples.bench.numpy_programs import AXPY_ALPHA
from examples.bench.numpy_programs import LEARNING_RATE


def elementwise(x, n):
  del n
  return (jnp.tanh(jnp.exp(-(x * x)) * 2.0 - 1.0) + x * 0.5,)


def axpy(x, y, n):
  del n
  return (AXPY_ALPHA * x + y,)


def softmax(x, n):
  del n
  e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
  return (e / jnp.sum(e, axis=-1, keepdims=True),)


def _layernorm(x, gamma, beta, eps=1e-5):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  centered = x - mean
  var = jnp.mean(centered * centered, axis=-1, keepdims=True)
  return centered * lax.rsqrt(var + eps) * gamma + beta


def layernorm(x, gamma, beta, n):
  del n
  return (_layernorm(x, gamma, beta),)


def matmul(a, b, m, k, n):
  del m, k, n
  return (a @ b,)


def _gelu(x):
  return jax.nn.gelu(x, approximate=True)


def mlp(x, w1, b1, w2, b2, batch, d, hidden):
  del batch, d, hidden
  return (_gelu(x @ w1 + b1) @ w2 + b2,)


def transformer(x, g1, be1, wqkv, wo, g2, be2, w1, b1, w2, b2, seq, d, heads,
                mlp):  # pylint: disable=redefined-outer-name
  del mlp
  dh = d // heads
  h = _layernorm(x, g1, be1)
  qkv = h @ wqkv
  q, k, v = (qkv[:, i * d:(i + 1) * d].reshape(seq, heads, dh)
             for i in range(3))
  scores = jnp.einsum("qhd,khd->hqk", q, k) * (1.0 / np.sqrt(dh))
  causal = lax.broadcasted_iota(jnp.int32, (seq, seq), 0) >= (
      lax.broadcasted_iota(jnp.int32, (seq, seq), 1))
  scores = jnp.where(causal[None], scores, -1e9)
  e = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
  p = e / jnp.sum(e, axis=-1, keepdims=True)
  attn = jnp.einsum("hqk,khd->qhd", p, v).reshape(seq, d)
  x = x + attn @ wo
  h = _layernorm(x, g2, be2)
  return (x + _gelu(h @ w1 + b1) @ w2 + b2,)


def _conv3x3_same(x, w):
  return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _maxpool2(x):
  return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                           "VALID")


def convnet(x, k1, b1, k2, b2, wd, bd, batch, hw, c1, c2, classes):
  del hw, c1, c2, classes
  y = _maxpool2(jnp.maximum(_conv3x3_same(x, k1) + b1, 0.0))
  y = _maxpool2(jnp.maximum(_conv3x3_same(y, k2) + b2, 0.0))
  return (y.reshape(batch, -1) @ wd + bd,)


def _mlp_loss(params, x, y):
  w1, b1, w2, b2 = params
  a1 = jnp.maximum(x @ w1 + b1, 0.0)
  logp = jax.nn.log_softmax(a1 @ w2 + b2, axis=-1)
  return -jnp.sum(y * logp) / x.shape[0]


def mlp_train(w1, b1, w2, b2, x, y, batch, d, hidden, classes):
  del batch, d, hidden, classes
  params = (w1, b1, w2, b2)
  loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
  new = tuple(p - LEARNING_RATE * g for p, g in zip(params, grads))
  return (loss,) + new


def rnn_scan(xs, h0, wx, wh, b, steps, batch, hidden):
  del steps, batch, hidden

  def step(h, x):
    h = jnp.tanh(x @ wx + h @ wh + b)
    return h, h

  h, hs = lax.scan(step, h0, xs)
  return (h, hs)


def sort(x, n):
  del n
  return (jnp.sort(x),)


def topk(x, rows, cols, k):
  del rows, cols
  vals, idx = lax.top_k(x, k)
  return (vals, idx.astype(jnp.int32))


FUNCTIONS = {
    "elementwise": elementwise, "axpy": axpy, "softmax": softmax,
    "layernorm": layernorm,
    "matmul": matmul, "mlp": mlp, "transformer": transformer,
    "convnet": convnet, "mlp_train": mlp_train, "rnn_scan": rnn_scan,
    "sort": sort, "topk": topk,
}


def function(name: str, **sizes):
  """The program's jax function of its inputs alone (sizes bound)."""
  return functools.partial(FUNCTIONS[name], **sizes)
