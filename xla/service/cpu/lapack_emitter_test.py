"""Native LAPACK kernels (lapack_emitter) against the Python handlers.

Both call the same LAPACK routine on the same column-major matrices, so a
compiled program must give the handler's results bit for bit, for every
routine, element type and a batch the runtime may split across workers;
and it must run as a kernel, not as a custom-call thunk. Calls the
emitter leaves to the handler (matrices above the single-thread size,
modes the handler rejects) still compile and run there."""

import numpy as np
import pytest

from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler
from xla.service.cpu import lapack
from xla.service.cpu import lapack_emitter
from xla.service.cpu import lapack_handlers
from xla.service.cpu import lapack_testing as lt

pytestmark = pytest.mark.skipif(not lapack.available(),
                                reason="no LAPACK library")

_LETTER = lt.LETTER
TYPES = lt.TYPES
_text = lt.custom_call_text
_rand = lt.rand
_real = lt.real_of
_hermitian_pd = lt.spd


def check(routine, dtype, operands, results, config="{}", native=True):
  """Compiles the custom call, runs it, and compares with the handler."""
  target = f"lapack_{_LETTER[dtype]}{routine}_ffi"
  text = _text(target, operands, results, config)
  exe = cpu_compiler.compile(
      hlo_parser.parse_and_return_unverified_module(text))
  kinds = [t["kind"] for t in exe.plan["thunks"]]
  assert kinds == (["kernel"] if native else ["custom_call"]), kinds
  got = exe.execute([np.array(x) for x in operands])
  module = hlo_parser.parse_and_return_unverified_module(text)
  want = lapack_handlers.HANDLERS[target](
      module.entry_computation.root_instruction, list(operands))
  want = list(want) if isinstance(want, tuple) else [want]
  if len(results) == 1 and len(got) != 1:
    got = [got]
  assert len(got) == len(want)
  for g, w, (dt, dims) in zip(got, want, results):
    g = np.asarray(g)
    assert g.shape == tuple(dims) and g.dtype == np.dtype(dt)
    np.testing.assert_array_equal(g, np.asarray(w).astype(dt))
  return got


BATCH = (5,)  # odd, so a split across two workers is uneven


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(6, 6), (7, 4), (3, 5)])
def test_getrf(dtype, shape):
  m, n = shape
  x = _rand(dtype, BATCH + shape)
  _, piv, info = check("getrf", dtype, [x],
                       [(dtype, x.shape), (np.int32, BATCH + (min(m, n),)),
                        (np.int32, BATCH)])
  assert (info == 0).all() and (piv >= 1).all()


@pytest.mark.parametrize("dtype", TYPES)
def test_potrf_including_a_failure(dtype):
  x = _hermitian_pd(dtype, BATCH + (6, 6))
  x[2] = -x[2]  # not positive definite: info > 0
  _, info = check("potrf", dtype, [x], [(dtype, x.shape), (np.int32, BATCH)],
                  "{uplo = 76 : ui8}")
  assert info[2] > 0 and info[0] == 0


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("side,uplo,trans,diag", [
    ("L", "L", "N", "N"), ("L", "U", "T", "U"), ("R", "L", "C", "N"),
    ("R", "U", "N", "U")])
def test_trsm(dtype, side, uplo, trans, diag):
  m, n = 5, 3
  k = m if side == "L" else n
  a = _rand(dtype, BATCH + (k, k)) + 4 * np.eye(k, dtype=dtype)
  b = _rand(dtype, BATCH + (m, n), seed=1)
  cfg = (f"{{diag = {ord(diag)} : ui8, side = {ord(side)} : ui8, "
         f"trans_x = {ord(trans)} : ui8, uplo = {ord(uplo)} : ui8}}")
  check("trsm", dtype, [a, b], [(dtype, b.shape)], cfg)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6)])
def test_geqrf_then_orgqr(dtype, shape):
  m, n = shape
  k = min(m, n)
  x = _rand(dtype, BATCH + shape)
  qr, tau = check("geqrf", dtype, [x],
                  [(dtype, x.shape), (dtype, BATCH + (k,))])
  q_routine = "ungqr" if dtype in (np.complex64, np.complex128) else "orgqr"
  cols = min(m, n)
  q_in = np.ascontiguousarray(np.asarray(qr)[..., :, :cols])
  check(q_routine, dtype, [q_in, np.asarray(tau)],
        [(dtype, q_in.shape)])


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("mode", ["V", "N"])
def test_syevd_heevd(dtype, mode):
  routine = "heevd" if dtype in (np.complex64, np.complex128) else "syevd"
  x = _hermitian_pd(dtype, BATCH + (6, 6))
  check(routine, dtype, [x],
        [(dtype, x.shape), (_real(dtype), BATCH + (6,)), (np.int32, BATCH)],
        f"{{mode = {ord(mode)} : ui8, uplo = 76 : ui8}}")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("routine", ["gesdd", "gesvd"])
