"""The lapack_*_ffi handlers against numpy.linalg (values where unique,
reconstructions where only defined up to sign / phase / pivoting), called
directly and through the compiled CPU runtime and the HLO evaluator."""

import numpy as np
import pytest

import support
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler
from xla.service.cpu import lapack
from xla.service.cpu import lapack_handlers
from xla.service.cpu import lapack_testing as lt

pytestmark = pytest.mark.skipif(not lapack.available(),
                                reason="no LAPACK library")

_LETTER = lt.LETTER
TYPES = lt.TYPES
_shape = lt.hlo_shape
rand = lt.rand
real_of = lt.real_of
ct = lt.ct
spd = lt.spd


def _module(target, operands, results, config="{}"):
  return hlo_parser.parse_and_return_unverified_module(
      lt.custom_call_text(target, operands, results, config))


def run(routine, operands, results, config="{}"):
  """Runs `lapack_<routine>_ffi` on numpy `operands`; results as a list."""
  module = _module(f"lapack_{routine}_ffi", operands, results, config)
  out = lapack_handlers.HANDLERS[f"lapack_{routine}_ffi"](
      module.entry_computation.root_instruction, list(operands))
  return list(out) if isinstance(out, tuple) else [out]


def tol(dtype):
  return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-11


def close(got, want, dtype, scale=None):
  want = np.asarray(want)
  scale = scale if scale is not None else max(1.0, float(np.abs(want).max()))
  err = float(np.abs(np.asarray(got) - want).max()) if want.size else 0.0
  assert err <= tol(dtype) * scale * 10, err


# --- attributes ---------------------------------------------------------------


def test_parse_backend_config():
  p = lapack_handlers.parse_backend_config
  assert p("") == {}
  assert p("{}") == {}
  assert p("{mode = 86 : ui8, uplo = 76 : ui8}") == {"mode": 86, "uplo": 76}
  assert p("{left = true, transpose = false}") == {"left": True,
                                                   "transpose": False}
  assert p("{high = 3 : i32, low = 1 : i32}") == {"high": 3, "low": 1}
  with pytest.raises(support.InvalidArgumentError):
    p("not a dict")


# --- factorizations -----------------------------------------------------------


@pytest.mark.parametrize("dtype", TYPES)
def test_potrf_matches_numpy_cholesky(dtype):
  x = spd(dtype, (2, 4, 4))
  t = _LETTER[dtype]
  out, info = run(f"{t}potrf", [x], [(dtype, x.shape), (np.int32, (2,))],
                  "{uplo = 76 : ui8}")
  close(np.tril(out), np.linalg.cholesky(x), dtype)
  assert info.tolist() == [0, 0]
  # Not positive definite: LAPACK's info is the failing minor's order.
  bad = -np.eye(3, dtype=dtype)
  _, info = run(f"{t}potrf", [bad], [(dtype, (3, 3)), (np.int32, ())],
                "{uplo = 76 : ui8}")
  assert int(info) == 1


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 3), (2, 3, 5)])
def test_getrf_reconstructs(dtype, shape):
  x = rand(dtype, shape)
  m, n = shape[-2:]
  k = min(m, n)
  batch = shape[:-2]
  lu, ipiv, info = run(f"{_LETTER[dtype]}getrf", [x],
                       [(dtype, shape), (np.int32, batch + (k,)),
                        (np.int32, batch)])
  assert (info == 0).all()
  for i in np.ndindex(*batch):
    a = x[i].copy()
    for r, p in enumerate(ipiv[i]):  # 1-based row interchanges
      a[[r, p - 1]] = a[[p - 1, r]]
    lower = np.tril(lu[i], -1)[:, :k] + np.eye(m, k)
    upper = np.triu(lu[i])[:k, :]
    close(lower @ upper, a, dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5)])
