"""Handlers of JAX's LAPACK custom calls (`lapack_<t><routine>_ffi`).

JAX lowers its linear-algebra primitives on CPU to typed-FFI custom calls
that jaxlib's CPU kernels implement on LAPACK; XLA CPU runs them there. We
run the same calls on LAPACK too (`lapack.py`), with the outputs, info codes
and conventions of those kernels:

  * operands and results are matrices with leading batch dimensions; the
    kernel loops over the batch, one LAPACK call per matrix. JAX gives them
    column-major layouts so that LAPACK sees the logical matrix; our handlers
    get logical (row-major) numpy views and hand LAPACK Fortran-ordered
    copies, which is the same matrix.
  * attributes come in the backend_config dictionary (`{uplo = 76 : ui8}`:
    characters as their code, flags as booleans, `low` / `high` as ints);
  * `info` results are LAPACK's INFO per matrix (int32); pivots (getrf's
    ipiv, geqp3's jpvt) are LAPACK's 1-based int32 values;
  * geev on real input returns its eigenvectors as complex matrices
    (LAPACK packs a conjugate pair into two real columns: column j is the
    real part and j+1 the imaginary part of vector j, and vector j+1 is its
    conjugate), and reports info = -4 without calling LAPACK when the input
    has a non-finite entry;
  * gees supports only sort = 'N' (like jaxlib); gesdd / gesvd not mode 'O'.

`HANDLERS` maps each target name to `fn(instr, operands) -> results`, the
custom-call handler signature of the HLO evaluator and the CPU runtime's
CustomCallThunk; both install them as built-in handlers.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

import numpy as np

import support
from xla import primitive_util
from xla.service.cpu import blas
from xla.service.cpu import lapack

HANDLERS: dict[str, Callable] = {}

_ENTRY = re.compile(r"\s*([A-Za-z_][\w.]*)\s*=\s*(\"(?:[^\"\\]|\\.)*\"|[^,]+?)"
                    r"\s*(?::\s*[\w<>]+)?\s*(?:,|$)")


@functools.lru_cache(maxsize=256)
def parse_backend_config(text: str) -> dict:
  """The entries of an MLIR dictionary attribute printed as text
  (`{mode = 86 : ui8, left = true}`) as Python values; {} for ''."""
  text = (text or "").strip()
  if not text:
    return {}
  if not (text.startswith("{") and text.endswith("}")):
    raise support.InvalidArgumentError(
        f"LAPACK custom call: backend_config {text!r} is not a dictionary")
  body = text[1:-1].strip()
  out = {}
  pos = 0
  while pos < len(body):
    m = _ENTRY.match(body, pos)
    if m is None:
      raise support.InvalidArgumentError(
          f"LAPACK custom call: cannot parse backend_config {text!r}")
    key, raw = m.group(1), m.group(2).strip()
    if raw in ("true", "false"):
      value = raw == "true"
    elif raw.startswith('"'):
      value = raw[1:-1]
    else:
      try:
        value = int(raw)
      except ValueError:
        value = float(raw)
    out[key] = value
    pos = m.end()
  return out


class _Call:
  """One custom call being run: the library, routine, attributes, results."""

  def __init__(self, routine: str, instr, operands):
    self.lib = lapack.library()
    self.routine = routine
    self.target = instr.custom_call_target
    self.attrs = parse_backend_config(instr.backend_config)
    shape = instr.shape
    leaves = shape.tuple_shapes if shape.is_tuple() else [shape]
    self.results = [(tuple(s.dimensions),
                     primitive_util.numpy_dtype(s.element_type))
                    for s in leaves]
    self.dtype = np.dtype(operands[0].dtype)
    if lapack.letter(self.dtype) != routine[0]:
      raise support.InvalidArgumentError(
          f"{self.target}: operand type {self.dtype} does not match the "
          f"routine's type '{routine[0]}'")
    self.complex = routine[0] in "cz"
    self.real_dtype = np.dtype(self.dtype.type(0).real.dtype)

  def char(self, name: str, default=None) -> str:
    v = self.attrs.get(name, default)
    if v is None:
      raise support.InvalidArgumentError(
          f"{self.target}: missing attribute '{name}'")
    return chr(v) if isinstance(v, int) else str(v)

  def out(self, i: int) -> np.ndarray:
    dims, dt = self.results[i]
    return np.zeros(dims, dt)

  def __call__(self, *args, routine=None) -> None:
    self.lib.call(routine or self.routine, *args, scalar=self.dtype)

  def work(self, n, dtype=None) -> np.ndarray:
    return np.zeros(max(1, int(n)), dtype or self.dtype)

  def info(self) -> np.ndarray:
    return self.lib.ints(1)


def _lwork(w: np.ndarray) -> int:
  """The size a workspace query (lwork = -1) wrote into w[0]."""
  return max(1, int(np.real(w[0])))


def _fortran(x: np.ndarray) -> np.ndarray:
  return np.array(x, order="F", copy=True)


def _batch(x: np.ndarray, core: int = 2):
  return np.ndindex(*x.shape[:x.ndim - core])


def _handler(real: str, cplx: str = None):
  """Registers `fn(call, operands)` for the four types of a routine
  (`real` for s/d, `cplx` for c/z, e.g. orgqr / ungqr)."""
  cplx = cplx or real

  def deco(fn):
    for t in "sdcz":
      routine = t + (real if t in "sd" else cplx)

      def handler(instr, operands, fn=fn, routine=routine):
        call = _Call(routine, instr, operands)
        if _matrix_elements(operands) > SINGLE_THREAD_ELEMENTS:
          return fn(call, operands)
        with blas.single_threaded():
          return fn(call, operands)

      handler.__name__ = f"lapack_{routine}_ffi"
      HANDLERS[f"lapack_{routine}_ffi"] = handler
    return fn
  return deco


# Matrices up to this many elements (256 x 256) are factorized with OpenBLAS
# on the calling thread only. On such sizes its threads gain little and, on
# a loaded machine, their spin-waiting costs a lot: eigh of a 96 x 96 matrix
# measured 0.7 ms on one thread and 3 to 360 ms with two threads, at a load
# of 7 on 2 cores. (The runtime pins the same way around BLAS kernels.)
SINGLE_THREAD_ELEMENTS = 256 * 256


def _matrix_elements(operands) -> int:
  return max((int(np.prod(x.shape[-2:])) for x in operands
              if x is not None and x.ndim >= 2), default=0)


def _ld(n: int) -> int:
  return max(1, int(n))


# --- BLAS level 3 -------------------------------------------------------------


@_handler("trsm")
def _trsm(c: _Call, ops):
  x, y = ops
  side, uplo = c.char("side"), c.char("uplo")
  trans, diag = c.char("trans_x"), c.char("diag")
  m, n = y.shape[-2:]
  k = m if side == "L" else n
  out = c.out(0)
  for i in _batch(y):
    a, b = _fortran(x[i]), _fortran(y[i])
    c(side, uplo, trans, diag, m, n, 1.0, a, _ld(k), b, _ld(m))
    out[i] = b
  return out


# --- factorizations -----------------------------------------------------------


@_handler("getrf")
def _getrf(c: _Call, ops):
  x, = ops
  m, n = x.shape[-2:]
  lu, ipiv, info = c.out(0), c.out(1), c.out(2)
  piv = c.lib.ints(min(m, n))
  for i in _batch(x):
    a, inf = _fortran(x[i]), c.info()
    c(m, n, a, _ld(m), piv, inf)
    lu[i], ipiv[i], info[i] = a, piv[:min(m, n)], inf[0]
  return lu, ipiv, info


@_handler("potrf")
def _potrf(c: _Call, ops):
  x, = ops
  n = x.shape[-1]
  uplo = c.char("uplo")
  out, info = c.out(0), c.out(1)
  for i in _batch(x):
    a, inf = _fortran(x[i]), c.info()
    c(uplo, n, a, _ld(n), inf)
    out[i], info[i] = a, inf[0]
  return out, info


@_handler("geqrf")
def _geqrf(c: _Call, ops):
  x, = ops
  m, n = x.shape[-2:]
  out, tau = c.out(0), c.out(1)
  w, inf = c.work(1), c.info()
  c(m, n, None, _ld(m), None, w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  t = c.work(min(m, n))
  for i in _batch(x):
    a = _fortran(x[i])
    c(m, n, a, _ld(m), t, work, lwork, inf)
    out[i], tau[i] = a, t[:min(m, n)]
  return out, tau


@_handler("geqp3")
def _geqp3(c: _Call, ops):
  x, jpvt_in = ops
  m, n = x.shape[-2:]
  out, jpvt, tau = c.out(0), c.out(1), c.out(2)
  rwork = c.work(2 * n, c.real_dtype) if c.complex else None
  w, inf = c.work(1), c.info()
  if c.complex:
    c(m, n, None, _ld(m), None, None, w, -1, rwork, inf)
  else:
    c(m, n, None, _ld(m), None, None, w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  t = c.work(min(m, n))
  for i in _batch(x):
    a = _fortran(x[i])
    piv = c.lib.ints(n)
    piv[:n] = jpvt_in[i]
    if c.complex:
      c(m, n, a, _ld(m), piv, t, work, lwork, rwork, inf)
    else:
      c(m, n, a, _ld(m), piv, t, work, lwork, inf)
    out[i], jpvt[i], tau[i] = a, piv[:n], t[:min(m, n)]
  return out, jpvt, tau


@_handler("orgqr", "ungqr")
def _orgqr(c: _Call, ops):
  x, tau = ops
  m, n = x.shape[-2:]
  k = tau.shape[-1]
  out = c.out(0)
  w, inf = c.work(1), c.info()
  c(m, n, k, None, _ld(m), None, w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  for i in _batch(x):
    a = _fortran(x[i])
    t = c.work(k)
    t[:k] = tau[i]
    c(m, n, k, a, _ld(m), t, work, lwork, inf)
    out[i] = a
  return out


@_handler("ormqr", "unmqr")
def _ormqr(c: _Call, ops):
  a, tau, cm = ops
  left = bool(c.attrs.get("left", True))
  side = "L" if left else "R"
  trans = ("C" if c.complex else "T") if c.attrs.get("transpose") else "N"
  m, n = cm.shape[-2:]
  k = tau.shape[-1]
  lda = _ld(a.shape[-2])
  out = c.out(0)
  w, inf = c.work(1), c.info()
  c(side, trans, m, n, k, None, lda, None, None, _ld(m), w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  for i in _batch(cm):
    av, cv = _fortran(a[i]), _fortran(cm[i])
    t = c.work(k)
    t[:k] = tau[i]
    c(side, trans, m, n, k, av, lda, t, cv, _ld(m), work, lwork, inf)
    out[i] = cv
  return out


# --- eigen / singular value problems -------------------------------------------


@_handler("syevd", "heevd")
def _syevd(c: _Call, ops):
  x, = ops
  n = x.shape[-1]
  mode, uplo = c.char("mode"), c.char("uplo")
  vecs, vals, info = c.out(0), c.out(1), c.out(2)
  w, iw, inf = c.work(1), c.lib.ints(1), c.info()
  if c.complex:
    rw = c.work(1, c.real_dtype)
    c(mode, uplo, n, None, _ld(n), None, w, -1, rw, -1, iw, -1, inf)
    lrwork = _lwork(rw)
    rwork = c.work(lrwork, c.real_dtype)
  else:
    c(mode, uplo, n, None, _ld(n), None, w, -1, iw, -1, inf)
  lwork, liwork = _lwork(w), _lwork(iw)
  work, iwork = c.work(lwork), c.lib.ints(liwork)
  ev = c.work(n, c.real_dtype)
  for i in _batch(x):
    a, inf = _fortran(x[i]), c.info()
    if c.complex:
      c(mode, uplo, n, a, _ld(n), ev, work, lwork, rwork, lrwork, iwork,
        liwork, inf)
    else:
      c(mode, uplo, n, a, _ld(n), ev, work, lwork, iwork, liwork, inf)
    vecs[i], vals[i], info[i] = a, ev[:n], inf[0]
  return vecs, vals, info


def _unpack_real_eigenvectors(wi: np.ndarray, v: np.ndarray, out: np.ndarray):
  """LAPACK's packed real eigenvectors `v` (columns) -> complex `out`."""
  n = v.shape[0]
  j = 0
  while j < n:
    if wi[j] == 0 or np.isnan(wi[j]) or j + 1 >= n:
      out[:, j] = v[:, j]
      j += 1
    else:
      out[:, j] = v[:, j] + 1j * v[:, j + 1]
      out[:, j + 1] = v[:, j] - 1j * v[:, j + 1]
      j += 2