@pytest.mark.parametrize("mode,shape", [("A", (6, 4)), ("S", (4, 6)),
                                        ("N", (5, 5))])
def test_svd(dtype, routine, mode, shape):
  m, n = shape
  k = min(m, n)
  ucols = k if mode == "S" else m
  vrows = k if mode == "S" else n
  if mode == "N":
    ucols = vrows = 0 if routine == "gesvd" else 1
  x = _rand(dtype, BATCH + shape)
  u_dims = BATCH + ((m, ucols) if ucols else (0, 0))
  vt_dims = BATCH + ((vrows, n) if vrows else (0, 0))
  check(routine, dtype, [x],
        [(dtype, x.shape), (_real(dtype), BATCH + (k,)), (dtype, u_dims),
         (dtype, vt_dims), (np.int32, BATCH)],
        f"{{mode = {ord(mode)} : ui8}}")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("mode", ["V", "N"])
def test_gees(dtype, mode):
  x = _rand(dtype, BATCH + (6, 6))
  values = ([(dtype, BATCH + (6,))] if dtype in (np.complex64, np.complex128)
            else [(dtype, BATCH + (6,))] * 2)
  check("gees", dtype, [x],
        [(dtype, x.shape), (dtype, x.shape)] + values +
        [(np.int32, BATCH), (np.int32, BATCH)],
        f"{{mode = {ord(mode)} : ui8, sort = 78 : ui8}}")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("left,right", [("N", "V"), ("V", "N"), ("N", "N")])
def test_geev_with_a_non_finite_matrix(dtype, left, right):
  """Real input: conjugate pairs unpacked into complex eigenvectors; a
  matrix with an infinity gets zeros and INFO -4."""
  n = 6
  x = _rand(dtype, BATCH + (n, n))
  x[3, 1, 2] = np.inf
  cplx = {np.float32: np.complex64, np.float64: np.complex128}.get(dtype,
                                                                   dtype)
  values = ([(dtype, BATCH + (n,))] if dtype in (np.complex64, np.complex128)
            else [(dtype, BATCH + (n,))] * 2)
  got = check("geev", dtype, [x],
              values + [(cplx, BATCH + (n, n))] * 2 + [(np.int32, BATCH)],
              f"{{compute_left = {ord(left)} : ui8, "
              f"compute_right = {ord(right)} : ui8}}")
  info = got[-1]
  assert info[3] == -4 and (np.delete(info, 3) == 0).all()
  if dtype in (np.float32, np.float64) and right == "V":
    assert (got[1] != 0).any()  # some complex pairs were unpacked


@pytest.mark.parametrize("dtype", TYPES)
def test_gehrd_and_sytrd(dtype):
  x = _rand(dtype, BATCH + (6, 6))
  check("gehrd", dtype, [x],
        [(dtype, x.shape), (dtype, BATCH + (5,)), (np.int32, BATCH)],
        "{high = 6 : i32, low = 1 : i32}")
  routine = "hetrd" if dtype in (np.complex64, np.complex128) else "sytrd"
  h = _hermitian_pd(dtype, BATCH + (6, 6))
  check(routine, dtype, [h],
        [(dtype, h.shape), (_real(dtype), BATCH + (6,)),
         (_real(dtype), BATCH + (5,)), (dtype, BATCH + (5,)),
         (np.int32, BATCH)], "{uplo = 76 : ui8}")


def test_large_matrices_and_sorting_stay_with_the_handler():
  """Above the single-thread size LAPACK runs threaded from the handler;
  sorted Schur forms are the handler's UnimplementedError."""
  n = 257
  x = _rand(np.float64, (1, n, n))
  check("getrf", np.float64, [x],
        [(np.float64, x.shape), (np.int32, (1, n)), (np.int32, (1,))],
        native=False)
  y = _rand(np.float64, (2, 4, 4))
  text = _text("lapack_dgees_ffi", [y],
               [(np.float64, y.shape)] * 2 + [(np.float64, (2, 4))] * 2 +
               [(np.int32, (2,))] * 2, "{mode = 86 : ui8, sort = 83 : ui8}")
  exe = cpu_compiler.compile(
      hlo_parser.parse_and_return_unverified_module(text))
  assert [t["kind"] for t in exe.plan["thunks"]] == ["custom_call"]


def test_every_native_target_has_a_handler():
  assert set(lapack_emitter.targets()) <= set(lapack_handlers.HANDLERS)
