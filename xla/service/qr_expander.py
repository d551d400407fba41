"""Expansions of the "Qr" and "ProductOfElementaryHouseholderReflectors"
custom calls into HLO (the role of XLA's QrExpander).

JAX lowers `lax.linalg.geqrf` and `householder_product` on platforms without
LAPACK kernels to these two custom calls (api_version 1, no backend_config):

  Qr(a: T[..., m, n]) -> (T[..., m, n], T[..., min(m, n)])
      LAPACK geqrf semantics: R on and above the diagonal, the Householder
      vectors v_j (implicit unit j-th entry) below it, and their scalars
      tau_j, with H_j = I - tau_j v_j v_j^H and
      H_{p-1}^H ... H_0^H a = R.
  ProductOfElementaryHouseholderReflectors(a: T[..., m, n], taus: T[..., k])
      -> T[..., m, n]
      LAPACK orgqr / ungqr: the first n columns of H_0 H_1 ... H_{k-1}.

T is f32, f64, c64 or c128; leading dimensions are batch dimensions.

The expansion is the unblocked Householder algorithm (Golub & Van Loan,
algorithm 5.2.1) in a while loop over the columns, with masks instead of
shrinking slices so that every shape is static. The reflector of column j
follows LAPACK's xLARFG convention: beta = -sign(Re alpha) * ||x[j:]||
(beta = alpha and tau = 0 when x[j+1:] is zero and alpha is real),
tau = (beta - alpha) / beta, v = x / (alpha - beta) below row j. XLA's
blocked variant (compact WY) only changes speed, not results.
"""

from __future__ import annotations

from xla.service import hlo_text_builder as tb

QR_TARGET = "Qr"
HOUSEHOLDER_PRODUCT_TARGET = "ProductOfElementaryHouseholderReflectors"


def _column(c: tb.Computation, a: tb.Val, j: tb.Val) -> tb.Val:
  """a[..., :, j] as T[..., m]."""
  nb = a.rank - 2
  zero = c.scalar("s32", 0)
  starts = [zero] * (nb + 1) + [j]
  col = c.dynamic_slice(a, starts, a.dims[:-1] + (1,))
  return c.reshape(col, a.dims[:-1])


def _householder(c: tb.Computation, x: tb.Val, j: tb.Val):
  """The reflector of x[..., j:] (see the module docstring): (v, tau,
  beta) with v: T[..., m] (v[j] = 1, zero above j), tau: T[...],
  beta: real[...]."""
  et, rt = x.et, tb.real_type(x.et)
  batch = x.dims[:-1]
  m = x.dims[-1]
  nb = len(batch)
  iota = c.iota("s32", x.dims, nb)
  jb = c.broadcast(j, x.dims, ())
  below = c.compare(iota, jb, "GT")
  zeros = c.full(et, x.dims, 0)
  x_below = c.select(below, x, zeros)
  alpha = c.reshape(
      c.dynamic_slice(x, [c.scalar("s32", 0)] * nb + [j], batch + (1,)),
      batch)
  sigma = c.reduce_sum(c.abs_sq(x_below), [nb])
  rzero = c.full(rt, batch, 0)
  alpha_re = c.real(alpha)
  mu = c.unary("sqrt", c.add(c.abs_sq(alpha), sigma))
  trivial = c.compare(sigma, rzero, "EQ")
  if tb.is_complex(et):
    trivial = c.and_(trivial, c.compare(c.imag(alpha), rzero, "EQ"))
  sign = c.select(c.compare(alpha_re, rzero, "LT"), c.full(rt, batch, 1),
                  c.full(rt, batch, -1))
  beta = c.select(trivial, alpha_re, c.mul(sign, mu))
  beta_t = c.to_type(beta, et)
  safe_beta = c.select(trivial, c.full(et, batch, 1), beta_t)
  tau = c.select(trivial, c.full(et, batch, 0),
                 c.div(c.sub(beta_t, alpha), safe_beta))
  divisor = c.select(trivial, c.full(et, batch, 1), c.sub(alpha, beta_t))
  scaled = c.div(x_below, c.broadcast(divisor, x.dims, range(nb)))
  e_j = c.to_type(c.convert(c.compare(iota, jb, "EQ"), rt), et)
  v = c.add(e_j, scaled)
  del m
  return v, tau, beta


def _apply_reflector(c: tb.Computation, a: tb.Val, v: tb.Val, tau: tb.Val,
                     mask: tb.Val | None) -> tb.Val:
  """a - tau * v (v^H a'), a' = a with the columns where `mask` is false
  zeroed (those columns are left unchanged)."""
  nb = a.rank - 2
  batch = list(range(nb))
  src = a if mask is None else c.select(mask, a, c.full(a.et, a.dims, 0))
  w = c.dot(c.conj(v), src, batch, nb, nb)  # T[..., n]
  outer = c.mul(c.broadcast(v, a.dims, batch + [nb]),
                c.broadcast(w, a.dims, batch + [nb + 1]))
  return c.sub(a, c.mul(c.broadcast(tau, a.dims, batch), outer))


