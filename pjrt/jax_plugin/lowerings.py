"""JAX lowerings for the openxla_cpu platform.

JAX registers some lowerings for platform "cpu" only; on openxla_cpu it would
fall back to the platform-less defaults (or have none). For the primitives in
`FROM_CPU` we register JAX's own "cpu" lowering for our platform:

  * threefry2x32: the platform-less lowering unrolls all 20 rounds of the
    hash into straight-line code (one long chain of shifts, adds and xors per
    random op); for "cpu" it emits the rounds as a rolled 5-step loop, which
    compiles in a fraction of the time and memory.
  * the linear-algebra primitives: on "cpu" they lower to jaxlib's LAPACK
    custom calls (`lapack_<t><routine>_ffi`: getrf, potrf, geqrf, orgqr,
    syevd, gesdd, geev, gees, gehrd, sytrd, gtsv, trsm, ...), which our CPU
    backend runs on LAPACK as XLA CPU does (xla/service/cpu/
    lapack_handlers.py, lapack_emitter.py), and jaxlib's own
    `tridiagonal_solve_perturbed_ffi`, which lapack_handlers implements. Without them eig / schur / hessenberg have no
    lowering at all, eigh has only the TPU's Jacobi iteration and svd the
    QDWH iteration, both far slower and less accurate than LAPACK.

  * check (checkify's assertion primitive): without a lowering, a `check`
    that was not functionalized failed with "MLIR translation rule ... not
    found" instead of JAX's own error telling the user to use
    `checkify.checkify` (its "cpu" rule raises that error, or lowers to a
    host callback when runtime errors are enabled, which plugin platforms do
    not have in JAX 0.10.2).

The platform-independent "Qr" / "Eigh" / "ProductOfElementaryHouseholder
Reflectors" custom calls stay supported by our compiler (linalg_expander)
for HLO from other sources.
"""

from __future__ import annotations

# Primitives whose "cpu" lowering JAX registers is the one to use here too.
FROM_CPU = (
    "threefry2x32",
    "check",
    # jax._src.lax.linalg: LAPACK custom calls.
    "cholesky",
    "eig",
    "eigh",
    "geqp3",
    "geqrf",
    "hessenberg",
    "householder_product",
    "lu",
    "ormqr",
    "schur",
    "svd",
    "triangular_solve",
    "tridiagonal",
    "tridiagonal_solve",
)


def copy_cpu_lowerings(platform: str, names) -> list[str]:
  """Registers JAX's "cpu" lowering of each primitive named for `platform`.

  Returns the names copied; a name JAX has no "cpu" lowering for is skipped
  (it keeps its platform-less lowering)."""
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  # The modules that register these primitives' lowerings.
  from jax._src.random import threefry2x32 as _  # pylint: disable=g-import-not-at-top,unused-import
  from jax._src.lax import linalg as _  # pylint: disable=g-import-not-at-top,unused-import,reimported
  from jax._src import checkify as _  # pylint: disable=g-import-not-at-top,unused-import,reimported
  # JAX exposes no public read of its per-platform lowering table.
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
  copy_cpu_lowerings(platform, FROM_CPU)
