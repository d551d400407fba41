"""Tests for blas.py: finding numpy's OpenBLAS, planning strided gemms, and
calling ?gemm from a JIT'ed kernel."""

import ctypes
import itertools

from llvmlite import ir
import numpy as np
import pytest

from xla import xla_data
from xla.service.cpu import blas
from xla.service.cpu import contraction_ir as cir
from xla.service.cpu import jit as cpu_jit
from xla.service.cpu import kernel_api

P = xla_data.PrimitiveType
LIB = blas.library()
needs_blas = pytest.mark.skipif(LIB is None, reason="no BLAS library found")


@needs_blas
def test_library_exports_all_gemms():
  assert set(LIB.gemm) == set("sdcz")
  assert LIB.int_bits in (32, 64)
  for name, address in LIB.gemm.values():
    assert "gemm" in name and address
  # The names are what the library exports.
  lib = ctypes.CDLL(LIB.path)
  for name, address in LIB.gemm.values():
    assert ctypes.cast(getattr(lib, name), ctypes.c_void_p).value == address


def test_disabled_hides_library():
  with blas.disabled():
    assert blas.library() is None
    assert not blas.set_num_threads(2)
  assert blas.library() is LIB


@needs_blas
def test_thread_count_round_trip():
  if LIB.set_threads is None:
    pytest.skip("library has no thread control")
  old = blas.get_num_threads()
  try:
    assert blas.set_num_threads(1)
    assert blas.get_num_threads() == 1
  finally:
    blas.set_num_threads(old)
  assert blas.get_num_threads() == old


# --- planning -------------------------------------------------------------


def emulate(plan: blas.GemmPlan, abuf, bbuf, cbuf):
  """What a row-major cblas gemm (beta 0) writes into cbuf, given the
  operand buffers in our (unswapped) roles."""
  if plan.swapped:
    abuf, bbuf = bbuf, abuf
  m, n, k = plan.m, plan.n, plan.k

  def op(buf, rows, cols, trans, ld):
    if trans == blas.NO_TRANS:
      return np.array([[buf[r * ld + c] for c in range(cols)]
                       for r in range(rows)])
    return np.array([[buf[c * ld + r] for c in range(cols)]
                     for r in range(rows)])

  a = op(abuf, m, k, plan.trans_a, plan.lda)
  b = op(bbuf, k, n, plan.trans_b, plan.ldb)
  c = a @ b
  out = cbuf.copy()
  for i in range(m):
    for j in range(n):
      out[i * plan.ldc + j] = c[i, j]
  return out


def strided(buf, rows, cols, s):
  return np.array([[buf[r * s[0] + c * s[1]] for c in range(cols)]
                   for r in range(rows)])


def layouts(rows, cols):
  """(strides, buffer size) of row-/column-major storage, tight or padded."""
  out = []
  for pad in (0, 3):
    out.append(((cols + pad, 1), rows * (cols + pad)))
    out.append(((1, rows + pad), cols * (rows + pad)))
  return out



@needs_blas
def test_pin_single_thread_nests_and_restores():
  if LIB.set_threads is None:
    pytest.skip("library has no thread control")
  old = blas.get_num_threads()
  try:
    blas.set_num_threads(2)
    with blas.single_threaded():
      assert blas.get_num_threads() == 1
      blas.pin_single_thread()  # nested (e.g. a concurrent execution)
      assert blas.get_num_threads() == 1
      blas.unpin()
      assert blas.get_num_threads() == 1
    assert blas.get_num_threads() == 2
    blas.unpin()  # unbalanced: ignored
    assert blas.get_num_threads() == 2
  finally:
    blas.set_num_threads(old)


def test_uses_blas_names():
  assert blas.uses_blas(["memcpy", "xla_cpu_cblas_sgemm_i64"])
  assert blas.uses_blas(["__xla_cpu_lib_gemm_parts_s_i64"])
  assert not blas.uses_blas(["memcpy", "malloc"])


@pytest.mark.parametrize("m,n,k", [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1),
                                   (1, 1, 6), (4, 3, 1)])
