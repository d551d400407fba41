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

JAX's "cpu" linear-algebra rules name their target through jaxlib's
`lapack.prepare_lapack_call`, which first initialises jaxlib's own LAPACK
(it imports scipy.linalg for its function pointers: 0.15 s, paid by the
first program that calls one). Our backend never calls jaxlib's LAPACK,
so while our copies of those rules run, that call only builds the name
(`_skipping_jaxlib_lapack_init`); JAX's own "cpu" lowerings are unchanged.
"""

from __future__ import annotations

import threading

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
      mlir.register_lowering(prim, _skipping_jaxlib_lapack_init(entry.rule),
                             platform=platform, inline=entry.inline)
      copied.append(prim.name)
  return copied


_SKIP = threading.local()


def _install_lapack_name_hook() -> bool:
  """Replaces jaxlib's `lapack.prepare_lapack_call` (once) by one that only
  builds the target name on a thread running one of our rules, and is
  jaxlib's own everywhere else. False if jaxlib has no such function."""
  try:
    from jax._src.lib import lapack  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  prepare = getattr(lapack, "prepare_lapack_call", None)
  build = getattr(lapack, "build_lapack_fn_target", None)
  if prepare is None or build is None:
    return False
  if getattr(prepare, "_openxla_cpu", False):
    return True

  def prepare_lapack_call(fn_base, dtype):
    if getattr(_SKIP, "active", False):
      return build(fn_base, dtype)
    return prepare(fn_base, dtype)

  prepare_lapack_call._openxla_cpu = True  # pylint: disable=protected-access
  lapack.prepare_lapack_call = prepare_lapack_call
  return True


def _skipping_jaxlib_lapack_init(rule):
  """`rule`, run with jaxlib's LAPACK initialisation skipped (see the module
  docstring)."""
  if not _install_lapack_name_hook():
    return rule

  def skipping(ctx, *args, **kwargs):
    outer = getattr(_SKIP, "active", False)
    _SKIP.active = True
    try:
      return rule(ctx, *args, **kwargs)
    finally:
      _SKIP.active = outer

  return skipping


def register(platform: str) -> None:
  """Registers the lowerings above for `platform`."""
  copy_cpu_lowerings(platform, FROM_CPU)