@_handler("geev")
def _geev(c: _Call, ops):
  x, = ops
  n = x.shape[-1]
  jobvl, jobvr = c.char("compute_left"), c.char("compute_right")
  results = [c.out(k) for k in range(len(c.results))]
  w, inf = c.work(1), c.info()
  if c.complex:
    rwork = c.work(2 * n, c.real_dtype)
    c(jobvl, jobvr, n, None, _ld(n), None, None, _ld(n), None, _ld(n), w, -1,
      rwork, inf)
  else:
    c(jobvl, jobvr, n, None, _ld(n), None, None, None, _ld(n), None, _ld(n),
      w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  for i in _batch(x):
    info = results[-1]
    a = _fortran(x[i])
    if not np.all(np.isfinite(a)):
      info[i] = -4
      continue
    vl = np.zeros((n, n), c.dtype, order="F")
    vr = np.zeros((n, n), c.dtype, order="F")
    inf = c.info()
    if c.complex:
      ev = c.work(n)
      c(jobvl, jobvr, n, a, _ld(n), ev, vl, _ld(n), vr, _ld(n), work, lwork,
        rwork, inf)
      wv, l_out, r_out = results[0], results[1], results[2]
      wv[i], l_out[i], r_out[i] = ev[:n], vl, vr
    else:
      wr, wi = c.work(n), c.work(n)
      c(jobvl, jobvr, n, a, _ld(n), wr, wi, vl, _ld(n), vr, _ld(n), work,
        lwork, inf)
      results[0][i], results[1][i] = wr[:n], wi[:n]
      if inf[0] == 0:
        _unpack_real_eigenvectors(wi, vl, results[2][i])
        _unpack_real_eigenvectors(wi, vr, results[3][i])
    info[i] = inf[0]
  return tuple(results)


@_handler("gees")
def _gees(c: _Call, ops):
  x, = ops
  n = x.shape[-1]
  mode, sort = c.char("mode"), c.char("sort", ord("N"))
  if sort != "N":
    raise support.UnimplementedError(
        f"{c.target}: sorting Schur eigenvalues (sort = '{sort}') is not "
        f"supported")
  results = [c.out(k) for k in range(len(c.results))]
  sdim = c.lib.ints(1)
  w, inf = c.work(1), c.info()
  if c.complex:
    rwork = c.work(n, c.real_dtype)
    c(mode, sort, None, n, None, _ld(n), sdim, None, None, _ld(n), w, -1,
      rwork, None, inf)
  else:
    c(mode, sort, None, n, None, _ld(n), sdim, None, None, None, _ld(n), w,
      -1, None, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  for i in _batch(x):
    a, inf = _fortran(x[i]), c.info()
    vs = np.zeros((n, n), c.dtype, order="F")
    if c.complex:
      ev = c.work(n)
      c(mode, sort, None, n, a, _ld(n), sdim, ev, vs, _ld(n), work, lwork,
        rwork, None, inf)
      results[2][i] = ev[:n]
    else:
      wr, wi = c.work(n), c.work(n)
      c(mode, sort, None, n, a, _ld(n), sdim, wr, wi, vs, _ld(n), work,
        lwork, None, inf)
      results[2][i], results[3][i] = wr[:n], wi[:n]
    results[0][i], results[1][i] = a, vs
    results[-2][i], results[-1][i] = sdim[0], inf[0]
  return tuple(results)


@_handler("gehrd")
def _gehrd(c: _Call, ops):
  x, = ops
  m, n = x.shape[-2:]
  low, high = int(c.attrs.get("low", 1)), int(c.attrs.get("high", n))
  out, tau, info = c.out(0), c.out(1), c.out(2)
  w, inf = c.work(1), c.info()
  c(n, low, high, None, _ld(m), None, w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  ntau = tau.shape[-1]
  for i in _batch(x):
    a, inf, t = _fortran(x[i]), c.info(), c.work(max(n - 1, 1))
    c(n, low, high, a, _ld(m), t, work, lwork, inf)
    out[i], tau[i], info[i] = a, t[:ntau], inf[0]
  return out, tau, info


@_handler("sytrd", "hetrd")
def _sytrd(c: _Call, ops):
  x, = ops
  m, n = x.shape[-2:]
  uplo = c.char("uplo")
  out, d, e, tau, info = (c.out(k) for k in range(5))
  w, inf = c.work(1), c.info()
  c(uplo, n, None, _ld(m), None, None, None, w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  for i in _batch(x):
    a, inf = _fortran(x[i]), c.info()
    dv, ev = c.work(n, c.real_dtype), c.work(n - 1, c.real_dtype)
    t = c.work(n - 1)
    c(uplo, n, a, _ld(m), dv, ev, t, work, lwork, inf)
    out[i], d[i], info[i] = a, dv[:n], inf[0]
    e[i], tau[i] = ev[:e.shape[-1]], t[:tau.shape[-1]]
  return out, d, e, tau, info


def _svd(c: _Call, ops, qr: bool):
  x, = ops
  m, n = x.shape[-2:]
  mode = c.char("mode")
  if mode == "O":
    raise support.UnimplementedError(
        f"{c.target}: computation mode 'O' (overwrite x) is not supported")
  x_out, s, u, vt, info = (c.out(k) for k in range(5))
  ucols = u.shape[-1]
  vt_rows, vt_cols = vt.shape[-2:]
  ldu, ldvt = _ld(m), _ld(vt_rows)
  mn = min(m, n)
  w, inf = c.work(1), c.info()
  if qr:
    rwork = c.work(5 * mn, c.real_dtype) if c.complex else None
    head = (mode, mode, m, n)
  else:
    if c.complex:
      if mode == "N":
        lrwork = 7 * mn
      else:
        lrwork = max(5 * mn * mn + 5 * mn,
                     2 * max(m, n) * mn + 2 * mn * mn + mn)
      rwork = c.work(lrwork, c.real_dtype)
    else:
      rwork = None
    iwork = c.lib.ints(8 * mn)
    head = (mode, m, n)

  def run(a, sv, uu, vv, work, lwork, inf):
    tail = (rwork,) if c.complex else ()
    if not qr:
      tail = tail + (iwork,)
    c(*head, a, _ld(m), sv, uu, ldu, vv, ldvt, work, lwork, *tail, inf)

  run(None, None, None, None, w, -1, inf)
  lwork = _lwork(w)
  work = c.work(lwork)
  for i in _batch(x):
    a, inf = _fortran(x[i]), c.info()
    sv = c.work(mn, c.real_dtype)
    uu = np.zeros((ldu, max(ucols, 1)), c.dtype, order="F")
    vv = np.zeros((ldvt, max(vt_cols, 1)), c.dtype, order="F")
    run(a, sv, uu, vv, work, lwork, inf)
    x_out[i], s[i], info[i] = a, sv[:s.shape[-1]], inf[0]
    u[i] = uu[:u.shape[-2], :ucols]
    vt[i] = vv[:vt_rows, :vt_cols]
  return x_out, s, u, vt, info


@_handler("gesdd")
def _gesdd(c: _Call, ops):
  return _svd(c, ops, qr=False)


@_handler("gesvd")
def _gesvd(c: _Call, ops):
  return _svd(c, ops, qr=True)


# --- tridiagonal systems ------------------------------------------------------


@_handler("gtsv")
def _gtsv(c: _Call, ops):
  dl, d, du, b = ops
  n, nrhs = b.shape[-2:]
  dl_out, d_out, du_out, b_out, info = (c.out(k) for k in range(5))
  for i in _batch(b):
    dlv, dv, duv = (np.array(v[i], copy=True) for v in (dl, d, du))
    bv, inf = _fortran(b[i]), c.info()
    # dl[0] and du[n-1] are not part of the matrix.
    c(n, nrhs, dlv[1:] if n > 1 else None, dv, duv, bv, _ld(n), inf)
    dl_out[i], d_out[i], du_out[i], b_out[i] = dlv, dv, duv, bv
    info[i] = inf[0]
  return dl_out, d_out, du_out, b_out, info


# --- jaxlib's own kernel -------------------------------------------------------


def _perturb_pivot(pivot, row: np.ndarray, perturb, real_dtype):
  """A pivot of magnitude below 1 grown (by `perturb`, doubled each time)
  or scaled up with its row until dividing the row by it cannot overflow;
  LAPACK's xLAGTS safeguard. Returns (pivot, row)."""
  finfo = np.finfo(real_dtype)
  one = real_dtype.type(1)
  tiny, small = finfo.tiny, one / finfo.max
  safemin = tiny if small < tiny else small * (one + finfo.eps)
  bignum = one / safemin
  size = abs(pivot)
  if size >= one:
    return pivot, row
  perturb = max(abs(perturb), safemin)
  perturb = real_dtype.type(np.copysign(perturb, np.real(pivot)))
  largest = np.abs(row).max() if row.size else real_dtype.type(0)
  while size < one:
    if size < safemin:
      if size == 0 or largest * safemin > size:
        pivot = pivot + perturb
        perturb = perturb * 2
      else:
        return pivot * bignum, row * bignum
    elif largest > size * bignum:
      pivot = pivot + perturb
      perturb = perturb * 2
    else:
      break
    size = abs(pivot)
  return pivot, row


def _solve_perturbed(dl, d, du, b, real_dtype):
  """One tridiagonal system T x = b (b: n x k) by Gaussian elimination with
  row pivoting, the forward substitution done while factoring; U keeps up
  to two superdiagonals. Pivots are chosen by magnitude relative to their
  row's scale (as LAPACK's xLAGTF), and tiny pivots of U are perturbed by
  about eps * max|U| in the back substitution instead of dividing by zero,
  so a singular T gives large finite values (jaxlib's
  tridiagonal_solve_perturbed_ffi, after LAPACK's xLAGTF + xLAGTS)."""
  n = d.shape[0]
  eps = np.finfo(real_dtype).eps
  x = np.array(b, copy=True)
  if n == 0:
    return x
  if n == 1:
    p, row = _perturb_pivot(d[0], x[0].copy(), eps * abs(d[0]), real_dtype)
    x[0] = row / p
    return x
  u = np.zeros((n, 3), d.dtype)
  u[0, 0], u[0, 1] = d[0], du[0]
  max_u = max(abs(u[0, 0]), abs(u[0, 1]))
  scale1 = abs(u[0, 0]) + abs(u[0, 1])
  for k in range(n - 1):
    u[k + 1, 0] = d[k + 1]
    scale2 = abs(dl[k + 1]) + abs(u[k + 1, 0])
    if k < n - 2:
      scale2 += abs(du[k + 1])
    if dl[k + 1] == 0:
      scale1 = scale2
      u[k + 1, 1] = du[k + 1]
      u[k, 2] = 0
    else:
      piv1 = 0.0 if u[k, 0] == 0 else abs(u[k, 0]) / scale1
      piv2 = abs(dl[k + 1]) / scale2
      if piv2 <= piv1:
        scale1 = scale2
        factor = dl[k + 1] / u[k, 0]
        u[k + 1, 0] -= factor * u[k, 1]
        u[k + 1, 1] = du[k + 1]
        u[k, 2] = 0
        x[k + 1] = x[k + 1] - factor * x[k]
      else:
        factor = u[k, 0] / dl[k + 1]
        above = u[k, 1]
        u[k, 0] = dl[k + 1]
        u[k + 1, 0] = above - factor * d[k + 1]
        u[k, 1] = d[k + 1]
        if k < n - 2:
          u[k, 2] = du[k + 1]
          u[k + 1, 1] = -factor * du[k + 1]
        x[k], x[k + 1] = x[k + 1].copy(), x[k] - factor * x[k + 1]
        scale1 = abs(u[k + 1, 0]) + abs(u[k + 1, 1])
    if k < n - 2:
      max_u = max(max_u, *np.abs(u[k]))
  max_u = max(max_u, abs(u[n - 1, 0]))
  perturb = eps * max_u
  for k in range(n - 1, -1, -1):
    row = x[k].copy()
    if k + 1 < n:
      row = row - u[k, 1] * x[k + 1]
    if k + 2 < n:
      row = row - u[k, 2] * x[k + 2]
    p, row = _perturb_pivot(u[k, 0], row, perturb, real_dtype)
    x[k] = row * (1 / p)
  return x


def _tridiagonal_solve_perturbed(instr, operands):
  dl, d, du, b = (np.asarray(x) for x in operands)
  dtype = np.dtype(b.dtype)
  if dtype not in LETTERS_TYPES or any(
      np.dtype(x.dtype) != dtype for x in (dl, d, du)):
    raise support.InvalidArgumentError(
        f"{instr.custom_call_target}: operands must all be f32, f64, c64 or "
        f"c128, got {[str(x.dtype) for x in (dl, d, du, b)]}")
  real_dtype = np.dtype(dtype.type(0).real.dtype)
  out = np.empty_like(b)
  for i in np.ndindex(*b.shape[:-2]):
    out[i] = _solve_perturbed(dl[i], d[i], du[i], b[i], real_dtype)
  return out


LETTERS_TYPES = tuple(np.dtype(t) for t in (np.float32, np.float64,
                                           np.complex64, np.complex128))
HANDLERS["tridiagonal_solve_perturbed_ffi"] = _tridiagonal_solve_perturbed


def targets() -> list[str]:
  """The custom-call targets handled here."""
  return sorted(HANDLERS)
