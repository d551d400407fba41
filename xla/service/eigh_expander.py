"""Expansion of the "Eigh" custom call into HLO (the role of XLA's
EighExpander).

JAX's TPU lowering of `lax.linalg.eigh` (Jacobi variant), and ours for the
openxla_cpu platform, emit

  Eigh(a: T[..., n, n]) -> (v: T[..., n, n], w: R[..., n])

with api_version 1 and backend_config "lower,sort_eigenvalues,max_iter,tol"
(e.g. "1,1,100,1e-6"): only the lower (lower=1) or upper triangle of `a` is
read, the diagonal's real part; `a = v diag(w) v^H` with orthonormal
eigenvector columns; w ascending (with v's columns) when sort_eigenvalues;
max_iter bounds the number of Jacobi sweeps and the iteration stops once the
off-diagonal Frobenius norm is at most tol times the whole norm. T is f32,
f64, c64 or c128, R its real type; leading dimensions are batch dimensions.
n <= 1: v = 1, w = Re(a).

The expansion is the cyclic Jacobi method (Golub & Van Loan, section 8.5):
a while loop of plane rotations over the pairs (p, q), p < q, in row-cyclic
order, every batch element rotated at once. XLA's expander uses the
parallel (tournament) ordering, which rotates n/2 disjoint pairs per step;
this one rotates one pair per step, simpler and fine for the small matrices
it is meant for. The rotation of pair (p, q) is J = D R with
R = [[c, s], [-s, c]] (symmetric Schur decomposition of the real 2x2
[[a_pp, |a_pq|], [|a_pq|, a_qq]]) and D = diag(1, conj(a_pq / |a_pq|))
removing the phase of a complex a_pq; A <- J^H A J (with A_pq = A_qp = 0
set exactly), V <- V J. The input is scaled by its largest entry first, as
XLA does, so that squares do not overflow.
"""

from __future__ import annotations

import dataclasses

import support
from xla.service import hlo_text_builder as tb

EIGH_TARGET = "Eigh"


@dataclasses.dataclass(frozen=True)
class EighConfig:
  lower: bool = True
  sort_eigenvalues: bool = True
  max_iter: int = 100
  tol: float = 1e-6


def parse_config(text: str, name: str = "") -> EighConfig:
  """Reads "lower,sort_eigenvalues,max_iter,tol"."""
  parts = [p.strip() for p in text.split(",")]
  try:
    if len(parts) != 4:
      raise ValueError(text)
    return EighConfig(bool(int(parts[0])), bool(int(parts[1])),
                      int(parts[2]), float(parts[3]))
  except ValueError:
    raise support.InvalidArgumentError(
        f"custom-call 'Eigh' ({name}): backend_config must be "
        f"'lower,sort_eigenvalues,max_iter,tol', got {text!r}") from None


def _pairs(n: int) -> list[tuple[int, int]]:
  return [(p, q) for p in range(n) for q in range(p + 1, n)]


def _symmetrize(c: tb.Computation, a: tb.Val, lower: bool) -> tb.Val:
  """The Hermitian matrix given by one triangle of `a`."""
  nb = a.rank - 2
  perm = list(range(nb)) + [nb + 1, nb]
  row = c.iota("s32", a.dims, nb)
  col = c.iota("s32", a.dims, nb + 1)
  mirrored = c.conj(c.transpose(a, perm))
  kept_side = c.compare(row, col, "GT" if lower else "LT")
  other_side = c.compare(row, col, "LT" if lower else "GT")
  diag = c.to_type(c.real(a), a.et)
  return c.select(kept_side, a, c.select(other_side, mirrored, diag))


def _entry(c: tb.Computation, a: tb.Val, i: tb.Val, j: tb.Val) -> tb.Val:
  """a[..., i, j] as T[...]."""
  nb = a.rank - 2
  zero = c.scalar("s32", 0)
  batch = a.dims[:-2]
  return c.reshape(c.dynamic_slice(a, [zero] * nb + [i, j], batch + (1, 1)),
                   batch)


def _norms(c: tb.Computation, a: tb.Val):
  """(off-diagonal, whole) squared Frobenius norms, each R[...]."""
  nb = a.rank - 2
  sq = c.abs_sq(a)
  eye = c.compare(c.iota("s32", a.dims, nb), c.iota("s32", a.dims, nb + 1),
                  "EQ")
  off = c.select(eye, c.full(sq.et, sq.dims, 0), sq)
  return c.reduce_sum(off, [nb, nb + 1]), c.reduce_sum(sq, [nb, nb + 1])


