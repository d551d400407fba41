"""jnp.linalg / jax.scipy.linalg workloads (float64). Decompositions that
are unique only up to signs or order are compared through invariants
(reconstructions, sorted eigenvalues, projectors) as well as directly where
LAPACK's conventions make them unique."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload

_N = 64


def _matrices(seed, n=_N, batch=4):
  k1, k2 = jax.random.split(jax.random.key(seed))
  a = jax.random.normal(k1, (batch, n, n), jnp.float64)
  spd = a @ jnp.swapaxes(a, -1, -2) / n + jnp.eye(n)
  b = jax.random.normal(k2, (batch, n, 3), jnp.float64)
  return a, spd, b


def _const(fn):
  """(init, step) evaluating jit(fn)(*inputs) on fixed inputs."""
  f = jax.jit(fn)

  def init(seed):
    return _matrices(seed)

  def step(state):
    return state, f(*state)

  return init, step


@workload("linalg", dtype="f64")
def linalg_cholesky_solve():
  """cholesky, cho_solve, solve_triangular, solve, inv, det, slogdet on a
  batch of 4 64x64 (SPD and general) matrices."""
  from jax.scipy import linalg as sla  # pylint: disable=g-import-not-at-top

  def fn(a, spd, b):
    chol = jnp.linalg.cholesky(spd)
    sign, logdet = jnp.linalg.slogdet(a)
    return {
        "cholesky": chol,
        "cho_solve": jax.vmap(lambda c, y: sla.cho_solve((c, True), y))(
            chol, b),
        "solve_triangular": sla.solve_triangular(chol, b, lower=True),
        "solve": jnp.linalg.solve(a, b),
        "inv": jnp.linalg.inv(spd),
        "det_spd": jnp.linalg.det(spd / 2.0),
        "slogdet": (sign, logdet),
    }

  return _const(fn)


@workload("linalg", dtype="f64")
def linalg_eigh():
  """eigh of symmetric matrices (eigenvalues, |eigenvector| entries,
  reconstruction) and eigvalsh."""

  def fn(a, spd, b):
    w, v = jnp.linalg.eigh(spd)
    return {"eigenvalues": w, "eigvalsh": jnp.linalg.eigvalsh(spd),
            "reconstruction": (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2),
            "abs_vectors": jnp.abs(v)}

  return _const(fn)


@workload("linalg", dtype="f64")
def linalg_eig():
  """eig and eigvals of general matrices, compared through order-free
  invariants (sorted real parts, sorted |imaginary parts|) and whether the
  residual |A V - V diag(w)| is at rounding level."""

  def fn(a, spd, b):
    w, v = jnp.linalg.eig(a)
    resid = a.astype(v.dtype) @ v - v * w[..., None, :]
    scale = jnp.linalg.norm(a, axis=(-2, -1))
    wv = jnp.linalg.eigvals(a)
    return {"eig_real_sorted": jnp.sort(w.real),
            "eig_abs_imag_sorted": jnp.sort(jnp.abs(w.imag)),
            "eigvals_real_sorted": jnp.sort(wv.real),
            "eigvals_abs_imag_sorted": jnp.sort(jnp.abs(wv.imag)),
            "residual_at_rounding_level":
                jnp.linalg.norm(resid, axis=(-2, -1)) <= 1e-10 * scale}

  return _const(fn)


@workload("linalg", dtype="f64")
def linalg_svd_pinv_lstsq():
  """svd (singular values, reconstruction), pinv, lstsq, matrix_rank,
  norm(ord=2) and cond."""

  def fn(a, spd, b):
    tall = a[:, :, :40]
    u, s, vt = jnp.linalg.svd(tall, full_matrices=False)
    x, _, rank, sv = jax.vmap(lambda m, y: jnp.linalg.lstsq(m, y))(tall, b)
    return {"singular_values": s,
            "reconstruction": (u * s[..., None, :]) @ vt,
            "pinv": jnp.linalg.pinv(tall), "lstsq": x, "lstsq_rank": rank,
            "lstsq_sv": sv, "matrix_rank": jnp.linalg.matrix_rank(a),
            "norm2": jnp.linalg.norm(a, ord=2, axis=(-2, -1)),
            "cond": jnp.linalg.cond(spd)}

  return _const(fn)


@workload("linalg", dtype="f64")
def linalg_qr_lu():
  """qr (reduced and complete: Q R, |R|, Q^T Q) and jax.scipy.linalg.lu /
  lu_factor / lu_solve."""
  from jax.scipy import linalg as sla  # pylint: disable=g-import-not-at-top

  def fn(a, spd, b):
    q, r = jnp.linalg.qr(a[:, :, :48])
    qc, rc = jnp.linalg.qr(a[:, :, :48], mode="complete")
    p, l, u = jax.vmap(sla.lu)(a)
    lu, piv = jax.vmap(sla.lu_factor)(a)
    return {"qr_product": q @ r, "abs_r": jnp.abs(r),
            "qtq": jnp.swapaxes(q, -1, -2) @ q, "complete_product": qc @ rc,
            "lu_p": p, "lu_l": l, "lu_u": u, "lu_factor": lu, "lu_piv": piv,
            "lu_solve": jax.vmap(lambda f, pv, y: sla.lu_solve((f, pv), y))(
                lu, piv, b)}

  return _const(fn)


@workload("linalg", dtype="f64")
def linalg_matrix_functions():
  """matrix_power (positive and negative), jax.scipy.linalg.expm, expm of
  an antisymmetric matrix (orthogonal result) and a trace einsum (32x32)."""
  from jax.scipy import linalg as sla  # pylint: disable=g-import-not-at-top
  n = 32

  def fn(a, spd, b):
    small = a / (2.0 * n ** 0.5)
    anti = small - jnp.swapaxes(small, -1, -2)
    e = jax.vmap(sla.expm)(anti)
    return {"matrix_power_5": jnp.linalg.matrix_power(small, 5),
            "matrix_power_neg2": jnp.linalg.matrix_power(spd, -2),
            "expm": jax.vmap(sla.expm)(small),
            "expm_orthogonality": jnp.swapaxes(e, -1, -2) @ e,
            "trace_products": jnp.einsum("bij,bji->b", spd, small)}

  f = jax.jit(fn)

  def init(seed):
    return _matrices(seed, n=n)

  def step(state):
    return state, f(*state)

  return init, step


@workload("linalg", dtype="f64")
def linalg_schur_hessenberg():
  """jax.scipy.linalg.schur and hessenberg (compared through T's diagonal
  spectrum and reconstructions)."""
  from jax.scipy import linalg as sla  # pylint: disable=g-import-not-at-top

  def fn(a, spd, b):
    t, z = jax.vmap(sla.schur)(spd)
    h, q = jax.vmap(lambda m: sla.hessenberg(m, calc_q=True))(a)
    return {"schur_diag_sorted": jnp.sort(jnp.diagonal(t, axis1=-2, axis2=-1)),
            "schur_reconstruction": z @ t @ jnp.swapaxes(z, -1, -2),
            "hessenberg_reconstruction": q @ h @ jnp.swapaxes(q, -1, -2)}

  return _const(fn)