def test_geqrf_orgqr_ormqr(dtype, shape):
  x = rand(dtype, shape)
  m, n = shape[-2:]
  k = min(m, n)
  batch = shape[:-2]
  t = _LETTER[dtype]
  qr, tau = run(f"{t}geqrf", [x], [(dtype, shape), (dtype, batch + (k,))])
  r = np.triu(qr)[..., :k, :]
  _, r_np = np.linalg.qr(x)
  close(np.abs(r), np.abs(r_np), dtype)
  # Q from the reflectors (orgqr / ungqr on the first k columns).
  orgqr = "orgqr" if t in "sd" else "ungqr"
  q, = run(t + orgqr, [np.ascontiguousarray(qr[..., :k]), tau],
           [(dtype, batch + (m, k))])
  close(q @ r, x, dtype)
  close(ct(q) @ q, np.broadcast_to(np.eye(k), batch + (k, k)), dtype)
  # ormqr / unmqr: Q^H C, from the left.
  ormqr = "ormqr" if t in "sd" else "unmqr"
  c = rand(dtype, batch + (m, 2), seed=1)
  qhc, = run(t + ormqr, [np.ascontiguousarray(qr[..., :k]), tau, c],
             [(dtype, c.shape)], "{left = true, transpose = true}")
  full_q, = run(t + orgqr, [np.concatenate(
      [qr[..., :k], np.zeros(batch + (m, m - k), dtype)], -1), tau],
      [(dtype, batch + (m, m))])
  close(qhc, ct(full_q) @ c, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_geqp3_pivots(dtype):
  x = rand(dtype, (2, 5, 4))
  jpvt = np.zeros((2, 4), np.int32)
  qr, piv, tau = run(f"{_LETTER[dtype]}geqp3", [x, jpvt],
                     [(dtype, x.shape), (np.int32, (2, 4)),
                      (dtype, (2, 4))])
  for i in range(2):
    assert sorted(piv[i].tolist()) == [1, 2, 3, 4]
    r = np.triu(qr[i])[:4]
    # |R| matches the QR of the pivoted matrix; diagonal is non-increasing.
    _, r_np = np.linalg.qr(x[i][:, piv[i] - 1])
    close(np.abs(r), np.abs(r_np), dtype)
    d = np.abs(np.diag(r))
    assert (d[:-1] >= d[1:] * (1 - 1e-5)).all()
  del tau


# --- eigen / singular values --------------------------------------------------


@pytest.mark.parametrize("dtype", TYPES)
def test_syevd_heevd(dtype):
  a = rand(dtype, (3, 6, 6))
  h = (a + ct(a)).astype(dtype)
  t = _LETTER[dtype]
  routine = t + ("syevd" if t in "sd" else "heevd")
  v, w, info = run(routine, [h], [(dtype, h.shape), (real_of(dtype), (3, 6)),
                                  (np.int32, (3,))],
                   "{mode = 86 : ui8, uplo = 76 : ui8}")
  assert (info == 0).all()
  close(w, np.linalg.eigvalsh(h), dtype)
  close((v * w[..., None, :]) @ ct(v), h, dtype)
  _, w_only, _ = run(routine, [h], [(dtype, h.shape),
                                    (real_of(dtype), (3, 6)),
                                    (np.int32, (3,))],
                     "{mode = 78 : ui8, uplo = 85 : ui8}")
  close(w_only, np.linalg.eigvalsh(h), dtype)


def _sorted_eigs(w):
  return np.sort_complex(np.asarray(w).astype(np.complex128))


@pytest.mark.parametrize("dtype", TYPES)
def test_geev(dtype):
  x = rand(dtype, (2, 5, 5))
  t = _LETTER[dtype]
  cdt = np.complex64 if t in "sc" else np.complex128
  cfg = "{compute_left = 86 : ui8, compute_right = 86 : ui8}"
  if t in "sd":
    wr, wi, vl, vr, info = run(
        f"{t}geev", [x], [(dtype, (2, 5)), (dtype, (2, 5)),
                          (cdt, x.shape), (cdt, x.shape), (np.int32, (2,))],
        cfg)
    w = wr + 1j * wi
  else:
    w, vl, vr, info = run(f"{t}geev", [x], [(dtype, (2, 5)), (cdt, x.shape),
                                            (cdt, x.shape), (np.int32, (2,))],
                          cfg)
  assert (info == 0).all()
  for i in range(2):
    close(_sorted_eigs(w[i]), _sorted_eigs(np.linalg.eigvals(x[i])), dtype,
          scale=5.0)
    close(x[i] @ vr[i], vr[i] * w[i], dtype, scale=5.0)
    close(ct(vl[i]) @ x[i], w[i][:, None] * ct(vl[i]), dtype, scale=5.0)
  # A non-finite input is reported as info = -4 without calling LAPACK.
  bad = x.copy()
  bad[1, 0, 0] = np.nan
  info = run(f"{t}geev", [bad],
             [(dtype, (2, 5))] * (2 if t in "sd" else 1) +
             [(cdt, x.shape), (cdt, x.shape), (np.int32, (2,))], cfg)[-1]
  assert info.tolist() == [0, -4]


@pytest.mark.parametrize("dtype", TYPES)
def test_gees(dtype):
  x = rand(dtype, (2, 5, 5))
  t = _LETTER[dtype]
  cfg = "{mode = 86 : ui8, sort = 78 : ui8}"
  ev = [(dtype, (2, 5))] * (2 if t in "sd" else 1)
  out = run(f"{t}gees", [x], [(dtype, x.shape), (dtype, x.shape), *ev,
                               (np.int32, (2,)), (np.int32, (2,))], cfg)
  tt, z, info = out[0], out[1], out[-1]
  assert (info == 0).all()
  close(z @ tt @ ct(z), x, dtype, scale=5.0)
  close(ct(z) @ z, np.broadcast_to(np.eye(5), (2, 5, 5)), dtype)
  # Quasi-upper-triangular (real) / upper-triangular (complex).
  assert np.all(np.tril(tt, -2) == 0)
  if t in "cz":
    assert np.all(np.tril(tt, -1) == 0)
  with pytest.raises(support.UnimplementedError, match="sort"):
    run(f"{t}gees", [x], [(dtype, x.shape), (dtype, x.shape), *ev,
                          (np.int32, (2,)), (np.int32, (2,))],
        "{mode = 86 : ui8, sort = 83 : ui8}")


@pytest.mark.parametrize("dtype", TYPES)
def test_gehrd_and_sytrd_keep_eigenvalues(dtype):
  x = rand(dtype, (4, 4))
  t = _LETTER[dtype]
  hq, tau, info = run(f"{t}gehrd", [x], [(dtype, (4, 4)), (dtype, (3,)),
                                          (np.int32, ())],
                      "{high = 4 : i32, low = 1 : i32}")
  assert int(info) == 0
  h = np.triu(hq, -1)
  close(_sorted_eigs(np.linalg.eigvals(h)), _sorted_eigs(np.linalg.eigvals(x)),
        dtype, scale=5.0)
  sym = (x + ct(x)).astype(dtype)
  routine = t + ("sytrd" if t in "sd" else "hetrd")
  rdt = real_of(dtype)
  _, d, e, tau, info = run(routine, [sym],
                           [(dtype, (4, 4)), (rdt, (4,)), (rdt, (3,)),
                            (dtype, (3,)), (np.int32, ())],
                           "{uplo = 76 : ui8}")
  assert int(info) == 0
  tri = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
  close(np.linalg.eigvalsh(tri), np.linalg.eigvalsh(sym), dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("routine", ["gesdd", "gesvd"])
@pytest.mark.parametrize("mode", ["A", "S", "N"])
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4)])
def test_svd(dtype, routine, mode, shape):
  x = rand(dtype, shape)
  m, n = shape[-2:]
  k = min(m, n)
  batch = shape[:-2]
  ucols = k if mode == "S" else m
  vrows = k if mode == "S" else n
  _, s, u, vt, info = run(
      _LETTER[dtype] + routine, [x],
      [(dtype, shape), (real_of(dtype), batch + (k,)),
       (dtype, batch + (m, ucols)), (dtype, batch + (vrows, n)),
       (np.int32, batch)], f"{{mode = {ord(mode)} : ui8}}")
  assert (info == 0).all()
  close(s, np.linalg.svd(x, compute_uv=False), dtype)
  if mode != "N":
    close((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], x, dtype)
    close(ct(u) @ u, np.broadcast_to(np.eye(ucols), batch + (ucols,) * 2),
          dtype)