def build_qr(name: str, et: str, dims) -> str:
  """HLO module text whose entry computes Qr of a T[dims] parameter."""
  mb = tb.ModuleBuilder(name)
  main = mb.main
  a = main.param(et, dims)
  nb = len(dims) - 2
  m, n = dims[-2], dims[-1]
  p = min(m, n)
  batch = tuple(dims[:-2])
  taus = main.full(et, batch + (p,), 0)
  j0 = main.scalar("s32", 0)
  init = [j0, a, taus]

  cond = mb.computation("qr_cond")
  j, _, _ = cond.tuple_param(init)
  cond.set_root(cond.compare(j, cond.scalar("s32", p), "LT"))

  body = mb.computation("qr_body")
  j, a_b, taus_b = body.tuple_param(init)
  x = _column(body, a_b, j)
  v, tau, beta = _householder(body, x, j)
  col_iota = body.iota("s32", a_b.dims, nb + 1)
  jb = body.broadcast(j, a_b.dims, ())
  right = body.compare(col_iota, jb, "GT")
  # H_j^H = I - conj(tau) v v^H, applied to the columns right of j.
  a_new = _apply_reflector(body, a_b, v, body.conj(tau), right)
  # Column j: rows above j unchanged, beta on the diagonal, v below.
  row_iota = body.iota("s32", x.dims, nb)
  jr = body.broadcast(j, x.dims, ())
  beta_t = body.broadcast(body.to_type(beta, et), x.dims, range(nb))
  new_col = body.select(
      body.compare(row_iota, jr, "LT"), x,
      body.select(body.compare(row_iota, jr, "EQ"), beta_t, v))
  new_col_b = body.broadcast(new_col, a_b.dims, list(range(nb + 1)))
  a_new = body.select(body.compare(col_iota, jb, "EQ"), new_col_b, a_new)
  t_iota = body.iota("s32", taus_b.dims, nb)
  taus_new = body.select(
      body.compare(t_iota, body.broadcast(j, taus_b.dims, ()), "EQ"),
      body.broadcast(tau, taus_b.dims, range(nb)), taus_b)
  j_next = body.add(j, body.scalar("s32", 1))
  body.set_root([j_next, a_new, taus_new])

  if p > 0:
    _, a, taus = main.while_loop(init, cond, body)
  main.set_root([a, taus])
  return mb.module_text()


def build_householder_product(name: str, et: str, a_dims, k: int) -> str:
  """HLO module text: ProductOfElementaryHouseholderReflectors of T[a_dims]
  and T[..., k] parameters."""
  mb = tb.ModuleBuilder(name)
  main = mb.main
  a = main.param(et, a_dims)
  batch = tuple(a_dims[:-2])
  taus = main.param(et, batch + (k,))
  nb = len(batch)
  m, n = a_dims[-2], a_dims[-1]
  # Q starts as the first n columns of the m x m identity.
  eye = main.compare(main.iota("s32", a_dims, nb),
                     main.iota("s32", a_dims, nb + 1), "EQ")
  q = main.to_type(main.convert(eye, tb.real_type(et)), et)
  j0 = main.scalar("s32", k - 1)
  init = [j0, q, a, taus]

  cond = mb.computation("orgqr_cond")
  j, _, _, _ = cond.tuple_param(init)
  cond.set_root(cond.compare(j, cond.scalar("s32", 0), "GE"))

  body = mb.computation("orgqr_body")
  j, q_b, a_b, taus_b = body.tuple_param(init)
  x = _column(body, a_b, j)
  row_iota = body.iota("s32", x.dims, nb)
  jr = body.broadcast(j, x.dims, ())
  v = body.select(body.compare(row_iota, jr, "GT"), x,
                  body.full(et, x.dims, 0))
  e_j = body.to_type(
      body.convert(body.compare(row_iota, jr, "EQ"), tb.real_type(et)), et)
  v = body.add(v, e_j)
  tau = body.reshape(
      body.dynamic_slice(taus_b, [body.scalar("s32", 0)] * nb + [j],
                         batch + (1,)), batch)
  # Q <- H_j Q, from the last reflector to the first.
  q_new = _apply_reflector(body, q_b, v, tau, None)
  j_next = body.sub(j, body.scalar("s32", 1))
  body.set_root([j_next, q_new, a_b, taus_b])

  if k > 0 and m > 0 and n > 0:
    _, q, _, _ = main.while_loop(init, cond, body)
  main.set_root(q)
  return mb.module_text()
