"""Linear algebra on openxla_cpu against JAX's own CPU backend.

    JAX_PLATFORMS=openxla_cpu,cpu python -m pjrt.jax_plugin.linalg_bench

Prints, per function and device, the median time per call of the jitted
function after a warm-up call, and for eigh / svd the largest error of the
eigenvalues / singular values relative to the largest one (against numpy in
f64). Both devices call LAPACK (JAX's lapack_*_ffi custom calls), so the
difference is the runtime's per-call overhead; OpenBLAS threading makes
both noisy on a loaded machine (OPENBLAS_NUM_THREADS=1 steadies them).
"""

from __future__ import annotations

import time

import numpy as np


def _time(jax, f, x, device, reps):
  x = jax.device_put(x, device)
  jf = jax.jit(f)
  jax.block_until_ready(jf(x))
  times = []
  for _ in range(reps):
    t = time.perf_counter()
    out = jax.block_until_ready(jf(x))
    times.append(time.perf_counter() - t)
  return float(np.median(times)) * 1e3, jax.tree.map(np.asarray, out)


def main() -> None:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import jax.scipy.linalg as jsl  # pylint: disable=g-import-not-at-top
  devices = [jax.devices("openxla_cpu")[0], jax.devices("cpu")[0]]
  rng = np.random.default_rng(0)
  a = rng.standard_normal((96, 96)).astype(np.float32)
  spd = (a @ a.T / 96 + np.eye(96)).astype(np.float32)
  rect = rng.standard_normal((32, 48)).astype(np.float32)
  sq = rng.standard_normal((32, 32)).astype(np.float32)
  w64 = np.linalg.eigvalsh(spd.astype(np.float64))
  s64 = np.linalg.svd(rect.astype(np.float64), compute_uv=False)

  def eigh_err(out):
    return np.abs(np.sort(out[0]) - w64).max() / np.abs(w64).max()

  def svd_err(out):
    return np.abs(out[1] - s64).max() / s64.max()

  cases = [
      ("eigh 96x96 SPD f32", jnp.linalg.eigh, spd, eigh_err),
      ("svd 32x48 f32",
       lambda x: jnp.linalg.svd(x, full_matrices=False), rect, svd_err),
      ("eig 32x32 f32", jnp.linalg.eig, sq, None),
      ("schur 32x32 f32", jsl.schur, sq, None),
      ("hessenberg 32x32 f32",
       lambda x: jsl.hessenberg(x, calc_q=True), sq, None),
  ]
  for name, f, x, err in cases:
    row = [f"{name:22s}"]
    for device in devices:
      try:
        ms, out = _time(jax, f, x, device, reps=20)
        extra = f" (err {err(out):.1e})" if err else ""
        row.append(f"{device.platform}: {ms:8.3f} ms{extra}")
      except Exception as e:  # pylint: disable=broad-except
        row.append(f"{device.platform}: fails ({type(e).__name__})")
    print(" | ".join(row), flush=True)


if __name__ == "__main__":
  main()