# --- solvers ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("side,uplo,trans,diag", [
    ("L", "L", "N", "N"), ("L", "U", "T", "N"), ("R", "L", "C", "U"),
    ("R", "U", "N", "N")])
def test_trsm(dtype, side, uplo, trans, diag):
  m, n = 4, 3
  k = m if side == "L" else n
  a = rand(dtype, (2, k, k)) + 4 * np.eye(k, dtype=dtype)
  b = rand(dtype, (2, m, n), seed=1)
  cfg = (f"{{diag = {ord(diag)} : ui8, side = {ord(side)} : ui8, "
         f"trans_x = {ord(trans)} : ui8, uplo = {ord(uplo)} : ui8}}")
  y, = run(f"{_LETTER[dtype]}trsm", [a, b], [(dtype, b.shape)], cfg)
  tri = np.tril(a) if uplo == "L" else np.triu(a)
  if diag == "U":
    tri = tri - tri * np.eye(k) + np.eye(k)
  op = {"N": tri, "T": np.swapaxes(tri, -1, -2), "C": ct(tri)}[trans]
  close(op @ y if side == "L" else y @ op, b, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_gtsv(dtype):
  n = 5
  dl, d, du = (rand(dtype, (2, n), seed=s) for s in (1, 2, 3))
  d = (d + 4).astype(dtype)
  b = rand(dtype, (2, n, 2), seed=4)
  outs = run(f"{_LETTER[dtype]}gtsv", [dl, d, du, b],
             [(dtype, (2, n))] * 3 + [(dtype, b.shape), (np.int32, (2,))])
  x, info = outs[3], outs[4]
  assert (info == 0).all()
  for i in range(2):
    a = (np.diag(d[i]) + np.diag(dl[i][1:], -1) + np.diag(du[i][:-1], 1))
    close(x[i], np.linalg.solve(a, b[i]), dtype)


# --- errors and plumbing ------------------------------------------------------


def test_unsupported_type_is_unimplemented():
  x = np.eye(3, dtype=np.float16)
  module = hlo_parser.parse_and_return_unverified_module(
      "HloModule m\nENTRY e {\n  p0 = f16[3,3] parameter(0)\n  ROOT r = "
      "(f16[3,3], s32[]) custom-call(p0), custom_call_target="
      "\"lapack_spotrf_ffi\", backend_config={uplo = 76 : ui8}\n}")
  with pytest.raises(support.UnimplementedError, match="float16"):
    lapack_handlers.HANDLERS["lapack_spotrf_ffi"](
        module.entry_computation.root_instruction, [x])


def test_every_routine_has_four_types():
  routines = {t[len("lapack_") + 1:-len("_ffi")]
              for t in lapack_handlers.targets() if t.startswith("lapack_")}
  for r in routines:
    real = r.replace("ungqr", "orgqr").replace("unmqr", "ormqr").replace(
        "heevd", "syevd").replace("hetrd", "sytrd")
    for t in "sd":
      assert f"lapack_{t}{real}_ffi" in lapack_handlers.HANDLERS
  assert "lapack_zheevd_ffi" in lapack_handlers.HANDLERS
  assert "lapack_cungqr_ffi" in lapack_handlers.HANDLERS


def test_compiled_and_evaluated_programs_call_the_handlers():
  """The CPU runtime and the evaluator run lapack_*_ffi custom calls."""
  x = spd(np.float64, (2, 4, 4))
  text = ("HloModule m\nENTRY e {\n  p0 = f64[2,4,4] parameter(0)\n"
          "  c = (f64[2,4,4], s32[2]) custom-call(p0), custom_call_target="
          "\"lapack_dpotrf_ffi\", api_version=API_VERSION_TYPED_FFI, "
          "backend_config={uplo = 76 : ui8}\n"
          "  l = f64[2,4,4] get-tuple-element(c), index=0\n"
          "  ROOT n = f64[2,4,4] negate(l)\n}")
  module = hlo_parser.parse_and_return_unverified_module(text)
  exe = cpu_compiler.compile(module)
  got, = exe.execute([x])
  close(np.tril(-np.asarray(got)), np.linalg.cholesky(x), np.float64)
  ev = hlo_evaluator.HloEvaluator(custom_calls=lapack_handlers.HANDLERS)
  got, = ev.evaluate(module, [x])
  close(np.tril(-np.asarray(got)), np.linalg.cholesky(x), np.float64)


# --- jaxlib's tridiagonal_solve_perturbed_ffi ---------------------------------


def _perturbed(dl, d, du, b):
  module = _module("tridiagonal_solve_perturbed_ffi", [dl, d, du, b],
                   [(b.dtype, b.shape)])
  return lapack_handlers.HANDLERS["tridiagonal_solve_perturbed_ffi"](
      module.entry_computation.root_instruction, [dl, d, du, b])


def _tridiagonal(dl, d, du):
  return np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)