def test_plan_gemm_matches_definition(m, n, k):
  rng = np.random.default_rng(0)
  for (sa, na), (sb, nb), (sc, nc) in itertools.product(
      layouts(m, k), layouts(k, n), layouts(m, n)):
    plan = blas.plan_gemm(m, n, k, sa, sb, sc)
    assert plan is not None, (sa, sb, sc)
    abuf, bbuf = rng.standard_normal(na), rng.standard_normal(nb)
    cbuf = np.full(nc, np.nan)
    got = emulate(plan, abuf, bbuf, cbuf)
    want = strided(abuf, m, k, sa) @ strided(bbuf, k, n, sb)
    np.testing.assert_allclose(strided(got, m, n, sc), want)


def test_plan_gemm_refuses_unit_free_layouts():
  # A with no unit stride (e.g. a batch dim innermost).
  assert blas.plan_gemm(4, 5, 6, (18, 3), (5, 1), (5, 1)) is None
  # C with no unit stride.
  assert blas.plan_gemm(4, 5, 6, (6, 1), (5, 1), (10, 2)) is None
  # Overlapping rows (ld smaller than the row length) are not a matrix.
  assert blas.plan_gemm(4, 5, 6, (2, 1), (5, 1), (5, 1)) is None
  assert blas.plan_gemm(0, 5, 6, (6, 1), (5, 1), (5, 1)) is None


def test_plan_prefers_row_major_c_and_swaps_for_column_major():
  p = blas.plan_gemm(4, 5, 6, (6, 1), (5, 1), (5, 1))
  assert not p.swapped and (p.trans_a, p.trans_b) == (blas.NO_TRANS,
                                                      blas.NO_TRANS)
  assert (p.lda, p.ldb, p.ldc) == (6, 5, 5)
  p = blas.plan_gemm(4, 5, 6, (6, 1), (5, 1), (1, 4))
  assert p.swapped and (p.m, p.n) == (5, 4)


# --- calling from a kernel ------------------------------------------------


def _gemm_kernel(et, plan, beta_one):
  module = ir.Module(name="blas_test")
  cpu_jit.configure_module(module)
  ctx = kernel_api.KernelContext(module)
  blas.ensure_symbols(LIB)
  fn, b = ctx.new_kernel("gemm")
  a, bb, c = cir.load_args(b, fn, (et, et, et))
  blas.emit_gemm_call(b, LIB, et, plan, a, bb, c, beta_one)
  b.ret_void()
  engine = cpu_jit.CpuJit()
  engine.compile(module)
  cfn = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                         ctypes.c_int64)(engine.address(fn.name))

  def run(*arrays):
    ptrs = (ctypes.c_void_p * 3)(*[x.ctypes.data for x in arrays])
    cfn(ptrs, 0, 1)

  run.engine = engine
  return run


@needs_blas
@pytest.mark.parametrize("et,dtype", [(P.F32, np.float32), (P.F64, np.float64),
                                      (P.C64, np.complex64),
                                      (P.C128, np.complex128)])
def test_kernel_calls_gemm_on_submatrices(et, dtype):
  rng = np.random.default_rng(1)

  def rand(*shape):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
      x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)

  # A is the left 5 columns of a 4x7 array (lda 7); B^T stored (trans);
  # C the top-left block of a 4x6 array (ldc 6), accumulated into.
  a = rand(4, 7)
  bt = rand(3, 5)
  c = rand(4, 6)
  c0 = c.copy()
  plan = blas.plan_gemm(4, 3, 5, (7, 1), (1, 5), (6, 1))
  assert plan.trans_b == blas.TRANS
  _gemm_kernel(et, plan, True)(a, bt, c)
  want = c0.copy()
  want[:, :3] += a[:, :5] @ bt.T
  tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
  np.testing.assert_allclose(c, want, rtol=tol, atol=tol)
  # beta = 0 overwrites (even NaN garbage).
  c[:] = np.nan
  _gemm_kernel(et, plan, False)(a, bt, c)
  np.testing.assert_allclose(c[:, :3], a[:, :5] @ bt.T, rtol=tol, atol=tol)
  assert np.isnan(c[:, 3:]).all()


@needs_blas
def test_register_symbols_binds_stable_names():
  from llvmlite import binding  # pylint: disable=g-import-not-at-top
  assert blas.register_symbols()
  for letter, (_, address) in LIB.gemm.items():
    name = LIB.symbol(letter)
    assert name.endswith(f"_i{LIB.int_bits}")
    assert binding.address_of_symbol(name) == address
