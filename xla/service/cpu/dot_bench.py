"""Measurements behind the dot / convolution emitters' choices.

    python -m xla.service.cpu.dot_bench [--quick] [--threads N]

Prints GFLOP/s (best of several runs) for
  * f32 matmul n x n x n, n = 256 / 512 / 1024: the emitted BLAS kernel,
    the emitted loop kernel (BLAS disabled), numpy.matmul, jax.jit(matmul);
  * small batched matmuls (where a gemm call's overhead matters): BLAS
    kernel vs loop kernel (this sets dot_emitter.BLAS_MIN_MNK);
  * f32 NHWC 3x3 stride-1 "same" convolutions on a small CNN's layers:
    the emitted im2col-tile, shifted-gemm and direct-loop kernels, im2col
    as a numpy patch copy + sgemm (numpy.matmul), jax.jit(conv).
Emitted kernels run their whole parallel extent as one part (one thread);
OpenBLAS (hence numpy) gets --threads threads (default 1) and jax single-
threaded Eigen unless --threads > 1, so the columns compare one core each.

The numbers measured on the development box (a 2-core AVX-512 VM shared
with other jobs, so noisy) are quoted, with the conclusions drawn from them,
in the docstrings of dot_emitter and conv_emitter.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _best(fn, repeat: int, min_time: float = 0.05) -> float:
  """Best seconds per call of fn() over `repeat` timed batches."""
  fn()
  best = float("inf")
  for _ in range(repeat):
    n = 0
    t0 = time.perf_counter()
    while True:
      fn()
      n += 1
      dt = time.perf_counter() - t0
      if dt >= min_time:
        break
    best = min(best, dt / n)
  return best


def _gf(flops: float, seconds: float) -> str:
  return f"{flops / seconds / 1e9:8.1f}"


def _kernel(text: str, use_blas: bool):
  from xla.service.cpu import blas  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import contraction_testing as ct  # pylint: disable=g-import-not-at-top
  if use_blas:
    return ct.Kernel(text)
  with blas.disabled():
    return ct.Kernel(text)


def _jax():
  try:
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    return jax, jnp
  except ImportError:
    return None, None


def bench_matmul(sizes, repeat):
  from xla.service.cpu import dot_emitter  # pylint: disable=g-import-not-at-top
  jax, jnp = _jax()
  print("f32 matmul n x n x n (GFLOP/s)")
  print(f"{'n':>6} {'blas-kernel':>12} {'loop-kernel':>12} {'numpy':>8} "
        f"{'jax.jit':>8}")
  rng = np.random.default_rng(0)
  for n in sizes:
    text = f"""HloModule m