@pytest.mark.parametrize("dtype", TYPES)
def test_tridiagonal_solve_perturbed_regular(dtype):
  dl, du = rand(dtype, (2, 6), 1), rand(dtype, (2, 6), 2)
  d = (rand(dtype, (2, 6), 3) + 3).astype(dtype)
  b = rand(dtype, (2, 6, 2), 4)
  x = _perturbed(dl, d, du, b)
  assert x.dtype == np.dtype(dtype)
  for i in range(2):
    close(_tridiagonal(dl[i], d[i], du[i]) @ x[i], b[i], dtype)


def test_tridiagonal_solve_perturbed_pivots_rows():
  """A system that needs row exchanges (its first pivot would be tiny
  relative to the row below)."""
  dl = np.array([0.0, 2.0, -2.0, 3.0], np.float32)
  d = np.array([1.0, 4.0, 1.0, -1.0], np.float32)
  du = np.array([2.0, -1.0, 1.0, 0.0], np.float32)
  b = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
  x = _perturbed(dl, d, du, b)
  np.testing.assert_allclose(x[:, 0], np.linalg.solve(
      _tridiagonal(dl, d, du).astype(np.float64), b[:, 0]), atol=1e-5)


@pytest.mark.parametrize("d,rhs", [([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
                                   ([1.0, 3.0], [1.0, 4.0])])
def test_tridiagonal_solve_perturbed_singular_is_large_and_finite(d, rhs):
  """Inconsistent singular systems (a zero matrix; [[1, 3], [1, 3]] x =
  [1, 4]) get perturbed pivots: finite values of magnitude about
  1 / (eps * max|U|)."""
  n = len(d)
  d = np.array(d, np.float32)
  dl = np.zeros(n, np.float32)
  du = np.zeros(n, np.float32)
  if n == 2:
    dl[1], du[0] = 1.0, 3.0
  x = _perturbed(dl, d, du, np.array(rhs, np.float32)[:, None])
  assert np.isfinite(x).all() and (np.abs(x) > 1e6).all()
