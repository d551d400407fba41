"""JAX lowerings for the openxla_cpu platform where JAX has none that fit.

JAX registers the LAPACK-based lowerings of its linear-algebra primitives for
platform "cpu" only, so on openxla_cpu it falls back to the platform-less
defaults, and some primitives have none:

  * geqrf / householder_product (hence jnp.linalg.qr): the defaults emit the
    custom calls "Qr" / "ProductOfElementaryHouseholderReflectors", which our
    compiler expands (xla/service/linalg_expander.py). Nothing to add.
  * eigh: only cpu/gpu (LAPACK, cuSOLVER) and tpu lowerings exist. We add the
    TPU's Jacobi variant: a custom call "Eigh" with backend_config
    "lower,sort_eigenvalues,max_iter,tol", expanded by our compiler. The
    tolerance is set per dtype (a few ulps) rather than the TPU's fixed 1e-6
    so that f64 results are f64-accurate.
  * svd: its platform-less lowering (jax._src.tpu.linalg.svd, QDWH) is
    registered when that module is imported; it builds on qr, cholesky,
    triangular_solve and eigh, all of which then work here. We import it.
  * eig, schur, hessenberg: LAPACK-only (geev, gees, gehrd). We register a
    lowering that fails at trace time naming what is missing, instead of
    JAX's generic "no lowering" error.
"""

from __future__ import annotations

import numpy as np

_UNSUPPORTED = {
    "eig": "LAPACK geev (general eigendecomposition)",
    "schur": "LAPACK gees (Schur decomposition)",
    "hessenberg": "LAPACK gehrd (Hessenberg reduction)",
}

# Jacobi sweeps stop when ||offdiag(A)||_F <= tol * ||A||_F.
_MAX_SWEEPS = 100


def _eigh_tolerance(dtype) -> float:
  return float(4 * np.finfo(np.dtype(dtype)).eps)


def _eigh_lowering(ctx, operand, *, lower, sort_eigenvalues, subset_by_index,
                   algorithm=None):
  """lax.linalg.eigh_p -> custom call "Eigh" (v, w)."""
  del algorithm  # Always Jacobi here.
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  operand_aval, = ctx.avals_in
  n = operand_aval.shape[-1]
  if subset_by_index is not None and tuple(subset_by_index) != (0, n):
    raise NotImplementedError(
        "eigh with subset_by_index is not supported on openxla_cpu")
  v_aval, w_aval = ctx.avals_out
  result_types = [mlir.aval_to_ir_type(ctx.module_context, v_aval),
                  mlir.aval_to_ir_type(ctx.module_context, w_aval)]
  config = (f"{int(lower)},{int(sort_eigenvalues)},{_MAX_SWEEPS},"
            f"{_eigh_tolerance(w_aval.dtype)!r}")
  op = mlir.custom_call("Eigh", result_types=result_types,
                        operands=[operand], backend_config=config,
                        api_version=1)
  return op.results


def _unsupported(name: str, what: str):
  def lowering(ctx, *args, **kwargs):
    del ctx, args, kwargs
    raise NotImplementedError(
        f"jax.lax.linalg.{name} is not supported on the openxla_cpu "
        f"platform: JAX lowers it only to {what} custom calls, which this "
        f"plugin does not implement")
  return lowering


# Primitives whose "cpu" lowering JAX registers is the one to use here too.
# threefry2x32: JAX's platform-less lowering unrolls all 20 rounds of the
# hash into straight-line code (one long chain of shifts, adds and xors per
# random op); for "cpu" it emits the rounds as a rolled 5-step loop, which
# compiles in a fraction of the time and memory.
FROM_CPU = ("threefry2x32",)


def copy_cpu_lowerings(platform: str, names) -> list[str]:
  """Registers JAX's "cpu" lowering of each primitive named for `platform`.

  Returns the names copied; a name JAX has no "cpu" lowering for is skipped
  (it keeps its platform-less lowering)."""
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  # The modules that register these primitives' lowerings.
  from jax._src.random import threefry2x32 as _  # pylint: disable=g-import-not-at-top,unused-import
  cpu = mlir._platform_specific_lowerings["cpu"]  # pylint: disable=protected-access
  copied = []
  for prim, entry in list(cpu.items()):
    if prim.name in names:
      mlir.register_lowering(prim, entry.rule, platform=platform,
                             inline=entry.inline)
      copied.append(prim.name)
  return copied


def register(platform: str) -> None:
  """Registers the lowerings above for `platform`."""
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  copy_cpu_lowerings(platform, FROM_CPU)
  from jax._src.lax import linalg  # pylint: disable=g-import-not-at-top
  # Registers svd's platform-less (QDWH) lowering.
  from jax._src.tpu.linalg import svd as _  # pylint: disable=g-import-not-at-top,unused-import
  mlir.register_lowering(linalg.eigh_p, _eigh_lowering, platform=platform)
  for name, what in _UNSUPPORTED.items():
    prim = getattr(linalg, f"{name}_p", None)
    if prim is not None:
      mlir.register_lowering(prim, _unsupported(name, what),
                             platform=platform)