ENTRY e {{
  a = f32[{n},{n}] parameter(0)
  b = f32[{n},{n}] parameter(1)
  ROOT d = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    flops = 2.0 * n ** 3
    kb = _kernel(text, True)
    kl = _kernel(text, False)
    assert dot_emitter.describe(kb.instr) == "blas"
    tb = _best(kb.prepare(a, b), repeat)
    tl = _best(kl.prepare(a, b), max(1, repeat // 2))
    tn = _best(lambda: a @ b, repeat)
    row = f"{n:>6} {_gf(flops, tb):>12} {_gf(flops, tl):>12} {_gf(flops, tn)}"
    if jax is not None:
      f = jax.jit(jnp.matmul)
      ja, jb = jnp.asarray(a), jnp.asarray(b)
      tj = _best(lambda: f(ja, jb).block_until_ready(), repeat)
      row += f" {_gf(flops, tj)}"
    print(row, flush=True)


def bench_small(sizes, repeat, batch=64):
  print(f"\nbatched f32 matmul, batch {batch} of n x n x n (GFLOP/s)")
  print(f"{'n':>6} {'M*N*K':>8} {'blas-kernel':>12} {'loop-kernel':>12}")
  rng = np.random.default_rng(1)
  for n in sizes:
    text = f"""HloModule m
ENTRY e {{
  a = f32[{batch},{n},{n}] parameter(0)
  b = f32[{batch},{n},{n}] parameter(1)
  ROOT d = f32[{batch},{n},{n}] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}"""
    a = rng.standard_normal((batch, n, n)).astype(np.float32)
    b = rng.standard_normal((batch, n, n)).astype(np.float32)
    flops = 2.0 * batch * n ** 3
    from xla.service.cpu import dot_emitter  # pylint: disable=g-import-not-at-top
    saved = dot_emitter.BLAS_MIN_MNK
    dot_emitter.BLAS_MIN_MNK = 0
    try:
      kb = _kernel(text, True)
    finally:
      dot_emitter.BLAS_MIN_MNK = saved
    kl = _kernel(text, False)
    tb = _best(kb.prepare(a, b), repeat)
    tl = _best(kl.prepare(a, b), repeat)
    print(f"{n:>6} {n ** 3:>8} {_gf(flops, tb):>12} {_gf(flops, tl):>12}",
          flush=True)


# A small CNN's 3x3 layers: (batch, spatial, cin, cout).
CONV_LAYERS = [(8, 32, 16, 32), (8, 16, 32, 64), (8, 8, 64, 128),
               (8, 32, 3, 16)]


def _im2col_gemm(x, w):
  """'same' 3x3 stride-1 NHWC conv as a numpy patch copy + one sgemm."""
  n, h, wd, c = x.shape
  kh, kw, _, co = w.shape
  xp = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
  cols = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))
  # cols: n, h, w, c, kh, kw -> rows (n h w), cols (kh kw c)
  patches = np.ascontiguousarray(cols.transpose(0, 1, 2, 4, 5, 3)).reshape(
      n * h * wd, kh * kw * c)
  return (patches @ w.reshape(kh * kw * c, co)).reshape(n, h, wd, co)


def _conv_kernel(text: str, strategies):
  from xla.service.cpu import conv_emitter  # pylint: disable=g-import-not-at-top
  saved = conv_emitter.STRATEGIES, conv_emitter.BLAS_MIN_MNK
  conv_emitter.STRATEGIES, conv_emitter.BLAS_MIN_MNK = strategies, 0
  try:
    k = _kernel(text, bool(strategies))
    assert conv_emitter.describe(k.instr) == (
        strategies[0] if strategies else "loops")
    return k
  finally:
    conv_emitter.STRATEGIES, conv_emitter.BLAS_MIN_MNK = saved


def bench_conv(layers, repeat):
  jax, jnp = _jax()
  print("\nf32 NHWC 3x3 stride 1 'same' convolution (GFLOP/s)")
  print(f"{'layer (n,hw,cin,cout)':>22} {'im2col-tiles':>12} "
        f"{'shifted-gemm':>12} {'direct-loops':>12} {'np-im2col+mm':>12} "
        f"{'jax.jit':>8}")
  rng = np.random.default_rng(2)
  for n, hw, ci, co in layers:
    text = f"""HloModule m
ENTRY e {{
  a = f32[{n},{hw},{hw},{ci}] parameter(0)
  b = f32[3,3,{ci},{co}] parameter(1)
  ROOT c = f32[{n},{hw},{hw},{co}] convolution(a, b), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
}}"""
    x = rng.standard_normal((n, hw, hw, ci)).astype(np.float32)
    w = rng.standard_normal((3, 3, ci, co)).astype(np.float32)
    flops = 2.0 * n * hw * hw * co * ci * 9
    ref = _im2col_gemm(x, w)
    row = f"{str((n, hw, ci, co)):>22}"
    for strategies in (("im2col",), ("shifted",), ()):
      k = _conv_kernel(text, strategies)
      np.testing.assert_allclose(k(x, w), ref, rtol=1e-3, atol=1e-3)
      row += f" {_gf(flops, _best(k.prepare(x, w), repeat)):>12}"
    row += f" {_gf(flops, _best(lambda: _im2col_gemm(x, w), repeat)):>12}"
    if jax is not None:
      f = jax.jit(lambda a, b: jax.lax.conv_general_dilated(
          a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
      ja, jb = jnp.asarray(x), jnp.asarray(w)
      tj = _best(lambda: f(ja, jb).block_until_ready(), repeat)
      row += f" {_gf(flops, tj):>8}"
    print(row, flush=True)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="fewer sizes and repeats")
  parser.add_argument("--threads", type=int, default=1)
  args = parser.parse_args(argv)
  threads = str(args.threads)
  if args.threads == 1:
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  from xla.service.cpu import blas  # pylint: disable=g-import-not-at-top
  lib = blas.library()
  print(f"BLAS: {lib.path if lib else 'not found'}"
        f"{f' ({lib.int_bits}-bit ints)' if lib else ''}; threads {threads}")
  blas.set_num_threads(args.threads)
  repeat = 2 if args.quick else 5
  bench_matmul([256, 512] if args.quick else [256, 512, 1024], repeat)
  bench_small([8, 16, 32] if args.quick else [4, 8, 12, 16, 24, 32, 64],
              repeat)
  bench_conv(CONV_LAYERS[:2] if args.quick else CONV_LAYERS, repeat)
  return 0


if __name__ == "__main__":
  sys.exit(main())