def _rotation(c: tb.Computation, a: tb.Val, p: tb.Val, q: tb.Val) -> tb.Val:
  """The Jacobi rotation J (T[..., n, n]) that zeroes a[..., p, q]."""
  et, rt = a.et, tb.real_type(a.et)
  nb = a.rank - 2
  batch = a.dims[:-2]
  b = _entry(c, a, p, q)
  app = c.real(_entry(c, a, p, p))
  aqq = c.real(_entry(c, a, q, q))
  absb = c.unary("sqrt", c.abs_sq(b))
  zero, one = c.full(rt, batch, 0), c.full(rt, batch, 1)
  nonzero = c.compare(absb, zero, "GT")
  safe = c.select(nonzero, absb, one)
  tau = c.div(c.sub(aqq, app), c.mul(c.full(rt, batch, 2), safe))
  sign = c.select(c.compare(tau, zero, "GE"), one, c.unary("negate", one))
  root = c.unary("sqrt", c.add(one, c.mul(tau, tau)))
  t = c.div(sign, c.add(c.unary("abs", tau), root))
  t = c.select(nonzero, t, zero)
  cos = c.unary("rsqrt", c.add(one, c.mul(t, t)))
  sin = c.mul(t, cos)
  # conj(b / |b|): 1 when b is 0; for real types the sign of b.
  cph = c.select(nonzero, c.conj(c.div(b, c.to_type(safe, et))),
                 c.full(et, batch, 1))
  cos_t, sin_t = c.to_type(cos, et), c.to_type(sin, et)
  jpp, jpq = cos_t, sin_t
  jqp = c.mul(c.unary("negate", sin_t), cph)
  jqq = c.mul(cos_t, cph)

  row = c.iota("s32", a.dims, nb)
  col = c.iota("s32", a.dims, nb + 1)
  pb = c.broadcast(p, a.dims, ())
  qb = c.broadcast(q, a.dims, ())
  r_p, r_q = c.compare(row, pb, "EQ"), c.compare(row, qb, "EQ")
  c_p, c_q = c.compare(col, pb, "EQ"), c.compare(col, qb, "EQ")
  eye = c.to_type(c.convert(c.compare(row, col, "EQ"), rt), et)

  def bc(x):
    return c.broadcast(x, a.dims, range(nb))

  j = eye
  j = c.select(c.and_(r_p, c_p), bc(jpp), j)
  j = c.select(c.and_(r_p, c_q), bc(jpq), j)
  j = c.select(c.and_(r_q, c_p), bc(jqp), j)
  j = c.select(c.and_(r_q, c_q), bc(jqq), j)
  return j, c.or_(c.and_(r_p, c_q), c.and_(r_q, c_p))


def build_eigh(name: str, et: str, dims, cfg: EighConfig) -> str:
  """HLO module text whose entry computes Eigh of a T[dims] parameter,
  returning (v, w)."""
  mb = tb.ModuleBuilder(name)
  main = mb.main
  rt = tb.real_type(et)
  a = main.param(et, dims)
  dims = tuple(dims)
  nb = len(dims) - 2
  n = dims[-1]
  if dims[-2] != n:
    raise support.InvalidArgumentError(
        f"Eigh needs square matrices, got {et}{list(dims)}")
  batch = dims[:-2]
  bidx = list(range(nb))
  if n <= 1:
    v = main.full(et, dims, 1)
    w = main.reshape(main.real(a), batch + (n,))
    main.set_root([v, w])
    return mb.module_text()

  a = _symmetrize(main, a, cfg.lower)
  # Scale by the largest |Re|, |Im| of each matrix (1 for a zero matrix).
  mag = main.unary("abs", main.real(a))
  if tb.is_complex(et):
    mag = main.max(mag, main.unary("abs", main.imag(a)))
  scale = main.reduce_max(mag, [nb, nb + 1], 0.0)
  scale = main.select(main.compare(scale, main.full(rt, batch, 0), "EQ"),
                      main.full(rt, batch, 1), scale)
  a = main.div(a, main.broadcast(main.to_type(scale, et), dims, bidx))

  pairs = _pairs(n)
  eye = main.compare(main.iota("s32", dims, nb), main.iota("s32", dims, nb + 1),
                     "EQ")
  v0 = main.to_type(main.convert(eye, rt), et)
  init = [main.scalar("s32", 0), a, v0]

  cond = mb.computation("jacobi_cond")
  k, a_c, _ = cond.tuple_param(init)
  limit = cond.scalar("s32", min(cfg.max_iter * len(pairs), 2**31 - 1))
  off, whole = _norms(cond, a_c)
  tol2 = cond.full(rt, batch, cfg.tol * cfg.tol)
  unconverged = cond.compare(off, cond.mul(tol2, whole), "GT")
  if nb:
    unconverged = cond.reduce_or(unconverged, bidx)
  cond.set_root(cond.and_(cond.compare(k, limit, "LT"), unconverged))

  body = mb.computation("jacobi_body")
  k, a_b, v_b = body.tuple_param(init)
  table = body.s32_table(pairs)
  idx = body.binary("remainder", k, body.scalar("s32", len(pairs)))
  pair = body.dynamic_slice(table, [idx, body.scalar("s32", 0)], (1, 2))
  p = body.reshape(body.slice(pair, (0, 0), (1, 1)), ())
  q = body.reshape(body.slice(pair, (0, 1), (1, 2)), ())
  j, pq_mask = _rotation(body, a_b, p, q)
  jh = body.conj(body.transpose(j, bidx + [nb + 1, nb]))
  a_new = body.dot(body.dot(jh, a_b, bidx, nb + 1, nb), j, bidx, nb + 1, nb)
  a_new = body.select(pq_mask, body.full(et, dims, 0), a_new)
  v_new = body.dot(v_b, j, bidx, nb + 1, nb)
  body.set_root([body.add(k, body.scalar("s32", 1)), a_new, v_new])

  _, a, v = main.while_loop(init, cond, body)
  diag = main.select(eye, main.real(a), main.full(rt, dims, 0))
  w = main.reduce_sum(diag, [nb + 1])
  w = main.mul(w, main.broadcast(scale, batch + (n,), bidx))
  if cfg.sort_eigenvalues:
    wb = main.broadcast(w, dims, bidx + [nb + 1])
    wb, v = main.sort_by_first(wb, v, nb + 1)
    start = (0,) * (nb + 2)
    w = main.reshape(main.slice(wb, start, batch + (1, n)), batch + (n,))
  main.set_root([v, w])
  return mb.module_text()
