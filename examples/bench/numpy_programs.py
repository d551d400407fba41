"""The benchmark programs: their sizes, inputs, and numpy eager versions.

Each `Program` names a workload that `gen_programs.py` lowers from jax to
StableHLO (`<name>.mlir` at the "full" sizes, `<name>.quick.mlir` at the
"quick" sizes) and that `python -m xla.tools.bench` runs on every platform.
This module needs only numpy: the jax versions live in `jax_programs.py`
and take the same size parameters and the same inputs, in the same order.

The numpy versions are the "numpy" anchor of the benchmark: plain eager
numpy, one call per operation, as a user would write it (float32
throughout, BLAS for the matmuls). `numpy_programs_test.py` checks each
one against its jax twin at the quick sizes.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

F32 = np.float32


@dataclasses.dataclass(frozen=True)
class Program:
  """One benchmark workload.

  sizes: preset name ("full", "quick") -> keyword size parameters; both the
    input maker and the numpy/jax functions take them.
  make_inputs(rng, **sizes) -> the entry's arguments, in parameter order.
  numpy_fn(*inputs, **sizes) -> tuple of result arrays (the jax version
    returns the same results in the same order).
  bytes_moved(**sizes) -> the bytes a fused implementation must read and
    write at least (only for memory-bound programs; used for bandwidth).
  """
  name: str
  description: str
  sizes: dict
  make_inputs: Callable
  numpy_fn: Callable
  bytes_moved: Optional[Callable] = None

  def inputs(self, preset: str, seed: int = 0) -> list:
    return self.make_inputs(np.random.default_rng(seed), **self.sizes[preset])

  def run_numpy(self, inputs, preset: str) -> tuple:
    return tuple(self.numpy_fn(*inputs, **self.sizes[preset]))


def _normal(rng, shape, scale=1.0):
  return (rng.standard_normal(shape, dtype=F32) * F32(scale)).astype(F32)


# -- elementwise chain ----------------------------------------------------------


def elementwise_inputs(rng, n):
  return [_normal(rng, (n, n))]


def elementwise_numpy(x, n):
  del n
  # tanh(exp(-x^2) * 2 - 1) + x * 0.5
  y = np.exp(-(x * x))
  return (np.tanh(y * F32(2.0) - F32(1.0)) + x * F32(0.5),)


def elementwise_bytes(n):
  return 2 * n * n * 4  # read x once, write the result once


# -- axpy (memory-bound) -------------------------------------------------------

AXPY_ALPHA = 2.5


def axpy_inputs(rng, n):
  return [_normal(rng, (n, n)), _normal(rng, (n, n))]


def axpy_numpy(x, y, n):
  del n
  return (F32(AXPY_ALPHA) * x + y,)


def axpy_bytes(n):
  return 3 * n * n * 4  # read x and y once, write the result once


# -- softmax / layernorm --------------------------------------------------------


def rows_inputs(rng, n):
  return [_normal(rng, (n, n))]


def softmax_numpy(x, n):
  del n
  e = np.exp(x - x.max(axis=-1, keepdims=True))
  return (e / e.sum(axis=-1, keepdims=True),)


def _layernorm(x, gamma, beta, eps=1e-5):
  mean = x.mean(axis=-1, keepdims=True)
  centered = x - mean
  var = (centered * centered).mean(axis=-1, keepdims=True)
  return centered / np.sqrt(var + F32(eps)) * gamma + beta


def layernorm_inputs(rng, n):
  return [_normal(rng, (n, n)), _normal(rng, (n,)) * F32(0.1) + F32(1.0),
          _normal(rng, (n,), 0.1)]


def layernorm_numpy(x, gamma, beta, n):
  del n
  return (_layernorm(x, gamma, beta),)


# -- matmul / MLP ---------------------------------------------------------------


def matmul_inputs(rng, m, k, n):
  return [_normal(rng, (m, k)), _normal(rng, (k, n), 1.0 / np.sqrt(k))]


def matmul_numpy(a, b, m, k, n):
  del m, k, n
  return (a @ b,)


def _gelu(x):
  # The tanh approximation (jax.nn.gelu(approximate=True)).
  c = F32(np.sqrt(2.0 / np.pi))
  return F32(0.5) * x * (F32(1.0) + np.tanh(c * (x + F32(0.044715) * x * x * x)))


def mlp_inputs(rng, batch, d, hidden):
  return [_normal(rng, (batch, d)),
          _normal(rng, (d, hidden), 1.0 / np.sqrt(d)),
          _normal(rng, (hidden,), 0.1),
          _normal(rng, (hidden, d), 1.0 / np.sqrt(hidden)),
          _normal(rng, (d,), 0.1)]


def mlp_numpy(x, w1, b1, w2, b2, batch, d, hidden):
  del batch, d, hidden
  return (_gelu(x @ w1 + b1) @ w2 + b2,)


# -- transformer block ----------------------------------------------------------


def transformer_inputs(rng, seq, d, heads, mlp):
  del heads
  s = 1.0 / np.sqrt(d)
  return [_normal(rng, (seq, d)),
          _normal(rng, (d,), 0.1) + F32(1.0), _normal(rng, (d,), 0.1),
          _normal(rng, (d, 3 * d), s), _normal(rng, (d, d), s),
          _normal(rng, (d,), 0.1) + F32(1.0), _normal(rng, (d,), 0.1),
          _normal(rng, (d, mlp), s), _normal(rng, (mlp,), 0.1),
          _normal(rng, (mlp, d), 1.0 / np.sqrt(mlp)), _normal(rng, (d,), 0.1)]


def transformer_numpy(x, g1, be1, wqkv, wo, g2, be2, w1, b1, w2, b2, seq, d,
                      heads, mlp):
  """Pre-LN block: x + attn(ln(x)), then + mlp(ln(.)); causal attention."""
  del mlp
  dh = d // heads
  h = _layernorm(x, g1, be1)
  qkv = h @ wqkv
  q, k, v = (qkv[:, i * d:(i + 1) * d].reshape(seq, heads, dh)
             .transpose(1, 0, 2) for i in range(3))
  scores = (q @ k.transpose(0, 2, 1)) * F32(1.0 / np.sqrt(dh))
  causal = np.arange(seq)[:, None] >= np.arange(seq)[None, :]
  scores = np.where(causal, scores, F32(-1e9))
  e = np.exp(scores - scores.max(axis=-1, keepdims=True))
  p = e / e.sum(axis=-1, keepdims=True)
  attn = (p @ v).transpose(1, 0, 2).reshape(seq, d)
  x = x + attn @ wo
  h = _layernorm(x, g2, be2)
  return (x + _gelu(h @ w1 + b1) @ w2 + b2,)


# -- conv net -------------------------------------------------------------------


def convnet_inputs(rng, batch, hw, c1, c2, classes):
  flat = (hw // 4) * (hw // 4) * c2
  return [_normal(rng, (batch, hw, hw, 3)),
          _normal(rng, (3, 3, 3, c1), 1.0 / np.sqrt(27)),
          _normal(rng, (c1,), 0.1),
          _normal(rng, (3, 3, c1, c2), 1.0 / np.sqrt(9 * c1)),
          _normal(rng, (c2,), 0.1),
          _normal(rng, (flat, classes), 1.0 / np.sqrt(flat)),
          _normal(rng, (classes,), 0.1)]


def _conv3x3_same(x, w):
  """NHWC x HWIO, stride 1, SAME padding, as im2col + one matmul."""
  n, hgt, wid, c = x.shape
  xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  patches = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
  # patches: [n, h, w, c, 3, 3] -> [n*h*w, 3*3*c] in (kh, kw, c) order.
  cols = patches.transpose(0, 1, 2, 4, 5, 3).reshape(n * hgt * wid, 9 * c)
  return (cols @ w.reshape(9 * c, -1)).reshape(n, hgt, wid, -1)


def _maxpool2(x):
  n, h, w, c = x.shape
  return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def convnet_numpy(x, k1, b1, k2, b2, wd, bd, batch, hw, c1, c2, classes):
  del hw, c1, c2, classes
  y = _maxpool2(np.maximum(_conv3x3_same(x, k1) + b1, F32(0)))
  y = _maxpool2(np.maximum(_conv3x3_same(y, k2) + b2, F32(0)))
  return (y.reshape(batch, -1) @ wd + bd,)


# -- MLP training step ----------------------------------------------------------

LEARNING_RATE = 0.01


def mlp_train_inputs(rng, batch, d, hidden, classes):
  labels = rng.integers(0, classes, size=batch)
  onehot = np.zeros((batch, classes), F32)
  onehot[np.arange(batch), labels] = 1.0
  return [_normal(rng, (d, hidden), 1.0 / np.sqrt(d)),
          _normal(rng, (hidden,), 0.1),
          _normal(rng, (hidden, classes), 1.0 / np.sqrt(hidden)),
          _normal(rng, (classes,), 0.1),
          _normal(rng, (batch, d)), onehot]


def mlp_train_numpy(w1, b1, w2, b2, x, y, batch, d, hidden, classes):
  """Softmax cross-entropy loss of relu(x w1 + b1) w2 + b2, its gradient
  by hand, one SGD step. Returns (loss, w1, b1, w2, b2)."""
  del d, hidden, classes
  z1 = x @ w1 + b1
  a1 = np.maximum(z1, F32(0))
  logits = a1 @ w2 + b2
  shifted = logits - logits.max(axis=-1, keepdims=True)
  logsumexp = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
  logp = shifted - logsumexp
  loss = -(y * logp).sum() / F32(batch)
  dlogits = (np.exp(logp) - y) / F32(batch)
  dw2 = a1.T @ dlogits
  db2 = dlogits.sum(axis=0)
  da1 = dlogits @ w2.T
  dz1 = np.where(z1 > 0, da1, F32(0))
  dw1 = x.T @ dz1
  db1 = dz1.sum(axis=0)
  lr = F32(LEARNING_RATE)
  return (np.asarray(loss, F32), w1 - lr * dw1, b1 - lr * db1,
          w2 - lr * dw2, b2 - lr * db2)


# -- RNN through scan -----------------------------------------------------------


def rnn_inputs(rng, steps, batch, hidden):
  s = 1.0 / np.sqrt(hidden)
  return [_normal(rng, (steps, batch, hidden)), _normal(rng, (batch, hidden)),
          _normal(rng, (hidden, hidden), s), _normal(rng, (hidden, hidden), s),
          _normal(rng, (hidden,), 0.1)]


def rnn_numpy(xs, h0, wx, wh, b, steps, batch, hidden):
  """h_t = tanh(x_t wx + h_{t-1} wh + b); returns (h_T, all h_t)."""
  del batch, hidden
  h = h0
  hs = np.empty(xs.shape[:1] + h0.shape, F32)
  for t in range(steps):
    h = np.tanh(xs[t] @ wx + h @ wh + b)
    hs[t] = h
  return (h, hs)


# -- sort / top-k ---------------------------------------------------------------


def sort_inputs(rng, n):
  return [_normal(rng, (n,))]


def sort_numpy(x, n):
  del n
  return (np.sort(x),)


def topk_inputs(rng, rows, cols, k):
  del k
  return [_normal(rng, (rows, cols))]


def topk_numpy(x, rows, cols, k):
  """The k largest of each row, descending, and their int32 indices; equal
  values in index order (as lax.top_k)."""
  del rows, cols
  part = np.argpartition(-x, k - 1, axis=-1)[:, :k]
  part.sort(axis=-1)  # index order, kept for ties by the stable sort
  vals = np.take_along_axis(x, part, axis=-1)
  order = np.argsort(-vals, axis=-1, kind="stable")
  idx = np.take_along_axis(part, order, axis=-1)
  # Rows where the k-th value has a tie outside the partition: argpartition
  # chose among the tied elements arbitrarily; redo those (rare) rows with a
  # stable sort, which takes the lowest indices.
  kth = np.take_along_axis(x, idx[:, -1:], axis=-1)
  redo = np.flatnonzero((x >= kth).sum(axis=-1) > k)
  if redo.size:
    idx[redo] = np.argsort(-x[redo], axis=-1, kind="stable")[:, :k]
  return (np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32))


PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("elementwise", "tanh(exp(-x^2)*2-1)+x/2 on an NxN f32 array",
            {"full": dict(n=4096), "quick": dict(n=128)},
            elementwise_inputs, elementwise_numpy, elementwise_bytes),
    Program("axpy", "2.5*x+y on NxN f32 arrays (memory-bound)",
            {"full": dict(n=4096), "quick": dict(n=128)},
            axpy_inputs, axpy_numpy, axpy_bytes),
    Program("softmax", "row softmax of an NxN f32 array",
            {"full": dict(n=4096), "quick": dict(n=128)},
            rows_inputs, softmax_numpy),
    Program("layernorm", "row layer norm (eps 1e-5) with scale and shift",
            {"full": dict(n=4096), "quick": dict(n=128)},
            layernorm_inputs, layernorm_numpy),
    Program("matmul", "f32 matrix product MxK @ KxN",
            {"full": dict(m=1024, k=1024, n=1024),
             "quick": dict(m=64, k=48, n=32)},
            matmul_inputs, matmul_numpy),
    Program("mlp", "gelu(x w1 + b1) w2 + b2",
            {"full": dict(batch=256, d=1024, hidden=4096),
             "quick": dict(batch=8, d=32, hidden=64)},
            mlp_inputs, mlp_numpy),
    Program("transformer", "pre-LN causal self-attention + gelu MLP block",
            {"full": dict(seq=512, d=512, heads=8, mlp=2048),
             "quick": dict(seq=16, d=32, heads=4, mlp=64)},
            transformer_inputs, transformer_numpy),
    Program("convnet", "NHWC 2x(conv3x3+relu+maxpool2) + dense",
            {"full": dict(batch=32, hw=32, c1=32, c2=64, classes=10),
             "quick": dict(batch=2, hw=8, c1=4, c2=8, classes=10)},
            convnet_inputs, convnet_numpy),
    Program("mlp_train", "value_and_grad of an MLP cross-entropy + SGD step",
            {"full": dict(batch=256, d=1024, hidden=1024, classes=16),
             "quick": dict(batch=8, d=32, hidden=16, classes=4)},
            mlp_train_inputs, mlp_train_numpy),
    Program("rnn_scan", "tanh RNN as lax.scan (a while loop)",
            {"full": dict(steps=128, batch=32, hidden=512),
             "quick": dict(steps=6, batch=2, hidden=16)},
            rnn_inputs, rnn_numpy),
    Program("sort", "sort of N f32",
            {"full": dict(n=1 << 20), "quick": dict(n=1000)},
            sort_inputs, sort_numpy),
    Program("topk", "top-k of each row (values and int32 indices)",
            {"full": dict(rows=4096, cols=1024, k=16),
             "quick": dict(rows=8, cols=64, k=4)},
            topk_inputs, topk_numpy),
)}
